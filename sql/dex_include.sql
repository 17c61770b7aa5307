-- INCLUDE columns and index-only scans of byte-string entries
-- (extension/dexentryvalues.c, src/README.md "INCLUDE columns and index-only
-- scans"). Every query runs as a dex index-only scan (or, where a column
-- cannot come back from the index, a plain index scan) and as a sequential
-- scan; ios_same() reports the plan kind and whether the answers agree.
CREATE EXTENSION IF NOT EXISTS dex;
SELECT setseed(0.41);

CREATE TABLE inc (id int4, k int8, t text COLLATE "C", u uuid, n numeric, ts timestamptz,
                  b bool, bt bytea, nm name, iv interval, j jsonb, f float8, c char(4),
                  ti text COLLATE "und-x-icu")
    WITH (autovacuum_enabled = off);
INSERT INTO inc
SELECT g,
       (g * 7919) % 10007,
       CASE WHEN g % 17 = 0 THEN NULL ELSE 'k' || (g % 997) END,
       md5((g % 1500)::text)::uuid,
       CASE WHEN g % 13 = 0 THEN NULL ELSE round((g % 100) / 7.0, 1 + g % 3) END,
       '2026-01-01 00:00+00'::timestamptz + (g % 700) * interval '1 minute',
       CASE WHEN g % 11 = 0 THEN NULL ELSE g % 3 = 0 END,
       decode(md5(g::text), 'hex'),
       ('n' || g)::name,
       (g % 50) * interval '1 hour' + (g % 3) * interval '1 day',
       jsonb_build_object('g', g % 40),
       CASE WHEN g % 19 = 0 THEN 'NaN'::float8 WHEN g % 23 = 0 THEN '-0'::float8 ELSE g / 3.0 END,
       CASE WHEN g % 7 = 0 THEN NULL ELSE (g % 9)::text END,
       'Äb' || (g % 31)
FROM generate_series(1, 3000) g;
VACUUM inc;

-- one key column (the 16-byte layout would hold it) with INCLUDE columns of
-- several kinds: by value, fixed by reference, varlena, NULLs
CREATE INDEX inc_k ON inc USING dex (k) INCLUDE (n, t, j, iv, f, c);
-- decodable key columns: uuid DESC, "C" text; INCLUDE name (fixed 64 bytes), bool
CREATE INDEX inc_ut ON inc USING dex (u DESC, t) INCLUDE (b, id);
-- NULLS FIRST, timestamptz, bytea key; INCLUDE int
CREATE INDEX inc_bts ON inc USING dex (b DESC NULLS FIRST, ts, bt) INCLUDE (id);
-- a key column that does not decode (numeric; ICU text does: its bytes follow
-- the sort key): no index-only scan reads it
CREATE INDEX inc_nti ON inc USING dex (n, ti) INCLUDE (k, nm);
SELECT c.relname, (dex_check(c.oid)).entries = (SELECT count(*) FROM inc) AS one_entry_per_row
FROM pg_class c WHERE c.relname LIKE 'inc\_%' ORDER BY 1;

-- ios_same(query, index): the query's rows (as text, sorted) through the
-- index -- kind: 'ios' if the plan is an index-only scan of it, 'index' for
-- a plain index scan, else 'other' -- and through a sequential scan.
CREATE FUNCTION ios_same(q text, idx text, OUT kind text, OUT same boolean, OUT n bigint)
LANGUAGE plpgsql AS $$
DECLARE line text; want text[]; got text[];
BEGIN
    PERFORM set_config('enable_indexscan', 'off', true);
    PERFORM set_config('enable_indexonlyscan', 'off', true);
    PERFORM set_config('enable_bitmapscan', 'off', true);
    PERFORM set_config('enable_seqscan', 'on', true);
    EXECUTE format('SELECT array_agg(r::text ORDER BY r::text), count(*) FROM (%s) r', q) INTO want, n;
    PERFORM set_config('enable_indexscan', 'on', true);
    PERFORM set_config('enable_indexonlyscan', 'on', true);
    PERFORM set_config('enable_seqscan', 'off', true);
    kind := 'other';
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
        IF line LIKE '%Index Only Scan%using ' || idx || ' %' THEN kind := 'ios';
        ELSIF line LIKE '%Index Scan%using ' || idx || ' %' AND kind = 'other' THEN kind := 'index';
        END IF;
    END LOOP;
    EXECUTE format('SELECT array_agg(r::text ORDER BY r::text) FROM (%s) r', q) INTO got;
    same := got IS NOT DISTINCT FROM want;
