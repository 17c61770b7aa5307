#!/usr/bin/env bash
# Write-back indexes on a hot standby (extension/dexwbstandby.c, src/README.md
# "Write-back mode", standbys): a real streaming replica (pg_basebackup -R)
# reads a write_back = on index whose newest entries live in the primary's
# dirty frames.
# 1. Differential under load: the primary runs random DML + VACUUM with a
#    small node cache (write-backs on eviction and every 250 ms); the standby
#    compares index scans with seqscans inside one snapshot: 0 differences.
# 2. A primary with dex.writeback_interval = 1h: the standby's scan of the
#    freshly inserted rows asks for a write-back (the registry's
#    flush_request_lsn) and answers with them within its 2 s wait bound.
#    Then the primary's dex worker is stopped (SIGSTOP) with new rows in its
#    dirty frames: point scans of other keys (an int and a text index)
#    answer at once and exactly (dex_stats: no wait), while point scans of
#    the new keys (also one element of = ANY) wait and fail with a clear
#    ERROR (dex.standby_wait_timeout) instead of answering without them;
#    once the worker goes on (SIGCONT) they answer with them.
# 3. The primary crashes with dirty frames: until its first use of the index
#    replays the lost changes, the standby refuses the same way; then it
#    answers exactly.
source "$(dirname "$0")/common.sh"
start_memnode mem "$MPORT" 512MB
SB1=$(free_port)
trap 'test_cleanup; stop_cluster sb1' EXIT
start_cluster pg "$PPORT" "$MEMNODE_URL" "wal_level = replica" "max_wal_senders = 4" "wal_keep_size = '512MB'" \
    "dex.cache_size = '1MB'" "dex.writeback_interval = '250ms'" "dex.standby_wait_timeout = '30s'"
qp() { dpsql "$PPORT" -d postgres -At "$@"; }
q1() { dpsql "$SB1" -d postgres -At "$@"; }

# count_on_standby LO HI: the standby's index count of k in [LO, HI] (2 s wait bound)
count_on_standby() {
    q1 -c "set dex.standby_wait_timeout = '2s'; set enable_seqscan = off; set enable_bitmapscan = off;
           select count(*) from t where k between $1 and $2"
}
# standby_counts_eventually LO HI N WHEN: within 10 s the standby counts N
standby_counts_eventually() {
    local n=""
    for _ in $(seq 1 50); do
        n=$(count_on_standby "$1" "$2" 2>/dev/null) && break
        sleep 0.2
    done
    [ "$n" = "$3" ] || fail "$4 the standby counts ${n:-an error}, expected $3"
}

qp -c "create extension dex"
# (autovacuum off: its VACUUM would write the index back, or replay it after
# the crash, at a moment of its choosing -- phases 2 and 3 need it not to)
qp -c "create table t(k int, v bigint) with (autovacuum_enabled = off)" \
   -c "insert into t select g % 1000, g from generate_series(1, 30000) g"
qp -c "create index t_k on t using dex (k) with (write_back = on)" -c "analyze t"
# a byte-string (text) write-back index for the point scans of phase 2b
qp -c "create table ts(s text, v int) with (autovacuum_enabled = off)" \
   -c "insert into ts select md5(g::text), g from generate_series(1, 2000) g" \
   -c "create index ts_s on ts using dex (s) with (write_back = on)" -c "analyze ts"
# (hot_standby_feedback: a scan that waits for a write-back must not be
# cancelled by the replay of the VACUUMs meanwhile)
make_standby sb1 "$SB1" "dex.cache_size = '1MB'" "dex.standby_wait_timeout = '30s'" "hot_standby_feedback = on"
wait_replay "$SB1"
plan=$(q1 -c "set enable_seqscan = off; set enable_bitmapscan = off; explain (costs off) select count(*) from t where k = 5")
grep -q "Index Scan using t_k" <<<"$plan" || fail "the standby does not use the write-back index: $plan"

echo "== 1. differential under primary DML + VACUUM"
start_dml_load t 20 5
compare_loop "$SB1" sb1 "$pgb" t >"$DEX_WORK/c1.out" & c1=$!
wait $pgb || true
r1=0; wait $c1 || r1=1; wait $vac || true
cat "$DEX_WORK/c1.out"
[ $r1 = 0 ] || fail "the standby answered differently from its own seqscan"
wb=$(qp -c "select write_backs from dex_stats()")
echo "primary: $wb dirty frames written back"
[ "$wb" -gt 0 ] || fail "expected write-backs on the primary"
wait_replay "$SB1"
a=$(q1 -c "set enable_seqscan = off; set enable_bitmapscan = off; select count(*), sum(v) from t where k >= 0")
b=$(qp -c "select count(*), sum(v) from t")
[ "$a" = "$b" ] || fail "standby index scan after the load: $a, primary $b"

echo "== 2. a primary with dex.writeback_interval = 1h writes back when a standby's scan asks"
qp -c "alter system set dex.writeback_interval = '1h'" -c "select pg_reload_conf()" >/dev/null
qp -c "select dex_flush()" >/dev/null
sleep 1.5   # the worker picks up the new interval
dirty_on_primary() { qp -c "select coalesce(sum(dirty), 0) from dex_cache_stats() where index = 't_k'::regclass"; }
qp -c "insert into t select 5000 + g, g from generate_series(1, 200) g"
wait_replay "$SB1"
dirty=$(dirty_on_primary); echo "dirty t_k frames on the primary: $dirty"
[ "$dirty" -gt 0 ] || fail "expected dirty frames on the primary"
# within the 2 s wait bound: the scan's flush request, not the 1 h interval
n=$(count_on_standby 5001 5200 2>&1) || fail "the standby's scan did not get its write-back: $n"
[ "$n" = 200 ] || fail "the standby counts $n rows, expected 200"
echo "the standby's scan asked, the primary wrote back: 200 rows"

