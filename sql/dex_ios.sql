-- Index-only scans (src/README.md "Index-only scans"): the key round trip
-- for every type an index-only scan may return, extremes included; plans and
-- answers of index-only scans against a sequential scan, ascending and
-- descending, with NULLs; Heap Fetches: 0 after VACUUM and > 0 after a
-- DELETE or UPDATE before it, with correct answers meanwhile; count(*) on
-- every dex index (float ones too, whose column cannot be returned); CLUSTER
-- through a dex index.
SET client_min_messages = warning;  -- quiet whether or not an earlier suite created it
CREATE EXTENSION IF NOT EXISTS dex;
RESET client_min_messages;
SET timezone = 'UTC';

-- 1. encode -> decode is the identity for every returnable type. rt_check
-- reports how many values it compared and how many came back different
-- (as SQL values or as text).
CREATE FUNCTION rt_check(vals anyarray, OUT n int, OUT bad int) LANGUAGE sql AS $$
    SELECT count(*)::int,
           count(*) FILTER (WHERE dex_key_roundtrip(v) IS DISTINCT FROM v
                               OR dex_key_roundtrip(v)::text IS DISTINCT FROM v::text)::int
    FROM unnest(vals) v
$$;
CREATE DOMAIN posint AS int4 CHECK (VALUE > 0);
SELECT 'int2' AS type, * FROM rt_check('{-32768,-32767,-1,0,1,32766,32767}'::int2[])
UNION ALL SELECT 'int4', * FROM rt_check('{-2147483648,-2147483647,-1,0,1,2147483647}'::int4[])
UNION ALL SELECT 'int8', * FROM rt_check('{-9223372036854775808,-9223372036854775807,-4294967296,-1,0,1,4294967296,9223372036854775806,9223372036854775807}'::int8[])
UNION ALL SELECT 'oid', * FROM rt_check('{0,1,2147483647,2147483648,4294967294,4294967295}'::oid[])
UNION ALL SELECT 'bool', * FROM rt_check('{false,true}'::bool[])
UNION ALL SELECT 'time', * FROM rt_check('{00:00:00,00:00:00.000001,12:34:56.789012,23:59:59.999999,24:00:00}'::time[])
UNION ALL SELECT 'date', * FROM rt_check('{-infinity,4714-11-24 BC,0001-12-31 BC,1999-12-31,2000-01-01,5874897-12-31,infinity}'::date[])
UNION ALL SELECT 'timestamp', * FROM rt_check('{-infinity,4714-11-24 00:00:00 BC,1999-12-31 23:59:59.999999,2000-01-01 00:00:00,2000-01-01 00:00:00.000001,294276-12-31 23:59:59.999999,infinity}'::timestamp[])
UNION ALL SELECT 'timestamptz', * FROM rt_check('{-infinity,4714-11-24 00:00:00+00 BC,1999-12-31 23:59:59.999999+00,2000-01-01 00:00:00+00,2021-03-14 02:30:00-05,294276-12-31 23:59:59.999999+00,infinity}'::timestamptz[])
UNION ALL SELECT 'posint (domain)', * FROM rt_check(ARRAY[1, 2147483647]::posint[]);
-- floats lose -0 and NaN payloads in their keys: not returnable
SELECT dex_key_roundtrip('-0'::float8);
SELECT dex_key_roundtrip('1.5'::float4);
SELECT dex_key_roundtrip('x'::text);

