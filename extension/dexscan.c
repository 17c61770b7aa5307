/*
 * dexscan.c — index scans.
 *
 * All scan keys on the (single) column are reduced to a list of ascending,
 * disjoint, inclusive [lo, hi] ranges of entry keys: one range, or one per
 * distinct value of "= ANY(array)" keys. Strict bounds use extreme TIDs, so
 * the core returns exactly the matching entries. Every result is flagged
 * recheck (an entry may point at a heap slot whose tuple never committed).
 */
#include "dex.h"

#include "access/nbtree.h"
#include "access/relscan.h"
#include "access/xlog.h"
#include "storage/bufmgr.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "nodes/tidbitmap.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "tree/key_encoding.h"

/* (v, 0, 0) .. (v, DEX_MAX_BLOCK, DEX_MAX_OFF) brackets every entry of value v */
#define DEX_MAX_BLOCK	DEX_KEY_BLOCK_MAX
#define DEX_MAX_OFF		DEX_KEY_OFFNUM_MAX

static void
dex_scan_release(void *arg)
{
	DexScanOpaque so = (DexScanOpaque) arg;

	if (so->dscan)
		dex_scan_end(so->dscan);
	so->dscan = NULL;
	so->batch = NULL;
	so->nbatch = so->batch_pos = 0;
}

static void
dex_end_core_scan(DexScanOpaque so)
{
	if (so->dscan)
		dex_scan_end(so->dscan);
	so->dscan = NULL;
	so->batch = NULL;
	so->nbatch = so->batch_pos = 0;
}

IndexScanDesc
dexbeginscan(Relation r, int nkeys, int norderbys)
{
	IndexScanDesc scan;
	DexScanOpaque so;
	MemoryContext cxt;

	dex_require_preload();

	scan = RelationGetIndexScan(r, nkeys, norderbys);

	cxt = AllocSetContextCreate(CurrentMemoryContext, "dex scan",
								ALLOCSET_SMALL_SIZES);
	so = MemoryContextAllocZero(cxt, sizeof(DexScanOpaqueData));
	so->scancxt = cxt;
	so->keycxt = AllocSetContextCreate(cxt, "dex scan keys",
									   ALLOCSET_SMALL_SIZES);
	so->atttype = dex_column_basetype(r);
	so->cb.func = dex_scan_release;
	so->cb.arg = so;
	MemoryContextRegisterResetCallback(cxt, &so->cb);
	scan->opaque = so;
	return scan;
}

void
dexrescan(IndexScanDesc scan, ScanKey scankey, int nscankeys,
		  ScanKey orderbys, int norderbys)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;

	dex_end_core_scan(so);
	if (scankey && scan->numberOfKeys > 0)
		memmove(scan->keyData, scankey, scan->numberOfKeys * sizeof(ScanKeyData));
	so->keys_ready = false;
	so->empty = false;
	so->ranges = NULL;
	so->nranges = 0;
	so->started = false;
	so->pos = DEX_POS_START;
}

void
dexendscan(IndexScanDesc scan)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;

	dex_end_core_scan(so);
	MemoryContextDelete(so->scancxt);	/* so is gone now */
	scan->opaque = NULL;
}

/* ---- key preparation ------------------------------------------------- */

static inline void
key_max(DexKey *dst, const DexKey *k)
{
	if (dex_key_cmp(k, dst) > 0)
		*dst = *k;
}

static inline void
key_min(DexKey *dst, const DexKey *k)
{
	if (dex_key_cmp(k, dst) < 0)
		*dst = *k;
}

