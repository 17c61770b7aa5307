/*
 * dexscan.c — index scans.
 *
 * All scan keys on the (single) column are reduced to a list of ascending,
 * disjoint, inclusive [lo, hi] ranges of entry keys: one range, or one per
 * distinct value of "= ANY(array)" keys. Arguments are placed among the
 * column's images by dexkeys.c (cross-type ones as their operator converts
 * them). Strict bounds use extreme TIDs, so the core returns exactly the
 * matching entries. A scan with keys flags every result recheck: a
 * cross-type bound may be a window (dexkeys.c), and the executor's recheck
 * of a returned value is cheap. Index-only scans are dexios.c's.
 */
#include "dex.h"

#include "pgstat.h"

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
	so->bbatch = NULL;
	so->nbatch = so->batch_pos = 0;
	dex_ios_release(so);		/* an aborted index-only scan's announcement */
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
	so->bytes = dex_index_is_bytes(r);
	so->ios_slot = -1;
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

	dex_kill_leave_batch(scan);
	dex_end_core_scan(so);
	dex_ios_quiet(so);			/* the executor is done with what we returned */
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

	dex_kill_leave_batch(scan);
	dex_end_core_scan(so);
	dex_ios_end(scan);
	MemoryContextDelete(so->scancxt);	/* so is gone now */
	scan->opaque = NULL;
}

/* ---- key preparation ------------------------------------------------- *
 *
 * Each scan key becomes a sorted list of disjoint inclusive key ranges; the
 * scan's ranges are the intersection of all of them.
 */

static DexKey
class_key(uint8 cls)
{
	DexKey		k;

	memset(&k, 0, sizeof(k));
	k.cls = cls;
	return k;
}

/*
 * Keys of column values x with "x strat argument", the argument placed by
 * dex_datum_bound. (v, 0, 0) and (v, DEX_MAX_BLOCK, DEX_MAX_OFF) are no real
 * entries' keys (offset 0 and block 0xFFFFFFFF are never heap TIDs), so as
 * inclusive bounds they express "below v" and "above v". Empty: lo > hi.
 */
static DexRange
strategy_range(StrategyNumber strat, const DexBound *b)
{
	DexRange	r;

	r.lo = class_key(DEX_KEY_NEG_INF);
	dex_make_null_key(&r.hi, 0, 0);	/* an operator never matches NULL */

	switch (strat)
	{
		case BTLessStrategyNumber:
			if (b->exact)
				dex_make_value_key(&r.hi, b->lo, 0, 0);	/* x < lo */
			else
				dex_make_value_key(&r.hi, b->hi, DEX_MAX_BLOCK, DEX_MAX_OFF);
			break;
		case BTLessEqualStrategyNumber:
			dex_make_value_key(&r.hi, b->hi, DEX_MAX_BLOCK, DEX_MAX_OFF);	/* x <= hi */
			break;
		case BTEqualStrategyNumber:
			dex_make_value_key(&r.lo, b->lo, 0, 0);
			dex_make_value_key(&r.hi, b->hi, DEX_MAX_BLOCK, DEX_MAX_OFF);
			break;
		case BTGreaterEqualStrategyNumber:
			dex_make_value_key(&r.lo, b->lo, 0, 0);	/* x >= lo */
			break;
		case BTGreaterStrategyNumber:
			if (b->exact)
				dex_make_value_key(&r.lo, b->hi, DEX_MAX_BLOCK, DEX_MAX_OFF);	/* x > hi */
			else
				dex_make_value_key(&r.lo, b->lo, 0, 0);
			break;
		default:
			elog(ERROR, "unrecognized dex strategy number %d", (int) strat);
	}
	return r;
}

static int
cmp_range_lo(const void *a, const void *b)
{
	return dex_key_cmp(&((const DexRange *) a)->lo, &((const DexRange *) b)->lo);
}