-- 2. One table per key type: extremes, a spread of values, duplicates, NULLs.
CREATE TABLE ios_int2 (v int2) WITH (autovacuum_enabled = off);
INSERT INTO ios_int2 SELECT unnest('{-32768,32767,0}'::int2[]);
INSERT INTO ios_int2 SELECT (g * 37 % 2000 - 1000)::int2 FROM generate_series(1, 3000) g;
CREATE TABLE ios_int4 (v int4) WITH (autovacuum_enabled = off);
INSERT INTO ios_int4 SELECT unnest('{-2147483648,2147483647}'::int4[]);
INSERT INTO ios_int4 SELECT g * 7919 % 5003 - 2500 FROM generate_series(1, 3000) g;
CREATE TABLE ios_int8 (v int8) WITH (autovacuum_enabled = off);
INSERT INTO ios_int8 SELECT unnest('{-9223372036854775808,9223372036854775807,-1,0}'::int8[]);
INSERT INTO ios_int8 SELECT (g * 7919 % 5003 - 2500) * 3600000000000000 FROM generate_series(1, 3000) g;
CREATE TABLE ios_oid (v oid) WITH (autovacuum_enabled = off);
INSERT INTO ios_oid SELECT unnest('{0,4294967295,2147483648}'::oid[]);
INSERT INTO ios_oid SELECT (g::int8 * 1431655 % 4294967296)::oid FROM generate_series(1, 3000) g;
CREATE TABLE ios_bool (v bool) WITH (autovacuum_enabled = off);
INSERT INTO ios_bool SELECT g % 3 = 0 FROM generate_series(1, 3000) g;
CREATE TABLE ios_time (v time) WITH (autovacuum_enabled = off);
INSERT INTO ios_time SELECT unnest('{00:00:00,24:00:00,23:59:59.999999}'::time[]);
INSERT INTO ios_time SELECT '00:00'::time + (g * 7919 % 86400) * interval '1 second' + (g % 7) * interval '1 microsecond'
    FROM generate_series(1, 3000) g;
CREATE TABLE ios_date (v date) WITH (autovacuum_enabled = off);
INSERT INTO ios_date SELECT unnest('{-infinity,infinity,4714-11-24 BC,5874897-12-31}'::date[]);
INSERT INTO ios_date SELECT '2000-01-01'::date + (g * 7919 % 20000 - 10000) FROM generate_series(1, 3000) g;
CREATE TABLE ios_ts (v timestamp) WITH (autovacuum_enabled = off);
INSERT INTO ios_ts SELECT unnest('{-infinity,infinity,4714-11-24 00:00:00 BC,294276-12-31 23:59:59.999999}'::timestamp[]);
INSERT INTO ios_ts SELECT '2000-01-01'::timestamp + (g * 7919 % 20000 - 10000) * interval '1 hour' + g * interval '1 microsecond'
    FROM generate_series(1, 3000) g;
CREATE TABLE ios_tstz (v timestamptz) WITH (autovacuum_enabled = off);
INSERT INTO ios_tstz SELECT unnest('{-infinity,infinity,4714-11-24 00:00:00+00 BC,294276-12-31 23:59:59.999999+00}'::timestamptz[]);
INSERT INTO ios_tstz SELECT '2021-03-10 00:00:00+00'::timestamptz + (g * 7919 % 2000) * interval '7 minutes' + g * interval '1 microsecond'
    FROM generate_series(1, 3000) g;
CREATE TABLE ios_dom (v posint) WITH (autovacuum_enabled = off);
INSERT INTO ios_dom SELECT (g * 7919 % 5003 + 1) FROM generate_series(1, 3000) g;
CREATE TABLE ios_f8 (v float8) WITH (autovacuum_enabled = off);
INSERT INTO ios_f8 SELECT unnest('{-0,0,NaN,-Infinity,Infinity}'::float8[]);
INSERT INTO ios_f8 SELECT (g * 7919 % 5003) / 7.0 - 300 FROM generate_series(1, 3000) g;
CREATE TABLE ios_f4 (v float4) WITH (autovacuum_enabled = off);
INSERT INTO ios_f4 SELECT unnest('{-0,0,NaN}'::float4[]);
INSERT INTO ios_f4 SELECT (g * 7919 % 5003) / 7.0 - 300 FROM generate_series(1, 3000) g;
DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY '{ios_int2,ios_int4,ios_int8,ios_oid,ios_bool,ios_time,ios_date,ios_ts,ios_tstz,ios_dom,ios_f8,ios_f4}'::text[] LOOP
        EXECUTE format('INSERT INTO %I SELECT NULL FROM generate_series(1, 7)', t);
        EXECUTE format('CREATE INDEX %I ON %I USING dex (v)', t || '_v', t);
    END LOOP;
