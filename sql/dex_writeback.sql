--
-- dex_writeback: write-back mode (reloption write_back, on by default,
-- src/README.md "Write-back mode"). In-place leaf changes stay in the node
-- cache (dirty frames) and reach remote memory on eviction, dex_flush(), the
-- write-back worker's periodic flush, or a clean shutdown.
--
-- The write-back worker must not flush behind our back while we count.
ALTER SYSTEM SET dex.writeback_interval = '1h';
SELECT pg_reload_conf();
SELECT pg_sleep(0.5);

CREATE TABLE wb (k int, v int) WITH (autovacuum_enabled = off);
INSERT INTO wb SELECT g, g FROM generate_series(1, 4000) g;
CREATE INDEX wb_k ON wb USING dex (k) WITH (write_back = on);
CREATE TABLE wt (k int, v int) WITH (autovacuum_enabled = off);
INSERT INTO wt SELECT g, g FROM generate_series(1, 4000) g;
CREATE INDEX wt_k ON wt USING dex (k) WITH (write_back = off);
SELECT relname, reloptions FROM pg_class WHERE relname IN ('wb_k', 'wt_k') ORDER BY relname;

-- An index created without options is a write-back index: an insert into
-- its cached leaf stays in the cache (a dirty frame).
CREATE TABLE wd (k int) WITH (autovacuum_enabled = off);
INSERT INTO wd SELECT g * 2 FROM generate_series(1, 1000) g;
CREATE INDEX wd_k ON wd USING dex (k);
SELECT reloptions IS NULL AS no_options FROM pg_class WHERE relname = 'wd_k';
SET enable_seqscan = off; SET enable_bitmapscan = off;
SELECT count(*) AS wd_warmed FROM wd WHERE k BETWEEN 1 AND 2000;
RESET enable_seqscan; RESET enable_bitmapscan;
SELECT dex_stats_reset();
INSERT INTO wd VALUES (501);
SELECT dirty_updates AS default_dirty_updates FROM dex_stats();
SELECT sum(dirty) AS wd_dirty_frames FROM dex_cache_stats() WHERE index = 'wd_k'::regclass;
DROP TABLE wd;
SELECT dex_flush() >= 0 AS flushed_leftovers;

-- Same in-place inserts (one per leaf: no split) into both indexes. Their
-- leaves are cached first (a write-back index admits every leaf it reads):
-- an insert into an uncached leaf is written through by the memory node.
SET enable_seqscan = off; SET enable_bitmapscan = off;
SELECT count(*) AS warmed FROM wb WHERE k BETWEEN 1 AND 4000;
RESET enable_seqscan; RESET enable_bitmapscan;
SELECT dex_stats_reset();
INSERT INTO wb SELECT g, -g FROM generate_series(1, 4000, 60) g;
SELECT remote_writes AS wb_writes, index_ops AS wb_ops, dirty_updates AS wb_dirty,
       write_backs AS wb_written FROM dex_stats() \gset
SELECT dex_stats_reset();
-- row by row, as a single-row INSERT would (dex_batch covers held-back entries)
SET dex.insert_batch = 1;
INSERT INTO wt SELECT g, -g FROM generate_series(1, 4000, 60) g;
RESET dex.insert_batch;
-- (a write-through insert reaches remote memory as a one-sided WRITE or as
-- an offloaded insert the memory node applies: both count)
SELECT remote_writes + offloads AS wt_writes, dirty_updates AS wt_dirty FROM dex_stats() \gset
SELECT :wb_ops >= 67 AS all_inserted, :wt_writes >= 67 AS write_through_writes,
       :wb_writes * 10 < :wt_writes AS write_back_writes_far_fewer;
-- dex_stats() counts the changes kept dirty (write-back index only) and the
-- dirty frames written back (none yet: nothing was evicted or flushed).
SELECT :wb_dirty >= 67 AS dirty_updates_counted, :wt_dirty AS write_through_dirty_updates,
       :wb_written AS written_back_before_flush;
SELECT sum(dirty) > 0 AS has_dirty_frames FROM dex_cache_stats() WHERE index = 'wb_k'::regclass;

-- Answers through the dirty frames equal a sequential scan.
CREATE FUNCTION wb_diff() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE d bigint;
BEGIN
  SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off;
  CREATE TEMP TABLE via_index ON COMMIT DROP AS SELECT k, v FROM wb WHERE k BETWEEN -10 AND 100000;
  SET LOCAL enable_seqscan = on; SET LOCAL enable_indexscan = off;
  SELECT (SELECT count(*) FROM (SELECT * FROM via_index EXCEPT ALL SELECT k, v FROM wb) a) +
         (SELECT count(*) FROM (SELECT k, v FROM wb EXCEPT ALL SELECT * FROM via_index) b) INTO d;
  DROP TABLE via_index;
  RETURN d;
