/*
 * dexwbsplaces.c — where in its key order a hot standby's replayed entry
 * changes of a write-back index lie (src/README.md "Write-back mode", hot
 * standbys), so that a scan waits only for the primary's write-back of the
 * changes its key range can meet (dexwbstandby.c).
 *
 * A key's *place* is its position in the index order as 64 bits that never
 * decrease along it: a fixed tree's value image (NULLs, after every value,
 * at the top), a byte-string tree's first 8 bytes, big-endian, zero-padded
 * (memcmp order, a proper prefix first). Every entry of a scan range
 * [lo, hi] has a place in [place(lo), place(hi)]. Two structures remember,
 * for each tree, the replay position of changes by place; each may only
 * overstate the position a range needs, never understate it:
 *
 *   - The point table, for ranges of one place (`k = 5`): bucket
 *     hash(tree, place) keeps, per way, a place and the position of its last
 *     change; a place pushed out of a full bucket (the way whose change is
 *     oldest goes) leaves its position in the bucket's `spill`, which every
 *     place of the bucket then needs. Exact unless more places than ways
 *     changed in one bucket since the primary's last write-back (a way
 *     whose position the replayed flushed position passed is as good as
 *     free). Written without a lock by the startup process only: its stores
 *     precede the commit records that make their rows visible to a
 *     snapshot. A way is replaced after `spill` took its position (write
 *     barrier), and a reader reads the ways before `spill` (read barrier):
 *     a reader that misses a place it looks for sees the spill holding its
 *     position. A torn way (new place, old position or the reverse) only
 *     overstates a need.
 *   - Spans, for any range: per tree, DEX_WBS_SPANS intervals of places,
 *     each with the position of the last change inside it. A change inside
 *     a span raises its position; otherwise it takes a span whose position
 *     the replayed flushed position passed (everything in it is written
 *     back), or else widens the nearest span. A range needs the highest
 *     position of the spans it meets. So while the primary inserts at one
 *     end of the key order (a serial, a timestamp), scans elsewhere do not
 *     wait; when its changes are everywhere, spans widen to everything and
 *     every range waits, as without them.
 */
#include "dex.h"

#include "common/hashfn.h"
#include "port/atomics.h"
#include "storage/shmem.h"
#include "storage/spin.h"

#define DEX_WBS_SPANS			16
/* the point table: 32768 buckets of 8 ways, 4.3 MB */
#define DEX_WBS_POINT_BUCKETS	(1 << 15)
#define DEX_WBS_POINT_WAYS		8

typedef struct DexWbsWay
{
	pg_atomic_uint64 place;
	pg_atomic_uint64 lsn;
} DexWbsWay;

typedef struct DexWbsBucket
{
	DexWbsWay	ways[DEX_WBS_POINT_WAYS];
	pg_atomic_uint64 spill;
} DexWbsBucket;

typedef struct DexWbsSpan
{
	uint64		lo;
	uint64		hi;
	uint64		lsn;			/* 0: never used */
} DexWbsSpan;

typedef struct DexWbsTreeSpans
{
	slock_t		mutex;
	DexWbsSpan	spans[DEX_WBS_SPANS];
} DexWbsTreeSpans;

typedef struct DexWbsPlacesShared
{
	DexWbsTreeSpans trees[DEX_WBS_TREES];
	DexWbsBucket buckets[DEX_WBS_POINT_BUCKETS];
} DexWbsPlacesShared;

static DexWbsPlacesShared *wbsp = NULL;

Size
dex_wbs_places_shmem_size(void)
{
	return MAXALIGN(sizeof(DexWbsPlacesShared));
}

void
dex_wbs_places_shmem_init(void *mem, bool found)
{
	wbsp = (DexWbsPlacesShared *) mem;
	if (found)
		return;
	memset(wbsp->trees, 0, sizeof(wbsp->trees));
	for (int t = 0; t < DEX_WBS_TREES; t++)
		SpinLockInit(&wbsp->trees[t].mutex);
	for (int i = 0; i < DEX_WBS_POINT_BUCKETS; i++)
	{
		DexWbsBucket *b = &wbsp->buckets[i];

		for (int w = 0; w < DEX_WBS_POINT_WAYS; w++)
		{
			pg_atomic_init_u64(&b->ways[w].place, 0);
			pg_atomic_init_u64(&b->ways[w].lsn, 0);
		}
		pg_atomic_init_u64(&b->spill, 0);
	}
}

static uint64
place_fixed(const uint8 *key)
{
	uint64		v;

	if (key[DEX_KEY_OFFSET_CLS] == DEX_KEYCLASS_NEG_INF)
		return 0;
	if (key[DEX_KEY_OFFSET_CLS] != DEX_KEYCLASS_VALUE)
		return PG_UINT64_MAX;
	memcpy(&v, key + DEX_KEY_OFFSET_VALUE, sizeof(v));
	return v;
}

static uint64
place_bytes(const uint8 *b, size_t len)
{
	uint64		v = 0;

	for (size_t i = 0; i < sizeof(v); i++)
		v = (v << 8) | (i < len ? b[i] : 0);
	return v;
}

/* The places of a fixed tree's scan range [lo, hi]. */
void
dex_wbs_places_of_keys(const DexKey *lo, const DexKey *hi, DexWbsPlaces *out)
{
	out->lo = place_fixed((const uint8 *) lo);
	out->hi = place_fixed((const uint8 *) hi);
}

