#!/usr/bin/env bash
# pgbench with the dex node cache, dex vs btree, same run, same data (point
# selects on ROWS rows). The cache size is a postmaster setting, so the
# scratch cluster is restarted (same data directory) between configurations:
#   (i)   cache larger than the index, uniform keys        -> target >= 0.95x btree
#   (ii)  cache = 1/8 of the index, scrambled zipfian keys -> target >= 0.7x btree
#   (iii) as (ii) with dex.cache_leaves = off (inner nodes only, for comparison)
# Writes bench/results/<date>-<host>-pgbench-cache.md.
#   bash bench/pgbench_cache.sh [ROWS] [SECONDS] [CLIENTS]
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
ROWS=${1:-1000000}; SECS=${2:-20}; CLIENTS=${3:-2}; WARM=${WARM:-10}
ZIPF=1.01  # pgbench (PostgreSQL >= 13) only accepts exponents in [1.001, 1000]; YCSB's 0.99 is not allowed
default_work_dir /tmp/dex-bench-cache
install_deps
build_install
mport=$(free_port); pport=$(free_port)
trap 'stop_cluster bench; stop_memnode bench-mem' EXIT
start_memnode bench-mem "$mport" 2GB --threads 2
start_cluster bench "$pport" "tcp://127.0.0.1:$mport" "dex.cache_size = '256MB'"
P() { dpsql "$pport" -d postgres "$@"; }
restart_with_cache() {  # restart_with_cache SIZE: empty cache of SIZE
    echo "dex.cache_size = '$1'" | as_user tee -a "$DEX_WORK/bench/postgresql.conf" >/dev/null
    as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/bench" -m fast -w -t 60 restart -l "$DEX_WORK/bench-server.log" >/dev/null
    echo "restarted with dex.cache_size = $(P -At -c 'show dex.cache_size')"
}

P -c "CREATE EXTENSION dex"
for t in dex btree; do
    P -c "CREATE TABLE kv_$t (k bigint, v bigint)"
    P -c "INSERT INTO kv_$t SELECT g, g FROM generate_series(1, $ROWS) g"
    P -c "VACUUM ANALYZE kv_$t"
done
P -c "CREATE INDEX kv_dex_k ON kv_dex USING dex (k)"
P -c "CREATE INDEX kv_btree_k ON kv_btree (k)"
read -r leaves inner height < <(P -At -F' ' -c "select leaves, inner_nodes, height from dex_index_info('kv_dex_k')")
index_kb=$(( (leaves + inner) ))  # 1 KiB nodes
big_kb=$(( index_kb * 4 )); small_kb=$(( index_kb / 8 ))

for t in dex btree; do
    printf '\\set k random(1, %s)\nSELECT v FROM kv_%s WHERE k = :k;\n' "$ROWS" "$t" >"$DEX_WORK/uni_$t.sql"
    # scrambled zipfian (as YCSB): hot keys spread over the key space
    printf '\\set r random_zipfian(1, %s, %s)\n\\set k permute(:r - 1, %s) + 1\nSELECT v FROM kv_%s WHERE k = :k;\n' \
        "$ROWS" "$ZIPF" "$ROWS" "$t" >"$DEX_WORK/zipf_$t.sql"
done

out="$DEX_ROOT/bench/results/$(date +%Y-%m-%d)-$(hostname)-pgbench-cache.md"
mkdir -p "$(dirname "$out")"
{
echo "# pgbench with the dex node cache: dex vs btree, point selects"
echo
echo "Command: \`bash bench/pgbench_cache.sh $ROWS $SECS $CLIENTS\` (WARM=$WARM s warm-up before each measured run)"
echo
echo "Machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -r), PostgreSQL $(pg_config --version | awk '{print $2}'), transport tcp loopback, memnode --threads 2, $CLIENTS pgbench clients."
echo
echo "dex index: $ROWS entries, $leaves leaves + $inner inner nodes (height $height) = $index_kb KiB of 1 KiB nodes."
echo "Zipfian keys: pgbench \`random_zipfian(1, $ROWS, $ZIPF)\` scrambled with \`permute()\` (pgbench rejects exponents < 1.001, so YCSB's 0.99 is approximated by $ZIPF)."
echo
echo "| config | dex.cache_size | keys | index | tps | avg latency ms | remote reads / tx | round trips / tx | cache hit ratio |"
echo "|---|---|---|---|---|---|---|---|---|"
} >"$out"

