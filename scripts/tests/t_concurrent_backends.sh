#!/usr/bin/env bash
# Several backends insert, delete and scan the same dex index at once (remote
# locks, splits, merges); then dex_check and an exact comparison with a btree
# copy that received the same operations.
# Environment (t_cache_stress.sh reuses this test): CLIENTS, SECONDS_RUN,
# CACHE_SIZE (dex.cache_size, default the cluster's 64MB), LEAF_ADMISSION
# (dex.leaf_admission), EXPECT_EVICTIONS=1 (dex_stats() must report evictions),
# EXTRA_MEMNODES="SIZE..." (more memory nodes: the index spreads over all),
# INDEX_OPTIONS (e.g. "placement_level = 1"), INDEX_INCLUDE (INCLUDE columns,
# e.g. "v": byte-string entries, the slotted tree).
source "$(dirname "$0")/common.sh"
start_memnode mem "$MPORT" 512MB --threads 2
extra_i=1
for size in ${EXTRA_MEMNODES:-}; do
    extra_i=$((extra_i + 1)); port=$(free_port)
    start_memnode "mem$extra_i" "$port" "$size" --threads 1
    MEMNODE_URL="$MEMNODE_URL,tcp://127.0.0.1:$port"
done
trap 'test_cleanup; for i in $(seq 2 $extra_i); do stop_memnode "mem$i"; done' EXIT
conf=()
[ -n "${CACHE_SIZE:-}" ] && conf+=("dex.cache_size = '$CACHE_SIZE'")
[ -n "${LEAF_ADMISSION:-}" ] && conf+=("dex.leaf_admission = $LEAF_ADMISSION")
[ -n "${OFFLOAD:-}" ] && conf+=("dex.offload = $OFFLOAD")
start_cluster pg "$PPORT" "$MEMNODE_URL" "${conf[@]+"${conf[@]}"}"
CLIENTS=${CLIENTS:-8}; SECONDS_RUN=${SECONDS_RUN:-20}
echo "dex.cache_size = $(q -c "show dex.cache_size"), dex.leaf_admission = $(q -c "show dex.leaf_admission")"

q -c "create extension dex"
q -c "create table d(k int, v bigint); create table b(k int, v bigint)"
q -c "insert into d select g % 20000, g from generate_series(1, 40000) g; insert into b select * from d"
q -c "create index d_k on d using dex (k) ${INDEX_INCLUDE:+include ($INDEX_INCLUDE)} ${INDEX_OPTIONS:+with ($INDEX_OPTIONS)}; create index b_k on b (k)"

write_mix_script "$DEX_WORK/mix.sql" d b
run_mix "$DEX_WORK/mix.sql"

q -c "vacuum d" -c "vacuum b"
q -c "select * from dex_check('d_k')" || fail "dex_check"
compare_with_btree d d_k
# Backends that used the index keep its metapage cached (rd_amcache); REINDEX
# in another backend gives a new relfilenode and remote tree, which every
# scan must follow. Each scan is checked against counts kept in a table
# without an index; a wrong count divides by zero and fails pgbench.
q -c "create table d_counts as select k, count(*) c from d group by k"
q -c "create table reindex_runs(n int)"
# pgbench's client 0 runs REINDEX again and again (each run logged in
# reindex_runs), the others scan: a weighted random choice of scripts could run
# no REINDEX at all when the scans are slow (102 scans in 6 s once, with a
# tiny cache and offloading).
cat >"$DEX_WORK/scan_check.sql" <<'SQL'
\if :client_id = 0
reindex index d_k;
insert into reindex_runs values (1);
\sleep 100 ms
\else
\set a random(0, 19950)
set enable_seqscan = off;
set enable_bitmapscan = off;
select 1 / ((select count(*) from d where k between :a and :a + 50) = (select coalesce(sum(c), 0) from d_counts where k between :a and :a + 50))::int;
\endif
SQL
chmod a+r "$DEX_WORK/scan_check.sql"
"$PG_BIN/pgbench" -n -h "$DEX_WORK" -p "$PPORT" -U postgres -c 3 -j 2 -T 6 \
    -f "$DEX_WORK/scan_check.sql" postgres >"$DEX_WORK/reindex_scan.log" 2>&1 \
    || { cat "$DEX_WORK/reindex_scan.log"; fail "scans during concurrent REINDEX gave a wrong count or an error"; }
grep -E "number of transactions actually processed" "$DEX_WORK/reindex_scan.log"
reindexes=$(q -c "select count(*) from reindex_runs")
scans=$(grep -oE "number of transactions actually processed: [0-9]+" "$DEX_WORK/reindex_scan.log" | grep -oE "[0-9]+$")
scans=$(( ${scans:-0} - ${reindexes:-0} ))
echo "REINDEX runs during the scans: ${reindexes:-?}, checked scans: $scans"
[ "${reindexes:-0}" -gt 0 ] || fail "no REINDEX ran during the scans"
[ "$scans" -gt 0 ] || fail "no scan ran during the REINDEX runs"
q -c "select * from dex_check('d_k')" >/dev/null || fail "dex_check after the REINDEX runs"

q -c "select index_ops, remote_reads, cache_hits, cache_misses, admissions, evictions, coolings, restarts from dex_stats()" -P footer=off
if [ "${EXPECT_EVICTIONS:-0}" = 1 ]; then
    ev=$(q -c "select evictions from dex_stats()")
    [ "$ev" -gt 0 ] || fail "expected node cache evictions, dex_stats() reports $ev"
fi
[ -z "${EXTRA_MEMNODES:-}" ] || { q -c "select memnode, subtrees, nodes from dex_placement('d_k')" -P footer=off;
                                  echo "subtree migrations: $(q -c "select migrations from dex_stats()")"; }
if [ "${OFFLOAD:-}" = on ]; then
    off=$(q -c "select sum(offloads) from dex_memnodes()")
    echo "offloaded operations: $off (write-back offloaded reads read again here: $(q -c "select wb_offload_fallbacks from dex_stats()"))"
    [ "$off" -gt 0 ] || fail "dex.offload = on but the memory nodes executed no offloads"
fi
echo "concurrent backends: ok"
