-- Index entries as byte strings (extension/dexentry.c): an entry is the key
-- columns' encodings (src/README.md "Keys") and the heap TID. The indexes here
-- are btree indexes: the functions read only their columns' types,
-- collations and DESC / NULLS FIRST, and btree's order is the reference.
--  1. entries of multi-column keys sort (bytea order: memcmp, a prefix first)
--     exactly as btree orders (key columns, heap TID), and equal keys give
--     equal key bytes;
--  2. scan bounds: the rows whose entry lies in [lo, hi] are a superset of the
--     rows satisfying the quals, the same set when recheck is false;
--  3. limits and refusals: key size, nondeterministic collations.
-- Results are counts (of disagreements: must be 0), never bytes.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dex;
RESET client_min_messages;

-- 2000 rows, every column drawn from a list of awkward values (NULL among them)
CREATE TABLE de_t (t_c text COLLATE "C", t_icu text COLLATE "de-x-icu", i int4,
                   n numeric, u uuid, f float8, s int2, d date) WITH (autovacuum_enabled = off);
CREATE FUNCTION de_pick(vals text[], g int, k int) RETURNS text
LANGUAGE sql IMMUTABLE AS
$$ SELECT vals[1 + (hashint4(g * 31 + k)::int8 & 2147483647) % array_length(vals, 1)] $$;
INSERT INTO de_t
SELECT de_pick('{a,A,B,b,Ä,ä,ab,aB,Äb,z,ß,ss,"",NULL}', g, 1),
       de_pick('{a,A,B,b,Ä,ä,ab,aB,Äb,z,ß,ss,"",NULL}', g, 2),
       de_pick('{NULL,-2147483648,-1,0,7,7,2147483647}', g, 3)::int4,
       de_pick('{NULL,NaN,Infinity,-Infinity,0,-0.00,1.0,1.00,-2.5,123456.789,1e-20}', g, 4)::numeric,
       de_pick('{NULL,00000000-0000-0000-0000-000000000000,ffffffff-ffff-ffff-ffff-ffffffffffff,'
               '8a9bd6d4-2f3e-4a44-9c83-6a1f2b9f0d11,0a9bd6d4-2f3e-4a44-9c83-6a1f2b9f0d11}', g, 5)::uuid,
       de_pick('{NULL,NaN,Infinity,-Infinity,-0.0,0,1.5,-1.5,1e300,5e-324}', g, 6)::float8,
       de_pick('{NULL,-32768,-1,0,1,32767}', g, 7)::int2,
       de_pick('{NULL,-infinity,infinity,2024-01-01,2024-01-02,1999-12-31}', g, 8)::date
  FROM generate_series(1, 2000) g;

CREATE INDEX de_i1 ON de_t (t_c, i DESC, n NULLS FIRST);
CREATE INDEX de_i2 ON de_t (t_icu DESC NULLS LAST, f, u);
CREATE INDEX de_i3 ON de_t (f DESC NULLS FIRST, n DESC, t_c);
CREATE INDEX de_i4 ON de_t (s, u DESC, i NULLS FIRST);
CREATE INDEX de_i5 ON de_t (d DESC);
CREATE INDEX de_i6 ON de_t (i, n, u, f, t_icu, t_c, s, d);

-- de_cols(index): its key columns as a list, and its table
CREATE FUNCTION de_cols(idx regclass) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY k.ord)
      FROM pg_index x, unnest(x.indkey::int2[]) WITH ORDINALITY k(attnum, ord), pg_attribute a
     WHERE x.indexrelid = idx AND k.ord <= x.indnkeyatts
       AND a.attrelid = x.indrelid AND a.attnum = k.attnum $$;

-- de_order(index, order by): rows ranked by the index's ORDER BY (its
-- columns with their options, then ctid: btree's order) and by the entries.
CREATE FUNCTION de_order(idx regclass, orderby text, OUT nrows bigint,
                         OUT rank_mismatches bigint, OUT equality_mismatches bigint)
LANGUAGE plpgsql AS $$
DECLARE
    cols text := de_cols(idx);
