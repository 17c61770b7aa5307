#!/usr/bin/env bash
# How long the first use of a write_back = on index waits after a crash: it
# applies the entry changes the crash took from dirty cached leaves
# (src/README.md "Write-back mode", redo after a crash; extension/
# dexwbreplay.c). Per round: CHANGES single-row INSERTs of random new keys
# (pgbench, 2 clients) after a checkpoint, then an immediate shutdown before
# any write-back (dex.writeback_interval = 10min); after the restart and
# the new life's claim of the writer role (a 5 s lease, not timed), the
# time of the first index scan (which replays) and the changes it replayed;
# the index must equal the seqscan. Two checkouts side by side, alternating.
#
#   bash bench/wb_crash_replay.sh CHECKOUT_A CHECKOUT_B [ROWS] [CHANGES] [ROUNDS]
#
# Writes bench/results/<date>-<host>-wb-crash-replay.md (in CHECKOUT_B).
set -euo pipefail
A=$(cd "$1" && pwd); B=$(cd "$2" && pwd); ROWS=${3:-200000}; CHANGES=${4:-20000}; ROUNDS=${5:-3}
source "$(dirname "$0")/../scripts/lib.sh"
raw=$(mktemp); trap 'rm -f "$raw"' EXIT
one() {  # one CHECKOUT ROUND: prints "label round ms replayed"
    local co=$1 r=$2 label; label=$([ "$co" = "$A" ] && echo A || echo B)
    (
        start_replicated_bench crrp-$label "$co" >/dev/null
        P() { dpsql "$pport" -d postgres -At "$@"; }
        P -q -c "ALTER SYSTEM SET dex.writeback_interval = '10min'" -c "SELECT pg_reload_conf()" >/dev/null
        P -q -c "CREATE EXTENSION dex" -c "CREATE TABLE kv (k bigint, v bigint)" \
           -c "INSERT INTO kv SELECT g * 100, g FROM generate_series(1, $ROWS) g" \
           -c "CREATE INDEX kv_dex ON kv USING dex (k) WITH (write_back = on)" -c "VACUUM ANALYZE kv" \
           -c "SET enable_seqscan = off" -c "SET enable_bitmapscan = off" -c "SELECT count(*) FROM kv WHERE k > 0" \
           -c "CHECKPOINT" >/dev/null
        printf '\\set k random(1, %d)\nINSERT INTO kv VALUES (:k, 1);\n' "$((ROWS * 100))" >"$DEX_WORK/ins.sql"
        chmod a+r "$DEX_WORK/ins.sql"
        "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$pport" -U postgres -c 2 -j 2 -t $((CHANGES / 2)) -f "$DEX_WORK/ins.sql" postgres \
            >/dev/null || die "pgbench"
        as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pw" -m immediate stop >/dev/null
        local claims; claims=$(grep -c "is now the writer" "$DEX_WORK/pw-server.log" || true)
        as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pw" -l "$DEX_WORK/pw-server.log" -w start >/dev/null || die "restart"
        # not timed: the new life takes the writer role once the old one's
        # beat has stopped for a lease and a margin (5 s, src/README.md "Hot standbys")
        for _ in $(seq 1 200); do
            [ "$(grep -c "is now the writer" "$DEX_WORK/pw-server.log" || true)" -gt "$claims" ] && break
            sleep 0.1
        done
        t0=$(date +%s%N)
        P -c "SET enable_seqscan = off; SET enable_bitmapscan = off; SELECT count(*) FROM kv WHERE k > 0" >/dev/null
        t1=$(date +%s%N)
        a=$(P -c "SET enable_seqscan = off; SET enable_bitmapscan = off; SELECT count(*), sum(k) FROM kv WHERE k > 0" \
              -c "SET enable_indexscan = off; SET enable_seqscan = on; SELECT count(*), sum(k) FROM kv WHERE k > 0" | grep '|')
        [ "$(sed -n 1p <<<"$a")" = "$(sed -n 2p <<<"$a")" ] || die "after the crash the index and the seqscan differ: $a"
        n=$(grep -o "replayed [0-9]* entry changes" "$DEX_WORK/pw-server.log" | tail -1 | awk '{print $2}')
        echo "$label $r $(((t1 - t0) / 1000000)) ${n:-0}"
    )
}
for r in $(seq 1 "$ROUNDS"); do
    order="$A $B"; [ $((r % 2)) = 0 ] && order="$B $A"
    for co in $order; do one "$co" "$r" | tee -a "$raw"; done
done
out="$B/bench/results/$(date +%Y-%m-%d)-$(hostname)-wb-crash-replay.md"
python3 - "$raw" "$out" "bash bench/wb_crash_replay.sh $A $B $ROWS $CHANGES $ROUNDS" \
    "$(nproc --all) cores, $(uname -r), PostgreSQL $(pg_config --version | awk '{print $2}'), tcp loopback memory node, A = $(git -C "$A" rev-parse --short HEAD), B = $(git -C "$B" rev-parse --short HEAD)" <<'PY'
import sys, statistics as st, collections
raw, out, cmd, machine = sys.argv[1:]
d = collections.defaultdict(list); lines = []
for line in open(raw):
    l, r, ms, n = line.split(); lines.append(line.rstrip()); d[l].append((float(ms), float(n)))
L = ["# The first query after a crash of a write_back = on index: replay of the lost entry changes\n",
     f"Command: `{cmd}`\n", f"Machine: {machine}.\n",
     "Per round: single-row INSERTs of random keys (pgbench, 2 clients) after a checkpoint, an immediate shutdown before any write-back, "
     "a restart, the new life's claim of the writer role (not timed); the first index scan replays what the crash took from the dirty leaves. Rounds alternate A and B; the index equals the seqscan after each.\n",
     "| checkout | first query ms (median) | entry changes replayed (median) | us per change |", "|---|---|---|---|"]
for k in ("A", "B"):
    if d[k]:
        ms = st.median(x[0] for x in d[k]); n = st.median(x[1] for x in d[k])
        L.append(f"| {k} | {ms:.0f} | {n:.0f} | {1000 * ms / max(n, 1):.0f} |")
if d["A"] and d["B"]:
    L.append(f"\nB / A first-query time: {st.median(x[0] for x in d['B']) / st.median(x[0] for x in d['A']):.2f}")
L += ["", "Every round (checkout round ms replayed):", "", "```"] + lines + ["```", ""]
open(out, "w").write("\n".join(L)); print("\n".join(L))
PY
