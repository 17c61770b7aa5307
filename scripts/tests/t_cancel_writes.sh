#!/usr/bin/env bash
# Inserts cancelled by statement_timeout in the middle of offloaded writes
# (found by sqlsmith): the memory node may have applied an offloaded insert
# whose answer the backend never read. The cached copy of that leaf must not
# stay without the entry, or VACUUM (reading the cached copy) leaves the
# aborted row's entry behind, pointing at a heap slot it frees: after the
# table is truncated, scans reaching the entry fail with "could not read
# block". Rounds of cancelled bulk inserts (default settings), then VACUUM:
# dex_check's entry count must equal the table's rows, and a bitmap scan over
# everything must succeed and count the same.
source "$(dirname "$0")/common.sh"
start_memnode mem "$MPORT" 512MB --threads 2
start_cluster pg "$PPORT" "$MEMNODE_URL"
ROUNDS=${ROUNDS:-12}

q -c "create extension dex"
q -c "create table r (id int, c int8) with (autovacuum_enabled = off)"
q -c "insert into r select g, g from generate_series(1, 1000) g"
q -c "create index r_c on r using dex (c)"
cancelled=0
for i in $(seq 1 "$ROUNDS"); do
    ms=$((150 + (i * 97) % 600))
    if out=$(q -c "set statement_timeout = '${ms}ms'" \
        -c "insert into r select g, g * 7919 % 1000003 from generate_series(1001, 3000000) g" 2>&1); then
        echo "round $i: the insert finished within ${ms} ms"
    else
        grep -q "statement timeout" <<<"$out" || fail "round $i: unexpected error: $out"
        cancelled=$((cancelled + 1))
    fi
done
echo "inserts cancelled by statement_timeout: $cancelled of $ROUNDS"
[ "$cancelled" -gt 0 ] || fail "no insert was cancelled: the test tested nothing"
offloads=$(q -c "select sum(offloads) from dex_memnodes()")
[ "$offloads" -gt 0 ] || fail "no insert was offloaded"
q -c "vacuum r"
rows=$(q -c "select count(*) from r")
entries=$(q -c "select entries from dex_check('r_c')")
echo "after VACUUM: $rows rows, $entries index entries"
[ "$entries" = "$rows" ] || fail "VACUUM left $((entries - rows)) entries of aborted rows behind"
got=$(q -c "set enable_seqscan = off; set enable_indexscan = off; select count(*) from r where c >= 0") ||
    fail "a bitmap scan over the index failed"
[ "$got" = "$rows" ] || fail "bitmap scan counted $got rows, the table has $rows"
echo "cancelled writes: ok"
