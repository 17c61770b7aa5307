/*
 * dexkill.c — dead-entry hints (src/README.md "Dead-entry hints").
 *
 * When the executor found the heap tuple of the entry amgettuple returned
 * last dead to every transaction (scan->kill_prior_tuple, set by
 * index_fetch_heap from heap_hot_search_buffer's all_dead), the scan
 * remembers that entry (a 16-byte key, or a byte-string entry's bytes), as
 * nbtree's killedItems. When it leaves the batch
 * (next batch, direction change, rescan, end of scan) the remembered entries
 * are removed -- only if there are at least dex.kill_min_entries of them,
 * only if the leaf is still at the version the batch was read at
 * (dex_tree_kill; a write-back tree: its cache frame still at the version
 * word the batch was copied at, K5), only on the writer, and only while no
 * hot standby holds a slot in the cluster registry
 * (dex_registry_kill_allowed, which first raises the registry's removal_lsn)
 * -- except in a write-back tree's frame, which logs the kill's conflict
 * horizon instead and waits for every standby to replay it before the frame
 * is written back (dexkillwal.c, K7). A write-through tree's kill while a
 * standby is attached logs the horizon too and is queued until every standby
 * replayed it (dexkilldefer.c, K9), as is a write-back tree's while its
 * write-back is paused for the standby (W18). Kills are hints: anything that goes
 * wrong drops them (DEBUG1), never the query. No latch, frame or remote
 * lock is held when this runs; the C API returns with all of them released.
 */
#include "dex.h"

#include "access/relscan.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "tree/key_bytes.h"
#include "tree/node_capacity.h"

/*
 * Most byte-string entries one leaf holds (each at least a column header and
 * the TID, plus its slot): a batch never returns more.
 */
#define DEX_KILL_MAX_BYTES_ENTRIES \
	(DEX_SLOTTED_BODY_BYTES / (1 + DEX_TID_BYTES + DEX_SLOTTED_LEAF_SLOT_BYTES))

/* Remember the byte-string entry returned last (so->bcur) for its batch. */
static void
kill_remember_bytes(DexScanOpaque so)
{
	uint8	   *copy;

	if (so->bkilled == NULL)
	{
		so->bkilled = MemoryContextAlloc(so->scancxt,
										 sizeof(DexBytes) * DEX_KILL_MAX_BYTES_ENTRIES);
		so->bkillbuf = MemoryContextAlloc(so->scancxt,
										  (Size) DEX_SLOTTED_MAX_ENTRY_BYTES * DEX_KILL_MAX_BYTES_ENTRIES);
	}
	if (so->nkilled >= DEX_KILL_MAX_BYTES_ENTRIES || so->bcurlen > DEX_SLOTTED_MAX_ENTRY_BYTES)
		return;
	for (int i = 0; i < so->nkilled; i++)
		if (so->bkilled[i].len == so->bcurlen &&
			memcmp(so->bkilled[i].data, so->bcur, so->bcurlen) == 0)
			return;
	copy = so->bkillbuf + (Size) so->nkilled * DEX_SLOTTED_MAX_ENTRY_BYTES;
	memcpy(copy, so->bcur, so->bcurlen);
	so->bkilled[so->nkilled].data = copy;
	so->bkilled[so->nkilled].len = (uint32) so->bcurlen;
	so->nkilled++;
}

/* The entry returned last was found dead: remember it for its batch. */
void
dex_kill_remember(IndexScanDesc scan)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;

	if (so == NULL || so->pos != DEX_POS_AT ||
		(so->bytes ? so->bbatch == NULL : so->batch == NULL))
		return;
	/*
	 * Only MVCC scans on the primary: a standby never sets kill_prior_tuple,
	 * and non-MVCC scans (dirty-snapshot constraint checks, CLUSTER's
	 * SnapshotAny) are left alone -- rare, and not worth an argument.
	 */
	if (RecoveryInProgress() || scan->xs_snapshot == NULL || !IsMVCCSnapshot(scan->xs_snapshot))
		return;
	if (so->bytes)
	{
		kill_remember_bytes(so);
		return;
	}
	if (so->killed == NULL)
		so->killed = MemoryContextAlloc(so->scancxt, sizeof(DexKey) * DEX_LEAF_CAPACITY);
	if (so->nkilled >= DEX_LEAF_CAPACITY)
		return;
	/* a direction change within a batch can return an entry twice */
	for (int i = 0; i < so->nkilled; i++)
		if (dex_key_cmp(&so->killed[i], &so->curkey) == 0)
			return;
	so->killed[so->nkilled++] = so->curkey;
}

