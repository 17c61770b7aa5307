#!/usr/bin/env bash
# Where a bulk load's time goes: one COPY (or INSERT ... SELECT) of ROWS random
# int8 keys into a table that already has a dex index, as bench/bulk_load.sh
# loads it, under `perf record -a -g` (whole system: the backend, the memory
# node and the kernel's TCP path all count, everything pinned to CPU 0), and
# dex_stats() / pg_stat_wal for the same statement; then the index against a
# seqscan, dex_check(), and the CPU seconds of the backend and the memory node
# (cpu-clock samples per process: robust when others load the machine).
#
#   taskset -c 0 bash bench/bulk_load_profile.sh [CHECKOUT] [ROWS] [copy|insert_select] [OUTDIR]
#
# OUTDIR (default /tmp/dex-bulk-profile) gets perf.data, report-*.txt, stats.txt.
# Needs perf (linux-perf) and the rights to record system-wide (root).
# PERF=0: no profile, only the statement's time and counters (a quick probe
# for A/B runs of two checkouts: alternate them, in both orders -- on a
# shared 2-core machine one statement's time moves by +-40%).
set -euo pipefail
CO=$(cd "${1:-$(dirname "$0")/..}" && pwd); ROWS=${2:-1000000}; WHAT=${3:-copy}
OUT=${4:-/tmp/dex-bulk-profile}; mkdir -p "$OUT"
source "$(dirname "$0")/../scripts/lib.sh"
DEX_ROOT=$CO
DEX_WORK=/tmp/dex-bulkprof-$(basename "$CO"); export DEX_WORK
rm -rf "$DEX_WORK"
private_pg_install "$CO" "$DEX_WORK-pgroot"
prepare_workdir
mport=$(free_port); pport=$(free_port)
trap 'stop_cluster bp; stop_memnode bp-mem' EXIT
start_memnode bp-mem "$mport" 2GB --threads 2
start_cluster bp "$pport" "tcp://127.0.0.1:$mport" "dex.cache_size = '256MB'" "autovacuum = off" \
    "fsync = on" "max_wal_size = '4GB'" "checkpoint_timeout = '1h'"
P() { dpsql "$pport" -d postgres -At "$@"; }
P -q -c "CREATE EXTENSION dex"
data="$DEX_WORK/rows.copy"
P -c "COPY (SELECT (random() * 1e12)::int8, md5(g::text) FROM generate_series(1, $ROWS) g) TO STDOUT" >"$data"
chmod a+r "$data"
P -q -c "CREATE TABLE b (k int8, pad text)" -c "CREATE INDEX ON b USING dex (k)" \
    -c "CREATE TABLE src (k int8, pad text)" -c "COPY src FROM '$data'" -c "CHECKPOINT"
P -q -c "SELECT dex_stats_reset(), pg_stat_reset_shared('wal')" >/dev/null
if [ "$WHAT" = copy ]; then stmt="COPY b FROM '$data'"; else stmt="INSERT INTO b SELECT * FROM src"; fi
PERF=${PERF:-1}
if [ "$PERF" = 1 ]; then
    perf record -a -g -o "$OUT/perf.data" 2>"$OUT/perf-record.log" &
    perf_pid=$!
    sleep 1
fi
t0=$(date +%s.%N); P -q -c "SELECT pg_backend_pid()" -c "$stmt" >"$OUT/backend.pid"; t1=$(date +%s.%N)
[ "$PERF" = 1 ] && { kill -INT "$perf_pid"; wait "$perf_pid" || true; }
echo "$WHAT of $ROWS rows: $(echo "$t1 - $t0" | bc) s $([ "$PERF" = 1 ] && echo "(under perf)") ($(git -C "$CO" log --oneline -1 | cut -c1-7))" \
    | tee "$OUT/stats.txt"
P -x -c "SELECT * FROM dex_stats()" >>"$OUT/stats.txt"
[ "$PERF" = 1 ] || grep -E "^(round_trips|remote_reads|admissions|evictions|batched_inserts|batch_rewarms)\|" "$OUT/stats.txt"
P -x -c "SELECT wal_records, wal_bytes, wal_write, wal_sync FROM pg_stat_wal" >>"$OUT/stats.txt"
P -q -c "SET enable_indexscan = off" -c "SET enable_bitmapscan = off" -c "SET enable_indexonlyscan = off" \
    -c "CREATE TEMP TABLE want AS SELECT k FROM b ORDER BY k" -c "RESET enable_indexscan" -c "RESET enable_bitmapscan" \
    -c "RESET enable_indexonlyscan" -c "SET enable_seqscan = off" \
    -c "SELECT 'rows differing from a seqscan: ' || count(*) FROM ((SELECT k FROM want EXCEPT ALL SELECT k FROM b WHERE k >= 0) UNION ALL (SELECT k FROM b WHERE k >= 0 EXCEPT ALL SELECT k FROM want)) d" \
    -c "SELECT 'dex_check: ' || count(*) FROM dex_check('b_k_idx')" | tee -a "$OUT/stats.txt" || true
[ "$PERF" = 1 ] || exit 0
perf report -i "$OUT/perf.data" --no-children --sort comm,dso -g none --percent-limit 0.5 --stdio >"$OUT/report-comm-dso.txt" 2>/dev/null
perf report -i "$OUT/perf.data" --no-children --sort comm,dso,symbol -g none --percent-limit 0.3 --stdio >"$OUT/report-symbols.txt" 2>/dev/null
perf report -i "$OUT/perf.data" --children --comm postgres --sort symbol -g none --percent-limit 1 --stdio >"$OUT/report-postgres-children.txt" 2>/dev/null
# CPU time of the statement's backend and of the memory node (cpu-clock
# samples per process; robust against other load on the machine, unlike
# wall time).
mem_pid=$(cat "$DEX_WORK/bp-mem.pid"); be_pid=$(head -1 "$OUT/backend.pid")
freq=$(perf report -i "$OUT/perf.data" --header-only 2>/dev/null | sed -n 's/.*sample_freq } = \([0-9]*\).*/\1/p' | head -1)
perf script -i "$OUT/perf.data" -F comm,pid 2>/dev/null | python3 -c '
import sys, collections
mem, be, freq = sys.argv[1], sys.argv[2], float(sys.argv[3])
n = collections.Counter()
for line in sys.stdin:
    f = line.split()
    if len(f) >= 2: n[(f[-1], " ".join(f[:-1]))] += 1
bc = sum(c for (p, comm), c in n.items() if p == be)
mc = sum(c for (p, comm), c in n.items() if p == mem)
print(f"CPU seconds ({freq:.0f} Hz samples): backend {bc / freq:.2f} (pid {be}), memory node {mc / freq:.2f} (pid {mem})")
' "$mem_pid" "$be_pid" "${freq:-4000}" | tee -a "$OUT/stats.txt"
echo "reports in $OUT"
