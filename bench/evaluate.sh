#!/usr/bin/env bash
# One-command evaluation of dex (issue 6): YCSB-style workloads (DEX Table 1)
# through pgbench against dex and btree, the dex cache ratios, the dex-ycsb
# ablation and cache-size sweep (DEX Figures 8 and 12), and a report with
# tables and gnuplot PNGs. See bench/README.md ("evaluate.sh").
#
#   [DEX_WITH="write_back = on"] bash bench/evaluate.sh [--smoke|--quick|--full] [--out DIR] [--no-deps] [--keep-logs]
#
# DEX_WITH builds the dex index with those options (and names the output
# directory after them). BENCH_FSYNC=on runs the cluster with fsync on (every
# commit waits for its WAL on disk, as on a production server; default off).
#
# Output: bench/results/<date>-<host>[-profile]/report.md, runs.jsonl/.csv,
# ablation.jsonl/.csv, *.png, scripts/ (the pgbench scripts) and raw/ (every
# pgbench output and dex_stats() row the tables are computed from).
#
# The dex build of this checkout is installed into a private copy of the
# PostgreSQL 15 tree (make install DESTDIR=...), not into the system one, so a
# 40-minute run neither holds /tmp/dex-pg-install.lock nor sees another
# checkout's dex.so when it restarts its cluster.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
HERE=$DEX_ROOT/bench

PROFILE=quick; OUT=""; NO_DEPS=0; KEEP_LOGS=0
while [ $# -gt 0 ]; do
    case $1 in
        --smoke|--quick|--full) PROFILE=${1#--} ;;
        --out) OUT=$2; shift ;;
        --no-deps) NO_DEPS=1 ;;
        --keep-logs) KEEP_LOGS=1 ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) die "unknown argument $1 (try --help)" ;;
    esac
    shift
done
CMDLINE="bash bench/evaluate.sh --$PROFILE${OUT:+ --out $OUT}"
[ $NO_DEPS = 1 ] && CMDLINE="$CMDLINE --no-deps"
[ $KEEP_LOGS = 1 ] && CMDLINE="$CMDLINE --keep-logs"
[ -n "${DEX_WITH:-}" ] && CMDLINE="DEX_WITH=\\\"$DEX_WITH\\\" $CMDLINE"
FSYNC=${BENCH_FSYNC:-off}
[ "$FSYNC" = on ] && CMDLINE="BENCH_FSYNC=on $CMDLINE"

ALL_WL="read-only read-intensive write-intensive insert-intensive scan-intensive"
ZIPF_S=1.01          # pgbench's random_zipfian exponent (PostgreSQL >= 13 accepts [1.001, 1000])
PERM_SEED=5432       # fixed permute() seed: the same hot keys in every pgbench run
case $PROFILE in
smoke)
    ROWS=20000; CLIENTS_LIST="1 2"; WORKLOADS=$ALL_WL; DISTS="zipfian"; SECS=1; ROUNDS=1
    RATIOS="full 0.01"; RATIO_WL="read-only"; RATIO_DISTS="zipfian"; RATIO_CLIENTS=2
    RATIO_SECS=1; WARM=1
    YCSB_KEYS=20000; YCSB_SECS=1; YCSB_WORKERS=2; ABL_WL="write-intensive"; ABL_DISTS="zipfian"; ABL_RATIO=0.01
    SWEEP_WL="read-intensive"; SWEEP="0.01 1"
    MEMNODE_MEM=256MB; SHARED_BUFFERS=128MB; KEEP_LOGS=1 ;;
