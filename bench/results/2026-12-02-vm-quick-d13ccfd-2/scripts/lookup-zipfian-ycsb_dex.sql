\set r permute(random_zipfian(0, 199999, 1.01), 200000, 5432)
\set lo 4 * :r
SELECT v FROM ycsb_dex WHERE k BETWEEN :lo AND :lo + 1;
