#!/usr/bin/env bash
# Crashes never produce wrong answers: kill -9 a backend in the middle of a
# write workload and then crash the whole server (immediate shutdown); after
# recovery every index answer must equal a sequential scan's -- also after more
# rows were inserted into the heap slots the crash freed (a stray entry of a
# lost row would then lead to a new row: src/README.md "Crash survival") --,
# VACUUM must run, and dex_check must pass.
source "$(dirname "$0")/common.sh"
start_memnode mem "$MPORT" 512MB
start_cluster pg "$PPORT" "$MEMNODE_URL"
q -c "create extension dex"
q -c "create table t(k int, v bigint); insert into t select g % 10000, g from generate_series(1, 20000) g"
q -c "create index t_k on t using dex (k)"

check_equal() {
    local diff
    diff=$(q -c "
      create temp table via_index as select k, v from t where false;
      set enable_seqscan = off; set enable_bitmapscan = off;
      insert into via_index select k, v from t where k between -1 and 100000;
      set enable_bitmapscan = on; set enable_indexscan = off;
      insert into via_index select k, v from t where k between 5000 and 6000;
      reset enable_seqscan; reset enable_indexscan; reset enable_bitmapscan;
      set enable_indexscan = off; set enable_bitmapscan = off;
      select (select count(*) from (select * from via_index except all
                                    (select * from t union all select * from t where k between 5000 and 6000)) a)
           + (select count(*) from ((select * from t union all select * from t where k between 5000 and 6000)
                                    except all select * from via_index) b)")
    echo "rows differing between index scans and seqscan: $diff"
    [ "$diff" = 0 ] || fail "index answers differ from seqscan after crash"
}

cat >"$DEX_WORK/w.sql" <<'SQL'
\set k random(0, 20000)
INSERT INTO t VALUES (:k, :client_id);
DELETE FROM t WHERE k = :k + 1 AND v < 100;
SQL
pgb() { "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$PPORT" -U postgres -c 4 -j 2 -T "$1" -f "$DEX_WORK/w.sql" postgres >/dev/null 2>&1 || true; }

echo "kill -9 one backend mid-workload"
pgb 6 & bg=$!
sleep 2
victim=$(q -c "select pid from pg_stat_activity where query like 'INSERT INTO t%' or query like 'DELETE FROM t%' limit 1" || true)
[ -n "$victim" ] && kill -9 "$victim" && echo "killed backend $victim"
wait $bg || true
# wait for the postmaster's crash recovery to finish
for _ in $(seq 1 100); do q -c "select 1" >/dev/null 2>&1 && break; sleep 0.2; done
q -c "insert into t select g % 20000, -g from generate_series(1, 2000) g"
check_equal

echo "immediate shutdown mid-workload"
pgb 6 & bg=$!
sleep 2
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -m immediate stop >/dev/null
wait $bg || true
as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/pg" -l "$DEX_WORK/pg-server.log" -w start >/dev/null

check_equal
# new rows land in the heap slots of rows the crash lost
q -c "insert into t select g % 20000, -g from generate_series(1, 3000) g"
check_equal
q -c "vacuum t"
q -c "select * from dex_check('t_k')" || fail "dex_check after crash"
check_equal
echo "crash: ok"
