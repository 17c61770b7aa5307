#!/usr/bin/env bash
# Bulk loading into a table that already has its index: COPY of ROWS rows
# (int8 key in random order, md5 payload) and INSERT ... SELECT of as many,
# dex and btree side by side in one cluster, alternating which goes first
# round by round; medians over ROUNDS rounds, the dex/btree time ratio, and
# dex's remote round trips per row (dex_stats()) and WAL syncs (pg_stat_wal)
# per 1000 rows for both. After each dex load: dex_check() and a comparison of
# an index scan with a seqscan (the run stops if a row differs).
#
#   [DEX_WITH="write_back = on"] bash bench/bulk_load.sh [CHECKOUT] [ROWS] [ROUNDS]
#
# DEX_WITH builds the dex index with those options.
# CHECKOUT (default: this one, built) is installed into a private copy of the
# system PostgreSQL tree (scripts/lib.sh private_pg_install): no install lock.
# fsync = on (a bulk load's WAL flushes are part of its cost).
set -euo pipefail
CO=$(cd "${1:-$(dirname "$0")/..}" && pwd); ROWS=${2:-1000000}; ROUNDS=${3:-3}
source "$(dirname "$0")/../scripts/lib.sh"
DEX_ROOT=$CO
DEX_WORK=/tmp/dex-bulk-$(basename "$CO"); export DEX_WORK
rm -rf "$DEX_WORK"
private_pg_install "$CO" "$DEX_WORK-pgroot"
prepare_workdir
mport=$(free_port); pport=$(free_port)
trap 'stop_cluster bl; stop_memnode bl-mem' EXIT
start_memnode bl-mem "$mport" 2GB --threads 2
start_cluster bl "$pport" "tcp://127.0.0.1:$mport" "dex.cache_size = '256MB'" "autovacuum = off" \
    "fsync = on" "max_wal_size = '4GB'" "checkpoint_timeout = '1h'"
P() { dpsql "$pport" -d postgres -At "$@"; }
P -q -c "CREATE EXTENSION dex"
data="$DEX_WORK/rows.copy"
P -c "COPY (SELECT (random() * 1e12)::int8, md5(g::text) FROM generate_series(1, $ROWS) g) TO STDOUT" >"$data"
chmod a+r "$data"
raw="$DEX_WORK/raw.txt"; : >"$raw"
secs() { local t0 t1; t0=$(date +%s.%N); P -q -c "$1" >/dev/null; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }
load() {  # load AM ROUND
    local am=$1 r=$2 s stats
    P -q -c "DROP TABLE IF EXISTS b_$am, src_$am" \
        -c "CREATE TABLE b_$am (k int8, pad text)" -c "CREATE INDEX ON b_$am USING $am (k) $([ "$am" = dex ] && echo "${DEX_WITH:+WITH ($DEX_WITH)}")" \
        -c "CREATE TABLE src_$am (k int8, pad text)" -c "COPY src_$am FROM '$data'" -c "CHECKPOINT"
    P -q -c "SELECT dex_stats_reset(), pg_stat_reset_shared('wal')" >/dev/null
    s=$(secs "COPY b_$am FROM '$data'")
    stats=$(P -c "SELECT round_trips || ' ' || wal_sync FROM dex_stats(), pg_stat_wal")
    echo "$r copy $am $s $stats" | tee -a "$raw"
    P -q -c "TRUNCATE b_$am" -c "CHECKPOINT" -c "SELECT dex_stats_reset(), pg_stat_reset_shared('wal')" >/dev/null
    s=$(secs "INSERT INTO b_$am SELECT * FROM src_$am")
    stats=$(P -c "SELECT round_trips || ' ' || wal_sync FROM dex_stats(), pg_stat_wal")
    echo "$r insert_select $am $s $stats" | tee -a "$raw"
    [ "$am" = btree ] || P -q -c "SELECT * FROM dex_check('b_dex_k_idx')" >/dev/null || die "dex_check failed"
    # The loaded index answers like a seqscan of the same table (every row, once).
    [ "$am" = btree ] || {
        local diff
        diff=$(P -q -c "SET enable_indexscan = off" -c "SET enable_bitmapscan = off" -c "SET enable_indexonlyscan = off" \
            -c "CREATE TEMP TABLE want AS SELECT k FROM b_dex" -c "RESET ALL" -c "SET enable_seqscan = off" \
            -c "SELECT count(*) FROM ((SELECT k FROM want EXCEPT ALL SELECT k FROM b_dex WHERE k >= 0)
                UNION ALL (SELECT k FROM b_dex WHERE k >= 0 EXCEPT ALL SELECT k FROM want)) d")
        [ "$diff" = 0 ] || die "round $r: $diff rows differ between the dex index and a seqscan"
    }
}
for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then load dex "$r"; load btree "$r"; else load btree "$r"; load dex "$r"; fi
done
python3 - "$raw" "$ROWS" <<'PY'
import sys, statistics as st, collections
raw, rows = sys.argv[1], int(sys.argv[2])
t = collections.defaultdict(list); rt = collections.defaultdict(list); fl = collections.defaultdict(list)
for line in open(raw):
    r, w, am, s, trips, flushes = line.split()
    t[(w, am)].append(float(s))
    fl[(w, am)].append(int(flushes) * 1000 / rows)
    if am == 'dex': rt[w].append(int(trips) / rows)
for w in ('copy', 'insert_select'):
    d, b = st.median(t[(w, 'dex')]), st.median(t[(w, 'btree')])
    print(f"{w}: dex {d:.2f} s, btree {b:.2f} s (medians), dex/btree {d / b:.2f}x; "
          f"dex round trips/row {st.median(rt[w]):.3f}; WAL syncs per 1000 rows: dex {st.median(fl[(w, 'dex')]):.2f}, "
          f"btree {st.median(fl[(w, 'btree')]):.2f}")
PY
