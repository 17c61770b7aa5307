#!/usr/bin/env bash
# Repeated dex and btree single-row insert runs in one cluster, with the
# interrupts and context switches of each run (from /proc/stat): shows the
# slow insert mode of a small VM (bench/results/2026-11-24-vm-slow-insert-mode.md).
# Uses the installed dex; run under `taskset -c 0` to pin everything.
#   ROWS=300000 SECS=6 ROUNDS=8 bash bench/slow_insert_mode.sh
set -euo pipefail
if [ -z "${DEX_INSTALL_LOCKED:-}" ]; then
    export DEX_INSTALL_LOCKED=1
    exec flock /tmp/dex-pg-install.lock bash "$0" "$@"
fi
source "$(dirname "$0")/../scripts/lib.sh"
default_work_dir /tmp/dex-slow-mode
ROWS=${ROWS:-300000}; SECS=${SECS:-6}; ROUNDS=${ROUNDS:-8}
MEMPFX=${MEMPFX:-}
mport=$(free_port); pport=$(free_port)
trap 'stop_cluster sl; stop_memnode sl-mem' EXIT
P() { dpsql "$pport" -d postgres "$@"; }
if [ -n "$MEMPFX" ]; then
  prepare_workdir
  exec_as_user $MEMPFX "$PG_BIN/dex-memnode" --listen "127.0.0.1:$mport" --memory 2GB --threads ${MTHREADS:-2} >"$DEX_WORK/sl-mem.log" 2>&1 &
  echo $! > "$DEX_WORK/sl-mem.pid"; sleep 3
else
  start_memnode sl-mem "$mport" 2GB --threads ${MTHREADS:-2}
fi
start_cluster sl "$pport" "tcp://127.0.0.1:$mport" "dex.cache_size = '256MB'" "autovacuum = off"
P -q -c "CREATE EXTENSION dex"
for t in dex btree; do
  P -q -c "CREATE TABLE kv_$t (k bigint, v bigint)"
  P -q -c "INSERT INTO kv_$t SELECT g, g FROM generate_series(1, $ROWS) g"
  P -q -c "VACUUM ANALYZE kv_$t"
  printf '\\set k random(%s, %s)\nINSERT INTO kv_%s VALUES (:k, :client_id);\n' "$((ROWS + 1))" "$((ROWS * 1000))" "$t" >"$DEX_WORK/ins_$t.sql"
done
P -q -c "CREATE INDEX ON kv_dex USING dex (k)"
P -q -c "CREATE INDEX ON kv_btree (k)"
for r in $(seq 1 $ROUNDS); do
  for t in dex btree; do
    i0=$(awk '/^intr/{print $2}' /proc/stat); c0=$(awk '/^ctxt/{print $2}' /proc/stat)
    tps=$("$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$pport" -U postgres -c 2 -j 2 -T "$SECS" -f "$DEX_WORK/ins_$t.sql" postgres | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
    i1=$(awk '/^intr/{print $2}' /proc/stat); c1=$(awk '/^ctxt/{print $2}' /proc/stat)
    echo "round $r $t tps $tps intr/s $(( (i1-i0)/SECS )) cs/s $(( (c1-c0)/SECS ))"
  done
done
