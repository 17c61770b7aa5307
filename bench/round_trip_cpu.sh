#!/usr/bin/env bash
# Issue 17: where the CPU of one single-row INSERT goes, dex vs btree, by
# process class. Counts, not wall time: for a fixed number of pgbench
# transactions it reports CPU microseconds per transaction of
#   backends  - postmaster's reaped children (cutime+cstime; every pgbench
#               backend has exited and been reaped when it is read),
#   memnode   - dex-memnode, all threads (utime, stime),
#   pgbench   - the client (getrusage of the child, via /usr/bin/time),
#   machine   - /proc/stat user/system/softirq over the whole machine (noisy
#               on a shared machine: includes everybody else; loopback TCP's
#               softirq work shows up only here),
# and context switches per transaction (memnode threads; whole machine).
# Then syscalls per insert on both sides: strace -c on one backend running N
# autocommit INSERTs from psql and (-f) on the memory node, dex minus btree.
#
#   bash bench/round_trip_cpu.sh [CHECKOUT] [ROWS] [TRANSACTIONS] [ROUNDS] [CLIENTS]
#
# CHECKOUT is installed into a private copy of the system PostgreSQL tree
# (no install lock). Prints a markdown report on stdout (tee it somewhere).
set -euo pipefail
CO=$(cd "${1:-$(dirname "$0")/..}" && pwd); ROWS=${2:-300000}; NTX=${3:-40000}; ROUNDS=${4:-3}; CLIENTS=${5:-2}
STRACE_N=${STRACE_N:-2000}
source "$(dirname "$0")/../scripts/lib.sh"
DEX_ROOT=$CO
DEX_WORK=/tmp/dex-rtcpu-$(basename "$CO"); export DEX_WORK
rm -rf "$DEX_WORK"
private_pg_install "$CO" "$DEX_WORK-pgroot"
prepare_workdir
mport=$(free_port); pport=$(free_port)
trap 'stop_cluster rc; stop_memnode rc-mem' EXIT
start_memnode rc-mem "$mport" 2GB --threads 2
mpid=$(cat "$DEX_WORK/rc-mem.pid")
start_cluster rc "$pport" "tcp://127.0.0.1:$mport" "dex.cache_size = '256MB'" "autovacuum = off" \
    "max_connections = 40"
ppid_pm=$(head -1 "$DEX_WORK/rc/postmaster.pid")
P() { dpsql "$pport" -d postgres -At "$@"; }
P -q -c "CREATE EXTENSION dex"
for t in dex btree; do
    P -q -c "CREATE TABLE kv_$t (k bigint, v bigint)" \
        -c "INSERT INTO kv_$t SELECT g, g FROM generate_series(1, $ROWS) g" \
        -c "CREATE INDEX kv_${t}_k ON kv_$t USING $t (k)" -c "VACUUM ANALYZE kv_$t"
    printf '\\set k random(1, %s)\nSELECT v FROM kv_%s WHERE k = :k;\n' "$ROWS" "$t" >"$DEX_WORK/warm_$t.sql"
    printf '\\set k random(%s, %s)\nINSERT INTO kv_%s VALUES (:k, :client_id);\n' \
        "$((ROWS + 1))" "$((ROWS * 1000))" "$t" >"$DEX_WORK/ins_$t.sql"
done
chmod a+r "$DEX_WORK"/*.sql
PB() { "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$pport" -U postgres "$@" postgres; }
PGOPTIONS="-c dex.leaf_admission=1" PB -c 2 -j 2 -T 8 -f "$DEX_WORK/warm_dex.sql" >/dev/null
PB -c 2 -j 2 -T 4 -f "$DEX_WORK/warm_btree.sql" >/dev/null

hz=$(getconf CLK_TCK)
# "utime stime cutime cstime" of a pid, in clock ticks
ticks() { awk '{print $14, $15, $16, $17}' <(sed 's/^.*) //; s/^/x x /' "/proc/$1/stat"); }
# memnode: voluntary + involuntary context switches over all threads
mctx() { cat /proc/"$mpid"/task/*/status | awk '/ctxt_switches/{s+=$2} END{print s}'; }
# machine: user+nice system softirq irq (ticks) and context switches
mach() { awk '/^cpu /{print $2+$3, $4, $8, $7} /^ctxt/{print $2}' /proc/stat | paste -sd' '; }
# TCP segments sent and received (this network namespace: loopback counts each segment once in each)
segs() { awk '/^Tcp:/ && $2 ~ /^[0-9]/ {print $11 + $12}' /proc/net/snmp; }
# waits until only the postmaster's own auxiliary processes are left (every backend reaped)
nchildren() { pgrep -P "$ppid_pm" | wc -l; }
base_children=$(nchildren)
wait_reaped() {
    for _ in $(seq 1 200); do [ "$(nchildren)" -le "$base_children" ] && return 0; sleep 0.05; done
    die "backends did not exit"
}

