#!/usr/bin/env bash
# Bulk inserts into a byte-string dex index (a text key) vs btree, for two
# checkouts: `INSERT INTO t SELECT ... ROWS rows` in one statement into an
# empty table with a dex index on k text COLLATE "C", and the same into a
# table with a btree index, alternating dex / btree and checkout A / B round
# by round, each checkout in a private copy of the system PostgreSQL tree
# (scripts/lib.sh private_pg_install: no install lock), fsync = on (what a
# WAL flush per row costs is the point), one fresh memory node and cluster
# per checkout and round. Prints every time, the dex statement's remote round
# trips (dex_stats()) and the medians; the answers of
# each dex table are compared with a seqscan.
#
#   [DEX_WITH="write_back = on"] bash bench/bytes_insert.sh CHECKOUT_A CHECKOUT_B [ROWS] [ROUNDS]
#
# DEX_WITH builds the dex index with those options.
# (CHECKOUT_*: built source trees, e.g. /work/main and a worktree.)
# DEX_BENCH_CPUS=0 pins everything to that CPU list (on a small VM unpinned
# remote round trips are bimodal: bench/results/2026-11-24-vm-slow-insert-mode.md).
set -euo pipefail
if [ -n "${DEX_BENCH_CPUS:-}" ] && [ -z "${DEX_BENCH_PINNED:-}" ]; then
    export DEX_BENCH_PINNED=1
    exec taskset -c "$DEX_BENCH_CPUS" bash "$0" "$@"
fi
source "$(dirname "$0")/../scripts/lib.sh"
A=${1:?CHECKOUT_A}; B=${2:?CHECKOUT_B}; ROWS=${3:-200000}; ROUNDS=${4:-3}
default_work_dir /tmp/dex-bench-bytes-insert
mkdir -p "$DEX_WORK"; prepare_workdir
private_pg_install "$A" "$DEX_WORK-pgA"; BIN_A=$PG_BIN
private_pg_install "$B" "$DEX_WORK-pgB"; BIN_B=$PG_BIN
mport=$(free_port); pport=$(free_port)
trap 'stop_cluster bench; stop_memnode bench-mem' EXIT
raw="$DEX_WORK/raw.txt"; : >"$raw"
P() { dpsql "$pport" -d postgres "$@"; }
KEY="md5(g::text) COLLATE \"C\""

one() {  # one LABEL BIN ROUND
    local label=$1 r=$3 t0 t1 am ms
    PG_BIN=$2
    stop_cluster bench; stop_memnode bench-mem
    start_memnode bench-mem "$mport" 1GB --threads 2
    start_cluster bench "$pport" "tcp://127.0.0.1:$mport" "fsync = on" "autovacuum = off" "wal_writer_delay = '200ms'"
    P -q -c "CREATE EXTENSION dex"
    for am in dex btree; do
        P -q -c "CREATE TABLE t_$am (k text COLLATE \"C\", v int)" \
          -c "CREATE INDEX ON t_$am USING $am (k) $([ "$am" = dex ] && echo "${DEX_WITH:+WITH ($DEX_WITH)}")"
    done
    # dex first in odd rounds, btree first in even ones
    local order="dex btree"; [ $((r % 2)) = 0 ] && order="btree dex"
    for am in $order; do
        t0=$(date +%s%N)
        P -q -c "INSERT INTO t_$am SELECT $KEY, g FROM generate_series(1, $ROWS) g"
        t1=$(date +%s%N)
        ms=$(( (t1 - t0) / 1000000 ))
        echo "$label $r $am $ms" | tee -a "$raw"
        # the remote round trips of the dex statement (fresh cluster: the index's build aside)
        [ "$am" = dex ] && echo "$label $r round_trips $(P -At -c "SELECT round_trips FROM dex_stats()")" | tee -a "$raw"
    done
    local a b
    a=$(P -At -c "SET enable_seqscan = off; SET enable_bitmapscan = off;
                  SELECT count(*), md5(string_agg(k || v, ',' ORDER BY k, v)) FROM t_dex WHERE k >= ''")
    b=$(P -At -c "SET enable_indexscan = off; SET enable_bitmapscan = off;
                  SELECT count(*), md5(string_agg(k || v, ',' ORDER BY k, v)) FROM t_dex")
    [ "$a" = "$b" ] || die "$label round $r: index scan $a, seqscan $b"
    P -At -c "SELECT dex_check('t_dex_k_idx')" >/dev/null
    stop_cluster bench; stop_memnode bench-mem
}

for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then one A "$BIN_A" "$r"; one B "$BIN_B" "$r"
    else one B "$BIN_B" "$r"; one A "$BIN_A" "$r"; fi
done

echo "== medians (ms) of $ROUNDS rounds, $ROWS rows per INSERT"
for v in A B; do
    for am in dex btree; do
        med=$(awk -v v=$v -v am=$am '$1 == v && $3 == am {print $4}' "$raw" | sort -n |
              awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}')
        echo "$v $am $med"
    done
done
for v in A B; do
    med=$(awk -v v=$v '$1 == v && $3 == "round_trips" {print $4}' "$raw" | sort -n |
          awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}')
    echo "$v round_trips $med"
done
