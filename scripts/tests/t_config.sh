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

echo "with the right token (and dex settings in postgresql.conf)"
log_from=$(($(cat "$DEX_WORK/pg-server.log" 2>/dev/null | wc -l) + 1))
start_cluster pg "$PPORT" "$MEMNODE_URL" "dex.token_file = '$DEX_WORK/token'" \
    "dex.writeback_interval = '1h'" "dex.standby_wait_timeout = '7s'" "dex.op_timeout = '12s'"
# every dex.* variable keeps the value the file gives it from the start (the
# prefix is reserved only after all are defined)
for s in "dex.writeback_interval=1h" "dex.standby_wait_timeout=7s" "dex.op_timeout=12s"; do
    got=$(q -c "show ${s%%=*}")
    [ "$got" = "${s#*=}" ] || fail "${s%%=*} is '$got' after the server start, postgresql.conf says ${s#*=}"
done
dropped=$(tail -n +"$log_from" "$DEX_WORK/pg-server.log" | grep 'invalid configuration parameter name "dex\.' || true)
[ -z "$dropped" ] || fail "the server dropped dex settings: $dropped"
q -c "create extension dex"
q -c "create table t(k int); insert into t select generate_series(1, 1000); create index t_k on t using dex (k)"
[ "$(q -c "set enable_seqscan = off; select count(*) from t where k between 10 and 19")" = 10 ] || fail "token: query"

echo "with a wrong token"
echo "dex.token_file = '$DEX_WORK/bad-token'" | as_user tee -a "$DEX_WORK/pg/postgresql.conf" >/dev/null
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" reload >/dev/null
sleep 1
expect_error "set enable_seqscan = off; select count(*) from t where k = 5" 'token' 'HINT: .*token'
echo "config: ok"