quick)
    ROWS=200000; CLIENTS_LIST="1 2 4"; WORKLOADS=$ALL_WL; DISTS="uniform zipfian"; SECS=3; ROUNDS=3
    RATIOS="full 0.125 0.01"; RATIO_WL="read-only write-intensive scan-intensive"; RATIO_DISTS="zipfian"
    RATIO_CLIENTS=2; RATIO_SECS=3; WARM=2
    YCSB_KEYS=200000; YCSB_SECS=2; YCSB_WORKERS=2; ABL_WL="read-intensive write-intensive"; ABL_DISTS="zipfian"
    ABL_RATIO=0.01; SWEEP_WL="read-intensive write-intensive"; SWEEP="0.01 0.05 0.125 0.5 1"
    MEMNODE_MEM=1GB; SHARED_BUFFERS=256MB ;;
full)
    ROWS=1000000; CLIENTS_LIST="1 2 4 8"; WORKLOADS=$ALL_WL; DISTS="uniform zipfian"; SECS=7; ROUNDS=3
    RATIOS="full 0.125 0.01"; RATIO_WL=$ALL_WL; RATIO_DISTS="uniform zipfian"; RATIO_CLIENTS=2
    RATIO_SECS=5; WARM=3
    YCSB_KEYS=1000000; YCSB_SECS=4; YCSB_WORKERS=2; ABL_WL="read-intensive write-intensive"
    ABL_DISTS="uniform zipfian"; ABL_RATIO=0.01; SWEEP_WL="read-intensive write-intensive"
    SWEEP="0.01 0.02 0.05 0.125 0.25 0.5 1"
    MEMNODE_MEM=2GB; SHARED_BUFFERS=768MB ;;
esac

