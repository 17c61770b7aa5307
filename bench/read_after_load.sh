#!/usr/bin/env bash
# Reads right after a multi-row statement (issue 17): a cached dex index of
# ROWS rows takes LOAD new random keys in one INSERT ... SELECT (the batched
# path), then NREAD point selects (index scans forced) in one backend, of keys
# drawn from the LOAD new ones and as many old ones. Reported per round, for dex and a btree copy in the same
# cluster (alternating which goes first): the load's time and round trips,
# and the reads' time, remote reads and node cache misses (dex_stats()). The
# counts are what compares two checkouts: a batch that drops the cached
# leaves it changed leaves them to be fetched by the reads; one that reads
# them back (InsertBatch::rewarm) does it in one round trip per memory node.
# Every round checks that the dex index returns the same rows as the btree.
#
#   bash bench/read_after_load.sh [CHECKOUT] [ROWS] [LOAD] [NREAD] [ROUNDS]
#
# CHECKOUT (default: this one, built) is installed into a private copy of the
# system PostgreSQL tree (scripts/lib.sh private_pg_install): no install lock.
set -euo pipefail
CO=$(cd "${1:-$(dirname "$0")/..}" && pwd); ROWS=${2:-200000}; LOAD=${3:-20000}; NREAD=${4:-20000}
ROUNDS=${5:-3}
source "$(dirname "$0")/../scripts/lib.sh"
DEX_ROOT=$CO
DEX_WORK=/tmp/dex-ral-$(basename "$CO"); export DEX_WORK
rm -rf "$DEX_WORK"
private_pg_install "$CO" "$DEX_WORK-pgroot"
prepare_workdir
mport=$(free_port); pport=$(free_port)
trap 'stop_cluster ral; stop_memnode ral-mem' EXIT
start_memnode ral-mem "$mport" 2GB --threads 2
start_cluster ral "$pport" "tcp://127.0.0.1:$mport" "dex.cache_size = '256MB'" "autovacuum = off" \
    "dex.leaf_admission = 1.0"
P() { dpsql "$pport" -d postgres -At "$@"; }
P -q -c "CREATE EXTENSION dex"
# The same rows for both indexes: the table's ROWS, the load's LOAD, and
# every key with a dense id (the reads pick keys that exist, half of them
# from the load, through a btree on the id: the same extra work for both).
P -q -c "SELECT setseed(0.42)" \
    -c "CREATE TABLE src AS SELECT (random() * 1e9)::int8 * 1000 + 1 AS k, g AS v FROM generate_series(1, $ROWS) g" \
    -c "CREATE TABLE ld AS SELECT (random() * 1e9)::int8 * 1000 + 2 AS k, -g AS v FROM generate_series(1, $LOAD) g" \
    -c "CREATE TABLE keys AS SELECT row_number() OVER () AS id, k FROM ((SELECT k FROM ld) UNION ALL (SELECT k FROM src LIMIT $LOAD)) x" \
    -c "CREATE UNIQUE INDEX ON keys (id)" -c "VACUUM ANALYZE src, ld, keys"
P -q -c "CREATE FUNCTION reads(tbl text, n int, seed float8) RETURNS bigint LANGUAGE plpgsql
    SET enable_seqscan = off SET enable_bitmapscan = off AS \$\$
DECLARE s bigint := 0; x bigint; nk bigint;
BEGIN
  PERFORM setseed(seed);
  SELECT count(*) INTO nk FROM keys;
  FOR i IN 1..n LOOP
    EXECUTE format('SELECT count(*) FROM %I WHERE k = (SELECT k FROM keys WHERE id = \$1)', tbl)
      INTO x USING 1 + floor(random() * nk)::bigint;
    s := s + x;
  END LOOP;
  RETURN s;
END \$\$"
secs() { local t0 t1; t0=$(date +%s.%N); P -q -c "$1" >/dev/null; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }
stat() { P -c "SELECT $1 FROM dex_stats()"; }
round() {  # round AM R
    local am=$1 r=$2 s rt rd ms
    P -q -c "DROP TABLE IF EXISTS t_$am" -c "CREATE TABLE t_$am (k int8, v int8)" \
        -c "INSERT INTO t_$am SELECT * FROM src" \
        -c "CREATE INDEX t_${am}_k ON t_$am USING $am (k)" -c "VACUUM ANALYZE t_$am"
    # every leaf into the cache (a scan of the whole index), then the load
    # (offloading off: a scan the memory node finishes brings no leaf into the cache)
    P -q -c "SET dex.offload = off" -c "SET enable_seqscan = off" -c "SET enable_bitmapscan = off" \
        -c "SELECT count(*) FROM t_$am WHERE k >= 0" -c "SELECT reads('t_$am', 5000, 0.9)" >/dev/null
    P -q -c "SELECT dex_stats_reset()" >/dev/null
    s=$(secs "INSERT INTO t_$am SELECT * FROM ld")
    rt=$(stat round_trips)
    P -q -c "SELECT dex_stats_reset()" >/dev/null
    ms=$(secs "SELECT reads('t_$am', $NREAD, 0.$r)")
    rd=$(stat "remote_reads || ' ' || cache_misses")
    echo "$r $am load_s $s load_round_trips $rt read_s $ms read_remote_reads_misses $rd" | tee -a "$DEX_WORK/raw.txt"
}
for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then round dex "$r"; round btree "$r"; else round btree "$r"; round dex "$r"; fi
    # same rows through both indexes
    want=$(P -c "SELECT reads('t_btree', 2000, 0.5)"); got=$(P -c "SELECT reads('t_dex', 2000, 0.5)")
    [ "$want" = "$got" ] || die "round $r: dex found $got rows, btree $want"
    P -q -c "SELECT * FROM dex_check('t_dex_k')" >/dev/null || die "dex_check failed"
done
echo "checkout: $(git -C "$CO" log --oneline -1)"
