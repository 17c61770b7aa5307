#!/usr/bin/env bash
# A kill -9 at the worst moment, made deterministic: dex.crash_at makes a
# backend SIGKILL itself at a named point of the index code (the postmaster's
# crash restart follows), right after a structure modification was published
# in remote memory and before this server's cache, its other backends or the
# caller knew:
#   split:published        a leaf split (write-through, one-sided)
#   migrate:published      a subtree copied to another memory node (W16 for
#                          the write-back index: dirty leaves lent their entries)
#   dirty-split:published  a write-back leaf with entries whose WAL is not
#                          flushed, split in remote memory (W13) one-sided
#   dirty-split:answered   ... split by its memory node (OFFLOAD_DIRTY_SPLIT;
#                          OFFLOAD_BYTES_DIRTY_SPLIT for the byte-string one)
#   offload-write:answered a memory node's insert (write-through, or W17 into
#                          an uncached write-back leaf) not yet in any cache
#   offload-batch:answered a multi-row INSERT's batch applied by the memory
#                          node (dex.insert_batch), its transaction open; its
#                          full leaves split there (OFFLOAD_(BYTES_)BATCH_SPLIT)
#   writeback:written      dirty leaves of the write-back index written to
#                          remote memory (dex_flush), the frames still dirty
#   merge:published        VACUUM merging emptied leaves
#   journal:strays-removed the insert journal's recovery after a crash (the
#                          index's first use), between removing the strays
#                          and clearing the journal: a crash during recovery
# Two dex indexes over three memory nodes (placement_level = 1), one
# write-through (t), one write_back = on (w), and two byte-string ones on
# (k, v) (ts, write-through; ws, write-back: the slotted tree's splits,
# offloads and batches), each with a btree twin changed in the same
# transactions. After every crash: the point was reached (the server log
# names it), each dex index returns exactly its twin's rows, dex_check
# passes, and the write-back indexes answer without REINDEX.
source "$(dirname "$0")/common.sh"
start_three_memnodes
# (the dex worker writes nothing back by itself here: dex_flush does, in the
# backend that crashes)
start_cluster pg "$PPORT" "$ALL3" "restart_after_crash = on" \
    "autovacuum = off" "dex.writeback_interval = '10min'"
SERVER_LOG="$DEX_WORK/pg-server.log"

q -c "create extension dex"
TABLES="t w ts ws"
for x in $TABLES; do
    q -c "create table $x(k int, v bigint); create table b$x(k int, v bigint)"
    q -c "insert into $x select g * 10, g from generate_series(1, 20000) g; insert into b$x select * from $x"
    q -c "create index b${x}_k on b$x (k)"
done
q -c "create index t_k on t using dex (k) with (placement_level = 1, write_back = off)"
q -c "create index w_k on w using dex (k) with (placement_level = 1, write_back = on)"
q -c "create index ts_k on ts using dex (k, v) with (write_back = off)"
q -c "create index ws_k on ws using dex (k, v) with (write_back = on)"

wait_ready() {
    for _ in $(seq 1 300); do q -c "select 1" >/dev/null 2>&1 && return 0; sleep 0.2; done
    fail "server did not come back"
}

check() { check_twin "$PPORT" "$1"; }
check_all() { for x in $TABLES; do check "$x"; done; }

# crashed POINT LOGLINES_BEFORE: the server log (after line LOGLINES_BEFORE)
# shows the backend that reached POINT and the crash restart.
crashed() {
    local point=$1 from=$2
    tail -n +"$((from + 1))" "$SERVER_LOG" | grep -q "crash_at \"$point\" reached" \
        || { tail -n +"$((from + 1))" "$SERVER_LOG" | tail -5; fail "$point was not reached"; }
    wait_ready
    tail -n +"$((from + 1))" "$SERVER_LOG" | grep -q "terminated by signal 9" || fail "no crash restart after $point"
}

# pgbench_until_crash X POINT SETTINGS SCRIPT: 2 clients run SCRIPT with
# SETTINGS and dex.crash_at = POINT until the server crashes (at most 60 s).
pgbench_until_crash() {
    local x=$1 point=$2 settings=$3 script=$4 from
    from=$(wc -l <"$SERVER_LOG")
    echo "== $point on $x ($settings)"
    PGOPTIONS="-c dex.crash_at=$point $settings" "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$PPORT" -U postgres \
        -c 2 -j 2 -T 60 -f "$script" postgres >"$DEX_WORK/pgb-$x-${point%%:*}.log" 2>&1 || true
    crashed "$point" "$from"
    check_all
}

# single-row inserts of random keys; clustered runs of 20 keys per transaction
for x in $TABLES; do
    cat >"$DEX_WORK/one-$x.sql" <<SQL
\\set k random(0, 400000)
BEGIN;
INSERT INTO $x VALUES (:k, :client_id);
INSERT INTO b$x VALUES (:k, :client_id);
COMMIT;
SQL
    cat >"$DEX_WORK/run-$x.sql" <<SQL
