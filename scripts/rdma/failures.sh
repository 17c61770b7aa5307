#!/usr/bin/env bash
# Failure cases over rdma:// (run by scripts/check-rdma.sh inside the
# Soft-RoCE guest, or on a host with an RDMA NIC; needs DEX_RDMA_IP):
#   memory node killed mid-workload -> clear ERROR naming the rdma:// node, no
#   hang beyond the timeouts; memory node restarted -> "lost its remote memory"
#   + HINT REINDEX; wrong token -> refused.
source "$(dirname "$0")/../tests/common.sh"
[ -n "${DEX_RDMA_IP:-}" ] || fail "DEX_RDMA_IP is not set"
RPORT=$(free_port)
MEMNODE_URL="rdma://$DEX_RDMA_IP:$RPORT"
TOK="$DEX_WORK/token"
set_token() { echo "$1" >"$TOK"; chown "$DEX_RUN_USER" "$TOK" 2>/dev/null; chmod 600 "$TOK"; }
mem() { start_memnode mem "$MPORT" 256MB --rdma-listen "$DEX_RDMA_IP:$RPORT" --token-file "$TOK"; }

set_token "secret-one"
mem
start_cluster pg "$PPORT" "$MEMNODE_URL" "dex.token_file = '$TOK'" "dex.op_timeout = '5s'" "dex.connect_timeout = '2s'"
q -c "create extension dex"
q -c "create table t(k int, v bigint); insert into t select g % 5000, g from generate_series(1, 20000) g"
q -c "create index t_k on t using dex (k)"
[ "$(q -c "set enable_seqscan=off; select count(*) from t where k = 42")" = 4 ] || fail "lookup over rdma"
q -c "select address from dex_memnodes()" | grep -q "^rdma://" || fail "not connected over rdma"

echo "== memory node killed mid-workload"
cat >"$DEX_WORK/w.sql" <<'SQL'
\set k random(0, 20000)
INSERT INTO t VALUES (:k, :client_id);
SELECT count(*) FROM t WHERE k BETWEEN :k AND :k + 50;
SQL
"$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$PPORT" -U postgres -c 3 -j 1 -T 8 -f "$DEX_WORK/w.sql" postgres \
    >"$DEX_WORK/pgbench.log" 2>&1 &
bg=$!
sleep 3
t0=$SECONDS
stop_memnode mem KILL
wait $bg || true
took=$((SECONDS - t0))
echo "pgbench ended ${took}s after the kill"
grep -E "ERROR|error" "$DEX_WORK/pgbench.log" | head -3
grep -qE "memory node rdma://$DEX_RDMA_IP:$RPORT" "$DEX_WORK/pgbench.log" || fail "the workload's error does not name the rdma:// memory node"
# pgbench -T 8 started 3 s before the kill; op_timeout 5 s bounds any wait after it.
[ $took -le 15 ] || fail "the workload hung ${took}s after the memory node died"
# A query now either fails on the dead connection (op_timeout 5 s, connect_timeout
# 2 s) or, once the writer lease lapsed, after dex_cluster_check's bounded wait
# for the worker to claim it again (2 leases + margin + 1 s = 9 s, dexcluster.c):
# a hang would exceed both by far. The guest is emulated (TCG, psql alone takes
# seconds), hence the slack: this checks "bounded", not "fast".
t0=$SECONDS
expect_error "set enable_seqscan=off; select count(*) from t where k = 42" "memory node rdma://$DEX_RDMA_IP:$RPORT"
[ $((SECONDS - t0)) -le 30 ] || fail "a query against the dead node took $((SECONDS - t0))s"

echo "== memory node restarted"
mem
expect_error "set enable_seqscan=off; select count(*) from t where k = 42" \
    'index "t_k" lost its remote memory' 'HINT: +REINDEX INDEX t_k'
q -c "reindex index t_k"
n=$(q -c "select count(*) from t where k = 42")
[ "$(q -c "set enable_seqscan=off; select count(*) from t where k = 42")" = "$n" ] || fail "lookup after REINDEX"
q -c "select * from dex_check('t_k')" >/dev/null

echo "== wrong token"
stop_memnode mem
# The node now expects a different secret than the cluster sends.
echo "other-secret" >"$DEX_WORK/token2"; chown "$DEX_RUN_USER" "$DEX_WORK/token2" 2>/dev/null
start_memnode mem "$MPORT" 256MB --rdma-listen "$DEX_RDMA_IP:$RPORT" --token-file "$DEX_WORK/token2"
expect_error "set enable_seqscan=off; select count(*) from t where k = 42" 'rejected the token'
grep -q "authentication failed" "$DEX_WORK/mem.log" || fail "the memory node did not log the refused token"
echo "rdma failure cases: ok"
