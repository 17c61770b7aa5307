#!/usr/bin/env bash
# Reads of a write_back = on index on a hot standby while the primary keeps
# writing it: a standby scan waits until the primary has written back what
# its snapshot can need (for a point select: the changes of its key; for a
# range, those its range can meet). Measures the standby's point- and
# short-range-select throughput and latency (pgbench, 1 client) while the
# primary inserts above the old keys (pgbench, 1 client), next to the same
# selects through a btree index of the same table; and ranges where the
# primary inserts, whose dex scans all wait (the latency of that wait).
#
#   [WB_WITH_STANDBYS=off|on|auto] bash bench/standby_wb_reads.sh [CHECKOUT] [SECONDS] [ROUNDS]
#
# WB_WITH_STANDBYS sets the primary's dex.write_back_with_standbys (here on
# unless told, though the setting's default is off): off, the primary writes
# through while the standby is attached; auto: it writes through while the
# standby's scans ask for write-backs (dex.standby_pause_hold).
#
# CHECKOUT (default: this one, built) is installed into a private copy of the
# system PostgreSQL tree (scripts/lib.sh private_pg_install). The primary's
# dex.writeback_interval stays at its default (1s).
# Writes bench/results/<date>-<host>-standby-wb-reads.md.
set -euo pipefail
CO=$(cd "${1:-$(dirname "$0")/..}" && pwd); SECS=${2:-8}; ROUNDS=${3:-3}
source "$(dirname "$0")/../scripts/lib.sh"
start_replicated_bench sbwb "$CO"
P() { dpsql "$pport" -d postgres -At "$@"; }
S() { dpsql "$sport" -d postgres -At "$@"; }
P -q -c "CREATE EXTENSION dex" \
   -c "CREATE TABLE kv (k bigint, k2 bigint, v bigint)" \
   -c "INSERT INTO kv SELECT g, g, g FROM generate_series(1, 200000) g" \
   -c "CREATE INDEX kv_dex ON kv USING dex (k) WITH (write_back = on)" \
   -c "CREATE INDEX kv_bt ON kv (k2)" -c "VACUUM ANALYZE kv"
