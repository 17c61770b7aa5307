--
-- dex_build: CREATE INDEX on every supported type, plans and results
--
CREATE EXTENSION dex;

-- Compare a query's result through the dex index (plain index scan, then
-- bitmap scan) with a sequential scan. Returns 'ok <rows>' or 'MISMATCH'.
CREATE FUNCTION dex_same(q text, ordered bool DEFAULT false) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  agg text := CASE WHEN ordered THEN 'string_agg(x::text, '','')'
                   ELSE 'string_agg(x::text, '','' ORDER BY x::text)' END;
  r_idx text; r_bmp text; r_seq text; n bigint;
BEGIN
  PERFORM set_config('enable_seqscan', 'off', true);
  PERFORM set_config('enable_bitmapscan', 'off', true);
  PERFORM set_config('enable_indexscan', 'on', true);
  EXECUTE format('SELECT %s FROM (%s) x', agg, q) INTO r_idx;
  IF NOT ordered THEN
    PERFORM set_config('enable_indexscan', 'off', true);
    PERFORM set_config('enable_bitmapscan', 'on', true);
    EXECUTE format('SELECT %s FROM (%s) x', agg, q) INTO r_bmp;
  ELSE
    r_bmp := r_idx;
  END IF;
  PERFORM set_config('enable_seqscan', 'on', true);
  PERFORM set_config('enable_indexscan', 'off', true);
  PERFORM set_config('enable_bitmapscan', 'off', true);
  EXECUTE format('SELECT %s, count(*) FROM (%s) x', agg, q) INTO r_seq, n;
  PERFORM set_config('enable_indexscan', 'on', true);
  PERFORM set_config('enable_bitmapscan', 'on', true);
  IF r_idx IS NOT DISTINCT FROM r_seq AND r_bmp IS NOT DISTINCT FROM r_seq THEN
    RETURN 'ok ' || n;
  END IF;
  RETURN 'MISMATCH';
END $$;

SELECT setseed(0.42);
CREATE TABLE dt (id int, i2 int2, i4 int4, i8 int8, d date, ts timestamp,
                 tz timestamptz, o oid);
INSERT INTO dt
SELECT g,
       CASE WHEN g % 23 = 0 THEN NULL ELSE (random() * 2000 - 1000)::int2 END,
       CASE WHEN g % 29 = 0 THEN NULL ELSE (g * 7919) % 5003 - 2500 END,
       CASE WHEN g % 31 = 0 THEN NULL ELSE ((random() - 0.5) * 1e15)::int8 END,
       CASE WHEN g % 37 = 0 THEN NULL ELSE date '2000-01-01' + (g % 3650) END,
       CASE WHEN g % 41 = 0 THEN NULL ELSE timestamp '2020-01-01' + (g % 5000) * interval '1 minute' END,
       CASE WHEN g % 43 = 0 THEN NULL ELSE timestamptz '2020-01-01 00:00+00' + (g % 7000) * interval '17 seconds' END,
       CASE WHEN g % 47 = 0 THEN NULL ELSE (g * 104729::int8 % 4294967295)::oid END
FROM generate_series(1, 20000) g;
INSERT INTO dt VALUES (20001, 32767, 2147483647, 9223372036854775807, 'infinity',
                       'infinity', 'infinity', 4294967295);
INSERT INTO dt VALUES (20002, -32768, -2147483648, -9223372036854775808, '-infinity',
                       '-infinity', '-infinity', 0);

CREATE INDEX dt_i2 ON dt USING dex (i2);
CREATE INDEX dt_i4 ON dt USING dex (i4);
CREATE INDEX dt_i8 ON dt USING dex (i8) WITH (fillfactor = 70);
CREATE INDEX dt_d ON dt USING dex (d);
CREATE INDEX dt_ts ON dt USING dex (ts);
CREATE INDEX dt_tz ON dt USING dex (tz);
CREATE INDEX dt_o ON dt USING dex (o);
ANALYZE dt;