run() {  # run CONFIG CACHE KEYS TABLE [PGOPTIONS]
    local c=$1 cache=$2 keys=$3 t=$4 opts=${5:-}
    local f="$DEX_WORK/${keys}_$t.sql"
    PGOPTIONS="$opts" "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$pport" -U postgres -c "$CLIENTS" -j "$CLIENTS" -T "$WARM" -f "$f" postgres >/dev/null
    P -c "select dex_stats_reset()" >/dev/null
    local res; res=$(PGOPTIONS="$opts" "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$pport" -U postgres -c "$CLIENTS" -j "$CLIENTS" -T "$SECS" -f "$f" postgres)
    local tps lat txs
    tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$res")
    lat=$(sed -n 's/^latency average = \([0-9.]*\).*/\1/p' <<<"$res")
    txs=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$res")
    local rr rt hr
    read -r rr rt hr < <(P -At -F' ' -c "select round(remote_reads::numeric / $txs, 3), round(round_trips::numeric / $txs, 3),
        coalesce(round(cache_hits::numeric / nullif(cache_hits + cache_misses, 0), 4)::text, '-') from dex_stats()")
    [ "$t" = btree ] && { rr=-; rt=-; hr=-; }
    echo "| $c | $cache | $keys | $t | $tps | $lat | $rr | $rt | $hr |" >>"$out"
    echo "$c $t $keys: $tps tps (remote reads/tx $rr, hit ratio $hr)"
}

# (i) cache larger than the index. Warm-up admits every leaf it reads
# (dex.leaf_admission = 1) so the cache converges quickly; the measured run uses
# the default policy (0.1).
restart_with_cache "${big_kb}kB"
PGOPTIONS="-c dex.leaf_admission=1" "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$pport" -U postgres -c "$CLIENTS" -j "$CLIENTS" \
    -T "$WARM" -f "$DEX_WORK/uni_dex.sql" postgres >/dev/null
run "(i) cache > index" "${big_kb}kB" uni dex
run "(i) cache > index" "${big_kb}kB" uni btree
# (ii) cache = 1/8 of the index, zipfian, default policy
restart_with_cache "${small_kb}kB"
run "(ii) cache = index/8" "${small_kb}kB" zipf dex
run "(ii) cache = index/8" "${small_kb}kB" zipf btree
# (iii) same, inner nodes only
restart_with_cache "${small_kb}kB"
run "(iii) cache = index/8, cache_leaves=off" "${small_kb}kB" zipf dex "-c dex.cache_leaves=off"
P -c "select * from dex_check('kv_dex_k')" >>"$out"
{
echo
echo "Remote reads, round trips and the hit ratio are read from dex_stats() (reset after each warm-up);"
echo "the hit ratio is cache_hits / (cache_hits + cache_misses) over node lookups (inner and leaf); with"
echo "dex.cache_leaves = off leaves are not looked up at all, so that ratio covers inner nodes only."
} >>"$out"
python3 - "$out" <<'PY'
import re, sys
p = sys.argv[1]; s = open(p).read()
rows = re.findall(r'^\| (\([iv]+\)[^|]*) \| [^|]+ \| (\w+) \| (dex|btree) \| ([0-9.]+) \|', s, re.M)
d = {(c.split(' ')[0], i): float(t) for c, k, i, t in rows}
r1 = d[('(i)', 'dex')] / d[('(i)', 'btree')]
r2 = d[('(ii)', 'dex')] / d[('(ii)', 'btree')]
r3 = d[('(iii)', 'dex')] / d[('(ii)', 'btree')]
line = (f"\ndex / btree throughput: (i) cache > index, uniform: {r1:.3f}x (target 0.95x: {'met' if r1 >= 0.95 else 'NOT met'}); "
        f"(ii) cache = index/8, zipfian: {r2:.3f}x (target 0.7x: {'met' if r2 >= 0.7 else 'NOT met'}); "
        f"(iii) inner nodes only vs btree (ii): {r3:.3f}x\n")
open(p, "a").write(line)
PY
cat "$out"