/* The same for a byte-string tree's range (NULL bound: open end). */
void
dex_wbs_places_of_bytes(const uint8 *lo, size_t lolen, const uint8 *hi, size_t hilen, DexWbsPlaces *out)
{
	out->lo = lo ? place_bytes(lo, lolen) : 0;
	out->hi = hi ? place_bytes(hi, hilen) : PG_UINT64_MAX;
}

static DexWbsBucket *
point_bucket(int tree, uint64 place)
{
	uint64		h = hash_bytes_extended((const unsigned char *) &place, sizeof(place), (uint64) tree);

	return &wbsp->buckets[h & (DEX_WBS_POINT_BUCKETS - 1)];
}

static void
point_note(int tree, uint64 place, uint64 lsn)
{
	DexWbsBucket *b = point_bucket(tree, place);
	int			oldest = 0;
	uint64		oldest_lsn = PG_UINT64_MAX;

	for (int w = 0; w < DEX_WBS_POINT_WAYS; w++)
	{
		uint64		wl = pg_atomic_read_u64(&b->ways[w].lsn);

		if (wl != 0 && pg_atomic_read_u64(&b->ways[w].place) == place)
		{
			pg_atomic_write_u64(&b->ways[w].lsn, lsn);
			return;
		}
		if (wl < oldest_lsn)
		{
			oldest = w;
			oldest_lsn = wl;
		}
	}
	if (oldest_lsn > pg_atomic_read_u64(&b->spill))
		pg_atomic_write_u64(&b->spill, oldest_lsn);
	pg_write_barrier();
	pg_atomic_write_u64(&b->ways[oldest].place, place);
	pg_atomic_write_u64(&b->ways[oldest].lsn, lsn);
}

static uint64
point_need(int tree, uint64 place)
{
	DexWbsBucket *b = point_bucket(tree, place);
	uint64		need = 0;

	for (int w = 0; w < DEX_WBS_POINT_WAYS; w++)
	{
		if (pg_atomic_read_u64(&b->ways[w].place) == place)
			need = Max(need, pg_atomic_read_u64(&b->ways[w].lsn));
	}
	pg_read_barrier();
	return Max(need, pg_atomic_read_u64(&b->spill));
}

/* Under the tree's span lock: a change at `place` replayed at `lsn`. */
static void
span_note(DexWbsTreeSpans *ts, uint64 place, uint64 lsn, uint64 flushed)
{
	int			free_span = -1;
	int			nearest = 0;
	uint64		nearest_gap = PG_UINT64_MAX;

	for (int i = 0; i < DEX_WBS_SPANS; i++)
	{
		DexWbsSpan *s = &ts->spans[i];
		uint64		gap;

		if (s->lsn < flushed || s->lsn == 0)
		{
			if (free_span < 0)
				free_span = i;
			continue;
		}
		if (s->lo <= place && place <= s->hi)
		{
			s->lsn = lsn;
			return;
		}
		gap = place < s->lo ? s->lo - place : place - s->hi;
		if (gap < nearest_gap)
		{
			nearest = i;
			nearest_gap = gap;
		}
	}
	if (free_span >= 0)
	{
		ts->spans[free_span].lo = ts->spans[free_span].hi = place;
		ts->spans[free_span].lsn = lsn;
		return;
	}
	ts->spans[nearest].lo = Min(ts->spans[nearest].lo, place);
	ts->spans[nearest].hi = Max(ts->spans[nearest].hi, place);
	ts->spans[nearest].lsn = lsn;
}

/*
 * Startup process: the entries of an XLOG_DEX_ENTRIES record of tree slot
 * `tree` (count x (uint32 len, bytes), `len` bytes in all, of a `layout`
 * tree) replayed at `lsn`, while the replayed flushed position is `flushed`.
 * False if their places cannot be told (a record of a dex that did not log
 * the layout, or a malformed one): the caller makes every scan of the tree
 * wait for it.
 */
bool
dex_wbs_places_note(int tree, int layout, const char *entries, uint32 count, uint32 len, uint64 lsn,
					uint64 flushed)
{
	DexWbsTreeSpans *ts = &wbsp->trees[tree];
	const char *p = entries;

	if (layout != DEX_LAYOUT_FIXED && layout != DEX_LAYOUT_BYTES)
		return false;
	for (uint32 i = 0; i < count; i++)
	{
		uint32		elen;
		const uint8 *e;
		uint64		place;

		if (!dex_wal_entry_next(&p, entries + len, &e, &elen) ||
			(layout == DEX_LAYOUT_FIXED && elen != sizeof(DexKey)))
			return false;
		place = layout == DEX_LAYOUT_FIXED ? place_fixed(e) : place_bytes(e, elen);
		point_note(tree, place, lsn);
		SpinLockAcquire(&ts->mutex);
		span_note(ts, place, lsn, flushed);
		SpinLockRelease(&ts->mutex);
	}
	return true;
}

/*
 * The replay position of the last change of tree slot `tree` a scan of
 * places `r` can meet, or a later one: the spans it meets, and for a range
 * of one place also its point-table position (both overstate, so the lower
 * one will do).
 */
uint64
dex_wbs_places_need(int tree, const DexWbsPlaces *r)
{
	DexWbsTreeSpans *ts = &wbsp->trees[tree];
	uint64		need = 0;

	SpinLockAcquire(&ts->mutex);
	for (int i = 0; i < DEX_WBS_SPANS; i++)
	{
		const DexWbsSpan *s = &ts->spans[i];

		if (s->lsn != 0 && s->lo <= r->hi && s->hi >= r->lo)
			need = Max(need, s->lsn);
	}
	SpinLockRelease(&ts->mutex);
	if (r->lo == r->hi)
		need = Min(need, point_need(tree, r->lo));
	return need;
}
