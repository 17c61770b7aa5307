#!/usr/bin/env bash
# Offloaded reads of a write-back index (src/README.md W15) when the node
# cache is much smaller than the index: the same write_back = on dex index
# read with dex.offload = auto (lookups that miss above the leaves may be
# finished by the memory node) and with dex.offload = off (what write-back
# indexes did before W15: every miss read here), and btree, in one run.
# Workloads, scrambled zipfian keys (as the evaluation's): `ro` point
# selects; `rw` point selects and single-row INSERTs of fresh keys, 1:1 (the
# inserts keep leaves dirty, so answers must pass W15's check). Rounds
# alternate the order of the three; medians, ratios to btree, and dex_stats()
# per transaction (remote reads, offloads, W15 fallbacks).
#
#   bash bench/wb_offload_reads.sh [CHECKOUT] [ROWS] [SECONDS] [ROUNDS] [CLIENTS] [CACHE_PERCENT]
#
# CHECKOUT (default: this one, built) is installed into a private copy of the
# system PostgreSQL tree (scripts/lib.sh private_pg_install).
# Writes bench/results/<date>-<host>-wb-offload-reads.md.
set -euo pipefail
CO=$(cd "${1:-$(dirname "$0")/..}" && pwd); ROWS=${2:-1000000}; SECS=${3:-8}; ROUNDS=${4:-3}
CLIENTS=${5:-2}; PCT=${6:-1}
ZIPF=1.01  # pgbench accepts exponents >= 1.001 only
source "$(dirname "$0")/../scripts/lib.sh"
DEX_ROOT=$CO
DEX_WORK=/tmp/dex-wboff-$(basename "$CO"); export DEX_WORK
rm -rf "$DEX_WORK"
private_pg_install "$CO" "$DEX_WORK-pgroot"
prepare_workdir
mport=$(free_port); pport=$(free_port)
trap 'stop_cluster wbo; stop_memnode wbo-mem' EXIT
start_memnode wbo-mem "$mport" 2GB --threads 2
start_cluster wbo "$pport" "tcp://127.0.0.1:$mport" "dex.cache_size = '256MB'" "autovacuum = off"
P() { dpsql "$pport" -d postgres -At "$@"; }
PB() { "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$pport" -U postgres "$@" postgres; }
P -q -c "CREATE EXTENSION dex"
for t in dex btree; do
    P -q -c "CREATE TABLE kv_$t (k bigint, v bigint)" \
        -c "INSERT INTO kv_$t SELECT g, g FROM generate_series(1, $ROWS) g" \
        -c "CREATE INDEX kv_${t}_k ON kv_$t USING $t (k) $([ "$t" = dex ] && echo "WITH (write_back = on)")" \
        -c "VACUUM ANALYZE kv_$t"
    sel=$(printf '\\set r random_zipfian(1, %s, %s)\n\\set k permute(:r - 1, %s) + 1\nSELECT v FROM kv_%s WHERE k = :k;' \
        "$ROWS" "$ZIPF" "$ROWS" "$t")
    printf '%s\n' "$sel" >"$DEX_WORK/ro_$t.sql"
    printf '%s\n\\set n random(%s, %s)\nINSERT INTO kv_%s VALUES (:n, :client_id);\n' \
        "$sel" "$((ROWS + 1))" "$((ROWS * 1000))" "$t" >"$DEX_WORK/rw_$t.sql"
