-- Byte-string keys (src/README.md "Keys", extension/dexentry.c): text under
-- C and ICU collations, varchar, bpchar, uuid, numeric, bytea, interval,
-- timetz, several key columns, DESC / NULLS FIRST columns. Every predicate
-- runs through the dex index (index scan, bitmap scan, and ordered scans
-- both ways) and through a sequential scan; bytes_check() counts the
-- disagreements and the plans that did not use the index (or sorted).
-- Every count below must be 0. Deterministic via setseed().
CREATE EXTENSION IF NOT EXISTS dex;
SELECT setseed(0.27);

-- preds over tbl through idx; ord: the index's ORDER BY (ascending scan
-- order), rev: the same backwards. Ordered answers: the first 50 rows'
-- sel (the ordering columns, normalized so that values equal in SQL print
-- alike: rows equal in them come back in any order among themselves), in order.
CREATE FUNCTION bytes_check(tbl regclass, idx text, preds text[], sel text, ord text, rev text)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE p text; m text; q text; plan text; line text; got text; want text; bad int := 0;
BEGIN
  FOREACH p IN ARRAY preds || ARRAY['true'] LOOP
    FOREACH m IN ARRAY ARRAY['index', 'bitmap', 'asc', 'desc'] LOOP
      CONTINUE WHEN p = 'true' AND m IN ('index', 'bitmap');
      IF m IN ('asc', 'desc') THEN
        q := format('SELECT string_agg(o, '' | '') FROM (SELECT (ROW(%s))::text AS o FROM %s WHERE %s ORDER BY %s LIMIT 50) s',
                    sel, tbl, p, CASE WHEN m = 'asc' THEN ord ELSE rev END);
      ELSE
        q := format('SELECT string_agg(id::text, '' '' ORDER BY id) FROM %s WHERE %s', tbl, p);
      END IF;
      PERFORM set_config('enable_seqscan', 'on', true);
      PERFORM set_config('enable_indexscan', 'off', true);
      PERFORM set_config('enable_bitmapscan', 'off', true);
      PERFORM set_config('enable_sort', 'on', true);
      EXECUTE q INTO want;
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
        RAISE NOTICE 'mismatch (%): %  dex: %  seq: %', m, p, left(got, 300), left(want, 300);
      END IF;
    END LOOP;
  END LOOP;
  PERFORM set_config('enable_seqscan', 'on', true);
  PERFORM set_config('enable_indexscan', 'on', true);
  PERFORM set_config('enable_bitmapscan', 'on', true);
  PERFORM set_config('enable_sort', 'on', true);
  RETURN bad;
END $$;

-- "col op c" for every strategy and constant, BETWEEN adjacent constants,
-- = ANY of all constants (an array of typ), IS [NOT] NULL.
CREATE FUNCTION bytes_preds(col text, typ text, consts text[]) RETURNS text[] LANGUAGE sql AS $$
  SELECT array_agg(p) FROM (
    SELECT format('%s %s %s', col, op, c) AS p FROM unnest(consts) c, unnest(ARRAY['<', '<=', '=', '>=', '>']) op
    UNION ALL
    SELECT format('%s BETWEEN %s AND %s', col, consts[i], consts[i + 1])
      FROM generate_subscripts(consts, 1) i WHERE i < array_length(consts, 1)
    UNION ALL
    SELECT format('%s = ANY (ARRAY[%s]::%s[])', col, array_to_string(consts, ', '), typ)
    UNION ALL
    SELECT format('%s IS NULL', col) UNION ALL SELECT format('%s IS NOT NULL', col)
  ) s $$;

-- ---------------------------------------------------------------- text
-- "a" vs "B" vs "Ä": C orders by bytes (B < a < Ä), ICU linguistically
-- (a < Ä < B); equal under neither.
CREATE TABLE t_txt (id serial, c text COLLATE "C", i text COLLATE "und-x-icu", v varchar(40), b char(6))
  WITH (autovacuum_enabled = off);
INSERT INTO t_txt (c, i, v, b) SELECT x, x, x, x FROM unnest(ARRAY['a', 'A', 'B', 'b', 'Ä', 'ä', 'ab', 'a b', 'ß', 'ss',
  '', ' ', 'z', 'Z', 'é', 'e', 'ae', 'æ', NULL]) x;
INSERT INTO t_txt (c, i, v, b)
  SELECT s, s, s, s FROM (SELECT CASE WHEN random() < 0.03 THEN NULL
    ELSE substr('aAbBäÄcCzZ ', 1 + (random() * 10)::int, 1) || substr(md5(random()::text), 1, (random() * 5)::int) END AS s
    FROM generate_series(1, 2500)) g;
