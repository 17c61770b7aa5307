-- Narrow images (DEX_META_NARROW, src/README.md "Byte-string keys"): in a
-- byte-string index, bool, int2, int4, oid and date key columns take their
-- type's width (1, 2, 4, 4, 4 bytes after the column header), not the 8-byte
-- image. Checked: entry sizes; up to INDEX_MAX_KEYS (32) key columns; every
-- answer -- cross-type bounds outside the column type's range, DESC, NULLS
-- FIRST, index-only scans that decode narrow values -- against a sequential
-- scan; and that an index built without the flag (as before it existed)
-- still gives the same answers. Also index-only scans of the key columns
-- that now decode: text under a collation (its own bytes follow the sort
-- key) and timetz.
CREATE EXTENSION IF NOT EXISTS dex;
SELECT setseed(0.29);

-- same(query, index): kind of plan through the index ('ios' index-only scan,
-- 'index' plain or bitmap scan, 'other'), its rows equal a seqscan's, count
CREATE FUNCTION nw_same(q text, idx text, OUT kind text, OUT same boolean, OUT n bigint)
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
    PERFORM set_config('enable_bitmapscan', 'on', true);
    PERFORM set_config('enable_seqscan', 'off', true);
    kind := 'other';
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
        IF line LIKE '%Index Only Scan%using ' || idx || ' %' THEN kind := 'ios';
        ELSIF (line LIKE '%Index Scan%using ' || idx || ' %' OR line LIKE '%Bitmap Index Scan on ' || idx || '%')
              AND kind = 'other' THEN kind := 'index';
        END IF;
    END LOOP;
    EXECUTE format('SELECT array_agg(r::text ORDER BY r::text) FROM (%s) r', q) INTO got;
    same := got IS NOT DISTINCT FROM want;
END $$;

-- 1. entry sizes: header + 1 / 2 / 4 / 4 / 4 bytes, + 8 for int8, + TID 6
CREATE TABLE nw (b bool, s int2, i int4, o oid, d date, l int8, ts timestamp, tz timetz,
                 t text COLLATE "und-x-icu")
    WITH (autovacuum_enabled = off);
CREATE INDEX nw_all ON nw USING dex (b, s, i, o, d, l);
SELECT length(dex_entry_bytes('nw_all', '(0,1)', true, 1::int2, 1, 1::oid, '2026-01-01'::date, 1::int8))
       AS narrow_entry,   -- 2 + 3 + 5 + 5 + 5 + 9 + 6
       length(dex_entry_bytes('nw_all', '(0,1)', NULL::bool, NULL::int2, NULL::int4, NULL::oid,
                              NULL::date, NULL::int8)) AS all_null_entry;
SET dex.narrow_images = off;
CREATE INDEX nw_all_wide ON nw USING dex (b, s, i, o, d, l);
RESET dex.narrow_images;
SELECT length(dex_entry_bytes('nw_all_wide', '(0,1)', true, 1::int2, 1, 1::oid, '2026-01-01'::date, 1::int8))
       AS wide_entry;     -- 6 x 9 + 6
-- the narrow form keeps btree's order pairwise, at the ends of each range
SELECT count(*) FILTER (WHERE (x.v < y.v) <> (dex_key_bytes(x.v) < dex_key_bytes(y.v))) AS int4_disorder
FROM unnest(ARRAY[-2147483648, -2147483647, -1, 0, 1, 2147483646, 2147483647]) x(v),
     unnest(ARRAY[-2147483648, -2147483647, -1, 0, 1, 2147483646, 2147483647]) y(v);
SELECT count(*) FILTER (WHERE (x.v < y.v) <> (dex_key_bytes(x.v) < dex_key_bytes(y.v))) AS oid_disorder
FROM unnest(ARRAY[0, 1, 2147483647, 2147483648, 4294967295]::oid[]) x(v),
     unnest(ARRAY[0, 1, 2147483647, 2147483648, 4294967295]::oid[]) y(v);
