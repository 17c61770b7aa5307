\set r permute(random_zipfian(0, 199999, 1.01), 200000, 5432)
\set lo 4 * :r
\set c random(0, 25)
UPDATE ycsb_dex SET k = k # 1, v = repeat(chr(97 + :c), 100) WHERE k BETWEEN :lo AND :lo + 1;
