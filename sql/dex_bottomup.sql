-- Bottom-up deletion (src/README.md "Dead-entry hints"): an UPDATE that
-- leaves a dex index's key alone, finding its leaf full, first removes the
-- versions there that are dead to everyone -- so a table updated over and
-- over by sequential scans (no index scan ever revisits, hence kills, the
-- old versions) keeps its index bounded instead of splitting leaves round
-- after round. dex.bottom_up = off shows the growth it prevents. Answers
-- always match a sequential scan; a repeatable-read snapshot in another
-- session keeps every version it can still see.
SET client_min_messages = warning;  -- quiet whether or not an earlier suite created it
CREATE EXTENSION IF NOT EXISTS dex;
CREATE EXTENSION IF NOT EXISTS dblink;
RESET client_min_messages;

-- Removals need the global xmin horizon past the deleters: wait (up to 30 s)
-- until no other backend holds a snapshot taken before this call (an
-- autoanalyze, say; one that takes a new snapshot meanwhile -- the next
-- table of an autovacuum worker -- holds back nothing this call waits for).
-- Names the holder if it never lets go.
CREATE FUNCTION bu_quiet() RETURNS bool LANGUAGE plpgsql AS $$
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

-- v has a btree index, so every update is non-HOT and adds a dex entry for
-- the unchanged k. Two equal tables: bottom-up deletion on, and off.
CREATE TABLE bu_on (k int, v int) WITH (autovacuum_enabled = off);
CREATE TABLE bu_off (k int, v int) WITH (autovacuum_enabled = off);
CREATE INDEX bu_on_v ON bu_on (v);
CREATE INDEX bu_off_v ON bu_off (v);
INSERT INTO bu_on SELECT g, g FROM generate_series(1, 200) g;
INSERT INTO bu_off SELECT g, g FROM generate_series(1, 200) g;
CREATE INDEX bu_on_k ON bu_on USING dex (k);
CREATE INDEX bu_off_k ON bu_off USING dex (k);

-- One round: every row updated by a single-row statement of its own, as an
-- OLTP update is (a multi-row statement's entries go to the batch path
-- instead, dexpending.c), one transaction per round.
CREATE PROCEDURE bu_rounds(tab regclass, rounds int) LANGUAGE plpgsql AS $$
BEGIN
  FOR r IN 1..rounds LOOP
    FOR i IN 1..200 LOOP
      EXECUTE format('UPDATE %s SET v = v + 1 WHERE k::text = $1', tab) USING i::text;
    END LOOP;
    COMMIT;
  END LOOP;
END $$;

-- Updates find their rows by sequential scan only: no index scan kills.
SET enable_indexscan = off;
SET enable_bitmapscan = off;
SET enable_indexonlyscan = off;
SELECT bu_quiet();
SELECT dex_stats_reset();

-- 1. 20 rounds of updating every row, each round its own transaction.
SET dex.bottom_up = off;
CALL bu_rounds('bu_off', 20);
SELECT bottomup_passes, bottomup_removed, kills FROM dex_stats();
SET dex.bottom_up = on;
CALL bu_rounds('bu_on', 20);
SELECT bottomup_passes > 0 AS passes, bottomup_removed > 1000 AS removed, kills FROM dex_stats();
-- off: every version stays (21 per row, 4200 entries in ~100 leaves); on:
-- about 5 per row in about 20 leaves (measured: 1042 entries, 22 leaves)
SELECT entries, leaves > 60 AS grew FROM dex_check('bu_off_k');
SELECT entries < 1500 AS bounded, leaves < 40 AS few_leaves FROM dex_check('bu_on_k');

-- answers equal a sequential scan's (index scans now; they may kill too)
CREATE TABLE bu_seq AS SELECT k, v FROM bu_on;
RESET enable_indexscan;
SET enable_seqscan = off;
SELECT count(*) AS differing FROM
    (SELECT k, v FROM bu_on WHERE k BETWEEN 1 AND 200) q FULL JOIN bu_seq s USING (k)
    WHERE q.v IS DISTINCT FROM s.v;
RESET enable_seqscan;
SET enable_indexscan = off;
SELECT entries FROM dex_check('bu_on_k');

