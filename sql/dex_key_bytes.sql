-- Order-preserving byte strings for keys (src/tree/key_bytes.h,
-- extension/dexkeybytes.c): for every type, the memcmp order of
-- dex_key_bytes(v) (bytea comparison: memcmp, then length) must be the order
-- btree's operators give the values, and equal values must give equal bytes.
-- kb_check() compares every adjacent pair in ORDER BY v and a fixed
-- pseudo-random sample of pairs; it reports how many pairs it compared (so a
-- check of nothing cannot pass) and how many disagreed (must be 0).
SET client_min_messages = warning;  -- quiet whether or not an earlier suite created it
CREATE EXTENSION IF NOT EXISTS dex;
RESET client_min_messages;

-- kb_check(tbl): column v of tbl; NULLs are skipped.
CREATE FUNCTION kb_check(tbl regclass, OUT n bigint, OUT adjacent bigint, OUT equal_pairs bigint,
                         OUT random_pairs bigint, OUT mismatches bigint)
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format($q$
        WITH r AS (SELECT v, dex_key_bytes(v) AS k, row_number() OVER (ORDER BY v) AS i
                     FROM %s WHERE v IS NOT NULL),
        c AS (SELECT count(*) AS n FROM r),
        pairs AS (
            SELECT 'adj' AS kind, a.v AS av, a.k AS ak, b.v AS bv, b.k AS bk
              FROM r a JOIN r b ON b.i = a.i + 1
            UNION ALL
            SELECT 'rnd', a.v, a.k, b.v, b.k
              FROM generate_series(1, 3000) g CROSS JOIN c
              JOIN r a ON a.i = 1 + abs(hashint4(g)::int8) %% c.n
              JOIN r b ON b.i = 1 + abs(hashint4(-g - 7)::int8) %% c.n)
        SELECT (SELECT n FROM c),
               count(*) FILTER (WHERE kind = 'adj'),
               count(*) FILTER (WHERE kind = 'adj' AND av = bv),
               count(*) FILTER (WHERE kind = 'rnd'),
               count(*) FILTER (WHERE
                   (CASE WHEN av < bv THEN -1 WHEN av = bv THEN 0 WHEN av > bv THEN 1 END)
                   IS DISTINCT FROM
                   (CASE WHEN ak < bk THEN -1 WHEN ak = bk THEN 0 ELSE 1 END))
          FROM pairs $q$, tbl)
    INTO n, adjacent, equal_pairs, random_pairs, mismatches;
END $$;

-- ---------------------------------------------------------------------------
-- fixed-width images: big-endian of today's 64-bit key image
SELECT dex_key_bytes(0::int4) AS zero, dex_key_bytes(-1::int8) AS minus_one,
       dex_key_bytes(1::int2) AS one, dex_key_bytes(true) AS t;

CREATE TABLE kb_int8 (v int8);
INSERT INTO kb_int8 SELECT hashint8(g) >> (g % 64) FROM generate_series(1, 1000) g;
INSERT INTO kb_int8 VALUES (0), (0), (-1), (1), (9223372036854775807), (-9223372036854775808),
    (255), (256), (-255), (-256), (NULL);
SELECT 'int8' AS type, * FROM kb_check('kb_int8');
CREATE TABLE kb_int4 (v int4);
INSERT INTO kb_int4 SELECT hashint4(g) >> (g % 32) FROM generate_series(1, 1000) g;
INSERT INTO kb_int4 VALUES (2147483647), (-2147483648), (0), (0);
SELECT 'int4' AS type, * FROM kb_check('kb_int4');
CREATE TABLE kb_int2 (v int2);
INSERT INTO kb_int2 SELECT (hashint4(g) >> 16)::int2 FROM generate_series(1, 1000) g;
INSERT INTO kb_int2 VALUES (32767), (-32768), (0);
SELECT 'int2' AS type, * FROM kb_check('kb_int2');

-- floats: NaN above Infinity, -0 = 0, float4 widened exactly
CREATE TABLE kb_float8 (v float8);
INSERT INTO kb_float8
    SELECT (hashint4(g)::float8 / 1000) * power(10::float8, (g % 40) - 20) FROM generate_series(1, 1000) g;
INSERT INTO kb_float8 VALUES ('NaN'), ('NaN'), ('Infinity'), ('-Infinity'), ('0'), ('-0'), ('-0'),
    (1e-320), (-1e-320), (1.7976931348623157e308), (-1.7976931348623157e308), (2.2250738585072014e-308),
    (1), (1.0000000000000002), (0.9999999999999999);
