#!/usr/bin/env bash
# Hot standbys over the same remote trees (src/README.md "Hot standbys"),
# with real streaming replicas made by pg_basebackup -R:
#   sb1: node cache on; sb2: no node cache (dex.cache_size = 0), then a tiny one.
# 1. sb1 warms leaves; the primary inserts 20 more rows with that key; after
#    replay, sb1's index and bitmap scans count what its seqscan counts.
# 2. sb2, one REPEATABLE READ transaction: index scan counts 120; the primary
#    deletes the rows and VACUUMs; the same transaction's next index scan
#    counts 120 -- or is cancelled by a recovery conflict -- never 0.
# 3. An entry whose heap block the standby has not replayed yet (apply delay)
#    is skipped, not "could not read block".
# 4. Differential under load: the primary runs random DML + VACUUM (pgbench);
#    standbys compare index scans with seqscans inside one snapshot.
# 5. The walsender is killed: sb1 reconnects and stays exact. Cached point
#    selects on sb1 make 0 remote reads. dex_stats()/dex_memnodes() work on a
#    standby; writes and dex_free_orphans() fail as they should.
# 5b. Index-only scans: the primary plans them, a standby does not (plain
#    index scans for the column, seqscan for count(*)); with replay paused
#    and new rows in all-visible pages, a forced index-only count(*) on the
#    standby checks the heap and equals its seqscan.
# 5c. Dead-entry hints: with standbys registered the primary's index scan
#    removes no dead entry at once (kills_deferred), and a REPEATABLE READ snapshot
#    on sb2 that still sees the old versions keeps counting them.
# 6. Copies of the primary's data directory started while it runs: a backup
#    from earlier (behind the trees) and a fresh one (a second primary) are
#    refused.
# 7. Failover: the primary stops, sb1 is promoted, writes, VACUUMs, dex_check;
#    with no live standby slot left, its index scans kill dead entries again;
#    the old primary started again is refused (never writes), and so is a base
#    backup taken early and restored.
source "$(dirname "$0")/common.sh"
start_memnode mem "$MPORT" 512MB
SB1=$(free_port); SB2=$(free_port); BK=$(free_port)
trap 'test_cleanup; for c in sb1 sb2 backup backup2; do stop_cluster $c; done' EXIT
start_cluster pg "$PPORT" "$MEMNODE_URL" "wal_level = replica" "max_wal_senders = 8" "wal_keep_size = '512MB'" \
    "log_min_messages = log" "dex.standby_wait_timeout = '30s'"
qp() { dpsql "$PPORT" -d postgres -At "$@"; }
q1() { dpsql "$SB1" -d postgres -At "$@"; }
q2() { dpsql "$SB2" -d postgres -At "$@"; }

# counts PORT QUERY-SUFFIX: "index|bitmap|seqscan" counts for `select count(*) from t where ...`
counts() {
    local p=$1 w=$2
    dpsql "$p" -d postgres -At -c "set enable_seqscan = off; set enable_bitmapscan = off; select count(*) from t where $w" \
        -c "set enable_seqscan = off; set enable_indexscan = off; select count(*) from t where $w" \
        -c "set enable_indexscan = off; set enable_bitmapscan = off; select count(*) from t where $w" | paste -sd'|'
}

qp -c "create extension dex"
qp -c "create table t(id serial, k int, v int) with (autovacuum_enabled = off)"
qp -c "insert into t(k, v) select g % 1000, g from generate_series(1, 50000) g"
qp -c "insert into t(k, v) select 7, g from generate_series(1, 50) g"   # k = 7: 100 rows
qp -c "create index t_k on t using dex (k)"
qp -c "checkpoint"
# a backup taken now, restored at the end: a point in time behind the trees
rm -rf "$DEX_WORK/backup"
as_user "$PG_BIN/pg_basebackup" -h "$DEX_WORK" -p "$PPORT" -U postgres -D "$DEX_WORK/backup" -X stream -c fast \
    >/dev/null || fail "pg_basebackup (backup)"
make_standby sb1 "$SB1"
make_standby sb2 "$SB2" "dex.cache_size = 0"
wait_replay "$SB1"; wait_replay "$SB2"

