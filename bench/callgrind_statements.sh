#!/usr/bin/env bash
# Instructions per statement (valgrind --tool=callgrind): the CPU a fully
# cached point select and a single-row insert cost a backend, dex next to
# btree, free of machine noise (instruction counts repeat exactly whatever
# else runs). A 100k-row table per index type; 2000 statements of each kind
# in one session; counted inside PortalRun and pg_plan_queries (parsing,
# which no index changes, is left out). A third session runs key-changing
# UPDATEs (SET k = -k, each row once): a point lookup plus an insert.
#
#   [DEX_WITH="write_back = on"] bash bench/callgrind_statements.sh [CHECKOUT] [STATEMENTS]
#
# DEX_WITH builds the dex index with those options.
#
# CHECKOUT (default: this one) must be built (make). It is installed into a
# private copy of the system PostgreSQL tree, so it needs no install lock and
# two checkouts can be compared. The server runs under valgrind (slow: a few
# minutes). Prints "table workload instructions/statement".
set -euo pipefail
CO=$(cd "${1:-$(dirname "$0")/..}" && pwd); N=${2:-2000}
source "$(dirname "$0")/../scripts/lib.sh"
DEX_ROOT=$CO
command -v valgrind >/dev/null || die "valgrind is not installed"
DEX_WORK=/tmp/dex-callgrind-$(basename "$CO"); export DEX_WORK
rm -rf "$DEX_WORK"
private_pg_install "$CO" "$DEX_WORK-pgroot"
prepare_workdir
mport=$(free_port); pport=$(free_port)
trap 'as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/cg" -m fast -w stop >/dev/null 2>&1; stop_memnode cg-mem' EXIT
start_memnode cg-mem "$mport" 1GB --threads 2
start_cluster cg "$pport" "tcp://127.0.0.1:$mport" "dex.cache_size = '256MB'" "autovacuum = off"
P() { dpsql "$pport" -d postgres -At "$@"; }
P -q -c "CREATE EXTENSION dex"
for t in dex btree; do
    P -q -c "CREATE TABLE t_$t (k bigint, v bigint)" -c "INSERT INTO t_$t SELECT g, g FROM generate_series(1, 100000) g"
done
P -q -c "CREATE INDEX ON t_dex USING dex (k) ${DEX_WITH:+WITH ($DEX_WITH)}" -c "CREATE INDEX ON t_btree (k)"
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/cg" -m fast -w stop >/dev/null
as_user bash -c "valgrind --tool=callgrind --callgrind-out-file=$DEX_WORK/cg.%p --collect-atstart=no \
    --toggle-collect=PortalRun --toggle-collect=pg_plan_queries $PG_BIN/postgres -D $DEX_WORK/cg \
    >$DEX_WORK/valgrind.log 2>&1 &"
for _ in $(seq 1 120); do P -c "SELECT 1" >/dev/null 2>&1 && break; sleep 1; done
for t in dex btree; do
    P -c "SELECT count(*) FROM t_$t WHERE k > 0" >/dev/null   # every node admitted
    for i in $(seq 1 "$N"); do echo "SELECT v FROM t_$t WHERE k = $(( (i * 7919) % 100000 + 1 ));"; done >"$DEX_WORK/sel_$t.sql"
    for i in $(seq 1 "$N"); do echo "INSERT INTO t_$t VALUES ($(( 200000 + i * 104729 % 9000000 )), 1);"; done >"$DEX_WORK/ins_$t.sql"
    for i in $(seq 1 "$N"); do echo "UPDATE t_$t SET k = -k WHERE k = $(( (i * 7919) % 100000 + 1 ));"; done >"$DEX_WORK/upd_$t.sql"
    chmod a+r "$DEX_WORK"/*.sql
    for w in sel ins upd; do
        pid=$(P -c "SELECT 'PID', pg_backend_pid()" -f "$DEX_WORK/${w}_$t.sql" | sed -n 's/^PID|//p')
        echo "$t $w $pid" >>"$DEX_WORK/sessions"
    done
done
# each session's profile is written when its backend exits (psql ended it)
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/cg" -m fast -w -t 300 stop >/dev/null || true
while read -r t w pid; do
    total=$(callgrind_annotate "$DEX_WORK/cg.$pid" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}' || true)
    [ -n "$total" ] || die "no profile for session $pid ($t $w)"
    echo "$t $w $((total / N))"
done <"$DEX_WORK/sessions"
