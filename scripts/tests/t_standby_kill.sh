#!/usr/bin/env bash
# Kills of a write-back index while a hot standby is attached (src/README.md
# "Dead-entry hints", K7; extension/dexkillwal.c). A real streaming replica
# (pg_basebackup -R) without hot_standby_feedback, so the primary finds rows
# dead that a standby snapshot still sees.
# 1. The primary's index scans remove dead entries although the standby holds
#    a live registry slot (before K7 every such kill was refused), and the
#    standby's answers equal its seqscans.
# 2. The conflict: a standby REPEATABLE READ transaction counts 100 rows, the
#    primary deletes them and its index scan kills their entries (the heap
#    pages are not pruned: no prune record cancels anything). The kill's
#    record cancels the standby transaction (conflict with recovery) before
#    the frame is written back; the transaction, counting every 100 ms until
#    then, never counts fewer rows than its snapshot sees. Afterwards the
#    standby answers exactly and the primary's frames are written back.
# 3. Bottom-up deletion of a write-back index (single-row UPDATEs found by
#    sequential scans) removes dead versions with the standby attached.
# 4. A write-through index (write_back = off) whose leaves are cached: its kills
#    are remote at once, so with the standby attached a kill logs its
#    conflict horizon and waits in the killing backend (K9) until the
#    standby replayed it: nothing is removed at once, the standby REPEATABLE
#    READ transaction that still sees 100 deleted rows is cancelled by the
#    replay and never counts fewer, and a later scan of the same session
#    removes the entries; for a 16-byte key and a byte-string (numeric) one.
#    (K7 as first landed sent a cached write-through
#    leaf's kill down the write-back frame path, which removed the entries
#    remotely at once: the standby counted 0.)
# 5. The same for a write-back index while its write-back is paused for the
#    standby (dex.write_back_with_standbys = off; W18): its
#    frames take no in-place change, so its kills are deferred as a
#    write-through index's and then written through (before, they were
#    skipped: the primary kept every dead entry until VACUUM).
# 6. Bottom-up passes while the standby is attached and the frame cannot
#    hold their removal (write-back paused; write-through): the dead
#    versions are queued behind the logged horizon (the insert splits
#    meanwhile) and removed by later inserts of the same session once the
#    standby replayed it (before: the paused index ran no pass, the
#    write-through one's passes were refused by the gate).
# 0. (before the standby exists) A backend that cannot wait for the worker's
#    next beat raises the horizon itself (dex_flush(); a dirty leaf's
#    write-back before a split does the same): with the dex worker stopped,
#    the write-back happens, and the registry's removal_lsn covers it --
#    a standby claiming a slot then replays past every write-back before it
#    answers -- while writer_hwm stays under removal_lsn (dex_cluster()
#    shows both).
source "$(dirname "$0")/common.sh"
start_memnode mem "$MPORT" 512MB
SB=$(free_port)
trap 'test_cleanup; stop_cluster sbk' EXIT
start_cluster pg "$PPORT" "$MEMNODE_URL" "dex.write_back_with_standbys = on" "wal_level = replica" "max_wal_senders = 4" "wal_keep_size = '256MB'" \
    "dex.cache_size = '64MB'" "dex.writeback_interval = '250ms'" "dex.standby_wait_timeout = '30s'"
qp() { dpsql "$PPORT" -d postgres -At "$@"; }
qs() { dpsql "$SB" -d postgres -At "$@"; }
IDX="set enable_seqscan = off; set enable_bitmapscan = off;"
stat() { qp -c "select $1 from dex_stats()"; }
# removed_without_refusal COUNTER MIN WHAT: dex_stats' COUNTER reached MIN, no kill refused
removed_without_refusal() {
    local n refused
    n=$(stat "$1"); refused=$(stat kills_refused)
    echo "primary: $n $3, $refused refused, with the standby attached"
    [ "$n" -ge "$2" ] || fail "expected at least $2 $3 with the standby attached, got $n"
    [ "$refused" = 0 ] || fail "refused although K7 needs no gate: $refused"
}
# standby_matches TABLE WHERE: once replayed, the standby's index scan = the primary's seqscan
standby_matches() {
    local a b
    wait_replay "$SB"
    a=$(qs -c "$IDX select count(*), coalesce(sum(v), 0) from $1 where $2")
    b=$(qp -c "set enable_indexscan = off; set enable_bitmapscan = off; select count(*), coalesce(sum(v), 0) from $1 where $2")
    [ "$a" = "$b" ] || fail "standby index scan of $1 where $2: $a, primary seqscan $b"
    echo "standby: index scan = the primary's seqscan ($a)"
}

