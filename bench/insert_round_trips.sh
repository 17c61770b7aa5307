#!/usr/bin/env bash
# Remote round trips per single-row INSERT (dex_stats()), the machine-noise-free
# measure of what an insert costs: a 100k-row table with a cached dex index,
# pgbench inserting fresh keys from 2 clients, INSERTS rows each (after a 3 s
# warm-up): a fixed count, so that splits (which cost more) are comparable.
#
#   [DEX_WITH="write_back = on"] bash bench/insert_round_trips.sh [CHECKOUT] [INSERTS]
#
# DEX_WITH builds the dex index with those options.
#
# CHECKOUT (default: this one) must be built (make). It is installed into a
# private copy of the system PostgreSQL tree (as bench/evaluate.sh does), so it
# needs no install lock and compares any two checkouts side by side.
set -euo pipefail
CO=$(cd "${1:-$(dirname "$0")/..}" && pwd); PER_CLIENT=${2:-30000}
source "$(dirname "$0")/../scripts/lib.sh"
DEX_ROOT=$CO
DEX_WORK=/tmp/dex-insert-rt-$(basename "$CO"); export DEX_WORK
rm -rf "$DEX_WORK"
private_pg_install "$CO" "$DEX_WORK-pgroot"
prepare_workdir
mport=$(free_port); pport=$(free_port)
trap 'stop_cluster rt; stop_memnode rt-mem' EXIT
start_memnode rt-mem "$mport" 512MB --threads 2
start_cluster rt "$pport" "tcp://127.0.0.1:$mport" "dex.cache_size = '64MB'" "autovacuum = off"
P() { dpsql "$pport" -d postgres -At "$@"; }
P -q -c "CREATE EXTENSION dex" -c "CREATE TABLE t (k bigint, v bigint)" \
    -c "INSERT INTO t SELECT g, g FROM generate_series(1, 100000) g" -c "CREATE INDEX t_k ON t USING dex (k) ${DEX_WITH:+WITH ($DEX_WITH)}"
printf '\\set k random(200000, 100000000)\nINSERT INTO t VALUES (:k, 1);\n' >"$DEX_WORK/ins.sql"
chmod a+r "$DEX_WORK/ins.sql"
pgb() { "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$pport" -U postgres -c 2 -j 2 -f "$DEX_WORK/ins.sql" "$@" postgres; }
pgb -T 3 >/dev/null
P -c "SELECT dex_stats_reset()" >/dev/null
n0=$(P -c "SELECT count(*) FROM t")
tps=$(pgb -t "$PER_CLIENT" | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
n1=$(P -c "SELECT count(*) FROM t")
echo "checkout $(git -C "$CO" rev-parse --short HEAD): $((n1 - n0)) inserts, $tps tps," \
    "$(P -c "SELECT round(round_trips::numeric / $((n1 - n0)), 3) FROM dex_stats()") round trips per insert"
# What the round trips were (memnode_splits: only where the checkout counts them).
P -c "SELECT 'remote_rpcs=' || remote_rpcs || ' offloads=' || offloads || ' remote_reads=' || remote_reads ||
             ' remote_atomics=' || remote_atomics || ' round_trips=' || round_trips FROM dex_stats()"
P -c "SELECT 'memnode_splits=' || memnode_splits FROM dex_stats()" 2>/dev/null || true
