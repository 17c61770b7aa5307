#!/usr/bin/env bash
# A crash in the middle of concurrent DML on a write_back = on index whose
# cache is far smaller than it, over three memory nodes, with every
# operation offloaded that can be: the paths of src/README.md W15 (offloaded
# reads of a write-back index), W16 (subtree migration carrying dirty
# leaves) and W17 (inserts into uncached leaves done by the memory node and
# admitted clean) are all running when the server dies. A write-through
# twin (offloaded writes) runs alongside.
#
# Each round: 6 pgbench clients run the checked DML mix (common.sh
# write_mix_script: every transaction changes w, t and the btree copy b
# alike and compares each dex copy's count of a key range with b's); a few
# seconds in, the server is crashed -- kill -9 of a busy backend (the
# postmaster's crash restart) or an immediate shutdown, alternately --
# while the mix runs. After recovery every row through each dex index must
# equal b's (the transactions were atomic across the three tables), dex_check
# must pass, and the write-back index must answer (a crash that keeps its
# WAL never needs REINDEX). A wrong count seen by a client before the crash
# fails the test too.
source "$(dirname "$0")/common.sh"
start_three_memnodes
start_cluster pg "$PPORT" "$ALL3" "dex.cache_size = '1MB'" "dex.offload = on" "restart_after_crash = on" \
    "autovacuum = off" "dex.writeback_interval = '1s'"
CLIENTS=${CLIENTS:-6}; ROUNDS=${ROUNDS:-4}

q -c "create extension dex"
q -c "create table b(k int, v bigint); create table w(k int, v bigint); create table t(k int, v bigint)"
q -c "insert into b select g % 20000, g from generate_series(1, 40000) g; insert into w select * from b; insert into t select * from b"
q -c "create index b_k on b (k)"
q -c "create index w_k on w using dex (k) with (write_back = on, placement_level = 1)"
q -c "create index t_k on t using dex (k) with (placement_level = 1, write_back = off)"
write_mix_script "$DEX_WORK/mix.sql" w t b

wait_ready() {
    for _ in $(seq 1 300); do q -c "select 1" >/dev/null 2>&1 && return 0; sleep 0.2; done
    fail "server did not come back"
}

migrations=0 fallbacks=0
for round in $(seq 1 "$ROUNDS"); do
    how=kill9; [ $((round % 2)) = 0 ] && how=immediate
    echo "== round $round: crash by $how during the DML mix"
    "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$PPORT" -U postgres -c "$CLIENTS" -j 2 -T 60 \
        -f "$DEX_WORK/mix.sql" postgres >"$DEX_WORK/mix-$round.log" 2>&1 &
    pgb=$!
    sleep $((3 + round))
    kill -0 "$pgb" 2>/dev/null || { tail -5 "$DEX_WORK/mix-$round.log"; fail "the mix ended before the crash"; }
    # the shared-memory counters die with the crash: read them just before it
    read -r m f <<<"$(q -F ' ' -c "select migrations, wb_offload_fallbacks from dex_stats()")"
    migrations=$((migrations + m)); fallbacks=$((fallbacks + f))
    if [ "$how" = kill9 ]; then
        victim=""
        for _ in $(seq 1 50); do
            victim=$(q -c "select pid from pg_stat_activity where application_name = 'pgbench'
                           order by state = 'active' desc limit 1")
            [ -n "$victim" ] && break
            sleep 0.1
        done
        [ -n "$victim" ] || { tail -5 "$DEX_WORK/mix-$round.log"; fail "no pgbench backend to kill"; }
        ckpt=$(checkpointer_pid)
        kill -9 "$victim"
        wait_crash_restart "$ckpt"
    else
        as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -m immediate stop >/dev/null
        as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -l "$DEX_WORK/pg-server.log" -w start >/dev/null \
            || fail "start after the immediate shutdown"
    fi
    wait_ready
    kill "$pgb" 2>/dev/null || true
    wait "$pgb" 2>/dev/null || true
    # a client's wrong count before the crash ends it with a division by zero
    if grep -q "division by zero" "$DEX_WORK/mix-$round.log"; then
        grep -m3 "division by zero" "$DEX_WORK/mix-$round.log"
        fail "a client saw a dex count differ from btree's before the crash"
    fi
    grep -qE "terminat|server closed|connection" "$DEX_WORK/mix-$round.log" \
        || { tail -5 "$DEX_WORK/mix-$round.log"; fail "the clients did not see the crash"; }
    echo "rows after recovery: $(q -c "select count(*) from b"); subtree migrations so far: $migrations"
    for x in w t; do
        out=$(q -c "set enable_seqscan = off; set enable_bitmapscan = off; select count(*) from $x where k between 0 and 100" 2>&1) \
            || fail "$x after the crash: $out"
        compare_with_btree "$x" "${x}_k"
        q -c "select * from dex_check('${x}_k')" >/dev/null || fail "dex_check ${x}_k after round $round"
    done
done

echo "== after the crashes: VACUUM, the mix once more (every answer checked), compare"
q -c "vacuum w" -c "vacuum t" -c "vacuum b"
SECONDS_RUN=5 run_mix "$DEX_WORK/mix.sql"
for x in w t; do
    compare_with_btree "$x" "${x}_k"
    q -c "select * from dex_check('${x}_k')" >/dev/null || fail "dex_check ${x}_k at the end"
done
q -c "select memnode, subtrees, nodes from dex_placement('w_k')" -P footer=off
offloads=$(q -c "select sum(offloads) from dex_memnodes()")
echo "offloads executed by the memory nodes: $offloads; subtree migrations before the crashes: $migrations;" \
     "write-back offloaded reads read again: $fallbacks"
[ "$offloads" -gt 0 ] || fail "dex.offload = on but the memory nodes executed no offloads"
echo "crash during write-back offloads: ok"
