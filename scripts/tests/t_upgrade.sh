#!/usr/bin/env bash
# pg_upgrade of a cluster with dex indexes (src/README.md "Hot standbys",
# Upgrades). pg_upgrade (same major version here) gives the new cluster a new
# system identifier and copies the index files: their metapages name the old
# cluster, their namespaces carry its tags.
# 1. A: dex indexes t_k, u_k; clean stop; pg_upgrade (copy mode) A -> B. The
#    schema restore builds no remote trees (no orphans in B).
# 2. A is started again first: B's first use of t_k is refused while A runs.
# 3. A stops. B's first act is DROP INDEX u_k: it adopts the trees and frees
#    u_k's namespace. B's index scans of t_k then count and sum what its
#    seqscan does (also after inserts, and dex_check); the metapage names B
#    after a restart (no second adoption). A, started again, is refused.
# 4. B REINDEXes t_k: the old tree is freed (namespaces on the memory node
#    stay at the count of step 3), no orphans.
# 5. A second upgrade of A (A -> C) is refused: B owns the trees.
source "$(dirname "$0")/common.sh"
# DEX_WORK may hold an earlier run's server logs (pg_ctl -l appends): the checks below count log lines
rm -f "$DEX_WORK"/{pg,b,c}-server.log "$DEX_WORK"/upgrade-*.log
start_memnode mem "$MPORT" 256MB
BPORT=$(free_port); CPORT=$(free_port)
# the clusters stop before the memory node does (a clean stop gives the writer role back)
trap 'stop_cluster b; stop_cluster c; test_cleanup' EXIT
CONF=("wal_level = replica" "log_min_messages = log")
start_cluster pg "$PPORT" "$MEMNODE_URL" "${CONF[@]}"
qa() { dpsql "$PPORT" -d postgres -At "$@"; }
qb() { dpsql "$BPORT" -d postgres -At "$@"; }
qc() { dpsql "$CPORT" -d postgres -At "$@"; }
nspaces() { qb -c "select namespaces from dex_memnodes()"; }
# the plan of counts' first query must be a dex index scan, or the comparison proves nothing
plan_uses() {  # plan_uses PORT INDEX
    local plan
    plan=$(dpsql "$1" -d postgres -At -c "set enable_seqscan = off; set enable_bitmapscan = off;
        explain (costs off) select count(*), sum(v) from t where k between 100 and 5000")
    grep -q "Index Scan using $2" <<<"$plan" || fail "not an index scan of $2 on port $1: $plan"
}
# orphans PORT: dex_orphans() once the server holds the writer role (its worker claims it just after start)
orphans() {
    local out
    for _ in $(seq 1 100); do
        out=$(dpsql "$1" -d postgres -At -c "select count(*) from dex_orphans()" 2>&1) && { echo "$out"; return 0; }
        sleep 0.1
    done
    fail "dex_orphans() on port $1: $out"
}
# counts PORT: "index|seqscan" count and sum of t where k between 100 and 5000
counts() {
    dpsql "$1" -d postgres -At \
        -c "set enable_seqscan = off; set enable_bitmapscan = off; select count(*), sum(v) from t where k between 100 and 5000" \
        -c "set enable_indexscan = off; set enable_bitmapscan = off; select count(*), sum(v) from t where k between 100 and 5000" |
        paste -sd'/'
}

qa -c "create extension dex"
qa -c "create table t(k bigint, v bigint); insert into t select g % 7000, g from generate_series(1, 30000) g"
qa -c "create table u(k int); insert into u select g from generate_series(1, 1000) g"
qa -c "create index t_k on t using dex (k)" -c "create index u_k on u using dex (k)"
plan_uses "$PPORT" t_k
before=$(counts "$PPORT")
[ "$(cut -d/ -f1 <<<"$before")" = "$(cut -d/ -f2 <<<"$before")" ] || fail "A: index and seqscan differ: $before"
[ "$(cut -d'|' -f1 <<<"$before")" -gt 1000 ] || fail "A: too few rows to compare: $before"
stop_cluster pg

upgrade() {  # upgrade NEW NEWPORT: pg_upgrade (copy mode, the default) from A's data directory into a fresh NEW
    start_cluster "$1" "$2" "$MEMNODE_URL" "${CONF[@]}"
    stop_cluster "$1"
    (cd "$DEX_WORK" && as_user "$PG_BIN/pg_upgrade" -b "$PG_BIN" -B "$PG_BIN" -d "$DEX_WORK/pg" -D "$DEX_WORK/$1" \
        -p "$PPORT" -P "$2" -s "$DEX_WORK" >"$DEX_WORK/upgrade-$1.log" 2>&1) ||
        { tail -30 "$DEX_WORK/upgrade-$1.log"; find "$DEX_WORK/$1" -name '*.log' -path '*pg_upgrade*' -exec tail -20 {} \; ; fail "pg_upgrade to $1"; }
    as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/$1" -l "$DEX_WORK/$1-server.log" -w -t 60 start >/dev/null ||
        fail "upgraded cluster $1 did not start"
}
echo "== 1. pg_upgrade A -> B"
upgrade b "$BPORT"
[ "$(orphans "$BPORT")" = 0 ] || fail "the schema restore left remote trees: $(qb -c "select * from dex_orphans()")"
ns0=$(nspaces)
sysa=$(as_user "$PG_BIN/pg_controldata" "$DEX_WORK/pg" | sed -n 's/^Database system identifier: *//p')
sysb=$(qb -c "select system_identifier from pg_control_system()")
[ "$sysa" != "$sysb" ] || fail "pg_upgrade kept the system identifier"

echo "== 2. adoption waits for A to stop"
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -l "$DEX_WORK/pg-server.log" -w -t 60 start >/dev/null
[ "$(counts "$PPORT")" = "$before" ] || fail "A after the upgrade"
out=$(qb -c "set enable_seqscan = off; select count(*) from t where k = 5" 2>&1) && fail "B used the trees while A runs: $out"
grep -q "still runs" <<<"$out" || fail "B's refusal lacks the reason: $out"
echo "B while A runs: $out"
stop_cluster pg

echo "== 3. B adopts the trees (first by DROP INDEX)"
qb -c "drop index u_k"
grep -q "index \"u_k\" taken over from the cluster with system identifier $sysa" "$DEX_WORK/b-server.log" ||
    fail "DROP INDEX u_k adopted nothing"
[ "$(nspaces)" = $((ns0 - 1)) ] || fail "DROP INDEX u_k: namespaces $(nspaces), expected $((ns0 - 1))"
plan_uses "$BPORT" t_k
[ "$(counts "$BPORT")" = "$before" ] || fail "B after adoption: $(counts "$BPORT") vs $before"
qb -c "insert into t select g % 7000, -g from generate_series(1, 2000) g"
after=$(counts "$BPORT")
[ "$(cut -d/ -f1 <<<"$after")" = "$(cut -d/ -f2 <<<"$after")" ] || fail "B after inserts: $after"
[ "$after" != "$before" ] || fail "the inserts changed nothing: $after"
qb -c "select * from dex_check('t_k')" >/dev/null
stop_cluster b
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/b" -l "$DEX_WORK/b-server.log" -w -t 60 start >/dev/null || fail "B did not restart"
[ "$(counts "$BPORT")" = "$after" ] || fail "B after a restart: $(counts "$BPORT") vs $after"
[ "$(grep -c "index \"t_k\" taken over" "$DEX_WORK/b-server.log")" = 1 ] ||
    fail "t_k adopted more than once (the metapage must name B): $(grep -E "taken over|database system is ready" "$DEX_WORK/b-server.log")"
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -l "$DEX_WORK/pg-server.log" -w -t 60 start >/dev/null
out=$(qa -c "set enable_seqscan = off; select count(*) from t where k = 5" 2>&1) && fail "A used the trees after B adopted them: $out"
grep -q "taken over by the cluster with system identifier $sysb" <<<"$out" || fail "A's refusal lacks the reason: $out"
echo "A after adoption: $(head -2 <<<"$out" | tail -1)"
stop_cluster pg

echo "== 4. REINDEX frees the old tree"
qb -c "reindex index t_k"
[ "$(nspaces)" = $((ns0 - 1)) ] || fail "REINDEX t_k: namespaces $(nspaces), expected $((ns0 - 1))"
[ "$(counts "$BPORT")" = "$after" ] || fail "B after REINDEX: $(counts "$BPORT") vs $after"
[ "$(orphans "$BPORT")" = 0 ] || fail "orphans in B: $(qb -c "select * from dex_orphans()")"

echo "== 5. a second upgrade of A is refused"
stop_cluster b
upgrade c "$CPORT"
out=$(qc -c "set enable_seqscan = off; select count(*) from t where k = 5" 2>&1) && fail "C used trees B owns: $out"
grep -q "already took them over" <<<"$out" || fail "C's refusal lacks the reason: $out"
echo "C: $(head -2 <<<"$out" | tail -1)"
echo "upgrade: ok"
