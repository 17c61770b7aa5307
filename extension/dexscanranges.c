/*
 * dexscanranges.c — the scan keys of a byte-string index (DEX_META_BYTES) as
 * a sorted list of disjoint, inclusive byte ranges of entries, array keys
 * ("col = ANY(array)", SK_SEARCHARRAY) included.
 *
 * dex_entry_bounds (dexentry.c) turns scalar keys into one range, positioned
 * as btree positions. An array key is expanded here instead: every
 * combination of one element per array key, with the scalar keys, is one
 * set of scalar keys and so one range; the ranges, sorted by their lower
 * bound (bytes, a proper prefix first) and merged where they overlap, are
 * disjoint and in index order. Walking them in order (backwards: in
 * reverse) returns entries in index order, as amgettuple promises for
 * ORDER BY. Every returned row is still rechecked (dexscanbytes.c): ranges
 * may be wider than the keys (later columns, cross-type windows).
 *
 * Above DEX_BYTES_MAX_COMBINATIONS combinations the array keys are dropped
 * and the scan reads the one range the scalar keys allow, as before.
 */
#include "dex.h"

#include "access/skey.h"
#include "access/stratnum.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/typcache.h"

/*
 * Most combinations of array elements expanded into ranges. Each costs one
 * dex_entry_bounds (a few microseconds) and one core scan start (a remote
 * descent, mostly cached); past this many, one range with recheck reads
 * fewer entries per planned row than the descents would cost, and key
 * preparation stays bounded in time and memory (~10000 ranges of at most
 * two 160-byte bounds).
 */
#define DEX_BYTES_MAX_COMBINATIONS	10000

/* One array key: its distinct non-NULL elements. */
typedef struct ArrayKey
{
	ScanKey		sk;
	Datum	   *elems;
	int			nelems;
} ArrayKey;

/* Bytes order: memcmp, a proper prefix first (dex_kb_compare; "" allowed). */
static int
bytes_cmp(const uint8 *a, size_t alen, const uint8 *b, size_t blen)
{
	int			c = (alen > 0 && blen > 0) ? memcmp(a, b, Min(alen, blen)) : 0;

	if (c != 0)
		return c < 0 ? -1 : 1;
	return alen == blen ? 0 : (alen < blen ? -1 : 1);
}

static int
cmp_range_lo(const void *a, const void *b)
{
	const DexByteRange *x = (const DexByteRange *) a;
	const DexByteRange *y = (const DexByteRange *) b;

	return bytes_cmp(x->lo, x->lolen, y->lo, y->lolen);
}

/* qsort_arg comparator of array elements: the element type's btree order. */
typedef struct ElemSortCxt
{
	FmgrInfo   *cmp;
	Oid			collation;
} ElemSortCxt;

static int
cmp_elems(const void *a, const void *b, void *arg)
{
	ElemSortCxt *cxt = (ElemSortCxt *) arg;

	return DatumGetInt32(FunctionCall2Coll(cxt->cmp, cxt->collation,
										   *(const Datum *) a, *(const Datum *) b));
}

/*
 * The distinct non-NULL elements of array key sk into ak; false if there are
 * none (the key matches no row). Duplicates are found with the element
 * type's default btree comparison under the key's collation (what "=" of
 * the index's operator family means for a deterministic collation, the
 * only kind dex indexes); a type without one keeps its duplicates, whose
 * equal ranges the merge folds.
 */
static bool
array_elements(ScanKey sk, ArrayKey *ak)
{
	ArrayType  *arr;
	Oid			elemtype;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;
	int			n = 0;
	TypeCacheEntry *tc;

	ak->sk = sk;
	ak->nelems = 0;
	if (sk->sk_flags & SK_ISNULL)
		return false;			/* "x = ANY(NULL)" is never true */
	arr = DatumGetArrayTypeP(sk->sk_argument);
	elemtype = ARR_ELEMTYPE(arr);
	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(arr, elemtype, typlen, typbyval, typalign,
					  &elems, &nulls, &nelems);
	for (int i = 0; i < nelems; i++)
		if (!nulls[i])
			elems[n++] = elems[i];
	tc = lookup_type_cache(elemtype, TYPECACHE_CMP_PROC_FINFO);
	if (n > 1 && OidIsValid(tc->cmp_proc_finfo.fn_oid))
	{
		ElemSortCxt cxt = {&tc->cmp_proc_finfo, sk->sk_collation};
		int			m = 1;

		qsort_arg(elems, n, sizeof(Datum), cmp_elems, &cxt);
		for (int i = 1; i < n; i++)
			if (cmp_elems(&elems[m - 1], &elems[i], &cxt) != 0)
				elems[m++] = elems[i];
		n = m;
	}
	ak->elems = elems;
	ak->nelems = n;
	return n > 0;
}

/*
 * The key column whose range ends the bounds' equality prefix: the first
 * without an equality (scalar "=", IS NULL, or "= ANY"). Array keys on later
 * columns cannot narrow the bounds (dex_entry_bounds leaves such columns to
 * the recheck), so they are not expanded. 0-based; ncols if every column
 * has one.
 */