P -q -c "ALTER SYSTEM SET dex.write_back_with_standbys = ${WB_WITH_STANDBYS:-on}" -c "SELECT pg_reload_conf()"
start_standby sb "$pport" "$sport" "hot_standby_feedback = on" || die "the standby did not start"
printf '\\set k random(200001, 2000000000)\nINSERT INTO kv VALUES (:k, :k, 1);\n' >"$DEX_WORK/ins.sql"
printf '\\set k random(1, 200000)\nSELECT v FROM kv WHERE k = :k;\n' >"$DEX_WORK/sel_dex.sql"
printf '\\set k random(1, 200000)\nSELECT v FROM kv WHERE k2 = :k;\n' >"$DEX_WORK/sel_bt.sql"
# short ranges of the old keys (the primary inserts above them, as a serial or a timestamp would)
printf '\\set k random(1, 199980)\nSELECT sum(v) FROM kv WHERE k BETWEEN :k AND :k + 20;\n' >"$DEX_WORK/sel_dexr.sql"
printf '\\set k random(1, 199980)\nSELECT sum(v) FROM kv WHERE k2 BETWEEN :k AND :k + 20;\n' >"$DEX_WORK/sel_btr.sql"
# ranges where the primary is inserting (10M of the 2G new keys): every such
# dex scan meets changes not yet written back and waits for them
printf '\\set k random(200001, 1990000000)\nSELECT count(*) FROM kv WHERE k BETWEEN :k AND :k + 10000000;\n' >"$DEX_WORK/sel_dexh.sql"
printf '\\set k random(200001, 1990000000)\nSELECT count(*) FROM kv WHERE k2 BETWEEN :k AND :k + 10000000;\n' >"$DEX_WORK/sel_bth.sql"
chmod a+r "$DEX_WORK"/*.sql
for f in dex bt; do  # the plans must use the index under test
    c=$([ $f = dex ] && echo k || echo k2)
    for q in "SELECT v FROM kv WHERE $c = 5" "SELECT sum(v) FROM kv WHERE $c BETWEEN 5 AND 25"; do
        S -c "EXPLAIN (COSTS OFF) $q" | grep -q "Index Scan using kv_$f" || die "standby plan for [$q] does not use kv_$f"
    done
done
raw="$DEX_WORK/raw.txt"; : >"$raw"
for r in $(seq 1 "$ROUNDS"); do
    order="dex bt dexr btr dexh bth"; [ $((r % 2)) = 0 ] && order="bth dexh btr dexr bt dex"
    for t in $order; do
        "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$pport" -U postgres -c 1 -T $((SECS + 2)) -f "$DEX_WORK/ins.sql" postgres \
            >"$DEX_WORK/ins.out" 2>&1 & ins=$!
        sleep 1
        S -c "SELECT dex_stats_reset()" >/dev/null
        res=$("$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$sport" -U postgres -c 1 -T "$SECS" -f "$DEX_WORK/sel_$t.sql" postgres)
        # the standby's scans of the dex index that waited for a write-back, per select
        n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$res")
        waits=$(S -c "SELECT round(standby_wb_waits::numeric / greatest(${n:-0}, 1), 4) FROM dex_stats()")
        wait $ins || die "primary inserts failed: $(cat "$DEX_WORK/ins.out")"
        tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$res")
        lat=$(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' <<<"$res")
        itps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$DEX_WORK/ins.out")
        [ -n "$tps" ] && [ -n "$lat" ] || die "standby pgbench failed: $res"
        echo "$t $r $tps $lat $itps $waits" | tee -a "$raw"
    done
done
# answers: the standby's index scan = its seqscan (same snapshot)
a=$(S -c "BEGIN ISOLATION LEVEL REPEATABLE READ" -c "SET LOCAL enable_seqscan = off" -c "SET LOCAL enable_bitmapscan = off" \
      -c "SELECT count(*), sum(k) FROM kv WHERE k > 0" -c "SET LOCAL enable_indexscan = off" -c "SET LOCAL enable_seqscan = on" \
      -c "SELECT count(*), sum(k) FROM kv WHERE k > 0" -c "COMMIT" | grep '|')
[ "$(sed -n 1p <<<"$a")" = "$(sed -n 2p <<<"$a")" ] || die "standby index scan and seqscan differ: $a"
out="$CO/bench/results/$(date +%Y-%m-%d)-$(hostname)-standby-wb-reads$([ "${WB_WITH_STANDBYS:-on}" != on ] && printf %s "-wb-with-standbys-$WB_WITH_STANDBYS" || true).md"
python3 - "$raw" "$out" "bash bench/standby_wb_reads.sh $CO $SECS $ROUNDS" \
    "$(nproc --all) cores, $(uname -r), PostgreSQL $(pg_config --version | awk '{print $2}'), tcp loopback memory node, checkout $(git -C "$CO" rev-parse --short HEAD), primary dex.writeback_interval 1s (default), dex.write_back_with_standbys ${WB_WITH_STANDBYS:-on}" <<'PY'
import sys, statistics as st, collections
raw, out, cmd, machine = sys.argv[1:]
d = collections.defaultdict(list); lines = []
for line in open(raw):
    t, r, tps, lat, itps, waits = line.split(); lines.append(line.rstrip())
    d[t].append((float(tps), float(lat), float(itps), float(waits)))
med = {t: [st.median(x[i] for x in v) for i in range(4)] for t, v in d.items()}
L = ["# Hot standby point and range selects while the primary inserts: write_back = on dex index vs btree\n",
     f"Command: `{cmd}`\n", f"Machine: {machine}.\n",
     "Standby: pgbench 1 client `SELECT v FROM kv WHERE k = :k` (or `SELECT sum(v) ... k BETWEEN :k AND :k + 20`) over the 200000 old keys through the index under test; primary: pgbench 1 client "
     "single-row INSERTs of keys above them into the same table (both indexes get every row). Rounds alternate the order; the standby's index "
     "scan equals its seqscan afterwards.\n",
     "| standby index | standby tps (median) | standby latency ms (median) | primary insert tps (median) | standby scans that waited for a write-back, per select (median) |",
     "|---|---|---|---|---|"]
for t, name in (("dex", "dex (write_back = on), k = :k"), ("bt", "btree, k = :k"),
                ("dexr", "dex (write_back = on), k BETWEEN :k AND :k + 20"), ("btr", "btree, k BETWEEN :k AND :k + 20"),
                ("dexh", "dex (write_back = on), 10M-key range where the primary inserts"),
                ("bth", "btree, 10M-key range where the primary inserts")):
    if t in med:
        L.append(f"| {name} | {med[t][0]:.0f} | {med[t][1]:.3f} | {med[t][2]:.0f} | {med[t][3]:.4f} |")
for d, b, what in (("dex", "bt", "point selects"), ("dexr", "btr", "range selects"),
                   ("dexh", "bth", "range selects where the primary inserts")):
    if d in med and b in med:
        L.append(f"\nstandby tps dex / btree, {what}: {med[d][0] / med[b][0]:.2f}x")
L.append("")
L += ["", "Every round (index round standby_tps standby_latency_ms primary_insert_tps waits_per_select):", "", "```"] + lines + ["```", ""]
open(out, "w").write("\n".join(L)); print("\n".join(L))
PY