END $$;
VACUUM ANALYZE ios_int2, ios_int4, ios_int8, ios_oid, ios_bool, ios_time, ios_date, ios_ts, ios_tstz,
    ios_dom, ios_f8, ios_f4;

-- ios_check(tbl, cond): column v under cond through an index-only scan (every
-- other path off; the plan is checked), in ascending and descending order,
-- against a sequential scan. nrows: rows compared; fetches: Heap Fetches of
-- the ascending scan.
CREATE FUNCTION ios_check(tbl text, cond text DEFAULT 'true',
                          OUT ios_plan boolean, OUT nrows bigint, OUT same_asc boolean,
                          OUT same_desc boolean, OUT fetches int)
LANGUAGE plpgsql AS $$
DECLARE
    q text := format('SELECT v FROM %I WHERE %s', tbl, cond);
    seq_asc text[];
    seq_desc text[];
    got text[];
    line text;
BEGIN
    PERFORM set_config('enable_seqscan', 'on', true);
    PERFORM set_config('enable_indexscan', 'off', true);
    PERFORM set_config('enable_indexonlyscan', 'off', true);
    PERFORM set_config('enable_bitmapscan', 'off', true);
    EXECUTE format('SELECT array_agg(v::text ORDER BY v), array_agg(v::text ORDER BY v DESC), count(*) FROM (%s) s', q)
        INTO seq_asc, seq_desc, nrows;
    PERFORM set_config('enable_seqscan', 'off', true);
    PERFORM set_config('enable_indexonlyscan', 'on', true);
    ios_plan := true;
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q || ' ORDER BY v' LOOP
        IF line LIKE '%Seq Scan%' OR line LIKE '%Sort%' THEN ios_plan := false; END IF;
    END LOOP;
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q || ' ORDER BY v DESC' LOOP
        IF line LIKE '%Seq Scan%' OR line LIKE '%Sort%' THEN ios_plan := false; END IF;
    END LOOP;
    FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q || ' ORDER BY v' LOOP
        IF line LIKE '%Index Only Scan%' THEN ios_plan := ios_plan AND line LIKE '%' || tbl || '_v%'; END IF;
        IF line LIKE '%Heap Fetches:%' THEN fetches := substring(line FROM 'Heap Fetches: (\d+)')::int; END IF;
    END LOOP;
    ios_plan := ios_plan AND fetches IS NOT NULL;
    EXECUTE format('SELECT array_agg(v::text) FROM (%s ORDER BY v) s', q) INTO got;
    same_asc := got IS NOT DISTINCT FROM seq_asc;
    EXECUTE format('SELECT array_agg(v::text) FROM (%s ORDER BY v DESC) s', q) INTO got;
    same_desc := got IS NOT DISTINCT FROM seq_desc;
END $$;

-- every returnable type: index-only plans, the seqscan's answers, no heap fetch
SELECT t, c.* FROM unnest('{ios_int2,ios_int4,ios_int8,ios_oid,ios_bool,ios_time,ios_date,ios_ts,ios_tstz,ios_dom}'::text[]) t,
    ios_check(t) c;
-- with scan keys: ranges, = ANY, IS NULL, cross-type keys (rechecked on the decoded value)
SELECT * FROM ios_check('ios_int2', 'v BETWEEN -500 AND 500');
SELECT * FROM ios_check('ios_int8', 'v < 0 OR v IS NULL');
SELECT * FROM ios_check('ios_int4', 'v = ANY(''{-2147483648,7,2147483647,-3}''::int8[])');
SELECT * FROM ios_check('ios_int8', 'v IS NULL');
SELECT * FROM ios_check('ios_bool', 'v >= true');
SELECT * FROM ios_check('ios_date', 'v < ''2000-01-01 12:00''::timestamp');
SET timezone = 'America/New_York';
SELECT * FROM ios_check('ios_ts', 'v >= ''2001-03-11 12:00:00+00''::timestamptz');
SELECT * FROM ios_check('ios_tstz', 'v BETWEEN ''2021-03-14''::date AND ''2021-03-14 03:30''::timestamp');
SET timezone = 'UTC';

