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

# With the node cache on (the cluster's dex.cache_size), cached frames of the
# old incarnation share addresses and (restarting) namespace ids with the new
# trees: they must all be gone. Warm the cache with every leaf, restart, build
# a different tree (other keys, other TIDs) in the same memory, compare.
cmp_counts="set enable_seqscan = off; set enable_bitmapscan = off;
select count(*) from generate_series(0, 5100, 3) g where
  (select count(*) from t where k = g) is distinct from
  (select count(*) from t t2 where t2.k + 0 = g)"
q -c "set dex.leaf_admission = 1.0; set enable_seqscan = off; select count(*) from t where k between 0 and 5000" >/dev/null
q -c "set dex.leaf_admission = 1.0; $cmp_counts" >/dev/null
[ "$(q -c "select count(*) from dex_cache_stats() where index = 't_k'::regclass")" -gt 1 ] || fail "cache not warmed"
echo "restarting the memory node again, cache warm"
stop_memnode mem KILL
start_memnode mem "$MPORT" 256MB
expect_error "set enable_seqscan=off; select count(*) from t where k = 42" 'index "t_k" lost its remote memory' >/dev/null
q -c "drop index t_k" -c "create table u(k int)" -c "insert into u select g from generate_series(1, 100) g" \
    -c "create index u_k on u using dex (k)"
q -c "truncate t" -c "insert into t select (g * 37) % 6000, g from generate_series(1, 30000) g"
q -c "create index t_k on t using dex (k)"
bad=$(q -c "set dex.leaf_admission = 1.0; $cmp_counts")
[ "$bad" = 0 ] || fail "after restart with a warm cache: $bad keys with wrong counts"
bad=$(q -c "$cmp_counts")
[ "$bad" = 0 ] || fail "after restart with a warm cache (second pass, cached): $bad keys with wrong counts"
[ "$(q -c "set enable_seqscan = off; select count(*) from u where k between 1 and 100")" = 100 ] || fail "u_k lookup"
q -c "select * from dex_check('t_k')" >/dev/null
q -c "select index::text, level, frames from dex_cache_stats() where index is not null order by 1, 2"
echo "memnode restart: ok"