END $$;

-- ordered_same(query, index): the same, keeping the query's own ORDER BY
-- (the index's order; no Sort node allowed)
CREATE FUNCTION ordered_same(q text, idx text, OUT ios boolean, OUT sorted boolean, OUT same boolean)
LANGUAGE plpgsql AS $$
DECLARE line text; want text[]; got text[];
BEGIN
    PERFORM set_config('enable_indexscan', 'off', true);
    PERFORM set_config('enable_indexonlyscan', 'off', true);
    PERFORM set_config('enable_bitmapscan', 'off', true);
    EXECUTE format('SELECT array_agg(r::text) FROM (%s) r', q) INTO want;
    PERFORM set_config('enable_indexscan', 'on', true);
    PERFORM set_config('enable_indexonlyscan', 'on', true);
    PERFORM set_config('enable_seqscan', 'off', true);
    PERFORM set_config('enable_sort', 'off', true);
    ios := false; sorted := false;
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
        IF line LIKE '%Index Only Scan%using ' || idx || ' %' THEN ios := true; END IF;
        IF line LIKE '%Sort%' THEN sorted := true; END IF;
    END LOOP;
    EXECUTE format('SELECT array_agg(r::text) FROM (%s) r', q) INTO got;
    same := got IS NOT DISTINCT FROM want;
END $$;

CREATE TABLE include_queries (id serial, idx text, q text);
INSERT INTO include_queries (idx, q) VALUES
  ('inc_k',   'SELECT k, n, t, j, iv, f, c FROM inc WHERE k BETWEEN 100 AND 2500'),
  ('inc_k',   'SELECT k, c, f FROM inc WHERE k = 4242'),
  ('inc_k',   'SELECT t, j FROM inc WHERE k < 300 AND k > 200'),
  ('inc_k',   'SELECT count(*), count(n), count(t), sum(round(f::numeric, 6)) FILTER (WHERE f <> ''NaN'') FROM inc WHERE k > 9000'),
  ('inc_ut',  'SELECT u, t, b, id FROM inc WHERE u > ''80000000-0000-0000-0000-000000000000'''),
  ('inc_ut',  'SELECT u, t FROM inc WHERE u = ''c81e728d-9d4c-2f63-6f06-7f89cc14862c'''),
  ('inc_ut',  'SELECT t, id FROM inc WHERE u = ''c4ca4238a0b923820dcc509a6f75849b'' AND t >= ''k1'''),
  ('inc_ut',  'SELECT id FROM inc WHERE u < ''10000000-0000-0000-0000-000000000000'' AND t IS NULL'),
  ('inc_bts', 'SELECT b, ts, bt, id FROM inc WHERE b IS NULL'),
  ('inc_bts', 'SELECT ts, bt FROM inc WHERE b = true AND ts < ''2026-01-01 03:00+00'''),
  ('inc_bts', 'SELECT bt, id FROM inc WHERE b = false AND ts = ''2026-01-01 05:00+00'' AND bt > ''\x80'''),
  ('inc_nti', 'SELECT n, ti, k, nm FROM inc WHERE n BETWEEN 3 AND 4'),
  ('inc_nti', 'SELECT k, nm FROM inc WHERE n = 5.0');

-- expected: 'ios' for every query but the ones that read n ('index')
SELECT id, idx, c.* FROM include_queries, ios_same(q, idx) c ORDER BY id;

-- ordered index-only scans, both ways, through DESC and NULLS FIRST columns
SELECT o.* FROM (VALUES
  ('SELECT u, t, id FROM inc WHERE u > ''f0000000-0000-0000-0000-000000000000'' ORDER BY u DESC, t', 'inc_ut'),
  ('SELECT u, t, id FROM inc WHERE u > ''f0000000-0000-0000-0000-000000000000'' ORDER BY u, t DESC', 'inc_ut'),
  ('SELECT b, ts, bt FROM inc ORDER BY b DESC NULLS FIRST, ts, bt LIMIT 400', 'inc_bts'),
  ('SELECT b, ts, bt FROM inc ORDER BY b NULLS LAST, ts DESC, bt DESC LIMIT 400', 'inc_bts'),
  ('SELECT k, t, n FROM inc WHERE k < 500 ORDER BY k DESC', 'inc_k')) v(q, idx),
  ordered_same(q, idx) o;

-- a scroll cursor moves both ways through an index-only scan
BEGIN;
SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off;
DECLARE cur SCROLL CURSOR FOR SELECT k, t, c FROM inc WHERE k BETWEEN 10 AND 20 ORDER BY k;
FETCH 3 FROM cur;
FETCH BACKWARD 2 FROM cur;
FETCH LAST FROM cur;
FETCH BACKWARD 3 FROM cur;
COMMIT;

-- the values come back as they were stored: scale of numeric, -0 and NaN,
-- char(n) padding, interval units (which the key encodings do not keep)
SET enable_seqscan = off; SET enable_bitmapscan = off;
SELECT k, n, f, '"' || c::text || '"' AS c, iv FROM inc WHERE k IN (7919 % 10007, (19 * 7919) % 10007, (23 * 7919) % 10007, (26 * 7919) % 10007) ORDER BY k;
RESET enable_seqscan; RESET enable_bitmapscan;

-- DML and VACUUM: new, updated (INCLUDE value changed: not HOT) and deleted rows
UPDATE inc SET n = n * 10, j = j || '{"u": 1}', c = 'upd' WHERE id % 10 = 0;
UPDATE inc SET t = t || 'x', b = NOT b WHERE id % 15 = 1;
DELETE FROM inc WHERE id % 9 = 4;
INSERT INTO inc (id, k, t, u, n, ts, b, bt, nm, iv, j, f, c, ti)
SELECT g, g % 10007, 'new' || g, md5(g::text)::uuid, g / 11.0, now(), g % 2 = 0,
       '\x00ff00'::bytea, 'new', interval '5 min', '[1, 2]', g, 'new', 'ö'
FROM generate_series(3001, 3400) g;
SELECT id, idx, c.* FROM include_queries, ios_same(q, idx) c ORDER BY id;
VACUUM inc;
SELECT id, idx, c.* FROM include_queries, ios_same(q, idx) c ORDER BY id;
SELECT c.relname, (dex_check(c.oid)).entries = (SELECT count(*) FROM inc) AS one_entry_per_row
FROM pg_class c WHERE c.relname LIKE 'inc\_%' ORDER BY 1;

-- after VACUUM every page is all-visible: the index answers alone
SET enable_seqscan = off; SET enable_bitmapscan = off;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT k, t FROM inc WHERE k BETWEEN 100 AND 200;
RESET enable_seqscan; RESET enable_bitmapscan;

-- limits: the INCLUDE columns share the entry's bytes with the key; a row
-- that does not fit is an error naming the limit, never a truncated value
CREATE TABLE inc_long (k int, s text, v varchar) WITH (autovacuum_enabled = off);
INSERT INTO inc_long VALUES (1, repeat('a', 100), 'short');
CREATE INDEX inc_long_k ON inc_long USING dex (k) INCLUDE (s, v);
INSERT INTO inc_long VALUES (2, repeat('b', 140), 'x');
INSERT INTO inc_long VALUES (3, repeat('c', 300), 'x');
INSERT INTO inc_long VALUES (4, repeat('c', 3000), 'x');   -- compressed in the heap, not in the index
INSERT INTO inc_long VALUES (5, NULL, NULL);
SET enable_seqscan = off; SET enable_bitmapscan = off;
SELECT k, length(s), v FROM inc_long WHERE k > 0 ORDER BY k;
RESET enable_seqscan; RESET enable_bitmapscan;
DROP INDEX inc_long_k;
INSERT INTO inc_long VALUES (6, repeat('d', 200), 'x');
CREATE INDEX inc_long_k ON inc_long USING dex (k) INCLUDE (s, v);

-- a unique index's INCLUDE columns are no part of its key
CREATE TABLE inc_u (e text COLLATE "C", v int) WITH (autovacuum_enabled = off);
CREATE UNIQUE INDEX inc_u_e ON inc_u USING dex (e) INCLUDE (v);
INSERT INTO inc_u VALUES ('a', 1), ('b', 2);
INSERT INTO inc_u VALUES ('a', 3);
INSERT INTO inc_u VALUES ('c', 3), ('d', 3);
CREATE UNIQUE INDEX inc_u_v ON inc_u USING dex (v) INCLUDE (e);
SET enable_seqscan = off; SET enable_bitmapscan = off;
SELECT e, v FROM inc_u WHERE e >= 'a' ORDER BY e;
RESET enable_seqscan; RESET enable_bitmapscan;
DROP TABLE inc, inc_long, inc_u, include_queries;
DROP FUNCTION ios_same(text, text), ordered_same(text, text);