# ---- setup -------------------------------------------------------------------------
STAMP="$(date -u +%Y-%m-%d)-$(hostname)"
[ "$PROFILE" = full ] || STAMP="$STAMP-$PROFILE"
[ -z "${DEX_WITH:-}" ] || STAMP="$STAMP-$(tr -c 'a-z0-9\n' '-' <<<"$DEX_WITH" | tr -s '-' | sed 's/^-//; s/-$//')"
[ "$FSYNC" = off ] || STAMP="$STAMP-fsync-on"
OUT=${OUT:-$HERE/results/$STAMP}
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
RAW=$OUT/raw; SCRIPTS=$OUT/scripts
rm -rf "$RAW" "$SCRIPTS" "$OUT"/*.png "$OUT"/*.jsonl "$OUT"/*.csv "$OUT"/report.md
mkdir -p "$RAW" "$SCRIPTS"
default_work_dir /tmp/dex-eval
mkdir -p "$DEX_WORK"; prepare_workdir
T_START=$(date +%s)
PY="python3 $HERE/evaluate_report.py"
say() { printf '%s\n' "$*" >&2; }

if [ $NO_DEPS = 0 ]; then install_deps; fi
log "building dex (core, extension, dex-memnode, dex-ycsb)"
make -C "$DEX_ROOT" -s -j2 >/dev/null || die "build failed"
cmake --build "$DEX_ROOT/build" -j2 --target dex-ycsb dex-memnode >/dev/null || die "dex-ycsb build failed"
YCSB=$DEX_ROOT/build/bench/dex-ycsb; YCSB_MEMNODE=$DEX_ROOT/build/memnode/dex-memnode

# Private PostgreSQL tree (scripts/lib.sh): only this run uses it.
PGROOT=$DEX_WORK/pgroot
log "installing this checkout's dex into a private PostgreSQL tree ($PGROOT)"
private_pg_install "$DEX_ROOT" "$PGROOT"

mport=$(free_port); pport=$(free_port)
cleanup() { stop_cluster eval; stop_memnode eval-mem; }
trap cleanup EXIT
MEMNODE_URL="tcp://127.0.0.1:$mport"
log "dex-memnode on $MEMNODE_URL ($MEMNODE_MEM), PostgreSQL on port $pport (profile $PROFILE)"
start_memnode eval-mem "$mport" "$MEMNODE_MEM" --threads 2
start_cluster eval "$pport" "$MEMNODE_URL" "dex.cache_size = '256MB'" "shared_buffers = '$SHARED_BUFFERS'" \
    "autovacuum = off" "max_wal_size = '2GB'" "checkpoint_timeout = '30min'" "fsync = $FSYNC"
P() { dpsql "$pport" -d postgres "$@"; }
PQ() { P -At -c "$1"; }

restart_cluster() {  # restart_cluster CACHE_KB
    echo "dex.cache_size = '${1}kB'" | as_user tee -a "$DEX_WORK/eval/postgresql.conf" >/dev/null
    as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/eval" -m fast -w -t 120 restart -l "$DEX_WORK/eval-server.log" >/dev/null \
        || { tail -20 "$DEX_WORK/eval-server.log" >&2; die "restart failed"; }
    prewarm
}
prewarm() {  # heap and btree into shared_buffers (both tables fit), so both indexes see the same heap
    PQ "select pg_prewarm('ycsb_dex'), pg_prewarm('ycsb_btree'), pg_prewarm('ycsb_btree_k')" >/dev/null
}
warm_dex_full() {
    # Every dex node into the cache. Scans read leaves through their right links
    # without admitting them, so warm with point lookups (descents admit; with
    # dex.leaf_admission = 1 every leaf): one lookup every 8 records touches
    # every leaf. Then report how much of the index is cached.
    P -c "set dex.leaf_admission = 1; set enable_seqscan = off; set enable_bitmapscan = off;
          set enable_hashjoin = off; set enable_mergejoin = off;
          select count(*) from generate_series(0, $((ROWS - 1)), 8) g,
                 lateral (select 1 from ycsb_dex where k between 4 * g and 4 * g + 1) x" >/dev/null
}
# ---- load --------------------------------------------------------------------------
log "phase 1/4: loading $ROWS rows (int8 key + 100-byte payload) into ycsb_dex and ycsb_btree"
P -c "create extension dex" -c "create extension pg_prewarm"
used0=$(PQ "select sum(used_bytes) from dex_memnodes()")
P <<SQL
CREATE TABLE ycsb_dex (k int8 NOT NULL, v text NOT NULL);
INSERT INTO ycsb_dex SELECT 4 * g, substr(repeat(md5(g::text), 4), 1, 100) FROM generate_series(0, $ROWS - 1) g;
CREATE TABLE ycsb_btree AS SELECT * FROM ycsb_dex;
VACUUM ANALYZE ycsb_dex; VACUUM ANALYZE ycsb_btree;
SQL
t0=$(date +%s%N); P -c "CREATE INDEX ycsb_dex_k ON ycsb_dex USING dex (k) ${DEX_WITH:+WITH ($DEX_WITH)}"; build_dex_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
t0=$(date +%s%N); P -c "CREATE INDEX ycsb_btree_k ON ycsb_btree (k)"; build_bt_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
P -c "ANALYZE ycsb_dex; ANALYZE ycsb_btree"
used1=$(PQ "select sum(used_bytes) from dex_memnodes()")
P --csv -c "select * from dex_index_info('ycsb_dex_k')" >"$RAW/index_info_load.csv"
P --csv -c "select * from dex_check('ycsb_dex_k')" >"$RAW/dex_check_load.csv"
P --csv -c "select pg_relation_size('ycsb_btree_k') as btree_index_bytes, pg_relation_size('ycsb_dex') as dex_heap_bytes,
    pg_relation_size('ycsb_btree') as btree_heap_bytes, pg_relation_size('ycsb_dex_k') as dex_local_bytes" >"$RAW/sizes_load.csv"
# The index size the cache ratios refer to: its nodes x node size (what cache
# frames hold; dex-ycsb's --cache-ratio uses the same definition).
# dex_index_info().bytes is what the memory node's allocator reserved (larger).
NODE_SIZE=$(sed -n 's/^#define DEX_NODE_BYTES[[:space:]]*\([0-9]*\).*/\1/p' "$DEX_ROOT/src/tree/node_capacity.h")
[ -n "$NODE_SIZE" ] || die "cannot read DEX_NODE_BYTES from src/tree/node_capacity.h"
index_bytes() { PQ "select (leaves + inner_nodes) * $NODE_SIZE from dex_index_info('ycsb_dex_k')"; }
cache_frames() { PQ "select coalesce(sum(frames), 0) from dex_cache_stats() where index = 'ycsb_dex_k'::regclass"; }

