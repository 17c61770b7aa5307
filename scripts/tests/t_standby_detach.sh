#!/usr/bin/env bash
# A hot standby whose replay lags is detached instead of holding the primary
# back (src/README.md "Hot standbys", detaching; extension/dexlag.c).
# The primary keeps an insert journaled, a dirty write-back leaf unwritten
# and VACUUM's removals waiting until every live standby replayed them; a
# standby whose replay stands still used to stall the primary's inserts after
# a few hundred rows and fail them (and VACUUM) after dex.standby_wait_timeout.
# Round "paused": replay paused on the standby; the primary runs 1500
# single-row inserts into a write-through index, a VACUUM that removes
# entries, and dex_flush() of a write-back index -- all succeed (the worker
# logs the detach), and nothing stays dirty; the paused standby's dex queries
# fail with an ERROR naming the detach, never a wrong answer. Replay resumed:
# the standby claims a slot again and both indexes equal their btree twins
# there. Round "delayed": recovery_min_apply_delay on the standby; while the
# primary keeps writing, the standby never claims a slot again (it does not
# keep up), and the primary's writes go on; the delay removed, it answers
# like its twins. Round "promoted": detached again, the primary dies and the
# standby is promoted: it takes the trees over and answers like its twins.
# Without the detach the inserts and the VACUUM fail with
# "did not replay WAL ... within dex.standby_wait_timeout".
# Indexes: t (write-through) and w (write_back = on), twins bt / bw.
source "$(dirname "$0")/common.sh"
SPORT=$(free_port)
trap 'stop_cluster sb; test_cleanup' EXIT
qs() { dpsql "$SPORT" -d postgres -At "$@"; }
log_since() { tail -n +"$(($1 + 1))" "$DEX_WORK/pg-server.log"; }
# standby_slots STATE: the standby's slots on the primary that are live (not expired)
live_slots() { q -c "select count(*) from dex_cluster_standbys() where not expired"; }
# the standby's answer must be an ERROR that names the detach (or its catching up)
# logged PATTERN: the standby's server log has a line matching PATTERN. Its
# dex worker logs a detach or return at its next beat, which may come after
# the query that already saw the slot's state: wait for it (up to 30 s).
logged() {
    for _ in $(seq 1 300); do
        grep -q "$1" "$DEX_WORK/sb-server.log" && return 0
        sleep 0.1
    done
    return 1
}
standby_refuses() {
    local out
    if out=$(qs -c "set enable_seqscan = off; set enable_bitmapscan = off; select count(*) from $1 where k >= 0" 2>&1); then
        fail "the detached standby answered from $1: $out"
    fi
    grep -qE "cannot be used on this standby" <<<"$out" || fail "unexpected error on the standby: $out"
    grep -qE "does not keep up|detached" <<<"$out" || fail "the standby's error does not say why: $out"
    echo "  standby on $1: $(grep -m1 ERROR <<<"$out")"
}
# single-row inserts (each its own statement: the write-through path, journaled)
insert_rows() {  # insert_rows TABLE FROM N
    q -c "do \$\$ begin for i in $2..$(($2 + $3 - 1)) loop
            insert into $1 values (i * 7, i); insert into b$1 values (i * 7, i);
          end loop; end \$\$"
}

# write_unwaited ROUND FROM MOD: with the standby's replay standing still,
# single-row inserts into both indexes, deletes and a VACUUM of t all
# succeed, and the primary logs the detach
write_unwaited() {
    local round=$1 from=$2 mod=$3 logged
    logged=$(wc -l <"$DEX_WORK/pg-server.log")
    insert_rows t "$from" 1500 || fail "single-row inserts failed while the standby lagged (round $round)"
    q -c "delete from t where k % $mod = 0; delete from bt where k % $mod = 0"
    q -c "vacuum t" || fail "VACUUM failed while the standby lagged (round $round)"
    insert_rows w $((from + 100000)) 300 || fail "write-back inserts failed (round $round)"
    q -c "select dex_flush()" >/dev/null
    log_since "$logged" | grep -m1 "detached, the primary no longer waits for it" \
        || fail "the primary did not log the detach (round $round)"
}