BEGIN
    EXECUTE format($q$
        WITH r AS (
            SELECT ROW(%1$s) AS k, e, row_number() OVER (ORDER BY %2$s, ctid) AS by_btree,
                   row_number() OVER (ORDER BY e) AS by_entry
              FROM (SELECT *, ctid, dex_entry_bytes(%3$L, ctid, %1$s) AS e FROM de_t) s),
        adj AS (
            SELECT a.k AS ak, b.k AS bk,
                   substr(a.e, 1, length(a.e) - 6) AS ae, substr(b.e, 1, length(b.e) - 6) AS be
              FROM r a JOIN r b ON b.by_entry = a.by_entry + 1)
        SELECT (SELECT count(*) FROM r),
               (SELECT count(*) FROM r WHERE by_btree <> by_entry),
               (SELECT count(*) FROM adj WHERE (ak IS NOT DISTINCT FROM bk) <> (ae = be)) $q$,
        cols, orderby, idx)
    INTO nrows, rank_mismatches, equality_mismatches;
END $$;

-- 1. order
SELECT 'de_i1' AS index, * FROM de_order('de_i1', 't_c, i DESC, n NULLS FIRST');
SELECT 'de_i2' AS index, * FROM de_order('de_i2', 't_icu DESC NULLS LAST, f, u');
SELECT 'de_i3' AS index, * FROM de_order('de_i3', 'f DESC NULLS FIRST, n DESC, t_c');
SELECT 'de_i4' AS index, * FROM de_order('de_i4', 's, u DESC, i NULLS FIRST');
SELECT 'de_i5' AS index, * FROM de_order('de_i5', 'd DESC');
SELECT 'de_i6' AS index, * FROM de_order('de_i6', 'i, n, u, f, t_icu, t_c, s, d');
-- the same order as an index scan of the btree index returns
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SET enable_sort = off;
SELECT count(*) AS index_scan_mismatches
  FROM (SELECT ctid, row_number() OVER () AS pos
          FROM (SELECT ctid FROM de_t ORDER BY t_icu DESC NULLS LAST, f, u) o) a
  JOIN (SELECT ctid, row_number() OVER (ORDER BY dex_entry_bytes('de_i2', ctid, t_icu, f, u)) AS pos
          FROM de_t) b USING (ctid)
 WHERE a.pos <> b.pos;
RESET enable_seqscan;
RESET enable_bitmapscan;
RESET enable_sort;

-- the TID: 4 bytes of block, 2 of offset, big-endian
SELECT substr(dex_entry_bytes('de_i5', '(258,3)', NULL::date), 2) AS tid_bytes;

-- 2. bounds: de_bounds(index, quals as SQL, the same quals as arrays)
CREATE FUNCTION de_bounds(idx regclass, qual text, attnos int[], ops text[], args text[],
                          argtypes regtype[] DEFAULT NULL,
                          OUT matching bigint, OUT missing bigint, OUT extra bigint,
                          OUT empty boolean, OUT recheck boolean)
LANGUAGE plpgsql AS $$
DECLARE
    b record;
BEGIN
    SELECT * INTO b FROM dex_scan_bounds(idx, attnos, ops, args, argtypes);
    empty := b.empty;
    recheck := b.recheck;
    EXECUTE format($q$
        SELECT count(*) FILTER (WHERE q), count(*) FILTER (WHERE q AND NOT inb),
               count(*) FILTER (WHERE inb AND NOT q)
          FROM (SELECT coalesce((%1$s), false) AS q,
                       coalesce(dex_entry_bytes(%2$L, ctid, %3$s) BETWEEN $1 AND $2, false) AS inb
                  FROM de_t) s $q$, qual, idx, de_cols(idx))
    INTO matching, missing, extra
    USING b.lo, b.hi;
END $$;

