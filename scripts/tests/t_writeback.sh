#!/usr/bin/env bash
# Write-back mode (reloption write_back = on, src/README.md "Write-back mode"):
# 1. concurrent pgbench DML on a write-back index with a small node cache (so
#    dirty leaves are written back on eviction) -> exact answers, dex_check;
#    with dex.offload = on, lookups that miss above the leaves are finished by
#    the memory node (offloaded reads of a write-back index) -> exact answers;
# 2. a CLEAN restart (pg_ctl restart -m fast: the write-back worker's final
#    flush) in the middle -> nothing lost, more DML, exact answers again;
# 3. a CRASH (immediate shutdown) while dirty nodes exist (dex.writeback_interval
#    raised for that phase), after inserts, deletes and a VACUUM: the first use
#    replays the changes crash recovery collected from WAL (dexwbredo.c) ->
#    exact answers for a fixed-key and a byte-string (two-column) index;
# 4. the same crash right after a CHECKPOINT: the checkpoint waited until the
#    dex worker wrote back what was dirty before it (0 dirty frames when it
#    returns) -> exact answers after the crash, no REINDEX;
# 4b. checkpoints issued while the worker switches its fence (a pause put
#    there, dex.fence_switch_pause) wait as well -> 0 dirty frames each time;
# 4c. while the worker is not running (an ERROR in every new worker,
#    dex.worker_fail; pg_terminate_backend) write-back pauses: 0 dirty frames
#    at a CHECKPOINT, nothing lost by a crash, writes never fail, write-back
#    resumes under the next worker;
# 5. the same with dex.checkpoint_writeback_timeout = 0 (checkpoints do not
#    wait): the changes cannot all be replayed -> "lost its remote memory" /
#    HINT REINDEX (never wrong rows), a write-through dex index keeps working,
#    REINDEX recovers.
source "$(dirname "$0")/common.sh"
start_memnode mem "$MPORT" 512MB --threads 2
start_cluster pg "$PPORT" "$MEMNODE_URL" "dex.cache_size = '${CACHE_SIZE:-1MB}'" "dex.writeback_interval = '1s'"
CLIENTS=${CLIENTS:-6}; SECONDS_RUN=${SECONDS_RUN:-10}

q -c "create extension dex"
q -c "create table d(k int, v bigint); create table b(k int, v bigint); create table w(k int, v bigint); create table s(k int, v bigint)"
q -c "insert into d select g % 20000, g from generate_series(1, 40000) g; insert into b select * from d; insert into w select * from d; insert into s select * from d"
q -c "create index d_k on d using dex (k) with (write_back = on); create index b_k on b (k); create index w_k on w using dex (k) with (write_back = off)"
q -c "create index s_kv on s using dex (k, v) with (write_back = on)"   # byte-string entries

write_mix_script "$DEX_WORK/mix.sql" d b w s
stats() { q -c "select index_ops, remote_writes, evictions, coolings from dex_stats()" -P footer=off; }

echo "== phase 1: concurrent DML, write-back index, small cache"
run_mix "$DEX_WORK/mix.sql"
compare_with_btree d d_k; compare_with_btree w w_k; compare_with_btree s s_kv
stats
ev=$(q -c "select evictions from dex_stats()")
[ "$ev" -gt 0 ] || fail "expected evictions (write-backs on eviction), got $ev"
q -c "select * from dex_check('d_k')" >/dev/null || fail "dex_check d_k"

echo "== phase 1c: offloaded reads of a write-back index (dex.offload = on) while DML runs"
# A lookup that misses above the leaves is finished by the memory node, whose
# answer is used only if no frame of its leaf can hold more (src/README.md W15).
q -c "alter system set dex.offload = 'on'" -c "select pg_reload_conf()" >/dev/null
run_mix "$DEX_WORK/mix.sql"
compare_with_btree d d_k; compare_with_btree w w_k; compare_with_btree s s_kv
# point selects of the write-back index alone (nothing else offloads meanwhile)
printf '\\set k random(0, 19999)\nselect v from d where k = :k;\n' > "$DEX_WORK/d_reads.sql"
off0=$(q -c "select offloads from dex_stats()")
"$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$PPORT" -U postgres -c 2 -j 2 -t 2000 -f "$DEX_WORK/d_reads.sql" postgres \
    >/dev/null || fail "pgbench point selects of d failed"
q -c "select offloads, wb_offload_fallbacks from dex_stats()" -P footer=off
off1=$(q -c "select offloads from dex_stats()")
[ "$off1" -gt "$off0" ] || fail "expected offloaded reads of the write-back index d_k ($off0 -> $off1)"
q -c "explain (costs off) select v from d where k = 5" | grep -q d_k ||
    fail "point selects of d do not use d_k"
