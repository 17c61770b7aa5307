#!/usr/bin/env bash
# What a checkpoint costs when it cannot wait for the write-back of a
# write_back = on index (src/README.md "Write-back mode", leaf images): a hot
# standby with its replay paused holds the dirty leaves back, so the fence
# gives up after dex.checkpoint_writeback_timeout (1s here) and logs each
# dirty leaf whole. Measured per round, next to the same checkpoint with the
# standby replaying (the fence writes the leaves back): the dirty leaves, the
# WAL the CHECKPOINT command added, and how long it took (for the images:
# minus the 1s timeout). At the end the primary is stopped (immediate) right
# after an image checkpoint: the first query's time after the restart is the
# replay of the images, and the index must equal its seqscan.
#
#   bash bench/ckpt_images.sh [CHECKOUT] [ROWS] [ROUNDS]
#
# Writes bench/results/<date>-<host>-ckpt-images.md.
set -euo pipefail
CO=$(cd "${1:-$(dirname "$0")/..}" && pwd); ROWS=${2:-400000}; ROUNDS=${3:-3}
source "$(dirname "$0")/../scripts/lib.sh"
start_replicated_bench ckim "$CO"
P() { dpsql "$pport" -d postgres -At "$@"; }
S() { dpsql "$sport" -d postgres -At "$@"; }
# (dex.standby_wait_timeout: the paused standby must hold the leaves back, not be detached)
P -q -c "ALTER SYSTEM SET dex.checkpoint_writeback_timeout = '1s'" -c "ALTER SYSTEM SET dex.writeback_interval = '10min'" \
   -c "ALTER SYSTEM SET dex.standby_wait_timeout = '1h'" \
   -c "SELECT pg_reload_conf()" >/dev/null
P -q -c "CREATE EXTENSION dex" -c "CREATE TABLE kv (k bigint, v bigint)" \
   -c "INSERT INTO kv SELECT g * 1000, g FROM generate_series(1, $ROWS) g" \
   -c "CREATE INDEX kv_dex ON kv USING dex (k) WITH (write_back = on)" -c "VACUUM ANALYZE kv"
start_standby sb "$pport" "$sport" || die "the standby did not start"
warm() { P -c "SET enable_seqscan = off; SET enable_bitmapscan = off; SELECT count(*) FROM kv WHERE k > 0" >/dev/null; }
caught_up() {
    local lsn; lsn=$(P -c "SELECT pg_current_wal_lsn()")
    for _ in $(seq 1 600); do
        [ "$(S -c "SELECT pg_last_wal_replay_lsn() >= '$lsn'")" = t ] && return 0
        sleep 0.1
    done
    die "the standby did not catch up"
}
# dirty N (1..998): one new key next to every 100th old one, a different
# 100th each time (about every other leaf; no leaf fills up: a split would
# journal its entries, which waits for the paused standby)
dirty() { P -c "INSERT INTO kv SELECT g * 1000 + $1, 0 FROM generate_series(1 + $1 * 37 % 100, $ROWS, 100) g" >/dev/null; }
# ckpt: prints "dirty_leaves wal_bytes ms"
ckpt() {
    local d l0 l1 t0 t1
    d=$(P -c "SELECT coalesce(sum(dirty), 0) FROM dex_cache_stats()")
    l0=$(P -c "SELECT pg_current_wal_insert_lsn()"); t0=$(date +%s%N)
    P -c "CHECKPOINT" >/dev/null
    t1=$(date +%s%N); l1=$(P -c "SELECT pg_current_wal_insert_lsn()")
    echo "$d $(P -c "SELECT pg_wal_lsn_diff('$l1', '$l0')") $(((t1 - t0) / 1000000))"
}
raw="$DEX_WORK/raw.txt"; : >"$raw"
warm; caught_up
for r in $(seq 1 "$ROUNDS"); do
    for mode in images writeback; do
        [ $((r % 2)) = 0 ] && mode=$([ $mode = images ] && echo writeback || echo images)
        P -c "SELECT dex_flush()" >/dev/null; caught_up
        [ $mode = images ] && S -c "SELECT pg_wal_replay_pause()" >/dev/null
        dirty "$((r * 2 + ($([ $mode = images ] && echo 1 || echo 0))))"
        echo "$mode $r $(ckpt)" | tee -a "$raw"
        [ $mode = images ] && S -c "SELECT pg_wal_replay_resume()" >/dev/null
        caught_up
    done