\\set k random(0, 400000)
BEGIN;
INSERT INTO $x SELECT :k + g, g FROM generate_series(1, 20) g;
INSERT INTO b$x SELECT :k + g, g FROM generate_series(1, 20) g;
COMMIT;
SQL
done
chmod a+r "$DEX_WORK"/*.sql
ONE="-c dex.offload=off -c dex.insert_batch=1"
pgbench_until_crash t split:published "$ONE" "$DEX_WORK/run-t.sql"
pgbench_until_crash t migrate:published "$ONE" "$DEX_WORK/one-t.sql"
pgbench_until_crash t offload-write:answered "-c dex.offload=on -c dex.insert_batch=1" "$DEX_WORK/one-t.sql"
# a run of 20 keys fills a leaf with entries of the open transaction
pgbench_until_crash w dirty-split:published "$ONE" "$DEX_WORK/run-w.sql"
# ... split by its memory node (OFFLOAD_DIRTY_SPLIT), the frames not yet installed
pgbench_until_crash w dirty-split:answered "-c dex.offload=on -c dex.insert_batch=1" "$DEX_WORK/run-w.sql"
pgbench_until_crash w migrate:published "$ONE" "$DEX_WORK/one-w.sql"
# after the restart no leaf is cached: the first insert misses at its leaf
pgbench_until_crash w offload-write:answered "-c dex.offload=on -c dex.insert_batch=1 -c dex.leaf_admission=0" \
    "$DEX_WORK/one-w.sql"
# byte-string entries (the slotted tree)
pgbench_until_crash ts split:published "$ONE" "$DEX_WORK/run-ts.sql"
pgbench_until_crash ts offload-write:answered "-c dex.offload=on -c dex.insert_batch=1" "$DEX_WORK/one-ts.sql"
pgbench_until_crash ws dirty-split:published "$ONE" "$DEX_WORK/run-ws.sql"
# ... split by its memory node (OFFLOAD_BYTES_DIRTY_SPLIT)
pgbench_until_crash ws dirty-split:answered "-c dex.offload=on -c dex.insert_batch=1" "$DEX_WORK/run-ws.sql"

# crash_in_session POINT SQL...: one session runs the statements with
# dex.crash_at = POINT; the server must crash there.
crash_in_session() {
    local point=$1 from; shift
    from=$(wc -l <"$SERVER_LOG")
    local args=(-c "set dex.crash_at = '$point'")
    for s in "$@"; do args+=(-c "$s"); done
    q "${args[@]}" >/dev/null 2>&1 || true
    crashed "$point" "$from"
    check_all
}

echo "== offload-batch:answered on t: INSERT ... SELECT of 600 rows, its transaction open"
crash_in_session offload-batch:answered "set dex.offload = on" "begin" \
    "insert into t select 1000000 + g, g from generate_series(1, 600) g" \
    "insert into bt select 1000000 + g, g from generate_series(1, 600) g" "commit"

echo "== offload-batch:answered on ts: the same, byte-string entries"
crash_in_session offload-batch:answered "set dex.offload = on" "begin" \
    "insert into ts select 1000000 + g, g from generate_series(1, 600) g" \
    "insert into bts select 1000000 + g, g from generate_series(1, 600) g" "commit"

# A crash leaves t's / ts's journal listing an insert of an open
# transaction; the recovery at the next use crashes in its turn, after it
# removed the strays; the recovery after that must finish the job.
for x in t ts; do
    echo "== journal:strays-removed on $x: the journal recovery after a crash crashes too"
    from=$(wc -l <"$SERVER_LOG")
    q -c "set dex.crash_at = 'offload-write:answered'" -c "set dex.offload = on" -c "set dex.insert_batch = 1" \
      -c "begin" -c "insert into $x values (777777, 1)" -c "insert into b$x values (777777, 1)" -c "commit" \
      >/dev/null 2>&1 || true
    crashed offload-write:answered "$from"
    from=$(wc -l <"$SERVER_LOG")
    q -c "set dex.crash_at = 'journal:strays-removed'" -c "set enable_seqscan = off" -c "set enable_bitmapscan = off" \
      -c "select count(*) from $x where k = 10" >/dev/null 2>&1 || true
    crashed journal:strays-removed "$from"
    check_all
done

echo "== writeback:written on w: dex_flush of committed dirty leaves"
q -c "begin" -c "insert into w select 2000000 + g * 7, g from generate_series(1, 600) g" \
  -c "insert into bw select 2000000 + g * 7, g from generate_series(1, 600) g" -c "commit"
dirty=$(q -c "select coalesce(sum(dirty), 0) from dex_cache_stats() where index = 'w_k'::regclass")
echo "  dirty nodes of w_k before the flush: $dirty"
[ "$dirty" -gt 0 ] || fail "w_k has no dirty node to write back"
crash_in_session writeback:written "select dex_flush()"

for x in t w; do
    echo "== merge:published on $x: VACUUM after a range was deleted"
    q -c "delete from $x where k between 50000 and 90000" -c "delete from b$x where k between 50000 and 90000"
    from=$(wc -l <"$SERVER_LOG")
    q -c "set dex.crash_at = 'merge:published'" -c "vacuum $x" >/dev/null 2>&1 || true
    crashed merge:published "$from"
    check_all
    q -c "vacuum $x"
    check "$x"
done
echo "crash points: ok"
