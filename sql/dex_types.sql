-- Key types beyond the integers: float4/float8 (one family), bool, time, and
-- date/timestamp/timestamptz (one family). For each, a table with edge values
-- gets a dex index; every predicate is run through the dex index (index scan,
-- bitmap scan, ordered scans forward and backward) and through a sequential
-- scan, and types_check() counts the disagreements and the plans that did not
-- use the dex index. Every count below must be 0. Deterministic via setseed().
CREATE EXTENSION IF NOT EXISTS dex;
SELECT setseed(0.15);

-- The operator classes are valid (btree's rules, type pairs dex converts).
SELECT opcname, amvalidate(oid) FROM pg_opclass
 WHERE opcmethod = (SELECT oid FROM pg_am WHERE amname = 'dex') ORDER BY opcname;
SELECT opfname, count(*) AS operators FROM pg_amop JOIN pg_opfamily f ON f.oid = amopfamily
 WHERE opfmethod = (SELECT oid FROM pg_am WHERE amname = 'dex') GROUP BY opfname ORDER BY opfname;
-- ... and one that breaks them is reported: an operator class of only "<",
-- and a family with an int4 / text pair dex cannot place one in the other.
CREATE OPERATOR FAMILY dex_broken_ops USING dex;
CREATE OPERATOR CLASS dex_broken_int4 FOR TYPE int4 USING dex FAMILY dex_broken_ops AS
  OPERATOR 1 < , FUNCTION 1 btint4cmp(int4, int4);
SELECT amvalidate(oid) FROM pg_opclass WHERE opcname = 'dex_broken_int4';
CREATE FUNCTION dex_int4_text_lt(int4, text) RETURNS bool LANGUAGE sql IMMUTABLE AS 'SELECT $1::text < $2';
CREATE OPERATOR <<< (LEFTARG = int4, RIGHTARG = text, FUNCTION = dex_int4_text_lt);
ALTER OPERATOR FAMILY dex_broken_ops USING dex ADD OPERATOR 1 <<< (int4, text);
SELECT amvalidate(oid) FROM pg_opclass WHERE opcname = 'dex_broken_int4';
DROP OPERATOR FAMILY dex_broken_ops USING dex;
DROP OPERATOR <<< (int4, text);
DROP FUNCTION dex_int4_text_lt(int4, text);

-- Runs every predicate (over column v of tbl) through idx in four plans and
-- through a sequential scan; returns the number of answers that differ, plus
-- plans that did not use idx (or sorted), plus entries an ordered dex scan
-- returned out of its scan direction's order. Ordered answers are the first
-- 40 rows compared as multisets of norm(v) (rows equal in SQL come back in
-- any order among themselves; norm makes -0 and 0 print alike).
CREATE FUNCTION types_check(tbl regclass, idx text, preds text[], norm text DEFAULT 'v')
RETURNS int LANGUAGE plpgsql AS $$
DECLARE p text; m text; q text; inner_q text; plan text; line text; got text; want text;
  inversions int; bad int := 0;
BEGIN
  FOREACH p IN ARRAY preds || ARRAY['true'] LOOP
    FOREACH m IN ARRAY ARRAY['index', 'bitmap', 'asc', 'desc'] LOOP
      CONTINUE WHEN p = 'true' AND m IN ('index', 'bitmap');  -- nothing to index
      IF m IN ('asc', 'desc') THEN
        inner_q := format('SELECT v FROM %s WHERE %s ORDER BY v %s LIMIT 40', tbl, p, m);
        q := format('SELECT string_agg((%s)::text, '' '' ORDER BY v) FROM (%s) s', norm, inner_q);
      ELSE
        q := format('SELECT string_agg(id::text, '' '' ORDER BY id) FROM %s WHERE %s', tbl, p);
      END IF;
      -- reference: sequential scan
      PERFORM set_config('enable_seqscan', 'on', true);
      PERFORM set_config('enable_indexscan', 'off', true);
      PERFORM set_config('enable_bitmapscan', 'off', true);
      PERFORM set_config('enable_sort', 'on', true);
      EXECUTE q INTO want;
      -- through the dex index
      PERFORM set_config('enable_seqscan', 'off', true);
      PERFORM set_config('enable_indexscan', CASE WHEN m = 'bitmap' THEN 'off' ELSE 'on' END, true);
      PERFORM set_config('enable_bitmapscan', CASE WHEN m = 'bitmap' THEN 'on' ELSE 'off' END, true);
      PERFORM set_config('enable_sort', 'off', true);
      plan := '';
      FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP plan := plan || line || E'\n'; END LOOP;
      IF position(idx IN plan) = 0 OR (m IN ('asc', 'desc') AND position('Sort' IN plan) > 0) THEN
        bad := bad + 1;
        RAISE NOTICE 'plan does not scan % (in order): % (%)', idx, p, m;
      END IF;
      EXECUTE q INTO got;
      IF got IS DISTINCT FROM want THEN
        bad := bad + 1;
        RAISE NOTICE 'mismatch (%): %  dex: %  seq: %', m, p, left(got, 200), left(want, 200);
      END IF;
      IF m IN ('asc', 'desc') THEN
        -- (the planner drops ORDER BY v when v = constant: then the scan is forward)
        EXECUTE format('SELECT count(*) FROM (SELECT v, lag(v) OVER () AS prev FROM (%s) s) s2 WHERE v %s prev',
                       inner_q, CASE WHEN position('Backward' IN plan) > 0 THEN '>' ELSE '<' END) INTO inversions;
        IF inversions > 0 THEN
          bad := bad + 1;
          RAISE NOTICE 'out of order (%): %', m, p;
        END IF;
      END IF;
    END LOOP;
  END LOOP;
  PERFORM set_config('enable_seqscan', 'on', true);
  PERFORM set_config('enable_indexscan', 'on', true);
  PERFORM set_config('enable_bitmapscan', 'on', true);
  PERFORM set_config('enable_sort', 'on', true);
  RETURN bad;
END $$;

-- "v op c" for every strategy and constant; BETWEEN each adjacent pair;
-- = ANY and < ANY / > ANY of all constants (with a NULL); IS [NOT] NULL.
CREATE FUNCTION types_preds(consts text[]) RETURNS text[] LANGUAGE sql AS $$
  SELECT array_agg(p) FROM (
    SELECT format('v %s %s', op, c) AS p FROM unnest(consts) c, unnest(ARRAY['<', '<=', '=', '>=', '>']) op
    UNION ALL
    SELECT format('v BETWEEN %s AND %s', consts[i], consts[i + 1]) FROM generate_subscripts(consts, 1) i WHERE i < array_length(consts, 1)
    UNION ALL
    SELECT format('v %s ANY (ARRAY[%s, NULL])', op, array_to_string(consts, ', ')) FROM unnest(ARRAY['=', '<', '>=']) op
    UNION ALL
    SELECT format('v = ANY (ARRAY[%s])', consts[1])
    UNION ALL
    SELECT unnest(ARRAY['v IS NULL', 'v IS NOT NULL'])
  ) s $$;

-- ---------------------------------------------------------------- floats
CREATE TABLE t_f8 (id serial, v float8);
INSERT INTO t_f8 (v) SELECT unnest(ARRAY['-Infinity', '-1e308', '-1.5', '-1', '-0', '0', '-0', '0', '4.9e-324',
  '2.2250738585072014e-308', '1e-50', '0.1', '0.1', '1', '1.5', '3.4028234663852886e38', '1e308', 'Infinity', 'Infinity',
  'NaN', 'NaN', '-NaN', NULL, NULL]::float8[]);
INSERT INTO t_f8 (v) SELECT CASE WHEN random() < 0.03 THEN NULL WHEN random() < 0.1 THEN 'NaN'
  ELSE round((random() * 200 - 100)::numeric, 1)::float8 END FROM generate_series(1, 2000);
INSERT INTO t_f8 (v) SELECT (0.1::float4)::float8;  -- 0.1f widened: between 0.1 and 0.11
CREATE INDEX t_f8_dex ON t_f8 USING dex (v);
CREATE TABLE t_f4 (id serial, v float4);
INSERT INTO t_f4 (v) SELECT unnest(ARRAY['-Infinity', '-3.4028235e38', '-1.5', '-0', '0', '-0', '1.4e-45', '1e-30',
  '0.1', '0.1', '1', '3.4028235e38', 'Infinity', 'NaN', 'NaN', NULL, NULL]::float4[]);
INSERT INTO t_f4 (v) SELECT CASE WHEN random() < 0.03 THEN NULL WHEN random() < 0.1 THEN 'NaN'
  ELSE round((random() * 200 - 100)::numeric, 1)::float4 END FROM generate_series(1, 2000);
CREATE INDEX t_f4_dex ON t_f4 USING dex (v);

SET enable_seqscan = off; SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM t_f4 WHERE v < 0.1::float8;
EXPLAIN (COSTS OFF) SELECT * FROM t_f8 WHERE v = ANY (ARRAY[0.1::float4, 1::float4]);
RESET enable_seqscan; RESET enable_bitmapscan;
-- btree's float order: NaN above Infinity, -0 = 0
SELECT count(*) FILTER (WHERE v = 'NaN') AS nans, count(*) FILTER (WHERE v = 0) AS zeros,
       count(*) FILTER (WHERE v > 'Infinity') AS above_inf FROM t_f8;

SELECT types_check('t_f8', 't_f8_dex', types_preds(ARRAY['''-Infinity''::float8', '-1.5::float8', '''-0''::float8',
  '0::float8', '''4.9e-324''::float8', '0.1::float8', '50::float8', '''Infinity''::float8', '''NaN''::float8']), 'v + 0') AS f8_same_type;
SELECT types_check('t_f8', 't_f8_dex', types_preds(ARRAY['''-Infinity''::float4', '''-0''::float4', '0.1::float4',
  '1.5::float4', '''3.4028235e38''::float4', '''Infinity''::float4', '''NaN''::float4']), 'v + 0') AS f8_float4_consts;
SELECT types_check('t_f4', 't_f4_dex', types_preds(ARRAY['''-Infinity''::float4', '''-0''::float4', '0::float4',
  '0.1::float4', '50::float4', '''Infinity''::float4', '''NaN''::float4']), 'v + 0') AS f4_same_type;
SELECT types_check('t_f4', 't_f4_dex', types_preds(ARRAY['''-1e300''::float8', '''-0''::float8', '1e-50::float8',
  '0.1::float8', '0.10000000149011612::float8', '1.5::float8', '''3.4028235e38''::float8', '1e300::float8',
  '''Infinity''::float8', '''NaN''::float8']), 'v + 0') AS f4_float8_consts;

-- ---------------------------------------------------------------- bool
CREATE TABLE t_bool (id serial, v bool);
INSERT INTO t_bool (v) SELECT CASE WHEN random() < 0.05 THEN NULL ELSE random() < 0.3 END FROM generate_series(1, 1500);
CREATE INDEX t_bool_dex ON t_bool USING dex (v);
-- (= true and = false become plain boolean tests, which only btree's own
-- boolean families index; the other strategies and = ANY reach dex)
SELECT types_check('t_bool', 't_bool_dex', ARRAY['v < true', 'v <= false', 'v >= true', 'v > false', 'v <= true',
  'v >= false', 'v < false', 'v > true', 'v = ANY (ARRAY[true])', 'v = ANY (ARRAY[false, NULL])',
  'v = ANY (ARRAY[false, true])', 'v IS NULL', 'v IS NOT NULL']) AS bool_mismatches;

-- ---------------------------------------------------------------- time
CREATE TABLE t_time (id serial, v time);
INSERT INTO t_time (v) SELECT unnest(ARRAY['00:00', '00:00', '00:00:00.000001', '12:00', '23:59:59.999999', '24:00', '24:00', NULL]::time[]);
INSERT INTO t_time (v) SELECT CASE WHEN random() < 0.03 THEN NULL
  ELSE '00:00'::time + (floor(random() * 1440) || ' minutes')::interval END FROM generate_series(1, 2000);
CREATE INDEX t_time_dex ON t_time USING dex (v);
SELECT types_check('t_time', 't_time_dex', types_preds(ARRAY['''00:00''::time', '''06:30''::time',
  '''12:00''::time', '''12:00:00.5''::time', '''23:59:59.999999''::time', '''24:00''::time'])) AS time_mismatches;

-- ---------------------------------------------------------------- date, timestamp, timestamptz
CREATE TABLE t_date (id serial, v date);
INSERT INTO t_date (v) SELECT unnest(ARRAY['-infinity', '-infinity', '4713-11-24 BC', '4713-11-25 BC', '2000-01-01',
  '2021-03-13', '2021-03-14', '2021-03-14', '2021-03-15', '294276-12-31', '294277-01-01', '294277-01-02',
  '5874897-12-31', 'infinity', NULL]::date[]);
INSERT INTO t_date (v) SELECT CASE WHEN random() < 0.03 THEN NULL
  ELSE '2021-01-01'::date + (random() * 200)::int END FROM generate_series(1, 2000);
CREATE INDEX t_date_dex ON t_date USING dex (v);

CREATE TABLE t_ts (id serial, v timestamp);
INSERT INTO t_ts (v) SELECT unnest(ARRAY['-infinity', '4713-11-24 00:00 BC', '4713-11-24 00:00:01 BC', '2000-01-01',
  '2021-03-14 00:00', '2021-03-14 02:30', '2021-03-14 02:30', '2021-03-14 03:00', '2021-11-07 01:30',
  '294276-12-31 23:00', '294276-12-31 23:59:59.999999', 'infinity', 'infinity', NULL]::timestamp[]);
INSERT INTO t_ts (v) SELECT CASE WHEN random() < 0.03 THEN NULL
  ELSE '2021-03-13 20:00'::timestamp + (floor(random() * 600) * 10 || ' minutes')::interval END FROM generate_series(1, 2000);
CREATE INDEX t_ts_dex ON t_ts USING dex (v);

CREATE TABLE t_tstz (id serial, v timestamptz);
INSERT INTO t_tstz (v) SELECT unnest(ARRAY['-infinity', '4713-11-24 00:00+00 BC', '4713-11-24 05:00+00 BC',
  '2000-01-01 00:00+00', '2021-03-14 05:00+00', '2021-03-14 07:00+00', '2021-03-14 07:30+00', '2021-03-14 07:30+00',
  '2021-11-07 05:30+00', '2021-11-07 06:30+00', '294276-12-31 20:00+00', '294276-12-31 23:59:59.999999+00',
  'infinity', NULL]::timestamptz[]);
INSERT INTO t_tstz (v) SELECT CASE WHEN random() < 0.03 THEN NULL
  ELSE '2021-03-14 00:00+00'::timestamptz + (floor(random() * 600) * 10 || ' minutes')::interval END FROM generate_series(1, 2000);
CREATE INDEX t_tstz_dex ON t_tstz USING dex (v);

SET enable_seqscan = off; SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM t_date WHERE v < '2021-03-14 12:00'::timestamp;
EXPLAIN (COSTS OFF) SELECT * FROM t_tstz WHERE v >= '2021-03-14'::date ORDER BY v DESC LIMIT 3;
RESET enable_seqscan; RESET enable_bitmapscan;

-- same-type keys, in any time zone
SELECT types_check('t_date', 't_date_dex', types_preds(ARRAY['''-infinity''::date', '''4713-11-24 BC''::date',
  '''2021-03-14''::date', '''294277-01-01''::date', '''5874897-12-31''::date', '''infinity''::date'])) AS date_same_type;
SELECT types_check('t_ts', 't_ts_dex', types_preds(ARRAY['''-infinity''::timestamp', '''4713-11-24 00:00 BC''::timestamp',
  '''2021-03-14 02:30''::timestamp', '''294276-12-31 23:59:59.999999''::timestamp', '''infinity''::timestamp'])) AS ts_same_type;
SELECT types_check('t_tstz', 't_tstz_dex', types_preds(ARRAY['''-infinity''::timestamptz', '''2021-03-14 07:30+00''::timestamptz',
  '''294276-12-31 23:59:59.999999+00''::timestamptz', '''infinity''::timestamptz'])) AS tstz_same_type;

-- date column, timestamp keys: midnight is exact, 12:00 falls between two
-- dates, dates past timestamp's range lie between its end and infinity
SELECT types_check('t_date', 't_date_dex', types_preds(ARRAY['''-infinity''::timestamp', '''4713-11-24 00:00 BC''::timestamp',
  '''4713-11-24 00:00:01 BC''::timestamp', '''2021-03-14 00:00''::timestamp', '''2021-03-14 12:00''::timestamp',
  '''294276-12-31 23:59:59.999999''::timestamp', '''infinity''::timestamp'])) AS date_timestamp_keys;
-- timestamp column, date keys (294277-01-01 overflows timestamp)
SELECT types_check('t_ts', 't_ts_dex', types_preds(ARRAY['''-infinity''::date', '''4713-11-24 BC''::date',
  '''2021-03-14''::date', '''294276-12-31''::date', '''294277-01-01''::date', '''5874897-12-31''::date',
  '''infinity''::date'])) AS timestamp_date_keys;

-- keys that involve timestamptz, in three session time zones: UTC, one west
-- of it with DST (2021-03-14 02:30 is in its spring-forward gap, 2021-11-07
-- 01:30 is ambiguous), one east of it (midnight of the first date is before
-- timestamptz's range there)
CREATE FUNCTION types_tz_checks() RETURNS TABLE (key_pair text, mismatches int) LANGUAGE sql AS $$
  SELECT 'date column, timestamptz keys', types_check('t_date', 't_date_dex', types_preds(ARRAY['''-infinity''::timestamptz',
    '''4713-11-24 00:00+00 BC''::timestamptz', '''2021-03-14 00:00+00''::timestamptz', '''2021-03-14 05:00+00''::timestamptz',
    '''2021-03-14 12:00+00''::timestamptz', '''294276-12-31 23:59:59.999999+00''::timestamptz', '''infinity''::timestamptz']))
  UNION ALL
  SELECT 'timestamptz column, date keys', types_check('t_tstz', 't_tstz_dex', types_preds(ARRAY['''-infinity''::date',
    '''4713-11-24 BC''::date', '''2021-03-14''::date', '''2021-11-07''::date', '''294276-12-31''::date', '''294277-01-01''::date',
    '''infinity''::date']))
  UNION ALL
  SELECT 'timestamptz column, timestamp keys', types_check('t_tstz', 't_tstz_dex', types_preds(ARRAY['''-infinity''::timestamp',
    '''4713-11-24 00:00 BC''::timestamp', '''2021-03-14 02:00''::timestamp', '''2021-03-14 02:30''::timestamp',
    '''2021-03-14 03:00''::timestamp', '''2021-11-07 01:30''::timestamp', '''294276-12-31 23:59:59.999999''::timestamp',
    '''infinity''::timestamp']))
  UNION ALL
  SELECT 'timestamp column, timestamptz keys', types_check('t_ts', 't_ts_dex', types_preds(ARRAY['''-infinity''::timestamptz',
    '''4713-11-24 00:00+00 BC''::timestamptz', '''2021-03-14 07:00+00''::timestamptz', '''2021-03-14 07:30+00''::timestamptz',
    '''2021-03-14 12:00+00''::timestamptz', '''2021-11-07 06:30+00''::timestamptz',
    '''294276-12-31 23:59:59.999999+00''::timestamptz', '''infinity''::timestamptz']))
$$;
SET timezone = 'UTC';
SELECT * FROM types_tz_checks();
SET timezone = 'America/New_York';
SELECT * FROM types_tz_checks();
SET timezone = 'Asia/Tokyo';
SELECT * FROM types_tz_checks();
RESET timezone;

-- the trees hold every row
SELECT 't_f8' AS tbl, entries = (SELECT count(*) FROM t_f8) AS all_entries FROM dex_check('t_f8_dex')
UNION ALL SELECT 't_f4', entries = (SELECT count(*) FROM t_f4) FROM dex_check('t_f4_dex')
UNION ALL SELECT 't_bool', entries = (SELECT count(*) FROM t_bool) FROM dex_check('t_bool_dex')
UNION ALL SELECT 't_time', entries = (SELECT count(*) FROM t_time) FROM dex_check('t_time_dex')
UNION ALL SELECT 't_date', entries = (SELECT count(*) FROM t_date) FROM dex_check('t_date_dex')
UNION ALL SELECT 't_ts', entries = (SELECT count(*) FROM t_ts) FROM dex_check('t_ts_dex')
UNION ALL SELECT 't_tstz', entries = (SELECT count(*) FROM t_tstz) FROM dex_check('t_tstz_dex');

DROP TABLE t_f8, t_f4, t_bool, t_time, t_date, t_ts, t_tstz;
DROP FUNCTION types_check(regclass, text, text[], text), types_preds(text[]), types_tz_checks();
