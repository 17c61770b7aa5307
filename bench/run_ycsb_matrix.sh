#!/usr/bin/env bash
# Runs a small dex-ycsb matrix (workloads x distributions x modes), each run
# against its own freshly spawned dex-memnode, appends one JSON line per run to
# bench/results/<date>-<host>-ycsb.jsonl and prints a markdown table (also
# saved next to it as <date>-<host>-ycsb.md, with the command line).
#
#   bash bench/run_ycsb_matrix.sh [KEYS] [SECONDS] [WORKERS]
#
# Environment (defaults): BUILD=/tmp/benchbuild  WORKLOADS="read-only
# read-intensive write-intensive insert-intensive scan-intensive"
# DISTS="uniform zipfian"  MODES="no-cache local"  EXTRA="" (more dex-ycsb flags)
# RESULTS_DIR=bench/results  NO_BUILD=1 skips the cmake build.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
KEYS=${1:-1000000}; SECS=${2:-10}; WORKERS=${3:-2}
BUILD=${BUILD:-/tmp/benchbuild}
WORKLOADS=${WORKLOADS:-"read-only read-intensive write-intensive insert-intensive scan-intensive"}
DISTS=${DISTS:-"uniform zipfian"}
MODES=${MODES:-"no-cache local"}
EXTRA=${EXTRA:-}
command -v jq >/dev/null || { echo "run_ycsb_matrix.sh: needs jq (apt-get install jq)" >&2; exit 2; }

if [[ -z "${NO_BUILD:-}" ]]; then
    cmake -S "$ROOT" -B "$BUILD" >/dev/null
    cmake --build "$BUILD" -j2 --target dex-ycsb dex-memnode >/dev/null
fi
YCSB="$BUILD/bench/dex-ycsb"; MEMNODE="$BUILD/memnode/dex-memnode"

stamp="$(date +%Y-%m-%d)-$(hostname)"
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results}
mkdir -p "$RESULTS_DIR"
out="$RESULTS_DIR/$stamp-ycsb.jsonl"
md="$RESULTS_DIR/$stamp-ycsb.md"
cmdline="bash bench/run_ycsb_matrix.sh $KEYS $SECS $WORKERS  (WORKLOADS=\"$WORKLOADS\" DISTS=\"$DISTS\" MODES=\"$MODES\" EXTRA=\"$EXTRA\")"
commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$ROOT" status --porcelain 2>/dev/null | grep -q . && echo "+dirty" || true)
tmp=$(mktemp)
trap 'rm -f "$tmp" "$tmp.all"' EXIT

for wl in $WORKLOADS; do
  for dist in $DISTS; do
    for mode in $MODES; do
      echo "== $wl / $dist / $mode" >&2
      # shellcheck disable=SC2086
      if "$YCSB" --spawn-memnode "$MEMNODE" --keys "$KEYS" --seconds "$SECS" --workers "$WORKERS" \
            --workload "$wl" --dist "$dist" --mode "$mode" $EXTRA >"$tmp"; then
        jq -c --arg cmd "$cmdline" --arg commit "$commit$dirty" \
           '. + {matrix: {command: $cmd, commit: $commit}}' "$tmp" >>"$out"
        cat "$tmp" >>"$tmp.all"
      else
        echo "   FAILED (exit $?)" >&2
      fi
    done
  done
done

{
echo "# dex-ycsb matrix, $stamp"
echo
echo "Command: \`$cmdline\`, commit $commit$dirty; $(nproc) cores, $(uname -r)."
echo "Keys $KEYS, $WORKERS worker processes, $SECS s per run; remote ops per operation from dex::Stats"
echo "(local mode: 0 remote ops; the column 'node reads/op' shows its local node reads)."
echo
echo "| workload | dist | mode | ops/s | remote reads/op | node reads/op | round trips/op | bytes read/op | p50 us | p99 us | index MiB |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
jq -r '[.config.workload, .config.dist, .config.mode,
        (.run.throughput_ops_per_sec|floor),
        (.per_op.remote_reads*100|round/100),
        ((.per_op.local_accesses.reads // .per_op.remote_reads)*100|round/100),
        (.per_op.round_trips*100|round/100),
        (.per_op.bytes_read|round),
        (.latency_us.all.p50*10|round/10), (.latency_us.all.p99*10|round/10),
        (.index.bytes_after_load/1048576*10|round/10)]
       | "| " + (map(tostring)|join(" | ")) + " |"' "$tmp.all" 2>/dev/null || true
} | tee -a "$md"
echo >>"$md"
echo "results: $out" >&2