# ---- pgbench scripts -----------------------------------------------------------------
# Record r (0 <= r < ROWS) has key 4r, or 4r+1 after an odd number of updates:
# an update flips the key's low bit (k = k # 1), so every update changes the
# indexed column (never HOT) and inserts an index entry, in both indexes. A
# lookup is `k BETWEEN 4r AND 4r+1` (one descent, one leaf, one row).
# Inserts add 4*P(j)+2 (P = permute over [0, ROWS)), j unique per run and
# client: j = base + cnt*nclients + client_id, cnt a per-client counter kept
# across transactions, base advanced by the script after every pgbench run.
write_scripts() {  # write_scripts TABLE DIST
    local t=$1 d=$2 pick
    if [ "$d" = uniform ]; then pick="\\set r random(0, $((ROWS - 1)))"
    else pick="\\set r permute(random_zipfian(0, $((ROWS - 1)), $ZIPF_S), $ROWS, $PERM_SEED)"; fi
    printf '%s\n\\set lo 4 * :r\nSELECT v FROM %s WHERE k BETWEEN :lo AND :lo + 1;\n' "$pick" "$t" >"$SCRIPTS/lookup-$d-$t.sql"
    printf '%s\n\\set lo 4 * :r\n\\set c random(0, 25)\nUPDATE %s SET k = k # 1, v = repeat(chr(97 + :c), 100) WHERE k BETWEEN :lo AND :lo + 1;\n' \
        "$pick" "$t" >"$SCRIPTS/update-$d-$t.sql"
    printf '%s\n\\set lo 4 * :r\nSELECT k, v FROM %s WHERE k >= :lo ORDER BY k LIMIT 100;\n' "$pick" "$t" >"$SCRIPTS/scan-$d-$t.sql"
    printf '\\set cnt :cnt + 1\n\\set j :base + :cnt * :nc + :client_id\n\\set key 4 * (%s * (:j / %s) + permute(:j %% %s, %s, 7)) + 2\nINSERT INTO %s VALUES (:key, repeat(%s, 100));\n' \
        "$ROWS" "$ROWS" "$ROWS" "$ROWS" "$t" "'i'" >"$SCRIPTS/insert-$t.sql"
}
for t in ycsb_dex ycsb_btree; do for d in uniform zipfian; do write_scripts $t $d; done; done
script_args() {  # script_args WORKLOAD DIST TABLE -> pgbench -f arguments (weights = DEX Table 1)
    local w=$1 d=$2 t=$3 S=$SCRIPTS
    case $w in
        read-only) echo "-f $S/lookup-$d-$t.sql@100" ;;
        read-intensive) echo "-f $S/lookup-$d-$t.sql@95 -f $S/update-$d-$t.sql@5" ;;
        write-intensive) echo "-f $S/lookup-$d-$t.sql@50 -f $S/update-$d-$t.sql@50" ;;
        insert-intensive) echo "-f $S/lookup-$d-$t.sql@50 -f $S/insert-$t.sql@50" ;;
        scan-intensive) echo "-f $S/scan-$d-$t.sql@95 -f $S/insert-$t.sql@5" ;;
    esac
}
# The plans must be index scans through the index under test.
for t in ycsb_dex ycsb_btree; do
    for s in "SELECT v FROM $t WHERE k BETWEEN 400 AND 401" "UPDATE $t SET k = k # 1 WHERE k BETWEEN 400 AND 401" \
             "SELECT k, v FROM $t WHERE k >= 400 ORDER BY k LIMIT 100"; do
        plan=$(PQ "explain (costs off) $s")
        echo "$s" >>"$RAW/plans.txt"; echo "$plan" | sed 's/^/    /' >>"$RAW/plans.txt"
        grep -q "Index Scan using ${t}_k" <<<"$plan" || die "plan for [$s] is not an index scan on ${t}_k: $plan"
    done