CREATE INDEX t_txt_c ON t_txt USING dex (c);
CREATE INDEX t_txt_i ON t_txt USING dex (i);
CREATE INDEX t_txt_v ON t_txt USING dex (v);
CREATE INDEX t_txt_b ON t_txt USING dex (b);
SELECT bytes_check('t_txt', 't_txt_c', bytes_preds('c', 'text', ARRAY['''a''', '''B''', '''Ä''', '''ab''', '''''', '''z''']), 'c', 'c', 'c DESC');
SELECT bytes_check('t_txt', 't_txt_i', bytes_preds('i', 'text', ARRAY['''a''', '''B''', '''Ä''', '''ab''', '''ss''', '''z''']), 'i', 'i', 'i DESC');
SELECT bytes_check('t_txt', 't_txt_v', bytes_preds('v', 'varchar', ARRAY['''a''', '''B''', '''Ä''', '''a b''']), 'v', 'v', 'v DESC');
SELECT bytes_check('t_txt', 't_txt_b', bytes_preds('b', 'bpchar', ARRAY['''a''', '''a  ''', '''B''', '''ab''']), 'b', 'b', 'b DESC');
-- LIKE 'a%' on a C column is a range scan, as with btree
SELECT bytes_check('t_txt', 't_txt_c', ARRAY['c LIKE ''a%''', 'c >= ''a'' AND c < ''b'''], 'c', 'c', 'c DESC');
SET enable_seqscan = off; SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT c FROM t_txt WHERE c LIKE 'ab%' ORDER BY c;
EXPLAIN (COSTS OFF) SELECT i FROM t_txt WHERE i > 'a' ORDER BY i DESC LIMIT 3;
RESET enable_seqscan; RESET enable_bitmapscan;
-- ICU order of the three, through the index: a < Ä < B
SET enable_seqscan = off; SET enable_bitmapscan = off;
SELECT string_agg(i, ' ') FROM (SELECT DISTINCT ON (i) i FROM t_txt WHERE i IN ('a', 'B', 'Ä') ORDER BY i) s;
RESET enable_seqscan; RESET enable_bitmapscan;

-- ---------------------------------------------------------------- uuid, numeric, bytea, interval, timetz
CREATE TABLE t_misc (id serial, u uuid, n numeric, y bytea, iv interval, tz timetz) WITH (autovacuum_enabled = off);
INSERT INTO t_misc (u, n, y, iv, tz) VALUES
  ('00000000-0000-0000-0000-000000000000', 'NaN', '\x', '1 month', '12:00+02'),
  ('ffffffff-ffff-ffff-ffff-ffffffffffff', '-Infinity', '\x00', '30 days', '11:00+01'),
  ('12345678-1234-1234-1234-123456789abc', 'Infinity', '\x0000', '720 hours', '10:00+00'),
  (NULL, '-0.00', '\xff', '-1 day', '00:00-12'), (NULL, '1.0', '\x00ff', '0', '23:59:59+14'),
  (gen_random_uuid(), '1.00', NULL, NULL, NULL), (gen_random_uuid(), '123456.78', '\x0001', '1 year', '12:00+00');
INSERT INTO t_misc (u, n, y, iv, tz)
  SELECT CASE WHEN random() < 0.05 THEN NULL ELSE md5(random()::text)::uuid END,
         CASE WHEN random() < 0.05 THEN NULL WHEN random() < 0.05 THEN 'NaN' ELSE round((random() * 2000 - 1000)::numeric, (random() * 4)::int) END,
         CASE WHEN random() < 0.05 THEN NULL ELSE decode(substr(md5(random()::text), 1, 2 * (random() * 4)::int), 'hex') END,
         CASE WHEN random() < 0.05 THEN NULL ELSE make_interval(months => (random() * 3)::int, days => (random() * 60)::int) END,
         CASE WHEN random() < 0.05 THEN NULL ELSE make_time((random() * 23)::int, (random() * 59)::int, 0)::timetz END
    FROM generate_series(1, 2000);
CREATE INDEX t_misc_u ON t_misc USING dex (u);
CREATE INDEX t_misc_n ON t_misc USING dex (n);
CREATE INDEX t_misc_y ON t_misc USING dex (y);
CREATE INDEX t_misc_iv ON t_misc USING dex (iv);
CREATE INDEX t_misc_tz ON t_misc USING dex (tz);
SELECT bytes_check('t_misc', 't_misc_u', bytes_preds('u', 'uuid', ARRAY['''12345678-1234-1234-1234-123456789abc''', '''80000000-0000-0000-0000-000000000000''']), 'u', 'u', 'u DESC');
SELECT bytes_check('t_misc', 't_misc_n', bytes_preds('n', 'numeric', ARRAY['''-Infinity''', '''-0''', '''1''', '''1.000''', '''123456.78''', '''NaN''']), 'trim_scale(n)', 'n', 'n DESC');
SELECT bytes_check('t_misc', 't_misc_y', bytes_preds('y', 'bytea', ARRAY['''\x''', '''\x00''', '''\x00ff''', '''\x80''']), 'y', 'y', 'y DESC');
SELECT bytes_check('t_misc', 't_misc_iv', bytes_preds('iv', 'interval', ARRAY['''30 days''', '''1 month''', '''-1 day''', '''1 year''']), 'justify_interval(iv)', 'iv', 'iv DESC');
SELECT bytes_check('t_misc', 't_misc_tz', bytes_preds('tz', 'timetz', ARRAY['''12:00+02''', '''11:00+01''', '''12:00+00''']), 'tz', 'tz', 'tz DESC');