SELECT count(*) FILTER (WHERE (x.v < y.v) <> (dex_key_bytes(x.v) < dex_key_bytes(y.v))) AS date_disorder
FROM unnest(ARRAY['-infinity', '4713-01-01 BC', '2000-01-01', '5874897-12-31', 'infinity']::date[]) x(v),
     unnest(ARRAY['-infinity', '4713-01-01 BC', '2000-01-01', '5874897-12-31', 'infinity']::date[]) y(v);

-- 2. data at the ends of every range, NULLs, and answers against a seqscan
INSERT INTO nw
SELECT CASE WHEN g % 11 = 0 THEN NULL ELSE g % 3 = 0 END,
       CASE WHEN g % 13 = 0 THEN NULL WHEN g % 97 = 0 THEN -32768 WHEN g % 89 = 0 THEN 32767
            ELSE (g * 37 % 2001 - 1000) END,
       CASE WHEN g % 17 = 0 THEN NULL WHEN g % 101 = 0 THEN -2147483648 WHEN g % 103 = 0 THEN 2147483647
            ELSE (g * 7919 % 200003 - 100000) END,
       CASE WHEN g % 19 = 0 THEN NULL ELSE ((g::int8 * 2654435761) % 4294967296)::oid END,
       CASE WHEN g % 23 = 0 THEN NULL WHEN g % 107 = 0 THEN 'infinity' WHEN g % 109 = 0 THEN '-infinity'
            ELSE '2026-01-01'::date + (g * 31 % 4000 - 2000) END,
       g::int8 * 7919 % 10007,
       '2026-01-01'::timestamp + (g % 500) * interval '7 hours',
       ('10:00'::time + (g % 97) * interval '13 minutes')::timetz,
       CASE WHEN g % 29 = 0 THEN NULL ELSE (ARRAY['a', 'B', 'Ä', 'ab', 'Ab', 'é'])[1 + g % 6] || (g % 41) END
FROM generate_series(1, 4000) g;
UPDATE nw SET tz = (tz::time::text || CASE WHEN s % 3 = 0 THEN '+02' WHEN s % 3 = 1 THEN '-05:30' ELSE '+00' END)::timetz
WHERE s IS NOT NULL;
CREATE INDEX nw_i_desc ON nw USING dex (i DESC NULLS FIRST, d);
CREATE INDEX nw_so ON nw USING dex (s, o DESC) INCLUDE (l);
CREATE INDEX nw_d ON nw USING dex (d DESC);
CREATE INDEX nw_t ON nw USING dex (t, tz);
-- the same index as built before DEX_META_NARROW, on a copy (so that the
-- planner has one candidate per table)
CREATE TABLE nw_w WITH (autovacuum_enabled = off) AS SELECT * FROM nw;
SET dex.narrow_images = off;
CREATE INDEX nw_i_desc_wide ON nw_w USING dex (i DESC NULLS FIRST, d);
RESET dex.narrow_images;
VACUUM nw;
VACUUM nw_w;

