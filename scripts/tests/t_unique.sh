#!/usr/bin/env bash
# Unique dex indexes under concurrency (src/README.md "Unique indexes"):
# 8 pgbench clients race inserts and delete+insert on 300 keys of a UNIQUE dex
# index, the same on 40 hotter keys of byte-string ones (text, and (int,
# text DESC)), and ON CONFLICT DO NOTHING on a dex exclusion constraint; a backend
# is killed with -9 in the middle of the race (crash restart) and the race goes
# on. Then: no key twice (sequential scan), index and sequential scans agree,
# dex_check passes, and the number of unique violations seen is > 0 (the race
# really raced).
source "$(dirname "$0")/common.sh"
start_memnode mem "$MPORT" 512MB --threads 2
start_cluster pg "$PPORT" "$MEMNODE_URL"
CLIENTS=8; ROUND_SECONDS=${ROUND_SECONDS:-8}

q -c "create extension dex"
q -c "create table u (k int, v int); create unique index u_k on u using dex (k)"
q -c "create table x (k int, v int, constraint x_k exclude using dex (k with =))"
q -c "create table t (k text, v int); create unique index t_k on t using dex (k)"
q -c "create table m (a int, b text, v int); create unique index m_ab on m using dex (a, b desc)"
q -c "create table violations (n int)"
# An insert that counts a unique violation instead of failing the client.
q -c "create function try_insert(key int, val int) returns void language plpgsql as \$\$
begin
  insert into u values (key, val);
exception when unique_violation then
  insert into violations values (1);
end \$\$"
# The same for the byte-string indexes: a text key, and (int, text) of it.
q -c "create function try_insert_t(key int, val int) returns void language plpgsql as \$\$
begin
  insert into t values ('user' || key || '@example.com', val);
  insert into m values (key % 7, 'b' || key, val);
exception when unique_violation then
  insert into violations values (2);
end \$\$"
cat >"$DEX_WORK/race.sql" <<'SQL'
\set k random(1, 300)
\set op random(1, 10)
\set h random(1, 40)
SELECT try_insert(:k, :client_id) WHERE :op <= 5;
DELETE FROM u WHERE k = :k AND :op BETWEEN 6 AND 7;
INSERT INTO x VALUES (:k, :client_id) ON CONFLICT DO NOTHING;
DELETE FROM x WHERE k = :k AND :op = 8;
BEGIN;
DELETE FROM u WHERE k = :k AND :op >= 9;
SELECT try_insert(:k, -:client_id) WHERE :op >= 9;
COMMIT;
SELECT try_insert_t(:h, :client_id) WHERE :op <= 5;
DELETE FROM t WHERE k = 'user' || :h || '@example.com' AND :op BETWEEN 6 AND 7;
DELETE FROM m WHERE a = :h % 7 AND b = 'b' || :h AND :op BETWEEN 6 AND 7;
BEGIN;
DELETE FROM t WHERE k = 'user' || :h || '@example.com' AND :op >= 9;
DELETE FROM m WHERE a = :h % 7 AND b = 'b' || :h AND :op >= 9;
SELECT try_insert_t(:h, -:client_id) WHERE :op >= 9;
COMMIT;
SQL
chmod a+r "$DEX_WORK/race.sql"

race() {  # race LOG: CLIENTS clients for ROUND_SECONDS; a killed client is no failure
    "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$PPORT" -U postgres -c "$CLIENTS" -j 2 -T "$ROUND_SECONDS" \
        -f "$DEX_WORK/race.sql" postgres >"$1" 2>&1 || true
    grep -E "number of transactions actually processed" "$1" || { cat "$1"; fail "pgbench did not run"; }
}

check_unique() {  # check_unique LABEL
    local dups bad
    dups=$(q -c "set enable_indexscan = off; set enable_bitmapscan = off;
        select (select count(*) - count(distinct k) from u) + (select count(*) - count(distinct k) from x)
             + (select count(*) - count(distinct k) from t) + (select count(*) - count(distinct (a, b)) from m)")
    echo "$1: keys present twice: $dups"
    [ "$dups" = 0 ] || fail "$1: duplicate keys in a unique dex index"
    bad=$(q -c "set enable_seqscan = off; set enable_bitmapscan = off;
        with i as (select k, v from u where k between 1 and 300),
             s as (select k, v from u where k + 0 between 1 and 300)
        select (select count(*) from (select * from i except all select * from s) a) +
               (select count(*) from (select * from s except all select * from i) b)")
    bad=$((bad + $(q -c "set enable_seqscan = off; set enable_bitmapscan = off;
        select count(*) from t s where not exists (select 1 from t i where i.k = s.k and i.ctid = s.ctid)") ))
    bad=$((bad + $(q -c "set enable_seqscan = off; set enable_bitmapscan = off;
        select count(*) from m s where not exists (select 1 from m i where i.a = s.a and i.b = s.b and i.ctid = s.ctid)") ))
    echo "$1: rows where the index scan and the sequential scan differ: $bad"
    [ "$bad" = 0 ] || fail "$1: index scan and sequential scan disagree"
    q -c "select * from dex_check('u_k')" >/dev/null || fail "$1: dex_check(u_k)"
    q -c "select * from dex_check('x_k')" >/dev/null || fail "$1: dex_check(x_k)"
    q -c "select * from dex_check('t_k')" >/dev/null || fail "$1: dex_check(t_k)"
    q -c "select * from dex_check('m_ab')" >/dev/null || fail "$1: dex_check(m_ab)"
}

race "$DEX_WORK/race1.log"
check_unique "after the race"

# kill -9 one racing backend: PostgreSQL restarts every backend, the insert
# journal drops entries of rows lost with the crash, the race goes on.
race "$DEX_WORK/race2.log" &
racer=$!
sleep 3
victim=$(q -c "select pid from pg_stat_activity where backend_type = 'client backend' and application_name = 'pgbench' limit 1" || true)
[ -n "$victim" ] || fail "no racing backend to kill"
kill -9 "$victim"
wait "$racer" || true
wait_ready() { for _ in $(seq 1 60); do q -c "select 1" >/dev/null 2>&1 && return 0; sleep 1; done; fail "server did not come back"; }
wait_ready
grep -qE "terminated by signal 9" "$DEX_WORK/pg-server.log" || fail "the backend was not killed"
race "$DEX_WORK/race3.log"
check_unique "after kill -9 and another race"

violations=$(q -c "select count(*) from violations where n = 1")
violations_t=$(q -c "select count(*) from violations where n = 2")
echo "unique violations raised during the races: $violations (int), $violations_t (byte-string keys)"
[ "$violations" -gt 0 ] || fail "no unique violation was raised: the race did not race"
[ "$violations_t" -gt 0 ] || fail "no unique violation on the byte-string keys: the race did not race"
echo "unique: ok"