/* Sorts ranges and merges overlapping ones (their union); drops empty ones. */
static int
ranges_union(DexRange *r, int n)
{
	int			m = 0;

	if (n == 1)					/* one comparison: nothing to sort or merge */
		return dex_key_cmp(&r[0].lo, &r[0].hi) <= 0 ? 1 : 0;
	qsort(r, n, sizeof(DexRange), cmp_range_lo);
	for (int i = 0; i < n; i++)
	{
		if (dex_key_cmp(&r[i].lo, &r[i].hi) > 0)
			continue;
		if (m > 0 && dex_key_cmp(&r[i].lo, &r[m - 1].hi) <= 0)
		{
			if (dex_key_cmp(&r[i].hi, &r[m - 1].hi) > 0)
				r[m - 1].hi = r[i].hi;
		}
		else
			r[m++] = r[i];
	}
	return m;
}

/* Intersection of two sorted disjoint range lists, into out (na + nb slots). */
static int
ranges_intersect(const DexRange *a, int na, const DexRange *b, int nb,
				 DexRange *out)
{
	int			i = 0,
				j = 0,
				m = 0;

	while (i < na && j < nb)
	{
		DexRange	r;

		r.lo = dex_key_cmp(&a[i].lo, &b[j].lo) >= 0 ? a[i].lo : b[j].lo;
		r.hi = dex_key_cmp(&a[i].hi, &b[j].hi) <= 0 ? a[i].hi : b[j].hi;
		if (dex_key_cmp(&r.lo, &r.hi) <= 0)
			out[m++] = r;
		if (dex_key_cmp(&a[i].hi, &b[j].hi) < 0)
			i++;
		else
			j++;
	}
	return m;
}

/*
 * "x strat ANY(array)": the union over the non-NULL elements (for < and <=
 * that is the largest element's range, for = one range per distinct value).
 */
static int
array_key_ranges(ScanKey sk, Oid coltype, DexRange **out)
{
	ArrayType  *arr = DatumGetArrayTypeP(sk->sk_argument);
	Oid			elemtype = ARR_ELEMTYPE(arr);
	Oid			argtype = getBaseType(elemtype);
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;
	int			n = 0;
	DexRange   *r;

	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(arr, elemtype, typlen, typbyval, typalign,
					  &elems, &nulls, &nelems);
	r = palloc(sizeof(DexRange) * Max(nelems, 1));
	for (int i = 0; i < nelems; i++)
	{
		DexBound	b;

		if (nulls[i])
			continue;
		dex_datum_bound(elems[i], argtype, coltype, &b);
		r[n++] = strategy_range(sk->sk_strategy, &b);
	}
	*out = r;
	return ranges_union(r, n);
}

/* The key ranges one scan key allows, sorted and disjoint. */
static int
scan_key_ranges(ScanKey sk, Oid coltype, DexRange **out)
{
	DexRange   *r = palloc(sizeof(DexRange));

	*out = r;
	if (sk->sk_flags & SK_ISNULL)
	{
		if (sk->sk_flags & SK_SEARCHNULL)
		{
			dex_make_null_key(&r->lo, 0, 0);
			dex_make_null_key(&r->hi, DEX_MAX_BLOCK, DEX_MAX_OFF);
			return 1;
		}
		if (sk->sk_flags & SK_SEARCHNOTNULL)
		{
			r->lo = class_key(DEX_KEY_NEG_INF);
			dex_make_null_key(&r->hi, 0, 0);
			return 1;
		}
		return 0;				/* comparison with NULL */
	}
	if (sk->sk_flags & SK_SEARCHARRAY)
		return array_key_ranges(sk, coltype, out);
	{
		/* coltype is a base type already: skip the catalog lookup for it */
		Oid			argtype = !OidIsValid(sk->sk_subtype) || sk->sk_subtype == coltype ?
			coltype : getBaseType(sk->sk_subtype);
		DexBound	b;

		dex_datum_bound(sk->sk_argument, argtype, coltype, &b);
		*r = strategy_range(sk->sk_strategy, &b);
		return ranges_union(r, 1);
	}
}

