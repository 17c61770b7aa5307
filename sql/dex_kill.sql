-- Dead-entry hints (src/README.md "Dead-entry hints"): an index scan whose
-- heap fetches find versions dead to everyone removes their entries when it
-- leaves their leaf, so a hot key under updates stops walking dead versions
-- between VACUUMs. Answers always match a sequential scan; bitmap scans kill
-- nothing; a repeatable-read snapshot (another session, through dblink) that
-- still sees old versions keeps them.
SET client_min_messages = warning;  -- quiet whether or not an earlier suite created it
CREATE EXTENSION IF NOT EXISTS dex;
CREATE EXTENSION IF NOT EXISTS dblink;
RESET client_min_messages;
-- The indexes write through: a write-back index's kills are
-- sql/dex_kill_wb.sql's. These are the kills' tests: no bottom-up pass may
-- remove the dead versions first (sql/dex_bottomup.sql tests those).
SET dex.bottom_up = off;
-- Every dead entry a scan finds goes (by default a leaf's batch needs
-- dex.kill_min_entries = 4 of them to pay the removal's round trip; section 6).
SET dex.kill_min_entries = 1;

-- Kills need the global xmin horizon past the deleters: wait (up to 30 s)
-- until no other backend holds a snapshot taken before this call (an
-- autoanalyze, say; one that takes a new snapshot meanwhile -- the next
-- table of an autovacuum worker -- holds back nothing this call waits for).
-- Names the holder if it never lets go.
CREATE FUNCTION kill_quiet() RETURNS bool LANGUAGE plpgsql AS $$
DECLARE
  since xid := pg_snapshot_xmax(pg_current_snapshot())::text::xid;
  holder text;
BEGIN
  FOR i IN 1..300 LOOP
    SELECT backend_type || ': ' || left(query, 60) INTO holder FROM pg_stat_activity
     WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid() AND age(backend_xmin) > age(since)
     LIMIT 1;
    IF holder IS NULL THEN
      RETURN true;
    END IF;
    PERFORM pg_sleep(0.1);
  END LOOP;
  RAISE NOTICE 'still holding a snapshot: %', holder;
  RETURN false;
END $$;

-- v has a btree index, so every update of v is a non-HOT update: each one
-- adds a dex entry for k too, and the old version's entry becomes dead.
CREATE TABLE kill_t (k int, v int) WITH (autovacuum_enabled = off);
CREATE INDEX kill_t_v ON kill_t (v);
INSERT INTO kill_t SELECT g % 10, g FROM generate_series(1, 100) g;
CREATE INDEX kill_t_k ON kill_t USING dex (k) WITH (write_back = off);

-- 30 updates of the 10 rows of the hot key 5, each its own transaction
SELECT 'UPDATE kill_t SET v = v + 1000 WHERE k = 5' FROM generate_series(1, 30) \gexec
SELECT entries FROM dex_check('kill_t_k');

-- 1. Bitmap scans never kill (no heap verdict reaches the index).
SET enable_seqscan = off;
SET enable_indexscan = off;
SET enable_indexonlyscan = off;
SELECT dex_stats_reset();
EXPLAIN (COSTS OFF) SELECT count(*), sum(v) FROM kill_t WHERE k = 5;
SELECT count(*), sum(v) FROM kill_t WHERE k = 5;
SELECT entries FROM dex_check('kill_t_k');
SELECT kills FROM dex_stats();

-- 2. One index scan of the hot key removes its 300 dead entries: 10 live
-- entries of key 5 are left, 100 in all.
RESET enable_indexscan;
SET enable_bitmapscan = off;
SELECT kill_quiet();
EXPLAIN (COSTS OFF) SELECT count(*), sum(v) FROM kill_t WHERE k = 5;
SELECT count(*), sum(v) FROM kill_t WHERE k = 5;
SELECT entries FROM dex_check('kill_t_k');
SELECT kills, kills_refused FROM dex_stats();
-- the next scan walks only live entries and removes nothing
SELECT count(*), sum(v) FROM kill_t WHERE k = 5;
SELECT kills FROM dex_stats();
-- answers equal a sequential scan's, every key
CREATE TABLE kill_idx AS SELECT k, count(*) AS n, sum(v) AS s FROM kill_t WHERE k BETWEEN 0 AND 9 GROUP BY k;
RESET enable_seqscan;
SET enable_indexscan = off;
SELECT count(*) AS differing FROM
    (SELECT k, count(*) AS n, sum(v) AS s FROM kill_t GROUP BY k) q FULL JOIN kill_idx USING (k)
    WHERE q.n IS DISTINCT FROM kill_idx.n OR q.s IS DISTINCT FROM kill_idx.s;
RESET enable_indexscan;
SET enable_seqscan = off;

-- 3. A repeatable-read snapshot in another session holds the old versions:
-- they are not dead to everyone, the scan removes nothing, the old snapshot
-- still finds its rows through the index; once it ends they go.
SELECT dblink_connect('old', format('dbname=%s port=%s host=%s user=%s', current_database(),
    current_setting('port'), split_part(current_setting('unix_socket_directories'), ',', 1), current_user));
SELECT dblink_exec('old', 'BEGIN ISOLATION LEVEL REPEATABLE READ');
SELECT dblink_exec('old', 'SET enable_seqscan = off');
SELECT dblink_exec('old', 'SET enable_bitmapscan = off');
SELECT * FROM dblink('old', 'SELECT count(*), sum(v) FROM kill_t WHERE k = 5') AS t(n bigint, s bigint);
SELECT 'UPDATE kill_t SET v = v + 1000 WHERE k = 5' FROM generate_series(1, 5) \gexec
SELECT dex_stats_reset();
SELECT count(*), sum(v) FROM kill_t WHERE k = 5;
SELECT entries FROM dex_check('kill_t_k');
SELECT kills FROM dex_stats();
SELECT * FROM dblink('old', 'SELECT count(*), sum(v) FROM kill_t WHERE k = 5') AS t(n bigint, s bigint);
SELECT dblink_exec('old', 'COMMIT');
SELECT dblink_disconnect('old');
-- a transaction with an xid moves this session's xmin, which makes it
-- recompute the global horizon (GlobalVisTestShouldUpdate) without 'old'
SELECT txid_current() > 0 AS xid_assigned;
SELECT kill_quiet();
SELECT count(*), sum(v) FROM kill_t WHERE k = 5;
SELECT entries FROM dex_check('kill_t_k');
SELECT kills FROM dex_stats();

-- 4. Backward scans and a cursor that changes direction kill too, answers
-- unchanged.
SELECT 'UPDATE kill_t SET v = v + 1000 WHERE k = 7' FROM generate_series(1, 10) \gexec
SELECT kill_quiet();
SELECT array_agg(v ORDER BY v) FROM (SELECT v FROM kill_t WHERE k = 7 ORDER BY k DESC) q;
SELECT entries FROM dex_check('kill_t_k');
SELECT 'UPDATE kill_t SET v = v + 1000 WHERE k = 3' FROM generate_series(1, 6) \gexec
SELECT kill_quiet();
BEGIN;
DECLARE c SCROLL CURSOR FOR SELECT v FROM kill_t WHERE k = 3 ORDER BY k;
FETCH 3 FROM c;
FETCH BACKWARD 2 FROM c;
FETCH ALL FROM c;
COMMIT;
SELECT entries FROM dex_check('kill_t_k');
SELECT count(*) AS differing FROM
    (SELECT k, count(*) AS n, sum(v) AS s FROM kill_t WHERE k BETWEEN 0 AND 9 GROUP BY k) q
    FULL JOIN (SELECT k, count(*) AS n, sum(v) AS s FROM kill_t WHERE k + 0 BETWEEN 0 AND 9 GROUP BY k) r USING (k)
    WHERE q.n IS DISTINCT FROM r.n OR q.s IS DISTINCT FROM r.s;
SELECT * FROM dex_check('kill_t_k');

-- 5. Byte-string entries (a text key with an INCLUDE column, a two-column
-- key with DESC): the same kills, forward, backward and through a cursor
-- that turns; answers equal a sequential scan's.
CREATE TABLE kill_b (s text COLLATE "C", k int, v int) WITH (autovacuum_enabled = off);
CREATE INDEX kill_b_v ON kill_b (v);
INSERT INTO kill_b SELECT 'key' || (g % 10), g % 10, g FROM generate_series(1, 100) g;
CREATE INDEX kill_b_s ON kill_b USING dex (s) INCLUDE (k) WITH (write_back = off);
CREATE INDEX kill_b_ks ON kill_b USING dex (k DESC, s) WITH (write_back = off);
SELECT 'UPDATE kill_b SET v = v + 1000 WHERE k = 5' FROM generate_series(1, 20) \gexec
-- (the updates' own scans of kill_b_ks may already kill there)
SELECT (dex_check('kill_b_s')).entries AS s_entries,
       (dex_check('kill_b_ks')).entries BETWEEN 100 AND 300 AS ks_entries_ok;
SELECT kill_quiet();
SELECT dex_stats_reset();
EXPLAIN (COSTS OFF) SELECT count(*), sum(v) FROM kill_b WHERE s = 'key5';
SELECT count(*), sum(v) FROM kill_b WHERE s = 'key5';
SELECT count(*), sum(v) FROM kill_b WHERE k = 5 AND s >= 'key';
SELECT (dex_check('kill_b_s')).entries AS s_entries, (dex_check('kill_b_ks')).entries AS ks_entries;
SELECT kills > 0 AS killed FROM dex_stats();
SELECT 'UPDATE kill_b SET v = v + 1000 WHERE k = 3' FROM generate_series(1, 6) \gexec
SELECT kill_quiet();
SELECT array_agg(v ORDER BY v) FROM (SELECT v FROM kill_b WHERE s = 'key3' ORDER BY s DESC) q;
BEGIN;
DECLARE cb SCROLL CURSOR FOR SELECT v FROM kill_b WHERE k = 3 ORDER BY k DESC, s;
FETCH 3 FROM cb;
FETCH BACKWARD 2 FROM cb;
FETCH ALL FROM cb;
COMMIT;
SELECT (dex_check('kill_b_s')).entries AS s_entries, (dex_check('kill_b_ks')).entries AS ks_entries;
CREATE TABLE kill_b_idx AS SELECT s, count(*) AS n, sum(v) AS v FROM kill_b WHERE s >= 'key' GROUP BY s;
RESET enable_seqscan;
SET enable_indexscan = off;
SELECT count(*) AS differing FROM
    (SELECT s, count(*) AS n, sum(v) AS v FROM kill_b GROUP BY s) q FULL JOIN kill_b_idx USING (s)
    WHERE q.n IS DISTINCT FROM kill_b_idx.n OR q.v IS DISTINCT FROM kill_b_idx.v;
RESET enable_indexscan;
SELECT * FROM dex_check('kill_b_s');

-- 6. dex.kill_min_entries (default 4): a batch with fewer dead entries
-- leaves them (a removal's gate is a remote round trip, a dead entry costs a
-- scan one heap fetch); once a scan finds 4 in its leaf, they go.
RESET dex.kill_min_entries;
SET enable_seqscan = off;
SELECT 'UPDATE kill_t SET v = v + 1000 WHERE v = (SELECT max(v) FROM kill_t WHERE k = 9)' FROM generate_series(1, 3) \gexec
SELECT kill_quiet();
SELECT dex_stats_reset();
SELECT count(*) FROM kill_t WHERE k = 9;
SELECT kills, (dex_check('kill_t_k')).entries FROM dex_stats();
SELECT 'UPDATE kill_t SET v = v + 1000 WHERE v = (SELECT max(v) FROM kill_t WHERE k = 9)' \gexec
SELECT kill_quiet();
SELECT count(*) FROM kill_t WHERE k = 9;
SELECT kills, (dex_check('kill_t_k')).entries FROM dex_stats();

RESET enable_seqscan;
RESET enable_bitmapscan;
DROP TABLE kill_t, kill_idx, kill_b, kill_b_idx;
-- (kill_quiet() stays for sql/dex_kill_wb.sql, which drops it)