-- de_i1 (t_c, i DESC, n NULLS FIRST): prefixes, DESC ranges, NULL tests
SELECT * FROM de_bounds('de_i1', $$t_c = 'a'$$, '{1}', '{=}', '{a}');
SELECT * FROM de_bounds('de_i1', $$t_c = 'a' AND i > 0$$, '{1,2}', '{=,>}', '{a,0}');
SELECT * FROM de_bounds('de_i1', $$t_c = 'a' AND i >= 7 AND i < 2147483647$$,
                        '{1,2,2}', '{=,>=,<}', '{a,7,2147483647}');
SELECT * FROM de_bounds('de_i1', $$t_c = 'a' AND i = 7 AND n > 1$$, '{1,2,3}', '{=,=,>}', '{a,7,1}');
SELECT * FROM de_bounds('de_i1', $$t_c = 'a' AND i = 7 AND n = 1.00$$, '{1,2,3}', '{=,=,=}', '{a,7,1.0}');
SELECT * FROM de_bounds('de_i1', $$t_c = 'a' AND i = 7 AND n IS NULL$$,
                        '{1,2,3}', '{=,=,"is null"}', '{a,7,NULL}');
SELECT * FROM de_bounds('de_i1', $$t_c = 'a' AND i IS NULL$$, '{1,2}', '{=,"is null"}', '{a,NULL}');
SELECT * FROM de_bounds('de_i1', $$t_c = 'a' AND i IS NOT NULL$$, '{1,2}', '{=,"is not null"}', '{a,NULL}');
SELECT * FROM de_bounds('de_i1', $$t_c IS NULL AND i < 0$$, '{1,2}', '{"is null",<}', '{NULL,0}');
SELECT * FROM de_bounds('de_i1', $$t_c > 'B' AND t_c <= 'b'$$, '{1,1}', '{>,<=}', '{B,b}');
SELECT * FROM de_bounds('de_i1', $$t_c > 'A' AND t_c > 'B' AND t_c >= 'a'$$,
                        '{1,1,1}', '{>,>,>=}', '{A,B,a}');
SELECT * FROM de_bounds('de_i1', $$t_c = 'a' AND t_c > 'A'$$, '{1,1}', '{=,>}', '{a,A}');
SELECT * FROM de_bounds('de_i1', $$t_c < 'a' AND i = 7$$, '{1,2}', '{<,=}', '{a,7}');
SELECT * FROM de_bounds('de_i1', $$i = 7$$, '{2}', '{=}', '{7}');
SELECT * FROM de_bounds('de_i1', $$true$$, '{}', '{}', '{}');
-- cross-type arguments, placed among the column's images
SELECT * FROM de_bounds('de_i1', $$t_c = 'a' AND i > 5000000000::int8$$,
                        '{1,2}', '{=,>}', '{a,5000000000}', '{text,int8}');
SELECT * FROM de_bounds('de_i1', $$t_c = 'a' AND i < 5000000000::int8$$,
                        '{1,2}', '{=,<}', '{a,5000000000}', '{text,int8}');
SELECT * FROM de_bounds('de_i1', $$t_c = 'ab'::name AND i >= '-32768'::int2$$,
                        '{1,2}', '{=,>=}', '{ab,-32768}', '{name,int2}');
-- contradictions
SELECT * FROM de_bounds('de_i1', $$t_c = 'a' AND t_c = 'b'$$, '{1,1}', '{=,=}', '{a,b}');
SELECT * FROM de_bounds('de_i1', $$t_c = 'a' AND t_c > 'a'$$, '{1,1}', '{=,>}', '{a,a}');
SELECT * FROM de_bounds('de_i1', $$t_c = 'a' AND i > 5 AND i < 3$$, '{1,2,2}', '{=,>,<}', '{a,5,3}');
SELECT * FROM de_bounds('de_i1', $$t_c = NULL$$, '{1}', '{=}', '{NULL}');
SELECT * FROM de_bounds('de_i1', $$t_c > 'a' AND n = NULL$$, '{1,3}', '{>,=}', '{a,NULL}');
SELECT * FROM de_bounds('de_i1', $$t_c IS NULL AND t_c IS NOT NULL$$,
                        '{1,1}', '{"is null","is not null"}', '{NULL,NULL}');