SELECT 'float8' AS type, * FROM kb_check('kb_float8');
SELECT dex_key_bytes('-0'::float8) = dex_key_bytes('0'::float8) AS minus_zero_is_zero,
       dex_key_bytes('NaN'::float8) > dex_key_bytes('Infinity'::float8) AS nan_greatest,
       dex_key_bytes('-NaN'::float8) = dex_key_bytes('NaN'::float8) AS one_nan;
CREATE TABLE kb_float4 (v float4);
INSERT INTO kb_float4 SELECT v::float4 FROM kb_float8
    WHERE (abs(v) < 1e38 AND (abs(v) > 1e-37 OR v = 0)) OR v IN ('NaN', 'Infinity', '-Infinity');
INSERT INTO kb_float4 VALUES (1e-45), (-1e-45), (3.4028235e38), (-3.4028235e38);
SELECT 'float4' AS type, * FROM kb_check('kb_float4');

-- the other image types
CREATE TABLE kb_timestamptz (v timestamptz);
INSERT INTO kb_timestamptz SELECT timestamptz '2000-01-01' + hashint4(g) * interval '1 second' * (g % 7)
    FROM generate_series(1, 500) g;
INSERT INTO kb_timestamptz VALUES ('infinity'), ('-infinity'), ('4714-11-24 00:00:00+00 BC'), ('294276-12-31 23:59:59+00');
SELECT 'timestamptz' AS type, * FROM kb_check('kb_timestamptz');
CREATE TABLE kb_date (v date);
INSERT INTO kb_date SELECT date '2000-01-01' + (hashint4(g) % 1000000) FROM generate_series(1, 500) g;
INSERT INTO kb_date VALUES ('infinity'), ('-infinity');
SELECT 'date' AS type, * FROM kb_check('kb_date');
CREATE TABLE kb_bool (v bool);
INSERT INTO kb_bool VALUES (true), (false), (true), (false);
SELECT 'bool' AS type, * FROM kb_check('kb_bool');

-- ---------------------------------------------------------------------------
-- uuid: the 16 bytes
CREATE TABLE kb_uuid (v uuid);
INSERT INTO kb_uuid SELECT md5(g::text)::uuid FROM generate_series(1, 1000) g;
INSERT INTO kb_uuid SELECT v FROM kb_uuid LIMIT 20;
INSERT INTO kb_uuid VALUES ('00000000-0000-0000-0000-000000000000'), ('ffffffff-ffff-ffff-ffff-ffffffffffff'),
    ('80000000-0000-0000-0000-000000000000'), ('7fffffff-ffff-ffff-ffff-ffffffffffff');
SELECT 'uuid' AS type, * FROM kb_check('kb_uuid');

-- ---------------------------------------------------------------------------
-- bytea: 0x00 escaped as 00 ff, terminated by 00 00; a prefix sorts first
SELECT dex_key_bytes('\x'::bytea) AS empty, dex_key_bytes('\x00'::bytea) AS zero,
       dex_key_bytes('\x610062'::bytea) AS a_0_b, dex_key_bytes('\xff'::bytea) AS ff;
CREATE TABLE kb_bytea (v bytea);
INSERT INTO kb_bytea
    SELECT decode(string_agg(CASE abs(hashint4(g * 64 + j)::int8) % 5 WHEN 0 THEN '00' WHEN 1 THEN '01'
                                  WHEN 2 THEN '61' WHEN 3 THEN 'fe' ELSE 'ff' END, '' ORDER BY j), 'hex')
      FROM generate_series(1, 1500) g, generate_series(1, 1 + g % 6) j GROUP BY g;
INSERT INTO kb_bytea VALUES ('\x'), ('\x'), ('\x00'), ('\x0000'), ('\x0001'), ('\x00ff'), ('\x01'), ('\x61'),
    ('\x6100'), ('\x610000'), ('\x6101'), ('\x61ff'), ('\xff'), ('\xff00'), ('\xffff'), ('\xffff00');
SELECT 'bytea' AS type, * FROM kb_check('kb_bytea');