/*
 * May n entries of `index` found dead to everyone be removed now? Only on
 * the writer, with WAL flushed, while no hot standby holds a live registry slot
 * (K2, K3). Shared by the kills and bottom-up deletion (dexbottomup.c), so
 * both justify a removal the same way. Never errors: false drops the
 * removal (DEBUG1 if something failed).
 */
bool
dex_kill_gate(Relation index, int n)
{
	uint64		addr;
	uint64		lsn;
	int			allowed = 0;
	DexError	err;

	addr = dex_cluster_registry();
	if (addr == 0 || RecoveryInProgress())
		return false;
	/*
	 * WAL before removal, as for VACUUM (src/README.md "Crash survival"): the
	 * tuples were found dead through hint bits (their deleters' commits are
	 * durable) or line pointers a prune made dead, whose record may not be.
	 */
	lsn = dex_wal_flush_boundary();	/* (raised in the registry below: a record end) */
	memset(&err, 0, sizeof(err));
	if (dex_registry_kill_allowed(addr, dex_life(), lsn, n, &allowed, &err) != DEX_OK)
	{
		elog(DEBUG1, "dex: dead entries of \"%s\" not removed: %s",
			 RelationGetRelationName(index), err.message);
		return false;
	}
	return allowed != 0;
}

/*
 * Can a removal at `stamp` change the write-back frame the batch came from?
 * Not while write-back is paused (W18: the frame takes no in-place change;
 * with a standby attached such a kill is deferred instead, K9).
 */
static bool
kill_frame_usable(const DexLeafStamp *stamp)
{
	return stamp->frame_version != 0 && dex_cache_write_back_paused() == 0;
}

/* Does a removal at `stamp` go to a write-back frame on the writer? */
static bool
kill_in_frame(const DexLeafStamp *stamp)
{
	return kill_frame_usable(stamp) && !RecoveryInProgress() && dex_cluster_registry() != 0;
}

/*
 * A write-back frame's removal (a scan's kill, a bottom-up pass) reaches
 * remote memory only with the frame's write-back (K5, K7): instead of the
 * registry gate, log its conflict horizon and let the frame wait for that
 * record (*hold). Only on the writer with a cluster registry (whose worker
 * raises removal_lsn before it counts the standbys). False: use the gate.
 */
bool
dex_kill_frame_hold(Relation index, const DexLeafStamp *stamp, TransactionId horizon, uint64 *hold)
{
	*hold = 0;
	if (!kill_in_frame(stamp))
		return false;
	*hold = dex_kill_log_horizon(index, horizon);
	return *hold != 0;
}

/* The TIDs of the batch's n remembered entries (palloc'd). */
static ItemPointerData *
kill_tids(DexScanOpaque so, int n)
{
	ItemPointerData *tids = palloc(sizeof(ItemPointerData) * n);

	for (int i = 0; i < n; i++)
	{
		if (so->bytes)
			dex_entry_tid(so->bkilled[i].data, so->bkilled[i].len, &tids[i]);
		else
			dex_key_to_tid(&so->killed[i], &tids[i]);
	}
	return tids;
}

/* The same for the batch a scan leaves: the horizon from the heap. */
static bool
kill_wb_hold(IndexScanDesc scan, int n, uint64 *hold)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;
	ItemPointerData *tids;
	TransactionId horizon;
	bool		ok;

	*hold = 0;
	if (!kill_in_frame(&so->stamp))
		return false;
	tids = kill_tids(so, n);
	ok = dex_kill_scan_horizon(scan->heapRelation, tids, n, &horizon) &&
		dex_kill_frame_hold(scan->indexRelation, &so->stamp, horizon, hold);
	pfree(tids);
	return ok;
}

/* Did the writer's last beat count a live standby (no registry round trip)? */
bool
dex_kill_standbys_attached(void)
{
	DexWriterView v;

	dex_cluster_writer_view(&v);
	return v.standby_floor != PG_UINT64_MAX;
}

/*
 * A kill that may not go now because a standby is attached (K9): log its
 * conflict horizon and queue it until every standby replayed the record
 * (dexkilldefer.c). A write-through batch's, or a write-back one's whose
 * frame cannot hold it: write-back paused for the standby
 * (dex.write_back_with_standbys off), or a leaf not read from a frame. Only
 * with the batch's vacuum epoch (the later removal is present-only) and on
 * the writer.
 */
static void
kill_defer(IndexScanDesc scan, int n)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;
	ItemPointerData *tids;
	TransactionId horizon;
	bool		known;

	if (!dex_kill_may_defer(so->stamp.leaf, so->kill_epoch))
		return;
	if (so->bytes)
		qsort(so->bkilled, n, sizeof(DexBytes), dex_bytes_cmp);
	else
		dex_sort_keys(so->killed, n);
	/* (met again by a later scan before the first kill of them went) */
	if (dex_kill_deferred_queued(scan->indexRelation, so->stamp.leaf, so->bytes, so->killed, so->bkilled, n))
		return;
	tids = kill_tids(so, n);
	known = dex_kill_scan_horizon(scan->heapRelation, tids, n, &horizon);
	pfree(tids);
	if (known)
		dex_kill_defer_logged(scan->indexRelation, so->stamp.leaf, so->bytes, so->killed, so->bkilled, n,
							  horizon, so->kill_epoch, false);
}