-- de_i2 (t_icu DESC NULLS LAST, f, u): ICU strings under DESC, floats
SELECT * FROM de_bounds('de_i2', $$t_icu > 'a'$$, '{1}', '{>}', '{a}');
SELECT * FROM de_bounds('de_i2', $$t_icu <= 'B'$$, '{1}', '{<=}', '{B}');
SELECT * FROM de_bounds('de_i2', $$t_icu >= 'a' AND t_icu < 'b'$$, '{1,1}', '{>=,<}', '{a,b}');
SELECT * FROM de_bounds('de_i2', $$t_icu = 'Ä' AND f > 0$$, '{1,2}', '{=,>}', '{Ä,0}');
SELECT * FROM de_bounds('de_i2', $$t_icu = 'ä' AND f = 'NaN'$$, '{1,2}', '{=,=}', '{ä,NaN}');
SELECT * FROM de_bounds('de_i2', $$t_icu = 'a' AND f = '-0.0'$$, '{1,2}', '{=,=}', '{a,-0.0}');
SELECT * FROM de_bounds('de_i2', $$t_icu = 'b' AND f >= '-Infinity' AND f < 'Infinity'$$,
                        '{1,2,2}', '{=,>=,<}', '{b,-Infinity,Infinity}');
SELECT * FROM de_bounds('de_i2', $$t_icu = 'b' AND f > 1.5::float4$$,
                        '{1,2}', '{=,>}', '{b,1.5}', '{text,float4}');
SELECT * FROM de_bounds('de_i2', $$t_icu IS NULL AND f IS NULL$$,
                        '{1,2}', '{"is null","is null"}', '{NULL,NULL}');
SELECT * FROM de_bounds('de_i2', $$t_icu IS NOT NULL AND f < 0$$,
                        '{1,2}', '{"is not null",<}', '{NULL,0}');
SELECT * FROM de_bounds('de_i2', $$t_icu = 'z' AND f = 1.5 AND u > '0a9bd6d4-2f3e-4a44-9c83-6a1f2b9f0d11'$$,
                        '{1,2,3}', '{=,=,>}', '{z,1.5,0a9bd6d4-2f3e-4a44-9c83-6a1f2b9f0d11}');

-- de_i3 (f DESC NULLS FIRST, n DESC, t_c): DESC floats and numerics
SELECT * FROM de_bounds('de_i3', $$f > 0$$, '{1}', '{>}', '{0}');
SELECT * FROM de_bounds('de_i3', $$f < 'NaN'$$, '{1}', '{<}', '{NaN}');
SELECT * FROM de_bounds('de_i3', $$f > 'NaN'$$, '{1}', '{>}', '{NaN}');
SELECT * FROM de_bounds('de_i3', $$f IS NULL$$, '{1}', '{"is null"}', '{NULL}');
SELECT * FROM de_bounds('de_i3', $$f IS NOT NULL$$, '{1}', '{"is not null"}', '{NULL}');
SELECT * FROM de_bounds('de_i3', $$f = 1.5 AND n < 0$$, '{1,2}', '{=,<}', '{1.5,0}');
SELECT * FROM de_bounds('de_i3', $$f = 0 AND n >= 'NaN'$$, '{1,2}', '{=,>=}', '{0,NaN}');
SELECT * FROM de_bounds('de_i3', $$f = 0 AND n > '-Infinity' AND n <= 1$$,
                        '{1,2,2}', '{=,>,<=}', '{0,-Infinity,1}');
SELECT * FROM de_bounds('de_i3', $$f IS NULL AND n = 0 AND t_c >= 'a'$$,
                        '{1,2,3}', '{"is null",=,>=}', '{NULL,0,a}');