static void
apply_bound(DexKey *lo, DexKey *hi, StrategyNumber strat, int64 v)
{
	DexKey		k;
	DexKey		nullkey;

	/* an operator never matches NULL */
	dex_make_null_key(&nullkey, 0, 0);
	key_min(hi, &nullkey);

	switch (strat)
	{
		case BTLessStrategyNumber:
			dex_make_value_key(&k, v, 0, 0);
			key_min(hi, &k);
			break;
		case BTLessEqualStrategyNumber:
			dex_make_value_key(&k, v, DEX_MAX_BLOCK, DEX_MAX_OFF);
			key_min(hi, &k);
			break;
		case BTEqualStrategyNumber:
			dex_make_value_key(&k, v, 0, 0);
			key_max(lo, &k);
			dex_make_value_key(&k, v, DEX_MAX_BLOCK, DEX_MAX_OFF);
			key_min(hi, &k);
			break;
		case BTGreaterEqualStrategyNumber:
			dex_make_value_key(&k, v, 0, 0);
			key_max(lo, &k);
			break;
		case BTGreaterStrategyNumber:
			dex_make_value_key(&k, v, DEX_MAX_BLOCK, DEX_MAX_OFF);
			key_max(lo, &k);
			break;
		default:
			elog(ERROR, "unrecognized dex strategy number %d", (int) strat);
	}
}

static int
cmp_int64(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return (x < y) ? -1 : (x > y) ? 1 : 0;
}

/* Non-NULL elements of an array scan key as int64, sorted; returns count. */
static int
array_key_values(ScanKey sk, int64 **out)
{
	ArrayType  *arr = DatumGetArrayTypeP(sk->sk_argument);
	Oid			elemtype = ARR_ELEMTYPE(arr);
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;
	int			i;
	int			n = 0;
	int64	   *vals;
	Oid			basetype = getBaseType(elemtype);

	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(arr, elemtype, typlen, typbyval, typalign,
					  &elems, &nulls, &nelems);
	vals = palloc(sizeof(int64) * Max(nelems, 1));
	for (i = 0; i < nelems; i++)
	{
		if (nulls[i])
			continue;
		vals[n++] = dex_datum_to_int64(elems[i], basetype);
	}
	if (n > 1)
		qsort(vals, n, sizeof(int64), cmp_int64);
	*out = vals;
	return n;
}

static int
dedup_int64(int64 *v, int n)
{
	int			i,
				j = 0;

	for (i = 0; i < n; i++)
		if (j == 0 || v[j - 1] != v[i])
			v[j++] = v[i];
	return j;
}

