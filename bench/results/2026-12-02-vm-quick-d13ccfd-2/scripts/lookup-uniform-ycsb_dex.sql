\set r random(0, 199999)
\set lo 4 * :r
SELECT v FROM ycsb_dex WHERE k BETWEEN :lo AND :lo + 1;