-- de_i4 (s, u DESC, i NULLS FIRST): int2 against out-of-range arguments
SELECT * FROM de_bounds('de_i4', $$s > 100000$$, '{1}', '{>}', '{100000}', '{int4}');
SELECT * FROM de_bounds('de_i4', $$s < 100000$$, '{1}', '{<}', '{100000}', '{int4}');
SELECT * FROM de_bounds('de_i4', $$s = 100000$$, '{1}', '{=}', '{100000}', '{int4}');
SELECT * FROM de_bounds('de_i4', $$s >= -9000000000::int8$$, '{1}', '{>=}', '{-9000000000}', '{int8}');
SELECT * FROM de_bounds('de_i4', $$s = 1 AND u < 'ffffffff-ffff-ffff-ffff-ffffffffffff' AND i IS NULL$$,
                        '{1,2,3}', '{=,<,"is null"}', '{1,ffffffff-ffff-ffff-ffff-ffffffffffff,NULL}');
SELECT * FROM de_bounds('de_i4', $$s = 1 AND u = '00000000-0000-0000-0000-000000000000' AND i IS NULL$$,
                        '{1,2,3}', '{=,=,"is null"}', '{1,00000000-0000-0000-0000-000000000000,NULL}');

-- de_i5 (d DESC): timestamps between two dates, infinities
SELECT * FROM de_bounds('de_i5', $$d > '2024-01-01 12:00'::timestamp$$,
                        '{1}', '{>}', '{"2024-01-01 12:00"}', '{timestamp}');
SELECT * FROM de_bounds('de_i5', $$d <= '2024-01-01 12:00'::timestamp$$,
                        '{1}', '{<=}', '{"2024-01-01 12:00"}', '{timestamp}');
SELECT * FROM de_bounds('de_i5', $$d = '2024-01-01 12:00'::timestamp$$,
                        '{1}', '{=}', '{"2024-01-01 12:00"}', '{timestamp}');
SELECT * FROM de_bounds('de_i5', $$d = '2024-01-02'::timestamp$$,
                        '{1}', '{=}', '{2024-01-02}', '{timestamp}');
SELECT * FROM de_bounds('de_i5', $$d < 'infinity'::timestamp$$, '{1}', '{<}', '{infinity}', '{timestamp}');
SELECT * FROM de_bounds('de_i5', $$d >= '-infinity'$$, '{1}', '{>=}', '{-infinity}');

-- de_i6: eight columns
SELECT * FROM de_bounds('de_i6', $$i = 7 AND n = 1 AND u IS NULL AND f > -1$$,
                        '{1,2,3,4}', '{=,=,"is null",>}', '{7,1,NULL,-1}');
SELECT * FROM de_bounds('de_i6', $$i = 0 AND n = 'NaN' AND u IS NOT NULL AND f > -1$$,
                        '{1,2,3,4}', '{=,=,"is not null",>}', '{0,NaN,NULL,-1}');

-- random conjunctions of 1 to 4 quals (every strategy, IS [NOT] NULL) on
-- random columns with values from the data's lists: no row may be missing,
-- and none extra unless recheck
CREATE FUNCTION de_random_bounds(idx regclass, vals jsonb, trials int,
                                 OUT checks bigint, OUT matching_rows bigint, OUT missing bigint,
                                 OUT extra_without_recheck bigint, OUT empties bigint,
                                 OUT rechecks bigint)
LANGUAGE plpgsql AS $$
DECLARE
    ops text[] := '{<,<=,=,>=,>,"is null","is not null",=,=}';
    ncols int := (SELECT indnkeyatts FROM pg_index WHERE indexrelid = idx);
    r record;
    qual text;
    attnos int[];
    kops text[];
    args text[];
    col int;
    op text;
    v text;
    h int;
    name text;
