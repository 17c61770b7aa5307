#!/usr/bin/env bash
# No index entry whose heap tuple was lost in a crash is ever used
# (src/README.md "Crash survival: the insert journal").
#
# Each round: sessions insert 40 rows with k = 5 into dex-indexed tables and
# keep their transactions open (the WAL writer stopped, so that WAL is still
# in wal_buffers); the server crashes (immediate stop, or kill -9 of one
# backend = the postmaster's crash restart); after recovery 20 new rows
# (k = 50..52) land in the heap slots the lost rows had used. Index scans,
# bitmap scans, ordered scans and seqscans must then agree row for row, the
# ordered scan must be in order, dex_check must pass; after a VACUUM (every
# page all-visible) index-only scans, which trust entries without the heap,
# must give the seqscan's answers with 0 heap fetches; finally the tail of each
# table is deleted and VACUUM truncates the heap: no entry may point past its
# end ("could not read block").
#
# Tables: s1 (index on one memory node), s3 (index spread over three), sw
# (write_back = on), so (inserts offloaded to the memory node:
# dex.offload = on in the inserting sessions).
source "$(dirname "$0")/common.sh"
rm -f "$DEX_WORK/pg-server.log"   # the stray counts at the end read this run's log only
M2=$(free_port); M3=$(free_port)
start_memnode mem "$MPORT" 256MB
start_memnode mem2 "$M2" 256MB
start_memnode mem3 "$M3" 256MB
trap 'test_cleanup; stop_memnode mem2; stop_memnode mem3' EXIT
ALL3="$MEMNODE_URL,tcp://127.0.0.1:$M2,tcp://127.0.0.1:$M3"
start_cluster pg "$PPORT" "$ALL3" "wal_writer_delay = '10s'" "checkpoint_timeout = '1h'" \
    "dex.writeback_interval = '1s'" "restart_after_crash = on" "autovacuum = off" "log_min_messages = log"
TABLES="s1 s3 sw so"

q -c "create extension dex"
for t in $TABLES; do
    q -c "create table $t(id serial, k int, pad text)"
    q -c "insert into $t(k, pad) select g % 1000, repeat('x', 20) from generate_series(1, 20000) g"
done
# s1, sw, so: one memory node (a prefix of the list keeps node numbers)
q -c "set dex.memnodes = '$MEMNODE_URL'; create index s1_k on s1 using dex (k) with (write_back = off)"
q -c "create index s3_k on s3 using dex (k) with (placement_level = 1, write_back = off)"
q -c "set dex.memnodes = '$MEMNODE_URL'; create index sw_k on sw using dex (k) with (write_back = on)"
q -c "set dex.memnodes = '$MEMNODE_URL'; create index so_k on so using dex (k) with (write_back = off)"
[ "$(q -c "select count(*) from dex_placement('s3_k') where subtrees > 0")" = 3 ] || fail "s3_k not on three nodes"

wait_ready() {
    for _ in $(seq 1 300); do q -c "select 1" >/dev/null 2>&1 && return 0; sleep 0.2; done
    fail "server did not come back"
}