start_memnode mem "$MPORT" 256MB --threads 2
start_cluster pg "$PPORT" "$MEMNODE_URL" "dex.write_back_with_standbys = on" "autovacuum = off" "dex.standby_wait_timeout = '3s'" \
    "dex.writeback_interval = '10min'"
q -c "create extension dex"
for x in t w; do
    q -c "create table $x(k int, v bigint); create table b$x(k int, v bigint)"
    q -c "insert into $x select g * 7, g from generate_series(1, 20000) g; insert into b$x select * from $x"
    q -c "create index b${x}_k on b$x (k)"
done
q -c "create index t_k on t using dex (k) with (write_back = off)"
q -c "create index w_k on w using dex (k) with (write_back = on)"
make_standby sb "$SPORT" "dex.standby_wait_timeout = '3s'"
wait_replay "$SPORT"
check_twin "$SPORT" t standby
[ "$(live_slots)" = 1 ] || fail "the standby holds no live slot"

echo "== round paused"
qs -c "select pg_wal_replay_pause()" >/dev/null
write_unwaited paused 100000 11
dirty=$(q -c "select coalesce(sum(dirty), 0) from dex_cache_stats()")
echo "  dirty frames after dex_flush(): $dirty"
[ "$dirty" = 0 ] || fail "the paused standby still holds $dirty dirty leaves back"
check_twin "$PPORT" t
check_twin "$PPORT" w
[ "$(live_slots)" = 0 ] || fail "the paused standby still holds a live slot"
standby_refuses t
standby_refuses w
logged "the primary detached this standby" || fail "the standby did not log its detach"
qs -c "select pg_wal_replay_resume()" >/dev/null
wait_replay "$SPORT"
check_twin "$SPORT" t standby
check_twin "$SPORT" w standby
[ "$(live_slots)" = 1 ] || fail "the standby did not claim a slot again"
logged "replay keeps up with the primary again" || fail "the standby did not log its return"

echo "== round delayed"
qs -c "alter system set recovery_min_apply_delay = '1h'" -c "select pg_reload_conf()" >/dev/null
from=$(wc -l <"$DEX_WORK/pg-server.log")
# four rounds of writes, a few seconds apart: the standby stays detached
for r in 1 2 3 4; do
    insert_rows t $((300000 + r * 1000)) 400 || fail "inserts failed with a delayed standby (round $r)"
    insert_rows w $((400000 + r * 1000)) 100 || fail "write-back inserts failed with a delayed standby (round $r)"
    sleep 1
done
q -c "delete from t where k % 13 = 0; delete from bt where k % 13 = 0"
q -c "vacuum t" || fail "VACUUM failed with a delayed standby"
q -c "select dex_flush()" >/dev/null
[ "$(q -c "select coalesce(sum(dirty), 0) from dex_cache_stats()")" = 0 ] || fail "dirty leaves held back"
log_since "$from" | grep -q "detached, the primary no longer waits for it" || fail "the delayed standby was not detached"
[ "$(live_slots)" = 0 ] || fail "the delayed standby claimed a slot again"
standby_refuses t
check_twin "$PPORT" t
check_twin "$PPORT" w
qs -c "alter system reset recovery_min_apply_delay" -c "select pg_reload_conf()" >/dev/null
wait_replay "$SPORT"
check_twin "$SPORT" t standby
check_twin "$SPORT" w standby
[ "$(live_slots)" = 1 ] || fail "the standby did not claim a slot again after the delay"

echo "== round promoted"
# Detached again (replay paused), the primary writes and VACUUMs without it,
# then dies; promoting the standby ends the pause and replays everything it
# received: it covers the trees' WAL and takes them over (its journal check
# against its own heap), answering like its twins.
qs -c "select pg_wal_replay_pause()" >/dev/null
write_unwaited promoted 500000 17
wait_replay "$SPORT" received
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -m immediate stop >/dev/null
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/sb" -w promote >/dev/null || fail "promote"
check_twin "$SPORT" t
check_twin "$SPORT" w
qs -c "insert into t values (9999991, 1)" -c "insert into bt values (9999991, 1)" || fail "writes after the promotion"
check_twin "$SPORT" t
echo "PASS t_standby_detach"