BEGIN
    checks := 0; matching_rows := 0; missing := 0; extra_without_recheck := 0;
    empties := 0; rechecks := 0;
    FOR g IN 1..trials LOOP
        qual := 'true'; attnos := '{}'; kops := '{}'; args := '{}';
        FOR j IN 1..1 + (hashint4(g * 17)::int8 & 2147483647) % 4 LOOP
            h := (hashint4(g * 1009 + j)::int8 & 2147483647);
            -- earlier columns more often: prefixes then ranges, as in real scans
            col := 1 + (h % 7) * (h % 7) * ncols / 49;
            op := ops[1 + (h / 7) % array_length(ops, 1)];
            v := vals->(col - 1)->>((h / 97) % jsonb_array_length(vals->(col - 1)))::int;
            SELECT quote_ident(a.attname) INTO name
              FROM pg_index x, pg_attribute a
             WHERE x.indexrelid = idx AND a.attrelid = x.indrelid
               AND a.attnum = (x.indkey::int2[])[col - 1];
            attnos := attnos || col;
            kops := kops || op;
            IF op LIKE 'is%' THEN
                qual := format('%s AND %s %s', qual, name, op);
                args := args || NULL::text;
            ELSE
                qual := format('%s AND %s %s %L', qual, name, op, v);
                args := args || v;
            END IF;
        END LOOP;
        SELECT * INTO r FROM de_bounds(idx, qual, attnos, kops, args);
        checks := checks + 1;
        matching_rows := matching_rows + r.matching;
        missing := missing + r.missing;
        IF NOT r.recheck THEN
            extra_without_recheck := extra_without_recheck + r.extra;
        END IF;
        IF r.empty THEN empties := empties + 1; END IF;
        IF r.recheck THEN rechecks := rechecks + 1; END IF;
    END LOOP;
END $$;
SELECT 'de_i1' AS index, * FROM de_random_bounds('de_i1',
    '[["a","A","B","b","Ä","ab","z",""], ["-2147483648","-1","0","7","2147483647"],
      ["NaN","Infinity","-Infinity","0","1","-2.5","123456.789"]]', 300);
SELECT 'de_i2' AS index, * FROM de_random_bounds('de_i2',
    '[["a","A","B","b","Ä","ä","ß","ss","z"], ["NaN","Infinity","-Infinity","-0.0","1.5","-1.5"],
      ["00000000-0000-0000-0000-000000000000","8a9bd6d4-2f3e-4a44-9c83-6a1f2b9f0d11"]]', 300);
SELECT 'de_i3' AS index, * FROM de_random_bounds('de_i3',
    '[["NaN","Infinity","0","1.5","-1.5"], ["NaN","0","1.00","-2.5","-Infinity"], ["a","B","ab"]]', 300);
SELECT 'de_i4' AS index, * FROM de_random_bounds('de_i4',
    '[["-32768","-1","0","1","32767"],
      ["00000000-0000-0000-0000-000000000000","0a9bd6d4-2f3e-4a44-9c83-6a1f2b9f0d11"],
      ["-1","0","7"]]', 300);

-- 3. limits: a key of at most 146 bytes (152 with the TID); never truncated
CREATE INDEX de_i7 ON de_t (t_c);
SELECT octet_length(dex_entry_bytes('de_i7', '(0,1)', repeat('x', 143))) AS longest_entry;
SELECT dex_entry_bytes('de_i7', '(0,1)', repeat('x', 144));
SELECT dex_entry_bytes('de_i1', '(0,1)', repeat('x', 100), 1, repeat('9', 200)::numeric);
-- a nondeterministic collation is refused, naming the column
CREATE COLLATION de_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE de_nd (v text COLLATE de_ci);
CREATE INDEX de_nd_i ON de_nd (v);
SELECT dex_entry_bytes('de_nd_i', '(0,1)', 'a'::text);
SELECT * FROM dex_scan_bounds('de_nd_i', '{1}', '{=}', '{a}');
-- values must match their columns
SELECT dex_entry_bytes('de_i7', '(0,1)', 1);
SELECT dex_entry_bytes('de_i7', '(0,1)', 'a'::text, 'b'::text);

-- the key columns a metapage records (collation versions: only whether there is one)
SELECT attno, type, "collation" = 0 AS no_collation, descending, nulls_first,
       collversion <> '' AS has_version, mismatch
  FROM dex_entry_columns('de_i2');
SELECT attno, type, descending, nulls_first, collversion <> '' AS has_version
  FROM dex_entry_columns('de_i1');

DROP TABLE de_t, de_nd;
DROP COLLATION de_ci;
DROP FUNCTION de_pick(text[], int, int), de_cols(regclass), de_order(regclass, text),
              de_random_bounds(regclass, jsonb, int),
              de_bounds(regclass, text, int[], text[], text[], regtype[]);
