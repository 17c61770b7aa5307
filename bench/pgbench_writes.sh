#!/usr/bin/env bash
# Issue 17's write bar, dex vs btree in one cluster: single-row INSERTs of
# fresh keys and key-changing UPDATEs (never HOT), at each client
# count, pgbench rounds alternating which index goes first; medians, dex/btree
# ratios, and dex's remote round trips per statement (dex_stats()). Fully
# cached (dex.cache_size > index), TCP loopback memory node, fsync off.
#
#   bash bench/pgbench_writes.sh [CHECKOUT] [ROWS] [SECONDS] [ROUNDS] [CLIENTS...]
#
# CHECKOUT (default: this one, built) is installed into a private copy of the
# system PostgreSQL tree (scripts/lib.sh private_pg_install): no install lock.
# DEX_WITH="write_back = on" builds the dex index with those options.
# BENCH_FSYNC=on runs the cluster with fsync on (a durable commit waits for
# its WAL on disk, as on a production server); default off.
# BENCH_CONF adds one postgresql.conf line (e.g. "dex.writeback_interval = '10s'").
#
# The UPDATE flips the low bit of a row's key (rows hold even keys 2g at
# first): `SET k = k # 1 WHERE k BETWEEN 2r AND 2r + 1` finds exactly one row
# every time, as the evaluation's update does. (Until 2026-11-27 it was
# `SET k = -k WHERE k = r`, which found nothing once row r had been updated:
# later rounds measured more and more empty UPDATEs, whose scans met only the
# row's dead old entry.)
# Writes bench/results/<date>-<host>-pgbench-writes[-<options>].md.
set -euo pipefail
CO=$(cd "${1:-$(dirname "$0")/..}" && pwd); ROWS=${2:-300000}; SECS=${3:-6}; ROUNDS=${4:-3}
shift $(( $# < 4 ? $# : 4 )); CLIENTS=${*:-2 8}
source "$(dirname "$0")/../scripts/lib.sh"
DEX_ROOT=$CO
DEX_WORK=/tmp/dex-writes-$(basename "$CO"); export DEX_WORK
rm -rf "$DEX_WORK"
private_pg_install "$CO" "$DEX_WORK-pgroot"
prepare_workdir
mport=$(free_port); pport=$(free_port)
trap 'stop_cluster pw; stop_memnode pw-mem' EXIT
start_memnode pw-mem "$mport" 2GB --threads 2
FSYNC=${BENCH_FSYNC:-off}
start_cluster pw "$pport" "tcp://127.0.0.1:$mport" "dex.cache_size = '256MB'" "autovacuum = off" \
    "max_connections = 40" "fsync = $FSYNC" ${BENCH_CONF:+"$BENCH_CONF"}
P() { dpsql "$pport" -d postgres -At "$@"; }
PB() { "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$pport" -U postgres "$@" postgres; }
P -q -c "CREATE EXTENSION dex"
for t in dex btree; do
    P -q -c "CREATE TABLE kv_$t (k bigint, v bigint)" \
        -c "INSERT INTO kv_$t SELECT 2 * g, g FROM generate_series(1, $ROWS) g" \
        -c "CREATE INDEX kv_${t}_k ON kv_$t USING $t (k) $([ "$t" = dex ] && [ -n "${DEX_WITH:-}" ] && echo "WITH (${DEX_WITH})")" -c "VACUUM ANALYZE kv_$t"
    printf '\\set k random(1, %s)\nSELECT v FROM kv_%s WHERE k = 2 * :k;\n' "$ROWS" "$t" >"$DEX_WORK/warm_$t.sql"
    printf '\\set k random(%s, %s)\nINSERT INTO kv_%s VALUES (:k, :client_id);\n' \
        "$((2 * ROWS + 2))" "$((ROWS * 1000))" "$t" >"$DEX_WORK/ins_$t.sql"
    printf '\\set r random(1, %s)\nUPDATE kv_%s SET k = k # 1 WHERE k BETWEEN 2 * :r AND 2 * :r + 1;\n' \
        "$ROWS" "$t" >"$DEX_WORK/upd_$t.sql"
done
chmod a+r "$DEX_WORK"/*.sql
PGOPTIONS="-c dex.leaf_admission=1" PB -c 2 -j 2 -T 8 -f "$DEX_WORK/warm_dex.sql" >/dev/null
PB -c 2 -j 2 -T 4 -f "$DEX_WORK/warm_btree.sql" >/dev/null
raw="$DEX_WORK/raw.txt"; : >"$raw"
for r in $(seq 1 "$ROUNDS"); do
    for c in $CLIENTS; do
        for w in ins upd; do
            order="dex btree"; [ $((r % 2)) = 0 ] && order="btree dex"
            for t in $order; do
                P -c "SELECT dex_stats_reset()" >/dev/null
                res=$(PB -c "$c" -j "$c" -T "$SECS" -f "$DEX_WORK/${w}_$t.sql")
                tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$res")
                n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$res")
                [ -n "$tps" ] || die "pgbench failed: $res"
                # round trips, memory-node splits, misses, write-backs per statement
                rt=$(P -F ' ' -c "SELECT round(round_trips::numeric / greatest($n, 1), 3),
                    round(memnode_splits::numeric / greatest($n, 1), 4), round(cache_misses::numeric / greatest($n, 1), 4),
                    round(write_backs::numeric / greatest($n, 1), 4) FROM dex_stats()")
                echo "$w $c $t $r $tps $rt" | tee -a "$raw"
            done
        done
    done
done
check_kv_answers "$pport"  # every answer: index scan = seqscan, dex_check
suffix=$(tr -c 'a-z0-9\n' '-' <<<"${DEX_WITH:-}" | tr -s '-' | sed 's/^-//; s/-$//')
[ "$FSYNC" = on ] && suffix="${suffix:+$suffix-}fsync-on"
[ -n "${BENCH_CONF:-}" ] && suffix="${suffix:+$suffix-}$(tr -c 'a-z0-9\n' '-' <<<"$BENCH_CONF" | tr -s '-' | sed 's/^-//; s/-$//')"
out="$CO/bench/results/$(date +%Y-%m-%d)-$(hostname)-pgbench-writes${suffix:+-$suffix}.md"
python3 - "$raw" "$out" "${DEX_WITH:+DEX_WITH=\"$DEX_WITH\" }$([ "$FSYNC" = on ] && echo 'BENCH_FSYNC=on ')${BENCH_CONF:+BENCH_CONF=\"$BENCH_CONF\" }bash bench/pgbench_writes.sh $CO $ROWS $SECS $ROUNDS $CLIENTS" \
    "dex index options: ${DEX_WITH:-none}; $(nproc --all) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -r), PostgreSQL $(pg_config --version | awk '{print $2}'), tcp loopback, memnode --threads 2, fsync = $FSYNC${BENCH_CONF:+, $BENCH_CONF}, dex.cache_size 256MB (> index), $ROWS rows, checkout $(git -C "$CO" rev-parse --short HEAD)" <<'PY'
import sys, statistics as st, collections
raw, out, cmd, machine = sys.argv[1:]
tps = collections.defaultdict(list); rts = collections.defaultdict(list); lines = []
for line in open(raw):
    w, c, t, r, v, rt = line.split()[:6]; lines.append(line.rstrip())
    tps[(w, int(c), t)].append(float(v))
    if t == 'dex': rts[(w, int(c))].append(float(rt))
L = ["# Writes through dex vs btree: single-row INSERT and key-changing UPDATE\n", f"Command: `{cmd}`\n",
     f"Machine: {machine}.\n",
     "Rounds alternate which index goes first; every answer is checked against a sequential scan and dex_check passes after the run.\n",
     "| statement | clients | dex tps (median) | btree tps (median) | dex / btree | dex / btree per round (median) | dex round trips per statement (median) |",
     "|---|---|---|---|---|---|---|"]
for (w, c) in sorted({(w, c) for (w, c, t) in tps}):
    d, b = st.median(tps[(w, c, 'dex')]), st.median(tps[(w, c, 'btree')])
    # each round's dex and btree run back to back: their ratio is paired, so
    # load that drifts over the run moves it less than the medians' ratio
    per = st.median([x / y for x, y in zip(tps[(w, c, 'dex')], tps[(w, c, 'btree')])])
    name = {'ins': 'INSERT (fresh key)', 'upd': 'UPDATE SET k = k # 1 (one row)'}[w]
    L.append(f"| {name} | {c} | {d:.0f} | {b:.0f} | {d / b:.2f}x | {per:.2f}x | {st.median(rts[(w, c)]):.3f} |")
L += ["", "Every round (statement clients index round tps, then per statement: round trips, memory-node splits,",
      "cache misses, write-backs; the dex counters count every process of the cluster, the write-back worker too):",
      "", "```"] + lines + ["```", ""]
open(out, "w").write("\n".join(L))
print("\n".join(L))
PY
