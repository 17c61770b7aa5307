#!/usr/bin/env bash
# A checkpoint that cannot wait for the write-back (src/README.md "Write-back
# mode", redo after a crash): a hot standby whose replay is paused holds the
# dirty leaves of write-back indexes back (their rows' WAL is not replayed
# there), so the checkpoint fence gives up after
# dex.checkpoint_writeback_timeout and logs those leaves whole instead
# (dexwbimage.c). The primary then crashes (immediate shutdown) before any
# write-back. Crash recovery starts at that checkpoint; the first use of each
# index replays the images and the changes after them. Checked: the fence
# logged images; after the crash every index equals its btree twin (in-place
# inserts, and entries killed in place, restored), dex_check passes, no index
# asks for a REINDEX; and the standby, replay resumed, answers the same.
# Round 2 (indexes over three memory nodes, placement_level = 1): the
# standby replays the checkpoint, restarts from a restartpoint
# there, the primary dies and the standby is promoted instead; it replays the
# images it collected (XLOG_DEX_WB_IMAGED tells it where crash redo may
# start) and answers the same. Round 3: no checkpoint, a clean (fast)
# shutdown instead, which cannot write the leaves back either: the worker
# writes them into pg_dex_wb, and after the start both indexes equal their
# twins (before, they asked for a REINDEX).
# (dex.standby_wait_timeout = 1h: the paused standby is not detached.)
# Indexes: w (int, fixed entries) and ws (int, bigint: byte-string entries),
# both write_back = on, each with a btree twin bw / bws.
source "$(dirname "$0")/common.sh"
SPORT=$(free_port); M2=$(free_port); M3=$(free_port)
trap 'stop_cluster sb; test_cleanup; stop_memnode mem2; stop_memnode mem3' EXIT
qs() { dpsql "$SPORT" -d postgres -At "$@"; }