raw="$DEX_WORK/raw.txt"; : >"$raw"
per_client=$((NTX / CLIENTS))
for r in $(seq 1 "$ROUNDS"); do
    order="dex btree"; [ $((r % 2)) = 0 ] && order="btree dex"
    for t in $order; do
        P -c "SELECT dex_stats_reset()" >/dev/null
        wait_reaped
        read -r pu ps pcu pcs < <(ticks "$ppid_pm"); read -r mu ms _ _ < <(ticks "$mpid")
        mc0=$(mctx); sg0=$(segs); read -r au as asi aq actx < <(mach)
        # PERF_OUT=prefix: the first round also records every CPU (perf record -a -g) into prefix-<index>.data
        perfpid=""
        if [ -n "${PERF_OUT:-}" ] && [ "$r" = 1 ]; then
            perf record -a -g -o "$PERF_OUT-$t.data" >/dev/null 2>&1 & perfpid=$!; sleep 1
        fi
        res=$( { /usr/bin/time -f 'TIME %U %S %w %c' "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$pport" -U postgres \
                   -c "$CLIENTS" -j "$CLIENTS" -t "$per_client" -f "$DEX_WORK/ins_$t.sql" postgres; } 2>&1 )
        [ -z "$perfpid" ] || { kill -INT "$perfpid"; wait "$perfpid" || true; }
        wait_reaped
        read -r pu2 ps2 pcu2 pcs2 < <(ticks "$ppid_pm"); read -r mu2 ms2 _ _ < <(ticks "$mpid")
        mc1=$(mctx); sg1=$(segs); read -r bu bs bsi bq bctx < <(mach)
        n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$res")
        tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$res")
        read -r _ gu gs gw gc < <(grep '^TIME' <<<"$res")
        [ -n "$n" ] && [ -n "$tps" ] || die "pgbench failed: $res"
        rt=$(P -c "SELECT round_trips FROM dex_stats()")
        # the dex_stats query's own backend is reaped later: ~1 backend per run, noise well below 1 us/tx
        echo "$t $r $n $tps $((pcu2 - pcu)) $((pcs2 - pcs)) $((mu2 - mu)) $((ms2 - ms)) $gu $gs $((gw + gc)) \
$((mc1 - mc0)) $((bu - au)) $((bs - as)) $((bsi - asi)) $((bctx - actx)) $rt $((sg1 - sg0))" | tee -a "$raw" >&2
    done
done

# Syscalls per insert: one psql session, STRACE_N autocommit INSERTs, strace -c
# on its backend and (-f, every thread) on the memory node.
for t in dex btree; do
    sql="$DEX_WORK/strace_$t.sql"
    {
        echo "SELECT pg_backend_pid() AS bpid \\gset"
        echo "\\setenv BPID :bpid"
        echo "\\! strace -c -f -o $DEX_WORK/strace_backend_$t.txt -p \$BPID 2>/dev/null & echo \$! > $DEX_WORK/s1.pid"
        echo "\\! strace -c -f -o $DEX_WORK/strace_memnode_$t.txt -p $mpid 2>/dev/null & echo \$! > $DEX_WORK/s2.pid"
        echo "\\! sleep 1"
        for i in $(seq 1 "$STRACE_N"); do echo "INSERT INTO kv_$t VALUES ($((ROWS * 2000 + i)), $i);"; done
        echo "\\! kill -INT \$(cat $DEX_WORK/s1.pid) \$(cat $DEX_WORK/s2.pid); sleep 1"
    } >"$sql"
    P -q -f "$sql" >/dev/null
done

