#!/usr/bin/env bash
# The VACUUM interlock of index-only scans (src/README.md "Index-only scans"):
# a cursor's index-only scan reads a batch of entries that includes rows
# deleted before it began; VACUUM then removes them and would set the page
# all-visible. VACUUM must wait while the cursor holds that batch -- else the
# cursor, trusting the visibility map, returns the deleted rows from the
# entries it already read. With the wait, the cursor's rows are right and
# VACUUM finishes once the cursor moves on. Round 2: the same while a plain
# index scan's dead-entry hints removed the entries before VACUUM ran.
source "$(dirname "$0")/common.sh"
start_memnode mem "$MPORT" 256MB
start_cluster pg "$PPORT" "$MEMNODE_URL" "autovacuum = off"

q -c "create extension dex"
q -c "create table t(k int, pad int)"
q -c "insert into t select g, g from generate_series(1, 2000) g"
q -c "create index t_k on t using dex (k)"
q -c "vacuum analyze t"
q -c "delete from t where k between 10 and 20"   # committed before the cursor's snapshot
CUR="declare c cursor for select k from t where k between 1 and 40 order by k"
plan=$(q -c "set enable_seqscan = off; set enable_bitmapscan = off; explain (costs off) $CUR")
grep -q "Index Only Scan using t_k" <<<"$plan" || fail "the cursor is no index-only scan: $plan"

rm -f "$DEX_WORK/cur.in"; mkfifo "$DEX_WORK/cur.in"; chmod 666 "$DEX_WORK/cur.in"
dpsql "$PPORT" -d postgres -At <"$DEX_WORK/cur.in" >"$DEX_WORK/cur.out" 2>&1 &
cur=$!
exec 7>"$DEX_WORK/cur.in"
echo "set enable_seqscan = off; set enable_bitmapscan = off; begin; $CUR; fetch 1 from c; select 'fetched';" >&7
for _ in $(seq 1 100); do grep -q "^fetched" "$DEX_WORK/cur.out" && break; sleep 0.1; done
grep -q "^fetched" "$DEX_WORK/cur.out" || fail "the cursor did not fetch: $(cat "$DEX_WORK/cur.out")"

q -c "vacuum t" &
vac=$!
sleep 3
waiting=$(q -c "select count(*) from pg_stat_activity where query = 'vacuum t' and wait_event_type = 'Extension'")
echo "VACUUM waiting for the cursor's batch: $waiting"
kill -0 $vac 2>/dev/null || fail "VACUUM finished while the cursor still held entries it removed"
[ "$waiting" = 1 ] || fail "VACUUM is not waiting in dex: $waiting"

echo "fetch all from c; commit;" >&7
exec 7>&-
wait $cur || fail "the cursor's session failed: $(cat "$DEX_WORK/cur.out")"
wait $vac || fail "VACUUM failed"
rows=$(grep -E '^[0-9]+$' "$DEX_WORK/cur.out" | paste -sd,)
echo "cursor rows: $rows"
want=$(seq -s, 1 9),$(seq -s, 21 40)
[ "$rows" = "$want" ] || fail "the cursor returned $rows, want $want"
# after VACUUM: all-visible, the same answer with no heap fetch
plan=$(q -c "set enable_seqscan = off; set enable_bitmapscan = off;
    explain (analyze, costs off, timing off, summary off) select k from t where k between 1 and 40")
grep -q "Heap Fetches: 0" <<<"$plan" || fail "not all-visible after VACUUM: $plan"

# Round 2, dead-entry hints (src/README.md "Dead-entry hints"): the cursor
# holds a batch with entries of deleted rows; another session's plain index
# scan finds those rows dead to everyone and removes their entries. VACUUM
# then has no entry left to remove -- and must still wait for the cursor
# (without the wait it would set the page all-visible and the cursor, which
# read the entries before the kill, would return the deleted rows).
q -c "create table t2(k int, pad int)"
q -c "insert into t2 select g, g from generate_series(1, 2000) g"
q -c "create index t2_k on t2 using dex (k)"
q -c "vacuum analyze t2"
q -c "delete from t2 where k between 10 and 20"
CUR2="declare c2 cursor for select k from t2 where k between 1 and 40 order by k"
plan=$(q -c "set enable_seqscan = off; set enable_bitmapscan = off; explain (costs off) $CUR2")
grep -q "Index Only Scan using t2_k" <<<"$plan" || fail "round 2: the cursor is no index-only scan: $plan"
rm -f "$DEX_WORK/cur2.in"; mkfifo "$DEX_WORK/cur2.in"; chmod 666 "$DEX_WORK/cur2.in"
dpsql "$PPORT" -d postgres -At <"$DEX_WORK/cur2.in" >"$DEX_WORK/cur2.out" 2>&1 &
cur=$!
exec 7>"$DEX_WORK/cur2.in"
echo "set enable_seqscan = off; set enable_bitmapscan = off; begin; $CUR2; fetch 1 from c2; select 'fetched';" >&7
for _ in $(seq 1 100); do grep -q "^fetched" "$DEX_WORK/cur2.out" && break; sleep 0.1; done
grep -q "^fetched" "$DEX_WORK/cur2.out" || fail "round 2: the cursor did not fetch: $(cat "$DEX_WORK/cur2.out")"

q -c "select dex_stats_reset()" >/dev/null
q -c "set enable_seqscan = off; set enable_bitmapscan = off; set enable_indexonlyscan = off;
      select count(*), sum(pad) from t2 where k between 1 and 40" >/dev/null
kills=$(q -c "select kills from dex_stats()")
entries=$(q -c "select entries from dex_check('t2_k')")
echo "a plain index scan killed $kills entries; t2_k holds $entries"
[ "$kills" = 11 ] && [ "$entries" = 1989 ] || fail "round 2: the dead rows' entries were not killed: kills $kills, entries $entries"

q -c "vacuum t2" &
vac=$!
sleep 3
waiting=$(q -c "select count(*) from pg_stat_activity where query = 'vacuum t2' and wait_event_type = 'Extension'")
echo "VACUUM (nothing left to remove) waiting for the cursor's batch: $waiting"
kill -0 $vac 2>/dev/null || fail "round 2: VACUUM finished while the cursor held entries a kill removed"
[ "$waiting" = 1 ] || fail "round 2: VACUUM is not waiting in dex: $waiting"
echo "fetch all from c2; commit;" >&7
exec 7>&-
wait $cur || fail "round 2: the cursor's session failed: $(cat "$DEX_WORK/cur2.out")"
wait $vac || fail "round 2: VACUUM failed"
rows=$(grep -E '^[0-9]+$' "$DEX_WORK/cur2.out" | paste -sd,)
echo "cursor rows: $rows"
[ "$rows" = "$want" ] || fail "round 2: the cursor returned $rows, want $want"
echo "ios vacuum: ok"