/*
 * Can a removal from `leaf` judged at vacuum epoch `epoch` be deferred
 * (K9)? Only on the writer with a cluster registry, and only with the epoch
 * (the later removal is present-only: no ambulkdelete may begin meanwhile).
 */
bool
dex_kill_may_defer(uint64 leaf, uint64 epoch)
{
	return epoch != 0 && leaf != 0 && !RecoveryInProgress() && dex_cluster_registry() != 0;
}

/*
 * Defer the removal of n sorted entries of `leaf` (16-byte keys or
 * byte-string entries) found dead up to `horizon` (K9): log the horizon and
 * queue the removal behind the record (dexkilldefer.c). The caller checked
 * dex_kill_may_defer. bottom_up: a bottom-up pass's entries.
 */
void
dex_kill_defer_logged(Relation index, uint64 leaf, bool bytes, const DexKey *keys, const DexBytes *entries, int n,
					  TransactionId horizon, uint64 epoch, bool bottom_up)
{
	uint64		record = dex_kill_log_horizon(index, horizon);

	if (record != 0)
		dex_kill_defer(index, leaf, bytes, keys, entries, n, record, epoch, bottom_up);
}

/*
 * Whether n dead entries of the current batch are worth removing now: at
 * least dex.kill_min_entries of them, or, in a write-back frame (where the
 * removal costs a WAL record and no round trip), any number once the leaf is
 * nearly full: the insert that would split it otherwise costs a round trip
 * (btree likewise removes its LP_DEAD items when a page fills, before it
 * splits). An UPDATE's scan meets the row's dead version right before the
 * insert of its new one, usually into the same leaf.
 */
bool
dex_kill_worth_it(DexScanOpaque so, int n)
{
	return n >= dex_kill_min_entries ||
		(n > 0 && so->stamp.nearly_full && kill_frame_usable(&so->stamp));
}

/*
 * Leaving the current batch: remove what was remembered for it. Called
 * before the core scan fetches another batch or ends; never errors (but for
 * the heap access of a write-back kill's horizon, which may, as any heap
 * access may). present_only: the caller holds an announcement and no
 * ambulkdelete began since the batch was read, so a write-back frame's
 * entries still there go even if the frame changed meanwhile (K8).
 */
void
dex_kill_flush(IndexScanDesc scan, bool present_only)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;
	int			n = so->nkilled;
	uint64_t	removed = 0;
	uint64		hold = 0;
	DexError	err;
	int			rc;

	so->nkilled = 0;
	if (n == 0 || so->tree == NULL || so->dscan == NULL)
		return;
	/*
	 * Too few to pay for the gate's round trip: they stay (each costs later
	 * scans a heap fetch) until a scan finds at least dex.kill_min_entries
	 * in one leaf, a bottom-up pass or VACUUM.
	 */
	if (!dex_kill_worth_it(so, n))
		return;
	/*
	 * The leaf changed since the batch (a write-back frame's version word; a
	 * write-through frame past the batch's body version): the kill would be
	 * skipped after its round trips.
	 */
	if (!present_only && dex_tree_kill_futile(so->tree, &so->stamp, n))
		return;
	/*
	 * A write-back frame holds the removal for its logged horizon; else the
	 * removal is remote at once: through the registry gate while no standby
	 * is attached, queued behind a logged horizon while one is (K9).
	 */
	if (!kill_wb_hold(scan, n, &hold) &&
		(dex_kill_standbys_attached() || !dex_kill_gate(scan->indexRelation, n)))
	{
		kill_defer(scan, n);
		return;
	}
	memset(&err, 0, sizeof(err));
	if (so->bytes)
	{
		qsort(so->bkilled, n, sizeof(DexBytes), dex_bytes_cmp);
		rc = dex_tree_kill_bytes(so->tree, &so->stamp, so->bkilled, n, present_only ? DEX_KILL_PRESENT : 0,
								 hold, &removed, &err);
	}
	else
	{
		dex_sort_keys(so->killed, n);
		rc = dex_tree_kill(so->tree, &so->stamp, so->killed, n, present_only ? DEX_KILL_PRESENT : 0,
						   hold, &removed, &err);
	}
	if (rc != DEX_OK)
		elog(DEBUG1, "dex: dead-entry hints of \"%s\" dropped: %s",
			 RelationGetRelationName(scan->indexRelation), err.message);
}
