-- Dead-entry hints on write-back indexes (src/README.md "Dead-entry hints",
-- K5): a scan's batch is identified by the cache frame it was copied from
-- and that frame's version word, and the dead entries go out of the frame in
-- place (logged for redo like VACUUM's deletes). Answers always match a
-- sequential scan; a repeatable-read snapshot that still sees the old
-- versions keeps them; what went is gone from remote memory after the
-- write-back too (dex_check writes the index's dirty frames back first and
-- counts the remote entries). Bottom-up passes of write-back indexes:
-- sql/dex_bottomup.sql section 4.
--
-- A kill is a hint: a batch copied from remote memory (a leaf admitted by
-- that very read) or a frame written back meanwhile is skipped. So that the
-- counts below are exact, the worker does not flush behind our back, and
-- every leaf is admitted by a scan under an old snapshot first (which keeps
-- every version, so it kills nothing).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dex;
CREATE EXTENSION IF NOT EXISTS dblink;
RESET client_min_messages;
ALTER SYSTEM SET dex.writeback_interval = '1h';
SELECT pg_reload_conf();
SELECT pg_sleep(0.5);
SET dex.bottom_up = off;
SET dex.kill_min_entries = 1;  -- every dead entry found goes (sql/dex_kill.sql tests the default)

-- kill_quiet(): sql/dex_kill.sql's wait for the global xmin horizon (it runs
-- right before this suite and leaves it for us).
-- n non-HOT updates (v has a btree index) of the 10 rows of key `key`,
-- found by a sequential scan: no dex scan sees the old versions.
CREATE FUNCTION killwb_churn(key int, n int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  SET LOCAL enable_seqscan = on;
  SET LOCAL enable_indexscan = off;
  SET LOCAL enable_bitmapscan = off;
  FOR i IN 1..n LOOP
    UPDATE killwb SET v = v + 1000 WHERE v % 10 = key;
  END LOOP;
END $$;

CREATE TABLE killwb (k int, s text COLLATE "C", v int) WITH (autovacuum_enabled = off);
CREATE INDEX killwb_v ON killwb (v);
INSERT INTO killwb SELECT g % 10, 'key' || (g % 10), g FROM generate_series(1, 100) g;
CREATE INDEX killwb_k ON killwb USING dex (k) WITH (write_back = on);
CREATE INDEX killwb_s ON killwb USING dex (s) INCLUDE (k) WITH (write_back = on);
SET enable_seqscan = off;
SET enable_bitmapscan = off;

-- An old snapshot in another session, taken before the updates.
SELECT dblink_connect('old', format('dbname=%s port=%s host=%s user=%s', current_database(),
    current_setting('port'), split_part(current_setting('unix_socket_directories'), ',', 1), current_user));
SELECT dblink_exec('old', 'BEGIN ISOLATION LEVEL REPEATABLE READ');
SELECT dblink_exec('old', 'SET enable_seqscan = off');
SELECT dblink_exec('old', 'SET enable_bitmapscan = off');
SELECT * FROM dblink('old', 'SELECT count(*), sum(v) FROM killwb WHERE k = 5') AS t(n bigint, s bigint);

-- each update of key 5 in its own transaction (3 x 10 versions)
SELECT killwb_churn(5, 1) FROM generate_series(1, 30);
SELECT (dex_check('killwb_k')).entries AS k_entries, (dex_check('killwb_s')).entries AS s_entries;

-- 1. While the old snapshot may still see them, index scans remove nothing
-- (and admit every leaf); the old snapshot finds its rows through both.
SELECT dex_stats_reset();
SELECT count(*), sum(v) FROM killwb WHERE k >= 0;
SELECT count(*), sum(v) FROM killwb WHERE s >= '';
SELECT count(*), sum(v) FROM killwb WHERE k = 5;
SELECT kills FROM dex_stats();
SELECT * FROM dblink('old', 'SELECT count(*), sum(v) FROM killwb WHERE k = 5') AS t(n bigint, s bigint);
SELECT * FROM dblink('old', 'SELECT count(*), sum(v) FROM killwb WHERE s = ''key5''') AS t(n bigint, s bigint);
SELECT dblink_exec('old', 'COMMIT');
SELECT dblink_disconnect('old');
-- a transaction with an xid moves this session's xmin, which makes it
-- recompute the global horizon (GlobalVisTestShouldUpdate) without 'old'
SELECT txid_current() > 0 AS xid_assigned;
SELECT kill_quiet();

-- 2. Now one index scan of each index removes the 300 dead entries of key 5,
-- in place: no remote write until the write-back.
SELECT dex_stats_reset();
EXPLAIN (COSTS OFF) SELECT count(*), sum(v) FROM killwb WHERE k = 5;
SELECT count(*), sum(v) FROM killwb WHERE k = 5;
SELECT count(*), sum(v) FROM killwb WHERE s = 'key5';
SELECT kills, kills_skipped, remote_writes, dirty_updates > 0 AS in_place FROM dex_stats();
SELECT (dex_check('killwb_k')).entries AS k_entries, (dex_check('killwb_s')).entries AS s_entries;
-- the next scans walk only live entries and remove nothing
SELECT dex_stats_reset();
SELECT count(*), sum(v) FROM killwb WHERE k = 5;
SELECT count(*), sum(v) FROM killwb WHERE s = 'key5';
SELECT kills FROM dex_stats();

-- 3. Backward scans kill too; every answer equals a sequential scan's.
SELECT killwb_churn(7, 1) FROM generate_series(1, 8);
SELECT kill_quiet();
SELECT dex_stats_reset();
SELECT array_agg(v ORDER BY v) = (SELECT array_agg(v ORDER BY v) FROM killwb WHERE k + 0 = 7) AS same
  FROM (SELECT v FROM killwb WHERE k = 7 ORDER BY k DESC) q;
SELECT array_agg(v ORDER BY v) = (SELECT array_agg(v ORDER BY v) FROM killwb WHERE k + 0 = 7) AS same
  FROM (SELECT v FROM killwb WHERE s = 'key7' ORDER BY s DESC) q;
SELECT kills, kills_skipped FROM dex_stats();
SELECT (dex_check('killwb_k')).entries AS k_entries, (dex_check('killwb_s')).entries AS s_entries;
SELECT count(*) AS differing FROM
    (SELECT k, count(*) AS n, sum(v) AS s FROM killwb WHERE k BETWEEN 0 AND 9 GROUP BY k) q
    FULL JOIN (SELECT k, count(*) AS n, sum(v) AS s FROM killwb WHERE k + 0 BETWEEN 0 AND 9 GROUP BY k) r USING (k)
    WHERE q.n IS DISTINCT FROM r.n OR q.s IS DISTINCT FROM r.s;
SELECT count(*) AS differing FROM
    (SELECT s, count(*) AS n, sum(v) AS v FROM killwb WHERE s >= 'key' GROUP BY s) q
    FULL JOIN (SELECT s, count(*) AS n, sum(v) AS v FROM killwb WHERE s || '' >= 'key' GROUP BY s) r USING (s)
    WHERE q.n IS DISTINCT FROM r.n OR q.v IS DISTINCT FROM r.v;
SELECT (dex_check('killwb_k')).leaves > 0 AS k_ok, (dex_check('killwb_s')).leaves > 0 AS s_ok;

-- 4. Below dex.kill_min_entries, a scan still removes the dead entries of a
-- leaf that is nearly full (fewer than three more entries like its last one
-- fit): the insert that would split it costs a round trip, the removal a WAL
-- record (btree removes its LP_DEAD items before it splits a page). A leaf
-- with room keeps them. Leaves built full (k) and half full (v), one dead
-- row. (Byte-string leaves: tests/leaf_nearly_full_test.cpp; their bulk load
-- leaves room for the longest entry in every leaf.)
RESET dex.kill_min_entries;
CREATE TABLE killnf (k int, v int) WITH (autovacuum_enabled = off);
INSERT INTO killnf SELECT g, g FROM generate_series(1, 3000) g;
CREATE INDEX killnf_k ON killnf USING dex (k) WITH (write_back = on, fillfactor = 100);
CREATE INDEX killnf_v ON killnf USING dex (v) WITH (write_back = on, fillfactor = 50);
DELETE FROM killnf WHERE k + 0 = 1500;
SELECT txid_current() > 0 AS xid_assigned;
SELECT kill_quiet();
-- the first scan of each admits the leaf (a batch read remotely kills nothing)
SELECT count(*) FROM killnf WHERE k = 1500;
SELECT count(*) FROM killnf WHERE v = 1500;
SELECT dex_stats_reset();
SELECT count(*) FROM killnf WHERE v = 1500;
SELECT kills AS kills_with_room FROM dex_stats();
SELECT count(*) FROM killnf WHERE k = 1500;
SELECT kills AS kills_nearly_full FROM dex_stats();
SELECT (dex_check('killnf_k')).entries AS k_entries, (dex_check('killnf_v')).entries AS v_entries;
DROP TABLE killnf;

RESET enable_seqscan;
RESET enable_bitmapscan;
DROP TABLE killwb;
DROP FUNCTION kill_quiet();
DROP FUNCTION killwb_churn(int, int);
ALTER SYSTEM RESET dex.writeback_interval;
SELECT pg_reload_conf();
