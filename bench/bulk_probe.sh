#!/usr/bin/env bash
# One 1M-row INSERT ... SELECT (int8 key in random order, md5 payload) into an
# empty table with a dex index: its time, and what dex_stats() counted
# (round trips, remote reads, admissions, leaves read back at its end). A
# quick probe for A/B runs of two checkouts (alternate them, both orders: on
# this shared 2-core machine one statement's time moves by +-40%).
#
#   bash bench/bulk_probe.sh [CHECKOUT] [ROWS]
#
# CHECKOUT (default: this one, built) is installed into a private copy of the
# system PostgreSQL tree (scripts/lib.sh private_pg_install). fsync = on.
set -euo pipefail
CO=$(cd "${1:-$(dirname "$0")/..}" && pwd); ROWS=${2:-1000000}
source "$(dirname "$0")/../scripts/lib.sh"
DEX_ROOT=$CO
DEX_WORK=/tmp/dex-probe-$(basename "$CO"); export DEX_WORK
rm -rf "$DEX_WORK"
private_pg_install "$CO" "$DEX_WORK-pgroot"
prepare_workdir
mport=$(free_port); pport=$(free_port)
trap 'stop_cluster bp; stop_memnode bp-mem' EXIT
start_memnode bp-mem "$mport" 2GB --threads 2
start_cluster bp "$pport" "tcp://127.0.0.1:$mport" "dex.cache_size = '256MB'" "autovacuum = off" \
    "fsync = on" "max_wal_size = '4GB'"
P() { dpsql "$pport" -d postgres -At "$@"; }
P -q -c "CREATE EXTENSION dex"
P -q -c "CREATE TABLE s (k int8, pad text)" \
    -c "INSERT INTO s SELECT (random() * 1e12)::int8, md5(g::text) FROM generate_series(1, $ROWS) g"
P -q -c "CREATE TABLE b (k int8, pad text)" -c "CREATE INDEX ON b USING dex (k)" -c "CHECKPOINT"
P -q -c "SELECT dex_stats_reset()"
t0=$(date +%s.%N); P -q -c "INSERT INTO b SELECT * FROM s"; t1=$(date +%s.%N)
echo "insert_select $(echo "$t1 - $t0" | bc) s  ($(git -C "$CO" log --oneline -1 | cut -c1-7))"
# (batch_rewarms: versions before 2026-12-01 lack the column; shown as -)
P -c "SELECT round_trips, remote_reads, admissions, evictions, batched_inserts FROM dex_stats()" -F ' ' \
    | sed 's/^/round_trips remote_reads admissions evictions batched_inserts: /'
P -c "SELECT batch_rewarms FROM dex_stats()" 2>/dev/null | sed 's/^/batch_rewarms: /' || echo "batch_rewarms: -"
