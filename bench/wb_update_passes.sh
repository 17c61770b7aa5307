#!/usr/bin/env bash
# Bottom-up passes for a write-back index's key-changing UPDATEs
# (src/README.md "Bottom-up deletion"): the same key-changing UPDATE as
# bench/pgbench_writes.sh (`SET k = k # 1`, one row, never HOT) on two equal
# tables with a write-back dex index each, one updated with dex.bottom_up =
# on and one with it off (what every key-changing UPDATE did before), and a
# btree twin; rounds alternate the order. Per round: tps and, per statement,
# memory-node splits, bottom-up passes, entries they removed, round trips;
# at the end each index's leaves and entries (dex_check). Fully cached, TCP
# loopback memory node, fsync off.
#
#   bash bench/wb_update_passes.sh [CHECKOUT] [ROWS] [SECONDS] [ROUNDS] [CLIENTS]
#
# Writes bench/results/<date>-<host>-wb-update-passes.md.
set -euo pipefail
CO=$(cd "${1:-$(dirname "$0")/..}" && pwd); ROWS=${2:-300000}; SECS=${3:-5}; ROUNDS=${4:-5}; CLIENTS=${5:-2}
source "$(dirname "$0")/../scripts/lib.sh"
DEX_ROOT=$CO
DEX_WORK=/tmp/dex-wbpasses-$(basename "$CO"); export DEX_WORK
rm -rf "$DEX_WORK"
private_pg_install "$CO" "$DEX_WORK-pgroot"
prepare_workdir
mport=$(free_port); pport=$(free_port)
trap 'stop_cluster wp; stop_memnode wp-mem' EXIT
start_memnode wp-mem "$mport" 2GB --threads 2
start_cluster wp "$pport" "tcp://127.0.0.1:$mport" "dex.cache_size = '256MB'" "autovacuum = off" \
    "max_connections = 40"
P() { dpsql "$pport" -d postgres -At "$@"; }
PB() { "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$pport" -U postgres "$@" postgres; }
P -q -c "CREATE EXTENSION dex"
for t in on off btree; do
    how="USING dex (k) WITH (write_back = on)"; [ "$t" = btree ] && how="(k)"
    P -q -c "CREATE TABLE kv_$t (k bigint, v bigint)" \
        -c "INSERT INTO kv_$t SELECT 2 * g, g FROM generate_series(1, $ROWS) g" \
        -c "CREATE INDEX kv_${t}_k ON kv_$t $how" -c "VACUUM ANALYZE kv_$t"
    printf '\\set r random(1, %s)\nUPDATE kv_%s SET k = k # 1 WHERE k BETWEEN 2 * :r AND 2 * :r + 1;\n' \
        "$ROWS" "$t" >"$DEX_WORK/upd_$t.sql"
    printf '\\set k random(1, %s)\nSELECT v FROM kv_%s WHERE k = 2 * :k;\n' "$ROWS" "$t" >"$DEX_WORK/warm_$t.sql"
done
chmod a+r "$DEX_WORK"/*.sql
for t in on off; do PGOPTIONS="-c dex.leaf_admission=1" PB -c 2 -j 2 -T 5 -f "$DEX_WORK/warm_$t.sql" >/dev/null; done
raw="$DEX_WORK/raw.txt"; : >"$raw"
for r in $(seq 1 "$ROUNDS"); do
    order="on off btree"; [ $((r % 2)) = 0 ] && order="btree off on"
    for t in $order; do
        P -c "SELECT dex_stats_reset()" >/dev/null
        bu=on; [ "$t" = off ] && bu=off
        res=$(PGOPTIONS="-c dex.bottom_up=$bu" PB -c "$CLIENTS" -j "$CLIENTS" -T "$SECS" -f "$DEX_WORK/upd_$t.sql")
        tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$res")
        n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$res")
        [ -n "$tps" ] || die "pgbench failed: $res"
        per=$(P -F ' ' -c "SELECT round(memnode_splits::numeric / greatest($n, 1), 4),
            round(bottomup_passes::numeric / greatest($n, 1), 4), round(bottomup_removed::numeric / greatest($n, 1), 3),
            round(round_trips::numeric / greatest($n, 1), 3) FROM dex_stats()")
        echo "$t $r $tps $per" | tee -a "$raw"
    done
done
for t in on off btree; do   # every answer: index scan = seqscan
    a=$(P -c "SET enable_seqscan = off; SET enable_bitmapscan = off" -c "SELECT count(*), sum(k), sum(v) FROM kv_$t WHERE k > -1e18" | tail -1)
    b=$(P -c "SET enable_indexscan = off; SET enable_bitmapscan = off" -c "SELECT count(*), sum(k), sum(v) FROM kv_$t WHERE k > -1e18" | tail -1)
    [ "$a" = "$b" ] || die "kv_$t: index scan $a, seqscan $b"
done
sizes=$(for t in on off; do echo "$t $(P -F ' ' -c "SELECT leaves, entries FROM dex_check('kv_${t}_k')")"; done)
out="$CO/bench/results/$(date +%Y-%m-%d)-$(hostname)-wb-update-passes.md"
python3 - "$raw" "$out" "bash bench/wb_update_passes.sh $CO $ROWS $SECS $ROUNDS $CLIENTS" \
    "$(nproc --all) cores, $(uname -r), PostgreSQL $(pg_config --version | awk '{print $2}'), tcp loopback, memnode --threads 2, fsync = off, dex.cache_size 256MB (> index), $ROWS rows, $CLIENTS clients, checkout $(git -C "$CO" rev-parse --short HEAD)" \
    "$sizes" <<'PY'
import sys, statistics as st, collections
raw, out, cmd, machine, sizes = sys.argv[1:]
rows = collections.defaultdict(list); lines = []
for line in open(raw):
    f = line.split(); lines.append(line.rstrip())
    rows[f[0]].append((int(f[1]), float(f[2])) + tuple(float(x) for x in f[3:7]))
byround = {t: {r[0]: r for r in rows[t]} for t in rows}
def med(t, i): return st.median(r[i] for r in rows[t])
o = ["# Bottom-up passes for a write-back index's key-changing UPDATEs", "",
     f"Command: `{cmd}`", "", f"Machine: {machine}", "",
     "Two write-back dex indexes updated alike, one with `dex.bottom_up = on` (passes before a full leaf splits,"
     " key-changing inserts included), one with it off (no pass: what a key-changing UPDATE did before),"
     " and a btree twin; rounds alternate the order; answers checked against a sequential scan.", "",
     "| | tps (median) | / btree per round (median) | memory-node splits / stmt | passes / stmt | removed / stmt | round trips / stmt |",
     "|---|---|---|---|---|---|---|"]
for t in ("on", "off", "btree"):
    ratio = "" if t == "btree" else "%.2fx" % st.median(byround[t][r][1] / byround["btree"][r][1] for r in byround[t])
    o.append(f"| {t} | {med(t,1):.0f} | {ratio} | {med(t,2):.4f} | {med(t,3):.4f} | {med(t,4):.3f} | {med(t,5):.3f} |")
o += ["", "Index sizes at the end (leaves, entries):", "", "```", sizes, "```", "",
      "Every round (index round tps splits passes removed round-trips, per statement):", "", "```"] + lines + ["```", ""]
open(out, "w").write("\n".join(o))
print("\n".join(o))
PY