# rr_start TABLE OUT: a standby REPEATABLE READ transaction counts k in
# [LO, LO + 99] of TABLE (100 rows) every 100 ms for 30 s, raising 'short
# count' if it ever counts fewer; returns once its first count is in OUT
rr_start() {
    local tbl=$1 lo=$2 out=$3
    ( qs -v ON_ERROR_STOP=0 -c "$IDX" \
         -c "begin isolation level repeatable read" \
         -c "select 'first', count(*) from $tbl where k between $lo and $lo + 99" \
         -c "do \$\$ declare n int; begin
               for i in 1..300 loop
                 select count(*) into n from $tbl where k between $lo and $lo + 99;
                 if n <> 100 then raise exception 'short count: %', n; end if;
                 perform pg_sleep(0.1);
               end loop; end \$\$" \
         -c "select 'second', count(*) from $tbl where k between $lo and $lo + 99" \
         -c "commit" >"$out" 2>&1 ) & rr=$!
    for _ in $(seq 1 100); do grep -q '^first|100' "$out" 2>/dev/null && break; sleep 0.1; done
    grep -q '^first|100' "$out" || fail "the standby transaction did not start: $(cat "$out")"
}
# rr_cancelled_never_short OUT: the transaction of rr_start ended cancelled
# by a kill record's replay (the 30 s loop ends early only that way), and
# never counted fewer rows than its snapshot sees
rr_cancelled_never_short() {
    wait $rr || true
    cat "$1"
    grep -q 'short count' "$1" && fail "the standby transaction counted fewer rows than its snapshot sees"
    if grep -q '^second|' "$1"; then
        grep -q '^second|100$' "$1" || fail "the standby transaction counted fewer rows than its snapshot sees"
    fi
    grep -q 'conflict with recovery' "$1" || fail "expected the kill's record to cancel the standby transaction"
}

qp -c "create extension dex"
# (two 3 kB rows per heap page leave a quarter of it free: reading the deleted
# rows does not prune the page, whose record would cancel the standby
# transaction of phase 2 by itself -- the kill's own record must)
qp -c "create table t(k int, v int, pad text) with (autovacuum_enabled = off)" \
   -c "alter table t alter column pad set storage plain" \
   -c "insert into t select g, g, repeat('x', 3000) from generate_series(1, 4000) g"
qp -c "create index t_k on t using dex (k) with (write_back = on)" -c "analyze t"
echo "== 0. a backend's write-back between beats: removal_lsn covers it, writer_hwm stays under"
worker=$(qp -c "select pid from pg_stat_activity where backend_type = 'dex worker'")
[ -n "$worker" ] || fail "no dex worker on the primary"
# (within the writer's 3 s lease from its last beat: one psql session)
kill -STOP "$worker"
r=$(qp 2>&1 <<'SQL'
set dex.standby_wait_timeout = '2s';
select pg_current_wal_insert_lsn() as before \gset
set enable_seqscan = off;  -- (its leaf cached: the insert stays in place, dirty)
select count(*) as warm from t where k = 4000 \gset
reset enable_seqscan;
insert into t values (4001, 4001, 'x');
select dex_flush() > 0 as flushed \gset
select :'flushed', removal_lsn >= :'before' as raised,
       writer_hwm <= removal_lsn as under_removal, writer_hwm, removal_lsn from dex_cluster();
SQL
) || true
kill -CONT "$worker"
echo "with the dex worker stopped: $r"
[ "$(cut -d'|' -f1-3 <<<"$r")" = "t|t|t" ] ||
    fail "flushed|removal_lsn raised past the write-back|writer_hwm <= removal_lsn expected t|t|t, got: $r"

# (no node cache on the standby: every scan reads remote memory, so a removal
# written back too early would show at once)
make_standby sbk "$SB" "dex.standby_wait_timeout = '30s'" "hot_standby_feedback = off" \
    "max_standby_streaming_delay = '1s'" "dex.cache_size = 0"
wait_replay "$SB"
# (a standby answers only while it holds a live slot in the cluster registry)
[ "$(qs -c "$IDX select count(*) from t where k between 1 and 50")" = 50 ] || fail "standby scan before the test"
[ "$(qs -c "select count(*) from dex_cluster_standbys() where this_server and not expired")" = 1 ] &&
    [ "$(qp -c "select live_standbys from dex_cluster()")" = 1 ] ||
    fail "the registry does not show the standby's live slot"

echo "== 1. kills go on while the standby is attached"
qp -c "select dex_stats_reset()" >/dev/null
qp -c "delete from t where k between 1001 and 1200"
# the deleter is older than every snapshot now: the scan finds the rows dead
n=$(qp -c "$IDX select count(*) from t where k between 1001 and 1200")
[ "$n" = 0 ] || fail "primary counts $n deleted rows"
removed_without_refusal kills 150 "entries killed"
standby_matches t "k between 900 and 1300"

echo "== 2. a standby snapshot that still sees the rows: cancelled, never short"
out="$DEX_WORK/rr.out"
rr_start t 2001 "$out"
qp -c "select dex_stats_reset()" >/dev/null
qp -c "delete from t where k between 2001 and 2100"
n=$(qp -c "$IDX select count(*) from t where k between 2001 and 2100")
[ "$n" = 0 ] || fail "primary counts $n deleted rows"
kills=$(stat kills)
[ "$kills" -ge 50 ] || fail "expected the primary to kill the dead entries, got $kills"
echo "primary killed $kills entries the standby transaction still sees"
# the kill's record reaches the standby: its replay waits 1 s for the
# transaction, which keeps counting every 100 ms, then cancels it
rr_cancelled_never_short "$out"
echo "cancelled by the kill's conflict horizon, never short"
wait_replay "$SB"
# the primary's frames go out once the standby replayed the record
for _ in $(seq 1 100); do
    d=$(qp -c "select coalesce(sum(dirty), 0) from dex_cache_stats() where index = 't_k'::regclass")
    [ "$d" = 0 ] && break
    sleep 0.1
done
[ "$d" = 0 ] || fail "the primary's kill frames were never written back ($d dirty)"
standby_matches t "k >= 0"
qp -c "select dex_check('t_k')" >/dev/null || fail "dex_check"

echo "== 3. bottom-up deletion goes on while the standby is attached"
# (v has a btree index: every single-row UPDATE adds a dex entry for the
# unchanged k; rows found by sequential scans, so no scan kills)
qp -c "create table u(k int, v int) with (autovacuum_enabled = off)" -c "create index u_v on u (v)" \
   -c "insert into u select g, g from generate_series(1, 200) g" \
   -c "create index u_k on u using dex (k) with (write_back = on)"
qp -c "create procedure u_rounds(rounds int) language plpgsql as \$\$
       begin
         for r in 1..rounds loop
           for i in 1..200 loop update u set v = v + 1 where k::text = i::text; end loop;
           commit;
         end loop;
       end \$\$"
qp -c "$IDX select count(*) from u where k > 0" >/dev/null    # its leaves cached
qp -c "select dex_stats_reset()" >/dev/null
qp -c "set enable_indexscan = off" -c "set enable_bitmapscan = off" -c "set enable_indexonlyscan = off" \
   -c "call u_rounds(10)"
removed_without_refusal bottomup_removed 200 "dead versions removed by bottom-up passes"
standby_matches u "k > 0"
qp -c "select dex_check('u_k')" >/dev/null || fail "dex_check u_k"
# deferred_kill_phase TABLE TYPE [WRITE_BACK]: phase 4 (5) on a write-through
# (write-back) index of a TYPE key
deferred_kill_phase() {
    local w=$1 type=$2 wb=${3:-off} r at_once later out="$DEX_WORK/rr4-$1.out"
    qp -c "create table $w(k $type, v int, pad text) with (autovacuum_enabled = off)" \
       -c "alter table $w alter column pad set storage plain" \
       -c "insert into $w select g, g, repeat('x', 3000) from generate_series(1, 2000) g" \
       -c "create index ${w}_k on $w using dex (k) with (write_back = $wb)" -c "analyze $w"
    # (every leaf cached on the primary: the path K7 first took by mistake)
    qp -c "set dex.leaf_admission = 1" -c "$IDX select count(*) from $w where k > 0" >/dev/null
    wait_replay "$SB"
    rr_start "$w" 1001 "$out"
    qp -c "delete from $w where k between 1001 and 1100"
    # A session's scan finds the rows dead and queues the kill behind its
    # record, and exits. Another session's scans of live keys of the index
    # (they never meet the dead entries themselves) remove them from the
    # server's queue once the standby replayed the record -- after its
    # transaction was cancelled.
    r=$(qp -c "select dex_stats_reset()" -c "$IDX" \
           -c "select 'scan', count(*) from $w where k between 1001 and 1100" \
           -c "select 'at_once', kills, kills_deferred from dex_stats()")
    r+=$'\n'$(qp -c "$IDX" \
           -c "do \$\$ begin
                 for i in 1..300 loop
                   perform count(*) from $w where k between 1 and 10;
                   exit when (select kills from dex_stats()) >= 50;
                   perform pg_sleep(0.1);
                 end loop; end \$\$" \
           -c "select 'later', kills, kills_refused from dex_stats()")
    echo "$r"
    grep -q '^scan|0$' <<<"$r" || fail "primary counts deleted rows of $w"
    at_once=$(sed -n 's/^at_once|//p' <<<"$r")
    [ "${at_once%%|*}" = 0 ] || fail "$w: write_back = $wb, killed at once with a standby attached: $at_once"
    [ "${at_once#*|}" -ge 50 ] || fail "$w: the kill was not queued (kills|kills_deferred: $at_once)"
    later=$(sed -n 's/^later|//p' <<<"$r")
    [ "${later%%|*}" -ge 50 ] || fail "$w: the deferred kill never removed the entries (kills|refused: $later)"
    rr_cancelled_never_short "$out"
    standby_matches "$w" "k between 900 and 1200"
    qp -c "select dex_check('${w}_k')" >/dev/null || fail "dex_check ${w}_k"
}

echo "== 4. a write-through index's kills wait until the standby replayed their record"
deferred_kill_phase w int
echo "-- the same with byte-string entries (numeric key)"
deferred_kill_phase wn numeric

echo "== 5. dex.write_back_with_standbys = off: a write-back index's kills wait as a write-through one's"
qp -c "alter system set dex.write_back_with_standbys = off" -c "select pg_reload_conf()" >/dev/null
for _ in $(seq 1 100); do
    [ "$(qp -c "select write_back_paused from dex_cluster()")" = t ] && break
    sleep 0.1
done
[ "$(qp -c "select write_back_paused from dex_cluster()")" = t ] ||
    fail "write-back was not paused for the standby with dex.write_back_with_standbys off"
# (before K9 covered them, such kills were skipped in the paused frame: 0 removed)
deferred_kill_phase p int on
echo "-- the same with byte-string entries (numeric key)"
deferred_kill_phase pn numeric on

# bottomup_deferred_phase TABLE WRITE_BACK MIN [TYPE]: phase 6 on a dex index
# with write_back = WRITE_BACK of a TYPE key (default int); at least MIN dead
# versions removed in the end
bottomup_deferred_phase() {
    local u=$1 wb=$2 min=$3 type=${4:-int} r counts
    qp -c "create table $u(k $type, v int) with (autovacuum_enabled = off)" -c "create index ${u}_v on $u (v)" \
       -c "insert into $u select g, g from generate_series(1, 200) g" \
       -c "create index ${u}_k on $u using dex (k) with (write_back = $wb)"
    qp -c "set dex.leaf_admission = 1" -c "$IDX select count(*) from $u where k > 0" >/dev/null
    # (rows found by sequential scans: no scan kills; each round commits, so
    # the next one's passes find its old versions dead; one session, whose
    # deferred removals its own later inserts apply once the standby replayed
    # their records)
    qp -c "create procedure ${u}_churn() language plpgsql as \$\$
           begin
             for r in 1..100 loop
               for i in 1..200 loop update $u set v = v + 1 where k::text = i::text; end loop;
               commit;
               exit when (select bottomup_removed from dex_stats()) >= $min;
               perform pg_sleep(0.05);
             end loop;
           end \$\$"
    r=$(qp -c "select dex_stats_reset()" -c "set enable_indexscan = off" -c "set enable_bitmapscan = off" \
           -c "set enable_indexonlyscan = off" -c "call ${u}_churn()" \
           -c "select 'counts', bottomup_passes, kills_deferred, bottomup_removed, kills_refused, kills_moved
               from dex_stats()")
    counts=$(sed -n 's/^counts|//p' <<<"$r")
    echo "$u (write_back = $wb) passes|deferred|removed|refused|moved right: $counts"
    IFS='|' read -r passes deferred removed refused moved <<<"$counts"
    [ "${passes:-0}" -gt 0 ] || fail "$u: no bottom-up pass ran with the standby attached"
    [ "${deferred:-0}" -gt 0 ] || fail "$u: no bottom-up removal was deferred"
    [ "${removed:-0}" -ge "$min" ] || fail "$u: only ${removed:-0} dead versions removed (expected >= $min)"
    [ "$refused" = 0 ] || fail "$u: $refused refused by the gate although the removals are deferred"
    # (the insert that ran the pass split the leaf: the upper half's dead
    # versions are looked up right of it when the removal is applied)
    [ "${moved:-0}" -gt 0 ] || fail "$u: no deferred entry was looked up right of its leaf after the split"
    standby_matches "$u" "k > 0"
    qp -c "select dex_check('${u}_k')" >/dev/null || fail "dex_check ${u}_k"
}

echo "== 6. bottom-up passes with the standby attached: deferred, then removed"
bottomup_deferred_phase bp on 400
echo "-- the same with byte-string entries (numeric key)"
bottomup_deferred_phase bpn on 200 numeric
echo "-- the same on a write-through index"
bottomup_deferred_phase bt off 200
echo "kills with a standby attached: ok"