-- ---------------------------------------------------------------- several columns, DESC / NULLS FIRST
CREATE TABLE t_multi (id serial, a int, b text COLLATE "C", c numeric, d float8) WITH (autovacuum_enabled = off);
INSERT INTO t_multi (a, b, c, d)
  SELECT CASE WHEN random() < 0.05 THEN NULL ELSE (random() * 20)::int END,
         CASE WHEN random() < 0.05 THEN NULL ELSE substr(md5(random()::text), 1, 1 + (random() * 3)::int) END,
         CASE WHEN random() < 0.05 THEN NULL ELSE round((random() * 100)::numeric, 1) END,
         CASE WHEN random() < 0.05 THEN NULL ELSE round(random() * 10) END
    FROM generate_series(1, 3000);
CREATE INDEX t_multi_abc ON t_multi USING dex (a, b DESC NULLS FIRST, c);
CREATE INDEX t_multi_d ON t_multi USING dex (d DESC);        -- one float column, DESC: byte entries too
CREATE INDEX t_multi_dn ON t_multi USING dex (d NULLS FIRST);
SELECT bytes_check('t_multi', 't_multi_abc', ARRAY['a = 5', 'a = 5 AND b = ''a''', 'a = 5 AND b > ''a''',
  'a = 5 AND b <= ''b'' AND c > 50', 'a = 5 AND b = ''a'' AND c BETWEEN 10 AND 60', 'a BETWEEN 3 AND 6',
  'a > 18', 'a IS NULL', 'a IS NULL AND b IS NULL', 'a = 7 AND b IS NULL', 'a = ANY (ARRAY[1, 3, 19])',
  'a = 5 AND c > 90', 'b = ''a''', 'c < 5', 'a = 5 AND b = ''zz''', 'a = 1 AND a = 2'],
  'a, b, trim_scale(c)', 'a, b DESC NULLS FIRST, c', 'a DESC, b NULLS LAST, c DESC');
SELECT bytes_check('t_multi', 't_multi_d', bytes_preds('d', 'float8', ARRAY['0', '5', '10']), 'd', 'd DESC', 'd');
SELECT bytes_check('t_multi', 't_multi_dn', bytes_preds('d', 'float8', ARRAY['0', '5', '10']), 'd', 'd NULLS FIRST', 'd DESC NULLS LAST');
SET enable_seqscan = off; SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM t_multi WHERE a = 5 AND b > 'a' ORDER BY a, b DESC NULLS FIRST, c;
EXPLAIN (COSTS OFF) SELECT * FROM t_multi ORDER BY d DESC LIMIT 5;
RESET enable_seqscan; RESET enable_bitmapscan;

-- ---------------------------------------------------------------- DML, VACUUM
UPDATE t_txt SET c = c || 'x', i = upper(i) WHERE id % 7 = 0;
DELETE FROM t_txt WHERE id % 5 = 0;
INSERT INTO t_txt (c, i, v, b) SELECT 'new' || g, 'Néw' || g, 'v' || g, 'b' || (g % 10) FROM generate_series(1, 400) g;
UPDATE t_multi SET a = a + 1, b = reverse(b) WHERE id % 3 = 0;
DELETE FROM t_multi WHERE id % 4 = 0;
VACUUM t_txt;
VACUUM t_multi;
SELECT bytes_check('t_txt', 't_txt_c', bytes_preds('c', 'text', ARRAY['''a''', '''new1''', '''ax''', '''z''']), 'c', 'c', 'c DESC');
SELECT bytes_check('t_txt', 't_txt_i', bytes_preds('i', 'text', ARRAY['''A''', '''NÉW1''', '''Ä''']), 'i', 'i', 'i DESC');
SELECT bytes_check('t_multi', 't_multi_abc', ARRAY['a = 6', 'a = 6 AND b > ''5''', 'a BETWEEN 3 AND 6', 'a IS NULL'],
  'a, b, trim_scale(c)', 'a, b DESC NULLS FIRST, c', 'a DESC, b NULLS LAST, c DESC');
-- the tree holds exactly one entry per row (dex_check verifies its invariants)
SELECT (SELECT entries FROM dex_check('t_txt_c')) = (SELECT count(*) FROM t_txt) AS txt_entries_ok,
       (SELECT entries FROM dex_check('t_multi_abc')) = (SELECT count(*) FROM t_multi) AS multi_entries_ok;

-- ---------------------------------------------------------------- limits and refusals
-- a key longer than a node takes: btree's error, naming the limit, and nothing written
INSERT INTO t_txt (c) VALUES (repeat('x', 200));
SELECT count(*) FROM t_txt WHERE c = repeat('x', 200);
CREATE COLLATION dex_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE INDEX ON t_txt USING dex (c COLLATE dex_ci);
DROP COLLATION dex_ci;
