/*
 * dexscanbatch.c — the running core scan of an index scan, for both entry
 * forms (16-byte keys: dexscan.c, byte strings: dexscanbytes.c): its
 * batches, its end, and the entries a hot standby must skip.
 */
#include "dex.h"

#include "access/relscan.h"
#include "access/xlog.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

void
dex_end_core_scan(DexScanOpaque so)
{
	if (so->dscan)
		dex_scan_end(so->dscan);
	so->dscan = NULL;
	so->batch = NULL;
	so->bbatch = NULL;
	so->nbatch = so->batch_pos = 0;
}

/* Fetch the next batch; false at the end of the current core scan. */
bool
dex_next_batch(IndexScanDesc scan)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;
	DexError	err;
	const DexKey *entries = NULL;
	const DexBytes *bentries = NULL;
	int			n = 0;
	int			rc;

	memset(&err, 0, sizeof(err));
	dex_kill_leave_batch(scan);	/* leaving the batch: its dead entries */
	if (scan->xs_want_itup)
		dex_ios_announce(scan); /* VACUUM waits for what we read now */
	if (so->bytes)
		rc = dex_scan_next_bytes(so->dscan, &bentries, &n, &err);
	else
		rc = dex_scan_next(so->dscan, &entries, &n, &err);
	if (rc != DEX_OK)
	{
		dex_end_core_scan(so);
		dex_report_error(rc, &err, scan->indexRelation);
	}
	if (n == 0)
	{
		dex_end_core_scan(so);
		return false;
	}
	so->batch = entries;
	so->bbatch = bentries;
	so->nbatch = n;
	so->batch_pos = 0;
	dex_scan_stamp(so->dscan, &so->stamp);
	so->kill_epoch = dex_ios_vacuum_epoch();
	return true;
}

/*
 * The deferred kills of `index` (K9; queued by any backend) whose record every live
 * standby has replayed: their entries still in the leaf go, under an
 * announcement, if no ambulkdelete began since their batch was read. A scan
 * leaving a batch calls it, and an insert written at once (dexinsert.c: an
 * index only inserted into, whose bottom-up passes deferred).
 */
void
dex_kill_apply_deferred(Relation index, DexTree *tree)
{
	uint64		hwm;
	uint64		epoch;
	DexDeferredKill *k;

	if (tree == NULL || RecoveryInProgress() || !dex_kill_deferred_any(index))
		return;
	hwm = dex_cluster_published_hwm();
	while ((k = dex_kill_deferred_take(index, hwm, &epoch)) != NULL)
	{
		int			hold = dex_ios_hold_unvacuumed(index, epoch);

		PG_TRY();
		{
			dex_kill_deferred_apply(index, tree, k, hold >= 0);
		}
		PG_FINALLY();
		{
			if (hold >= 0)
				dex_ios_unhold(hold);
		}
		PG_END_TRY();
	}
}

/*
 * Leaving a batch: its dead entries go (dex_kill_flush). A write-back
 * batch's kill holds an announcement while it runs, and if no VACUUM
 * removal began since the batch was read, removes the entries still in the
 * frame even though the frame changed meanwhile -- an UPDATE's own new
 * version in the same leaf, another backend's insert, a write-back (K8).
 */
void
dex_kill_leave_batch(IndexScanDesc scan)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;
	int			hold = -1;

	dex_kill_apply_deferred(scan->indexRelation, so->tree);
	if (dex_kill_worth_it(so, so->nkilled) && so->stamp.frame_version != 0)
		hold = dex_ios_hold_unvacuumed(scan->indexRelation, so->kill_epoch);
	if (hold < 0)
	{
		dex_kill_flush(scan, false);
		return;
	}
	PG_TRY();
	{
		dex_kill_flush(scan, true);
	}
	PG_FINALLY();
	{
		dex_ios_unhold(hold);
	}
	PG_END_TRY();
}

/*
 * A hot standby reads the primary's live tree: an entry may name a heap block
 * its replay has not created yet (the row's WAL is still on its way). Such a
 * row cannot be visible to any snapshot of this standby -- its insert's commit
 * comes after the block's creation in WAL -- so the entry is skipped, not
 * fetched ("could not read block"). Bitmap heap scans skip such blocks
 * themselves. (src/README.md "Hot standbys".)
 */
bool
dex_standby_block_exists(IndexScanDesc scan, BlockNumber block)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;

	if (!RecoveryInProgress() || scan->heapRelation == NULL)
		return true;
	if (block < so->heap_nblocks)
		return true;
	so->heap_nblocks = RelationGetNumberOfBlocks(scan->heapRelation);
	return block < so->heap_nblocks;
}
