#!/usr/bin/env bash
# A/B of two dex versions (git refs), each measured against btree in the same
# round: fully cached point selects and fresh single-row inserts, dex and
# btree alternating, versions alternating round by round (A B A B ...), each
# round on a fresh memory node and scratch cluster (metapage formats may
# differ). Reports per version the median dex/btree throughput ratio per
# workload, the change of that ratio from A to B, and memory-node bytes per
# row (after the build, and per inserted row).
#
#   bash bench/ab_versions.sh REF_A REF_B [ROWS] [SECONDS] [ROUNDS] [CLIENTS]
#
# Writes bench/results/<date>-<host>-ab-<A>-<B>.md. Builds each ref in a git
# worktree under /tmp/dex-ab-<ref> and installs it into the system PostgreSQL
# before its rounds (holding the test suite's install lock).
#
# DEX_WITH="write_back = on" builds the dex index with those options (both
# versions; the report's name and header say so).
# DEX_AB_CPUS=0 pins everything (memory node, PostgreSQL, pgbench) to that
# CPU list. On a small VM the unpinned insert numbers are bimodal: when the
# scheduler splits a client's chain (pgbench -> backend -> memory node and
# back) across CPUs, every round trip becomes an inter-processor wake-up of
# an idle vCPU and dex inserts run at 40% of their speed, at random rounds and
# for either version (bench/results/2026-11-24-vm-slow-insert-mode.md). Pinned,
# the run measures what a statement costs in CPU, round to round within 2%.
set -euo pipefail
if [ -n "${DEX_AB_CPUS:-}" ] && [ -z "${DEX_AB_PINNED:-}" ]; then
    export DEX_AB_PINNED=1
    exec taskset -c "$DEX_AB_CPUS" bash "$0" "$@"
fi
if [ -z "${DEX_INSTALL_LOCKED:-}" ]; then
    export DEX_INSTALL_LOCKED=1
    exec flock /tmp/dex-pg-install.lock bash "$0" "$@"
fi
source "$(dirname "$0")/../scripts/lib.sh"
A=${1:?REF_A}; B=${2:?REF_B}; ROWS=${3:-1000000}; SECS=${4:-10}; ROUNDS=${5:-3}; CLIENTS=${6:-2}
default_work_dir /tmp/dex-bench-ab
install_deps
ra=$(git -C "$DEX_ROOT" rev-parse --short "$A"); rb=$(git -C "$DEX_ROOT" rev-parse --short "$B")

prepare() {  # prepare REF -> worktree with a build
    local ref=$1 wt="/tmp/dex-ab-$1"
    if [ ! -d "$wt" ]; then git -C "$DEX_ROOT" worktree add -f --detach "$wt" "$ref" >/dev/null; fi
    git -C "$wt" checkout -q --detach "$ref"
    make -C "$wt" -s -j"$(nproc)" >/dev/null 2>&1 || die "build of $ref failed"
}
prepare "$ra"; prepare "$rb"

raw="$DEX_WORK/raw.txt"; mkdir -p "$DEX_WORK"; : >"$raw"
mport=$(free_port); pport=$(free_port)
trap 'stop_cluster bench; stop_memnode bench-mem' EXIT
P() { dpsql "$pport" -d postgres "$@"; }