done
chmod a+r "$DEX_WORK"/*.sql
read -r leaves inner < <(P -F' ' -c "SELECT leaves, inner_nodes FROM dex_index_info('kv_dex_k')")
cache_kb=$(( (leaves + inner) * PCT / 100 ))
echo "dex.cache_size = '${cache_kb}kB'" | as_user tee -a "$DEX_WORK/wbo/postgresql.conf" >/dev/null
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/wbo" -m fast -w -t 120 restart -l "$DEX_WORK/wbo-server.log" >/dev/null
echo "index: $leaves leaves + $inner inner nodes; dex.cache_size = $(P -c 'SHOW dex.cache_size')"
for w in ro rw; do  # warm-up: the cache fills, auto's latency averages settle
    PB -c "$CLIENTS" -j "$CLIENTS" -T 5 -f "$DEX_WORK/${w}_dex.sql" >/dev/null
    PB -c "$CLIENTS" -j "$CLIENTS" -T 3 -f "$DEX_WORK/${w}_btree.sql" >/dev/null
done
raw="$DEX_WORK/raw.txt"; : >"$raw"
for r in $(seq 1 "$ROUNDS"); do
    for w in ro rw; do
        order="auto off btree"; [ $((r % 2)) = 0 ] && order="btree off auto"
        for m in $order; do
            t=dex; opt="-c dex.offload=$m"; [ "$m" = btree ] && { t=btree; opt=""; }
            P -c "SELECT dex_stats_reset()" >/dev/null
            res=$(PGOPTIONS="$opt" PB -c "$CLIENTS" -j "$CLIENTS" -T "$SECS" -f "$DEX_WORK/${w}_$t.sql")
            tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$res")
            n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$res")
            [ -n "$tps" ] || die "pgbench failed: $res"
            per=$(P -F' ' -c "SELECT round(remote_reads::numeric / $n, 3), round(offloads::numeric / $n, 3),
                                     round(wb_offload_fallbacks::numeric / $n, 4) FROM dex_stats()")
            echo "$w $m $r $tps $per" | tee -a "$raw"
        done
    done
done
check_kv_answers "$pport"  # every answer: index scan = seqscan, dex_check
out="$CO/bench/results/$(date +%Y-%m-%d)-$(hostname)-wb-offload-reads.md"
python3 - "$raw" "$out" "bash bench/wb_offload_reads.sh $CO $ROWS $SECS $ROUNDS $CLIENTS $PCT" \
    "$(nproc --all) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -r), PostgreSQL $(pg_config --version | awk '{print $2}'), tcp loopback, memnode --threads 2, fsync = off, $ROWS rows, dex index WITH (write_back = on) of $leaves leaves + $inner inner nodes, dex.cache_size ${cache_kb}kB ($PCT % of it), $CLIENTS clients, checkout $(git -C "$CO" rev-parse --short HEAD)" <<'PY'
import sys, statistics as st, collections
raw, out, cmd, machine = sys.argv[1:]
v = collections.defaultdict(list); lines = []
for line in open(raw):
    w, m, r, tps, rr, off, fb = line.split(); lines.append(line.rstrip())
    v[(w, m)].append((float(tps), float(rr), float(off), float(fb)))
med = lambda w, m, i: st.median(x[i] for x in v[(w, m)])
L = ["# Offloaded reads of a write-back dex index, cache much smaller than the index\n", f"Command: `{cmd}`\n",
     f"Machine: {machine}.\n",
     "Scrambled zipfian keys (pgbench random_zipfian 1.01 + permute). `ro`: point selects; `rw`: a point select and an "
     "INSERT of a fresh key per transaction. Rounds alternate the order of the three; every answer is checked against a "
     "sequential scan and dex_check passes after the run.\n",
     "| workload | dex.offload | tps (median) | / btree | remote reads / tx | offloads / tx | W15 fallbacks / tx |",
     "|---|---|---|---|---|---|---|"]
for w in ("ro", "rw"):
    b = med(w, "btree", 0)
    for m in ("auto", "off"):
        L.append(f"| {w} | {m} | {med(w, m, 0):.0f} | {med(w, m, 0) / b:.2f}x | {med(w, m, 1):.3f} | "
                 f"{med(w, m, 2):.3f} | {med(w, m, 3):.4f} |")
    L.append(f"| {w} | btree | {b:.0f} | 1.00x | - | - | - |")
L += ["", "Every round (workload mode round tps remote_reads/tx offloads/tx fallbacks/tx):", "", "```"] + lines + ["```", ""]
open(out, "w").write("\n".join(L))
print("\n".join(L))
PY