-- every index holds one entry per row (NULLs included)
SELECT c.relname, (dex_check(c.oid)).entries = 20002 AS all_entries
FROM pg_class c JOIN pg_am a ON a.oid = c.relam
WHERE a.amname = 'dex' AND c.relname LIKE 'dt\_%' ORDER BY 1;

-- operator classes validate
SELECT opcname, amvalidate(opc.oid)
FROM pg_opclass opc JOIN pg_am am ON am.oid = opc.opcmethod
WHERE am.amname = 'dex' ORDER BY 1;

-- empty table
CREATE TABLE dempty (k int4);
CREATE INDEX dempty_k ON dempty USING dex (k);
SELECT * FROM dex_check('dempty_k');
SET enable_seqscan = off;
SELECT * FROM dempty WHERE k = 1;
SELECT * FROM dempty ORDER BY k DESC LIMIT 1;
RESET enable_seqscan;

-- plans chosen with enable_seqscan on
EXPLAIN (COSTS OFF) SELECT * FROM dt WHERE i4 = 42;
EXPLAIN (COSTS OFF) SELECT * FROM dt WHERE i4 < -2490;
EXPLAIN (COSTS OFF) SELECT * FROM dt WHERE i4 BETWEEN 100 AND 105;
EXPLAIN (COSTS OFF) SELECT * FROM dt WHERE i4 > 2495 AND i4 <= 2497;
EXPLAIN (COSTS OFF) SELECT * FROM dt WHERE i4 = ANY ('{1,2,3}');
EXPLAIN (COSTS OFF) SELECT * FROM dt WHERE i4 IS NULL;
EXPLAIN (COSTS OFF) SELECT * FROM dt ORDER BY i4 LIMIT 5;
EXPLAIN (COSTS OFF) SELECT * FROM dt ORDER BY i4 DESC LIMIT 5;
EXPLAIN (COSTS OFF) SELECT * FROM dt WHERE d = '2001-01-01';
EXPLAIN (COSTS OFF) SELECT * FROM dt ORDER BY ts LIMIT 5;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM dt WHERE i4 IS NOT NULL;
RESET enable_seqscan;