-- floats: the column is read through a plain index scan (-0 stays -0) ...
SET enable_seqscan = off; SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT v FROM ios_f8 WHERE v BETWEEN -1 AND 1;
SELECT v::text FROM ios_f8 WHERE v BETWEEN -1e-300 AND 1e-300 ORDER BY v::text;
SELECT v::text FROM ios_f4 WHERE v BETWEEN -1e-30 AND 1e-30 ORDER BY v::text;
-- ... and a query reading no column is an index-only scan of any dex index
EXPLAIN (COSTS OFF) SELECT count(*) FROM ios_f8;
RESET enable_seqscan; RESET enable_bitmapscan;
-- count_check(tbl): count(*) with sequential and bitmap scans off (the plan
-- must be a dex index-only scan) against a sequential scan's count
CREATE FUNCTION count_check(tbl text, OUT ios_plan boolean, OUT same boolean, OUT n bigint)
LANGUAGE plpgsql AS $$
DECLARE
    line text;
    c bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM %I', tbl) INTO n;   -- a sequential scan
    PERFORM set_config('enable_seqscan', 'off', true);
    PERFORM set_config('enable_bitmapscan', 'off', true);
    ios_plan := false;
    FOR line IN EXECUTE format('EXPLAIN (COSTS OFF) SELECT count(*) FROM %I', tbl) LOOP
        IF line LIKE '%Index Only Scan using ' || tbl || '_v%' THEN ios_plan := true; END IF;
    END LOOP;
    EXECUTE format('SELECT count(*) FROM %I', tbl) INTO c;
    same := c = n;
END $$;
SELECT t, c.* FROM unnest('{ios_int2,ios_int4,ios_int8,ios_oid,ios_bool,ios_time,ios_date,ios_ts,ios_tstz,ios_dom,ios_f8,ios_f4}'::text[]) t,
    count_check(t) c;
-- sequential and bitmap scans off: SELECT 1 ... LIMIT 1, EXISTS
SET enable_seqscan = off; SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT 1 FROM ios_f4 LIMIT 1;
SELECT 1 AS one FROM ios_f4 LIMIT 1;
EXPLAIN (COSTS OFF) SELECT EXISTS (SELECT 1 FROM ios_f8);
SELECT EXISTS (SELECT 1 FROM ios_f8) AS f8, EXISTS (SELECT 1 FROM ios_bool) AS bool;
RESET enable_seqscan; RESET enable_bitmapscan;

-- 3. Before VACUUM: deleted, updated, aborted rows; then VACUUM.
CREATE TABLE iv (k int, v int) WITH (autovacuum_enabled = off);
INSERT INTO iv SELECT g, g FROM generate_series(1, 2000) g;
CREATE INDEX iv_k ON iv USING dex (k);
VACUUM iv;
SET enable_seqscan = off; SET enable_bitmapscan = off;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT k FROM iv WHERE k BETWEEN 100 AND 199;
DELETE FROM iv WHERE k BETWEEN 150 AND 159;
-- the page lost its all-visible bit: entries of the deleted rows are fetched and skipped
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT k FROM iv WHERE k BETWEEN 100 AND 199;
SELECT count(*), sum(k) FROM iv WHERE k BETWEEN 100 AND 199;
UPDATE iv SET k = k + 10000 WHERE k BETWEEN 160 AND 164;
SELECT k FROM iv WHERE k > 9000 ORDER BY k DESC;
SELECT count(*), sum(k) FROM iv WHERE k BETWEEN 100 AND 199;
BEGIN;
DELETE FROM iv WHERE k BETWEEN 100 AND 109;
SELECT count(*) FROM iv WHERE k BETWEEN 100 AND 199;
ROLLBACK;
BEGIN;
INSERT INTO iv SELECT g, 0 FROM generate_series(100, 120) g;   -- aborted: entries stay until VACUUM
ROLLBACK;
SELECT count(*), sum(k) FROM iv WHERE k BETWEEN 100 AND 199;
SELECT count(*) FROM iv;
VACUUM iv;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT k FROM iv WHERE k BETWEEN 100 AND 199;
SELECT count(*), sum(k) FROM iv WHERE k BETWEEN 100 AND 199;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM iv;
SELECT count(*) FROM iv;
-- a scrollable cursor: forward, backward, forward again over one index-only scan
BEGIN;
DECLARE c SCROLL CURSOR FOR SELECT k FROM iv WHERE k BETWEEN 95 AND 175 ORDER BY k;
FETCH 4 FROM c;
FETCH BACKWARD 2 FROM c;
FETCH RELATIVE 55 FROM c;
FETCH 3 FROM c;
FETCH BACKWARD 3 FROM c;
FETCH LAST FROM c;
FETCH ABSOLUTE 1 FROM c;
COMMIT;
-- a unique dex index returns its keys too
CREATE UNIQUE INDEX iv_v ON iv USING dex (v);
EXPLAIN (COSTS OFF) SELECT v FROM iv WHERE v BETWEEN 10 AND 12;
SELECT v FROM iv WHERE v BETWEEN 10 AND 12;
RESET enable_seqscan; RESET enable_bitmapscan;