END $$;
SELECT wb_diff() AS differing_rows;
SET enable_seqscan = off; SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT v FROM wb WHERE k = 61;
SELECT k, v FROM wb WHERE k = 61 ORDER BY v;
SELECT count(*) FROM wb WHERE k BETWEEN 1 AND 1000;
RESET enable_seqscan; RESET enable_bitmapscan;

-- dex_flush() writes the dirty frames back; then remote memory is complete.
SELECT dex_stats_reset();
SELECT dex_flush() AS flushed_frames \gset
SELECT :flushed_frames > 0 AS wrote_dirty_frames, write_backs = :flushed_frames AS write_backs_counted
  FROM dex_stats();
SELECT coalesce(sum(dirty), 0) AS dirty_after_flush FROM dex_cache_stats() WHERE index = 'wb_k'::regclass;
SELECT entries, height FROM dex_check('wb_k');

-- In-place deletes, then splits: of leaves whose rows' WAL is not flushed yet
-- (the INSERT's own), remote memory gets the split of what it holds and
-- both halves stay dirty (dirty_splits).
DELETE FROM wb WHERE k % 3 = 0;
SELECT dex_stats_reset();
-- removes the index entries (dex remove: in place, in the cached leaves); the
-- cleanup pass then writes the dirty frames back before looking for empty leaves
VACUUM wb;
SELECT dirty_updates > 0 AS deletes_in_place, write_backs > 0 AS cleanup_wrote_back FROM dex_stats();
INSERT INTO wb SELECT 2000, g FROM generate_series(1, 300) g;
SELECT dirty_splits > 0 AS split_dirty_leaves FROM dex_stats();
SELECT wb_diff() AS differing_rows;
SELECT entries FROM dex_check('wb_k');   -- flushes this index's dirty frames first
SELECT wb_diff() AS differing_rows;

-- Leaving write-back mode: the next open writes the index's dirty frames back.
INSERT INTO wb SELECT g, 7 FROM generate_series(1, 4000, 90) g;
ALTER INDEX wb_k SET (write_back = off);
SELECT wb_diff() AS differing_rows;
SELECT coalesce(sum(dirty), 0) AS dirty_after_mode_change FROM dex_cache_stats() WHERE index = 'wb_k'::regclass;
INSERT INTO wb SELECT g, 8 FROM generate_series(1, 4000, 90) g;
SELECT wb_diff() AS differing_rows;
SELECT entries FROM dex_check('wb_k');

-- A write-back index keeps working after REINDEX (a new namespace).
ALTER INDEX wb_k SET (write_back = on);
REINDEX INDEX wb_k;
INSERT INTO wb SELECT g, 9 FROM generate_series(1, 4000, 70) g;
SELECT wb_diff() AS differing_rows;

-- Empty leaves of a write-back index are merged away by VACUUM (its dirty
-- frames are written back first; merges hold both leaves' frames).
INSERT INTO wb SELECT g, 10 FROM generate_series(1, 4000, 50) g;  -- in place: dirty leaves
SELECT leaves AS leaves_before FROM dex_index_info('wb_k') \gset
DELETE FROM wb WHERE k > 100;
VACUUM wb;
SELECT leaves * 4 < :leaves_before AS empty_leaves_merged FROM dex_index_info('wb_k');
SELECT wb_diff() AS differing_rows;
INSERT INTO wb SELECT g, 11 FROM generate_series(1, 4000, 40) g;
SELECT wb_diff() AS differing_rows;
SELECT entries FROM dex_check('wb_k');

DROP TABLE wb;
DROP TABLE wt;
DROP FUNCTION wb_diff();
SELECT dex_flush() >= 0 AS flushed;
-- the cluster registry: this server writes; its beats published writer_hwm,
-- which never passes removal_lsn (src/README.md K7)
SELECT this_is_writer, writer_hwm > '0/0' AS hwm_published,
       writer_hwm <= removal_lsn AS hwm_under_removal, live_standbys,
       write_back_paused
FROM dex_cluster();
SELECT count(*) AS standby_slots FROM dex_cluster_standbys();
ALTER SYSTEM RESET dex.writeback_interval;
SELECT pg_reload_conf();