done

# One insert counter per table, so both tables receive the same key sequence.
declare -A INSERT_BASE=([ycsb_dex]=0 [ycsb_btree]=0)
# After a run with inserts: insert j of a client is base + cnt*nclients + client_id
# with cnt <= that client's inserts (script 1 in the transaction log), so the
# next run starts above the largest j used. Keys stay in the loaded key range
# until ROWS inserts into the table.
advance_insert_base() {  # advance_insert_base TABLE WORKLOAD CLIENTS LOGPREFIX
    case $2 in insert-intensive|scan-intensive) ;; *) return 0 ;; esac
    local m
    m=$(cat "$4".* | awk '$4 == 1 { n[$1]++ } END { m = 0; for (c in n) if (n[c] > m) m = n[c]; print m }')
    INSERT_BASE[$1]=$(( ${INSERT_BASE[$1]} + (m + 1) * $3 ))
}
NRUN=0
run_pg() {  # run_pg ID PHASE WORKLOAD DIST MODE CLIENTS SECS WARM RATIO CACHE_KB
    local id=$1 phase=$2 wl=$3 dist=$4 mode=$5 c=$6 secs=$7 warm=$8 ratio=$9 cache_kb=${10}
    local t=ycsb_dex opts="" args; [ "$mode" = btree ] && t=ycsb_btree
    [ "$mode" = inner-only ] && opts="-c dex.cache_leaves=off"
    args=$(script_args "$wl" "$dist" "$t")
    local pgb=("$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$pport" -U postgres -c "$c" -j "$c")
    if [ "$warm" != 0 ]; then
        # shellcheck disable=SC2086
        PGOPTIONS="$opts" "${pgb[@]}" -T "$warm" -D cnt=0 -D base="${INSERT_BASE[$t]}" -D nc="$c" -l --log-prefix="$RAW/$id.warmlog" \
            $args postgres >"$RAW/$id.warm.txt" 2>&1 || { cat "$RAW/$id.warm.txt" >&2; die "pgbench warm-up $id failed"; }
        advance_insert_base "$t" "$wl" "$c" "$RAW/$id.warmlog"
        rm -f "$RAW/$id.warmlog".*
    fi
    PQ "select dex_stats_reset()" >/dev/null
    local load0; load0=$(cut -d' ' -f1 /proc/loadavg)
    local cmd="PGOPTIONS=\"$opts\" pgbench -n -c $c -j $c -T $secs -D cnt=0 -D base=${INSERT_BASE[$t]} -D nc=$c -l $args"
    # shellcheck disable=SC2086
    PGOPTIONS="$opts" "${pgb[@]}" -T "$secs" -D cnt=0 -D base="${INSERT_BASE[$t]}" -D nc="$c" -l --log-prefix="$RAW/$id.txlog" \
        $args postgres >"$RAW/$id.pgbench.txt" 2>"$RAW/$id.pgbench.err" \
        || { cat "$RAW/$id.pgbench.err" >&2; die "pgbench $id failed"; }
    P --csv -c "select * from dex_stats()" >"$RAW/$id.dex_stats.csv"
    local frames; frames=$(cache_frames)
    advance_insert_base "$t" "$wl" "$c" "$RAW/$id.txlog"
    NRUN=$((NRUN + 1))
    local line
    line=$($PY run --id "$id" --raw "$RAW" --phase "$phase" --workload "$wl" --dist "$dist" --mode "$mode" \
        --clients "$c" --seconds "$secs" --warm "$warm" --ratio "$ratio" --cache-kb "$cache_kb" --frames "$frames" \
        --load "$load0 $(cut -d' ' -f1 /proc/loadavg)" --cmd "${cmd//$SCRIPTS\//scripts/}" --keep-logs "$KEEP_LOGS" \
        --out "$OUT/runs.jsonl")
    progress "$line"
}
PHASE_T0=0; PHASE_N=0; PHASE_I=0; PHASE_NAME=""
phase_start() { PHASE_NAME=$1; PHASE_N=$2; PHASE_I=0; PHASE_T0=$(date +%s); log "$PHASE_NAME ($PHASE_N runs)"; }
progress() {
    PHASE_I=$((PHASE_I + 1))
    local el=$(( $(date +%s) - PHASE_T0 )) eta=0
    [ $PHASE_I -gt 0 ] && eta=$(( el * (PHASE_N - PHASE_I) / PHASE_I ))
    say "  [${PHASE_NAME%%:*} $PHASE_I/$PHASE_N, ETA $((eta / 60))m$((eta % 60))s] $*"
}
vacuum_tables() {
    local t0; t0=$(date +%s%N)
    P -c "VACUUM ycsb_dex" -c "VACUUM ycsb_btree"
    say "  (VACUUM of both tables between workloads: $(( ($(date +%s%N) - t0) / 1000000 )) ms, not measured)"
}

