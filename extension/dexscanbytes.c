/*
 * dexscanbytes.c — index scans of byte-string indexes (DEX_META_BYTES,
 * dexentry.c); the 16-byte-key scans are dexscan.c's.
 *
 * The scan keys become sorted, disjoint, inclusive ranges of entries
 * (dexscanranges.c: one per combination of "= ANY" elements, merged; one
 * range without array keys). The scan walks them in order, backwards in
 * reverse, so entries come back in index order. Every returned row is
 * rechecked when the scan has keys, as for 16-byte keys. An index-only scan
 * gets the INCLUDE columns and the key columns that decode
 * (dexentryvalues.c); entries found dead are removed when the scan leaves
 * their batch (dexkill.c), as for 16-byte keys.
 */
#include "dex.h"

#include "pgstat.h"

#include "access/relscan.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "nodes/tidbitmap.h"
#include "utils/memutils.h"
#include "utils/rel.h"

static void
dex_bytes_prepare(IndexScanDesc scan)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;
	MemoryContext old;

	MemoryContextReset(so->keycxt);
	old = MemoryContextSwitchTo(so->keycxt);
	so->nbranges = dex_bytes_ranges(scan->indexRelation, scan->keyData,
									scan->numberOfKeys, &so->branges);
	so->empty = so->nbranges == 0;
	so->keys_ready = true;
	MemoryContextSwitchTo(old);
}

static void
dex_bytes_ready(IndexScanDesc scan)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;

	if (so->tree == NULL)
		so->tree = dex_get_tree_for_scan(scan->indexRelation);
	if (!so->keys_ready)
		dex_bytes_prepare(scan);
}

/* A core scan of [lo, hi] (NULL: open end); skip: its first entry if it is bcur. */
static void
dex_bytes_start(IndexScanDesc scan, const uint8 *lo, size_t lolen, const uint8 *hi, size_t hilen,
				bool backward, bool skip)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;
	DexError	err;
	int			rc;
	DexScan    *ds = NULL;

	Assert(so->dscan == NULL);
	if (RecoveryInProgress())
	{
		DexWbsPlaces places;

		dex_wbs_places_of_bytes(lo, lolen, hi, hilen, &places);
		dex_standby_scan_wait(scan->indexRelation, &places);
	}
	memset(&err, 0, sizeof(err));
	rc = dex_scan_begin_bytes(so->tree, lo, (uint32_t) lolen, hi, (uint32_t) hilen,
							  backward ? 1 : 0, &ds, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, scan->indexRelation);
	so->dscan = ds;
	so->bbatch = NULL;
	so->nbatch = so->batch_pos = 0;
	so->bskip = skip;
}

/* A core scan of the whole of range so->range_idx. */
static void
dex_bytes_start_range(IndexScanDesc scan, bool backward)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;
	const DexByteRange *r = &so->branges[so->range_idx];

	dex_bytes_start(scan, r->lo, r->lolen, r->hi, r->hilen, backward, false);
}

static void
dex_bytes_remember(DexScanOpaque so, const DexBytes *e)
{
	if (so->bcurcap < e->len)
	{
		so->bcur = so->bcur ? repalloc(so->bcur, e->len) : MemoryContextAlloc(so->scancxt, e->len);
		so->bcurcap = e->len;
	}
	memcpy(so->bcur, e->data, e->len);
	so->bcurlen = e->len;
}

/*
 * The scan turns around (cursor FETCH BACKWARD after forward ones, or the
 * reverse): from the entry returned last, the rest of its range the other
 * way, skipping that entry; the ranges beyond follow in the new order.
 * False when nothing lies the other way.
 */
static bool
dex_bytes_turn(IndexScanDesc scan, bool forward)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;

	dex_kill_leave_batch(scan);		/* leaving the batch: its dead entries */
	dex_end_core_scan(so);
	so->dir = forward ? ForwardScanDirection : BackwardScanDirection;
	if (so->pos == DEX_POS_AT)
	{
		const DexByteRange *r = &so->branges[so->cur_range];

		so->range_idx = so->cur_range;
		if (forward)
			dex_bytes_start(scan, so->bcur, so->bcurlen, r->hi, r->hilen, false, true);
		else
			dex_bytes_start(scan, r->lo, r->lolen, so->bcur, so->bcurlen, true, true);
		return true;
	}
	if (so->pos == DEX_POS_END)
	{
		/* ran off one end: everything lies the other way */
		so->pos = DEX_POS_START;
		so->range_idx = forward ? 0 : so->nbranges - 1;
		dex_bytes_start_range(scan, !forward);
		return true;
	}
	so->pos = DEX_POS_END;		/* before the first entry: nothing the other way */
	return false;
}

