#!/usr/bin/env bash
# Configuration errors are clear: dex without shared_preload_libraries, and the
# shared-secret token (dex.token_file / dex-memnode --token-file), right and wrong.
source "$(dirname "$0")/common.sh"
echo "s3cret-$RANDOM" >"$DEX_WORK/token"
echo "wrong" >"$DEX_WORK/bad-token"
chmod 644 "$DEX_WORK/token" "$DEX_WORK/bad-token"
start_memnode mem "$MPORT" 128MB --token-file "$DEX_WORK/token"

echo "without shared_preload_libraries"
start_cluster pg "$PPORT" "$MEMNODE_URL" "shared_preload_libraries = ''"
q -c "create extension dex"
q -c "create table t(k int); insert into t values (1), (2)"
expect_error "create index on t using dex (k)" \
    'dex must be loaded via shared_preload_libraries' 'HINT: .*shared_preload_libraries'
stop_cluster pg

echo "with the right token"
start_cluster pg "$PPORT" "$MEMNODE_URL" "dex.token_file = '$DEX_WORK/token'"
q -c "create extension dex"
q -c "create table t(k int); insert into t select generate_series(1, 1000); create index t_k on t using dex (k)"
[ "$(q -c "set enable_seqscan = off; select count(*) from t where k between 10 and 19")" = 10 ] || fail "token: query"

echo "with a wrong token"
echo "dex.token_file = '$DEX_WORK/bad-token'" | as_user tee -a "$DEX_WORK/pg/postgresql.conf" >/dev/null
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" reload >/dev/null
sleep 1
expect_error "set enable_seqscan = off; select count(*) from t where k = 5" 'token' 'HINT: .*token'
echo "config: ok"