done
# the crash right after an image checkpoint, and the replay at first use
P -c "SELECT dex_flush()" >/dev/null; caught_up
S -c "SELECT pg_wal_replay_pause()" >/dev/null
dirty 998
echo "crash $(ckpt)" | tee -a "$raw"
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pw" -m immediate stop >/dev/null
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pw" -l "$DEX_WORK/pw-server.log" -w start >/dev/null || die "restart"
t0=$(date +%s%N); warm; t1=$(date +%s%N)
replayed=$(grep -o "replayed [0-9]* entry changes" "$DEX_WORK/pw-server.log" | tail -1)
a=$(P -c "SET enable_seqscan = off; SET enable_bitmapscan = off; SELECT count(*), sum(k) FROM kv WHERE k > 0" \
      -c "SET enable_indexscan = off; SET enable_seqscan = on; SELECT count(*), sum(k) FROM kv WHERE k > 0" | grep '|')
[ "$(sed -n 1p <<<"$a")" = "$(sed -n 2p <<<"$a")" ] || die "after the crash the index and the seqscan differ: $a"
echo "first_query $(((t1 - t0) / 1000000)) $replayed" | tee -a "$raw"
S -c "SELECT pg_wal_replay_resume()" >/dev/null
out="$CO/bench/results/$(date +%Y-%m-%d)-$(hostname)-ckpt-images.md"
python3 - "$raw" "$out" "bash bench/ckpt_images.sh $CO $ROWS $ROUNDS" \
    "$(nproc --all) cores, $(uname -r), PostgreSQL $(pg_config --version | awk '{print $2}'), tcp loopback memory node, checkout $(git -C "$CO" rev-parse --short HEAD)" <<'PY'
import sys, statistics as st, collections
raw, out, cmd, machine = sys.argv[1:]
d = collections.defaultdict(list); lines = []; extra = []
for line in open(raw):
    f = line.split(); lines.append(line.rstrip())
    if f[0] in ("images", "writeback"):
        d[f[0]].append((float(f[2]), float(f[3]), float(f[4])))
    else:
        extra.append(line.rstrip())
L = ["# A checkpoint that cannot wait for the write-back: dirty leaves logged whole vs written back\n",
     f"Command: `{cmd}`\n", f"Machine: {machine}.\n",
     "A write_back = on index; each round dirties about every other leaf (one insert next to every 100th key), then CHECKPOINT: "
     "`images` with the standby's replay paused (the fence gives up after dex.checkpoint_writeback_timeout = 1s and logs the dirty leaves whole), "
     "`writeback` with the standby replaying (the fence writes them back). Rounds alternate the order.\n",
     "| checkpoint | dirty leaves (median) | WAL bytes added (median) | WAL bytes per dirty leaf | CHECKPOINT ms (median) |", "|---|---|---|---|---|"]
for m in ("images", "writeback"):
    if d[m]:
        dl = st.median(x[0] for x in d[m]); w = st.median(x[1] for x in d[m]); ms = st.median(x[2] for x in d[m])
        L.append(f"| {m} | {dl:.0f} | {w:.0f} | {w / max(dl, 1):.0f} | {ms:.0f}{' (1000 of it the timeout)' if m == 'images' else ''} |")
L += ["", "After a crash right after an image checkpoint (`crash dirty wal ms`), the first index scan's time in ms including the replay (`first_query`):", "", "```"] + extra + ["```", ""]
L += ["Every round (mode round dirty_leaves wal_bytes ms):", "", "```"] + lines + ["```", ""]
open(out, "w").write("\n".join(L)); print("\n".join(L))
PY