static bool
dex_bytes_next(IndexScanDesc scan, ScanDirection dir)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;
	bool		forward = ScanDirectionIsForward(dir);

	dex_bytes_ready(scan);
	if (so->empty)
		return false;
	if (!so->started)
	{
		so->started = true;
		pgstat_count_index_scan(scan->indexRelation);
		so->dir = dir;
		so->pos = DEX_POS_START;
		so->range_idx = forward ? 0 : so->nbranges - 1;
		dex_bytes_start_range(scan, !forward);
	}
	else if (dir != so->dir)
	{
		if (!dex_bytes_turn(scan, forward))
			return false;
	}
	else if (so->pos == DEX_POS_END)
		return false;

	for (;;)
	{
		if (so->batch_pos < so->nbatch)
		{
			const DexBytes *e = &so->bbatch[so->batch_pos++];

			if (so->bskip)
			{
				so->bskip = false;
				if (e->len == so->bcurlen && memcmp(e->data, so->bcur, e->len) == 0)
					continue;
			}
			dex_bytes_remember(so, e);
			so->cur_range = so->range_idx;
			so->pos = DEX_POS_AT;
			dex_entry_tid(e->data, e->len, &scan->xs_heaptid);
			if (!dex_standby_block_exists(scan, ItemPointerGetBlockNumber(&scan->xs_heaptid)))
				continue;
			if (scan->xs_want_itup && !dex_ios_entry_bytes(scan, e->data, e->len))
				continue;
			scan->xs_recheck = scan->numberOfKeys > 0;
			return true;
		}
		/* bskip stays set until the new core scan's first entry is seen */
		if (so->dscan != NULL && dex_next_batch(scan))
		{
			CHECK_FOR_INTERRUPTS();
			continue;
		}
		/* this range is done: the next one in scan order */
		so->range_idx += forward ? 1 : -1;
		if (so->range_idx < 0 || so->range_idx >= so->nbranges)
		{
			so->range_idx = forward ? so->nbranges : -1;
			so->pos = DEX_POS_END;
			return false;
		}
		CHECK_FOR_INTERRUPTS();
		dex_bytes_start_range(scan, !forward);
	}
}

/* Every range's TIDs into tbm (all rechecked). */
int64
dex_bytes_getbitmap(IndexScanDesc scan, TIDBitmap *tbm)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;
	int64		ntids = 0;
	ItemPointerData *tids = NULL;
	int			tidcap = 0;

	dex_bytes_ready(scan);
	pgstat_count_index_scan(scan->indexRelation);
	if (so->empty)
		return 0;
	dex_end_core_scan(so);
	for (so->range_idx = 0; so->range_idx < so->nbranges; so->range_idx++)
	{
		dex_bytes_start_range(scan, false);
		while (dex_next_batch(scan))
		{
			if (so->nbatch > tidcap)
			{
				tidcap = Max(so->nbatch, 64);
				tids = tids ? repalloc(tids, sizeof(ItemPointerData) * tidcap)
					: palloc(sizeof(ItemPointerData) * tidcap);
			}
			for (int i = 0; i < so->nbatch; i++)
				dex_entry_tid(so->bbatch[i].data, so->bbatch[i].len, &tids[i]);
			tbm_add_tuples(tbm, tids, so->nbatch, true);
			ntids += so->nbatch;
			so->batch_pos = so->nbatch;
			CHECK_FOR_INTERRUPTS();
		}
	}
	if (tids)
		pfree(tids);
	return ntids;
}

bool
dex_bytes_gettuple(IndexScanDesc scan, ScanDirection dir)
{
	bool		found;

	if (scan->xs_want_itup)
		dex_ios_begin(scan);
	/* the entry returned last was dead to everyone (dexkill.c) */
	if (scan->kill_prior_tuple)
		dex_kill_remember(scan);
	found = dex_bytes_next(scan, dir);
	if (!found)
		dex_ios_quiet((DexScanOpaque) scan->opaque);
	return found;
}
