\set r permute(random_zipfian(0, 999999, 1.01), 1000000, 5432)
\set lo 4 * :r
SELECT v FROM ycsb_btree WHERE k BETWEEN :lo AND :lo + 1;
