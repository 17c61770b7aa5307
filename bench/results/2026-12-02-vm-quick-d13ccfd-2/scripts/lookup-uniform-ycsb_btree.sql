\set r random(0, 199999)
\set lo 4 * :r
SELECT v FROM ycsb_btree WHERE k BETWEEN :lo AND :lo + 1;