q -c "alter system reset dex.offload" -c "select pg_reload_conf()" >/dev/null

echo "== phase 1b: VACUUM merges empty write-back leaves while DML runs"
q -c "delete from d where k between 2000 and 18000; delete from b where k between 2000 and 18000; delete from w where k between 2000 and 18000; delete from s where k between 2000 and 18000"
before=$(q -c "select leaves from dex_index_info('d_k')")
run_mix "$DEX_WORK/mix.sql" &
bg=$!
for i in 1 2 3; do q -c "vacuum d" >/dev/null || fail "vacuum d during DML"; sleep 1; done
wait $bg
q -c "vacuum d" >/dev/null
after=$(q -c "select leaves from dex_index_info('d_k')")
echo "d_k leaves: $before before the deletes were vacuumed, $after after"
[ "$after" -lt $((before * 4 / 5)) ] || fail "VACUUM did not merge empty write-back leaves ($before -> $after)"
compare_with_btree d d_k; compare_with_btree w w_k; compare_with_btree s s_kv
q -c "select * from dex_check('d_k')" >/dev/null || fail "dex_check d_k after merges"

echo "== phase 2: clean restart in the middle"
run_mix "$DEX_WORK/mix.sql" &
bg=$!
wait $bg
dirty=$(q -c "select coalesce(sum(dirty), 0) from dex_cache_stats() where index = 'd_k'::regclass")
echo "dirty d_k frames before the clean restart: $dirty"
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -m fast -w restart -l "$DEX_WORK/pg-server.log" >/dev/null || fail "restart"
grep -q "final flush done" "$DEX_WORK/pg-server.log" || echo "(note: no final-flush log line seen)"
compare_with_btree d d_k
run_mix "$DEX_WORK/mix.sql"
compare_with_btree d d_k; compare_with_btree w w_k; compare_with_btree s s_kv
q -c "select * from dex_check('d_k')" >/dev/null || fail "dex_check d_k after the clean restart"

echo "== phase 3: crash with dirty nodes: their changes are replayed from WAL"
all4() { for t in d b w s; do q -c "$(sed "s/@/$t/g" <<<"$1")"; done; }
q -c "alter system set dex.writeback_interval = '1h'" -c "alter system set checkpoint_timeout = '1h'" \
  -c "select pg_reload_conf()" >/dev/null
# autovacuum's compact() would flush the write-back indexes (and clear their
# owner words) at a moment of its choosing: nothing left to replay or refuse
q -c "alter table d set (autovacuum_enabled = off)" -c "alter table s set (autovacuum_enabled = off)"
sleep 1.5   # the worker finishes its current 1 s wait and picks up the new interval
all4 "insert into @ select g, -g from generate_series(100, 5000, 7) g"
all4 "delete from @ where k between 6000 and 6500"
q -c "vacuum d" -c "vacuum s" >/dev/null   # deletes in the frames, empty leaves merged (flushes d_k, s_kv)
all4 "insert into @ select g, -2 * g from generate_series(6000, 6500, 3) g"
all4 "update @ set v = v + 1 where k between 7000 and 7100"
dirty=$(q -c "select coalesce(sum(dirty), 0) from dex_cache_stats() where index in ('d_k'::regclass, 's_kv'::regclass)")
echo "dirty d_k / s_kv frames before the crash: $dirty"
[ "$dirty" -gt 0 ] || fail "expected dirty frames before the crash"
log_lines=$(wc -l <"$DEX_WORK/pg-server.log")
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -m immediate stop >/dev/null
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -l "$DEX_WORK/pg-server.log" -w start >/dev/null || fail "start after crash"
compare_with_btree d d_k; compare_with_btree s s_kv; compare_with_btree w w_k
for ix in d_k s_kv; do
    n=$(tail -n +"$log_lines" "$DEX_WORK/pg-server.log" | sed -n "s/.*index \"$ix\": replayed \([0-9]*\) entry changes.*/\1/p" | head -1)
    echo "$ix: entry changes replayed after the crash: ${n:-none}"
    [ -n "$n" ] && [ "$n" -gt 0 ] || fail "$ix: no replay after the crash"
    q -c "select * from dex_check('$ix')" >/dev/null || fail "dex_check $ix after the replay"
done
run_mix "$DEX_WORK/mix.sql"   # and it keeps working in write-back mode
compare_with_btree d d_k; compare_with_btree s s_kv

