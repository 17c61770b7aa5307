#!/usr/bin/env bash
# Kills of entries still present (src/README.md "Dead-entry hints", K8): a
# write-back index's kill removes the entries a scan found dead even if the
# leaf changed since the scan read it -- unless a VACUUM removal began since,
# because VACUUM's heap pass may have handed a dead row's TID to a new row
# with the same key, whose entry is byte for byte the one the scan judged.
# 1. A cursor's index scan walks 15 dead entries of key 5 and stops at the
#    first live row, holding its batch. VACUUM removes the 15 entries and
#    frees their line pointers; 15 new rows of key 5 take those TIDs. The
#    cursor then leaves its batch: the new rows' entries must stay (index
#    count = seqscan count).
# 2. Without VACUUM: a cursor holds a batch with dead entries while another
#    session inserts into the same leaf; leaving the batch still removes
#    them (before K8 the changed frame skipped the kill).
source "$(dirname "$0")/common.sh"
start_memnode mem "$MPORT" 256MB
start_cluster pg "$PPORT" "$MEMNODE_URL" "autovacuum = off" "dex.cache_size = '64MB'"
IDX="set enable_seqscan = off; set enable_bitmapscan = off; set dex.kill_min_entries = 1;"

q -c "create extension dex"
# one full heap page: the new rows go where VACUUM freed line pointers
q -c "create table t(k int, pad int) with (autovacuum_enabled = off)"
q -c "insert into t select g % 10, g from generate_series(1, 220) g"
q -c "create index t_k on t using dex (k) with (write_back = on)"
q -c "vacuum analyze t"
[ "$(q -c "select count(distinct (ctid::text::point)[0]) from t")" = 1 ] || fail "expected a one-page table"
# (the leaves cached first: a batch read remotely, admitting its leaf, kills nothing)
q -c "$IDX select count(*) from t where k >= 0" >/dev/null
q -c "create table dead as select ctid::text as tid from t where k = 5 and pad < 150"
q -c "delete from t where k = 5 and pad < 150"    # 15 dead, the 7 live ones last
# (the page is nearly full: this read prunes it, the dead rows' line pointers
# turn LP_DEAD -- VACUUM frees those even while the cursor pins the page)
q -c "select count(*) from t" >/dev/null

# cursor_open NAME SQL: a session that runs SQL (ending in "select 'ready'") and waits
cursor_open() {
    rm -f "$DEX_WORK/$1.in"; mkfifo "$DEX_WORK/$1.in"; chmod 666 "$DEX_WORK/$1.in"
    dpsql "$PPORT" -d postgres -At <"$DEX_WORK/$1.in" >"$DEX_WORK/$1.out" 2>&1 &
    eval "${1}_pid=$!"
    eval "exec ${2}>\"$DEX_WORK/$1.in\""
    echo "$3" >&"$2"
    for _ in $(seq 1 100); do grep -q "^ready" "$DEX_WORK/$1.out" && break; sleep 0.1; done
    grep -q "^ready" "$DEX_WORK/$1.out" || fail "$1: $(cat "$DEX_WORK/$1.out")"
}

echo "== 1. VACUUM recycles the dead rows' TIDs while a cursor holds their batch"
plan=$(q -c "$IDX explain (costs off) select pad from t where k = 5")
grep -q "Index Scan using t_k" <<<"$plan" || fail "not an index scan: $plan"
cursor_open c1 7 "$IDX begin; declare c cursor for select pad from t where k = 5; fetch 1 from c; select 'ready';"
grep -q "^155$" "$DEX_WORK/c1.out" || fail "the cursor's first row: $(cat "$DEX_WORK/c1.out")"
q -c "vacuum t"
q -c "insert into t select 5, 1000 + g from generate_series(1, 15) g"
reused=$(q -c "select count(*) from t where k = 5 and pad > 1000 and ctid::text in (select tid from dead)")
echo "new rows of key 5 on line pointers VACUUM freed: $reused"
[ "$reused" -ge 1 ] || fail "no TID was recycled: the test proves nothing ($(q -c "select ctid, pad from t where k = 5"))"
q -c "select dex_stats_reset()" >/dev/null
echo "fetch all from c; commit;" >&7
exec 7>&-
wait "$c1_pid" || fail "the cursor's session: $(cat "$DEX_WORK/c1.out")"
echo "the cursor's kill: $(q -c "select kills || ' removed, ' || kills_skipped || ' skipped' from dex_stats()")"
[ "$(q -c "select kills + kills_skipped from dex_stats()")" -ge 15 ] || fail "the cursor attempted no kill: the test proves nothing"
a=$(q -c "$IDX select count(*), sum(pad) from t where k = 5")
b=$(q -c "set enable_indexscan = off; set enable_bitmapscan = off; select count(*), sum(pad) from t where k = 5")
echo "key 5: index $a, seqscan $b"
[ "$a" = "$b" ] || fail "the cursor's kill removed entries of the rows that took the recycled TIDs"

echo "== 2. an insert into the leaf meanwhile does not stop the kill"
q -c "delete from t where k = 7 and pad < 150"
q -c "select dex_stats_reset()" >/dev/null
cursor_open c2 8 "$IDX begin; declare c cursor for select pad from t where k = 7; fetch 1 from c; select 'ready';"
q -c "insert into t values (7, 5000)"     # the same leaf, after the cursor's batch
echo "fetch all from c; commit;" >&8
exec 8>&-
wait "$c2_pid" || fail "the cursor's session: $(cat "$DEX_WORK/c2.out")"
kills=$(q -c "select kills from dex_stats()")
echo "entries killed after the leaf changed: $kills"
[ "$kills" -ge 15 ] || fail "expected the 15 dead entries of key 7 killed, got $kills"
a=$(q -c "$IDX select count(*), sum(pad) from t where k = 7")
b=$(q -c "set enable_indexscan = off; set enable_bitmapscan = off; select count(*), sum(pad) from t where k = 7")
[ "$a" = "$b" ] || fail "key 7: index $a, seqscan $b"
q -c "select dex_check('t_k')" >/dev/null || fail "dex_check"
echo "kills of entries still present: ok"