-- results equal a sequential scan's
SELECT dex_same('SELECT id FROM dt WHERE i4 = 42');
SELECT dex_same('SELECT id FROM dt WHERE i4 = 100000');
SELECT dex_same('SELECT id FROM dt WHERE i4 < -2490');
SELECT dex_same('SELECT id FROM dt WHERE i4 <= -2490');
SELECT dex_same('SELECT id FROM dt WHERE i4 > 2490');
SELECT dex_same('SELECT id FROM dt WHERE i4 >= 2490');
SELECT dex_same('SELECT id FROM dt WHERE i4 BETWEEN -3 AND 3');
SELECT dex_same('SELECT id FROM dt WHERE i4 > -10 AND i4 < 10 AND i4 <> 0 AND i4 >= -5');
SELECT dex_same('SELECT id FROM dt WHERE i4 > 5 AND i4 < 3');
SELECT dex_same('SELECT id FROM dt WHERE i4 = ANY (''{5,-7,5,NULL,2000,99999}'')');
SELECT dex_same('SELECT id FROM dt WHERE i4 = ANY (''{}'')');
SELECT dex_same('SELECT id FROM dt WHERE i4 = ANY (''{1,2,3,4}'') AND i4 = ANY (''{3,4,5}'')');
SELECT dex_same('SELECT id FROM dt WHERE i4 = ANY (''{1,2,3,4}'') AND i4 > 2');
SELECT dex_same('SELECT id FROM dt WHERE i4 < ANY (''{-2495,-2490}'')');
SELECT dex_same('SELECT id FROM dt WHERE i4 IS NULL');
SELECT dex_same('SELECT id FROM dt WHERE i4 IS NOT NULL');
SELECT dex_same('SELECT id FROM dt WHERE i4 IS NULL AND i4 > 5');
SELECT dex_same('SELECT id FROM dt WHERE i4 = NULL');
SELECT dex_same('SELECT i4 FROM dt ORDER BY i4 LIMIT 50', true);
SELECT dex_same('SELECT i4 FROM dt ORDER BY i4 DESC LIMIT 50', true);
SELECT dex_same('SELECT i4 FROM dt ORDER BY i4 DESC NULLS LAST LIMIT 50', true);
SELECT dex_same('SELECT i4 FROM dt WHERE i4 > 2400 ORDER BY i4 DESC', true);
SELECT dex_same('SELECT i4 FROM dt WHERE i4 = ANY (''{9,3,-1}'') ORDER BY i4', true);
SELECT dex_same('SELECT i4 FROM dt WHERE i4 = ANY (''{9,3,-1}'') ORDER BY i4 DESC', true);
SELECT dex_same('SELECT id FROM dt WHERE i2 = 17');
SELECT dex_same('SELECT id FROM dt WHERE i2 < -990');
SELECT dex_same('SELECT id FROM dt WHERE i2 >= 32767 OR i2 <= -32768');
SELECT dex_same('SELECT id FROM dt WHERE i8 > 499000000000000');
SELECT dex_same('SELECT id FROM dt WHERE i8 < -499000000000000');
SELECT dex_same('SELECT id FROM dt WHERE i8 = 9223372036854775807');
SELECT dex_same('SELECT id FROM dt WHERE d = ''2001-01-01''');
SELECT dex_same('SELECT id FROM dt WHERE d BETWEEN ''2005-03-01'' AND ''2005-03-05''');
SELECT dex_same('SELECT id FROM dt WHERE d > ''2009-12-25''');
SELECT dex_same('SELECT id FROM dt WHERE d < ''2000-01-03''');
SELECT dex_same('SELECT id FROM dt WHERE ts >= ''2020-01-04 10:00'' AND ts < ''2020-01-04 10:10''');
SELECT dex_same('SELECT id FROM dt WHERE ts = ''infinity''');
SELECT dex_same('SELECT id FROM dt WHERE tz > ''2020-01-02 08:00+00''');
SELECT dex_same('SELECT id FROM dt WHERE tz = ''-infinity''');
SELECT dex_same('SELECT id FROM dt WHERE o > 4294000000');
SELECT dex_same('SELECT id FROM dt WHERE o < 1000000');
SELECT dex_same('SELECT id FROM dt WHERE o = ANY (''{0,4294967295,104729}'')');
SELECT dex_same('SELECT d FROM dt ORDER BY d LIMIT 20', true);
SELECT dex_same('SELECT tz FROM dt ORDER BY tz DESC LIMIT 20', true);
SELECT dex_same('SELECT o FROM dt ORDER BY o LIMIT 20', true);

-- cursor changing direction
CREATE TABLE dc (k int4);
INSERT INTO dc SELECT g FROM generate_series(10, 1, -1) g;
CREATE INDEX dc_k ON dc USING dex (k);
BEGIN;
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
DECLARE c SCROLL CURSOR FOR SELECT k FROM dc WHERE k BETWEEN 3 AND 7 ORDER BY k;
FETCH 3 FROM c;
FETCH BACKWARD 2 FROM c;
FETCH FORWARD 4 FROM c;
FETCH FORWARD 2 FROM c;
FETCH BACKWARD 2 FROM c;
FETCH LAST FROM c;
FETCH ABSOLUTE 1 FROM c;
FETCH BACKWARD 1 FROM c;
FETCH NEXT FROM c;
CLOSE c;
DECLARE c2 SCROLL CURSOR FOR SELECT k FROM dc WHERE k = ANY ('{2,4,6,8}') ORDER BY k DESC;
FETCH 2 FROM c2;
FETCH BACKWARD 1 FROM c2;
FETCH ALL FROM c2;
FETCH BACKWARD ALL FROM c2;
COMMIT;
