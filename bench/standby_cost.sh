#!/usr/bin/env bash
# What a hot standby costs the primary (src/README.md "Hot standbys"):
#   - WAL bytes per single-row insert, dex vs btree (dex logs the remote nodes
#     each write changes, for the standbys' caches; btree logs its page change);
#   - single-row insert TPS with no standby vs with a streaming hot standby
#     (pg_basebackup -R) attached and reading, dex and btree side by side;
#     rounds alternate (standby stopped / running), medians reported.
#   bash bench/standby_cost.sh [ROWS] [SECONDS] [ROUNDS] [CLIENTS]
# Writes bench/results/<date>-<host>-standby-cost.md.
set -euo pipefail
if [ -z "${DEX_INSTALL_LOCKED:-}" ]; then  # installs into the system PostgreSQL: one run at a time
    export DEX_INSTALL_LOCKED=1
    exec flock /tmp/dex-pg-install.lock bash "$0" "$@"
fi
source "$(dirname "$0")/../scripts/lib.sh"
ROWS=${1:-1000000}; SECS=${2:-10}; ROUNDS=${3:-3}; CLIENTS=${4:-2}
default_work_dir /tmp/dex-bench-standby
install_deps
build_install
mport=$(free_port); pport=$(free_port); sport=$(free_port)
trap 'stop_cluster standby; stop_cluster bench; stop_memnode bench-mem' EXIT
start_memnode bench-mem "$mport" 2GB --threads 2
start_cluster bench "$pport" "tcp://127.0.0.1:$mport" "dex.cache_size = '256MB'" "autovacuum = off" \
    "wal_level = replica" "max_wal_senders = 4" "wal_keep_size = '1GB'"
P() { dpsql "$pport" -d postgres -At "$@"; }
S() { dpsql "$sport" -d postgres -At "$@"; }
P -c "CREATE EXTENSION dex"
for t in dex btree; do
    P -c "CREATE TABLE kv_$t (k bigint, v bigint)"
    P -c "INSERT INTO kv_$t SELECT g, g FROM generate_series(1, $ROWS) g"
done
P -c "CREATE INDEX ON kv_dex USING dex (k)"
P -c "CREATE INDEX ON kv_btree (k)"
P -c "VACUUM ANALYZE" -c "CHECKPOINT" >/dev/null
for t in dex btree; do
    printf '\\set k random(%s, %s)\nINSERT INTO kv_%s VALUES (:k, :client_id);\n' "$((ROWS + 1))" "$((ROWS * 1000))" "$t" >"$DEX_WORK/ins_$t.sql"
    printf '\\set k random(1, %s)\nSELECT v FROM kv_%s WHERE k = :k;\n' "$ROWS" "$t" >"$DEX_WORK/sel_$t.sql"
done
pgb() { "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$1" -U postgres -c "$CLIENTS" -j "$CLIENTS" "${@:2}" postgres; }

# WAL bytes per insert (one client, 20000 inserts each; a checkpoint first so
# that full-page images do not favour either)
declare -A walb
for t in dex btree; do
    P -c "CHECKPOINT" >/dev/null
    l0=$(P -c "select pg_current_wal_insert_lsn()")
    "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$pport" -U postgres -c 1 -t 20000 -f "$DEX_WORK/ins_$t.sql" postgres >/dev/null
    l1=$(P -c "select pg_current_wal_insert_lsn()")
    walb[$t]=$(P -c "select round(pg_wal_lsn_diff('$l1', '$l0') / 20000.0, 1)")
    echo "WAL bytes per insert, $t: ${walb[$t]}"
done

# the standby
rm -rf "$DEX_WORK/standby"
as_user "$PG_BIN/pg_basebackup" -h "$DEX_WORK" -p "$pport" -U postgres -D "$DEX_WORK/standby" -R -X stream -c fast >/dev/null
echo "port = $sport" | as_user tee -a "$DEX_WORK/standby/postgresql.conf" >/dev/null
raw="$DEX_WORK/raw.txt"; : >"$raw"
run_round() {  # run_round MODE ROUND
    local mode=$1 r=$2 tps
    if [ "$mode" = standby ]; then
        # (already running when the previous round was a standby round too)
        as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/standby" status >/dev/null 2>&1 ||
            as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/standby" -l "$DEX_WORK/standby.log" -w start >/dev/null
        # reading on the standby meanwhile (its cache, its lease)
        pgb "$sport" -T $((SECS * 2 + 4)) -f "$DEX_WORK/sel_dex.sql" >/dev/null 2>&1 &
        reader=$!
        sleep 2
    else
        stop_cluster standby
        sleep 6   # its registry slot expires: the primary stops waiting for it
    fi
    for t in dex btree; do
        tps=$(pgb "$pport" -T "$SECS" -f "$DEX_WORK/ins_$t.sql" | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
        echo "$mode $r $t $tps" >>"$raw"
        echo "round $r, $mode: $t $tps tps"
    done
    if [ "$mode" = standby ]; then wait "$reader" || true; fi
}
for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then run_round none "$r"; run_round standby "$r"; else run_round standby "$r"; run_round none "$r"; fi
done
lag=$(S -c "select pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')" 2>/dev/null || true)

out="$DEX_ROOT/bench/results/$(date +%Y-%m-%d)-$(hostname)-standby-cost.md"
python3 - "$raw" "$out" "bash bench/standby_cost.sh $ROWS $SECS $ROUNDS $CLIENTS" \
    "$(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -r), PostgreSQL $(pg_config --version | awk '{print $2}'), tcp loopback memory node (--threads 2), fsync = off, $CLIENTS clients, $ROWS rows, dex.cache_size 256MB" \
    "${walb[dex]}" "${walb[btree]}" <<'PY'
import sys, statistics as st, collections
raw, out, cmd, machine, wd, wb = sys.argv[1:]
d = collections.defaultdict(list)
for line in open(raw):
    m, r, t, tps = line.split()
    d[(m, t)].append(float(tps))
L = ["# What a hot standby costs the primary\n", f"Command: `{cmd}`\n", f"Machine: {machine}.\n",
     f"WAL bytes per single-row insert (20,000 inserts, one client, after a checkpoint): dex {wd}, btree {wb}.\n",
     "Single-row INSERT throughput (pgbench, fresh keys), rounds alternating no standby / a streaming hot standby "
     "attached and running point selects through dex meanwhile:\n",
     "| index | no standby (tps, per round) | median | with a standby (tps, per round) | median | ratio |", "|---|---|---|---|---|---|"]
for t in ("dex", "btree"):
    a, b = d[("none", t)], d[("standby", t)]
    L.append(f"| {t} | {', '.join(f'{x:.0f}' for x in a)} | {st.median(a):.0f} | {', '.join(f'{x:.0f}' for x in b)} | {st.median(b):.0f} | {st.median(b)/st.median(a):.3f} |")
L.append("")
L.append(f"dex/btree insert ratio: no standby {st.median(d[('none','dex')])/st.median(d[('none','btree')]):.3f}, "
         f"with a standby {st.median(d[('standby','dex')])/st.median(d[('standby','btree')]):.3f}")
open(out, "w").write("\n".join(L) + "\n\nRaw (`mode round index tps`):\n\n```\n" + open(raw).read() + "```\n")
print("\n".join(L))
PY
echo "wrote $out"
