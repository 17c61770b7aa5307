#!/usr/bin/env bash
# The evaluation's write-intensive (50 % lookups, 50 % key-changing UPDATEs)
# or insert-intensive (50 % lookups, 50 % INSERTs) mix on a write_back = on
# dex index and a btree copy, side by side: dex and btree alternate within a
# round, the order flips every round. Prints per run the tps, and for dex
# per transaction: remote round trips, entries killed, kills skipped (the
# leaf changed), kills refused (a standby), kills deferred (a standby
# attached: write-through, or write-back paused for it) -- counts, not times.
#
#   bash bench/write_mix.sh CHECKOUT [ROUNDS] [SECONDS] [CLIENTS] [wi|ii] [uniform|zipfian] [ROWS]
#
# CHECKOUT is a dex source tree (built and installed into a private copy of
# the system PostgreSQL, so two versions can be measured one after another).
# DEX_WITH: the dex index's options (default "write_back = on"; "write_back =
# off" measures the default write-through mode).
# WITH_STANDBY=1: a streaming hot standby (pg_basebackup -R, no
# hot_standby_feedback) is attached to the primary throughout.
# BENCH_FSYNC=on: commits wait for their WAL on disk (production-like);
# default off, as the test clusters.
# PRIMARY_CONF: one more postgresql.conf line for the primary, e.g.
# "dex.write_back_with_standbys = auto".
set -euo pipefail
CO=$(cd "${1:?CHECKOUT}" && pwd); ROUNDS=${2:-3}; SECS=${3:-6}; CLIENTS=${4:-4}; W=${5:-wi}; DIST=${6:-uniform}
ROWS=${7:-200000}
source "$(dirname "$0")/../scripts/lib.sh"
DEX_ROOT=$CO
DEX_WORK=/tmp/dex-write-mix; export DEX_WORK
rm -rf "$DEX_WORK"
private_pg_install "$CO" "$DEX_WORK-pgroot"
prepare_workdir
mport=$(free_port); pport=$(free_port); sport=$(free_port)
stop_standby() { as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/standby" -m immediate stop >/dev/null 2>&1 || true; }
trap 'stop_standby; stop_cluster wm; stop_memnode wm-mem' EXIT
start_memnode wm-mem "$mport" 1GB --threads 2
start_cluster wm "$pport" "tcp://127.0.0.1:$mport" "dex.cache_size = '256MB'" "shared_buffers = '256MB'" \
    "autovacuum = off" "max_wal_size = '2GB'" "wal_level = replica" "max_wal_senders = 4" "wal_keep_size = '1GB'" \
    "fsync = ${BENCH_FSYNC:-off}" ${PRIMARY_CONF:+"$PRIMARY_CONF"}
P() { dpsql "$pport" -d postgres -At "$@"; }
PB() { "$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$pport" -U postgres "$@" postgres; }
P -q -c "create extension dex" -c "create extension pg_prewarm"
P -q <<SQL
CREATE TABLE mix_dex (k int8 NOT NULL, v text NOT NULL);
INSERT INTO mix_dex SELECT 4 * g, substr(repeat(md5(g::text), 4), 1, 100) FROM generate_series(0, $ROWS - 1) g;
CREATE TABLE mix_btree AS SELECT * FROM mix_dex;
VACUUM ANALYZE mix_dex; VACUUM ANALYZE mix_btree;
CREATE INDEX mix_dex_k ON mix_dex USING dex (k) WITH (${DEX_WITH:-write_back = on});
CREATE INDEX mix_btree_k ON mix_btree (k);
ANALYZE mix_dex; ANALYZE mix_btree;
SQL
P -c "select pg_prewarm('mix_dex'), pg_prewarm('mix_btree'), pg_prewarm('mix_btree_k')" >/dev/null
# every leaf cached (the evaluation's warm-up)
P -c "set dex.leaf_admission = 1; set enable_seqscan = off; set enable_bitmapscan = off; set enable_hashjoin = off;
      set enable_mergejoin = off;
      select count(*) from generate_series(0, $((ROWS - 1)), 8) g,
        lateral (select 1 from mix_dex where k between 4 * g and 4 * g + 1) x" >/dev/null
if [ "${WITH_STANDBY:-0}" = 1 ]; then
    as_user "$PG_BIN/pg_basebackup" -h "$DEX_WORK" -p "$pport" -U postgres -D "$DEX_WORK/standby" -R -X stream -c fast \
        >/dev/null
    printf "port = %s\nhot_standby = on\nhot_standby_feedback = off\ndex.cache_size = '64MB'\n" "$sport" |
        as_user tee -a "$DEX_WORK/standby/postgresql.conf" >/dev/null
    as_user "$PG_BIN/pg_ctl" -D "$DEX_WORK/standby" -l "$DEX_WORK/standby.log" -w start >/dev/null
    for _ in $(seq 1 100); do
        dpsql "$sport" -d postgres -At -c "set enable_seqscan = off; select count(*) from mix_dex where k = 4" \
            >/dev/null 2>&1 && break
        sleep 0.2
    done
    dpsql "$sport" -d postgres -At -c "set enable_seqscan = off; select count(*) from mix_dex where k = 4" >/dev/null ||
        die "the standby does not answer"
fi
S=$DEX_WORK/scripts; mkdir -p "$S"
for t in mix_dex mix_btree; do
    if [ "$DIST" = uniform ]; then pick="\\set r random(0, $((ROWS - 1)))"
    else pick="\\set r permute(random_zipfian(0, $((ROWS - 1)), 1.01), $ROWS, 5432)"; fi
    printf '%s\n\\set lo 4 * :r\nSELECT v FROM %s WHERE k BETWEEN :lo AND :lo + 1;\n' "$pick" "$t" >"$S/lookup-$t.sql"
    printf '%s\n\\set lo 4 * :r\n\\set c random(0, 25)\nUPDATE %s SET k = k # 1, v = repeat(chr(97 + :c), 100) WHERE k BETWEEN :lo AND :lo + 1;\n' \
        "$pick" "$t" >"$S/update-$t.sql"
    printf '\\set key 4 * random(0, %s) + 2 + 4 * %s * random(0, 1000)\nINSERT INTO %s VALUES (:key, repeat(%s, 100));\n' \
        "$((ROWS - 1))" "$ROWS" "$t" "'i'" >"$S/insert-$t.sql"
done
chmod -R a+r "$S"
echo "# $(git -C "$CO" rev-parse --short HEAD) $W $DIST clients=$CLIENTS rows=$ROWS secs=$SECS standby=${WITH_STANDBY:-0}${PRIMARY_CONF:+ ($PRIMARY_CONF)} fsync=${BENCH_FSYNC:-off} with=(${DEX_WITH:-write_back = on})"
echo "# round index tps | dex per transaction: round_trips kills kills_skipped kills_refused kills_deferred"
for r in $(seq 1 "$ROUNDS"); do
    order="mix_dex mix_btree"; [ $((r % 2)) = 0 ] && order="mix_btree mix_dex"
    for t in $order; do
        case $W in
            wi) args="-f $S/lookup-$t.sql@50 -f $S/update-$t.sql@50" ;;
            ii) args="-f $S/lookup-$t.sql@50 -f $S/insert-$t.sql@50" ;;
        esac
        P -c "select dex_stats_reset()" >/dev/null
        # shellcheck disable=SC2086
        res=$(PB -c "$CLIENTS" -j "$CLIENTS" -T "$SECS" $args)
        tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$res")
        xacts=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$res")
        per=""
        if [ "$t" = mix_dex ]; then
            per=$(P -c "select round(round_trips::numeric / $xacts, 3) || ' ' || round(kills::numeric / $xacts, 3) || ' '
                               || round(kills_skipped::numeric / $xacts, 3) || ' ' || round(kills_refused::numeric / $xacts, 3) || ' '
                               || round(coalesce((to_jsonb(s) ->> 'kills_deferred')::numeric, 0) / $xacts, 3)
                        from dex_stats() s")  # (kills_deferred: not in checkouts before K9)
        fi
        echo "$r $t $tps $per"
    done
done
P -c "select dex_check('mix_dex_k')" >/dev/null && echo "# dex_check: ok"
