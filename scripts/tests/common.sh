# Helpers for shell tests: each test runs its own memory node and cluster.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mkdir -p "$DEX_WORK"; prepare_workdir

MPORT=$(free_port); PPORT=$(free_port)
MEMNODE_URL="tcp://127.0.0.1:$MPORT"

test_cleanup() {
    stop_memnode mem CONT 2>/dev/null || true
    stop_cluster pg
    stop_memnode mem
}
trap test_cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
q() { dpsql "$PPORT" -d postgres -At "$@"; }
# After a backend's kill -9 the server still takes connections until the
# postmaster notices and restarts every child: a "select 1" can succeed
# before that, and the checks that follow then meet "the database system is
# in recovery mode". A crash restart replaces the checkpointer: take its pid
# before the kill, and wait for a new one after it.
checkpointer_pid() { q -c "select pid from pg_stat_activity where backend_type = 'checkpointer'" 2>/dev/null || true; }
wait_crash_restart() {
    local before=$1 now=""
    for _ in $(seq 1 300); do
        now=$(checkpointer_pid)
        [ -n "$now" ] && [ "$now" != "$before" ] && return 0
        sleep 0.2
    done
    fail "no crash restart after the kill -9 (checkpointer still $before)"
}
# expect_error SQL PATTERN...: the statement must fail and stderr match every pattern
expect_error() {
    local sql=$1; shift
    local out
    if out=$(q -c "$sql" 2>&1); then fail "expected an error from: $sql (got: $out)"; fi
    for pat in "$@"; do
        grep -qE -- "$pat" <<<"$out" || fail "error for [$sql] lacks /$pat/: $out"
    done
    echo "$out"
}

# write_mix_script FILE TABLE... : a pgbench script that, per transaction,
# inserts into or deletes from every TABLE the same (k, v) under an advisory
# lock on k (so all copies receive identical changes), then checks that each
# dex copy counts a key range as the btree copy `b` does.
write_mix_script() {
    local f=$1; shift
    {
        echo '\set k random(0, 30000)'
        echo '\set op random(1, 10)'
        echo 'BEGIN;'
        echo 'SELECT pg_advisory_xact_lock(:k);'
        for t in "$@"; do echo "INSERT INTO $t SELECT :k, :op * 1000000 + :client_id WHERE :op <= 5;"; done
        for t in "$@"; do echo "DELETE FROM $t WHERE k = :k AND :op BETWEEN 6 AND 8;"; done
        # Every answer is checked: each dex table's count of a key range equals
        # the btree copy's in the same snapshot (one statement), or the
        # division by zero fails the client and run_mix.
        echo 'SET LOCAL enable_seqscan = off;'
        for t in "$@"; do
            [ "$t" = b ] && continue
            echo "SELECT 1 / ((SELECT count(*) FROM $t WHERE k BETWEEN :k AND :k + 200) = (SELECT count(*) FROM b WHERE k BETWEEN :k AND :k + 200))::int;"
        done
        echo 'COMMIT;'
    } >"$f"
}

# run_mix FILE: $CLIENTS clients for $SECONDS_RUN seconds.
run_mix() {
    local out rc=0
    out=$("$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$PPORT" -U postgres -c "$CLIENTS" -j 2 -T "$SECONDS_RUN" \
        -f "$1" postgres 2>&1) || rc=$?
    grep -E 'number of (transactions|failed)|tps' <<<"$out" || true
    [ "$rc" = 0 ] || { grep -E 'ERROR|abort' <<<"$out" | head -5; fail "pgbench failed (exit $rc): a wrong count or an error"; }
}