CREATE TABLE nw_queries (id serial, idx text, q text);
INSERT INTO nw_queries (idx, q) VALUES
  -- cross-type bounds beyond the int4 range: nothing, or everything
  ('nw_i_desc', 'SELECT i, d FROM nw WHERE i > 3000000000::int8'),
  ('nw_i_desc', 'SELECT i, d FROM nw WHERE i < 3000000000::int8'),
  ('nw_i_desc', 'SELECT i, d FROM nw WHERE i >= -3000000000::int8'),
  ('nw_i_desc', 'SELECT i, d FROM nw WHERE i = 5000000000::int8'),
  ('nw_i_desc', 'SELECT i, d FROM nw WHERE i <= -2147483648::int8'),
  ('nw_i_desc', 'SELECT i, d FROM nw WHERE i >= 2147483647'),
  ('nw_i_desc', 'SELECT i, d FROM nw WHERE i BETWEEN -50000 AND 50000 AND d > ''2026-03-01'''),
  ('nw_i_desc', 'SELECT i, d FROM nw WHERE i IS NULL AND d IS NOT NULL'),
  ('nw_i_desc', 'SELECT i, d FROM nw WHERE i = ANY (ARRAY[-2147483648, 2147483647, 0, 7]::int8[])'),
  ('nw_i_desc_wide', 'SELECT i, d FROM nw_w WHERE i > 3000000000::int8'),
  ('nw_i_desc_wide', 'SELECT i, d FROM nw_w WHERE i < 3000000000::int8'),
  ('nw_i_desc_wide', 'SELECT i, d FROM nw_w WHERE i BETWEEN -50000 AND 50000 AND d > ''2026-03-01'''),
  ('nw_i_desc_wide', 'SELECT i, d FROM nw_w WHERE i = ANY (ARRAY[-2147483648, 2147483647, 0, 7]::int8[])'),
  -- int2 against int4 / int8 arguments outside its range; oid above 2^31
  ('nw_so', 'SELECT s, o, l FROM nw WHERE s > 40000'),
  ('nw_so', 'SELECT s, o, l FROM nw WHERE s >= -40000::int4 AND s < -999'),
  ('nw_so', 'SELECT s, o, l FROM nw WHERE s = -32768'),
  ('nw_so', 'SELECT s, o, l FROM nw WHERE s = 32767 AND o > 2147483648::oid'),
  ('nw_so', 'SELECT s, o FROM nw WHERE s = 5 AND o < 3000000000::oid'),
  ('nw_so', 'SELECT s, o, l FROM nw WHERE s = 99999::int8'),
  -- date against timestamps (a window: the heap recheck decides), infinities
  ('nw_d', 'SELECT d FROM nw WHERE d >= ''2027-01-01 12:00''::timestamp'),
  ('nw_d', 'SELECT d FROM nw WHERE d < ''2025-06-01''::timestamptz'),
  ('nw_d', 'SELECT d FROM nw WHERE d = ''infinity'''),
  ('nw_d', 'SELECT d FROM nw WHERE d <= ''-infinity'''),
  ('nw_d', 'SELECT d FROM nw WHERE d > ''infinity''::timestamp'),
  -- collated text and timetz key columns come back from the index now
  ('nw_t', 'SELECT t, tz FROM nw WHERE t >= ''a'' AND t < ''b'''),
  ('nw_t', 'SELECT t, tz FROM nw WHERE t = ''Ä7'''),
  ('nw_t', 'SELECT t, tz FROM nw WHERE t IS NULL AND tz > ''12:00+00''');
SELECT id, idx, (nw_same(q, idx)).* FROM nw_queries ORDER BY id;

-- ordered scans in both directions through DESC narrow columns: no Sort, same order
SET enable_seqscan = off; SET enable_sort = off;
SELECT count(*) FILTER (WHERE rn <> pos) AS misordered, count(*) AS n FROM (
    SELECT row_number() OVER () AS rn,
           rank() OVER (ORDER BY i DESC NULLS FIRST, d, ctid) AS pos
    FROM (SELECT i, d, ctid FROM nw ORDER BY i DESC NULLS FIRST, d) x) y;
SELECT array_agg(i ORDER BY ord) = (SELECT array_agg(i ORDER BY i NULLS LAST) FROM nw WHERE i IS NOT NULL)
       AS backward_matches
FROM (SELECT i, row_number() OVER () AS ord FROM (SELECT i FROM nw WHERE i IS NOT NULL
      ORDER BY i ASC NULLS LAST, d DESC) a) b;
RESET enable_seqscan; RESET enable_sort;

