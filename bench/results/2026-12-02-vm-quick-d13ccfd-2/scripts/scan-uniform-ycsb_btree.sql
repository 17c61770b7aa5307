\set r random(0, 199999)
\set lo 4 * :r
SELECT k, v FROM ycsb_btree WHERE k >= :lo ORDER BY k LIMIT 100;
