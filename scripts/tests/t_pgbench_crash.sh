#!/usr/bin/env bash
# pgbench's own TPC-B-like script (a client we did not write) on tables keyed
# by dex, crashed while it runs. Two databases initialized by `pgbench -i`:
# in each, the primary keys of pgbench_accounts, _tellers and _branches are
# replaced by UNIQUE dex indexes (write-through in pb_wt, write_back = on in
# pb_wb). Each round: 4 clients run `-b tpcb-like` against both databases;
# a few seconds in, the server crashes (kill -9 of a busy backend, or an
# immediate shutdown). After recovery, in each database:
#  - TPC-B's invariant holds: sum(abalance) = sum(tbalance) = sum(bbalance)
#    = sum(history.delta) (each transaction changed all four or none);
#  - every account, teller and branch is found through its dex index exactly
#    once, with the seqscan's balance (index scan vs seqscan, one snapshot);
#  - no key is duplicated, dex_check passes on every index.
source "$(dirname "$0")/common.sh"
start_memnode mem "$MPORT" 512MB --threads 2
start_cluster pg "$PPORT" "$MEMNODE_URL" "restart_after_crash = on" "autovacuum = off" "max_connections = 40"
SCALE=${SCALE:-2}; ROUNDS=${ROUNDS:-3}
DBS="pb_wt pb_wb"
qd() { local d=$1; shift; dpsql "$PPORT" -d "$d" -At "$@"; }

for d in $DBS; do
    wb=off; [ "$d" = pb_wb ] && wb=on
    q -c "create database $d"
    "$PG_BIN/pgbench" -i -q -s "$SCALE" -h "$DEX_WORK" -p "$PPORT" -U postgres "$d" >/dev/null 2>&1 \
        || fail "pgbench -i $d"
    qd "$d" -c "create extension dex"
    for t in accounts:aid tellers:tid branches:bid; do
        tab=pgbench_${t%%:*}; col=${t##*:}
        qd "$d" -c "alter table $tab drop constraint ${tab}_pkey" \
            -c "create unique index ${tab}_dex on $tab using dex ($col) with (write_back = $wb)" \
            -c "vacuum analyze $tab"
    done
done

wait_ready() {
    for _ in $(seq 1 300); do q -c "select 1" >/dev/null 2>&1 && return 0; sleep 0.2; done
    fail "server did not come back"
}

# verify DB: the checks above, after a crash.
verify() {
    local d=$1 sums keys tab col idx seq dups
    sums=$(qd "$d" -c "select (select sum(abalance) from pgbench_accounts), (select sum(tbalance) from pgbench_tellers),
                              (select sum(bbalance) from pgbench_branches), (select coalesce(sum(delta), 0) from pgbench_history),
                              (select count(*) from pgbench_history)")
    IFS='|' read -r a t b h n <<<"$sums"
    echo "  $d: $n transactions in history; sums accounts $a tellers $t branches $b history $h"
    [ "$a" = "$h" ] && [ "$t" = "$h" ] && [ "$b" = "$h" ] || fail "$d: TPC-B's balances disagree after the crash: $sums"
    for k in accounts:aid:abalance tellers:tid:tbalance branches:bid:bbalance; do
        tab=pgbench_${k%%:*}; col=$(cut -d: -f2 <<<"$k"); bal=${k##*:}
        keys=$(qd "$d" -c "select count(*) from $tab")
        out=$(qd "$d" -c "begin isolation level repeatable read;
            set local enable_seqscan = off; set local enable_bitmapscan = off;
            select count(*), count(distinct $col), sum($bal) from $tab where $col between 1 and $keys;
            explain (costs off) select $bal from $tab where $col between 1 and $keys;
            set local enable_indexscan = off; set local enable_indexonlyscan = off; set local enable_seqscan = on;
            select count(*), count(distinct $col), sum($bal) from $tab where $col between 1 and $keys;
            commit;") || fail "$d: $tab scans failed: $out"
        idx=$(sed -n 1p <<<"$out"); seq=$(tail -1 <<<"$out")
        grep -q "${tab}_dex" <<<"$out" || fail "$d: the index comparison of $tab did not use ${tab}_dex: $out"
        [ "$idx" = "$seq" ] || fail "$d: $tab through ${tab}_dex ($idx) differs from its seqscan ($seq)"
        [ "${seq%%|*}" = "$keys" ] || fail "$d: $tab has $keys rows but ${seq%%|*} keys in 1..$keys"
        dups=$(qd "$d" -c "select count(*) from (select $col from $tab group by $col having count(*) > 1) x")
        [ "$dups" = 0 ] || fail "$d: $tab has $dups duplicated keys"
        qd "$d" -c "select * from dex_check('${tab}_dex')" >/dev/null || fail "$d: dex_check ${tab}_dex"
    done
}

for round in $(seq 1 "$ROUNDS"); do
    how=kill9; [ $((round % 2)) = 0 ] && how=immediate
    echo "== round $round: tpcb-like on both databases, crash by $how"
    pids=()
    for d in $DBS; do
        "$PG_BIN/pgbench" -n -b tpcb-like -c 4 -j 2 -T 60 -h "$DEX_WORK" -p "$PPORT" -U postgres "$d" \
            >"$DEX_WORK/tpcb-$d-$round.log" 2>&1 &
        pids+=($!)
    done
    sleep $((3 + round))
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || { cat "$DEX_WORK"/tpcb-*-"$round".log | tail; fail "pgbench ended before the crash"; }; done
    if [ "$how" = kill9 ]; then
        victim=$(q -c "select pid from pg_stat_activity where application_name = 'pgbench' order by state = 'active' desc limit 1")
        [ -n "$victim" ] || fail "no pgbench backend to kill"
        ckpt=$(checkpointer_pid)
        kill -9 "$victim"
        wait_crash_restart "$ckpt"
    else
        as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -m immediate stop >/dev/null
        as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -l "$DEX_WORK/pg-server.log" -w start >/dev/null || fail "start"
    fi
    wait_ready
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    for d in $DBS; do verify "$d"; done
done

echo "== after the crashes: one more clean run, then VACUUM"
for d in $DBS; do
    "$PG_BIN/pgbench" -n -b tpcb-like -c 4 -j 2 -T 4 -h "$DEX_WORK" -p "$PPORT" -U postgres "$d" \
        >"$DEX_WORK/tpcb-$d-final.log" 2>&1 || { tail "$DEX_WORK/tpcb-$d-final.log"; fail "pgbench after the crashes ($d)"; }
    grep -E "number of failed|tps" "$DEX_WORK/tpcb-$d-final.log" | sed "s/^/  $d: /"
    qd "$d" -c "vacuum"
    verify "$d"
done
echo "pgbench crash: ok"
