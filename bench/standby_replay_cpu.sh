#!/usr/bin/env bash
# What a write_back = on dex index costs a hot standby's replay: the startup
# process's CPU time per replayed single-row INSERT (its entry-change record,
# the places a standby scan's wait reads, the collection a promotion replays:
# extension/dexwbcollect.c), next to the same INSERTs into a table with a
# btree index. The primary runs pgbench (2 clients, TXNS transactions per
# round); the standby replays them; /proc gives the startup process's
# user + system time. Rounds alternate which table goes first; medians.
#
#   bash bench/standby_replay_cpu.sh [CHECKOUT] [TXNS] [ROUNDS]
#
# CHECKOUT (default: this one, built) is installed into a private copy of the
# system PostgreSQL tree (scripts/lib.sh private_pg_install).
# Writes bench/results/<date>-<host>-standby-replay-cpu.md.
set -euo pipefail
CO=$(cd "${1:-$(dirname "$0")/..}" && pwd); TXNS=${2:-30000}; ROUNDS=${3:-3}
source "$(dirname "$0")/../scripts/lib.sh"
start_replicated_bench replaycpu "$CO"
P() { dpsql "$pport" -d postgres -At "$@"; }
S() { dpsql "$sport" -d postgres -At "$@"; }
P -q -c "CREATE EXTENSION dex" \
   -c "CREATE TABLE kd (k bigint, v bigint)" -c "INSERT INTO kd SELECT g, g FROM generate_series(1, 200000) g" \
   -c "CREATE INDEX kd_k ON kd USING dex (k) WITH (write_back = on)" \
   -c "CREATE TABLE kb (k bigint, v bigint)" -c "INSERT INTO kb SELECT g, g FROM generate_series(1, 200000) g" \
   -c "CREATE INDEX kb_k ON kb (k)"
start_standby sb "$pport" "$sport" || die "the standby did not start"
for t in d b; do
    printf '\\set k random(200001, 2000000000)\nINSERT INTO k%s VALUES (:k, 1);\n' "$t" >"$DEX_WORK/ins_$t.sql"
done
chmod a+r "$DEX_WORK"/*.sql
caught_up() {  # the standby replayed everything the primary wrote so far
    local lsn; lsn=$(P -c "SELECT pg_current_wal_lsn()")
    for _ in $(seq 1 600); do
        [ "$(S -c "SELECT pg_last_wal_replay_lsn() >= '$lsn'")" = t ] && return 0
        sleep 0.1
    done
    die "the standby did not catch up"
}
caught_up
startup=$(head -1 "$DEX_WORK/sb/postmaster.pid")
startup=$(pgrep -P "$startup" -f "startup" | head -1)
[ -n "$startup" ] || die "no startup process on the standby"
tck=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$startup/stat"; }
raw="$DEX_WORK/raw.txt"; : >"$raw"
for r in $(seq 1 "$ROUNDS"); do
    order="d b"; [ $((r % 2)) = 0 ] && order="b d"
    for t in $order; do
        a=$(cpu)
        res=$("$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$pport" -U postgres -c 2 -j 2 -t "$((TXNS / 2))" \
              -f "$DEX_WORK/ins_$t.sql" postgres)
        caught_up
        b=$(cpu)
        tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$res")
        us=$(awk -v a="$a" -v b="$b" -v tk="$tck" -v n="$TXNS" 'BEGIN { printf "%.2f", (b - a) * 1e6 / tk / n }')
        echo "$t $r $us $tps" | tee -a "$raw"
    done
done
# answers: the standby's dex index scan = its seqscan
a=$(S -c "SET enable_seqscan = off" -c "SET enable_bitmapscan = off" -c "SELECT count(*), sum(k) FROM kd WHERE k > 0")
b=$(S -c "SET enable_indexscan = off" -c "SET enable_bitmapscan = off" -c "SELECT count(*), sum(k) FROM kd WHERE k > 0")
[ "$a" = "$b" ] || die "standby index scan $a, seqscan $b"
out="$CO/bench/results/$(date +%Y-%m-%d)-$(hostname)-standby-replay-cpu.md"
python3 - "$raw" "$out" "bash bench/standby_replay_cpu.sh $CO $TXNS $ROUNDS" \
    "$(nproc --all) cores, $(uname -r), PostgreSQL $(pg_config --version | awk '{print $2}'), tcp loopback memory node, checkout $(git -C "$CO" rev-parse --short HEAD)" <<'PY'
import sys, statistics as st, collections
raw, out, cmd, machine = sys.argv[1:]
d = collections.defaultdict(list); lines = []
for line in open(raw):
    t, r, us, tps = line.split(); lines.append(line.rstrip())
    d[t].append((float(us), float(tps)))
med = {t: [st.median(x[i] for x in v) for i in range(2)] for t, v in d.items()}
L = ["# Hot standby replay: startup-process CPU per replayed single-row INSERT, write_back = on dex index vs btree\n",
     f"Command: `{cmd}`\n", f"Machine: {machine}.\n",
     "Primary: pgbench 2 clients, single-row INSERTs of random new keys into a table of 200000 rows with one index; "
     "the standby replays them (pg_basebackup -R streaming). CPU: user + system time of the standby's startup process "
     "(/proc), from before the round to its catching up, per transaction. The standby's dex index scan equals its seqscan afterwards.\n",
     "| index | standby startup CPU per insert, us (median) | primary tps (median) |", "|---|---|---|"]
for t, name in (("d", "dex (write_back = on)"), ("b", "btree")):
    L.append(f"| {name} | {med[t][0]:.2f} | {med[t][1]:.0f} |")
L.append(f"\ndex / btree, startup CPU per insert: {med['d'][0] / med['b'][0]:.2f}x\n")
L += ["Every round (index round us_per_insert primary_tps):", "", "```"] + lines + ["```", ""]
open(out, "w").write("\n".join(L)); print("\n".join(L))
PY
