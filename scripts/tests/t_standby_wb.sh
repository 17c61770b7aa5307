#!/usr/bin/env bash
# Write-back indexes on a hot standby (extension/dexwbstandby.c, src/README.md
# "Write-back mode", standbys): a real streaming replica (pg_basebackup -R)
# reads a write_back = on index whose newest entries live in the primary's
# dirty frames.
# 1. Differential under load: the primary runs random DML + VACUUM with a
#    small node cache (write-backs on eviction and every 250 ms); the standby
#    compares index scans (ranges, points, = ANY) with seqscans inside one
#    snapshot: 0 differences -- also with dex.offload = on for some of them
#    (the memory node finishes descents that miss above the leaves).
# 1b. Sustained ascending inserts (pgbench, a sequence) into a write-back
#    index: its hottest leaf, never covered by the standby's replay while it
#    keeps changing, still gets written back (it drains, W14): checkpoints
#    meanwhile do not time out in their fence, the standby's scans of the
#    whole range equal its seqscans within their 5 s wait bound.
# 1c. dex.write_back_with_standbys = off on the primary: while the standby is
#    attached, write-back pauses (dex_cluster().write_back_paused); inserts
#    and deletes at the hot end of a write-back index are all written through
#    (dex_stats: none kept in the cache), and the standby's scans of that
#    range and of points in it equal its seqscans and wait for nothing
#    (standby_wb_waits unchanged). Back on: changes stay in the cache again.
# 1d. dex.write_back_with_standbys = auto: with the standby attached but not
#    reading, the primary's changes stay in its cache; the standby's scan of
#    them waits and asks for a write-back, which pauses write-back: the next
#    changes are written through and the standby's scan of them waits for
#    nothing; dex.standby_pause_hold without a request resumes write-back.
# 2. A primary with dex.writeback_interval = 1h: the standby's scan of the
#    freshly inserted rows asks for a write-back (the registry's
#    flush_request_lsn) and answers with them within its 2 s wait bound.
#    Then the primary's dex worker is stopped (SIGSTOP) with new rows in its
#    dirty frames: point scans of other keys (an int and a text index) and a
#    range scan of other keys answer at once and exactly (dex_stats: no
#    wait), while point scans of the new keys (also one element of = ANY)
#    and ranges meeting them wait and fail with a clear ERROR
#    (dex.standby_wait_timeout) instead of answering without them; once the
#    worker goes on (SIGCONT) they answer with them.
# 3. The primary crashes with dirty frames: until its first use of the index
#    replays the lost changes, the standby refuses the same way; then it
#    answers exactly.
# 4. Failover: the primary crashes with dirty frames and the standby is
#    promoted -- after the standby itself crashed and started again from a
#    restartpoint. Its replay collected the primary's logged entry changes
#    (dexwbcollect.c): the promoted server's first use replays them, and the
#    index answers as its seqscan, rows of the dirty frames included.
source "$(dirname "$0")/common.sh"
start_memnode mem "$MPORT" 512MB
SB1=$(free_port)
trap 'test_cleanup; stop_cluster sb1' EXIT
start_cluster pg "$PPORT" "$MEMNODE_URL" "dex.write_back_with_standbys = on" "wal_level = replica" "max_wal_senders = 4" "wal_keep_size = '512MB'" \
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
# two small write-back indexes (one leaf each, room to spare) for the keys
# phase 2b leaves pending: an insert into a cached leaf with room stays in the
# primary's cache for sure (a split, or a leaf the primary does not cache,
# writes it through -- and a standby's scan does not wait for that, its WAL
# record says so)
qp -c "create table tp(k int, v int) with (autovacuum_enabled = off)" \
   -c "insert into tp select g, g from generate_series(1, 5) g" \
   -c "create index tp_k on tp using dex (k) with (write_back = on)" \
   -c "create table tq(s text, v int) with (autovacuum_enabled = off)" \
   -c "insert into tq select md5(g::text), g from generate_series(1, 5) g" \
   -c "create index tq_s on tq using dex (s) with (write_back = on)" -c "analyze tp" -c "analyze tq"