# ---- phase 2: throughput vs clients, dex fully cached, dex vs btree --------------------
ib=$(index_bytes); full_kb=$(( ib * 4 / 1024 + 4096 ))  # the index grows (splits, update versions) during the run
restart_cluster "$full_kb"; warm_dex_full
frames_full=$(cache_frames)
nodes_full=$(PQ "select leaves + inner_nodes from dex_index_info('ycsb_dex_k')")
echo "{\"index_bytes\": $ib, \"cache_kb\": $full_kb, \"frames_after_full_warm\": $frames_full, \"index_nodes\": $nodes_full}" >"$RAW/cache_full_warm.json"
say "  warm-up cached $frames_full of the index's $nodes_full nodes"
n=0; for _ in $WORKLOADS; do for _ in $DISTS; do for _ in $CLIENTS_LIST; do n=$((n + 2 * ROUNDS)); done; done; done
phase_start "phase 2/4: throughput vs clients, dex cache >= index (${full_kb} kB), dex vs btree, $ROUNDS rounds" $n
# Each cell runs ROUNDS times, alternating which index goes first (whatever
# runs second meets a warmer machine, a busier WAL, the other's dirty pages);
# the report takes medians. One run per cell swung 0.6-1.2x on 2 cores.
for wl in $WORKLOADS; do
    for dist in $DISTS; do
        for c in $CLIENTS_LIST; do
            for r in $(seq 1 "$ROUNDS"); do
                order="dex btree"; [ $((r % 2)) = 0 ] && order="btree dex"
                for m in $order; do
                    run_pg "p2-$wl-$dist-$m-c$c-r$r" clients "$wl" "$dist" "$m" "$c" "$SECS" 0 full "$full_kb"
                done
            done
        done
    done
    [ "$wl" = read-only ] || vacuum_tables
done

# ---- phase 3: cache ratios (postmaster GUC: one restart per ratio) ---------------------
n=0; for _ in $RATIOS; do for _ in $RATIO_WL; do for _ in $RATIO_DISTS; do n=$((n + 2)); done; done; done
phase_start "phase 3/4: cache ratios ($RATIOS of the dex index), dex vs inner-only, $RATIO_CLIENTS clients" $n
for ratio in $RATIOS; do
    ib=$(index_bytes)
    if [ "$ratio" = full ]; then kb=$(( ib * 4 / 1024 + 4096 ))
    else kb=$(python3 -c "print(max(16, int($ib * $ratio / 1024)))"); fi
    restart_cluster "$kb"
    if [ "$ratio" = full ]; then warm_dex_full; say "  warm-up cached $(cache_frames) nodes"; fi
    say "  cache ratio $ratio: index $ib bytes, dex.cache_size = ${kb}kB"
    echo "{\"ratio\": \"$ratio\", \"index_bytes\": $ib, \"cache_kb\": $kb}" >>"$RAW/ratios.jsonl"
    for wl in $RATIO_WL; do
        vacuum_tables  # every workload starts from the same state: no dead versions left by the one before
        for dist in $RATIO_DISTS; do
            for m in dex inner-only; do
                run_pg "p3-r$ratio-$wl-$dist-$m-c$RATIO_CLIENTS" ratio "$wl" "$dist" "$m" "$RATIO_CLIENTS" \
                    "$RATIO_SECS" "$WARM" "$ratio" "$kb"
            done
        done
    done
