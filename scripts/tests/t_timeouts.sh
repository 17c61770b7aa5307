#!/usr/bin/env bash
# Network waits end: statement_timeout, query cancel, dex.op_timeout and an
# unreachable memory node each give a clear ERROR promptly, never a hang.
source "$(dirname "$0")/common.sh"
start_memnode mem "$MPORT" 256MB
start_cluster pg "$PPORT" "$MEMNODE_URL"
q -c "create extension dex"
q -c "create table t(k int); insert into t select generate_series(1, 10000); create index t_k on t using dex (k)"

elapsed() { local s=$1; echo $(( $(date +%s%N) / 1000000 - s )); }
now() { echo $(( $(date +%s%N) / 1000000 )); }

echo "memory node paused (SIGSTOP): statement_timeout must fire"
stop_memnode mem STOP
t0=$(now)
expect_error "set enable_seqscan=off; set statement_timeout='1s'; select count(*) from t where k = 5" \
    'canceling statement due to statement timeout' >/dev/null
ms=$(elapsed "$t0"); echo "statement_timeout after ${ms} ms"
[ "$ms" -lt 5000 ] || fail "statement_timeout took ${ms} ms"

echo "query cancel while waiting"
( set +e; q -c "set enable_seqscan=off; set dex.op_timeout='60s'; select count(*) from t where k = 6" \
    >"$DEX_WORK/cancel.out" 2>&1; echo $? >"$DEX_WORK/cancel.rc" ) &
waiter=$!
sleep 1.5
t0=$(now)
q -c "select pg_cancel_backend(pid) from pg_stat_activity where query like '%k = 6%' and pid <> pg_backend_pid()" >/dev/null
wait "$waiter" || true
ms=$(elapsed "$t0"); echo "cancel took ${ms} ms"
[ "$(cat "$DEX_WORK/cancel.rc")" != 0 ] || fail "canceled query succeeded"
grep -q 'canceling statement due to user request' "$DEX_WORK/cancel.out" || fail "cancel message: $(cat "$DEX_WORK/cancel.out")"
[ "$ms" -lt 5000 ] || fail "cancel took ${ms} ms"

echo "dex.op_timeout"
t0=$(now)
expect_error "set enable_seqscan=off; set dex.op_timeout='1s'; select count(*) from t where k = 7" \
    "127.0.0.1:$MPORT" >/dev/null
ms=$(elapsed "$t0"); echo "op_timeout after ${ms} ms"
[ "$ms" -lt 5000 ] || fail "op_timeout took ${ms} ms"

stop_memnode mem CONT
[ "$(q -c "set enable_seqscan=off; select count(*) from t where k = 8")" = 1 ] || fail "query after resume"

echo "memory node gone: connection refused names the address, within connect_timeout"
stop_memnode mem TERM
t0=$(now)
expect_error "set enable_seqscan=off; select count(*) from t where k = 9" \
    "tcp://127.0.0.1:$MPORT" 'HINT: .*dex-memnode' >/dev/null
ms=$(elapsed "$t0"); [ "$ms" -lt 5000 ] || fail "unreachable error took ${ms} ms"
echo "timeouts: ok"