one_round() {  # one_round REF ROUND
    local ref=$1 r=$2 wt="/tmp/dex-ab-$1"
    maybe_sudo make -C "$wt" -s install >/dev/null
    stop_cluster bench; stop_memnode bench-mem
    start_memnode bench-mem "$mport" 2GB --threads 2
    start_cluster bench "$pport" "tcp://127.0.0.1:$mport" "dex.cache_size = '256MB'" "autovacuum = off"
    P -q -c "CREATE EXTENSION dex"
    for t in dex btree; do
        P -q -c "CREATE TABLE kv_$t (k bigint, v bigint)"
        P -q -c "INSERT INTO kv_$t SELECT g, g FROM generate_series(1, $ROWS) g"
        P -q -c "VACUUM ANALYZE kv_$t"
    done
    local before after
    before=$(P -At -c "select sum(used_bytes) from dex_memnodes()")
    P -q -c "CREATE INDEX kv_dex_k ON kv_dex USING dex (k) ${DEX_WITH:+WITH ($DEX_WITH)}"
    P -q -c "CREATE INDEX kv_btree_k ON kv_btree (k)"
    after=$(P -At -c "select sum(used_bytes) from dex_memnodes()")
    echo "$ref $r build_bytes_per_row $(( (after - before) / ROWS ))" >>"$raw"
    for t in dex btree; do
        printf '\\set k random(1, %s)\nSELECT v FROM kv_%s WHERE k = :k;\n' "$ROWS" "$t" >"$DEX_WORK/sel_$t.sql"
        printf '\\set k random(%s, %s)\nINSERT INTO kv_%s VALUES (:k, :client_id);\n' "$((ROWS + 1))" "$((ROWS * 1000))" "$t" >"$DEX_WORK/ins_$t.sql"
    done
    # warm: every leaf admitted (the cache is larger than the index)
    PGOPTIONS="-c dex.leaf_admission=1" "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$pport" -U postgres \
        -c "$CLIENTS" -j "$CLIENTS" -T 10 -f "$DEX_WORK/sel_dex.sql" postgres >/dev/null
    "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$pport" -U postgres -c "$CLIENTS" -j "$CLIENTS" -T 5 \
        -f "$DEX_WORK/sel_btree.sql" postgres >/dev/null
    local w t tps used0 used1 n0 n1
    for w in sel ins; do
        for t in dex btree; do
            used0=$(P -At -c "select sum(used_bytes) from dex_memnodes()"); n0=$(P -At -c "select count(*) from kv_$t")
            P -q -c "select dex_stats_reset()" >/dev/null
            tps=$("$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$pport" -U postgres -c "$CLIENTS" -j "$CLIENTS" -T "$SECS" \
                -f "$DEX_WORK/${w}_$t.sql" postgres | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
            echo "$ref $r $w $t $tps" >>"$raw"
            echo "round $r $ref $w $t: $tps tps"
            if [ "$w" = ins ] && [ "$t" = dex ]; then
                used1=$(P -At -c "select sum(used_bytes) from dex_memnodes()"); n1=$(P -At -c "select count(*) from kv_$t")
                echo "$ref $r insert_bytes_per_row $(( (used1 - used0) / (n1 - n0) ))" >>"$raw"
                # diagnostics (not in the report): remote work per inserted row
                echo "round $r $ref dex inserts $((n1 - n0)): $(P -At -c "select 'round_trips ' || round_trips || ' offloads ' || offloads || ' restarts ' || restarts || ' cache_misses ' || cache_misses from dex_stats()")"
            fi
        done
    done
    P -q -c "select * from dex_check('kv_dex_k')" >/dev/null || die "dex_check failed ($ref)"
}

for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then one_round "$ra" "$r"; one_round "$rb" "$r"; else one_round "$rb" "$r"; one_round "$ra" "$r"; fi
done
# leave the current checkout installed
make -C "$DEX_ROOT" -s -j"$(nproc)" >/dev/null && maybe_sudo make -C "$DEX_ROOT" -s install >/dev/null

tag=""; [ -n "${DEX_WITH:-}" ] && tag="-$(tr -c 'a-z0-9_\n' '-' <<<"$DEX_WITH" | tr -s '-' | sed 's/-$//')"
out="$DEX_ROOT/bench/results/$(date +%Y-%m-%d)-$(hostname)-ab-$ra-$rb$tag.md"
pinned=""; [ -n "${DEX_AB_CPUS:-}" ] && pinned="DEX_AB_CPUS=$DEX_AB_CPUS "
with=""; [ -n "${DEX_WITH:-}" ] && with="DEX_WITH=\"$DEX_WITH\" "
python3 - "$raw" "$ra" "$rb" "$out" "${with}${pinned}bash bench/ab_versions.sh $A $B $ROWS $SECS $ROUNDS $CLIENTS" \
    "$(nproc --all) cores${pinned:+ (everything pinned to CPU ${DEX_AB_CPUS:-})}, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -r), PostgreSQL $(pg_config --version | awk '{print $2}'), tcp loopback, memnode --threads 2, fsync = off, $CLIENTS clients, $ROWS rows, dex.cache_size 256MB (> index)${DEX_WITH:+, dex index WITH ($DEX_WITH)}" <<'PY'
import sys, statistics as st, collections
raw, a, b, out, cmd, machine = sys.argv[1:]
tps = collections.defaultdict(dict); mem = collections.defaultdict(list)
for line in open(raw):
    f = line.split()
    if f[2] in ('sel', 'ins'): tps[(f[0], f[2], f[1])][f[3]] = float(f[4])
    else: mem[(f[0], f[2])].append(int(f[3]))
L = [f"# dex {a} vs {b}: dex/btree throughput ratios, same runs\n", f"Command: `{cmd}`\n", f"Machine: {machine}.\n",
     "Each round: fresh memory node and cluster, build, warm-up (every leaf admitted), then for each workload dex and btree back to back; versions alternate A B / B A by round.\n",
     "| workload | version | dex/btree per round | median ratio |", "|---|---|---|---|"]
med = {}
for w, name in (('sel', 'point select, fully cached'), ('ins', 'single-row insert')):
    for v in (a, b):
        rs = [d['dex'] / d['btree'] for (vv, ww, r), d in sorted(tps.items()) if vv == v and ww == w and 'dex' in d and 'btree' in d]
        med[(v, w)] = st.median(rs)
        L.append(f"| {name} | {v} | {', '.join(f'{x:.3f}' for x in rs)} | {med[(v, w)]:.3f} |")
L.append("")
for w, name in (('sel', 'point select'), ('ins', 'single-row insert')):
    ch = med[(b, w)] / med[(a, w)] - 1
    L.append(f"- {name}: median dex/btree ratio {med[(a, w)]:.3f} ({a}) -> {med[(b, w)]:.3f} ({b}): {ch * 100:+.1f}%")
for k, name in (('build_bytes_per_row', 'memory-node bytes per row after CREATE INDEX'), ('insert_bytes_per_row', 'memory-node bytes per inserted row')):
    L.append(f"- {name}: {a} {st.median(mem[(a, k)])}, {b} {st.median(mem[(b, k)])} (medians over rounds)")
open(out, 'w').write("\n".join(L) + "\n\nRaw (`ref round workload index tps`):\n\n```\n" + open(raw).read() + "```\n")
print("\n".join(L))
PY
echo "wrote $out"
