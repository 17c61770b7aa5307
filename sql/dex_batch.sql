--
-- dex_batch: entries held back by aminsert (dex.insert_batch, extension/
-- dexpending.c) reach the tree at the end of the statement, before the
-- backend's own scans, and never for rows of an aborted (sub)transaction.
--
-- bt_k writes through (its batches travel to the memory nodes) until it is
-- rebuilt below with the default, write-back: the same answers then come
-- from entries the statement's end puts into cached leaves.
CREATE TABLE bt (id serial, k int8) WITH (autovacuum_enabled = off);
CREATE INDEX bt_k ON bt USING dex (k) WITH (write_back = off);
-- how many rows the dex index finds (index scan forced) vs the heap
CREATE FUNCTION bt_index_count() RETURNS bigint
LANGUAGE plpgsql SET enable_seqscan = off SET enable_bitmapscan = off AS $$
DECLARE n bigint;
BEGIN
  SELECT count(*) INTO n FROM bt WHERE k >= 0;
  RETURN n;
END $$;
CREATE FUNCTION bt_entries_match() RETURNS text
LANGUAGE plpgsql AS $$
DECLARE e bigint; n bigint;
BEGIN
  SELECT entries INTO e FROM dex_check('bt_k');
  SELECT count(*) INTO n FROM bt;
  RETURN CASE WHEN e = n THEN 'ok' ELSE format('%s entries for %s rows', e, n) END;
END $$;

-- a multi-row statement: more rows than one batch; answers equal the heap's
INSERT INTO bt (k) SELECT g FROM generate_series(1, 1000) g;
SELECT bt_entries_match(), bt_index_count();
SELECT dex_same('SELECT id FROM bt WHERE k BETWEEN 100 AND 400');

