\set r random(0, 199999)
\set lo 4 * :r
SELECT k, v FROM ycsb_dex WHERE k >= :lo ORDER BY k LIMIT 100;
