#!/usr/bin/env bash
# The primary's single-row INSERTs (pgbench, 2 clients, a write-through dex
# index) while its hot standby's replay is paused: per-second throughput
# before the pause, while the primary still waits for the standby, and after
# the standby was detached (dex.standby_wait_timeout, src/README.md "Hot
# standbys", detaching); the same through a btree index in the same run
# (PostgreSQL never waits for a hot standby's replay). Also: failed
# transactions (an insert that outwaits its journal slot fails).
#
#   bash bench/standby_pause.sh [CHECKOUT] [SECONDS] [TIMEOUT]
#
# CHECKOUT (default: this one, built) is installed into a private copy of the
# system PostgreSQL tree; SECONDS (default 40) per pgbench run, the replay
# paused from second 5; TIMEOUT: the primary's dex.standby_wait_timeout
# (default 10s). Writes bench/results/<date>-<host>-standby-pause.md.
set -euo pipefail
CO=$(cd "${1:-$(dirname "$0")/..}" && pwd); SECS=${2:-40}; TMO=${3:-10s}
source "$(dirname "$0")/../scripts/lib.sh"
start_replicated_bench sbpause "$CO"
P() { dpsql "$pport" -d postgres -At "$@"; }
S() { dpsql "$sport" -d postgres -At "$@"; }
PB() { "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$pport" -U postgres "$@" postgres; }
P -q -c "ALTER SYSTEM SET dex.standby_wait_timeout = '$TMO'" -c "SELECT pg_reload_conf()"
P -q -c "CREATE EXTENSION dex"
for t in dex btree; do
    P -q -c "CREATE TABLE kv_$t (k bigint, v bigint)" \
        -c "INSERT INTO kv_$t SELECT 2 * g, g FROM generate_series(1, 200000) g" \
        -c "CREATE INDEX kv_${t}_k ON kv_$t USING $t (k)" -c "VACUUM ANALYZE kv_$t"
    printf '\\set k random(400002, 400000000)\nINSERT INTO kv_%s VALUES (:k, :client_id);\n' "$t" >"$DEX_WORK/ins_$t.sql"
done
chmod a+r "$DEX_WORK"/*.sql
start_standby sb "$pport" "$sport" || die "the standby did not start"
raw="$DEX_WORK/raw.txt"; : >"$raw"
for t in btree dex; do
    for _ in $(seq 1 300); do [ "$(S -c "SELECT pg_last_wal_replay_lsn() >= '$(P -c "SELECT pg_current_wal_lsn()")'")" = t ] && break; sleep 0.1; done
    S -c "SELECT pg_wal_replay_resume()" >/dev/null
    ( sleep 5; S -c "SELECT pg_wal_replay_pause()" >/dev/null ) & pauser=$!
    out=$(PB -c 2 -j 2 -T "$SECS" -P 1 -f "$DEX_WORK/ins_$t.sql" 2>&1 || true)
    wait "$pauser"
    sed -n 's/^progress: \([0-9.]*\) s, \([0-9.]*\) tps.*/\1 \2/p' <<<"$out" | sed "s/^/$t /" >>"$raw"
    failed=$(grep -c "ERROR" <<<"$out" || true)
    echo "$t failed $failed $(grep -m1 ERROR <<<"$out" || true)" >>"$raw"
done
S -c "SELECT pg_wal_replay_resume()" >/dev/null
detached=$(grep -c "detached, the primary no longer waits" "$DEX_WORK/pw-server.log" || true)
out="$CO/bench/results/$(date +%Y-%m-%d)-$(hostname)-standby-pause.md"
python3 - "$raw" "$out" "bash bench/standby_pause.sh $CO $SECS $TMO" "$detached" \
    "$(nproc --all) cores, $(uname -r), PostgreSQL $(pg_config --version | awk '{print $2}'), tcp loopback memnode, checkout $(git -C "$CO" rev-parse --short HEAD)" <<'PY'
import sys, statistics as st, collections
raw, out, cmd, detached, machine = sys.argv[1:]
tps = collections.defaultdict(dict); failed = {}; lines = []
for line in open(raw):
    lines.append(line.rstrip()); f = line.split()
    if f[1] == 'failed': failed[f[0]] = line.split(' ', 3)[2:]
    else: tps[f[0]][int(float(f[1]))] = float(f[2])
def med(t, a, b):
    v = [x for s, x in tps[t].items() if a <= s <= b]
    return st.median(v) if v else 0.0
L = ["# The primary's inserts while a hot standby's replay is paused\n", f"Command: `{cmd}`\n", f"Machine: {machine}\n",
     "pgbench single-row INSERTs, 2 clients, per-second progress; the standby's replay is paused at second 5 and stays paused.\n",
     "| index | tps s1-4 (median) | seconds with < 10% of that, from s6 | tps over the last 10 s (median) | failed transactions |",
     "|---|---|---|---|---|"]
for t in ('btree', 'dex'):
    base = med(t, 1, 4); last = max(tps[t]) if tps[t] else 0
    stalled = sum(1 for s, x in tps[t].items() if s >= 6 and x < 0.1 * base)
    L.append(f"| {t} | {base:.0f} | {stalled} | {med(t, last - 9, last):.0f} | {failed.get(t, ['?'])[0]} |")
L += ["", f"Detaches logged by the primary: {detached}.", "", "Every second (index second tps; `failed` lines: count and first error):", "", "```", *lines, "```", ""]
open(out, "w").write("\n".join(L)); print("\n".join(L[:8])); print("wrote", out)
PY
