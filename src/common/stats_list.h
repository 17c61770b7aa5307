/*
 * stats_list.h — THE list of dex's instance-wide counters (plain C, no
 * includes, so both the C++ core and the C extension include it).
 *
 * Everything that names the counters is derived from this list:
 *   - dex::Stats (src/common/stats.h): one std::atomic<uint64_t> per counter,
 *     and Stats::reset();
 *   - DexStatsSnapshot (src/capi/dex_capi.h) and dex_stats_read();
 *   - dex_stats() (extension/dexfuncs.c): its values, and the check that the
 *     SQL definition's OUT columns (extension/dex--0.1.sql, which the
 *     preprocessor cannot write) are exactly these names in this order;
 *     tests/stats_list_test.cpp fails when that SQL definition drifts.
 *
 * X(name, description). Append new counters at the end: dex_stats()'s
 * columns keep their positions (scripts read them by name anyway). A new
 * counter needs an `OUT name bigint` at the end of dex_stats() in
 * extension/dex--0.1.sql, and nothing else.
 */
#ifndef DEX_STATS_LIST_H
#define DEX_STATS_LIST_H

#define DEX_STATS_COUNTERS(X) \
	X(index_ops, "tree operations (lookup/insert/delete/scan step)") \
	X(remote_reads, "one-sided READs (each op of a batch counts)") \
	X(remote_writes, "one-sided WRITEs") \
	X(remote_atomics, "CAS + FAA") \
	X(remote_rpcs, "two-sided RPCs") \
	X(round_trips, "network round trips (a batch is one)") \
	X(bytes_read, "payload bytes fetched from memory nodes") \
	X(bytes_written, "payload bytes sent to memory nodes") \
	X(cache_hits, "node cache: nodes found in the cache") \
	X(cache_misses, "node cache: nodes not found in the cache") \
	X(admissions, "node cache: nodes admitted") \
	X(evictions, "node cache: frames evicted") \
	X(coolings, "node cache: frames moved to the cooling map") \
	X(restarts, "traversals restarted (lock seen, torn read, stale fence)") \
	X(lock_steals, "remote locks taken over from dead owners") \
	X(dirty_updates, "write-back mode: leaf changes kept in a dirty frame") \
	X(write_backs, "write-back mode: dirty frames written to remote memory") \
	X(offloads, "operations executed by a memory node (OFFLOAD RPC)") \
	X(migrations, "subtrees moved to an emptier memory node at a split") \
	X(batched_inserts, "entries inserted through a batched offload") \
	X(kills, "dead-entry hints: entries removed by a scan that found them dead") \
	X(kills_skipped, "dead-entry hints: not removed, the leaf changed since the scan read it") \
	X(kills_refused, "dead-entry hints: not removed, a standby holds a registry slot") \
	X(bottomup_passes, "bottom-up deletion: inserts that gave up before splitting a full leaf") \
	X(bottomup_removed, "bottom-up deletion: dead entries removed from such a leaf") \
	X(memnode_splits, "leaf splits done by a memory node inside an offloaded insert or batch (OFFLOAD_SPLIT, OFFLOAD_BATCH_SPLIT)") \
	X(kills_deferred, "dead-entry hints: entries of a write-through index queued behind their logged conflict horizon until every standby replayed it") \
	X(standby_wb_scans, "hot standby: scans (per key range) of a write-back index") \
	X(standby_wb_waits, "hot standby: of those, scans that waited for the primary's write-back") \
	X(dirty_splits, "write-back mode: splits of a dirty leaf whose entries could not be written yet (both halves stay dirty)") \
	X(wb_offload_fallbacks, "write-back mode: offloaded reads whose leaf was read again here (it had a frame, or a dirty frame was written back meanwhile)") \
	X(wb_paused_writes, "write-back mode: leaf changes written through because write-back was paused (no dex worker held the checkpoint fence, or a hot standby is attached and dex.write_back_with_standbys is off)") \
	X(batch_rewarms, "multi-row statements: cached leaves a batched offload changed, read back into the cache after it") \
	X(kills_moved, "deferred dead-entry hints (and bottom-up removals): entries a split had moved right of the leaf they were queued from, looked up by key")

#endif							/* DEX_STATS_LIST_H */