static int
range_column(Relation index, ScanKey keys, int nkeys)
{
	int			ncols = IndexRelationGetNumberOfKeyAttributes(index);
	bool		eq[INDEX_MAX_KEYS] = {false};
	int			c;

	for (int k = 0; k < nkeys; k++)
	{
		ScanKey		sk = &keys[k];

		if (sk->sk_flags & (SK_ROW_HEADER | SK_ROW_MEMBER))
			continue;
		if (sk->sk_attno < 1 || sk->sk_attno > ncols)
			continue;			/* dex_entry_bounds reports it */
		if ((sk->sk_flags & SK_SEARCHNULL) ||
			(!(sk->sk_flags & SK_ISNULL) && sk->sk_strategy == BTEqualStrategyNumber))
			eq[sk->sk_attno - 1] = true;
	}
	for (c = 0; c < ncols && eq[c]; c++)
		;
	return c;
}

/* Sorts ranges by lower bound and merges overlapping ones; returns how many remain. */
static int
ranges_merge(DexByteRange *r, int n)
{
	int			m = 0;

	qsort(r, n, sizeof(DexByteRange), cmp_range_lo);
	for (int i = 0; i < n; i++)
	{
		if (m > 0 && bytes_cmp(r[i].lo, r[i].lolen, r[m - 1].hi, r[m - 1].hilen) <= 0)
		{
			if (bytes_cmp(r[i].hi, r[i].hilen, r[m - 1].hi, r[m - 1].hilen) > 0)
			{
				r[m - 1].hi = r[i].hi;
				r[m - 1].hilen = r[i].hilen;
			}
		}
		else
			r[m++] = r[i];
	}
	return m;
}

/*
 * The bounds of one set of scalar keys into *r (palloc'd in out_cxt); false
 * if they match nothing. dex_entry_bounds' scratch memory goes with tmp_cxt.
 */
static bool
one_range(Relation index, ScanKey keys, int nkeys, MemoryContext tmp_cxt,
		  MemoryContext out_cxt, DexByteRange *r)
{
	MemoryContext old = MemoryContextSwitchTo(tmp_cxt);
	DexEntryBounds b;
	bool		ok;

	dex_entry_bounds(index, keys, nkeys, &b);
	ok = !b.empty && bytes_cmp(b.lo, b.lolen, b.hi, b.hilen) <= 0;
	MemoryContextSwitchTo(out_cxt);
	if (ok)
	{
		r->lolen = b.lolen;
		r->hilen = b.hilen;
		r->lo = palloc(Max(b.lolen, 1));
		r->hi = palloc(Max(b.hilen, 1));
		if (b.lolen > 0)
			memcpy(r->lo, b.lo, b.lolen);
		if (b.hilen > 0)
			memcpy(r->hi, b.hi, b.hilen);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(tmp_cxt);
	return ok;
}

/*
 * The ranges of entries that keys can match, sorted and disjoint, palloc'd
 * in the current memory context; returns their number (0: no row matches).
 * No keys: one range with open ends (NULL bounds).
 */
int
dex_bytes_ranges(Relation index, ScanKey keys, int nkeys, DexByteRange **out)
{
	ScanKey		scalar = palloc(sizeof(ScanKeyData) * (nkeys + 1));
	ArrayKey   *arrays = palloc(sizeof(ArrayKey) * (nkeys + 1));
	int			nscalar = 0;
	int			narrays = 0;
	int			rc = range_column(index, keys, nkeys);
	double		ncomb = 1;
	int			pos[INDEX_MAX_KEYS * 4];
	DexByteRange *r;
	int			n = 0;
	MemoryContext out_cxt = CurrentMemoryContext;
	MemoryContext tmp_cxt;

	*out = r = palloc0(sizeof(DexByteRange));
	if (nkeys == 0)
		return 1;				/* the whole index */
	for (int k = 0; k < nkeys; k++)
	{
		ScanKey		sk = &keys[k];

		if (!(sk->sk_flags & SK_SEARCHARRAY))
			scalar[nscalar++] = *sk;
		else if (!array_elements(sk, &arrays[narrays]))
			return 0;			/* NULL or empty array, or only NULL elements */
		else if (sk->sk_attno - 1 <= rc)
			ncomb *= arrays[narrays++].nelems;
		/* else: past the bounds' columns, for the recheck only */
	}
	/* many combinations (or more array keys than pos holds): one range */
	if (ncomb > DEX_BYTES_MAX_COMBINATIONS || narrays > lengthof(pos))
		narrays = 0;
	if (narrays == 0)
	{
		if (nscalar == 0)
			return 1;			/* only arrays: the whole index, rechecked */
		tmp_cxt = AllocSetContextCreate(out_cxt, "dex scan bounds", ALLOCSET_SMALL_SIZES);
		n = one_range(index, scalar, nscalar, tmp_cxt, out_cxt, r) ? 1 : 0;
		MemoryContextDelete(tmp_cxt);
		return n;
	}

	/* every combination of one element per array key (an odometer over pos) */
	*out = r = palloc(sizeof(DexByteRange) * (int) ncomb);
	tmp_cxt = AllocSetContextCreate(out_cxt, "dex scan bounds", ALLOCSET_SMALL_SIZES);
	memset(pos, 0, sizeof(pos));
	for (;;)
	{
		int			a;

		for (a = 0; a < narrays; a++)
		{
			ScanKey		sk = &scalar[nscalar + a];

			*sk = *arrays[a].sk;
			sk->sk_flags &= ~SK_SEARCHARRAY;
			sk->sk_argument = arrays[a].elems[pos[a]];
		}
		if (one_range(index, scalar, nscalar + narrays, tmp_cxt, out_cxt, &r[n]))
			n++;
		for (a = 0; a < narrays && ++pos[a] == arrays[a].nelems; a++)
			pos[a] = 0;
		if (a == narrays)
			break;
	}
	MemoryContextDelete(tmp_cxt);
	return n > 1 ? ranges_merge(r, n) : n;
}
