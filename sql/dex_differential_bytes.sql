-- Randomized differential test for byte-string keys (issue 15): a table with
-- dex indexes on text (ICU), uuid, float8, numeric and a three-column key
-- (int, text DESC, numeric), and a copy with the same btree indexes, get the
-- same data, the same random DML and VACUUM; every random query must return
-- the same rows through both. Deterministic via setseed().
CREATE EXTENSION IF NOT EXISTS dex;
SELECT setseed(0.3131);

CREATE TABLE dfb_dex (id int, t text COLLATE "und-x-icu", u uuid, f float8, n numeric, a int, b text COLLATE "C", c numeric)
  WITH (autovacuum_enabled = off);
CREATE FUNCTION dfb_row(i int) RETURNS dfb_dex LANGUAGE sql AS $$
  SELECT i, CASE WHEN random() < 0.03 THEN NULL ELSE substr('aAäÄbBzZ', 1 + (random() * 7)::int, 1) || substr(md5(random()::text), 1, (random() * 4)::int) END,
         CASE WHEN random() < 0.03 THEN NULL ELSE ('0000000' || (random() * 9)::int || '-0000-0000-0000-' || lpad(((random() * 999)::int)::text, 12, '0'))::uuid END,
         CASE WHEN random() < 0.03 THEN NULL WHEN random() < 0.02 THEN 'NaN' ELSE round((random() * 200 - 100)::numeric, 1)::float8 END,
         CASE WHEN random() < 0.03 THEN NULL ELSE round((random() * 200 - 100)::numeric, (random() * 3)::int) END,
         CASE WHEN random() < 0.03 THEN NULL ELSE (random() * 30)::int END,
         CASE WHEN random() < 0.03 THEN NULL ELSE substr(md5(random()::text), 1, 1 + (random() * 2)::int) END,
         CASE WHEN random() < 0.03 THEN NULL ELSE round((random() * 50)::numeric, 1) END $$;
INSERT INTO dfb_dex SELECT (dfb_row(g)).* FROM generate_series(1, 8000) g;
CREATE TABLE dfb_bt WITH (autovacuum_enabled = off) AS SELECT * FROM dfb_dex;
CREATE INDEX ON dfb_dex USING dex (t);
CREATE INDEX ON dfb_dex USING dex (u) INCLUDE (n, b);   -- index-only scans
CREATE INDEX ON dfb_dex USING dex (f);
CREATE INDEX ON dfb_dex USING dex (n);
CREATE INDEX dfb_dex_abc ON dfb_dex USING dex (a, b DESC, c);
CREATE INDEX ON dfb_bt (t);
CREATE INDEX ON dfb_bt (u) INCLUDE (n, b);
CREATE INDEX ON dfb_bt (f);
CREATE INDEX ON dfb_bt (n);
CREATE INDEX ON dfb_bt (a, b DESC, c);