-- 4. CLUSTER through a dex index (an index scan with SnapshotAny: dead rows
-- are met and dropped, NULLs come last).
CREATE TABLE cl (k int, pad text) WITH (autovacuum_enabled = off);
INSERT INTO cl SELECT g * 7919 % 10007, 'p' || g FROM generate_series(1, 10007) g;
INSERT INTO cl VALUES (NULL, 'null'), (NULL, 'null2');
CREATE INDEX cl_k ON cl USING dex (k);
DELETE FROM cl WHERE k % 10 = 3;
UPDATE cl SET k = -k WHERE k % 10 = 7;   -- new versions, new entries
SELECT count(*), count(k), sum(k), count(DISTINCT pad) FROM cl;
-- heap order is not key order yet
SELECT count(*) FILTER (WHERE k < prev) > 0 AS out_of_order FROM (SELECT k, lag(k) OVER (ORDER BY ctid) AS prev FROM cl) s;
CLUSTER cl USING cl_k;
SELECT indisclustered FROM pg_index WHERE indexrelid = 'cl_k'::regclass;
SELECT count(*), count(k), sum(k), count(DISTINCT pad) FROM cl;
-- ctid order is key order now, NULLs last
SELECT count(*) FILTER (WHERE k < prev) AS out_of_order,
       count(*) FILTER (WHERE k IS NOT NULL AND prev IS NULL AND rn > 1) AS value_after_null
FROM (SELECT k, lag(k) OVER (ORDER BY ctid) AS prev, row_number() OVER (ORDER BY ctid) AS rn FROM cl) s;
SELECT k, pad FROM cl ORDER BY ctid LIMIT 3;
SELECT k, pad FROM cl ORDER BY ctid DESC LIMIT 3;
SELECT entries FROM dex_check('cl_k');
-- CLUSTER again by the remembered index, after more changes
INSERT INTO cl VALUES (-1000000, 'first');
CLUSTER cl;
SELECT k, pad FROM cl ORDER BY ctid LIMIT 1;
SELECT count(*), count(k), sum(k) FROM cl;
VACUUM cl;
SET enable_seqscan = off; SET enable_bitmapscan = off;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT k FROM cl WHERE k BETWEEN -30 AND 30;
SELECT array_agg(k) FROM (SELECT k FROM cl WHERE k BETWEEN -30 AND 30 ORDER BY k) s;
RESET enable_seqscan; RESET enable_bitmapscan;
SELECT array_agg(k ORDER BY k) FROM cl WHERE k BETWEEN -30 AND 30;
-- PostgreSQL's own rules still hold: no CLUSTER on a partial index
CREATE INDEX cl_part ON cl USING dex (k) WHERE k > 0;
CLUSTER cl USING cl_part;
ALTER TABLE cl CLUSTER ON cl_k;

DROP TABLE ios_int2, ios_int4, ios_int8, ios_oid, ios_bool, ios_time, ios_date, ios_ts, ios_tstz,
    ios_dom, ios_f8, ios_f4, iv, cl;
DROP DOMAIN posint;
DROP FUNCTION rt_check(anyarray);
DROP FUNCTION ios_check(text, text);
DROP FUNCTION count_check(text);