-- ---------------------------------------------------------------------------
-- strings. Words from a small alphabet of look-alikes (case, accents,
-- combining marks, ligatures, spaces, punctuation, digits), plus hand-picked.
CREATE TABLE kb_words (w text);
INSERT INTO kb_words
    SELECT string_agg(substr('aAbBäÄeéEÉ́ -_0ß9sæıİ日Zz'::text, (1 + abs(hashint4(g * 16 + j)::int8) % 24)::int, 1), '' ORDER BY j)
      FROM generate_series(1, 1200) g, generate_series(1, 1 + g % 7) j GROUP BY g;
INSERT INTO kb_words VALUES (''), (''), ('a'), ('A'), ('b'), ('B'), ('Ä'), ('ä'), ('ae'), ('æ'), ('ß'), ('ss'),
    ('résumé'), ('resume'), ('Resume'), ('RESUME'), ('re' || U&'\0301' || 'sume'), ('co-op'), ('coop'),
    ('co op'), ('a b'), ('ab'), ('a-b'), ('10'), ('9'), ('-1'), ('é'), (U&'e\0301'), ('日本'), ('日'),
    ('a '), ('a  '), (' a'), (U&'\00A0a'), ('ı'), ('I'), ('i'), ('İ'), ('z'), ('Z'), ('ZZ'),
    -- equal to ICU but not in bytes (canonical equivalents, ignorable controls): strcmp decides
    (U&'A\0308'), (U&'re\0301sume\0301'), (U&'\00C5'), (U&'A\030A'), (U&'\212B'), (U&'a\0001b'),
    (U&'\0001ab'), (U&'ab\0001'), (U&'\0008'), (U&'\0001');

CREATE TABLE kb_text_c (v text COLLATE "C");
INSERT INTO kb_text_c SELECT w FROM kb_words;
SELECT 'text "C"' AS type, * FROM kb_check('kb_text_c');
CREATE TABLE kb_text_posix (v text COLLATE "POSIX");
INSERT INTO kb_text_posix SELECT w FROM kb_words;
SELECT 'text "POSIX"' AS type, * FROM kb_check('kb_text_posix');
CREATE TABLE kb_text_default (v text);
INSERT INTO kb_text_default SELECT w FROM kb_words;
SELECT 'text default' AS type, * FROM kb_check('kb_text_default');
CREATE TABLE kb_text_cutf8 (v text COLLATE "C.utf8");
INSERT INTO kb_text_cutf8 SELECT w FROM kb_words;
SELECT 'text "C.utf8"' AS type, * FROM kb_check('kb_text_cutf8');
CREATE TABLE kb_text_und (v text COLLATE "und-x-icu");
INSERT INTO kb_text_und SELECT w FROM kb_words;
SELECT 'text "und-x-icu"' AS type, * FROM kb_check('kb_text_und');
CREATE TABLE kb_text_en (v text COLLATE "en-x-icu");
INSERT INTO kb_text_en SELECT w FROM kb_words;
SELECT 'text "en-x-icu"' AS type, * FROM kb_check('kb_text_en');
CREATE TABLE kb_text_sv (v text COLLATE "sv-x-icu");
INSERT INTO kb_text_sv SELECT w FROM kb_words;
SELECT 'text "sv-x-icu"' AS type, * FROM kb_check('kb_text_sv');
CREATE TABLE kb_text_tr (v text COLLATE "tr-x-icu");
INSERT INTO kb_text_tr SELECT w FROM kb_words;
SELECT 'text "tr-x-icu"' AS type, * FROM kb_check('kb_text_tr');
CREATE TABLE kb_varchar (v varchar COLLATE "de-x-icu");
INSERT INTO kb_varchar SELECT w FROM kb_words;
SELECT 'varchar "de-x-icu"' AS type, * FROM kb_check('kb_varchar');
-- bpchar ignores trailing blanks: 'a', 'a ', 'a  ' are equal
CREATE TABLE kb_bpchar_c (v bpchar COLLATE "C");
INSERT INTO kb_bpchar_c SELECT w FROM kb_words UNION ALL SELECT w || '  ' FROM kb_words WHERE length(w) < 3;
SELECT 'bpchar "C"' AS type, * FROM kb_check('kb_bpchar_c');
CREATE TABLE kb_bpchar_en (v bpchar COLLATE "en-x-icu");
INSERT INTO kb_bpchar_en SELECT v FROM kb_bpchar_c;
SELECT 'bpchar "en-x-icu"' AS type, * FROM kb_check('kb_bpchar_en');
SELECT dex_key_bytes('a  '::bpchar COLLATE "en-x-icu") = dex_key_bytes('a'::bpchar COLLATE "en-x-icu")
       AS bpchar_blanks_ignored;