done
P --csv -c "select * from dex_check('ycsb_dex_k')" >"$RAW/dex_check_end.csv"
P --csv -c "select (select count(*) from ycsb_dex) as dex_rows, (select count(*) from ycsb_btree) as btree_rows,
    (select count(*) from ycsb_dex where k % 4 = 2) as dex_inserted,
    (select count(*) from ycsb_dex where k % 4 = 2 and k >= 4 * $ROWS) as dex_inserted_beyond_load,
    (select count(*) - count(distinct k) from ycsb_dex) + (select count(*) - count(distinct k) from ycsb_btree) as duplicate_keys" \
    >"$RAW/rows_end.csv"
dups=$(tail -1 "$RAW/rows_end.csv" | awk -F, '{ print $5 }')
[ "$dups" = 0 ] || die "$dups duplicate keys: inserts were not fresh"
P --csv -c "select * from dex_index_info('ycsb_dex_k')" >"$RAW/index_info_end.csv"
P --csv -c "select pg_relation_size('ycsb_btree_k') as btree_index_bytes" >"$RAW/sizes_end.csv"
stop_cluster eval

# ---- phase 4: dex-ycsb ablation and cache-size sweep (no PostgreSQL) ------------------
# Each variant is "label|dex-ycsb flags"; RATIO is replaced by the cache ratio.
ABL_VARIANTS=("no-cache|--mode no-cache" "inner-only|--mode inner-only --cache-ratio RATIO"
              "dex|--mode dex --cache-ratio RATIO")
OFFLOAD_NOTE="offloading: not yet available (this dex-ycsb has no offloading mode or flag)"
# Offloading (another issue) may arrive as a flag or as a mode; use whichever the driver lists.
ycsb_help=$("$YCSB" --help 2>&1 || true)
offload_mode=$(grep -o -- '[a-z+-]*offload[a-z+-]*' <<<"$ycsb_help" | grep -v '^-' | head -1 || true)
if grep -q -- '--offload' <<<"$ycsb_help"; then
    ABL_VARIANTS+=("dex+offloading|--mode dex --cache-ratio RATIO --offload auto"); OFFLOAD_NOTE="offloading: dex-ycsb --offload auto (cost-aware, DEX 6.1)"
elif [ -n "$offload_mode" ]; then
    ABL_VARIANTS+=("dex+offloading|--mode $offload_mode --cache-ratio RATIO"); OFFLOAD_NOTE="offloading: dex-ycsb --mode $offload_mode"
