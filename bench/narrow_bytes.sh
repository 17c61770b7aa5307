#!/usr/bin/env bash
# Bytes per row of a three-column integer-like key, (tenant int4, day date,
# seq int4), in a byte-string dex index with narrow images (DEX_META_NARROW,
# the default since they exist) and with 8-byte images (dex.narrow_images =
# off, how such indexes were built before), next to btree's pg_relation_size
# on the same table. Memory-node bytes are dex_index_info()'s (the index's
# namespace), cache bytes its nodes x 1 KiB. Every index must return the
# table's rows (count + md5 in key order, against a sequential scan).
#
#   bash bench/narrow_bytes.sh [CHECKOUT] [ROWS]
#
# CHECKOUT (default: this one, built) is installed into a private copy of the
# system PostgreSQL tree (scripts/lib.sh private_pg_install): no install lock.
set -euo pipefail
CO=$(cd "${1:-$(dirname "$0")/..}" && pwd); ROWS=${2:-300000}
source "$(dirname "$0")/../scripts/lib.sh"
DEX_ROOT=$CO
DEX_WORK=/tmp/dex-narrow-$(basename "$CO"); export DEX_WORK
rm -rf "$DEX_WORK"
private_pg_install "$CO" "$DEX_WORK-pgroot"
prepare_workdir
mport=$(free_port); pport=$(free_port)
trap 'stop_cluster nb; stop_memnode nb-mem' EXIT
start_memnode nb-mem "$mport" 1GB --threads 2
start_cluster nb "$pport" "tcp://127.0.0.1:$mport" "dex.cache_size = '256MB'" "autovacuum = off"
P() { dpsql "$pport" -d postgres -At "$@"; }
P -q -c "CREATE EXTENSION dex" \
    -c "CREATE TABLE nb (tenant int4, day date, seq int4, pad text)" \
    -c "INSERT INTO nb SELECT n % 1000, '2020-01-01'::date + (n * 7 % 2000), n, md5(n::text)
        FROM generate_series(1, $ROWS) n ORDER BY random()" \
    -c "CREATE INDEX nb_narrow ON nb USING dex (tenant, day, seq)" \
    -c "SET dex.narrow_images = off" -c "CREATE INDEX nb_wide ON nb USING dex (tenant, day, seq)" \
    -c "RESET dex.narrow_images" -c "CREATE INDEX nb_btree ON nb USING btree (tenant, day, seq)" \
    -c "VACUUM ANALYZE nb"
want=$(P -c "SET enable_indexscan = off; SET enable_bitmapscan = off; SET enable_indexonlyscan = off;
             SELECT count(*), md5(string_agg(pad, '' ORDER BY tenant, day, seq)) FROM nb")
out="$DEX_WORK/out.txt"; : >"$out"
for idx in nb_narrow nb_wide nb_btree; do
    # only this index: the others marked invalid inside a transaction that rolls back
    got=$(P -c "BEGIN" -c "UPDATE pg_index SET indisvalid = (indexrelid = '$idx'::regclass)
                             WHERE indrelid = 'nb'::regclass" \
            -c "SET enable_seqscan = off; SET enable_bitmapscan = off" \
            -c "EXPLAIN (COSTS OFF) SELECT count(*), md5(string_agg(pad, '' ORDER BY tenant, day, seq)) FROM nb WHERE tenant >= 0" \
            -c "SELECT count(*), md5(string_agg(pad, '' ORDER BY tenant, day, seq)) FROM nb WHERE tenant >= 0" \
            -c "ROLLBACK")
    grep -q "using $idx on nb\|on $idx" <<<"$got" || die "$idx: not used: $got"
    got=$(grep '|' <<<"$got")
    [ "$got" = "$want" ] || die "$idx: index scan $got, seqscan $want"
done
for idx in nb_narrow nb_wide; do
    read -r bytes leaves inner < <(P -F' ' -c "SELECT bytes, leaves, inner_nodes FROM dex_index_info('$idx')")
    P -c "SELECT dex_check('$idx')" >/dev/null
    echo "$idx $(echo "scale=1; $bytes / $ROWS" | bc) $(echo "scale=1; ($leaves + $inner) * 1024 / $ROWS" | bc)" | tee -a "$out"
done
bt=$(P -c "SELECT pg_relation_size('nb_btree')")
echo "nb_btree $(echo "scale=1; $bt / $ROWS" | bc)" | tee -a "$out"
echo "rows $ROWS, checkout $(git -C "$CO" rev-parse --short HEAD), every index scan = seqscan"