CREATE TABLE kb_name (v name);
INSERT INTO kb_name SELECT w FROM kb_words;
SELECT 'name' AS type, * FROM kb_check('kb_name');
CREATE TABLE kb_name_en (v name COLLATE "en-x-icu");
INSERT INTO kb_name_en SELECT w FROM kb_words;
SELECT 'name "en-x-icu"' AS type, * FROM kb_check('kb_name_en');

-- the classic corner cases, as btree orders them
SELECT string_agg(v, ' < ' ORDER BY v COLLATE "C") AS c_order,
       string_agg(v, ' < ' ORDER BY dex_key_bytes(v COLLATE "C")) AS c_bytes,
       string_agg(v, ' < ' ORDER BY v COLLATE "en-x-icu") AS en_order,
       string_agg(v, ' < ' ORDER BY dex_key_bytes(v COLLATE "en-x-icu")) AS en_bytes
  FROM (VALUES ('a'), ('B'), ('Ä'), ('b'), ('A')) s(v);
-- canonically equivalent but different bytes: equal to the collation, broken by strcmp
SELECT 'é' COLLATE "en-x-icu" > U&'e\0301' COLLATE "en-x-icu" AS btree_says_greater,
       dex_key_bytes('é'::text COLLATE "en-x-icu") > dex_key_bytes(U&'e\0301'::text COLLATE "en-x-icu")
           AS bytes_say_greater;

-- nondeterministic collations are refused
CREATE COLLATION kb_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
SELECT dex_key_bytes('abc'::text COLLATE kb_ci);
SELECT dex_key_column('abc'::varchar COLLATE kb_ci, true, false);
-- a type without an encoding
SELECT dex_key_bytes(point '(1,2)');

-- ---------------------------------------------------------------------------
-- numeric: class, decimal exponent, base-100 digits; the scale does not count
SELECT dex_key_bytes(1.0) = dex_key_bytes(1.00) AS scale_ignored,
       dex_key_bytes(0::numeric) = dex_key_bytes(-0.000) AS zeros_equal,
       dex_key_bytes(1.00) AS one, dex_key_bytes(-1.00) AS minus_one,
       dex_key_bytes('NaN'::numeric) AS nan, dex_key_bytes('Infinity'::numeric) AS inf;
CREATE TABLE kb_numeric (v numeric);
INSERT INTO kb_numeric
    SELECT round((hashint4(g)::numeric / 1000) * power(10::numeric, (g % 50) - 25), g % 30)
      FROM generate_series(1, 1500) g;
INSERT INTO kb_numeric SELECT round(v, 2) FROM kb_numeric LIMIT 300;
INSERT INTO kb_numeric SELECT trunc(v) FROM kb_numeric LIMIT 300;
INSERT INTO kb_numeric VALUES ('NaN'), ('NaN'), ('Infinity'), ('-Infinity'), (0), (0.000), (-0.0), (1.0), (1.00),
    (1), (-1), (-1.0), (0.1), (0.10), (0.01), (0.011), (0.0101), (10), (9.99), (99), (100), (101), (110),
    (1e-300), (-1e-300), (1e300), (-1e300), (0.123456789012345678901234567890123),
    (0.123456789012345678901234567890124), (123456789012345678901234567890.5),
    (123456789012345678901234567890.25), ('1e1000'), ('-1e1000'), ('1e-1000'), ('9.999e999');
SELECT 'numeric' AS type, * FROM kb_check('kb_numeric');

-- ---------------------------------------------------------------------------
-- interval: the 128-bit span, months as 30 days
SELECT dex_key_bytes('1 month'::interval) = dex_key_bytes('30 days'::interval) AS month_is_30_days,
       dex_key_bytes('1 day'::interval) = dex_key_bytes('24 hours'::interval) AS day_is_24_hours,
       dex_key_bytes('1 month'::interval) < dex_key_bytes('31 days'::interval) AS month_below_31_days;
CREATE TABLE kb_interval (v interval);
INSERT INTO kb_interval
    SELECT make_interval(months => (hashint4(g) % 25), days => (hashint4(-g) % 61),
                         secs => (hashint4(g * 3) % 200000) / 2.0)
      FROM generate_series(1, 1500) g;