static void
dex_prepare_keys(IndexScanDesc scan)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;
	MemoryContext old;
	DexKey		lo,
				hi;
	int64	   *set = NULL;		/* intersection of "= ANY" arrays */
	int			nset = -1;		/* -1 = no array key */
	int			i;

	MemoryContextReset(so->keycxt);
	old = MemoryContextSwitchTo(so->keycxt);
	memset(&lo, 0, sizeof(lo));
	lo.cls = DEX_KEY_NEG_INF;
	memset(&hi, 0, sizeof(hi));
	hi.cls = DEX_KEY_POS_INF;
	so->empty = false;

	for (i = 0; i < scan->numberOfKeys && !so->empty; i++)
	{
		ScanKey		sk = &scan->keyData[i];

		if (sk->sk_attno != 1)
			elog(ERROR, "dex scan key on column %d, only one column is supported",
				 sk->sk_attno);

		if (sk->sk_flags & SK_ISNULL)
		{
			DexKey		k;

			if (sk->sk_flags & SK_SEARCHNULL)
			{
				dex_make_null_key(&k, 0, 0);
				key_max(&lo, &k);
				dex_make_null_key(&k, DEX_MAX_BLOCK, DEX_MAX_OFF);
				key_min(&hi, &k);
			}
			else if (sk->sk_flags & SK_SEARCHNOTNULL)
			{
				dex_make_null_key(&k, 0, 0);
				key_min(&hi, &k);
			}
			else
				so->empty = true;	/* comparison with NULL */
			continue;
		}

		if (sk->sk_flags & SK_SEARCHARRAY)
		{
			int64	   *vals;
			int			n = array_key_values(sk, &vals);

			if (n == 0)
			{
				so->empty = true;
				continue;
			}
			switch (sk->sk_strategy)
			{
				case BTEqualStrategyNumber:
					n = dedup_int64(vals, n);
					if (nset < 0)
					{
						set = vals;
						nset = n;
					}
					else
					{
						/* intersect two sorted sets */
						int			a = 0,
									b = 0,
									m = 0;

						while (a < nset && b < n)
						{
							if (set[a] < vals[b])
								a++;
							else if (set[a] > vals[b])
								b++;
							else
							{
								set[m++] = set[a];
								a++;
								b++;
							}
						}
						nset = m;
						if (nset == 0)
							so->empty = true;
					}
					break;
				case BTLessStrategyNumber:
				case BTLessEqualStrategyNumber:
					/* k < ANY(a)  <=>  k < max(a) */
					apply_bound(&lo, &hi, sk->sk_strategy, vals[n - 1]);
					break;
				case BTGreaterStrategyNumber:
				case BTGreaterEqualStrategyNumber:
					apply_bound(&lo, &hi, sk->sk_strategy, vals[0]);
					break;
				default:
					elog(ERROR, "unrecognized dex strategy number %d",
						 (int) sk->sk_strategy);
			}
			continue;
		}

		{
			Oid			argtype = OidIsValid(sk->sk_subtype) ?
				getBaseType(sk->sk_subtype) : so->atttype;

			apply_bound(&lo, &hi, sk->sk_strategy,
						dex_datum_to_int64(sk->sk_argument, argtype));
		}
	}

	so->nranges = 0;
	so->ranges = NULL;
	if (!so->empty)
	{
		if (nset < 0)
		{
			if (dex_key_cmp(&lo, &hi) <= 0)
			{
				so->ranges = palloc(sizeof(DexRange));
				so->ranges[0].lo = lo;
				so->ranges[0].hi = hi;
				so->nranges = 1;
			}
		}
		else
		{
			so->ranges = palloc(sizeof(DexRange) * Max(nset, 1));
			for (i = 0; i < nset; i++)
			{
				DexRange	r;

				dex_make_value_key(&r.lo, set[i], 0, 0);
				dex_make_value_key(&r.hi, set[i], DEX_MAX_BLOCK, DEX_MAX_OFF);
				key_max(&r.lo, &lo);
				key_min(&r.hi, &hi);
				if (dex_key_cmp(&r.lo, &r.hi) <= 0)
					so->ranges[so->nranges++] = r;
			}
		}
		if (so->nranges == 0)
			so->empty = true;
	}
	so->keys_ready = true;
	MemoryContextSwitchTo(old);
}

/* ---- running the core scan ------------------------------------------ */

static void
dex_start_core_scan(IndexScanDesc scan, const DexKey *lo, const DexKey *hi,
					bool backward)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;
	DexError	err;
	int			rc;
	DexScan    *ds = NULL;

	Assert(so->dscan == NULL);
	memset(&err, 0, sizeof(err));
	rc = dex_scan_begin(so->tree, lo, hi, backward ? 1 : 0, &ds, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, scan->indexRelation);
	so->dscan = ds;
	so->batch = NULL;
	so->nbatch = so->batch_pos = 0;
}

/* Fetch the next batch; false at the end of the current core scan. */
static bool
dex_next_batch(IndexScanDesc scan)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;
	DexError	err;
	const DexKey *entries = NULL;
	int			n = 0;
	int			rc;

	memset(&err, 0, sizeof(err));
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
	so->nbatch = n;
	so->batch_pos = 0;
	return true;
}

static void
dex_ensure_ready(IndexScanDesc scan)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;

	if (so->tree == NULL)
		so->tree = dex_get_tree(scan->indexRelation);
	if (!so->keys_ready)
		dex_prepare_keys(scan);
}

/*
 * A hot standby reads the primary's live tree: an entry may name a heap block
 * its replay has not created yet (the row's WAL is still on its way). Such a
 * row cannot be visible to any snapshot of this standby -- its insert's commit
 * comes after the block's creation in WAL -- so the entry is skipped, not
 * fetched ("could not read block"). Bitmap heap scans skip such blocks
 * themselves. (src/README.md "Hot standbys".)
 */
static bool
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

