#!/usr/bin/env bash
# The dex demo: start a memory node and a scratch PostgreSQL cluster, load 1M
# rows, build a dex index and a btree index on copies of the table, and run a
# short pgbench point-select workload against each, printing both.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROWS=${ROWS:-1000000}; SECS=${SECS:-15}; CLIENTS=${CLIENTS:-2}
default_work_dir /tmp/dex-demo
export DEX_WORK

install_deps
build_install
mport=$(free_port); pport=$(free_port)
trap 'stop_cluster demo; stop_memnode demo-mem' EXIT
log "starting dex-memnode on 127.0.0.1:$mport (2GB pool) and PostgreSQL on port $pport"
start_memnode demo-mem "$mport" 2GB --threads 2
start_cluster demo "$pport" "tcp://127.0.0.1:$mport"

log "loading $ROWS rows into two tables; indexing one with dex, one with btree"
dpsql "$pport" -d postgres <<SQL
\timing on
CREATE EXTENSION dex;
CREATE TABLE kv_dex (k bigint, v text);
INSERT INTO kv_dex SELECT g, md5(g::text) FROM generate_series(1, $ROWS) g;
CREATE TABLE kv_btree AS SELECT * FROM kv_dex;
VACUUM ANALYZE kv_dex; VACUUM ANALYZE kv_btree;
CREATE INDEX kv_dex_k ON kv_dex USING dex (k);
CREATE INDEX kv_btree_k ON kv_btree (k);
SELECT * FROM dex_check('kv_dex_k');
EXPLAIN (COSTS OFF) SELECT v FROM kv_dex WHERE k = 42;
SQL

for t in dex btree; do
    cat >"$DEX_WORK/select_$t.sql" <<SQL
\set k random(1, $ROWS)
SELECT v FROM kv_$t WHERE k = :k;
SQL
done
declare -A tps
for t in dex btree; do
    log "pgbench: point selects through $t ($CLIENTS clients, ${SECS}s)"
    dpsql "$pport" -d postgres -c "select dex_stats_reset()" >/dev/null
    out=$("$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$pport" -U postgres -c "$CLIENTS" -j "$CLIENTS" -T "$SECS" \
          -f "$DEX_WORK/select_$t.sql" postgres)
    echo "$out" | grep -E "latency average|tps"
    tps[$t]=$(echo "$out" | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
    [ "$t" = dex ] && dpsql "$pport" -d postgres -c \
        "select index_ops, remote_reads, round(remote_reads::numeric / greatest(index_ops,1), 2) as reads_per_op, bytes_read from dex_stats()"
done
log "result"
printf "point selects, %s rows, %s clients: dex %s tps, btree %s tps (dex/btree = %s)\n" "$ROWS" "$CLIENTS" \
    "${tps[dex]}" "${tps[btree]}" "$(python3 -c "print(round(${tps[dex]}/${tps[btree]}, 3))")"
