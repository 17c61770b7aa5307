-- "= ANY(array)" on byte-string indexes (extension/dexscanranges.c): the
-- array keys become sorted, disjoint entry ranges (one per combination of
-- elements, merged) instead of one range rechecked row by row. Every answer
-- through an index scan, a bitmap scan and ordered scans both ways is
-- compared with a sequential scan (any_check: 'ok' and the row count, or
-- what differed); entries_read counts the entries an index scan read
-- (returned rows + rows the recheck removed). Deterministic via setseed().
CREATE EXTENSION IF NOT EXISTS dex;
SELECT setseed(0.42);

-- pred over tbl through idx: ids by index scan and by bitmap scan; with
-- ord / rev (the index's order, forwards and backwards): the first 200
-- rows' sel in that order, without a Sort. Each against a seqscan.
CREATE FUNCTION any_check(tbl text, idx text, pred text, ord text DEFAULT NULL,
                          rev text DEFAULT NULL, sel text DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE m text; q text; plan text; line text; got text; want text; n bigint; res text := '';
BEGIN
  FOREACH m IN ARRAY ARRAY['index', 'bitmap', 'asc', 'desc'] LOOP
    CONTINUE WHEN m IN ('asc', 'desc') AND ord IS NULL;
    IF m IN ('asc', 'desc') THEN
      q := format('SELECT string_agg(o, '' | '') FROM (SELECT (ROW(%s))::text AS o FROM %s WHERE %s ORDER BY %s LIMIT 200) s',
                  sel, tbl, pred, CASE WHEN m = 'asc' THEN ord ELSE rev END);
    ELSE
      q := format('SELECT string_agg(id::text, '' '' ORDER BY id) FROM %s WHERE %s', tbl, pred);
    END IF;
    PERFORM set_config('enable_seqscan', 'on', true);
    PERFORM set_config('enable_indexscan', 'off', true);
    PERFORM set_config('enable_indexonlyscan', 'off', true);
    PERFORM set_config('enable_bitmapscan', 'off', true);
    PERFORM set_config('enable_sort', 'on', true);
    EXECUTE q INTO want;
    PERFORM set_config('enable_seqscan', 'off', true);
    PERFORM set_config('enable_indexscan', CASE WHEN m = 'bitmap' THEN 'off' ELSE 'on' END, true);
    PERFORM set_config('enable_bitmapscan', CASE WHEN m = 'bitmap' THEN 'on' ELSE 'off' END, true);
    PERFORM set_config('enable_sort', CASE WHEN m IN ('asc', 'desc') THEN 'off' ELSE 'on' END, true);
    plan := '';
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP plan := plan || line || E'\n'; END LOOP;
    IF position(CASE WHEN m = 'bitmap' THEN 'Bitmap Index Scan on ' ELSE 'Index Scan ' END IN plan) = 0
       OR position(idx IN plan) = 0 OR (m IN ('asc', 'desc') AND position('Sort' IN plan) > 0) THEN
      res := res || format(' [%s: plan does not scan %s (in order)]', m, idx);
    END IF;
    EXECUTE q INTO got;
    IF got IS DISTINCT FROM want THEN
      res := res || format(' [%s mismatch: dex %s seq %s]', m, left(got, 200), left(want, 200));
    END IF;
  END LOOP;
  PERFORM set_config('enable_seqscan', 'on', true);
  PERFORM set_config('enable_indexscan', 'on', true);
  PERFORM set_config('enable_indexonlyscan', 'on', true);
  PERFORM set_config('enable_bitmapscan', 'on', true);
  PERFORM set_config('enable_sort', 'on', true);
  EXECUTE format('SELECT count(*) FROM %s WHERE %s', tbl, pred) INTO n;
  RETURN CASE WHEN res = '' THEN format('ok %s rows', n) ELSE 'FAIL' || res END;
END $$;

-- Entries an index scan of idx read for "SELECT * FROM tbl WHERE pred":
-- the rows it returned plus the rows the recheck removed (EXPLAIN ANALYZE).
CREATE FUNCTION entries_read(tbl text, idx text, pred text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE line text; total bigint := 0; seen bool := false;
BEGIN
  PERFORM set_config('enable_seqscan', 'off', true);
  PERFORM set_config('enable_bitmapscan', 'off', true);
  FOR line IN EXECUTE format('EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT * FROM %s WHERE %s', tbl, pred) LOOP
    IF line ~ ('Index Scan using ' || idx || ' ') THEN
      seen := true;
      total := total + substring(line FROM 'actual rows=(\d+)')::bigint;
    ELSIF line ~ 'Rows Removed by Index Recheck' THEN
      total := total + substring(line FROM '(\d+)$')::bigint;
    END IF;
  END LOOP;
  PERFORM set_config('enable_seqscan', 'on', true);
  PERFORM set_config('enable_bitmapscan', 'on', true);
  RETURN CASE WHEN seen THEN total END;
END $$;

-- ---------------------------------------------------------------- text
-- C and a libc collation (C.utf8: strxfrm), NULLs, duplicates, empty strings.
CREATE TABLE a_txt (id serial, c text COLLATE "C", l text COLLATE "C.utf8")
  WITH (autovacuum_enabled = off);
INSERT INTO a_txt (c, l)
  SELECT s, s FROM (SELECT CASE WHEN random() < 0.02 THEN NULL
    ELSE substr('aAbBäÄcCzZ ', 1 + (random() * 10)::int, 1) || substr(md5(random()::text), 1, (random() * 3)::int) END AS s
    FROM generate_series(1, 20000)) x;
INSERT INTO a_txt (c, l) VALUES ('', ''), ('', ''), ('a', 'a'), ('a', 'a');
CREATE INDEX a_txt_c ON a_txt USING dex (c);
CREATE INDEX a_txt_l ON a_txt USING dex (l);
VACUUM ANALYZE a_txt;

SELECT p, any_check('a_txt', 'a_txt_c', p, 'c', 'c DESC', 'c') FROM unnest(ARRAY[
  $$c = ANY ('{a, b, zz, ä}')$$,
  $$c = ANY ('{a, a, a, b, b}')$$,                 -- duplicates
  $$c = ANY ('{a, NULL, b}')$$,                    -- NULL elements dropped
  $$c = ANY ('{NULL}')$$,
  $$c = ANY ('{}')$$,                              -- empty array: no rows
  $$c = ANY (NULL::text[])$$,
  $$c = ANY ('{"", a}')$$,
  $$c = ANY ('{nope, none}')$$,
  $$c = ANY ('{a, b, c, Z}') AND c > 'a'$$,       -- with scalar keys
  $$c = ANY ('{a, b, c, Z}') AND c < 'c' AND c >= 'B'$$,
  $$c = ANY ('{a, b}') AND c = 'b'$$,
  $$c = ANY ('{a, b}') AND c = ANY ('{b, c}')$$,   -- two arrays on one column
  $$c < ANY ('{B, a}')$$,                          -- inequality arrays
  $$c >= ANY ('{zz, b}')$$,
  $$c = ANY (ARRAY['a', 'b']::varchar[])$$,        -- cross-type elements
  $$c = ANY (ARRAY['a', 'b']::name[])$$]) p;

SELECT p, any_check('a_txt', 'a_txt_l', p, 'l', 'l DESC', 'l') FROM unnest(ARRAY[
  $$l = ANY ('{a, b, zz, ä, Ä, A}')$$,
  $$l = ANY ('{a, a, NULL, b}')$$,
  $$l = ANY ('{}')$$,
  $$l = ANY ('{a, B, c}') AND l <= 'b'$$]) p;

-- a scroll cursor, back and forth across range borders: query (sel, id)
-- of tbl WHERE pred ORDER BY ord through the index, against a seqscan
-- ordered by ord, then ties (entries are key columns then TID: ties come
-- in TID order, backwards in a backward scan). moves: n > 0 is n FETCH NEXT, n < 0 |n| FETCH PRIOR; every
-- fetched row (or its absence past an end) is checked.
CREATE FUNCTION cursor_walk(tbl text, idx text, pred text, ord text, ties text, sel text, moves int[])
RETURNS text LANGUAGE plpgsql AS $$
DECLARE k refcursor; want text[]; r text; pos int := 0; total int; checks int := 0; bad int := 0;
        m int; q text; plan text := ''; line text;
BEGIN
  q := format('SELECT (ROW(%s, id))::text FROM %s WHERE %s ORDER BY %s', sel, tbl, pred, ord);
  PERFORM set_config('enable_indexscan', 'off', true);
  PERFORM set_config('enable_bitmapscan', 'off', true);
  EXECUTE format('SELECT array_agg(o ORDER BY n) FROM (SELECT (ROW(%s, id))::text AS o, row_number() OVER (ORDER BY %s, %s) AS n FROM %s WHERE %s) s',
                 sel, ord, ties, tbl, pred) INTO want;
  total := coalesce(array_length(want, 1), 0);
  PERFORM set_config('enable_indexscan', 'on', true);
  PERFORM set_config('enable_seqscan', 'off', true);
  PERFORM set_config('enable_sort', 'off', true);
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP plan := plan || line || E'\n'; END LOOP;
  IF position(' using ' || idx || ' ' IN plan) = 0 OR position('Sort' IN plan) > 0 THEN
    RETURN 'FAIL: plan ' || plan;
  END IF;
  OPEN k SCROLL FOR EXECUTE q;
  FOREACH m IN ARRAY moves LOOP
    FOR i IN 1 .. abs(m) LOOP
      IF m > 0 THEN
        FETCH NEXT FROM k INTO r;
        pos := least(pos + 1, total + 1);
      ELSE
        FETCH PRIOR FROM k INTO r;
        pos := greatest(pos - 1, 0);
      END IF;
      checks := checks + 1;
      IF (pos BETWEEN 1 AND total) IS DISTINCT FROM FOUND
         OR (FOUND AND r IS DISTINCT FROM want[pos]) THEN
        bad := bad + 1;
      END IF;
    END LOOP;
  END LOOP;
  CLOSE k;
  PERFORM set_config('enable_seqscan', 'on', true);
  PERFORM set_config('enable_bitmapscan', 'on', true);
  PERFORM set_config('enable_sort', 'on', true);
  RETURN format('%s rows, %s fetches, %s wrong', total, checks, bad);
END $$;

SELECT cursor_walk('a_txt', 'a_txt_c', $$c = ANY ('{c, a, b}')$$, 'c', 'ctid', 'c',
  ARRAY[na + 2, -4, nb + 3, -(nb + 5), na + nb + nc + 5, -(na + nb + nc + 10), 3, -5, nc + na + nb, -2]::int[])
  FROM (SELECT count(*) FILTER (WHERE c = 'a') AS na, count(*) FILTER (WHERE c = 'b') AS nb,
               count(*) FILTER (WHERE c = 'c') AS nc FROM a_txt) s;
SELECT cursor_walk('a_txt', 'a_txt_c', $$c = ANY ('{c, a, b}')$$, 'c DESC', 'ctid DESC', 'c',
  ARRAY[nc + 1, -3, nb + 2, -1, 1, -(nb + nc + 3), na + nb + nc + 2, -(na + 1)]::int[])
  FROM (SELECT count(*) FILTER (WHERE c = 'a') AS na, count(*) FILTER (WHERE c = 'b') AS nb,
               count(*) FILTER (WHERE c = 'c') AS nc FROM a_txt) s;
-- one range (no array): the turn must not return the current row twice
SELECT cursor_walk('a_txt', 'a_txt_c', $$c >= 'a' AND c <= 'c'$$, 'c', 'ctid', 'c',
  ARRAY[5, -2, 1, -4, 2, -1]);

-- far fewer entries than the index holds (20004): the matching rows
SELECT count(*) AS matching, entries_read('a_txt', 'a_txt_c', $$c = ANY ('{a, b, zz}')$$) AS read
  FROM a_txt WHERE c = ANY ('{a, b, zz}');
SELECT entries_read('a_txt', 'a_txt_c', $$c = ANY ('{a, b, zz}') AND c > 'a'$$) AS read_with_scalar;
SELECT entries_read('a_txt', 'a_txt_l', $$l = ANY ('{a, a, b, NULL}')$$) AS read_libc,
       (SELECT count(*) FROM a_txt WHERE l IN ('a', 'b')) AS matching;

-- ---------------------------------------------------------------- uuid
CREATE TABLE a_uuid (id serial, u uuid) WITH (autovacuum_enabled = off);
INSERT INTO a_uuid (u)
  SELECT CASE WHEN random() < 0.02 THEN NULL ELSE md5((random() * 3000)::int::text)::uuid END
    FROM generate_series(1, 10000);
CREATE INDEX a_uuid_u ON a_uuid USING dex (u);
VACUUM ANALYZE a_uuid;
SELECT p, any_check('a_uuid', 'a_uuid_u', p, 'u', 'u DESC', 'u') FROM unnest(ARRAY[
  format('u = ANY (ARRAY[%L, %L, %L, %L, NULL]::uuid[])', md5('1')::uuid, md5('2')::uuid, md5('1')::uuid, md5('3000')::uuid),
  format('u = ANY (ARRAY[%L, %L, %L]::uuid[]) AND u > %L', md5('1')::uuid, md5('2')::uuid, md5('7')::uuid, md5('1')::uuid),
  $$u = ANY ('{00000000-0000-0000-0000-000000000000}')$$,
  $$u = ANY ('{}')$$]) p;
SELECT entries_read('a_uuid', 'a_uuid_u', format('u = ANY (ARRAY[%L, %L]::uuid[])', md5('1')::uuid, md5('2')::uuid)) < 50 AS few_entries;

-- ---------------------------------------------------------------- numeric
-- 1.0 and 1.00 are one value (the duplicate folds), NaN sorts above numbers
CREATE TABLE a_num (id serial, n numeric) WITH (autovacuum_enabled = off);
INSERT INTO a_num (n)
  SELECT CASE WHEN random() < 0.02 THEN NULL WHEN random() < 0.01 THEN 'NaN'
    ELSE round((random() * 100)::numeric, (random() * 2)::int) END
    FROM generate_series(1, 10000);
CREATE INDEX a_num_n ON a_num USING dex (n);
VACUUM ANALYZE a_num;
SELECT p, any_check('a_num', 'a_num_n', p, 'n', 'n DESC', 'n::float8') FROM unnest(ARRAY[
  $$n = ANY ('{1.0, 1.00, 1, 50.5, NaN, -3}')$$,
  $$n = ANY ('{7, 7.5, NULL}') AND n <> 7$$,
  $$n = ANY ('{7, 7.5, 99}') AND n < 99$$,
  $$n = ANY ('{NULL, NULL}')$$]) p;

-- ------------------------------------------- three columns (int, text DESC, numeric)
-- arrays on the first, middle and last column, inequalities on later
-- columns, NULLs (b DESC puts them first), arrays past the first column
-- without an equality (not expanded: rechecked).
CREATE TABLE a_multi (id serial, a int, b text COLLATE "C", n numeric) WITH (autovacuum_enabled = off);
INSERT INTO a_multi (a, b, n)
  SELECT CASE WHEN random() < 0.02 THEN NULL ELSE (random() * 20)::int END,
         CASE WHEN random() < 0.05 THEN NULL ELSE substr('xyzmnab', 1 + (random() * 6)::int, 1) END,
         CASE WHEN random() < 0.03 THEN NULL ELSE (random() * 10)::int END
    FROM generate_series(1, 20000);
CREATE INDEX a_multi_abn ON a_multi USING dex (a, b DESC, n);
VACUUM ANALYZE a_multi;
-- ordered: arrays on the first column only (the planner sorts otherwise)
SELECT p, any_check('a_multi', 'a_multi_abn', p, 'a, b DESC, n', 'a DESC, b, n DESC', 'a, b, n') FROM unnest(ARRAY[
  $$a = ANY ('{3, 1, 5, 1, NULL}')$$,
  $$a = ANY ('{3, 1, 5}') AND b = 'x'$$,
  $$a = ANY ('{3, 1, 5}') AND b > 'm' AND n <= 4$$,
  $$a = ANY ('{2, 4}') AND b IS NULL$$,
  $$a = ANY ('{2, 4}') AND b = ANY ('{x, y, NULL}') AND n > 5$$,
  $$a = ANY ('{2, 4}') AND n = ANY ('{3, 4}')$$]) p;
SELECT p, any_check('a_multi', 'a_multi_abn', p) FROM unnest(ARRAY[
  $$a = 2 AND b = ANY ('{x, y, a}')$$,
  $$a = 2 AND b = ANY ('{x, y, a}') AND n >= 3$$,
  $$a = 2 AND b = 'x' AND n = ANY ('{1, 2, 3, 2}')$$,
  $$a = 2 AND b = ANY ('{x, y}') AND n = ANY ('{1, 9}')$$,
  $$a = 2 AND b < 'y' AND n = ANY ('{1, 9}')$$,
  $$a IS NULL AND b = ANY ('{m, n}')$$,
  $$b = ANY ('{x, y}') AND n = ANY ('{1}')$$,
  $$a = ANY ('{1, 2}') AND b = ANY ('{}')$$,
  $$a >= 18 AND b = ANY ('{x}')$$,
  $$a = ANY ('{1, 2, 3}') AND b = ANY ('{x, y}') AND n = ANY ('{0, 5, 10}')$$]) p;
-- past the combination cap (150 x 7 x 11 > 10000): one range, still right
SELECT any_check('a_multi', 'a_multi_abn',
  $$a = ANY (ARRAY(SELECT generate_series(-70, 79))) AND b = ANY ('{x, y, z, m, n, a, b}')
    AND n = ANY ('{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}')$$) AS over_cap;
SELECT cursor_walk('a_multi', 'a_multi_abn', $$a = ANY ('{4, 2, 3}')$$, 'a, b DESC, n', 'ctid', 'a, b, n',
  ARRAY[n2 + 1, -2, n3 + 1, -(n2 + n3), n2 + n3 + n4 + 3, -(n4 + 1), 2]::int[])
  FROM (SELECT count(*) FILTER (WHERE a = 2) AS n2, count(*) FILTER (WHERE a = 3) AS n3,
               count(*) FILTER (WHERE a = 4) AS n4 FROM a_multi) s;
SELECT cursor_walk('a_multi', 'a_multi_abn', $$a = ANY ('{4, 2, 3}')$$, 'a DESC, b, n DESC', 'ctid DESC', 'a, b, n',
  ARRAY[n4 + 1, -2, n3 + 1, -(n3 + 1), n2 + n3 + n4 + 3, -(n2 + 1), 2]::int[])
  FROM (SELECT count(*) FILTER (WHERE a = 2) AS n2, count(*) FILTER (WHERE a = 3) AS n3,
               count(*) FILTER (WHERE a = 4) AS n4 FROM a_multi) s;
SELECT entries_read('a_multi', 'a_multi_abn', $$a = 2 AND b = ANY ('{x, y}')$$)
       = (SELECT count(*) FROM a_multi WHERE a = 2 AND b IN ('x', 'y')) AS exact_entries;
SELECT entries_read('a_multi', 'a_multi_abn', $$a = ANY ('{2, 4}') AND b = 'x' AND n = ANY ('{1, 2}')$$)
       = (SELECT count(*) FROM a_multi WHERE a IN (2, 4) AND b = 'x' AND n IN (1, 2)) AS exact_entries;

-- a rescan with new array values (the inner side of a nested loop)
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF)
SELECT v, count(m.*) FROM (VALUES (ARRAY[1, 2]), (ARRAY[3]), (ARRAY[]::int[]), (ARRAY[2, 1, NULL])) x(v)
  LEFT JOIN a_multi m ON m.a = ANY (x.v) AND m.b = 'x' GROUP BY v ORDER BY v;
SELECT v, count(m.*) FROM (VALUES (ARRAY[1, 2]), (ARRAY[3]), (ARRAY[]::int[]), (ARRAY[2, 1, NULL])) x(v)
  LEFT JOIN a_multi m ON m.a = ANY (x.v) AND m.b = 'x' GROUP BY v ORDER BY v;
RESET enable_seqscan;
SET enable_indexscan = off;   -- the same through a seqscan
SELECT v, count(m.*) FROM (VALUES (ARRAY[1, 2]), (ARRAY[3]), (ARRAY[]::int[]), (ARRAY[2, 1, NULL])) x(v)
  LEFT JOIN a_multi m ON m.a = ANY (x.v) AND m.b = 'x' GROUP BY v ORDER BY v;
RESET enable_hashjoin;
RESET enable_mergejoin;

DROP TABLE a_txt, a_uuid, a_num, a_multi;
DROP FUNCTION any_check, entries_read, cursor_walk;