echo "== 2b. a primary whose dex worker does not write back: the standby waits, then refuses"
worker=$(qp -c "select pid from pg_stat_activity where backend_type = 'dex worker'")
[ -n "$worker" ] || fail "no dex worker on the primary"
qp -c "insert into t select 5200 + g, g from generate_series(1, 200) g" \
   -c "insert into ts select md5(g::text), g from generate_series(5201, 5400) g"
wait_replay "$SB1"
# standby_point SQL: run a point select with a 1 s wait bound, index scans only
standby_point() {
    q1 -c "set dex.standby_wait_timeout = '1s'; set enable_seqscan = off; set enable_bitmapscan = off; $1"
}
seq_t7=$(q1 -c "set enable_indexscan = off; set enable_bitmapscan = off; select count(*), sum(v) from t where k = 7")
seq_ts7=$(q1 -c "set enable_indexscan = off; set enable_bitmapscan = off; select count(*), sum(v) from ts where s = md5('7')")
q1 -c "select dex_stats_reset()" >/dev/null
# (stopped for about 2 s only: its beats keep the primary's writer lease,
# DEX_LEASE_MS = 3 s)
trap 'kill -CONT "$worker" 2>/dev/null || true; test_cleanup; stop_cluster sb1' EXIT
kill -STOP "$worker"
# Point scans of keys without a pending change answer at once, exactly
# (only their key's changes must be written back: the point table).
p_t7=$(standby_point "select count(*), sum(v) from t where k = 7" 2>&1) || p_t7="ERROR $p_t7"
p_ts7=$(standby_point "select count(*), sum(v) from ts where s = md5('7')" 2>&1) || p_ts7="ERROR $p_ts7"
st_free=$(q1 -c "select standby_wb_scans, standby_wb_waits from dex_stats()")
# ... while a point scan of a pending key, of either index, and any range
# scan of the tree must wait for the write-back: refused after 1 s
rc1=0; o1=$(standby_point "select count(*) from t where k = 5300" 2>&1) || rc1=$?
rc2=0; o2=$(standby_point "select count(*) from ts where s = md5('5300')" 2>&1) || rc2=$?
rc3=0; o3=$(standby_point "select count(*) from t where k = any(array[7, 5301])" 2>&1) || rc3=$?
kill -CONT "$worker"
[ "$p_t7" = "$seq_t7" ] || fail "standby point scan k = 7: $p_t7, its seqscan $seq_t7"
[ "$p_ts7" = "$seq_ts7" ] || fail "standby point scan s = md5('7'): $p_ts7, its seqscan $seq_ts7"
[ "$st_free" = "2|0" ] || fail "standby scans|waits for the two quiet point scans: $st_free (expected 2|0)"
echo "point scans of quiet keys while the primary's worker stood still: exact, no wait ($st_free)"
for o in "$rc1 $o1" "$rc2 $o2" "$rc3 $o3"; do
    [ "${o%% *}" != 0 ] || fail "expected a point scan of a pending key to refuse, got: $o"
    grep -q 'has not written back the changes' <<<"$o" || fail "unexpected error: $o"
done
grep -q 'HINT:' <<<"$o1" || fail "no HINT: $o1"
echo "refused: $(head -1 <<<"$o1")"
# the worker, running again, flushes for the request (its interval is still 1 h)
standby_counts_eventually 5201 5400 200 "after the worker went on"
[ "$(standby_point "select count(*) from t where k = 5300")" = 1 ] || fail "k = 5300 after the write-back"
[ "$(standby_point "select count(*) from ts where s = md5('5300')")" = 1 ] || fail "s = md5('5300') after the write-back"
echo "after the worker went on: 200 rows, the pending keys found"

echo "== 3. the primary crashes with dirty frames"
qp -c "insert into t select 6000 + g, g from generate_series(1, 100) g"
wait_replay "$SB1"
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -m immediate stop >/dev/null
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -l "$DEX_WORK/pg-server.log" -w start >/dev/null || fail "primary restart"
# the new life's worker flushes (and logs its position) every 250 ms again
qp -c "alter system reset dex.writeback_interval" -c "select pg_reload_conf()" >/dev/null
for _ in $(seq 1 100); do
    [ "$(q1 -c "select status from pg_stat_wal_receiver" 2>/dev/null)" = streaming ] && break
    sleep 0.1
done
wait_replay "$SB1"
out=$(count_on_standby 6001 6100 2>&1) && fail "expected a refusal before the primary's replay, got: $out"
grep -q 'has not written back the changes' <<<"$out" || fail "unexpected error: $out"
echo "refused before the primary's replay: $(sed -n 2p <<<"$out")"
# the primary's first use replays what the crash took, then its worker flushes
[ "$(qp -c "set enable_seqscan = off; set enable_bitmapscan = off; select count(*) from t where k between 6001 and 6100")" = 100 ] \
    || fail "the primary lost rows"
standby_counts_eventually 6001 6100 100 "after the primary's replay"
a=$(q1 -c "set enable_seqscan = off; set enable_bitmapscan = off; select count(*), sum(v) from t where k >= 0")
b=$(qp -c "select count(*), sum(v) from t")
[ "$a" = "$b" ] || fail "standby index scan after the crash: $a, primary $b"
echo "write-back standby: ok"
