#!/usr/bin/env bash
# A memory node that restarts loses its pool: the index must refuse to answer
# with a clear ERROR and HINT, never give wrong rows, and REINDEX must repair it.
source "$(dirname "$0")/common.sh"
start_memnode mem "$MPORT" 256MB
start_cluster pg "$PPORT" "$MEMNODE_URL"

q -c "create extension dex"
q -c "create table t(k int, v text); insert into t select g % 5000, g from generate_series(1, 20000) g"
q -c "create index t_k on t using dex (k)"
[ "$(q -c "set enable_seqscan=off; select count(*) from t where k = 42")" = 4 ] || fail "lookup before restart"

echo "restarting the memory node (SIGKILL)"
stop_memnode mem KILL
start_memnode mem "$MPORT" 256MB

expect_error "set enable_seqscan=off; select count(*) from t where k = 42" \
    'index "t_k" lost its remote memory' 'HINT: +REINDEX INDEX t_k'
expect_error "insert into t values (1, 'x')" 'index "t_k" lost its remote memory'
q -c "reindex index t_k"
[ "$(q -c "set enable_seqscan=off; select count(*) from t where k = 42")" = 4 ] || fail "lookup after REINDEX"
q -c "insert into t values (42, 'new')"
[ "$(q -c "set enable_seqscan=off; select count(*) from t where k = 42")" = 5 ] || fail "insert after REINDEX"
q -c "select * from dex_check('t_k')" >/dev/null
echo "memnode restart: ok"
