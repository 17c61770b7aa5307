#!/usr/bin/env bash
# Remote memory that no index owns any more (here: its database was dropped,
# which runs no per-index hook) is listed by dex_orphans() and freed by
# dex_free_orphans(); memory of live indexes is never touched.
source "$(dirname "$0")/common.sh"
start_memnode mem "$MPORT" 256MB
start_cluster pg "$PPORT" "$MEMNODE_URL"
q -c "create extension dex"
q -c "create table keep(k int); insert into keep select generate_series(1, 5000); create index keep_k on keep using dex (k)"
q -c "create database doomed"
dpsql "$PPORT" -d doomed -c "create extension dex; create table t(k int); insert into t select generate_series(1, 20000); create index t_k on t using dex (k)"
used_before=$(q -c "select used_bytes from dex_memnodes()")
q -c "drop database doomed"

orphans=$(q -c "select count(*) || ' ' || min(reason) from dex_orphans()")
echo "orphans after DROP DATABASE: $orphans"
[ "$orphans" = "1 database does not exist" ] || fail "expected one orphan of the dropped database, got: $orphans"
freed=$(q -c "select namespaces from dex_free_orphans()")
[ "$freed" = 1 ] || fail "dex_free_orphans freed $freed namespaces"
used_after=$(q -c "select used_bytes from dex_memnodes()")
echo "memory node used bytes: $used_before -> $used_after"
[ "$used_after" -lt "$used_before" ] || fail "memory was not given back"
[ "$(q -c "select count(*) from dex_orphans()")" = 0 ] || fail "orphans left"
[ "$(q -c "set enable_seqscan = off; select count(*) from keep where k between 100 and 199")" = 100 ] || fail "live index damaged"
q -c "select * from dex_check('keep_k')" >/dev/null
echo "orphans: ok"