check_kv_answers "$pport"  # every answer: index scan = seqscan, dex_check

python3 - "$raw" "$hz" "$DEX_WORK" "$STRACE_N" \
    "bash bench/round_trip_cpu.sh $CO $ROWS $NTX $ROUNDS $CLIENTS" \
    "$(nproc --all) cores, $(uname -r), PostgreSQL $(pg_config --version | awk '{print $2}'), tcp loopback, memnode --threads 2, fsync = off, $ROWS rows, $CLIENTS clients, checkout $(git -C "$CO" rev-parse --short HEAD)$(git -C "$CO" diff --quiet HEAD -- src memnode || echo '+uncommitted')" <<'PY'
import sys, statistics as st, collections, re
raw, hz, work, sn, cmd, machine = sys.argv[1:]; hz = float(hz); sn = int(sn)
cols = "n tps pg_u pg_s mem_u mem_s bench_u bench_s bench_cs mem_cs m_user m_sys m_softirq m_cs rt segs".split()
rows = collections.defaultdict(list)
for line in open(raw):
    f = line.split(); t = f[0]; v = dict(zip(cols, map(float, f[2:])))
    n = v["n"]; us = lambda ticks: ticks * 1e6 / hz / n
    rows[t].append({
        "backend user": us(v["pg_u"]), "backend sys": us(v["pg_s"]),
        "memnode user": us(v["mem_u"]), "memnode sys": us(v["mem_s"]),
        "pgbench user+sys": (v["bench_u"] + v["bench_s"]) * 1e6 / n,
        "machine user": us(v["m_user"]), "machine sys": us(v["m_sys"]), "machine softirq": us(v["m_softirq"]),
        "ctx switches memnode": v["mem_cs"] / n, "ctx switches pgbench": v["bench_cs"] / n,
        "ctx switches machine": v["m_cs"] / n, "round trips": v["rt"] / n,
        "TCP segments (in + out, machine)": v["segs"] / n, "tps": v["tps"]})
keys = list(rows["dex"][0].keys())
med = {t: {k: st.median(r[k] for r in rows[t]) for k in keys} for t in rows}
print(f"Command: `{cmd}`\n\nMachine: {machine}.\n")
print("CPU per transaction in microseconds (median of rounds), context switches and round trips per transaction:\n")
print("| | dex | btree | dex - btree |\n|---|---|---|---|")
for k in keys:
    d, b = med["dex"][k], med["btree"][k]
    print(f"| {k} | {d:.2f} | {b:.2f} | {d - b:+.2f} |")
tot = lambda t: sum(med[t][k] for k in ("backend user", "backend sys", "memnode user", "memnode sys", "pgbench user+sys"))
print(f"| **backends + memnode + pgbench** | {tot('dex'):.2f} | {tot('btree'):.2f} | {tot('dex') - tot('btree'):+.2f} |")
print(f"\ntps ratio dex / btree (median): {med['dex']['tps'] / med['btree']['tps']:.2f}\n")
def strace(path):
    calls = {}
    for line in open(path):
        m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$", line)
        if m and m.group(2) != "total": calls[m.group(2)] = int(m.group(1))
    return calls
print(f"Syscalls per INSERT (strace -c, {sn} autocommit INSERTs from one psql session; memnode: every thread):\n")
print("| process | syscall | dex | btree | dex - btree |\n|---|---|---|---|---|")
for who in ("backend", "memnode"):
    d, b = strace(f"{work}/strace_{who}_dex.txt"), strace(f"{work}/strace_{who}_btree.txt")
    for name in sorted(set(d) | set(b), key=lambda x: -(d.get(x, 0) - b.get(x, 0))):
        if max(d.get(name, 0), b.get(name, 0)) < sn / 20: continue
        print(f"| {who} | {name} | {d.get(name, 0) / sn:.2f} | {b.get(name, 0) / sn:.2f} | {(d.get(name, 0) - b.get(name, 0)) / sn:+.2f} |")
print("\nEvery round (index round n tps backend_u backend_s memnode_u memnode_s [ticks] pgbench_u pgbench_s [s] pgbench_cs memnode_cs machine_user machine_sys machine_softirq [ticks] machine_cs round_trips tcp_segments_in+out):\n\n```")
print(open(raw).read().rstrip()); print("```")
PY