static void
dex_prepare_keys(IndexScanDesc scan)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;
	MemoryContext old;
	DexRange   *ranges;
	int			nranges = 1;

	MemoryContextReset(so->keycxt);
	old = MemoryContextSwitchTo(so->keycxt);
	ranges = palloc(sizeof(DexRange));
	ranges[0].lo = class_key(DEX_KEY_NEG_INF);
	ranges[0].hi = class_key(DEX_KEY_POS_INF);

	for (int i = 0; i < scan->numberOfKeys && nranges > 0; i++)
	{
		ScanKey		sk = &scan->keyData[i];
		DexRange   *kr;
		DexRange   *both;
		int			nk;

		if (sk->sk_attno != 1)
			elog(ERROR, "dex scan key on column %d, only one column is supported",
				 sk->sk_attno);
		nk = scan_key_ranges(sk, so->atttype, &kr);
		both = palloc(sizeof(DexRange) * (nranges + nk + 1));
		nranges = ranges_intersect(ranges, nranges, kr, nk, both);
		ranges = both;
	}

	so->ranges = nranges > 0 ? ranges : NULL;
	so->nranges = nranges;
	so->empty = nranges == 0;
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
	if (RecoveryInProgress())
	{
		DexWbsPlaces places;

		dex_wbs_places_of_keys(lo, hi, &places);
		dex_standby_scan_wait(scan->indexRelation, &places);
	}
	memset(&err, 0, sizeof(err));
	rc = dex_scan_begin(so->tree, lo, hi, backward ? 1 : 0, &ds, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, scan->indexRelation);
	so->dscan = ds;
	so->batch = NULL;
	so->nbatch = so->batch_pos = 0;
}

static void
dex_ensure_ready(IndexScanDesc scan)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;

	if (so->tree == NULL)
		so->tree = dex_get_tree_for_scan(scan->indexRelation);
	if (!so->keys_ready)
		dex_prepare_keys(scan);
}

static bool
dex_next_entry(IndexScanDesc scan, ScanDirection dir)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;
	bool		forward = ScanDirectionIsForward(dir);

	dex_ensure_ready(scan);
	if (so->empty)
		return false;

	if (!so->started)
	{
		so->started = true;
		pgstat_count_index_scan(scan->indexRelation);	/* pg_stat_*_indexes.idx_scan */
		so->dir = dir;
		so->pos = DEX_POS_START;
		so->range_idx = forward ? 0 : so->nranges - 1;
		dex_start_core_scan(scan, &so->ranges[so->range_idx].lo,
							&so->ranges[so->range_idx].hi, !forward);
	}
	else if (dir != so->dir)
	{
		/* direction change: continue from the current position */
		dex_kill_leave_batch(scan);
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
			if (scan->xs_want_itup && !dex_ios_entry(scan, k))
				continue;
			/* with no keys there is nothing to recheck (CLUSTER insists) */
			scan->xs_recheck = scan->numberOfKeys > 0;
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

bool
dexgettuple(IndexScanDesc scan, ScanDirection dir)
{
	bool		found;

	if (((DexScanOpaque) scan->opaque)->bytes)
		return dex_bytes_gettuple(scan, dir);

	/*
	 * Index-only scan (also of a column that cannot be returned, when the
	 * query reads no column): entries come back as index tuples.
	 */
	if (scan->xs_want_itup)
		dex_ios_begin(scan);
	/* the entry returned last was dead to everyone (dexkill.c) */
	if (scan->kill_prior_tuple)
		dex_kill_remember(scan);
	found = dex_next_entry(scan, dir);
	if (!found)
		dex_ios_quiet((DexScanOpaque) scan->opaque);
	return found;
}

int64
dexgetbitmap(IndexScanDesc scan, TIDBitmap *tbm)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;
	int64		ntids = 0;
	ItemPointerData *tids = NULL;
	int			tidcap = 0;
	int			r;

	if (so->bytes)
		return dex_bytes_getbitmap(scan, tbm);
	dex_ensure_ready(scan);
	pgstat_count_index_scan(scan->indexRelation);	/* pg_stat_*_indexes.idx_scan */
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