echo "== 1. cached leaves follow the primary's inserts"
[ "$(counts "$SB1" "k = 7")" = "100|100|100" ] || fail "sb1 before: $(counts "$SB1" "k = 7")"
q1 -c "set dex.leaf_admission = 1; set enable_seqscan = off; set enable_bitmapscan = off; select count(*) from t where k = 7" >/dev/null
qp -c "insert into t(k, v) select 7, -g from generate_series(1, 20) g"
wait_replay "$SB1"
got=$(counts "$SB1" "k = 7"); echo "sb1 index|bitmap|seqscan: $got"
[ "$got" = "120|120|120" ] || fail "sb1 after the primary's inserts: $got"

echo "== 2. a REPEATABLE READ transaction on sb2 across the primary's DELETE + VACUUM"
rm -f "$DEX_WORK/rr.in"; mkfifo "$DEX_WORK/rr.in"; chmod 666 "$DEX_WORK/rr.in"
dpsql "$SB2" -d postgres -At <"$DEX_WORK/rr.in" >"$DEX_WORK/rr.out" 2>&1 &
rr=$!
exec 7>"$DEX_WORK/rr.in"
echo "set enable_seqscan = off; set enable_bitmapscan = off;" >&7
echo "begin isolation level repeatable read; select 'first', count(*) from t where k = 7;" >&7
for _ in $(seq 1 50); do grep -q "^first" "$DEX_WORK/rr.out" && break; sleep 0.1; done
qp -c "delete from t where k = 7"
qp -c "vacuum t"   # waits until the standbys replayed the prune (sb2 cancels the conflicting transaction first)
wait_replay "$SB2"
echo "select 'second', count(*) from t where k = 7; commit;" >&7
exec 7>&-
wait $rr || true
cat "$DEX_WORK/rr.out"
grep -q "^first|120" "$DEX_WORK/rr.out" || fail "the first scan did not count 120"
if ! grep -q "^second|120" "$DEX_WORK/rr.out"; then
    grep -q "conflict with recovery" "$DEX_WORK/rr.out" || fail "the snapshot lost rows it sees (not 120, no conflict)"
    echo "the transaction was cancelled by a recovery conflict (allowed)"
fi
[ "$(counts "$SB2" "k = 7")" = "0|0|0" ] || fail "sb2 after the delete: $(counts "$SB2" "k = 7")"

echo "== 3. entries of rows the standby has not replayed yet"
q1 -c "alter system set recovery_min_apply_delay = '4s'" -c "select pg_reload_conf()" >/dev/null
sleep 0.5
before=$(q1 -c "select pg_relation_size('t') / 8192")
qp -c "insert into t(k, v) values (999, 0)"   # sb1 holds this commit back 4 s, and all WAL after it
qp -c "insert into t(k, v) select 8000 + g % 10, g from generate_series(1, 20000) g"   # new heap blocks
after=$(qp -c "select pg_relation_size('t') / 8192")
got=$(counts "$SB1" "k between 8000 and 8010") || fail "sb1 failed on not yet replayed rows: $got"
echo "heap blocks on sb1 $before, on the primary $after; sb1 index|bitmap|seqscan: $got"
[ "$after" -gt "$before" ] || fail "the insert did not extend the heap"
[ "$got" = "0|0|0" ] || fail "sb1 sees rows it has not replayed: $got"
q1 -c "alter system reset recovery_min_apply_delay" -c "select pg_reload_conf()" >/dev/null
wait_replay "$SB1"
[ "$(counts "$SB1" "k between 8000 and 8010")" = "20000|20000|20000" ] || fail "sb1 after replay"

