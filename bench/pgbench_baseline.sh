#!/usr/bin/env bash
# First pgbench comparison, dex vs btree, same run, same data: point selects and
# inserts. Writes bench/results/<date>-<host>-pgbench-baseline.md.
#   bash bench/pgbench_baseline.sh [ROWS] [SECONDS] [CLIENTS]
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
ROWS=${1:-1000000}; SECS=${2:-30}; CLIENTS=${3:-2}
default_work_dir /tmp/dex-bench
install_deps
build_install
mport=$(free_port); pport=$(free_port)
trap 'stop_cluster bench; stop_memnode bench-mem' EXIT
start_memnode bench-mem "$mport" 2GB --threads 2
start_cluster bench "$pport" "tcp://127.0.0.1:$mport"
P() { dpsql "$pport" -d postgres "$@"; }

P -c "CREATE EXTENSION dex"
for t in dex btree; do
    P -c "CREATE TABLE kv_$t (k bigint, v bigint)"
    P -c "INSERT INTO kv_$t SELECT g, g FROM generate_series(1, $ROWS) g"
    P -c "VACUUM ANALYZE kv_$t"
done
s=$(date +%s%N); P -c "CREATE INDEX kv_dex_k ON kv_dex USING dex (k)"; build_dex=$(( ($(date +%s%N) - s) / 1000000 ))
s=$(date +%s%N); P -c "CREATE INDEX kv_btree_k ON kv_btree (k)"; build_bt=$(( ($(date +%s%N) - s) / 1000000 ))

out="$DEX_ROOT/bench/results/$(date +%Y-%m-%d)-$(hostname)-pgbench-baseline.md"
mkdir -p "$(dirname "$out")"
{
echo "# pgbench baseline: dex (TCP, no cache) vs btree"
echo
echo "Command: \`bash bench/pgbench_baseline.sh $ROWS $SECS $CLIENTS\`"
echo
echo "Machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -r), PostgreSQL $(pg_config --version | awk '{print $2}'), transport tcp loopback, memnode --threads 2"
echo
echo "Index build of $ROWS rows: dex ${build_dex} ms, btree ${build_bt} ms."
echo
echo "| workload | index | tps | avg latency ms | remote round trips / tx | bytes read / tx |"
echo "|---|---|---|---|---|---|"
} >"$out"

run() {  # run WORKLOAD TABLE SCRIPT
    local w=$1 t=$2 f=$3
    P -c "select dex_stats_reset()" >/dev/null
    local res; res=$("$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$pport" -U postgres -c "$CLIENTS" -j "$CLIENTS" -T "$SECS" -f "$f" postgres)
    local tps lat txs
    tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$res")
    lat=$(sed -n 's/^latency average = \([0-9.]*\).*/\1/p' <<<"$res")
    txs=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$res")
    local rt br
    read -r rt br < <(P -At -F' ' -c "select round(round_trips::numeric / $txs, 2), round(bytes_read::numeric / $txs) from dex_stats()")
    [ "$t" = btree ] && { rt=0; br=0; }
    echo "| $w | $t | $tps | $lat | $rt | $br |" >>"$out"
    echo "$w $t: $tps tps"
}
for t in dex btree; do
    printf '\\set k random(1, %s)\nSELECT v FROM kv_%s WHERE k = :k;\n' "$ROWS" "$t" >"$DEX_WORK/sel_$t.sql"
    printf '\\set k random(1, %s)\nINSERT INTO kv_%s VALUES (:k, -1);\n' "$((ROWS * 4))" "$t" >"$DEX_WORK/ins_$t.sql"
done
run "point select" dex "$DEX_WORK/sel_dex.sql"; run "point select" btree "$DEX_WORK/sel_btree.sql"
run "insert" dex "$DEX_WORK/ins_dex.sql"; run "insert" btree "$DEX_WORK/ins_btree.sql"
P -c "select * from dex_check('kv_dex_k')" >>"$out"
echo >>"$out"
echo "Round trips per transaction are read from dex_stats() (reset before each run)." >>"$out"
cat "$out"
python3 - "$out" <<'PY'
import re, sys
p = sys.argv[1]; s = open(p).read()
d = {(w, i): float(t) for w, i, t in re.findall(r'\| (point select|insert) \| (dex|btree) \| ([0-9.]+) \|', s)}
ratio = ", ".join(f"{w} {d[(w, 'dex')] / d[(w, 'btree')]:.2f}x" for w in ("point select", "insert"))
open(p, "a").write(f"\ndex / btree throughput (same run): {ratio}\n")
print("dex / btree:", ratio)
PY
