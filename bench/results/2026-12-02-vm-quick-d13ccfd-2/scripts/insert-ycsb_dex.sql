\set cnt :cnt + 1
\set j :base + :cnt * :nc + :client_id
\set key 4 * (200000 * (:j / 200000) + permute(:j % 200000, 200000, 7)) + 2
INSERT INTO ycsb_dex VALUES (:key, repeat('i', 100));
