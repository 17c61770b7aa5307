# Helpers for shell tests: each test runs its own memory node and cluster.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mkdir -p "$DEX_WORK"; prepare_workdir

MPORT=$(free_port); PPORT=$(free_port)
MEMNODE_URL="tcp://127.0.0.1:$MPORT"

test_cleanup() {
    stop_memnode mem CONT 2>/dev/null || true
    stop_cluster pg
    stop_memnode mem
}
trap test_cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
q() { dpsql "$PPORT" -d postgres -At "$@"; }
# expect_error SQL PATTERN...: the statement must fail and stderr match every pattern
expect_error() {
    local sql=$1; shift
    local out
    if out=$(q -c "$sql" 2>&1); then fail "expected an error from: $sql (got: $out)"; fi
    for pat in "$@"; do
        grep -qE -- "$pat" <<<"$out" || fail "error for [$sql] lacks /$pat/: $out"
    done
    echo "$out"
}

# write_mix_script FILE TABLE... : a pgbench script that, per transaction,
# inserts into or deletes from every TABLE the same (k, v) under an advisory
# lock on k (so all copies receive identical changes), then scans the first.
write_mix_script() {
    local f=$1; shift
    {
        echo '\set k random(0, 30000)'
        echo '\set op random(1, 10)'
        echo 'BEGIN;'
        echo 'SELECT pg_advisory_xact_lock(:k);'
        for t in "$@"; do echo "INSERT INTO $t SELECT :k, :op * 1000000 + :client_id WHERE :op <= 5;"; done
        for t in "$@"; do echo "DELETE FROM $t WHERE k = :k AND :op BETWEEN 6 AND 8;"; done
        echo "SELECT count(*) FROM $1 WHERE k BETWEEN :k AND :k + 200;"
        echo 'COMMIT;'
    } >"$f"
}

# run_mix FILE: $CLIENTS clients for $SECONDS_RUN seconds.
run_mix() {
    "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$PPORT" -U postgres -c "$CLIENTS" -j 2 -T "$SECONDS_RUN" \
        -f "$1" postgres | grep -E 'number of (transactions|failed)|tps' || fail "pgbench failed"
}

# compare_with_btree TABLE INDEX: an index scan of TABLE through INDEX returns
# exactly the rows of the btree-indexed copy `b`.
compare_with_btree() {
    local diff plan
    diff=$(q -c "set enable_seqscan = off; set enable_bitmapscan = off;
        with x as (select k, v from $1 where k >= 0 order by k), y as (select k, v from b)
        select (select count(*) from (select * from x except all select * from y) s) +
               (select count(*) from (select * from y except all select * from x) s)")
    echo "$1: rows differing from the btree copy: $diff"
    if [ "$diff" != 0 ]; then
        q -c "set enable_seqscan = off; set enable_bitmapscan = off;
            with x as (select k, v from $1 where k >= 0 order by k), y as (select k, v from b)
            (select 'only $1', * from (select * from x except all select * from y) s limit 10)
            union all (select 'only b', * from (select * from y except all select * from x) s limit 10)"
        fail "$1 and btree disagree"
    fi
    plan=$(q -c "set enable_seqscan = off; set enable_bitmapscan = off; explain (costs off) select k, v from $1 where k >= 0 order by k")
    grep -q "$2" <<<"$plan" || fail "comparison did not use $2: $plan"
}
