#!/usr/bin/env bash
# CPU of one TCP round trip without PostgreSQL: dex-verb-latency (one
# operation outstanding, 6 verbs x 1.1 x ITERS round trips) of checkout A and
# of checkout B, alternating, against one dex-memnode (A's, --threads 2).
# Reports per round trip: client CPU (perf stat task-clock) and context
# switches, the memory node's CPU (/proc/<pid>/stat utime+stime) and the mean
# latency of the 1 KiB WRITE. Counts, not wall time: less sensitive to the
# other users of a shared machine than a tps figure.
#
#   bash bench/round_trip_cpu_verbs.sh CHECKOUT_A CHECKOUT_B [ITERS] [ROUNDS]
#
# Both checkouts need build/bench/dex-verb-latency
# (cmake --build build --target dex-verb-latency).
set -euo pipefail
A=$(cd "$1" && pwd); B=$(cd "$2" && pwd); ITERS=${3:-20000}; ROUNDS=${4:-3}
source "$(dirname "$0")/../scripts/lib.sh"
DEX_WORK=/tmp/dex-rtverbs; export DEX_WORK
PG_BIN=$A/build/memnode  # start_memnode runs $PG_BIN/dex-memnode
prepare_workdir
port=$(free_port)
trap 'stop_memnode vm' EXIT
start_memnode vm "$port" 1GB --threads 2
mpid=$(cat "$DEX_WORK/vm.pid")
hz=$(getconf CLK_TCK)
mticks() { sed 's/^.*) //' "/proc/$mpid/stat" | awk '{print $12 + $13}'; }
rts=$(( ITERS * 66 / 10 ))
echo "# round trips per run ~ $rts; columns: checkout round client_us_per_rt client_cs_per_rt memnode_us_per_rt write_1k_mean_us"
for r in $(seq 1 "$ROUNDS"); do
    order="A B"; [ $((r % 2)) = 0 ] && order="B A"
    for w in $order; do
        co=$A; [ "$w" = B ] && co=$B
        m0=$(mticks)
        out=$(perf stat -x, -e task-clock,context-switches -o "$DEX_WORK/perf.txt" \
              "$co/build/bench/dex-verb-latency" --memnode "tcp://127.0.0.1:$port" --iters "$ITERS")
        m1=$(mticks)
        tc=$(awk -F, '/task-clock/{print $1}' "$DEX_WORK/perf.txt")   # msec
        cs=$(awk -F, '/context-switches/{print $1}' "$DEX_WORK/perf.txt")
        wr=$(awk '/^write 1 KiB/{print $4}' <<<"$out")
        awk -v w="$w" -v r="$r" -v tc="$tc" -v cs="$cs" -v m="$((m1 - m0))" -v hz="$hz" -v n="$rts" -v wr="$wr" \
            'BEGIN{printf "%s %d %.2f %.3f %.2f %s\n", w, r, tc * 1000 / n, cs / n, m * 1e6 / hz / n, wr}'
    done
done