fi
n=0; for _ in $ABL_WL; do for _ in $ABL_DISTS; do n=$((n + ${#ABL_VARIANTS[@]})); done; done
for _ in $SWEEP_WL; do for _ in $SWEEP; do n=$((n + 2)); done; done
phase_start "phase 4/4: dex-ycsb ablation ($ABL_WL; cache ratio $ABL_RATIO) and cache sweep ($SWEEP)" $n
run_ycsb() {  # run_ycsb ID KIND LABEL RATIO FLAGS...
    local id=$1 kind=$2 label=$3 ratio=$4; shift 4
    local args=(--spawn-memnode "$YCSB_MEMNODE" --keys "$YCSB_KEYS" --workers "$YCSB_WORKERS" --seconds "$YCSB_SECS" "$@")
    "$YCSB" "${args[@]}" >"$RAW/$id.json" 2>"$RAW/$id.err" || { tail -5 "$RAW/$id.err" >&2; die "dex-ycsb $id failed"; }
    local line
    line=$($PY ycsb --id "$id" --raw "$RAW" --kind "$kind" --label "$label" --ratio "$ratio" \
           --cmd "dex-ycsb ${args[*]//$YCSB_MEMNODE/build/memnode/dex-memnode}" --out "$OUT/ablation.jsonl")
    progress "$line"
}
for wl in $ABL_WL; do
    for dist in $ABL_DISTS; do
        for v in "${ABL_VARIANTS[@]}"; do
            label=${v%%|*}; flags=${v#*|}; flags=${flags//RATIO/$ABL_RATIO}
            # shellcheck disable=SC2086
            run_ycsb "abl-$wl-$dist-$label" ablation "$label" "$ABL_RATIO" --workload "$wl" --dist "$dist" $flags
        done
    done
done
for wl in $SWEEP_WL; do
    for r in $SWEEP; do
        for m in dex inner-only; do
            run_ycsb "sweep-$wl-zipfian-$m-r$r" sweep "$m" "$r" --workload "$wl" --dist zipfian --mode "$m" --cache-ratio "$r"
        done
    done
done

# ---- report --------------------------------------------------------------------------
T_END=$(date +%s)
cat >"$OUT/meta.json" <<JSON
{"profile": "$PROFILE", "command": "$CMDLINE", "rows": $ROWS, "clients": "$CLIENTS_LIST", "workloads": "$WORKLOADS",
 "dists": "$DISTS", "seconds": $SECS, "rounds": $ROUNDS, "ratios": "$RATIOS", "ratio_workloads": "$RATIO_WL", "ratio_dists": "$RATIO_DISTS",
 "ratio_clients": $RATIO_CLIENTS, "ratio_seconds": $RATIO_SECS, "warm": $WARM, "zipf_s": $ZIPF_S, "perm_seed": $PERM_SEED,
 "ycsb_keys": $YCSB_KEYS, "ycsb_seconds": $YCSB_SECS, "ycsb_workers": $YCSB_WORKERS, "abl_ratio": $ABL_RATIO,
 "abl_workloads": "$ABL_WL", "abl_dists": "$ABL_DISTS", "sweep": "$SWEEP", "sweep_workloads": "$SWEEP_WL",
 "offload_note": "$OFFLOAD_NOTE",
 "build_dex_ms": $build_dex_ms, "build_btree_ms": $build_bt_ms, "memnode_used_before": $used0, "memnode_used_after": $used1,
 "memnode_mem": "$MEMNODE_MEM", "node_size": $NODE_SIZE, "memnode_threads": 2, "transport": "$MEMNODE_URL", "shared_buffers": "$SHARED_BUFFERS",
 "fsync": "$FSYNC",
 "host": "$(hostname)", "cores": $(nproc), "mem_gib": "$(free -g | awk '/Mem:/{print $2}')", "kernel": "$(uname -r)",
 "cpu": "$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)",
 "pg_version": "$("$PG_BIN/postgres" --version | awk '{print $3}')",
 "commit": "$(git -C "$DEX_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$DEX_ROOT" status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo +dirty || true)",
 "branch": "$(git -C "$DEX_ROOT" rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)",
 "started": "$(date -u -d @"$T_START" +%Y-%m-%dT%H:%M:%SZ)", "runtime_s": $((T_END - T_START)),
 "loadavg_end": "$(cut -d' ' -f1-3 /proc/loadavg)"}
JSON
log "writing the report"
$PY report --dir "$OUT"
$PY check --dir "$OUT" || die "the report disagrees with the raw pgbench / dex_stats output"
log "done in $(( (T_END - T_START) / 60 )) min: $OUT/report.md"
