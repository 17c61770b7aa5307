--
-- dex_cache: point lookups through the shared node cache (dex.cache_size is
-- 64MB in the test cluster, far more than this index needs: no eviction)
--
CREATE TABLE c (k int, v int) WITH (autovacuum_enabled = off);
INSERT INTO c SELECT g, g FROM generate_series(1, 20000) g;
CREATE INDEX c_k ON c USING dex (k);
SELECT entries, height FROM dex_check('c_k');

SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT v FROM c WHERE k = 42;

-- n point lookups of keys spread over the whole index; returns the sum of v
CREATE FUNCTION lookups(n int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  s bigint := 0;
  x int;
BEGIN
  FOR i IN 1..n LOOP
    SELECT v INTO x FROM c WHERE k = (i * 7919) % 20000 + 1;
    s := s + x;
  END LOOP;
  RETURN s;
END $$;
SELECT sum((i * 7919) % 20000 + 1) AS expected FROM generate_series(1, 2000) i;

-- Warm: admit every leaf read (deterministic), then the same lookups again
-- must not touch remote memory at all.
SET dex.leaf_admission = 1.0;
SELECT lookups(2000);
SELECT dex_stats_reset();
SELECT lookups(2000);
SELECT remote_reads, cache_hits >= 2000 * 3 AS hits, cache_misses, evictions
  FROM dex_stats();

-- dex_cache_stats(): frames at every level of the index (root: one frame),
-- write-through frames are never dirty, nothing cooled in a cache this large
SELECT level, CASE WHEN level = 2 THEN frames::text ELSE (frames > 0)::text END AS frames,
       cooling, dirty
  FROM dex_cache_stats() WHERE index = 'c_k'::regclass ORDER BY level;

-- Inner nodes only (Sherman / SMART policy): leaves come from remote memory
-- again (one leaf read per lookup), inner nodes still from the cache. A
-- policy of write-through indexes: a write-back index reads the leaves it
-- has cached whatever the policy (a cached leaf may be newer than remote
-- memory), so c_k is switched to write-through first.
ALTER INDEX c_k SET (write_back = off);
SET dex.cache_leaves = off;
SELECT dex_stats_reset();
SELECT lookups(2000);
SELECT remote_reads >= 2000 AS leaf_reads, cache_hits >= 2000 * 2 AS inner_hits
  FROM dex_stats();
-- Writes from an inner-only session at leaves this server has cached (every
-- leaf, from the lookups above): they finish (they used to loop until
-- dex.op_timeout, restarting for a frame the session never uses), and the
-- cached leaves show them to a session that reads from frames (refreshed
-- from the memory node's images: no remote read). Single-row statements: a
-- multi-row one batches its inserts, which take another path.
DO $$ BEGIN
  FOR i IN 0..19 LOOP UPDATE c SET k = k + 1 WHERE k = i * 1000 + 7; END LOOP;
END $$;
RESET dex.cache_leaves;
SELECT dex_stats_reset();
SELECT count(*), sum(k) FROM c WHERE k BETWEEN 1 AND 20000;
SELECT remote_reads FROM dex_stats();
UPDATE c SET k = k - 1 WHERE v % 1000 = 7;

-- Writes are write-through and update cached frames: answers stay exact.
UPDATE c SET v = v + 1 WHERE k % 10 = 0;
INSERT INTO c SELECT g, g FROM generate_series(20001, 22000) g;
DELETE FROM c WHERE k % 7 = 0;
SELECT count(*), sum(v) FROM c WHERE k BETWEEN 1 AND 22000;
SET enable_indexscan = off; SET enable_seqscan = on;
SELECT count(*), sum(v) FROM c WHERE k BETWEEN 1 AND 22000;
RESET enable_indexscan; SET enable_seqscan = off;

-- REINDEX builds a new tree; DROP INDEX drops the frames of its namespace.
REINDEX INDEX c_k;
SELECT count(*), sum(v) FROM c WHERE k BETWEEN 1 AND 22000;
SELECT count(*) > 0 AS cached FROM dex_cache_stats() WHERE index = 'c_k'::regclass;
CREATE TEMP TABLE others AS
  SELECT coalesce(sum(frames), 0) AS n FROM dex_cache_stats()
  WHERE index IS DISTINCT FROM 'c_k'::regclass;
DROP INDEX c_k;
SELECT (SELECT coalesce(sum(frames), 0) FROM dex_cache_stats()) = (SELECT n FROM others)
  AS frames_dropped;

-- Offloading forced on (dex.offload = on): lookups and single-row inserts
-- that miss the cache at or below the placement level are finished by a
-- memory node (dex_stats().offloads, dex_memnodes().offloads); answers and
-- the tree stay exact.
CREATE TABLE o (k int, v int) WITH (autovacuum_enabled = off);
INSERT INTO o SELECT g, g FROM generate_series(1, 50000) g;
CREATE INDEX o_k ON o USING dex (k);
SET dex.offload = on;
SELECT dex_stats_reset();
SELECT sum((SELECT sum(v) FROM o WHERE k = (i * 7919) % 50000 + 1)) AS lookups
  FROM generate_series(1, 300) i;
SELECT sum((i * 7919) % 50000 + 1) AS expected FROM generate_series(1, 300) i;
INSERT INTO o SELECT g * 2 + 100001, g FROM generate_series(1, 200) g;
SELECT offloads > 0 AS offloaded FROM dex_stats();
SELECT sum(offloads) > 0 AS memnodes_count_them FROM dex_memnodes();
SELECT count(*), sum(v) FROM o WHERE k > 100000;
SELECT entries FROM dex_check('o_k');
-- auto (the default) with a cache that still has room fetches instead: the
-- fetched nodes serve later lookups from the cache.
RESET dex.offload;
SHOW dex.offload;
SELECT dex_stats_reset();
SELECT sum((SELECT sum(v) FROM o WHERE k = (i * 104729) % 50000 + 1)) > 0 AS looked_up
  FROM generate_series(1, 300) i;
SELECT offloads FROM dex_stats();
DROP TABLE o;

-- Single-row inserts, each its own transaction, into cached leaves: nothing
-- per row for the journal's retention horizon, which the worker publishes and
-- a full journal lane raises (it cost 2 round trips per row). What a row
-- costs otherwise: an offloaded insert is one RPC (it carries the entry and
-- its journal record); where the memory node refuses offloaded writes (rdma
-- with IBV_ATOMIC_HCA) a write-through re-reads, locks and publishes the
-- leaf, 3 round trips. dex.offload = on: auto would choose by timing.
SET dex.offload = on;
CREATE TABLE s (k int) WITH (autovacuum_enabled = off);
INSERT INTO s SELECT g * 2 FROM generate_series(1, 20000) g;
CREATE INDEX s_k ON s USING dex (k);
SELECT count(*) FROM s WHERE k > 0;
SELECT dex_stats_reset();
\set ECHO none
SELECT format('INSERT INTO s VALUES (%s)', (i * 7919) % 20000 * 2 + 1)
  FROM generate_series(1, 300) i \gexec
\set ECHO all
SELECT round_trips < 2 * least(offloads, 300) + 4 * (300 - least(offloads, 300))
       AS no_round_trip_per_row_for_the_horizon
  FROM dex_stats();
SELECT count(*) FROM s WHERE k % 2 = 1 AND k > 0;
SELECT entries FROM dex_check('s_k');
DROP TABLE s;
RESET dex.offload;

RESET dex.leaf_admission;
RESET enable_seqscan;
RESET enable_bitmapscan;
DROP FUNCTION lookups(int);
DROP TABLE c;