# compare_with_btree TABLE INDEX: an index scan of TABLE through INDEX returns
# exactly the rows of the btree-indexed copy `b`.
compare_with_btree() {
    local diff plan
    diff=$(q -c "set enable_seqscan = off; set enable_bitmapscan = off;
        with x as (select k, v from $1 where k >= 0 order by k), y as (select k, v from b)
        select (select count(*) from (select * from x except all select * from y) s) +
               (select count(*) from (select * from y except all select * from x) s)")
    echo "$1: rows differing from the btree copy: $diff"
    if [ "$diff" != 0 ]; then
        q -c "set enable_seqscan = off; set enable_bitmapscan = off;
            with x as (select k, v from $1 where k >= 0 order by k), y as (select k, v from b)
            (select 'only $1', * from (select * from x except all select * from y) s limit 10)
            union all (select 'only b', * from (select * from y except all select * from x) s limit 10)"
        fail "$1 and btree disagree"
    fi
    plan=$(q -c "set enable_seqscan = off; set enable_bitmapscan = off; explain (costs off) select k, v from $1 where k >= 0 order by k")
    grep -q "$2" <<<"$plan" || fail "comparison did not use $2: $plan"
}

# start_three_memnodes: memory node mem and two more of slightly different
# sizes (mem2, mem3: a level-1 split migrates to the emptiest); sets M2, M3
# and ALL3 (the three URLs, for dex.memnodes) and stops them on exit.
start_three_memnodes() {
    start_memnode mem "$MPORT" 512MB --threads 2
    M2=$(free_port); M3=$(free_port)
    start_memnode mem2 "$M2" 520MB --threads 1
    start_memnode mem3 "$M3" 540MB --threads 1
    trap 'test_cleanup; stop_memnode mem2; stop_memnode mem3' EXIT
    ALL3="$MEMNODE_URL,tcp://127.0.0.1:$M2,tcp://127.0.0.1:$M3"
}

# check_twin PORT X [standby]: on the server at PORT, table X read through its
# dex index X_k (k >= 0) has exactly the rows of its btree twin bX, the
# comparison uses X_k, and dex_check passes (the crash tests' check after a
# recovery; not on a standby, where dex_check cannot run).
check_twin() {
    local port=$1 x=$2 role=${3:-} out diff
    local Q=(dpsql "$port" -d postgres -At)
    out=$("${Q[@]}" -c "set enable_seqscan = off; set enable_bitmapscan = off; select count(*) from $x where k >= 0" 2>&1) \
        || fail "$x does not answer on port $port: $out"
    diff=$("${Q[@]}" -c "set enable_seqscan = off; set enable_bitmapscan = off;
        with x as (select k, v from $x where k >= 0 order by k), y as (select k, v from b$x where k >= 0)
        select (select count(*) from (select * from x except all select * from y) s) +
               (select count(*) from (select * from y except all select * from x) s)")
    echo "  $x: $out rows, $diff differing from b$x"
    [ "$diff" = 0 ] || fail "$x differs from b$x (port $port)"
    grep -q "${x}_k" <<<"$("${Q[@]}" -c "set enable_seqscan = off; set enable_bitmapscan = off;
        explain (costs off) select k, v from $x where k >= 0 order by k")" || fail "the comparison did not use ${x}_k"
    [ "$role" = standby ] || "${Q[@]}" -c "select * from dex_check('${x}_k')" >/dev/null || fail "dex_check ${x}_k (port $port)"
}

# Streaming hot standbys of the cluster on $PPORT (pg_basebackup -R).
make_standby() {  # make_standby NAME PORT [conf lines...]
    local name=$1 port=$2; shift 2
    start_standby "$name" "$PPORT" "$port" "max_standby_streaming_delay = '3s'" "$@" \
        || { tail -20 "$DEX_WORK/$name-server.log" 2>/dev/null; fail "standby $name could not be made or started"; }
}
# wait_replay PORT: the standby on PORT has replayed everything the primary wrote so far
# wait_replay PORT received: ... has received everything the primary flushed
wait_replay() {
    local what=replay at=pg_current_wal_lsn lsn
    [ "${2:-}" = received ] && what=receive at=pg_current_wal_flush_lsn
    lsn=$(dpsql "$PPORT" -d postgres -At -c "select $at()")
    for _ in $(seq 1 300); do
        [ "$(dpsql "$1" -d postgres -At -c "select pg_last_wal_${what}_lsn() >= '$lsn'")" = t ] && return 0
        sleep 0.1
    done
    fail "standby on port $1 did not $what up to $lsn"
}
# compare_loop PORT NAME PID TABLE [PREDICATE]: index vs seqscan inside one
# snapshot until PID ends; PREDICATE (default `k between @ and @ + 60`) with
# @ replaced by a random key in 0..899
compare_loop() {
    local p=$1 name=$2 pid=$3 tab=$4 pred=${5:-"k between @ and @ + 60"} ok=0 conflicts=0 bad=0 lo out a b w
    while kill -0 "$pid" 2>/dev/null; do
        lo=$((RANDOM % 900)); w=${pred//@/$lo}
        if out=$(dpsql "$p" -d postgres -At -c "begin isolation level repeatable read;
                set local enable_seqscan = off; set local enable_bitmapscan = off;
                select count(*), coalesce(sum(v), 0) from $tab where $w;
                set local enable_indexscan = off; set local enable_seqscan = on;
                select count(*), coalesce(sum(v), 0) from $tab where $w;
                commit;" 2>&1); then
            a=$(sed -n 1p <<<"$out"); b=$(sed -n 2p <<<"$out")
            if [ "$a" = "$b" ]; then ok=$((ok + 1)); else bad=$((bad + 1)); echo "$name MISMATCH [$w]: index $a seqscan $b"; fi
        elif grep -q "conflict with recovery" <<<"$out"; then conflicts=$((conflicts + 1))
        else echo "$name error: $out"; bad=$((bad + 1)); fi
    done
    echo "$name: $ok snapshots compared equal, $conflicts cancelled by recovery conflicts, $bad wrong"
    [ "$bad" = 0 ] && [ "$ok" -ge 5 ]
}

# start_dml_load TABLE SECONDS VACUUMS: random inserts, deletes and key
# updates of TABLE(k int, v) from 3 pgbench clients for SECONDS, and a VACUUM
# of it every 3 s (VACUUMS times). Sets $pgb and $vac (background pids).
start_dml_load() {
    local tab=$1 secs=$2 n=$3
    cat >"$DEX_WORK/dml.sql" <<SQL
\\set k random(0, 999)
\\set op random(1, 10)
INSERT INTO $tab(k, v) SELECT :k, :op FROM generate_series(1, 3) WHERE :op <= 5;
DELETE FROM $tab WHERE k = :k AND v % 7 = :op % 7 AND :op BETWEEN 6 AND 8;
UPDATE $tab SET k = (k + 1) % 1000 WHERE k = :k AND v % 13 = 0 AND :op = 9;
SQL
    "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$PPORT" -U postgres -c 3 -j 2 -T "$secs" -f "$DEX_WORK/dml.sql" postgres \
        >/dev/null 2>&1 &
    pgb=$!
    ( for _ in $(seq 1 "$n"); do
          sleep 3; dpsql "$PPORT" -d postgres -At -c "vacuum $tab" >/dev/null 2>&1 || echo "vacuum failed"
      done ) &
    vac=$!
}