-- 3. DML and VACUUM, then every index still holds exactly the table
DELETE FROM nw WHERE l % 5 = 0;
UPDATE nw SET i = i + 1, s = -s WHERE l % 7 = 0 AND i < 2147483647 AND s > -32768;
DELETE FROM nw_w WHERE l % 5 = 0;
UPDATE nw_w SET i = i + 1, s = -s WHERE l % 7 = 0 AND i < 2147483647 AND s > -32768;
VACUUM nw;
VACUUM nw_w;
SELECT c.relname, (dex_check(c.oid)).entries = (SELECT count(*) FROM nw) AS one_entry_per_row,
       (SELECT count(*) FROM nw) AS rows
FROM pg_class c WHERE c.relname LIKE 'nw\_%' AND c.relkind = 'i' AND c.relname <> 'nw_i_desc_wide' ORDER BY 1;
SELECT (dex_check('nw_i_desc_wide')).entries = (SELECT count(*) FROM nw_w) AS wide_one_entry_per_row;
SELECT id, idx, (nw_same(q, idx)).* FROM nw_queries WHERE id IN (1, 2, 7, 10, 12, 16, 20, 25) ORDER BY id;

-- 4. 32 key columns (INDEX_MAX_KEYS): int2 (3 bytes each), and int4 up to
-- the entry limit (5 bytes each: 29 columns fit 146 bytes, 30 do not)
SELECT format('CREATE TABLE nw32 (%s) WITH (autovacuum_enabled = off)',
              string_agg(format('c%s int2', g), ', ' ORDER BY g)) FROM generate_series(1, 32) g \gexec
SELECT format('CREATE INDEX nw32_all ON nw32 USING dex (%s)',
              string_agg(format('c%s', g), ', ' ORDER BY g)) FROM generate_series(1, 32) g \gexec
SELECT format('INSERT INTO nw32 SELECT %s FROM generate_series(1, 500) r',
              string_agg(format('((r * %s) %% %s)::int2', g, 3 + g % 5), ', ' ORDER BY g))
FROM generate_series(1, 32) g \gexec
SELECT (dex_check('nw32_all')).entries AS nw32_entries;
SELECT kind, same, n FROM nw_same('SELECT c1, c2, c31, c32 FROM nw32 WHERE c1 = 2 AND c2 = 1 AND c3 >= 1', 'nw32_all');
SELECT kind, same, n FROM nw_same('SELECT * FROM nw32 WHERE c1 = 0 AND c2 = 0 AND c3 = 0 AND c4 = 0', 'nw32_all');
SELECT format('CREATE TABLE nw29 (%s) WITH (autovacuum_enabled = off)',
              string_agg(format('c%s int4', g), ', ' ORDER BY g)) FROM generate_series(1, 30) g \gexec
SELECT format('CREATE INDEX nw29_all ON nw29 USING dex (%s)',
              string_agg(format('c%s', g), ', ' ORDER BY g)) FROM generate_series(1, 29) g \gexec
SELECT format('INSERT INTO nw29 SELECT %s FROM generate_series(1, 300) r',
              string_agg(format('r * %s - 1000', g), ', ' ORDER BY g)) FROM generate_series(1, 30) g \gexec
VACUUM nw29;
SELECT kind, same, n FROM nw_same('SELECT c1, c29 FROM nw29 WHERE c1 BETWEEN -900 AND -800', 'nw29_all');
SELECT format('CREATE INDEX nw30_all ON nw29 USING dex (%s)',
              string_agg(format('c%s', g), ', ' ORDER BY g)) FROM generate_series(1, 30) g \gexec
-- ... while rows with NULLs (1 byte each) still fit an index of 30 columns
TRUNCATE nw29;
SELECT format('CREATE INDEX nw30_all ON nw29 USING dex (%s)',
              string_agg(format('c%s', g), ', ' ORDER BY g)) FROM generate_series(1, 30) g \gexec
INSERT INTO nw29 (c1, c2) VALUES (1, 2);
INSERT INTO nw29 SELECT g, g, g, g, g, g, g, g, g, g, g, g, g, g, g, g, g, g, g, g, g, g, g, g, g, g, g, g, g, g
FROM generate_series(1, 1) g;
