#!/usr/bin/env bash
# Failover at the worst moment: the primary dies at a named point of the
# index code (dex.crash_at, see t_crash_points.sh; restart_after_crash = off,
# so it stays down) while a streaming hot standby (pg_basebackup -R) is
# attached, and the standby is promoted. Whatever the primary had changed in
# remote memory that the standby never saw -- a migration's copies, a dirty
# split's halves, a write-back, a memory node's insert, entries of rows whose
# WAL never reached the standby -- the promoted server must answer exactly as
# its own heap says: each dex index equals its btree twin (changed in the
# same transactions), dex_check passes, no index asks for a REINDEX, and it
# takes writes.
# Each round starts from fresh memory nodes and clusters. Tables: t (dex,
# write-through), w (dex, write_back = on), both placement_level = 1 over
# three memory nodes, and their twins bt, bw.
source "$(dirname "$0")/common.sh"
M2=$(free_port); M3=$(free_port); SPORT=$(free_port)
ALL3="$MEMNODE_URL,tcp://127.0.0.1:$M2,tcp://127.0.0.1:$M3"
trap 'stop_cluster sb; test_cleanup; stop_memnode mem2; stop_memnode mem3' EXIT
qs() { dpsql "$SPORT" -d postgres -At "$@"; }

check() { check_twin "$SPORT" "$1"; }   # on the promoted server

# failover POINT TABLE HOW [SETTINGS]: HOW = one (single-row inserts, 2
# pgbench clients), run (20 contiguous keys per transaction) or flush
# (dex_flush of committed dirty leaves).
failover() {
    local point=$1 x=$2 how=$3 settings=${4:-}
    echo "== $point on $x ($how${settings:+, $settings}): the primary dies, the standby is promoted"
    stop_cluster sb; stop_cluster pg
    stop_memnode mem; stop_memnode mem2; stop_memnode mem3
    start_memnode mem "$MPORT" 256MB --threads 2
    start_memnode mem2 "$M2" 260MB --threads 1
    start_memnode mem3 "$M3" 280MB --threads 1
    start_cluster pg "$PPORT" "$ALL3" "dex.write_back_with_standbys = on" "restart_after_crash = off" "autovacuum = off" \
        "dex.writeback_interval = '10min'"
    q -c "create extension dex"
    for y in t w; do
        q -c "create table $y(k int, v bigint); create table b$y(k int, v bigint)"
        q -c "insert into $y select g * 10, g from generate_series(1, 20000) g; insert into b$y select * from $y"
        q -c "create index b${y}_k on b$y (k)"
        printf '\\set k random(0, 400000)\nBEGIN;\nINSERT INTO %s VALUES (:k, :client_id);\nINSERT INTO b%s VALUES (:k, :client_id);\nCOMMIT;\n' \
            "$y" "$y" >"$DEX_WORK/one-$y.sql"
        printf '\\set k random(0, 400000)\nBEGIN;\nINSERT INTO %s SELECT :k + g, g FROM generate_series(1, 20) g;\nINSERT INTO b%s SELECT :k + g, g FROM generate_series(1, 20) g;\nCOMMIT;\n' \
            "$y" "$y" >"$DEX_WORK/run-$y.sql"
    done
    chmod a+r "$DEX_WORK"/*.sql
    q -c "create index t_k on t using dex (k) with (placement_level = 1, write_back = off)"
    q -c "create index w_k on w using dex (k) with (placement_level = 1, write_back = on)"
    make_standby sb "$SPORT"
    # committed changes the standby has (dirty leaves of w among them)
    "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$PPORT" -U postgres -c 2 -j 2 -t 300 -f "$DEX_WORK/one-$x.sql" postgres \
        >/dev/null || fail "pgbench before the crash"
    wait_replay "$SPORT"
    local from; from=$(wc -l <"$DEX_WORK/pg-server.log")
    case $how in
        one|run)
            PGOPTIONS="-c dex.crash_at=$point $settings" "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$PPORT" -U postgres \
                -c 2 -j 2 -T 60 -f "$DEX_WORK/$how-$x.sql" postgres >"$DEX_WORK/pgb.log" 2>&1 || true ;;
        flush)
            q -c "insert into $x select 2000000 + g * 7, g from generate_series(1, 600) g" \
              -c "insert into b$x select 2000000 + g * 7, g from generate_series(1, 600) g"
            q -c "set dex.crash_at = '$point'" -c "select dex_flush()" >/dev/null 2>&1 || true ;;
    esac
    tail -n +"$((from + 1))" "$DEX_WORK/pg-server.log" | grep -q "crash_at \"$point\" reached" \
        || { tail -5 "$DEX_WORK/pg-server.log"; fail "$point was not reached"; }
    for _ in $(seq 1 100); do
        as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" status >/dev/null 2>&1 || break
        sleep 0.1
    done
    as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" status >/dev/null 2>&1 && fail "the primary did not stay down"
    as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/sb" -w promote >/dev/null || fail "promote"
    check t
    check w
    qs -c "insert into w values (5000005, 1)" -c "insert into bw values (5000005, 1)" -c "insert into t values (5000005, 1)" \
       -c "insert into bt values (5000005, 1)" || fail "writes on the promoted server"
    check t
    check w
}

ONE="-c dex.offload=off -c dex.insert_batch=1"
failover migrate:published t one "$ONE"
failover dirty-split:published w run "$ONE"
failover dirty-split:answered w run "-c dex.offload=on -c dex.insert_batch=1"
failover migrate:published w one "$ONE"
failover offload-write:answered w one "-c dex.offload=on -c dex.insert_batch=1 -c dex.leaf_admission=0"
failover writeback:written w flush
echo "failover points: ok"