-- Random DML applied identically to both tables.
CREATE FUNCTION dfb_dml(rounds int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE x int; r float8; base int := (SELECT max(id) FROM dfb_dex);
BEGIN
  FOR i IN 1..rounds LOOP
    r := random(); x := (random() * 30)::int;
    IF r < 0.4 THEN
      INSERT INTO dfb_dex SELECT (dfb_row(base + i * 100 + g)).* FROM generate_series(1, 1 + (random() * 20)::int) g;
      INSERT INTO dfb_bt SELECT * FROM dfb_dex WHERE id > base + i * 100 AND id <= base + i * 100 + 99;
    ELSIF r < 0.7 THEN
      DELETE FROM dfb_dex WHERE a = x AND b < '8'; DELETE FROM dfb_bt WHERE a = x AND b < '8';
    ELSIF r < 0.9 THEN
      UPDATE dfb_dex SET t = upper(t), n = n + 1, b = reverse(b) WHERE a = x;
      UPDATE dfb_bt SET t = upper(t), n = n + 1, b = reverse(b) WHERE a = x;
    ELSE
      DELETE FROM dfb_dex WHERE t IS NULL OR u IS NULL; DELETE FROM dfb_bt WHERE t IS NULL OR u IS NULL;
    END IF;
  END LOOP;
END $$;

-- n random queries through both tables (each forced onto its indexes by the
-- caller's planner settings); returns how many disagreed.
CREATE FUNCTION dfb_queries(n int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE q text; rd text; rb text; bad int := 0; kind int; s text; x int; v numeric;
BEGIN
  FOR i IN 1..n LOOP
    kind := (random() * 10)::int; x := (random() * 30)::int; v := round((random() * 200 - 100)::numeric, 1);
    s := substr('aAäÄbBzZ', 1 + (random() * 7)::int, 1) || substr(md5(random()::text), 1, (random() * 2)::int);
    q := CASE kind
      WHEN 0 THEN format('SELECT id FROM %%s WHERE t = %L', s)
      WHEN 1 THEN format('SELECT id FROM %%s WHERE t >= %L AND t < %L', s, s || 'z')
      WHEN 2 THEN format('SELECT id FROM %%s WHERE u > %L', '00000004-0000-0000-0000-000000000500')
      WHEN 3 THEN format('SELECT id FROM %%s WHERE f BETWEEN %s AND %s', v, v + 20)
      WHEN 4 THEN format('SELECT id FROM %%s WHERE n = %s OR n = %s', v, round(v))
      WHEN 5 THEN format('SELECT id FROM %%s WHERE a = %s AND b > %L', x, left(s, 1))
      WHEN 6 THEN format('SELECT id FROM %%s WHERE a = %s AND b = %L AND c < %s', x, left(md5(x::text), 1), v + 60)
      WHEN 7 THEN format('SELECT id FROM %%s WHERE a BETWEEN %s AND %s AND c IS NULL', x, x + 3)
      WHEN 8 THEN format('SELECT t FROM %%s WHERE t > %L ORDER BY t LIMIT 25', s)
      WHEN 9 THEN format('SELECT u, n, b FROM %%s WHERE u < %L', '0000000' || (x % 9) || '-0000-0000-0000-000000000400')
      ELSE format('SELECT a, b, c FROM %%s WHERE a >= %s ORDER BY a, b DESC, c LIMIT 25', x)
    END;
    IF kind IN (8, 10) THEN
      EXECUTE format('SELECT string_agg(x::text, '','') FROM (' || q || ') x', 'dfb_dex') INTO rd;
      EXECUTE format('SELECT string_agg(x::text, '','') FROM (' || q || ') x', 'dfb_bt') INTO rb;
    ELSE
      EXECUTE format('SELECT string_agg(x::text, '','' ORDER BY x::text) FROM (' || q || ') x', 'dfb_dex') INTO rd;
      EXECUTE format('SELECT string_agg(x::text, '','' ORDER BY x::text) FROM (' || q || ') x', 'dfb_bt') INTO rb;
    END IF;
    IF rd IS DISTINCT FROM rb THEN
      bad := bad + 1;
      RAISE NOTICE 'differs: %', format(q, 'T');
    END IF;
  END LOOP;
  RETURN bad;
END $$;

SET enable_seqscan = off;
SELECT dfb_queries(150) AS bad_before_dml;
SELECT dfb_dml(60);
SELECT dfb_queries(150) AS bad_after_dml;
VACUUM dfb_dex; VACUUM dfb_bt;
SELECT dfb_queries(150) AS bad_after_vacuum;
SET enable_indexscan = off;
SELECT dfb_queries(100) AS bad_bitmap;
RESET enable_indexscan; RESET enable_seqscan;
SELECT (SELECT count(*) FROM dfb_dex) = (SELECT count(*) FROM dfb_bt) AS same_rows,
       (SELECT entries FROM dex_check('dfb_dex_abc')) = (SELECT count(*) FROM dfb_dex) AS tree_ok;
