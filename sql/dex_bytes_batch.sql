--
-- dex_bytes_batch: the entries a multi-row statement holds back for a
-- byte-string (text) index reach the memory nodes as one OFFLOAD_BYTES_BATCH
-- per memory node for up to 256 entries (src/README.md "Offloading",
-- batched offloaded inserts), not one or two round trips each. Counted with
-- dex_stats() (this backend's counters), bounds generous: three memory
-- nodes, so up to three round trips per 256 rows, plus a few for the
-- journal. Answers compared with a seqscan.
--
CREATE EXTENSION IF NOT EXISTS dex;
CREATE TABLE bb (id int, k text COLLATE "C") WITH (autovacuum_enabled = off);
INSERT INTO bb SELECT g, 'key ' || lpad((2 * g)::text, 8, '0') FROM generate_series(1, 20000) g;
-- half-full leaves: the spread-out rows below fit without a split; write-
-- through (a write-back index puts the entries into its cached leaves)
CREATE INDEX bb_k ON bb USING dex (k) WITH (fillfactor = 50, write_back = off);
CREATE FUNCTION bb_same() RETURNS text
LANGUAGE plpgsql AS $$
DECLARE a text; b text; e bigint; n bigint;
BEGIN
  SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off;
  SELECT count(*) || ' ' || md5(string_agg(k || id, ',' ORDER BY k, id)) INTO a FROM bb WHERE k >= '';
  SET LOCAL enable_seqscan = on; SET LOCAL enable_indexscan = off;
  SELECT count(*) || ' ' || md5(string_agg(k || id, ',' ORDER BY k, id)) INTO b FROM bb;
  SELECT entries INTO e FROM dex_check('bb_k');
  SELECT count(*) INTO n FROM bb;
  RETURN CASE WHEN a = b AND e = n THEN 'ok' ELSE format('index %s, seqscan %s, %s entries', a, b, e) END;
END $$;
-- the node cache learns the inner nodes (point lookups all over the range)
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*) FROM generate_series(1, 20000, 5) g
  WHERE EXISTS (SELECT 1 FROM bb WHERE k = 'key ' || lpad((2 * g)::text, 8, '0'));
RESET enable_seqscan;
RESET enable_bitmapscan;

-- 2,560 rows in one statement, spread over the key range (odd keys): ten
-- batches. Where memory nodes refuse offloaded writes (Soft-RoCE's HCA
-- atomics in check-rdma) the entries go one at a time.
SELECT dex_stats_reset();
INSERT INTO bb SELECT 20000 + g, 'key ' || lpad((14 * g + 1)::text, 8, '0') FROM generate_series(1, 2560) g;
SELECT (batched_inserts >= 2000 AND offloads >= 2000 AND round_trips <= 10 * 3 + 100)
       OR current_setting('dex.memnodes') LIKE 'rdma://%' AS about_one_round_trip_per_256_rows
FROM dex_stats();
SELECT bb_same();

-- the same without offloading: one entry at a time, at least a round trip each
SET dex.offload = off;
SELECT dex_stats_reset();
INSERT INTO bb SELECT 30000 + g, 'key ' || lpad((14 * g + 3)::text, 8, '0') FROM generate_series(1, 2560) g;
SELECT batched_inserts = 0 AS none_batched, round_trips >= 2560 AS one_at_a_time FROM dex_stats();
RESET dex.offload;
SELECT bb_same();

-- a batch into full leaves (ascending keys past the end: every entry lands
-- in the rightmost leaf, which splits round after round) stays exact
SELECT dex_stats_reset();
INSERT INTO bb SELECT 40000 + g, 'key ' || lpad((100000 + g)::text, 8, '0') FROM generate_series(1, 3000) g;
SELECT batched_inserts >= 1500 OR current_setting('dex.memnodes') LIKE 'rdma://%' AS mostly_batched FROM dex_stats();
SELECT bb_same();

DROP TABLE bb;
DROP FUNCTION bb_same();