holders=()
# open_inserters T...: one session per table inserts 40 rows (k = 5) in
# batches of 16 (dex.insert_batch: several batches per statement) and keeps
# its transaction open; returns when all of them have inserted. 40 entries
# fit in one journal lane (170 records): no session answers NEED_WAL_FLUSH.
# (With 300 rows each session flushed all WAL when its lane filled up, which
# made the other sessions' rows durable -- whichever session finished first
# then kept no stray, and the check below that every index lost some failed.)
open_inserters() {
    local want=$(( $# + ${#holders[@]} ))
    for t in "$@"; do
        local set="set dex.insert_batch = 16;"
        [ "$t" = so ] && set="$set set dex.offload = on;"
        dpsql "$PPORT" -d postgres -c "$set begin; insert into $t(k, pad) select 5, 'lost' from generate_series(1, 40);
            select pg_sleep(600) /* holder */; commit;" >/dev/null 2>&1 &
        holders+=($!)
    done
    for _ in $(seq 1 200); do
        [ "$(q -c "select count(*) from pg_stat_activity where query like '%pg_sleep(600) /* holder */%' and state = 'active' and pid <> pg_backend_pid()")" = "$want" ] && return 0
        sleep 0.1
    done
    fail "inserting sessions did not start"
}

# check_table T: every access path gives the seqscan's rows; ORDER BY through
# the index is ordered; dex_check passes. Prints what it compared.
check_table() {
    local t=$1 out seq idx bmp ord
    seq=$(q -c "set enable_indexscan = off; set enable_bitmapscan = off;
                select count(*), coalesce(sum(id), 0), coalesce(sum(k), 0) from $t where k between 0 and 100")
    idx=$(q -c "set enable_seqscan = off; set enable_bitmapscan = off;
                select count(*), coalesce(sum(id), 0), coalesce(sum(k), 0) from $t where k between 0 and 100" 2>&1) \
        || fail "$t: index scan failed: $idx"
    bmp=$(q -c "set enable_seqscan = off; set enable_indexscan = off;
                select count(*), coalesce(sum(id), 0), coalesce(sum(k), 0) from $t where k between 0 and 100") \
        || fail "$t: bitmap scan failed"
    # ordered: rows must come in k order, and be the seqscan's rows
    ord=$(q -c "set enable_seqscan = off; set enable_bitmapscan = off;
                select count(*), coalesce(sum(id), 0), coalesce(sum(k), 0),
                       count(*) filter (where k < prev) from
                (select id, k, lag(k) over () as prev from (select id, k from $t where k between 0 and 100 order by k) o) x") \
        || fail "$t: ordered scan failed"
    echo "$t: seqscan $seq | index $idx | bitmap $bmp | ordered $ord"
    [ "$idx" = "$seq" ] || fail "$t: index scan ($idx) differs from seqscan ($seq)"
    [ "$bmp" = "$seq" ] || fail "$t: bitmap scan ($bmp) differs from seqscan ($seq)"
    [ "$ord" = "$seq|0" ] || fail "$t: ordered scan ($ord) differs from seqscan ($seq) or is out of order"
    for p in "set enable_seqscan = off; set enable_bitmapscan = off;" "set enable_indexscan = off; set enable_seqscan = off;"; do
        local plan
        plan=$(q -c "$p explain (costs off) select count(*) from $t where k between 0 and 100")
        grep -q "${t}_k" <<<"$plan" || fail "$t: comparison did not use the index: $plan"
    done
    q -c "select * from dex_check('${t}_k')" >/dev/null || fail "dex_check ${t}_k"
}

# ios_check T: VACUUM (every page all-visible), then index-only scans --
# which trust an entry without its heap tuple -- give the seqscan's answers:
# a stray entry left by the crash would be counted here even where its slot
# is empty. Heap Fetches must be 0, else the check would not test the
# entries alone.
ios_check() {
    local t=$1 seq ios ord plan fetches all_seq all_ios
    local off="set enable_seqscan = off; set enable_bitmapscan = off; set enable_indexscan = off;"
    seq=$(q -c "set enable_indexscan = off; set enable_indexonlyscan = off; set enable_bitmapscan = off;
                select count(*), coalesce(sum(k), 0), count(distinct k) from $t where k between 0 and 100")
    # INDEX_CLEANUP ON: VACUUM would leave the LP_DEAD slots of a few aborted
    # rows (sw's) in place, their pages not all-visible, rather than scan the
    # index. A transaction open elsewhere may hold back the newest rows: retry.
    for _ in $(seq 1 20); do
        q -c "vacuum (index_cleanup on) $t"
        plan=$(q -c "$off explain (analyze, costs off, timing off, summary off)
                    select k from $t where k between 0 and 100 order by k")
        grep -q "Index Only Scan using ${t}_k" <<<"$plan" || fail "$t: no index-only scan: $plan"
        fetches=$(grep -o "Heap Fetches: [0-9]*" <<<"$plan" | awk '{print $3}')
        [ "$fetches" = 0 ] && break
        sleep 0.5
    done
    ios=$(q -c "$off select count(*), coalesce(sum(k), 0), count(distinct k) from $t where k between 0 and 100") \
        || fail "$t: index-only scan failed"
    ord=$(q -c "$off select count(*), coalesce(sum(k), 0), count(*) filter (where k < prev) from
                (select k, lag(k) over () as prev from (select k from $t where k between 0 and 100 order by k) o) x")
    all_seq=$(q -c "set enable_indexscan = off; set enable_indexonlyscan = off; set enable_bitmapscan = off;
                    select count(*) from $t")
    plan=$(q -c "set enable_seqscan = off; set enable_bitmapscan = off; explain (costs off) select count(*) from $t")
    grep -q "Index Only Scan using ${t}_k" <<<"$plan" || fail "$t: count(*) is no index-only scan: $plan"
    all_ios=$(q -c "set enable_seqscan = off; set enable_bitmapscan = off; select count(*) from $t")
    echo "$t after VACUUM: seqscan $seq | index-only $ios (heap fetches $fetches) | ordered $ord | count(*) $all_seq / $all_ios"
    [ "$fetches" = 0 ] || fail "$t: the index-only scan fetched $fetches heap tuples after VACUUM"
    [ "$ios" = "$seq" ] || fail "$t: index-only scan ($ios) differs from seqscan ($seq)"
    [ "$ord" = "${seq%|*}|0" ] || fail "$t: ordered index-only scan ($ord) differs from seqscan ($seq) or is out of order"
    [ "$all_ios" = "$all_seq" ] || fail "$t: index-only count(*) ($all_ios) differs from seqscan ($all_seq)"
}

round() {
    local how=$1 n=$2
    echo "== round $n: crash by $how with open inserting transactions"
    holders=()
    # No dirty write-back leaf left from the last round's inserts and VACUUM:
    # the worker writing one back flushes all WAL, which could make the rows
    # below durable before the crash (the round would lose nothing).
    q -c "select dex_flush()" >/dev/null
    if [ $((n % 2)) = 0 ]; then
        # The write-back index's rows first; the worker's next round writes its
        # dirty leaves back -- after flushing their rows' WAL, so the rows are
        # durable (aborted after the crash) and no stray can arise -- and the
        # index survives the crash. The other tables' rows come after that WAL.
        open_inserters sw
        sleep 1.5
    fi
    # The WAL writer is stopped (SIGSTOP) while the rows are inserted and until
    # the crash has been signalled: wal_writer_delay (at most 10 s) alone let a
    # slow, loaded machine flush the rows' WAL before the crash, and then the
    # crash lost nothing (this test's point is rows that are lost). Continued
    # after the postmaster's SIGQUIT, it exits before doing anything else.
    local walwriter
    walwriter=$(q -c "select pid from pg_stat_activity where backend_type = 'walwriter'")
    [ -n "$walwriter" ] || fail "no WAL writer process"
    kill -STOP "$walwriter"
    open_inserters s1 s3 so
    if [ "$how" = immediate ]; then
        as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -m immediate stop >/dev/null &
        local stopper=$!
        sleep 1
        kill -CONT "$walwriter" 2>/dev/null || true
        wait "$stopper"
        sleep 0.5
        as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -l "$DEX_WORK/pg-server.log" -w start >/dev/null
    else
        victim=$(q -c "select pid from pg_stat_activity where query like '%pg_sleep(600) /* holder */%' and pid <> pg_backend_pid() limit 1")
        kill -9 "$victim"
        sleep 1
        kill -CONT "$walwriter" 2>/dev/null || true
    fi
    wait_ready
    for p in "${holders[@]}"; do wait "$p" 2>/dev/null || true; done
    for t in $TABLES; do
        lost=$(q -c "select count(*) from $t where pad = 'lost'")
        [ "$lost" = 0 ] || fail "$t: rows of an uncommitted transaction are visible after the crash ($lost)"
    done
    # The write-back index may have lost dirty leaves (then it refuses with
    # HINT REINDEX, never answers wrongly) -- but not after the worker's round.
    local probe
    if ! probe=$(q -c "set enable_seqscan = off; set enable_bitmapscan = off; select count(*) from sw where k = 5" 2>&1); then
        grep -q "lost its remote memory" <<<"$probe" && grep -q "REINDEX" <<<"$probe" || fail "sw: $probe"
        [ $((n % 2)) = 0 ] && fail "sw_k lost although the write-back worker had written its leaves back"
        echo "sw: refuses to answer (dirty leaves lost in the crash), HINT REINDEX; reindexing"
        q -c "reindex index sw_k"
    fi
    # new rows reuse the heap slots of the lost ones
    for t in $TABLES; do
        local set=""
        [ "$t" = so ] && set="set dex.offload = on;"
        q -c "$set insert into $t(k, pad) select 50 + g % 3, 'new' from generate_series(1, 20) g"
    done
    for t in $TABLES; do check_table "$t"; done
    for t in $TABLES; do ios_check "$t"; done
}

round immediate 1
round kill9 2
round immediate 3
round kill9 4
offloads=$(q -c "select offloads from dex_stats()")
echo "offloaded operations since the last restart: $offloads"
[ "$offloads" -gt 0 ] || fail "dex.offload = on did not offload the inserts into so"

# the recoveries did find and remove strays in every write-through index (the
# scenario above is real: the crashes lost rows whose entries had been written)
grep "stray entries removed" "$DEX_WORK/pg-server.log" | sed 's/^.*dex: /  /'
for i in s1_k s3_k so_k; do
    removed=$(grep "index \"$i\"" "$DEX_WORK/pg-server.log" | grep -o "[0-9]* stray entries removed" | awk '{s += $1} END {print s + 0}')
    echo "$i: stray entries removed by journal recoveries: $removed"
    [ "$removed" -gt 0 ] || fail "$i: no journal recovery removed a stray entry: the crashes lost nothing"
done

echo "== tails deleted, VACUUM truncates the heaps"
for t in $TABLES; do
    before=$(q -c "select pg_relation_size('$t') / 8192")
    q -c "delete from $t where id > 17000 or pad <> repeat('x', 20)"
    q -c "vacuum $t"
    after=$(q -c "select pg_relation_size('$t') / 8192")
    echo "$t: $before -> $after heap blocks"
    [ "$after" -lt "$before" ] || fail "$t: VACUUM did not truncate the heap"
    check_table "$t"
    ios_check "$t"
done
echo "crash strays: ok"