-- 2. A repeatable-read snapshot in another session still sees the rows as
-- they were: the versions it needs are not dead to everyone, no pass may
-- remove them, and its index scan finds every row. Once it ends, the next
-- rounds are bounded again.
SELECT dblink_connect('old', format('dbname=%s port=%s host=%s user=%s', current_database(),
    current_setting('port'), split_part(current_setting('unix_socket_directories'), ',', 1), current_user));
SELECT dblink_exec('old', 'BEGIN ISOLATION LEVEL REPEATABLE READ');
SELECT dblink_exec('old', 'SET enable_seqscan = off');
SELECT dblink_exec('old', 'SET enable_bitmapscan = off');
SELECT * FROM dblink('old', 'SELECT count(*), sum(v) FROM bu_on WHERE k BETWEEN 1 AND 200') AS t(n bigint, s bigint);
SELECT entries AS before_entries FROM dex_check('bu_on_k') \gset
SELECT dex_stats_reset();
CALL bu_rounds('bu_on', 10);
-- every version since the snapshot is kept: at least 10 more per row
SELECT entries - :before_entries >= 2000 AS all_kept FROM dex_check('bu_on_k');
SELECT * FROM dblink('old', 'SELECT count(*), sum(v) FROM bu_on WHERE k BETWEEN 1 AND 200') AS t(n bigint, s bigint);
SELECT * FROM dblink('old', 'EXPLAIN (COSTS OFF) SELECT count(*), sum(v) FROM bu_on WHERE k BETWEEN 1 AND 200') AS t(plan text);
SELECT dblink_exec('old', 'COMMIT');
SELECT dblink_disconnect('old');
-- a transaction with an xid moves this session's xmin, which makes it
-- recompute the global horizon (GlobalVisTestShouldUpdate) without 'old'
SELECT txid_current() > 0 AS xid_assigned;
SELECT bu_quiet();
SELECT entries AS before_entries FROM dex_check('bu_on_k') \gset
CALL bu_rounds('bu_on', 10);
-- (leaves the snapshot's versions split are half full: passes start as they
-- fill; measured +322, where no pass would add 2000)
SELECT entries - :before_entries < 1000 AS bounded_again FROM dex_check('bu_on_k');
SELECT count(*), sum(v) FROM bu_on;
RESET enable_indexscan;
SET enable_seqscan = off;
SELECT count(*), sum(v) FROM bu_on WHERE k BETWEEN 1 AND 200;
RESET enable_seqscan;
SELECT entries FROM dex_check('bu_on_k');

-- 3. Byte-string entries (a text key): the same passes keep the index
-- bounded; without them it grows.
CREATE TABLE bub_on (k text COLLATE "C", v int) WITH (autovacuum_enabled = off);
CREATE TABLE bub_off (k text COLLATE "C", v int) WITH (autovacuum_enabled = off);
CREATE INDEX bub_on_v ON bub_on (v);
CREATE INDEX bub_off_v ON bub_off (v);
INSERT INTO bub_on SELECT g::text, g FROM generate_series(1, 200) g;
INSERT INTO bub_off SELECT g::text, g FROM generate_series(1, 200) g;
CREATE INDEX bub_on_k ON bub_on USING dex (k);
CREATE INDEX bub_off_k ON bub_off USING dex (k);
SET enable_indexscan = off;
SELECT bu_quiet();
SELECT dex_stats_reset();
SET dex.bottom_up = off;
CALL bu_rounds('bub_off', 20);
SELECT bottomup_passes, bottomup_removed FROM dex_stats();
SET dex.bottom_up = on;
CALL bu_rounds('bub_on', 20);
SELECT bottomup_passes > 0 AS passes, bottomup_removed > 1000 AS removed FROM dex_stats();
SELECT entries, leaves > 60 AS grew FROM dex_check('bub_off_k');
SELECT entries < 1500 AS bounded, leaves < 40 AS few_leaves FROM dex_check('bub_on_k');
RESET enable_indexscan;
SET enable_seqscan = off;
SELECT count(*), sum(v) FROM bub_on WHERE k >= '';
RESET enable_seqscan;
SELECT count(*), sum(v) FROM bub_on;