-- the held-back entries travel in batches (one round trip per memory node
-- for up to 256 entries): far fewer round trips than rows. Where memory
-- nodes refuse offloaded writes (Soft-RoCE's HCA atomics in check-rdma) the
-- entries go one at a time.
SELECT dex_stats_reset();
INSERT INTO bt (k) SELECT g FROM generate_series(200001, 202000) g;
SELECT (batched_inserts >= 1000 AND round_trips < 1000)
       OR current_setting('dex.memnodes') LIKE 'rdma://%' AS batched
FROM dex_stats();
SELECT bt_entries_match();

-- rule 1: in the inserting transaction, the backend's next statement and a
-- statement-level trigger of the inserting statement itself see the rows
CREATE TABLE bt_seen (n bigint);
CREATE FUNCTION bt_count_after() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN INSERT INTO bt_seen SELECT bt_index_count(); RETURN NULL; END $$;
CREATE TRIGGER bt_after AFTER INSERT ON bt FOR EACH STATEMENT EXECUTE FUNCTION bt_count_after();
BEGIN;
INSERT INTO bt (k) SELECT g FROM generate_series(1001, 1100) g;
SELECT bt_index_count();
SELECT n FROM bt_seen;
COMMIT;
DROP TRIGGER bt_after ON bt;
SELECT bt_entries_match();

-- rule 3. Statements that completed wrote their entries (at ExecutorEnd):
-- a rolled-back savepoint or transaction leaves those for VACUUM, as btree
-- does -- here 250 entries more than rows (then bt_index_count's index scan
-- finds those rows dead and removes their entries: dead-entry hints,
-- src/README.md).
BEGIN;
INSERT INTO bt (k) SELECT g FROM generate_series(2001, 2100) g;
SAVEPOINT s1;
INSERT INTO bt (k) SELECT g FROM generate_series(3001, 3200) g;
SAVEPOINT s2;
INSERT INTO bt (k) SELECT g FROM generate_series(4001, 4050) g;
RELEASE SAVEPOINT s2;
ROLLBACK TO SAVEPOINT s1;
INSERT INTO bt (k) SELECT g FROM generate_series(5001, 5010) g;
COMMIT;
SELECT bt_entries_match(), bt_index_count();
-- An error in the middle of a statement: its first entry was written at
-- once, the 148 it held back after that are discarded with its
-- subtransaction, never written (1 more, not 149).
BEGIN;
SAVEPOINT s1;
INSERT INTO bt (k) SELECT CASE WHEN g = 6150 THEN 1 / (g - 6150) ELSE g END FROM generate_series(6001, 6200) g;
ROLLBACK TO SAVEPOINT s1;
INSERT INTO bt (k) VALUES (7000);
COMMIT;
SELECT bt_entries_match(), bt_index_count();
-- a rolled-back transaction
BEGIN;
INSERT INTO bt (k) SELECT g FROM generate_series(8001, 8300) g;
ROLLBACK;
SELECT bt_entries_match();
VACUUM bt;
SELECT bt_entries_match();

-- rule 4: rebuilt or dropped in the inserting transaction
BEGIN;
INSERT INTO bt (k) SELECT g FROM generate_series(9001, 9100) g;
REINDEX INDEX bt_k;
INSERT INTO bt (k) SELECT g FROM generate_series(9101, 9120) g;
COMMIT;
SELECT bt_entries_match(), bt_index_count();
BEGIN;
INSERT INTO bt (k) SELECT g FROM generate_series(10001, 10100) g;
TRUNCATE bt;
INSERT INTO bt (k) SELECT g FROM generate_series(10101, 10130) g;
COMMIT;
SELECT bt_entries_match(), bt_index_count();
-- a tablespace move copies the metapage: same tree, the rows stay indexed
SET allow_in_place_tablespaces = true;
CREATE TABLESPACE dex_batch_ts LOCATION '';
BEGIN;
INSERT INTO bt (k) SELECT g FROM generate_series(11001, 11100) g;
ALTER INDEX bt_k SET TABLESPACE dex_batch_ts;
COMMIT;
SELECT bt_entries_match(), bt_index_count();
ALTER INDEX bt_k SET TABLESPACE pg_default;
DROP TABLESPACE dex_batch_ts;
BEGIN;
INSERT INTO bt (k) SELECT g FROM generate_series(12001, 12100) g;
DROP INDEX bt_k;
COMMIT;
CREATE INDEX bt_k ON bt USING dex (k);

-- dex.insert_batch = 1 writes each entry at once: same answers
SET dex.insert_batch = 1;
INSERT INTO bt (k) SELECT g FROM generate_series(13001, 13300) g;
SELECT bt_entries_match();
-- shrinking the batch between rows of one transaction
RESET dex.insert_batch;
BEGIN;
INSERT INTO bt (k) SELECT g FROM generate_series(14001, 14100) g;
SET LOCAL dex.insert_batch = 10;
INSERT INTO bt (k) SELECT g FROM generate_series(14101, 14150) g;
COMMIT;
SELECT bt_entries_match(), bt_index_count();
SELECT dex_same('SELECT id FROM bt WHERE k BETWEEN 13000 AND 14200', true);

-- a unique index is never held back: a second session's check must find the key
CREATE TABLE bu (k int8);
CREATE UNIQUE INDEX bu_k ON bu USING dex (k);
INSERT INTO bu SELECT g FROM generate_series(1, 300) g;
INSERT INTO bu VALUES (42);
SELECT count(*) FROM bu;
DROP TABLE bu;
-- byte-string entries (a text key with an INCLUDE column) are held back the
-- same way: rule 1, rule 3 (savepoints, an error in a statement), rule 4
-- (REINDEX), a batch size raised mid-transaction
CREATE TABLE btx (id serial, s text COLLATE "C") WITH (autovacuum_enabled = off);
CREATE INDEX btx_s ON btx USING dex (s) INCLUDE (id);
CREATE FUNCTION btx_check() RETURNS text
LANGUAGE plpgsql SET enable_seqscan = off SET enable_bitmapscan = off AS $$
DECLARE e bigint; n bigint; i bigint;
BEGIN
  SELECT entries INTO e FROM dex_check('btx_s');
  SELECT count(*) INTO n FROM btx;
  SELECT count(*) INTO i FROM btx WHERE s >= '';
  RETURN CASE WHEN e = n AND i = n THEN 'ok'
         ELSE format('%s entries, %s rows found, %s rows', e, i, n) END;
END $$;
-- (sorted, then one OFFLOAD_BYTES_BATCH per memory node: dex_bytes_batch)
INSERT INTO btx (s) SELECT 'row ' || g FROM generate_series(1, 2000) g;
SELECT btx_check();
BEGIN;
INSERT INTO btx (s) SELECT 'a ' || g FROM generate_series(1, 100) g;
SELECT count(*) FROM btx WHERE s >= 'a ' AND s < 'a!';   -- rule 1 (index scan)
SAVEPOINT s1;
INSERT INTO btx (s) SELECT 'b ' || g FROM generate_series(1, 200) g;
ROLLBACK TO SAVEPOINT s1;
SAVEPOINT s2;
INSERT INTO btx (s) SELECT CASE WHEN g = 150 THEN (1 / (g - 150))::text ELSE 'c ' || g END
FROM generate_series(1, 200) g;
ROLLBACK TO SAVEPOINT s2;
INSERT INTO btx (s) SELECT 'd ' || g FROM generate_series(1, 50) g;
COMMIT;
VACUUM btx;
SELECT btx_check();
BEGIN;
INSERT INTO btx (s) SELECT 'e ' || g FROM generate_series(1, 100) g;
REINDEX INDEX btx_s;
INSERT INTO btx (s) SELECT 'f ' || g FROM generate_series(1, 100) g;
COMMIT;
SELECT btx_check();
BEGIN;
SET LOCAL dex.insert_batch = 10;
INSERT INTO btx (s) SELECT 'g ' || g FROM generate_series(1, 95) g;
SET LOCAL dex.insert_batch = 1000;
INSERT INTO btx (s) SELECT 'h ' || g || repeat('x', 100) FROM generate_series(1, 3000) g;
COMMIT;
SELECT btx_check();
SELECT dex_same('SELECT id FROM btx WHERE s BETWEEN ''g'' AND ''i''');

-- a multi-row statement into a cached index leaves its leaves cached: at its
-- end the leaves its batches dropped are read back (batch_rewarms), so the
-- point lookups after it find every leaf in the cache (no miss, no remote
-- read). Where memory nodes refuse offloaded writes (check-rdma) nothing is
-- batched and the inserts refresh their leaves one at a time.
CREATE TABLE bw (k int8) WITH (autovacuum_enabled = off);
INSERT INTO bw SELECT g * 10 FROM generate_series(1, 20000) g;
-- (room: no leaf splits; write-through: a write-back index keeps its leaves)
CREATE INDEX bw_k ON bw USING dex (k) WITH (fillfactor = 50, write_back = off);
SET dex.offload = off;      -- the scan reads (and admits) every leaf itself
SET dex.leaf_admission = 1;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*) FROM bw WHERE k >= 0;
-- (and point lookups all over the range its inner nodes)
SELECT count(*) FROM generate_series(1, 20000, 7) g, LATERAL (SELECT 1 FROM bw WHERE k = g * 10 LIMIT 1) x;
RESET dex.offload;
SELECT dex_stats_reset();
INSERT INTO bw SELECT g * 10 + 5 FROM generate_series(1, 20000, 37) g;
SELECT batch_rewarms > 100 OR current_setting('dex.memnodes') LIKE 'rdma://%' AS read_back FROM dex_stats();
SELECT dex_stats_reset();
SET dex.offload = off;
SELECT count(*) FROM generate_series(1, 20000, 37) g, LATERAL (SELECT 1 FROM bw WHERE k = g * 10 + 5 LIMIT 1) x;
SELECT (cache_misses = 0 AND remote_reads = 0) OR current_setting('dex.memnodes') LIKE 'rdma://%' AS all_cached FROM dex_stats();
RESET dex.offload;
RESET dex.leaf_admission;
RESET enable_seqscan;
RESET enable_bitmapscan;
SELECT dex_same('SELECT k FROM bw WHERE k BETWEEN 1000 AND 90000');

DROP TABLE bt, bt_seen, btx, bw;
DROP FUNCTION bt_index_count(), bt_entries_match(), bt_count_after(), btx_check();