echo "== 4. differential under primary DML + VACUUM"
start_dml_load t 20 6
compare_loop "$SB1" sb1 "$pgb" t >"$DEX_WORK/c1.out" & c1=$!
compare_loop "$SB2" sb2 "$pgb" t >"$DEX_WORK/c2.out" & c2=$!
wait $pgb || true
r1=0; r2=0; wait $c1 || r1=1; wait $c2 || r2=1; wait $vac || true
cat "$DEX_WORK/c1.out" "$DEX_WORK/c2.out"
[ $r1 = 0 ] && [ $r2 = 0 ] || fail "a standby answered differently from its own seqscan"
wait_replay "$SB1"; wait_replay "$SB2"
for p in "$SB1" "$SB2"; do
    a=$(counts "$p" "k >= 0"); b=$(qp -c "select count(*) from t where k >= 0")
    [ "$a" = "$b|$b|$b" ] || fail "standby on $p after the load: $a, primary $b"
done

echo "== 5. reconnect, tiny cache, 0 remote reads, functions on a standby"
qp -c "select pg_terminate_backend(pid) from pg_stat_replication where application_name = 'walreceiver'" >/dev/null
qp -c "insert into t(k, v) select 9, g from generate_series(1, 10) g"
sleep 1; wait_replay "$SB1"; wait_replay "$SB2"
[ "$(counts "$SB1" "k = 9")" = "$(counts "$SB2" "k = 9")" ] || fail "standbys disagree after reconnecting"
stop_cluster sb2
echo "dex.cache_size = '256kB'" | as_user tee -a "$DEX_WORK/sb2/postgresql.conf" >/dev/null
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/sb2" -l "$DEX_WORK/sb2-server.log" -w start >/dev/null
wait_replay "$SB2"
a=$(counts "$SB2" "k >= 0"); b=$(qp -c "select count(*) from t where k >= 0")
[ "$a" = "$b|$b|$b" ] || fail "sb2 with a tiny cache: $a, primary $b"
for k in 11 22 33 44 55; do q1 -c "set dex.leaf_admission = 1; set enable_seqscan = off; set enable_bitmapscan = off; select count(*) from t where k = $k" >/dev/null; done
# one session (its first use of the index reads the index's owner word once), warmed, then measured
reads=$(q1 -c "set enable_seqscan = off; set enable_bitmapscan = off; select count(*) from t where k = 11" \
    -c "select dex_stats_reset()" -c "set enable_seqscan = off; set enable_bitmapscan = off;
    select count(*) from t where k = 11; select count(*) from t where k = 22; select count(*) from t where k = 33;
    select count(*) from t where k = 44; select count(*) from t where k = 55;" -c "select remote_reads, cache_hits from dex_stats()" | tail -1)
echo "sb1 cached point selects: remote_reads|cache_hits = $reads"
[ "${reads%%|*}" = 0 ] || fail "cached point selects on sb1 read remote memory: $reads"
q1 -c "select count(*) > 0 from dex_memnodes()" | grep -q t || fail "dex_memnodes() on a standby"
out=$(q1 -c "insert into t(k, v) values (1, 1)" 2>&1) && fail "insert on a standby succeeded"
grep -q "read-only transaction" <<<"$out" || fail "insert on a standby: $out"
out=$(q1 -c "select * from dex_free_orphans()" 2>&1) && fail "dex_free_orphans() ran on a standby"
grep -q "during recovery" <<<"$out" || fail "dex_free_orphans() on a standby: $out"

echo "== 5b. index-only scans: planned on the primary, not on a standby; a forced one checks the heap"
# wide rows (4 a page): a sequential scan costs more than the index-only scan
qp -c "create table iv(k int, pad text) with (autovacuum_enabled = off)"
qp -c "insert into iv select g, repeat('x', 1500) from generate_series(1, 4000) g"
qp -c "create index iv_k on iv using dex (k)"
qp -c "delete from iv where k % 4 = 0"
qp -c "vacuum analyze iv"   # every page all-visible, with free slots for later inserts
wait_replay "$SB1"; wait_replay "$SB2"
IOS_OFF="set enable_seqscan = off; set enable_bitmapscan = off;"
plan=$(qp -c "$IOS_OFF explain (costs off) select k from iv where k < 100")
grep -q "Index Only Scan using iv_k" <<<"$plan" || fail "the primary plans no index-only scan: $plan"
for p in "$SB1" "$SB2"; do
    plan=$(dpsql "$p" -d postgres -At -c "$IOS_OFF explain (costs off) select k from iv where k < 100")
    grep -q "Index Scan using iv_k" <<<"$plan" && ! grep -q "Index Only" <<<"$plan" \
        || fail "standby on $p: the column query is not a plain index scan: $plan"
    plan=$(dpsql "$p" -d postgres -At -c "set enable_bitmapscan = off; explain (costs off) select count(*) from iv")
    grep -q "Index Only" <<<"$plan" && fail "standby on $p plans an index-only scan for count(*): $plan"
    a=$(dpsql "$p" -d postgres -At -c "$IOS_OFF select count(*), sum(k) from iv where k < 2000")
    b=$(qp -c "select count(*), sum(k) from iv where k < 2000")
    [ "$a" = "$b" ] || fail "standby on $p: index scan $a, the primary $b"
done
# Replay paused on sb2: the primary's new rows land in its all-visible pages;
# their entries are in the tree, their heap inserts (which clear the pages'
# all-visible bits) not replayed. count(*) with every other path disabled is
# an index-only scan that must check the heap and count what the seqscan does.
q2 -c "select pg_wal_replay_pause()" >/dev/null
for _ in $(seq 1 100); do [ "$(q2 -c "select pg_get_wal_replay_pause_state()")" = paused ] && break; sleep 0.1; done
[ "$(q2 -c "select pg_get_wal_replay_pause_state()")" = paused ] || fail "sb2 did not pause its replay"
qp -c "insert into iv select g * 4, 'new' from generate_series(1, 100) g"   # fewer than a journal lane: no wait for sb2
sleep 0.5
ios="set dex.cache_leaves = off; $IOS_OFF"
plan=$(q2 -c "$ios explain (costs off) select count(*) from iv")
grep -q "Index Only Scan using iv_k" <<<"$plan" || fail "sb2: count(*) with other paths disabled is no index-only scan: $plan"
a=$(q2 -c "$ios select count(*) from iv")
b=$(q2 -c "set enable_indexscan = off; set enable_bitmapscan = off; select count(*) from iv")
echo "sb2 (replay paused, 100 rows inserted on the primary): index-only count $a, seqscan $b"
[ "$a" = "$b" ] && [ "$b" = 3000 ] || fail "sb2's index-only scan counted rows it has not replayed: $a vs $b"
q2 -c "select pg_wal_replay_resume()" >/dev/null
wait_replay "$SB2"
a=$(q2 -c "$ios select count(*) from iv"); b=$(qp -c "select count(*) from iv")
[ "$a" = "$b" ] && [ "$b" = 3100 ] || fail "sb2 after replay: index-only count $a, primary $b"
qp -c "drop table iv"

echo "== 5c. dead-entry hints: none removed while a standby's snapshot sees the rows"
# src/README.md "Dead-entry hints" (K9): the primary's index scan finds the
# hot key's old versions dead to everyone (no hot_standby_feedback), but
# sb2's REPEATABLE READ snapshot still sees them. The write-through kill
# logs its conflict horizon and waits in the killing backend until every
# standby replayed it -- which sb2's transaction holds back (replay waits
# max_standby_streaming_delay, 30 s, for it) -- so 2 s of further scans in
# that session remove nothing, and sb2's second count, asked meanwhile,
# equals its first. (Had the primary removed the entries, it would be 0.)
qp -c "create table hk(k int, v int) with (autovacuum_enabled = off)"
qp -c "create index hk_v on hk (v)"   # btree on v: every update of v is non-HOT
qp -c "insert into hk select g % 10, g from generate_series(1, 50) g"
qp -c "create index hk_k on hk using dex (k) with (write_back = off)"
wait_replay "$SB2"
HK="select count(*), sum(v) from hk where k = 5"
rm -f "$DEX_WORK/hk.in"; mkfifo "$DEX_WORK/hk.in"; chmod 666 "$DEX_WORK/hk.in"
dpsql "$SB2" -d postgres -At <"$DEX_WORK/hk.in" >"$DEX_WORK/hk.out" 2>&1 &
hk=$!
exec 7>"$DEX_WORK/hk.in"
echo "set enable_seqscan = off; set enable_bitmapscan = off;" >&7
echo "begin isolation level repeatable read; select 'first', 1, * from ($HK) q;" >&7
for _ in $(seq 1 50); do grep -q "^first" "$DEX_WORK/hk.out" && break; sleep 0.1; done
for _ in $(seq 1 10); do qp -c "update hk set v = v + 1000 where k = 5" >/dev/null; done
before=$(qp -c "select entries from dex_check('hk_k')")
qp -c "select dex_stats_reset()" >/dev/null
r=$(qp -c "set enable_seqscan = off; set enable_bitmapscan = off" -c "$HK" \
       -c "do \$\$ begin
             for i in 1..20 loop perform count(*) from hk where k = 5; perform pg_sleep(0.1); end loop;
           end \$\$" \
       -c "select 'stats', kills, kills_deferred from dex_stats()")
live=$(head -1 <<<"$r")
kd=$(sed -n 's/^stats|//p' <<<"$r")
after=$(qp -c "select entries from dex_check('hk_k')")
echo "primary: hot key $live, entries $before -> $after after 2 s of its index scans, kills|deferred $kd"
[ "$before" = 100 ] && [ "$after" = 100 ] || fail "the primary removed entries a standby snapshot sees: $before -> $after"
[ "${kd%%|*}" = 0 ] && [ "${kd#*|}" -ge 4 ] || fail "kills|kills_deferred: $kd"
echo "select 'second', 1, * from ($HK) q; commit;" >&7
exec 7>&-
wait $hk || true
cat "$DEX_WORK/hk.out"
first=$(grep "^first" "$DEX_WORK/hk.out" | cut -d'|' -f3-)
[ "$first" = "5|$(qp -c "select sum(g) from generate_series(1, 50) g where g % 10 = 5")" ] || fail "sb2's first count: $first"
grep -q "^second|1|$first\$" "$DEX_WORK/hk.out" || fail "sb2's snapshot lost rows it sees (second count differs from $first)"
wait_replay "$SB2"
a=$(q2 -c "set enable_seqscan = off; set enable_bitmapscan = off; $HK"); b=$(q2 -c "set enable_indexscan = off; set enable_bitmapscan = off; $HK")
[ "$a" = "$b" ] && [ "$a" = "$live" ] || fail "sb2 now: index $a, seqscan $b, primary $live"
qp -c "drop table hk"

echo "== 6. copies of the primary's data directory while it runs: refused"
# the early backup (a point in time before later inserts and VACUUMs), restored
rm -rf "$DEX_WORK/backup2"; cp -a "$DEX_WORK/backup" "$DEX_WORK/backup2"
echo "port = $BK" | as_user tee -a "$DEX_WORK/backup2/postgresql.conf" >/dev/null
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/backup2" -l "$DEX_WORK/backup2-server.log" -w -t 60 start >/dev/null || fail "backup2 start"
out=$(dpsql "$BK" -d postgres -At -c "set enable_seqscan = off; set enable_bitmapscan = off; select count(*) from t where k = 7" 2>&1) \
    && fail "a restored early backup answered through dex: $out"
echo "early backup: $out" | head -2
grep -q "lost its remote memory" <<<"$out" && grep -q "WAL ends at" <<<"$out" || fail "the early backup's refusal is unclear: $out"
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/backup2" -m fast -w stop >/dev/null
# a fresh copy started as a second primary: the running primary keeps the trees
rm -rf "$DEX_WORK/backup2"
as_user "$PG_BIN/pg_basebackup" -h "$DEX_WORK" -p "$PPORT" -U postgres -D "$DEX_WORK/backup2" -X stream -c fast >/dev/null
echo "port = $BK" | as_user tee -a "$DEX_WORK/backup2/postgresql.conf" >/dev/null
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/backup2" -l "$DEX_WORK/backup2-server.log" -w -t 60 start >/dev/null || fail "copy start"
out=$(dpsql "$BK" -d postgres -At -c "insert into t(k, v) values (12345, 1)" 2>&1) \
    && fail "a copy of the running primary wrote a dex index: $out"
echo "second primary: $out" | head -2
grep -qE "Waiting for the previous primary|lost its remote memory" <<<"$out" || fail "the copy's refusal is unclear: $out"
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/backup2" -m immediate -w stop >/dev/null
[ "$(counts "$SB1" "k = 12345")" = "0|0|0" ] || fail "the copy's row reached the index"

echo "== 7. failover, the old primary refused, an old backup refused"
stop_cluster sb2
final=$(qp -c "select count(*) from t where k >= 0")
stop_cluster pg
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/sb1" -w promote >/dev/null || fail "promote sb1"
q1 -c "insert into t(k, v) select 10, -g from generate_series(1, 500) g" || fail "insert on the promoted standby"
q1 -c "delete from t where k = 10 and v < 0 and v % 2 = 0" -c "vacuum t" || fail "vacuum on the promoted standby"
q1 -c "select * from dex_check('t_k')" >/dev/null || fail "dex_check on the promoted standby"
# Dead-entry hints come back once no live standby slot is left: sb2 is gone
# and the primary's worker expired its slot (5 s without a beat); sb1's own
# former slot is its own. (Before K3 let expired slots through, every standby
# that ever registered disabled kills for good.)
q1 -c "create table hk(k int, v int) with (autovacuum_enabled = off)" -c "create index hk_v on hk (v)" \
    -c "insert into hk select g % 10, g from generate_series(1, 50) g" -c "create index hk_k on hk using dex (k) with (write_back = off)"
# (bottom-up passes off: they would remove the dead versions before the scan
# that this counts the kills of)
for _ in $(seq 1 10); do q1 -c "set dex.bottom_up = off" -c "update hk set v = v + 1000 where k = 5" >/dev/null; done
q1 -c "select txid_current()" >/dev/null   # the horizon moves past the updaters
before=$(q1 -c "select entries from dex_check('hk_k')")
q1 -c "select dex_stats_reset()" >/dev/null
live=$(q1 -c "set enable_seqscan = off; set enable_bitmapscan = off; select count(*), sum(v) from hk where k = 5")
after=$(q1 -c "select entries from dex_check('hk_k')")
kr=$(q1 -c "select kills, kills_refused from dex_stats()")
echo "promoted sb1: hot key $live, entries $before -> $after, kills|refused $kr"
[ "$before" = 100 ] && [ "$after" = 50 ] && [ "${kr%%|*}" = 50 ] || fail "no kills after the standbys left: $before -> $after, $kr"
q1 -c "drop table hk"
a=$(counts "$SB1" "k >= 0"); b=$((final + 250))
[ "$a" = "$b|$b|$b" ] || fail "promoted sb1: $a, expected $b"
# the old primary comes back as a primary
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -l "$DEX_WORK/pg-server.log" -w start >/dev/null
out=$(qp -c "set enable_seqscan = off; set enable_bitmapscan = off; select count(*) from t where k = 10 and v < 0" 2>&1) \
    && fail "the old primary answered through dex after the failover: $out"
echo "old primary: $out" | head -3
grep -q "lost its remote memory" <<<"$out" || fail "the old primary's refusal is unclear: $out"
out=$(qp -c "insert into t(k, v) values (10, 1)" 2>&1) && fail "the old primary wrote a dex index after the failover"
stop_cluster pg
# the early backup, restored as a server of its own
{ echo "port = $BK"; } | as_user tee -a "$DEX_WORK/backup/postgresql.conf" >/dev/null
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/backup" -l "$DEX_WORK/backup-server.log" -w -t 60 start >/dev/null || fail "backup start"
out=$(dpsql "$BK" -d postgres -At -c "set enable_seqscan = off; set enable_bitmapscan = off; select count(*) from t where k = 7" 2>&1) \
    && fail "a restored backup answered through dex: $out"
echo "restored backup: $out" | head -3
grep -q "lost its remote memory" <<<"$out" || fail "the restored backup's refusal is unclear: $out"
# the promoted server is still fine
[ "$(counts "$SB1" "k = 10 and v < 0")" = "250|250|250" ] || fail "promoted sb1 after the others tried"
echo "standby: ok"
