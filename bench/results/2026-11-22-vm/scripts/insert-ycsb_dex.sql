\set cnt :cnt + 1
\set j :base + :cnt * :nc + :client_id
\set key 4 * (1000000 * (:j / 1000000) + permute(:j % 1000000, 1000000, 7)) + 2
INSERT INTO ycsb_dex VALUES (:key, repeat('i', 100));