INSERT INTO kb_interval VALUES ('1 month'), ('30 days'), ('720 hours'), ('29 days 24 hours'), ('1 day'),
    ('24 hours'), ('-1 month'), ('-30 days'), ('0'), ('-0 seconds'), ('1 microsecond'), ('-1 microsecond'),
    ('178000000 years'), ('-178000000 years'), ('2147483647 days 2562047788 hours'),
    ('-2147483648 days -2562047788 hours'), ('178000000 years -2147483648 days'),
    ('-178000000 years 2147483647 days 2562047788 hours');
SELECT 'interval' AS type, * FROM kb_check('kb_interval');

-- ---------------------------------------------------------------------------
-- timetz: UTC time, then the zone
CREATE TABLE kb_timetz (v timetz);
INSERT INTO kb_timetz
    SELECT format('%s%s', time '00:00' + (hashint4(g) % 86400) * interval '1 second',
                  (ARRAY['+00', '+01', '-01', '+05:30', '+14', '-12', '+15:59', '-15:59'])[1 + g % 8])::timetz
      FROM generate_series(1, 1500) g;
INSERT INTO kb_timetz VALUES ('12:00+02'), ('11:00+01'), ('10:00+00'), ('10:00-00'), ('09:00-01'),
    ('00:00+00'), ('24:00+00'), ('00:00-15:59'), ('24:00+15:59'), ('23:59:59.999999-15:59');
SELECT 'timetz' AS type, * FROM kb_check('kb_timetz');
SELECT '12:00+02'::timetz = '11:00+01'::timetz AS btree_equal,
       '12:00+02'::timetz < '11:00+01'::timetz AS btree_less,
       dex_key_bytes('12:00+02'::timetz) < dex_key_bytes('11:00+01'::timetz) AS bytes_less;

-- ---------------------------------------------------------------------------
-- multi-column keys: header byte (NULLS FIRST 01, value 02, NULLS LAST 03) and
-- DESC by inverting the value's bytes
SELECT dex_key_column(NULL::int4) AS null_last, dex_key_column(NULL::int4, false, true) AS null_first,
       dex_key_column('a'::text COLLATE "C") AS a_asc, dex_key_column('a'::text COLLATE "C", true) AS a_desc;
-- (a text "en-x-icu", b bytea DESC NULLS FIRST, c numeric NULLS LAST, d text "C" DESC NULLS LAST):
-- the key's order against ORDER BY on the columns, as dense ranks
CREATE TABLE kb_multi (a text COLLATE "en-x-icu", b bytea, c numeric, d text COLLATE "C");
INSERT INTO kb_multi
    SELECT (ARRAY['a', 'A', 'b', 'Ä', '', 'ab', NULL])[1 + abs(hashint4(g)::int8) % 7],
           (ARRAY['\x'::bytea, '\x00', '\x0000', '\x61', '\x6100', '\xff', NULL])[1 + abs(hashint4(g + 1)::int8) % 7],
           (ARRAY[1.0, 1.00, -1, 0, 'NaN', 10, NULL])[1 + abs(hashint4(g + 2)::int8) % 7],
           (ARRAY['', 'a', 'a ', 'ab', 'b', NULL])[1 + abs(hashint4(g + 3)::int8) % 6]
      FROM generate_series(1, 3000) g;
WITH r AS (SELECT dense_rank() OVER (ORDER BY a, b DESC NULLS FIRST, c NULLS LAST, d DESC NULLS LAST) AS rk,
                  row_number() OVER (ORDER BY a, b DESC NULLS FIRST, c NULLS LAST, d DESC NULLS LAST) AS i,
                  dex_key_column(a) || dex_key_column(b, true, true) || dex_key_column(c)
                      || dex_key_column(d, true) AS k
             FROM kb_multi),
pairs AS (SELECT a.rk AS ar, a.k AS ak, b.rk AS br, b.k AS bk FROM r a JOIN r b ON b.i = a.i + 1
          UNION ALL
          SELECT a.rk, a.k, b.rk, b.k FROM generate_series(1, 3000) g
            JOIN r a ON a.i = 1 + abs(hashint4(g)::int8) % 3000 JOIN r b ON b.i = 1 + abs(hashint4(-g)::int8) % 3000)
SELECT count(*) AS pairs, count(*) FILTER (WHERE ar = br) AS equal_pairs,
       (SELECT max(rk) FROM r) AS distinct_keys,
       count(*) FILTER (WHERE sign(ar - br) <> (CASE WHEN ak < bk THEN -1 WHEN ak = bk THEN 0 ELSE 1 END))
           AS mismatches
  FROM pairs;
