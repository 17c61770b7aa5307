-- Byte-string indexes journal their inserts (src/README.md "Crash survival:
-- the insert journal"; extension/dexinsert.c dex_insert_bytes) instead of
-- flushing WAL before every row: a bulk insert writes WAL a few times (when
-- a journal lane is full), not once per row; and whatever the inserting
-- transactions do (roll back, roll back to a savepoint, update, delete),
-- index, bitmap and ordered scans of a text index and of a partial
-- two-column index give a sequential scan's rows. (The crash recovery of the
-- journal: scripts/tests/t_crash_bytes.sh.)
CREATE EXTENSION IF NOT EXISTS dex;
CREATE TABLE jb (id int, k text COLLATE "C", g int, name text COLLATE "C")
  WITH (autovacuum_enabled = off);
CREATE INDEX jb_k ON jb USING dex (k);
CREATE INDEX jb_gn ON jb USING dex (g, name DESC) WHERE g % 2 = 0;

-- One INSERT of 4,000 rows: few WAL writes. (Writes, not syncs: a test
-- cluster may run with fsync = off, where a flush still writes.)
SELECT pg_stat_force_next_flush();
SELECT pg_stat_reset_shared('wal');
INSERT INTO jb SELECT i, md5(i::text), i % 100, 'n' || (i % 37) FROM generate_series(1, 4000) i;
SELECT pg_stat_force_next_flush();
SELECT wal_write < 400 AS few_wal_writes FROM pg_stat_wal;

-- Aborted rows, a savepoint, updates, deletes.
BEGIN;
INSERT INTO jb SELECT i, md5(i::text), i % 100, 'aborted' FROM generate_series(5001, 5800) i;
ROLLBACK;
BEGIN;
INSERT INTO jb SELECT i, 'kept' || i, i % 100, 'kept' FROM generate_series(6001, 6300) i;
SAVEPOINT s;
INSERT INTO jb SELECT i, 'undone' || i, i % 100, 'undone' FROM generate_series(7001, 7300) i;
ROLLBACK TO s;
UPDATE jb SET k = k || '+', name = name || '+' WHERE id % 7 = 0;
COMMIT;
DELETE FROM jb WHERE id % 11 = 0;

-- Rows of pred through each access path (id list md5, count), and whether
-- the index path used idx.
CREATE FUNCTION jb_paths(pred text, idx text, ord text)
RETURNS TABLE (path text, n bigint, digest text, used_index bool) LANGUAGE plpgsql AS $$
DECLARE m text; q text; plan text; line text;
BEGIN
  FOREACH m IN ARRAY ARRAY['seq', 'index', 'bitmap', 'ordered'] LOOP
    PERFORM set_config('enable_seqscan', CASE WHEN m = 'seq' THEN 'on' ELSE 'off' END, true);
    PERFORM set_config('enable_indexscan', CASE WHEN m IN ('index', 'ordered') THEN 'on' ELSE 'off' END, true);
    PERFORM set_config('enable_bitmapscan', CASE WHEN m = 'bitmap' THEN 'on' ELSE 'off' END, true);
    PERFORM set_config('enable_sort', CASE WHEN m = 'ordered' THEN 'off' ELSE 'on' END, true);
    IF m = 'ordered' THEN
      q := format('SELECT count(*), md5(string_agg(id::text, '','' ORDER BY id)) FROM (SELECT id FROM jb WHERE %s ORDER BY %s) s', pred, ord);
    ELSE
      q := format('SELECT count(*), md5(string_agg(id::text, '','' ORDER BY id)) FROM jb WHERE %s', pred);
    END IF;
    plan := '';
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP plan := plan || line; END LOOP;
    path := m;
    EXECUTE q INTO n, digest;
    used_index := plan LIKE '%' || idx || '%';
    RETURN NEXT;
  END LOOP;
  PERFORM set_config('enable_seqscan', 'on', true);
  PERFORM set_config('enable_indexscan', 'on', true);
  PERFORM set_config('enable_bitmapscan', 'on', true);
  PERFORM set_config('enable_sort', 'on', true);
END $$;

-- Every path agrees with the seqscan (one distinct digest), and the
-- non-seq paths used the index.
SELECT count(DISTINCT (n, digest)) AS answers, max(n) AS rows_,
       bool_and(used_index) FILTER (WHERE path <> 'seq') AS index_used
  FROM jb_paths($$k >= '0' AND k < 'l'$$, 'jb_k', 'k');
SELECT count(DISTINCT (n, digest)) AS answers, max(n) AS rows_,
       bool_and(used_index) FILTER (WHERE path <> 'seq') AS index_used
  FROM jb_paths($$g % 2 = 0 AND g BETWEEN 10 AND 60$$, 'jb_gn', 'g, name DESC');
VACUUM jb;
SELECT count(DISTINCT (n, digest)) AS answers, max(n) AS rows_,
       bool_and(used_index) FILTER (WHERE path <> 'seq') AS index_used
  FROM jb_paths($$k >= '0'$$, 'jb_k', 'k');
SELECT count(DISTINCT (n, digest)) AS answers, max(n) AS rows_,
       bool_and(used_index) FILTER (WHERE path <> 'seq') AS index_used
  FROM jb_paths($$g % 2 = 0 AND g >= 0$$, 'jb_gn', 'g, name DESC');
-- One entry per row (the partial index: per covered row) after VACUUM.
SELECT (SELECT entries FROM dex_check('jb_k')) = (SELECT count(*) FROM jb) AS k_entries_match,
       (SELECT entries FROM dex_check('jb_gn')) = (SELECT count(*) FROM jb WHERE g % 2 = 0) AS gn_entries_match;
DROP TABLE jb;
DROP FUNCTION jb_paths(text, text, text);