# round restart|failover|shutdown
round() {
    local mode=$1
    echo "== round $mode"
    local nodes=$MEMNODE_URL opts=""
    stop_cluster sb; stop_cluster pg; stop_memnode mem; stop_memnode mem2; stop_memnode mem3
    start_memnode mem "$MPORT" 256MB --threads 2
    if [ "$mode" = failover ]; then  # the leaves spread over three memory nodes
        start_memnode mem2 "$M2" 256MB --threads 1
        start_memnode mem3 "$M3" 256MB --threads 1
        nodes="$MEMNODE_URL,tcp://127.0.0.1:$M2,tcp://127.0.0.1:$M3" opts="placement_level = 1, "
    fi
    start_cluster pg "$PPORT" "$nodes" "dex.write_back_with_standbys = on" "autovacuum = off" "dex.writeback_interval = '10min'" \
        "dex.checkpoint_writeback_timeout = '2s'" "dex.standby_wait_timeout = '1h'"
    q -c "create extension dex"
    for x in w ws; do
        q -c "create table $x(k int, v bigint); create table b$x(k int, v bigint)"
        q -c "insert into $x select g * 10, g from generate_series(1, 20000) g; insert into b$x select * from $x"
        q -c "create index b${x}_k on b$x (k)"
    done
    q -c "create index w_k on w using dex (k) with (${opts}write_back = on)"
    q -c "create index ws_k on ws using dex (k, v) with (${opts}write_back = on)"
    make_standby sb "$SPORT"
    # failover: a new life of the primary that the standby's base backup did
    # not see (it has no flushed position of it, only what it replays)
    [ "$mode" = restart ] || as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -m fast -w restart -l "$DEX_WORK/pg-server.log" \
        >/dev/null || fail "primary restart"
    # every leaf cached: the changes below stay in place (an uncached leaf is
    # written through, and its journal slots wait for the paused standby)
    for x in w ws; do
        q -c "set enable_seqscan = off; set enable_bitmapscan = off; select count(*) from $x where k >= 0" >/dev/null
    done
    wait_replay "$SPORT"
    qs -c "select pg_wal_replay_pause()" >/dev/null
    for x in w ws; do
        # in-place inserts (and dirty splits) that only the primary's frames hold
        q -c "insert into $x select g * 130 + 3, g from generate_series(1, 1500) g" \
          -c "insert into b$x select g * 130 + 3, g from generate_series(1, 1500) g"
        # rows deleted; index scans kill their entries in place
        q -c "delete from $x where k % 70 = 0" -c "delete from b$x where k % 70 = 0"
        q -c "set enable_seqscan = off; set enable_bitmapscan = off; select count(*) from $x where k >= 0" >/dev/null
    done
    dirty=$(q -c "select coalesce(sum(dirty), 0) from dex_cache_stats()")
    echo "dirty frames before the checkpoint: $dirty"
    [ "$dirty" -gt 20 ] || fail "too few dirty leaves to test with ($dirty)"
    from=$(wc -l <"$DEX_WORK/pg-server.log")
    if [ "$mode" = shutdown ]; then
        # a clean stop cannot write them back either: the worker writes them
        # into pg_dex_wb, and the next start's first use replays them
        as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -m fast -w stop >/dev/null || fail "stop"
        tail -n +"$((from + 1))" "$DEX_WORK/pg-server.log" | grep "were written to pg_dex_wb instead" \
            || { tail -5 "$DEX_WORK/pg-server.log"; fail "the shutdown did not write the dirty leaves"; }
        as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -l "$DEX_WORK/pg-server.log" -w start >/dev/null || fail "start"
        check_twin "$PPORT" w
        check_twin "$PPORT" ws
        tail -n +"$((from + 1))" "$DEX_WORK/pg-server.log" | grep -q "replayed [0-9]* entry changes" \
            || fail "no write-back redo ran"
        qs -c "select pg_wal_replay_resume()" >/dev/null
        wait_replay "$SPORT"
        check_twin "$SPORT" w standby
        check_twin "$SPORT" ws standby
        return
    fi
    q -c "checkpoint"
    logged=$(tail -n +"$((from + 1))" "$DEX_WORK/pg-server.log" | grep -o "[0-9]* leaves were logged whole instead" | head -1 || true)
    echo "fence: $logged"
    [ "${logged%% *}" -ge "$dirty" ] 2>/dev/null \
        || { tail -5 "$DEX_WORK/pg-server.log"; fail "the checkpoint did not log the dirty leaves"; }
    if [ "$mode" = failover ]; then
        # The standby replays the checkpoint and restarts from a restartpoint
        # there: its collection of the primary's life is not sealed, so it is
        # dropped and collected again from that checkpoint on -- only the
        # images (and XLOG_DEX_WB_IMAGED) give it what remote memory lacks.
        # Then the primary dies and the standby is promoted.
        qs -c "select pg_wal_replay_resume()" >/dev/null
        wait_replay "$SPORT"
        qs -c "checkpoint"
        as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/sb" -m fast -w restart -l "$DEX_WORK/sb-server.log" >/dev/null \
            || fail "standby restart"
        wait_replay "$SPORT"
        as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -m immediate stop >/dev/null
        as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/sb" -w promote >/dev/null || fail "promote"
        check_twin "$SPORT" w
        check_twin "$SPORT" ws
        grep -q "replayed [0-9]* entry changes" "$DEX_WORK/sb-server.log" || fail "no write-back redo ran"
        qs -c "insert into w values (5000005, 1)" -c "insert into bw values (5000005, 1)" || fail "writes after the failover"
        check_twin "$SPORT" w
        return
    fi
    wait_replay "$SPORT" received
    as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -m immediate stop >/dev/null
    as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -l "$DEX_WORK/pg-server.log" -w start >/dev/null || fail "restart"
    check_twin "$PPORT" w
    check_twin "$PPORT" ws
    grep -q "replayed [0-9]* entry changes" "$DEX_WORK/pg-server.log" || fail "no write-back redo ran"
    # the standby saw the same WAL: resumed, it answers as its heap says
    qs -c "select pg_wal_replay_resume()" >/dev/null
    wait_replay "$SPORT"
    check_twin "$SPORT" w standby
    check_twin "$SPORT" ws standby
    q -c "insert into w values (5000005, 1)" -c "insert into bw values (5000005, 1)" || fail "writes after the crash"
    check_twin "$PPORT" w
    wait_replay "$SPORT"
    check_twin "$SPORT" w standby
}

round restart
round failover
round shutdown
echo "checkpoint images: ok"