echo "== phase 4: a CHECKPOINT waits for the write-back of what was dirty before it"
# (the restart must have kept the 1 h interval: only the checkpoint fence
# (extension/dexckptfence.c) can write these dirty nodes back before the crash)
[ "$(q -c "show dex.writeback_interval")" = 1h ] || fail "dex.writeback_interval after the restart: $(q -c "show dex.writeback_interval")"
dirty_kv() { q -c "select coalesce(sum(dirty), 0) from dex_cache_stats() where index in ('d_k'::regclass, 's_kv'::regclass)"; }
all4 "insert into @ select g, -3 * g from generate_series(8000, 9000, 5) g"
dirty=$(dirty_kv); echo "dirty d_k / s_kv frames before the checkpoint: $dirty"
[ "$dirty" -gt 0 ] || fail "expected dirty frames before the checkpoint"
# (the fence's transaction holds a virtual xid only: no xmin, no xact_start)
[ "$(q -c "select count(*) from pg_stat_activity where backend_type = 'dex worker' and backend_xmin is null
             and backend_xid is null and xact_start is null")" = 1 ] || fail "the dex worker looks like an open transaction"
q -c "checkpoint"
dirty=$(dirty_kv); echo "dirty d_k / s_kv frames when CHECKPOINT returned: $dirty"
[ "$dirty" = 0 ] || fail "CHECKPOINT returned before the dirty nodes were written back"
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -m immediate stop >/dev/null
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -l "$DEX_WORK/pg-server.log" -w start >/dev/null || fail "start after crash"
compare_with_btree d d_k; compare_with_btree s s_kv; compare_with_btree w w_k
q -c "select * from dex_check('d_k')" >/dev/null || fail "dex_check d_k after the crash that followed a checkpoint"

echo "== phase 4b: a checkpoint that begins while the worker switches its fence waits as well"
# The worker sleeps dex.fence_switch_pause at the fence's most exposed moment
# (dexckptfence.c: between dropping one flag and its next read of the REDO
# position). CHECKPOINTs issued back to back land in that pause; each must
# still return with nothing dirty from before it.
q -c "alter system set dex.fence_switch_pause = '1s'" -c "select pg_reload_conf()" >/dev/null
sleep 0.5
for i in $(seq 1 6); do
    all4 "insert into @ select g, -5 * g - $i from generate_series(9000 + $i, 9900, 7) g"
    [ "$(dirty_kv)" -gt 0 ] || fail "expected dirty frames before checkpoint $i"
    q -c "checkpoint"
    dirty=$(dirty_kv)
    [ "$dirty" = 0 ] || fail "checkpoint $i (fence switching) returned with $dirty dirty frames from before it"
done
echo "6 checkpoints during fence switches: each returned with 0 dirty frames"
q -c "alter system reset dex.fence_switch_pause" -c "select pg_reload_conf()" >/dev/null
sleep 0.5
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -m immediate stop >/dev/null
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -l "$DEX_WORK/pg-server.log" -w start >/dev/null || fail "start after crash"
compare_with_btree d d_k; compare_with_btree s s_kv; compare_with_btree w w_k

echo "== phase 4c: while the dex worker is not running, nothing is dirty for a checkpoint to miss"
# The worker stops -- an ERROR (dex.worker_fail raises one after each beat,
# so every new worker fails too), or pg_terminate_backend -- and the
# postmaster starts a new one a second later. Until that one holds the fence,
# write-back is paused (src/README.md W18): the stopping worker writes back
# what is dirty, and writes go through. A CHECKPOINT then returns with 0
# dirty frames, and a crash after it loses nothing.
worker_pid() { q -c "select pid from pg_stat_activity where backend_type = 'dex worker'"; }
all4 "insert into @ select g, -6 * g from generate_series(10000, 10600, 3) g"
[ "$(dirty_kv)" -gt 0 ] || fail "expected dirty frames before the worker fails"
log_lines=$(wc -l <"$DEX_WORK/pg-server.log")
q -c "alter system set dex.worker_fail = on" -c "select pg_reload_conf()" >/dev/null
for i in $(seq 1 50); do
    n=$(tail -n +"$log_lines" "$DEX_WORK/pg-server.log" | grep -c "as dex.worker_fail asks" || true)
    [ "$n" -ge 2 ] && break; sleep 0.1
