-- Randomized differential test: a dex-indexed table and a btree-indexed copy
-- get the same data, the same random DML and VACUUM; every random query must
-- return the same rows through both indexes. Deterministic via setseed().
CREATE EXTENSION IF NOT EXISTS dex;
SELECT setseed(0.4242);

CREATE TABLE diff_dex (k int8, v int4);
CREATE TABLE diff_bt  (k int8, v int4);
INSERT INTO diff_dex SELECT CASE WHEN random() < 0.02 THEN NULL ELSE (random() * 20000)::int8 - 10000 END, g
  FROM generate_series(1, 30000) g;
INSERT INTO diff_bt SELECT * FROM diff_dex;
CREATE INDEX diff_dex_k ON diff_dex USING dex (k);
CREATE INDEX diff_bt_k ON diff_bt (k);

-- Random DML applied identically to both tables.
CREATE FUNCTION diff_dml(n int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE a int8; w int8; r float8;
BEGIN
  FOR i IN 1..n LOOP
    r := random(); a := (random() * 24000)::int8 - 12000; w := (random() * 300)::int8;
    IF r < 0.45 THEN
      INSERT INTO diff_dex SELECT CASE WHEN random() < 0.02 THEN NULL ELSE a + (random() * w)::int8 END, -i FROM generate_series(1, 1 + (random() * 40)::int);
      INSERT INTO diff_bt SELECT * FROM diff_dex WHERE v = -i AND NOT EXISTS (SELECT 1 FROM diff_bt b WHERE b.v = -i);
      UPDATE diff_dex SET v = 1000000 + i WHERE v = -i; UPDATE diff_bt SET v = 1000000 + i WHERE v = -i;
    ELSIF r < 0.75 THEN
      DELETE FROM diff_dex WHERE k BETWEEN a AND a + w; DELETE FROM diff_bt WHERE k BETWEEN a AND a + w;
    ELSIF r < 0.9 THEN
      UPDATE diff_dex SET k = k + 7 WHERE k BETWEEN a AND a + w / 4; UPDATE diff_bt SET k = k + 7 WHERE k BETWEEN a AND a + w / 4;
    ELSE
      DELETE FROM diff_dex WHERE k IS NULL AND v % 3 = 0; DELETE FROM diff_bt WHERE k IS NULL AND v % 3 = 0;
    END IF;
  END LOOP;
END $$;

-- Runs n random queries against both tables (each forced onto its index by the
-- planner settings of the caller) and returns how many disagreed.
CREATE FUNCTION diff_queries(n int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE a int8; b int8; q text; qd text; qb text; ra text; rb text; bad int := 0; kind int;
BEGIN
  FOR i IN 1..n LOOP
    a := (random() * 24000)::int8 - 12000; b := a + (random() * 500)::int8; kind := (random() * 11)::int;
    q := CASE kind
      WHEN 0 THEN format('SELECT k, v FROM %%s WHERE k = %s', a)
      WHEN 1 THEN format('SELECT k, v FROM %%s WHERE k > %s AND k <= %s', a, b)
      WHEN 2 THEN format('SELECT k, v FROM %%s WHERE k >= %s AND k < %s', a, b)
      WHEN 3 THEN format('SELECT k, v FROM %%s WHERE k BETWEEN %s AND %s AND k <> %s', a, b, a + 1)
      WHEN 4 THEN format('SELECT k, v FROM %%s WHERE k = ANY (ARRAY[%s, %s, %s, NULL])', a, b, a + 3)
      WHEN 5 THEN format('SELECT k, v FROM %%s WHERE k IS NULL AND v < %s', abs(a))
      WHEN 6 THEN format('SELECT k, v FROM %%s WHERE k < %s ORDER BY k, v LIMIT 20', a)
      WHEN 7 THEN format('SELECT k FROM %%s WHERE k IS NOT NULL ORDER BY k DESC LIMIT %s', 1 + abs(a) % 50)
      WHEN 8 THEN format('SELECT k FROM %%s ORDER BY k LIMIT 30 OFFSET %s', abs(a) % 100)
      WHEN 9 THEN format('SELECT count(*) FROM %%s WHERE k > %s', a)
      ELSE format('SELECT k FROM %%s WHERE k > %s AND k < %s AND k > %s', a, b, a + 10)
    END;
    -- unordered queries are compared as sorted multisets, ordered ones as is
    IF kind IN (7, 8) THEN
      qd := format('SELECT string_agg(x::text, '','') FROM (' || q || ') x', 'diff_dex');
      qb := format('SELECT string_agg(x::text, '','') FROM (' || q || ') x', 'diff_bt');
    ELSE
      qd := format('SELECT string_agg(x::text, '','' ORDER BY x::text) FROM (' || q || ') x', 'diff_dex');
      qb := format('SELECT string_agg(x::text, '','' ORDER BY x::text) FROM (' || q || ') x', 'diff_bt');
    END IF;
    EXECUTE qd INTO ra; EXECUTE qb INTO rb;
    IF ra IS DISTINCT FROM rb THEN
      bad := bad + 1;
      RAISE NOTICE 'mismatch: %', format(q, 'T');
    END IF;
  END LOOP;
  RETURN bad;
END $$;

SET enable_seqscan = off;
-- the dex table must really be read through its index
EXPLAIN (COSTS OFF) SELECT k, v FROM diff_dex WHERE k > 5 AND k <= 9;
EXPLAIN (COSTS OFF) SELECT k FROM diff_dex ORDER BY k DESC LIMIT 5;

SELECT diff_queries(150) AS mismatches_initial;
SELECT diff_dml(150);
SELECT diff_queries(150) AS mismatches_after_dml;
VACUUM diff_dex; VACUUM diff_bt;
SELECT diff_queries(150) AS mismatches_after_vacuum;
SELECT diff_dml(300);
SET enable_indexscan = off;  -- bitmap scans now
SELECT diff_queries(150) AS mismatches_bitmap;
RESET enable_indexscan;
DELETE FROM diff_dex WHERE k < 5000; DELETE FROM diff_bt WHERE k < 5000;
VACUUM diff_dex; VACUUM diff_bt;
SELECT diff_queries(150) AS mismatches_after_mass_delete;
SELECT entries = (SELECT count(*) FROM diff_bt) AS entries_match FROM dex_check('diff_dex_k');
RESET enable_seqscan;
DROP TABLE diff_dex, diff_bt;
DROP FUNCTION diff_dml(int), diff_queries(int);