# (hot_standby_feedback: a scan that waits for a write-back must not be
# cancelled by the replay of the VACUUMs meanwhile)
make_standby sb1 "$SB1" "dex.cache_size = '1MB'" "dex.standby_wait_timeout = '30s'" "hot_standby_feedback = on"
wait_replay "$SB1"
plan=$(q1 -c "set enable_seqscan = off; set enable_bitmapscan = off; explain (costs off) select count(*) from t where k = 5")
grep -q "Index Scan using t_k" <<<"$plan" || fail "the standby does not use the write-back index: $plan"

echo "== 1. differential under primary DML + VACUUM"
start_dml_load t 20 5
compare_loop "$SB1" sb1 "$pgb" t >"$DEX_WORK/c1.out" & c1=$!
# point scans too (the point table and spans: each waits only for its keys)
compare_loop "$SB1" sb1-points "$pgb" t "k = any(array[@, @ + 1, @ + 50])" >"$DEX_WORK/c2.out" & c2=$!
# and the text index: inserts and deletes of md5 keys on the primary, points
# and ranges of them on the standby
cat >"$DEX_WORK/dml_ts.sql" <<'SQL'
\set k random(0, 2999)
\set op random(1, 10)
INSERT INTO ts(s, v) SELECT md5(:k::text), :op WHERE :op <= 5;
DELETE FROM ts WHERE s = md5(:k::text) AND v % 7 = :op % 7 AND :op BETWEEN 6 AND 8;
SQL
chmod a+r "$DEX_WORK/dml_ts.sql"
"$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$PPORT" -U postgres -c 1 -T 18 -f "$DEX_WORK/dml_ts.sql" postgres >/dev/null 2>&1 &
pgb_ts=$!
ts_points="s = any(array[md5('@'), md5('@1')])"
ts_range="s between least(md5('@'), md5('@9')) and greatest(md5('@'), md5('@9'))"
for w in "$ts_points" "$ts_range"; do  # (the comparison needs the index scan)
    plan=$(q1 -c "set enable_seqscan = off; set enable_bitmapscan = off;
                  explain (costs off) select count(*) from ts where ${w//@/7}")
    grep -q "Index Scan using ts_s" <<<"$plan" || fail "the standby plan for [$w] does not use ts_s: $plan"
done
compare_loop "$SB1" sb1-text-points "$pgb_ts" ts "$ts_points" >"$DEX_WORK/c3.out" & c3=$!
compare_loop "$SB1" sb1-text-ranges "$pgb_ts" ts "$ts_range" >"$DEX_WORK/c4.out" & c4=$!
# and ranges whose descents the standby's memory node finishes (dex.offload =
# on: every miss above the leaves is offloaded; W15 on a standby, behind W11)
PGOPTIONS="-c dex.offload=on" compare_loop "$SB1" sb1-offloaded "$pgb" t >"$DEX_WORK/c5.out" & c5=$!
wait $pgb || true
wait $pgb_ts || true
r1=0; wait $c1 || r1=1; wait $c2 || r1=1; wait $c3 || r1=1; wait $c4 || r1=1; wait $c5 || r1=1; wait $vac || true
cat "$DEX_WORK"/c[1-5].out
[ $r1 = 0 ] || fail "the standby answered differently from its own seqscan"
off=$(q1 -c "select offloads from dex_stats()")
echo "standby: $off reads finished by the memory node"
[ "$off" -gt 0 ] || fail "expected offloaded reads on the standby (dex.offload = on)"
wb=$(qp -c "select write_backs from dex_stats()")
echo "primary: $wb dirty frames written back"
[ "$wb" -gt 0 ] || fail "expected write-backs on the primary"
# Splits of dirty leaves whose rows the standby had not replayed yet went on
# without waiting for it (W13): their entries stayed dirty, and the standby's
# scans above still equalled its seqscans.
ds=$(qp -c "select dirty_splits from dex_stats()")
echo "primary: $ds dirty leaves split without writing their entries"
[ "$ds" -gt 0 ] || fail "expected splits of dirty leaves on the primary"
wait_replay "$SB1"
a=$(q1 -c "set enable_seqscan = off; set enable_bitmapscan = off; select count(*), sum(v) from t where k >= 0")
b=$(qp -c "select count(*), sum(v) from t")
[ "$a" = "$b" ] || fail "standby index scan after the load: $a, primary $b"

echo "== 1b. sustained ascending inserts: the hottest leaf still reaches remote memory"
# A leaf that keeps taking inserts is never covered by what the standby
# replayed; kept dirty by splits that do not wait (W13), it must still be
# written back (W14: it drains), or checkpoints (fence timeout 10 s here),
# the standby's scans of its range and crash redo would wait for it for ever.
qp -c "alter system set dex.checkpoint_writeback_timeout = '10s'" -c "select pg_reload_conf()" >/dev/null
qp -c "create table ta(k bigint, v int) with (autovacuum_enabled = off)" -c "create sequence ta_seq" \
   -c "create index ta_k on ta using dex (k) with (write_back = on)" -c "select dex_stats_reset()" >/dev/null
printf "INSERT INTO ta VALUES (nextval('ta_seq'), 1);\n" >"$DEX_WORK/asc.sql"
chmod a+r "$DEX_WORK/asc.sql"
fence_logs() { grep -c "goes on before the dirty nodes" "$DEX_WORK/pg-server.log" || true; }
fence0=$(fence_logs)
"$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$PPORT" -U postgres -c 2 -j 2 -T 14 -f "$DEX_WORK/asc.sql" postgres \
    >"$DEX_WORK/asc.out" 2>&1 &
pga=$!
sleep 2
probes=0
for i in 1 2 3 4 5; do
    qp -c "checkpoint" >/dev/null || fail "a checkpoint failed under ascending inserts"
    # the whole range, through the index and as a seqscan, in one snapshot:
    # it meets the hottest leaf, so it waits for that leaf's write-back
    r=$(q1 -c "set dex.standby_wait_timeout = '5s'" -c "begin isolation level repeatable read" \
           -c "set enable_seqscan = off" -c "set enable_bitmapscan = off" -c "select count(*) from ta where k > 0" \
           -c "set enable_seqscan = on" -c "set enable_indexscan = off" -c "select count(*) from ta where k > 0" \
           -c "commit" 2>&1) || fail "the standby's scan of the hot range failed: $r"
    read -r a b <<<"$(tr '\n' ' ' <<<"$r")"
    [ "$a" = "$b" ] || fail "the standby's index counts $a rows of ta, its seqscan $b"
    probes=$((probes + 1))
    sleep 1
done
wait $pga || { cat "$DEX_WORK/asc.out"; fail "pgbench (ascending inserts) failed"; }
ds=$(qp -c "select dirty_splits from dex_stats()")
fence1=$(fence_logs)
echo "ascending inserts: $(sed -n 's/^number of transactions actually processed: //p' "$DEX_WORK/asc.out") rows," \
     "$ds dirty splits, $probes standby scans of the hot range equal to their seqscans, fence timeouts $((fence1 - fence0))"
[ "$ds" -gt 0 ] || fail "expected splits of dirty leaves under ascending inserts"
[ "$fence1" = "$fence0" ] || fail "a checkpoint went on without the write-back of the hottest leaf"
qp -c "select dex_flush()" -c "drop table ta" -c "drop sequence ta_seq" >/dev/null
qp -c "alter system reset dex.checkpoint_writeback_timeout" -c "select pg_reload_conf()" >/dev/null

echo "== 1c. dex.write_back_with_standbys = off: the primary writes through, the standby's scans never wait"
# paused_on_primary WANT [TENTHS]: within 5 s (TENTHS/10 s) dex_cluster().write_back_paused is WANT
paused_on_primary() {
    for _ in $(seq 1 "${2:-50}"); do
        [ "$(qp -c "select write_back_paused from dex_cluster()")" = "$1" ] && return 0
        sleep 0.1
    done
    fail "dex_cluster().write_back_paused did not turn $1 on the primary"
}
qp -c "alter system set dex.write_back_with_standbys = off" -c "select pg_reload_conf()" >/dev/null
paused_on_primary t
# what was dirty when the standby attached goes out first (its scans wait for that, as before)
qp -c "select dex_flush()" >/dev/null
wait_replay "$SB1"
qp -c "create table tc(k bigint, v int) with (autovacuum_enabled = off)" -c "create sequence tc_seq" \
   -c "insert into tc select nextval('tc_seq'), 1 from generate_series(1, 2000)" \
   -c "create index tc_k on tc using dex (k) with (write_back = on)" >/dev/null
wait_replay "$SB1"
stat_p() { qp -c "select $1 from dex_stats()"; }
stat_s() { q1 -c "select $1 from dex_stats()"; }
in_place0=$(stat_p dirty_updates); through0=$(stat_p wb_paused_writes)
waits0=$(stat_s standby_wb_waits); scans0=$(stat_s standby_wb_scans)
printf "INSERT INTO tc VALUES (nextval('tc_seq'), 1);\nDELETE FROM tc WHERE k = (SELECT max(k) - 7 FROM tc) AND v = 1;\n" \
    >"$DEX_WORK/tc.sql"
chmod a+r "$DEX_WORK/tc.sql"
"$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$PPORT" -U postgres -c 2 -j 2 -T 6 -f "$DEX_WORK/tc.sql" postgres \
    >"$DEX_WORK/tc.out" 2>&1 &
pgc=$!
hot=0
while kill -0 $pgc 2>/dev/null; do
    # the hot range and one point in it, index and seqscan in one snapshot (0.3 s wait bound: none expected)
    r=$(q1 -c "set dex.standby_wait_timeout = '300ms'" -c "begin isolation level repeatable read" \
           -c "set enable_seqscan = off" -c "set enable_bitmapscan = off" \
           -c "select count(*), sum(k) from tc where k > (select max(k) - 300 from tc)" \
           -c "select count(*) from tc where k = (select max(k) - 3 from tc)" \
           -c "set enable_seqscan = on" -c "set enable_indexscan = off" \
           -c "select count(*), sum(k) from tc where k > (select max(k) - 300 from tc)" \
           -c "select count(*) from tc where k = (select max(k) - 3 from tc)" -c "commit" 2>&1) ||
        fail "the standby's scan of the hot range failed: $r"
    read -r a p b q <<<"$(tr '\n' ' ' <<<"$r")"
    [ "$a" = "$b" ] && [ "$p" = "$q" ] || fail "the standby's index answers $a / $p, its seqscan $b / $q"
    hot=$((hot + 1))
done
wait $pgc || { cat "$DEX_WORK/tc.out"; fail "pgbench (inserts and deletes at the hot end) failed"; }
in_place=$(( $(stat_p dirty_updates) - in_place0 )); through=$(( $(stat_p wb_paused_writes) - through0 ))
waits=$(( $(stat_s standby_wb_waits) - waits0 )); scans=$(( $(stat_s standby_wb_scans) - scans0 ))
echo "paused for the standby: $through changes written through, $in_place kept in the cache;" \
     "standby: $hot checks equal to its seqscans, $scans index scans, $waits waited"
[ "$through" -gt 100 ] || fail "expected the primary's changes written through while the standby is attached"
[ "$in_place" = 0 ] || fail "$in_place changes stayed in the primary's cache while write-back was paused for the standby"
[ "$hot" -gt 0 ] && [ "$scans" -gt 0 ] || fail "no standby scan of the hot range ran"
[ "$waits" = 0 ] || fail "$waits standby scans waited for a write-back while the primary wrote through"
# on again: changes stay in the cache again (the counter this phase checks can move)
qp -c "alter system reset dex.write_back_with_standbys" -c "select pg_reload_conf()" >/dev/null
paused_on_primary f
qp -c "insert into tc select nextval('tc_seq'), 2 from generate_series(1, 200) g" >/dev/null
in_place=$(( $(stat_p dirty_updates) - in_place0 ))
[ "$in_place" -gt 0 ] || fail "write-back did not resume with dex.write_back_with_standbys back on"
wait_replay "$SB1"
a=$(q1 -c "set enable_seqscan = off; set enable_bitmapscan = off; select count(*), sum(k) from tc where k > 0")
b=$(qp -c "select count(*), sum(k) from tc")
[ "$a" = "$b" ] || fail "standby index scan of tc after resuming: $a, primary $b"
qp -c "select dex_flush()" -c "drop table tc" -c "drop sequence tc_seq" >/dev/null

echo "== 1d. dex.write_back_with_standbys = auto: changes stay in the cache until a standby's scan asks for them"
# (a 1 h interval: only the standby's request writes the new rows back)
qp -c "alter system set dex.write_back_with_standbys = auto" -c "alter system set dex.standby_pause_hold = '5s'" \
   -c "alter system set dex.writeback_interval = '1h'" -c "select pg_reload_conf()" >/dev/null
paused_on_primary f 100   # (the last request, before 1c, is older than the hold)
qp -c "create table td(k bigint, v int) with (autovacuum_enabled = off)" \
   -c "insert into td select g, 1 from generate_series(1, 2000) g" \
   -c "create index td_k on td using dex (k) with (write_back = on)" -c "select dex_flush()" >/dev/null
# td_insert FROM: 200 rows above FROM; sets in_place / through (changes kept in the cache / written through)
td_insert() {
    local i0 t0
    i0=$(stat_p dirty_updates); t0=$(stat_p wb_paused_writes)
    qp -c "insert into td select $1 + g, 1 from generate_series(1, 200) g" >/dev/null
    in_place=$(( $(stat_p dirty_updates) - i0 )); through=$(( $(stat_p wb_paused_writes) - t0 ))
}
# td_standby_count ABOVE TIMEOUT: once replayed, the standby's index count of td above ABOVE must be 200; sets waited
td_standby_count() {
    local w0 n
    wait_replay "$SB1"
    w0=$(stat_s standby_wb_waits)
    n=$(q1 -c "set dex.standby_wait_timeout = '$2'" -c "set enable_seqscan = off" -c "set enable_bitmapscan = off" \
           -c "select count(*) from td where k > $1" 2>&1) || fail "the standby's scan of td failed: $n"
    [ "$n" = 200 ] || fail "the standby counts $n rows of td above $1, expected 200"
    waited=$(( $(stat_s standby_wb_waits) - w0 ))
}
td_insert 2000
echo "standby attached, not reading: $in_place changes kept in the primary's cache, $through written through"
[ "$in_place" -gt 0 ] && [ "$through" = 0 ] || fail "auto: write-back paused although no standby scan asked"
# the standby's scan of the new rows waits for their write-back and asks: write-back pauses
td_standby_count 2000 5s
[ "$waited" -gt 0 ] || fail "the standby's scan of cached changes did not wait"
paused_on_primary t
td_insert 2200
echo "after the standby's request: $through changes written through, $in_place kept in the cache"
[ "$through" -gt 0 ] && [ "$in_place" = 0 ] || fail "auto: changes stayed in the cache after a standby's scan asked"
td_standby_count 2200 300ms
[ "$waited" = 0 ] || fail "the standby's scan waited for changes written through"
# no request for dex.standby_pause_hold: changes stay in the cache again
paused_on_primary f 150
td_insert 2400
[ "$in_place" -gt 0 ] || fail "auto: write-back did not resume after the hold"
echo "no request for dex.standby_pause_hold: changes kept in the cache again"
qp -c "alter system reset dex.write_back_with_standbys" -c "alter system reset dex.standby_pause_hold" \
   -c "alter system reset dex.writeback_interval" -c "select pg_reload_conf()" -c "select dex_flush()" \
   -c "drop table td" >/dev/null

echo "== 2. a primary with dex.writeback_interval = 1h writes back when a standby's scan asks"
qp -c "alter system set dex.writeback_interval = '1h'" -c "select pg_reload_conf()" >/dev/null
qp -c "select dex_flush()" >/dev/null
sleep 1.5   # the worker picks up the new interval
dirty_on_primary() { qp -c "select coalesce(sum(dirty), 0) from dex_cache_stats() where index = 't_k'::regclass"; }
# (and rows among the old keys: the new keys fill the rightmost leaf, which
# may end just split, written through -- these leave leaves dirty for sure)
qp -c "insert into t select 5000 + g, g from generate_series(1, 200) g" \
   -c "insert into t select (g * 37) % 1000, 0 from generate_series(1, 100) g"
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
# (tp's and tq's leaves cached on the primary first: the new keys stay in its cache)
qp -c "set enable_seqscan = off" -c "set enable_bitmapscan = off" \
   -c "select count(*) from tp where k > 0" -c "select count(*) from tq where s > ''" >/dev/null
qp -c "insert into t select 5200 + g, g from generate_series(1, 200) g" \
   -c "insert into ts select md5(g::text), g from generate_series(5201, 5400) g" \
   -c "insert into tp select g, g from generate_series(5298, 5302) g" \
   -c "insert into tq select md5(g::text), g from generate_series(5298, 5302) g"
wait_replay "$SB1"
# standby_point SQL: run a select with a 0.3 s wait bound, index scans only
standby_point() {
    q1 -c "set dex.standby_wait_timeout = '300ms'; set enable_seqscan = off; set enable_bitmapscan = off; $1"
}
seqscan() { q1 -c "set enable_indexscan = off; set enable_bitmapscan = off; $1"; }
quiet_sql=("select count(*), sum(v) from t where k = 7"
           "select count(*), sum(v) from ts where s = md5('7')"
           "select count(*), sum(v) from t where k between 0 and 999")
pending_sql=("select count(*) from tp where k = 5300"
             "select count(*) from tq where s = md5('5300')"
             "select count(*) from tp where k = any(array[3, 5301])"
             "select count(*) from tp where k between 5299 and 5301"
             "select count(*) from tq where s > ''")
seq_answers=(); for sql in "${quiet_sql[@]}"; do seq_answers+=("$(seqscan "$sql")"); done
q1 -c "select dex_stats_reset()" >/dev/null
# (stopped for under 2 s: its beats keep the primary's writer lease,
# DEX_LEASE_MS = 3 s)
trap 'kill -CONT "$worker" 2>/dev/null || true; test_cleanup; stop_cluster sb1' EXIT
kill -STOP "$worker"
# Scans whose key ranges meet no pending change answer at once, exactly:
# points of other keys (the point table), a range of other keys (spans).
answers=(); for sql in "${quiet_sql[@]}"; do answers+=("$(standby_point "$sql" 2>&1 || echo ERROR)"); done
st_free=$(q1 -c "select standby_wb_scans, standby_wb_waits from dex_stats()")
# ... while a point scan of a pending key, of either index, and a range
# meeting one must wait for the write-back: refused after 0.3 s
outs=(); for sql in "${pending_sql[@]}"; do outs+=("$(standby_point "$sql" 2>&1 && echo ANSWERED || true)"); done
kill -CONT "$worker"
for i in "${!quiet_sql[@]}"; do
    [ "${answers[$i]}" = "${seq_answers[$i]}" ] \
        || fail "standby [${quiet_sql[$i]}]: ${answers[$i]}, its seqscan ${seq_answers[$i]}"
done
[ "$st_free" = "3|0" ] || fail "standby scans|waits for the three quiet scans: $st_free (expected 3|0)"
echo "scans of quiet keys while the primary's worker stood still: exact, no wait ($st_free)"
for i in "${!pending_sql[@]}"; do
    grep -q 'has not written back the changes' <<<"${outs[$i]}" \
        || fail "expected [${pending_sql[$i]}] to refuse, got: ${outs[$i]}"
done
o1=${outs[0]}
grep -q 'HINT:' <<<"$o1" || fail "no HINT: $o1"
echo "refused: $(head -1 <<<"$o1")"
# the worker, running again, flushes for the request (its interval is still 1 h)
standby_counts_eventually 5201 5400 200 "after the worker went on"
[ "$(standby_point "select count(*) from tp where k = 5300")" = 1 ] || fail "k = 5300 after the write-back"
[ "$(standby_point "select count(*) from tq where s = md5('5300')")" = 1 ] || fail "s = md5('5300') after the write-back"
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

echo "== 4. failover: the primary crashes with dirty frames, the standby is promoted"
qp -c "alter system set dex.writeback_interval = '1h'" -c "select pg_reload_conf()" >/dev/null
qp -c "select dex_flush()" >/dev/null
sleep 1.5   # the worker picks up the new interval
# The standby starts its replay again from a fresh restartpoint R' (below):
# a checkpoint on the primary, replayed, made a restartpoint on the standby.
qp -c "checkpoint"
wait_replay "$SB1"
q1 -c "checkpoint"
# rows A: logged after R', then written back (dex_flush: the standby drops
# their segment at the flushed-position record)
qp -c "insert into t select 7000 + g, g from generate_series(1, 40) g" -c "select dex_flush()" >/dev/null
# rows B: logged after R', dirty
qp -c "insert into t select 7040 + g, g from generate_series(1, 30) g"
wait_replay "$SB1"
# The standby crashes and starts again: its unsealed collection of the
# primary's life is dropped and collected again from R' (dexwbcollect.c).
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/sb1" -m immediate stop >/dev/null
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/sb1" -l "$DEX_WORK/sb1-server.log" -w start >/dev/null || fail "standby restart"
# rows C: dirty, logged after the standby's restart (old keys too: their leaves stay dirty)
qp -c "insert into t select 7070 + g, g from generate_series(1, 30) g" \
   -c "insert into t select (g * 37) % 1000, 0 from generate_series(1, 100) g"
wait_replay "$SB1"
dirty=$(dirty_on_primary); echo "dirty t_k frames on the primary before its crash: $dirty"
[ "$dirty" -gt 0 ] || fail "expected dirty frames on the primary"
want=$(q1 -c "set enable_indexscan = off; set enable_bitmapscan = off; select count(*), sum(v) from t where k >= 0")
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -m immediate stop >/dev/null
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/sb1" -w promote >/dev/null || fail "promote sb1"
# The remote tree lacks the dirty entries; the promoted server's first use
# replays them from what its replay collected -- no REINDEX, no missing row.
idx() { q1 -c "set enable_seqscan = off; set enable_bitmapscan = off; $1"; }
n=$(idx "select count(*) from t where k between 7001 and 7100") || fail "the promoted standby refused the index: $n"
[ "$n" = 100 ] || fail "the promoted standby's index finds $n of rows 7001..7100"
a=$(idx "select count(*), sum(v) from t where k >= 0")
[ "$a" = "$want" ] || fail "promoted standby: index $a, seqscan $want"
grep -q 'replayed [1-9][0-9]* entry changes' "$DEX_WORK/sb1-server.log" \
    || fail "the promoted standby logged no replay of the lost changes"
n=$(grep -o 'replayed [0-9]* entry changes' "$DEX_WORK/sb1-server.log" | tail -1 | awk '{print $2}')
echo "promoted: replayed $n entry changes; index $a, as its seqscan"
# (rows A were written back before the flushed-position record that dropped
# their segment: at most B + C = 160 changes, 200 if nothing were dropped)
[ "$n" -le 160 ] || fail "the standby kept segments its primary had written back ($n changes replayed)"
q1 -c "insert into t values (7500, 1)" || fail "insert on the promoted standby"
[ "$(idx "select count(*) from t where k = 7500")" = 1 ] || fail "the promoted standby's insert is not found"
# ts_s was left dirty by the primary's first life (phase 2b, crash in phase
# 3), and that life never used it again: the standby sealed that life's
# collection when the second began, and replays it now.
a=$(idx "select count(*), sum(v) from ts where s >= ''")
b=$(q1 -c "set enable_indexscan = off; set enable_bitmapscan = off; select count(*), sum(v) from ts where s >= ''")
[ "$a" = "$b" ] || fail "promoted standby, text index: $a, seqscan $b"
echo "text index of the first life: $a, as its seqscan"
left=$(as_user ls "$DEX_WORK/sb1/pg_dex_wb" | grep '\.ops$' || true)
[ -z "$left" ] || fail "replayed segments were left behind: $left"
echo "write-back standby: ok"