-- 4. Write-back indexes: an insert that finds its cached leaf full gives up
-- under the frame lock with the frame's version word; the pass reads the
-- leaf from the frame and removes in place (src/README.md "Dead-entry
-- hints", K5).
CREATE TABLE buw_on (k int, v int) WITH (autovacuum_enabled = off);
CREATE TABLE buw_off (k int, v int) WITH (autovacuum_enabled = off);
CREATE INDEX buw_on_v ON buw_on (v);
CREATE INDEX buw_off_v ON buw_off (v);
INSERT INTO buw_on SELECT g, g FROM generate_series(1, 200) g;
INSERT INTO buw_off SELECT g, g FROM generate_series(1, 200) g;
CREATE INDEX buw_on_k ON buw_on USING dex (k) WITH (write_back = on);
CREATE INDEX buw_off_k ON buw_off USING dex (k) WITH (write_back = on);
SET enable_indexscan = off;
SELECT bu_quiet();
SET dex.bottom_up = off;
CALL bu_rounds('buw_off', 20);
SET dex.bottom_up = on;
SELECT dex_stats_reset();
CALL bu_rounds('buw_on', 20);
SELECT bottomup_passes > 0 AS passes, bottomup_removed > 1000 AS removed FROM dex_stats();
SELECT (dex_check('buw_off_k')).entries AS off_entries, (dex_check('buw_on_k')).entries < 2000 AS on_bounded;
RESET enable_indexscan;
SET enable_seqscan = off;
SELECT count(*), sum(v) FROM buw_on WHERE k > 0;
RESET enable_seqscan;
SELECT count(*), sum(v) FROM buw_on;

-- 5. Write-back indexes pass for key-changing UPDATEs too (not
-- indexUnchanged): the give-up costs no round trip there, a split one.
-- Each round flips every row's key to its neighbour (k # 1), whose entry
-- lands in the leaf that holds the old version.
CREATE TABLE buk_on (k int, v int) WITH (autovacuum_enabled = off);
CREATE TABLE buk_off (k int, v int) WITH (autovacuum_enabled = off);
INSERT INTO buk_on SELECT 2 * g, g FROM generate_series(1, 200) g;
INSERT INTO buk_off SELECT 2 * g, g FROM generate_series(1, 200) g;
CREATE INDEX buk_on_k ON buk_on USING dex (k) WITH (write_back = on);
CREATE INDEX buk_off_k ON buk_off USING dex (k) WITH (write_back = on);
CREATE PROCEDURE bu_flips(tab regclass, rounds int) LANGUAGE plpgsql AS $$
BEGIN
  FOR r IN 1..rounds LOOP
    FOR i IN 1..200 LOOP
      EXECUTE format('UPDATE %s SET k = k # 1 WHERE v::text = $1', tab) USING i::text;
    END LOOP;
    COMMIT;
  END LOOP;
END $$;
SET enable_indexscan = off;
SELECT bu_quiet();
SET dex.bottom_up = off;
CALL bu_flips('buk_off', 20);
SET dex.bottom_up = on;
SELECT dex_stats_reset();
CALL bu_flips('buk_on', 20);
SELECT bottomup_passes > 0 AS passes, bottomup_removed > 1000 AS removed FROM dex_stats();
SELECT (dex_check('buk_off_k')).entries AS off_entries, (dex_check('buk_on_k')).entries < 2000 AS on_bounded;
RESET enable_indexscan;
SET enable_seqscan = off;
SELECT count(*), sum(k), sum(v) FROM buk_on WHERE k > 0;
RESET enable_seqscan;
SELECT count(*), sum(k), sum(v) FROM buk_on;

RESET enable_bitmapscan;
RESET enable_indexonlyscan;
DROP TABLE bu_on, bu_off, bu_seq, bub_on, bub_off, buw_on, buw_off, buk_on, buk_off;
DROP FUNCTION bu_quiet();
DROP PROCEDURE bu_rounds(regclass, int);
DROP PROCEDURE bu_flips(regclass, int);