done
[ "$n" -ge 2 ] || fail "the dex worker did not fail twice (dex.worker_fail): $n"
paused0=$(q -c "select wb_paused_writes from dex_stats()")
all4 "insert into @ select g, -7 * g from generate_series(10601, 11200, 3) g"
all4 "delete from @ where k between 10000 and 10100"
dirty=$(dirty_kv); echo "dirty d_k / s_kv frames after DML while the worker keeps failing: $dirty"
[ "$dirty" = 0 ] || fail "write-back went on while no worker held the checkpoint fence ($dirty dirty frames)"
[ "$(q -c "select write_back_paused from dex_cluster()")" = t ] || fail "dex_cluster() does not say write-back is paused"
paused=$(( $(q -c "select wb_paused_writes from dex_stats()") - paused0 ))
echo "changes written through while write-back was paused (dex_stats().wb_paused_writes): $paused"
[ "$paused" -gt 0 ] || fail "dex_stats() counted no paused writes"
q -c "checkpoint"
q -c "alter system reset dex.worker_fail" >/dev/null   # (read again by the crash restart)
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -m immediate stop >/dev/null
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -l "$DEX_WORK/pg-server.log" -w start >/dev/null || fail "start after crash"
compare_with_btree d d_k; compare_with_btree s s_kv; compare_with_btree w w_k
# pg_terminate_backend: the worker comes back (exit 1, keeping the writer
# role), writes never fail meanwhile, and write-back resumes under the new one
all4 "insert into @ select g, -8 * g from generate_series(11201, 11800, 3) g"
old_pid=$(worker_pid)
[ -n "$old_pid" ] && [ "$(dirty_kv)" -gt 0 ] || fail "expected a worker ($old_pid) and dirty frames before pg_terminate_backend"
q -c "select pg_terminate_backend($old_pid)" >/dev/null
for i in $(seq 1 50); do [ "$(worker_pid)" != "$old_pid" ] && break; sleep 0.05; done
[ "$(worker_pid)" != "$old_pid" ] || fail "the dex worker did not stop on pg_terminate_backend"
dirty=$(dirty_kv); echo "dirty d_k / s_kv frames once the terminated worker is gone: $dirty"
[ "$dirty" = 0 ] || fail "the terminated worker left $dirty dirty frames"
all4 "insert into @ select g, -9 * g from generate_series(11801, 12400, 3) g"   # (must not fail)
new_pid=""
for i in $(seq 1 100); do new_pid=$(worker_pid); [ -n "$new_pid" ] && [ "$new_pid" != "$old_pid" ] && break; sleep 0.1; done
[ -n "$new_pid" ] && [ "$new_pid" != "$old_pid" ] || fail "no new dex worker after pg_terminate_backend"
sleep 0.5
all4 "insert into @ select g, -10 * g from generate_series(12401, 13000, 3) g"
dirty=$(dirty_kv); echo "dirty d_k / s_kv frames after inserts under the new worker ($new_pid): $dirty"
[ "$dirty" -gt 0 ] || fail "write-back did not resume under the new worker"
[ "$(q -c "select write_back_paused from dex_cluster()")" = f ] || fail "dex_cluster() says write-back is paused under a running worker"
compare_with_btree d d_k; compare_with_btree s s_kv

echo "== phase 5: checkpoints that do not wait (dex.checkpoint_writeback_timeout = 0): refused, never wrong"
q -c "alter system set dex.checkpoint_writeback_timeout = 0" -c "select pg_reload_conf()" >/dev/null
sleep 1   # the worker reloads at its next beat and lets the fence go
all4 "insert into @ select g, -4 * g from generate_series(9100, 9900, 5) g"
q -c "checkpoint"   # (nothing waits for dex now: it writes nothing back)
# (the small cache may have evicted them since -- written back, but the
# owner word stays set until a flush clears it, so the crash still counts)
dirty=$(q -c "select coalesce(sum(dirty), 0) from dex_cache_stats() where index = 'd_k'::regclass")
echo "dirty d_k frames after the checkpoint: $dirty"
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -m immediate stop >/dev/null
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -l "$DEX_WORK/pg-server.log" -w start >/dev/null || fail "start after crash"
expect_error "set enable_seqscan = off; set enable_bitmapscan = off; select count(*) from d where k between 0 and 100" \
    'index "d_k" lost its remote memory' 'write-back' 'before the checkpoint' 'HINT: +REINDEX INDEX d_k'
expect_error "insert into d values (1, 1)" 'index "d_k" lost its remote memory' 'REINDEX INDEX d_k' >/dev/null
compare_with_btree w w_k   # the write-through index survived the crash
q -c "reindex index d_k" -c "reindex index s_kv"
compare_with_btree d d_k; compare_with_btree s s_kv
q -c "select * from dex_check('d_k')" >/dev/null || fail "dex_check d_k after REINDEX"
q -c "alter system reset dex.writeback_interval" -c "alter system reset checkpoint_timeout" \
  -c "alter system reset dex.checkpoint_writeback_timeout" -c "select pg_reload_conf()" >/dev/null
echo "write-back: ok"
