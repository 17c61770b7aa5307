/*
 * dexscanbytes.c — index scans of byte-string indexes (DEX_META_BYTES,
 * dexentry.c); the 16-byte-key scans are dexscan.c's.
 */
#include "dex.h"

#include "pgstat.h"

#include "access/relscan.h"
#include "miscadmin.h"
#include "nodes/tidbitmap.h"
#include "utils/memutils.h"
#include "utils/rel.h"

/* ---- byte-string indexes ------------------------------------------- *
 *
 * One inclusive range of entries from dex_entry_bounds (dexentry.c). Array
 * keys (= ANY) are left to the recheck: the range is then what the other
 * keys allow. Every returned row is rechecked when the scan has keys, as
 * for 16-byte keys. Entries are not decoded: an index-only scan (only one
 * that reads no column) gets NULLs; dead-entry hints are not kept.
 */

static void
dex_bytes_prepare(IndexScanDesc scan)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;
	MemoryContext old;
	ScanKey		keys;
	int			n = 0;
	DexEntryBounds b;

	MemoryContextReset(so->keycxt);
	old = MemoryContextSwitchTo(so->keycxt);
	keys = palloc(sizeof(ScanKeyData) * Max(scan->numberOfKeys, 1));
	for (int i = 0; i < scan->numberOfKeys; i++)
		if (!(scan->keyData[i].sk_flags & SK_SEARCHARRAY))
			keys[n++] = scan->keyData[i];
	memset(&b, 0, sizeof(b));
	if (n > 0)
		dex_entry_bounds(scan->indexRelation, keys, n, &b);
	so->empty = b.empty;
	so->blo = b.lo;
	so->blolen = b.lolen;
	so->bhi = b.hi;
	so->bhilen = b.hilen;
	so->keys_ready = true;
	MemoryContextSwitchTo(old);
}

static void
dex_bytes_ready(IndexScanDesc scan)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;

	if (so->tree == NULL)
		so->tree = dex_get_tree(scan->indexRelation);
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
		dex_bytes_start(scan, so->blo, so->blolen, so->bhi, so->bhilen, !forward, false);
	}
	else if (dir != so->dir)
	{
		/* direction change: from the entry returned last, the other way */
		dex_end_core_scan(so);
		so->dir = dir;
		if (so->pos == DEX_POS_AT)
		{
			if (forward)
				dex_bytes_start(scan, so->bcur, so->bcurlen, so->bhi, so->bhilen, false, true);
			else
				dex_bytes_start(scan, so->blo, so->blolen, so->bcur, so->bcurlen, true, true);
		}
		else if (so->pos == DEX_POS_END)
		{
			so->pos = DEX_POS_START;
			dex_bytes_start(scan, so->blo, so->blolen, so->bhi, so->bhilen, !forward, false);
		}
		else
		{
			so->pos = DEX_POS_END;	/* before the first entry: nothing the other way */
			return false;
		}
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
			so->pos = DEX_POS_AT;
			dex_entry_tid(e->data, e->len, &scan->xs_heaptid);
			if (!dex_standby_block_exists(scan, ItemPointerGetBlockNumber(&scan->xs_heaptid)))
				continue;
			if (scan->xs_want_itup && !dex_ios_entry(scan, NULL))
				continue;
			scan->xs_recheck = scan->numberOfKeys > 0;
			return true;
		}
		so->bskip = false;
		if (so->dscan == NULL || !dex_next_batch(scan))
		{
			so->pos = DEX_POS_END;
			return false;
		}
		CHECK_FOR_INTERRUPTS();
	}
}

int64
dex_bytes_getbitmap(IndexScanDesc scan, TIDBitmap *tbm)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;
	int64		ntids = 0;
	ItemPointerData *tids = NULL;

	dex_bytes_ready(scan);
	pgstat_count_index_scan(scan->indexRelation);
	if (so->empty)
		return 0;
	dex_end_core_scan(so);
	dex_bytes_start(scan, so->blo, so->blolen, so->bhi, so->bhilen, false, false);
	while (dex_next_batch(scan))
	{
		tids = tids ? repalloc(tids, sizeof(ItemPointerData) * so->nbatch)
			: palloc(sizeof(ItemPointerData) * so->nbatch);
		for (int i = 0; i < so->nbatch; i++)
			dex_entry_tid(so->bbatch[i].data, so->bbatch[i].len, &tids[i]);
		tbm_add_tuples(tbm, tids, so->nbatch, true);
		ntids += so->nbatch;
		so->batch_pos = so->nbatch;
		CHECK_FOR_INTERRUPTS();
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
	found = dex_bytes_next(scan, dir);
	if (!found)
		dex_ios_quiet((DexScanOpaque) scan->opaque);
	return found;
}