bool
dexgettuple(IndexScanDesc scan, ScanDirection dir)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;
	bool		forward = ScanDirectionIsForward(dir);

	/*
	 * Index-only scans would trust an entry without its heap tuple whenever
	 * the page is all-visible; dex entries are not WAL-logged with the heap,
	 * so only the heap recheck keeps a crash from producing wrong rows.
	 * dexcostestimate() keeps the planner away from them; this is the net.
	 */
	if (scan->xs_want_itup)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("index \"%s\" cannot be used for an index-only scan",
						RelationGetRelationName(scan->indexRelation)),
				 errhint("Use SET enable_indexonlyscan = off for this query.")));

	dex_ensure_ready(scan);
	if (so->empty)
		return false;

	if (!so->started)
	{
		so->started = true;
		so->dir = dir;
		so->pos = DEX_POS_START;
		so->range_idx = forward ? 0 : so->nranges - 1;
		dex_start_core_scan(scan, &so->ranges[so->range_idx].lo,
							&so->ranges[so->range_idx].hi, !forward);
	}
	else if (dir != so->dir)
	{
		/* direction change: continue from the current position */
		dex_end_core_scan(so);
		so->dir = dir;
		switch (so->pos)
		{
			case DEX_POS_AT:
				{
					DexRange	r = so->ranges[so->cur_range];
					bool		ok;

					so->range_idx = so->cur_range;
					if (forward)
					{
						r.lo = so->curkey;
						ok = dex_key_next(&r.lo);
					}
					else
					{
						r.hi = so->curkey;
						ok = dex_key_prev(&r.hi);
					}
					if (ok && dex_key_cmp(&r.lo, &r.hi) <= 0)
						dex_start_core_scan(scan, &r.lo, &r.hi, !forward);
					/* else: dscan stays NULL, the loop moves to the next range */
				}
				break;
			case DEX_POS_END:
				so->pos = DEX_POS_START;
				so->range_idx = forward ? 0 : so->nranges - 1;
				dex_start_core_scan(scan, &so->ranges[so->range_idx].lo,
									&so->ranges[so->range_idx].hi, !forward);
				break;
			case DEX_POS_START:
				/* before the first entry: nothing lies the other way */
				so->pos = DEX_POS_END;
				return false;
		}
	}
	else if (so->pos == DEX_POS_END)
		return false;

	for (;;)
	{
		if (so->batch_pos < so->nbatch)
		{
			const DexKey *k = &so->batch[so->batch_pos++];

			so->curkey = *k;
			so->cur_range = so->range_idx;
			so->pos = DEX_POS_AT;
			if (!dex_standby_block_exists(scan, k->block))
				continue;
			dex_key_to_tid(k, &scan->xs_heaptid);
			scan->xs_recheck = true;
			return true;
		}
		if (so->dscan != NULL)
		{
			if (dex_next_batch(scan))
				continue;
		}
		/* current range done: next one in scan order */
		so->range_idx += forward ? 1 : -1;
		if (so->range_idx < 0 || so->range_idx >= so->nranges)
		{
			so->range_idx = forward ? so->nranges : -1;
			so->pos = DEX_POS_END;
			return false;
		}
		CHECK_FOR_INTERRUPTS();
		dex_start_core_scan(scan, &so->ranges[so->range_idx].lo,
							&so->ranges[so->range_idx].hi, !forward);
	}
}

int64
dexgetbitmap(IndexScanDesc scan, TIDBitmap *tbm)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;
	int64		ntids = 0;
	ItemPointerData *tids = NULL;
	int			tidcap = 0;
	int			r;

	dex_ensure_ready(scan);
	if (so->empty)
		return 0;

	dex_end_core_scan(so);
	for (r = 0; r < so->nranges; r++)
	{
		dex_start_core_scan(scan, &so->ranges[r].lo, &so->ranges[r].hi, false);
		while (dex_next_batch(scan))
		{
			int			i;

			if (so->nbatch > tidcap)
			{
				tidcap = Max(so->nbatch, 64);
				if (tids)
					pfree(tids);
				tids = palloc(sizeof(ItemPointerData) * tidcap);
			}
			for (i = 0; i < so->nbatch; i++)
				dex_key_to_tid(&so->batch[i], &tids[i]);
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
