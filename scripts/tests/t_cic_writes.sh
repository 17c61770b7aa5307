#!/usr/bin/env bash
# CREATE INDEX CONCURRENTLY and REINDEX CONCURRENTLY of dex indexes while
# pgbench clients keep inserting, key-changing UPDATEs and DELETEs going on
# the table: the write-through tree (int8), a write-back one (int8) and a
# byte-string one (text). What the build's snapshot missed comes in through
# validate_index (ambulkdelete's TID list, then aminsert) and the writers'
# own aminserts once the index is marked ready: a row lost or doubled on
# either path is a wrong answer after the DDL. Then, with the writers
# stopped: every index is valid, each answers exactly what a sequential scan
# of its column answers, and dex_check passes. Each DDL must have overlapped
# committed writes (a sequence the writers advance), or the test did not test.
source "$(dirname "$0")/common.sh"
start_memnode mem "$MPORT" 512MB --threads 2
start_cluster pg "$PPORT" "$MEMNODE_URL"
CLIENTS=${CLIENTS:-4}
ROWS=60000

q -c "create extension dex"
q -c "create table c (k bigint, v bigint, t text)" -c "create sequence w"
q -c "insert into c select 2 * g, g, 'r' || g from generate_series(1, $ROWS) g"
# Fresh rows, key-changing updates of all three columns (never HOT), deletes.
cat >"$DEX_WORK/writes.sql" <<SQL
\set r random(1, $ROWS)
\set op random(1, 3)
select nextval('w');
\if :op = 1
insert into c values (2 * :r + 1, :r + 1000000 * :client_id, 'n' || :r);
\elif :op = 2
update c set k = k # 1, v = v + 1, t = t || 'u' where k between 2 * :r and 2 * :r + 1;
\else
delete from c where k = 2 * :r + 1;
\endif
SQL
chmod a+r "$DEX_WORK/writes.sql"

# Writers in 3 s rounds until told to stop; a failed round is recorded.
: >"$DEX_WORK/writer-failures"
(
    while [ ! -e "$DEX_WORK/stop-writers" ]; do
        out=$("$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$PPORT" -U postgres -c "$CLIENTS" -j 2 -T 3 \
            -f "$DEX_WORK/writes.sql" postgres 2>&1) || echo "$out" | tail -5 >>"$DEX_WORK/writer-failures"
    done
) &
writers=$!
trap 'touch "$DEX_WORK/stop-writers"; wait $writers 2>/dev/null || true; test_cleanup' EXIT

# run_ddl SQL: runs it while the writers write; they must have committed meanwhile.
run_ddl() {
    local before after
    before=$(q -c "select last_value from w")
    q -c "$1" || fail "failed under concurrent writes: $1"
    after=$(q -c "select last_value from w")
    echo "$1: $((after - before)) write transactions began meanwhile"
    [ "$after" -gt "$before" ] || fail "no write ran during: $1 (the test did not test)"
}
# Writers at full speed before the first DDL.
for _ in $(seq 1 100); do [ "$(q -c "select last_value from w")" -gt 200 ] && break; sleep 0.1; done

run_ddl "create index concurrently c_k on c using dex (k)"
run_ddl "create index concurrently c_v on c using dex (v) with (write_back = on)"
run_ddl "create index concurrently c_t on c using dex (t)"
run_ddl "reindex index concurrently c_k"
run_ddl "reindex index concurrently c_v"
run_ddl "reindex index concurrently c_t"

touch "$DEX_WORK/stop-writers"
wait $writers
[ ! -s "$DEX_WORK/writer-failures" ] || { cat "$DEX_WORK/writer-failures"; fail "a writers' round failed"; }
echo "writes: $(q -c "select last_value from w") transactions; table: $(q -c "select count(*) from c") rows"

invalid=$(q -c "select string_agg(indexrelid::regclass::text, ', ') from pg_index where indrelid = 'c'::regclass and not (indisvalid and indisready)")
[ -z "$invalid" ] || fail "invalid or unready indexes left: $invalid"
[ "$(q -c "select count(*) from pg_index where indrelid = 'c'::regclass")" = 3 ] \
    || fail "REINDEX CONCURRENTLY left extra indexes: $(q -c "select string_agg(indexrelid::regclass::text, ', ') from pg_index where indrelid = 'c'::regclass")"

# same_as_seqscan COLUMN INDEX BOUND: the column's values read through INDEX
# (an ordered index scan) and by a sequential scan are the same multiset.
same_as_seqscan() {
    local col=$1 idx=$2 bound=$3 diff plan
    diff=$(q -q -c "create temp table via_seq as select $col from c;
        set enable_seqscan = off; set enable_bitmapscan = off;
        create temp table via_idx as select $col from c where $col >= $bound order by $col;
        select (select count(*) from (select * from via_idx except all select * from via_seq) s) +
               (select count(*) from (select * from via_seq except all select * from via_idx) s)")
    echo "$idx: $(q -c "select count(*) from c where $col >= $bound") rows, $diff differing from a sequential scan"
    [ "$diff" = 0 ] || fail "$idx disagrees with a sequential scan"
    plan=$(q -c "set enable_seqscan = off; set enable_bitmapscan = off;
        explain (costs off) select $col from c where $col >= $bound order by $col")
    grep -q "$idx" <<<"$plan" || fail "the comparison did not use $idx: $plan"
    q -c "select * from dex_check('$idx')" >/dev/null || fail "dex_check $idx"
}
same_as_seqscan k c_k 0
same_as_seqscan v c_v 0
same_as_seqscan t c_t "''"
# And after VACUUM (the dead versions the writers left go through ambulkdelete).
q -c "vacuum c"
same_as_seqscan k c_k 0
same_as_seqscan t c_t "''"
echo "OK"
