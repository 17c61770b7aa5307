#!/usr/bin/env bash
# The offloading matrix of issue 4 (DEX 6): dex-ycsb in dex mode, zipfian
# 0.99, for every workload x cache ratio x memory-node --threads, runs
# --offload off, on and auto back to back (so load drift on a shared machine
# hits the three alike), each against its own freshly spawned dex-memnode.
# Appends one JSON line per run to $OUT.jsonl and writes $OUT.md: ops/s per
# mode, auto / off, auto / best(on, off), and offloads per operation.
#
#   bash bench/offload_matrix.sh [KEYS] [SECONDS] [WORKERS]
#
# Environment (defaults): BUILD=/tmp/benchbuild  WORKLOADS="read-intensive
# write-intensive"  RATIOS="0.01 0.125 1.0"  THREADS="1 2"  MODES="off on auto"
# WARMUP=10 (seconds each run executes the workload unmeasured first: the
# cache fills and auto's latency averages settle, as in YCSB's warm-up)
# OUT=bench/results/<date>-<host>-offload-matrix  NO_BUILD=1 skips the build.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
KEYS=${1:-10000000}; SECS=${2:-10}; WORKERS=${3:-2}
BUILD=${BUILD:-/tmp/benchbuild}
WORKLOADS=${WORKLOADS:-"read-intensive write-intensive"}
RATIOS=${RATIOS:-"0.01 0.125 1.0"}
THREADS=${THREADS:-"1 2"}
MODES=${MODES:-"off on auto"}
WARMUP=${WARMUP:-10}
command -v jq >/dev/null || { echo "offload_matrix.sh: needs jq (apt-get install jq)" >&2; exit 2; }
if [[ -z "${NO_BUILD:-}" ]]; then
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$BUILD" -j2 --target dex-ycsb dex-memnode >/dev/null
fi
YCSB="$BUILD/bench/dex-ycsb"; MEMNODE="$BUILD/memnode/dex-memnode"
OUT=${OUT:-$ROOT/bench/results/$(date +%Y-%m-%d)-$(hostname)-offload-matrix}
mkdir -p "$(dirname "$OUT")"
: >"$OUT.jsonl"
cmdline="bash bench/offload_matrix.sh $KEYS $SECS $WORKERS  (WORKLOADS=\"$WORKLOADS\" RATIOS=\"$RATIOS\" THREADS=\"$THREADS\" WARMUP=$WARMUP)"
commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
tmp=$(mktemp); trap 'rm -f "$tmp"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for wl in $WORKLOADS; do
  for r in $RATIOS; do
    for th in $THREADS; do
      for m in $MODES; do
        echo "== $wl cache=$r threads=$th offload=$m" >&2
        "$YCSB" --spawn-memnode "$MEMNODE" --memnode-threads "$th" --keys "$KEYS" --seconds "$SECS" \
            --warmup "$WARMUP" --workers "$WORKERS" --workload "$wl" --mode dex --dist zipfian --theta 0.99 \
            --cache-ratio "$r" --offload "$m" >"$tmp"
        jq -c --arg cmd "$cmdline" --arg commit "$commit" --arg m "$m" --arg th "$th" --arg r "$r" \
           '{workload: .config.workload, cache_ratio: ($r|tonumber), memnode_threads: ($th|tonumber), offload: $m,
             ops_per_sec: .run.throughput_ops_per_sec, offloads_per_op: .per_op.offloads,
             remote_reads_per_op: .per_op.remote_reads, round_trips_per_op: .per_op.round_trips,
             hit_ratio: .cache.hit_ratio, p50_us: .latency_us.all.p50, p99_us: .latency_us.all.p99,
             keys: .config.keys, seconds: .config.seconds, workers: .config.workers,
             host: .config.host, cores: .config.cores, date: .config.date, argv: .config.argv,
             matrix: {command: $cmd, commit: $commit}}' "$tmp" >>"$OUT.jsonl"
      done
    done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
{
    echo "# Offloading matrix (dex-ycsb, zipfian 0.99, $KEYS keys, $WORKERS workers, $SECS s per run after $WARMUP s warm-up)"
    echo
    echo "Command: \`$cmdline\` at commit $commit on $(hostname) ($(nproc) cores),"
    echo "load average before $load_before, after $load_after. One run per cell; the three"
    echo "modes of a row ran back to back. Raw lines: \`$(basename "$OUT").jsonl\`."
    echo
    echo "| workload | cache | memnode threads | off ops/s | on ops/s | auto ops/s | auto / off | auto / best(on, off) | auto offloads/op |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    jq -rs 'group_by([.workload, .cache_ratio, .memnode_threads])[] |
        (map({key: .offload, value: .}) | from_entries) as $g |
        ($g.off.ops_per_sec) as $off | ($g.on.ops_per_sec) as $on | ($g.auto.ops_per_sec) as $auto |
        "| \($g.auto.workload) | \($g.auto.cache_ratio * 100 | tostring)% | \($g.auto.memnode_threads) | \($off|floor) | \($on|floor) | \($auto|floor) | \(($auto / $off * 100 | round) / 100)x | \(($auto / ([$on, $off] | max) * 100 | round) / 100)x | \(($g.auto.offloads_per_op * 100 | round) / 100) |"' "$OUT.jsonl"
} >"$OUT.md"
cat "$OUT.md"
