/*
 * dexwbstandby.c — write-back indexes on hot standbys (src/README.md
 * "Write-back mode", "Hot standbys").
 *
 * A standby reads the index from the memory nodes, but the newest entries of
 * a write-back index live in the primary's dirty frames until a write-back.
 * A standby scan may only start once every entry change its snapshot can
 * need is in remote memory, and its own node cache holds no leaf older than
 * that:
 *
 *   - Every write-back names the leaves it publishes in an XLOG_DEX_NODES
 *     record, while it holds their locks (the core's change log, as every
 *     write-through does): replaying it drops them from the standby's cache.
 *   - After a complete flush, the primary's dex worker logs XLOG_DEX_WB_FLUSHED
 *     with the flushed position L of dexwbredo.c: every entry change logged
 *     before L is in remote memory, and the NODES records of the write-backs
 *     that put it there come before this record.
 *   - The standby remembers, per tree, the position of the last
 *     XLOG_DEX_ENTRIES record it replayed, and the highest L it replayed.
 *     A scan of a write-back index first reads E = that tree's last entries
 *     position (its snapshot was taken before: every change the snapshot can
 *     need was replayed, so is at or before E) and waits until the replayed
 *     L exceeds both E and S, the position this standby's replay began at
 *     (changes logged before S it never saw).
 *   - A point scan (one key value: `k = 5`, each element of `k = ANY(...)`)
 *     needs less: only the changes of entries with that key. The replay
 *     also records, in a hashed table of positions, the last change of each
 *     (tree, key) -- the key's 64-bit place in the index order: a fixed
 *     tree's value image, a byte-string tree's first 8 bytes -- and such a
 *     scan's E is the position in its key's slot. Every entry a point range
 *     holds has that one place (both bounds have it, and the place never
 *     decreases along the index order), so the changes that scan can meet
 *     are all in that slot; another key's change hashed there only makes it
 *     wait needlessly. So while the primary inserts elsewhere, a point
 *     select waits for nothing. A primary that does not write
 *     the index makes no scan wait. One that does: the waiting scan raises
 *     the cluster registry's flush_request_lsn to E + 1, which the primary's
 *     dex worker reads at its next beat (DEX_BEAT_MS) and flushes for, so
 *     the wait is about a beat plus the replication delay rather than up to
 *     a dex.writeback_interval.
 *
 * FLUSHED is logged when L moved and important WAL was written at or after
 * the L logged last, and is itself marked unimportant: an idle primary stays
 * idle (its checkpoints are still skipped), while a standby that starts from
 * any checkpoint finds one after its start. A wait longer than dex.standby_wait_timeout is
 * an ERROR with a HINT, never a wrong answer (the primary is gone, or its
 * worker does not flush).
 */
#include "dex.h"

#include "access/xlog.h"
#include "common/hashfn.h"
#include "port/atomics.h"
#include "access/xloginsert.h"
#include "access/xlogreader.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/spin.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

/* trees whose entry positions a standby keeps; beyond that, one for all */
#define DEX_WBS_TREES	256
/* the point table: buckets of ways (place, position) and a spill position; 4.3 MB */
#define DEX_WBS_POINT_BUCKETS	(1 << 15)
#define DEX_WBS_POINT_WAYS		8

typedef struct DexWbsTree
{
	uint64		ns;
	uint32		node;
	uint32		used;
	uint64		last_entries;	/* position of the last XLOG_DEX_ENTRIES replayed */
	uint64		last_unplaced;	/* ... of the last one whose entries are not in points[] */
} DexWbsTree;

typedef struct DexWbsShared
{
	slock_t		mutex;
	uint64		flushed;		/* highest L of a replayed XLOG_DEX_WB_FLUSHED */
	uint64		flushed_gen;	/* the primary life (cache generation) of the last one */
	uint64		replay_start;	/* where this server's replay began */
	uint64		overflow;		/* last entries position of trees not in trees[] */
	DexWbsTree	trees[DEX_WBS_TREES];
	/* primary: the L of the last XLOG_DEX_WB_FLUSHED logged */
	uint64		logged_l;
} DexWbsShared;

static DexWbsShared *wbss = NULL;

/*
 * The point table. Bucket hash(tree, key place) remembers, per way, a place
 * and the position of the last replayed change of an entry there; a place
 * pushed out of its bucket (the way whose change is oldest goes) leaves its
 * position in `spill`, which every place of the bucket then needs. A scan
 * of place P needs max(P's way, spill): exact unless more places than ways
 * changed in one bucket since the primary's last write-back (a way whose
 * position the replayed flushed position passed is as good as free).
 *
 * Written by the startup process only, outside the mutex: its stores
 * precede the commit records that make their rows visible to a snapshot.
 * A way is replaced after `spill` took its position (write barrier), and a
 * reader reads the ways before `spill` (read barrier): a reader that misses
 * a place it looks for then sees the spill that holds its position. A torn
 * way (new place, old position or the reverse) only overstates a need.
 */
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

static DexWbsBucket *wbs_points = NULL;

Size
dex_wbstandby_shmem_size(void)
{
	return add_size(MAXALIGN(sizeof(DexWbsShared)), mul_size(DEX_WBS_POINT_BUCKETS, sizeof(DexWbsBucket)));
}

void
dex_wbstandby_shmem_init(void *mem, bool found)
{
	wbss = (DexWbsShared *) mem;
	wbs_points = (DexWbsBucket *) ((char *) mem + MAXALIGN(sizeof(DexWbsShared)));
	if (!found)
	{
		memset(wbss, 0, sizeof(*wbss));
		SpinLockInit(&wbss->mutex);
		for (int i = 0; i < DEX_WBS_POINT_BUCKETS; i++)
		{
			DexWbsBucket *b = &wbs_points[i];

			for (int w = 0; w < DEX_WBS_POINT_WAYS; w++)
			{
				pg_atomic_init_u64(&b->ways[w].place, 0);
				pg_atomic_init_u64(&b->ways[w].lsn, 0);
			}
			pg_atomic_init_u64(&b->spill, 0);
		}
	}
}

/*
 * A key's place in the index order, as 64 bits that never decrease along it:
 * a fixed tree's value image (NULLs, after every value, at the top), a
 * byte-string tree's first 8 bytes, big-endian, zero-padded (memcmp order,
 * a proper prefix first).
 */
static uint64
wbs_place_fixed(const uint8 *key)
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
wbs_place_bytes(const uint8 *b, size_t len)
{
	uint64		v = 0;

	for (size_t i = 0; i < sizeof(v); i++)
		v = (v << 8) | (i < len ? b[i] : 0);
	return v;
}

/* A scan range [lo, hi] of a fixed tree: is it one place (returned in *place)? */
bool
dex_wbs_point_of_keys(const DexKey *lo, const DexKey *hi, uint64 *place)
{
	if (lo->cls != hi->cls || (lo->cls != DEX_KEYCLASS_VALUE && lo->cls != DEX_KEYCLASS_NULL))
		return false;
	*place = wbs_place_fixed((const uint8 *) lo);
	return *place == wbs_place_fixed((const uint8 *) hi);
}

/* The same for a byte-string tree's range (NULL bound: open end). */
bool
dex_wbs_point_of_bytes(const uint8 *lo, size_t lolen, const uint8 *hi, size_t hilen, uint64 *place)
{
	if (lo == NULL || hi == NULL)
		return false;
	*place = wbs_place_bytes(lo, lolen);
	return *place == wbs_place_bytes(hi, hilen);
}

static DexWbsBucket *
wbs_point_bucket(int tree, uint64 place)
{
	uint64		h = hash_bytes_extended((const unsigned char *) &place, sizeof(place), (uint64) tree);

	return &wbs_points[h & (DEX_WBS_POINT_BUCKETS - 1)];
}

/* Startup process: a change of an entry at `place` of `tree` replayed at `lsn`. */
pg_attribute_unused()
static void
wbs_point_note(int tree, uint64 place, uint64 lsn)
{
	DexWbsBucket *b = wbs_point_bucket(tree, place);
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

/* The position of the last change replayed at `place` of `tree` (or later). */
static uint64
wbs_point_need(int tree, uint64 place)
{
	DexWbsBucket *b = wbs_point_bucket(tree, place);
	uint64		need = 0;

	for (int w = 0; w < DEX_WBS_POINT_WAYS; w++)
	{
		if (pg_atomic_read_u64(&b->ways[w].place) == place)
			need = Max(need, pg_atomic_read_u64(&b->ways[w].lsn));
	}
	pg_read_barrier();
	return Max(need, pg_atomic_read_u64(&b->spill));
}

#if PG_VERSION_NUM >= 150000

/*
 * Primary, dex worker, after a complete flush that published L: log it if
 * it moved and important WAL was written since the previous record.
 */
void
dex_wbs_log_flushed(uint64 gen, XLogRecPtr l)
{
	uint64		payload[2] = {gen, (uint64) l};
	XLogRecPtr	important;
	XLogRecPtr	rec;

	if (wbss == NULL || !XLogStandbyInfoActive() || RecoveryInProgress())
		return;
	important = GetLastImportantRecPtr();	/* (takes LWLocks: not under the spinlock) */
	SpinLockAcquire(&wbss->mutex);
	/*
	 * Only if L moved and something important was written at or after the
	 * L logged last (entries it did not cover, a checkpoint a standby may
	 * start from): an idle primary stops after one more record.
	 */
	if (l <= wbss->logged_l || important < wbss->logged_l)
	{
		SpinLockRelease(&wbss->mutex);
		return;
	}
	wbss->logged_l = l;
	SpinLockRelease(&wbss->mutex);
	XLogBeginInsert();
	XLogSetRecordFlags(XLOG_MARK_UNIMPORTANT);
	XLogRegisterData((char *) payload, sizeof(payload));
	rec = XLogInsert(DEX_RMGR_ID, XLOG_DEX_WB_FLUSHED);
	/*
	 * Sent now: walsenders send only flushed WAL, and on a primary that
	 * writes nothing else the WAL writer may leave this record's partial page
	 * in wal_buffers -- a standby's scan waiting for it would wait for the
	 * next commit.
	 */
	XLogFlush(rec);
}

/* Startup process, beginning of any recovery: where this replay begins. */
void
dex_wbs_redo_startup(void)
{
	SpinLockAcquire(&wbss->mutex);
	wbss->replay_start = GetRedoRecPtr();
	SpinLockRelease(&wbss->mutex);
}

/*
 * Record the places of a record's entries (count x (uint32 len, bytes),
 * `len` bytes in all) in the point table at `lsn`; false if they cannot be
 * told (a record of a dex that did not log its tree's layout, or a
 * malformed one): then the tree's point scans wait for this record too.
 */
static bool
wbs_place_entries(int tree, int layout, const char *entries, uint32 count, uint32 len, XLogRecPtr lsn)
{
	uint32		off = 0;

	if (layout != DEX_LAYOUT_FIXED && layout != DEX_LAYOUT_BYTES)
		return false;
	for (uint32 i = 0; i < count; i++)
	{
		uint32		elen;
		const uint8 *e;
		uint64		place;

		if (len - off < sizeof(elen))
			return false;
		memcpy(&elen, entries + off, sizeof(elen));
		off += sizeof(elen);
		if (len - off < elen || (layout == DEX_LAYOUT_FIXED && elen != sizeof(DexKey)))
			return false;
		e = (const uint8 *) entries + off;
		off += elen;
		place = layout == DEX_LAYOUT_FIXED ? wbs_place_fixed(e) : wbs_place_bytes(e, elen);
		wbs_point_note(tree, place, (uint64) lsn);
	}
	return true;
}

/*
 * Replay of XLOG_DEX_ENTRIES for tree (node, ns) at `lsn`: `count` entries
 * of a `layout` tree (-1: not told) in `len` bytes at `entries`.
 */
void
dex_wbs_redo_entries(uint32 node, uint64 ns, int layout, const char *entries, uint32 count, uint32 len,
					 XLogRecPtr lsn)
{
	int			slot = -1;
	int			free_slot = -1;

	SpinLockAcquire(&wbss->mutex);
	for (int i = 0; i < DEX_WBS_TREES; i++)
	{
		DexWbsTree *t = &wbss->trees[i];

		if (t->used && t->node == node && t->ns == ns)
		{
			slot = i;
			break;
		}
		if (!t->used && free_slot < 0)
			free_slot = i;
	}
	if (slot < 0 && free_slot >= 0)
	{
		slot = free_slot;
		wbss->trees[slot].node = node;
		wbss->trees[slot].ns = ns;
		wbss->trees[slot].used = 1;
	}
	if (slot >= 0)
		wbss->trees[slot].last_entries = lsn;
	else
		wbss->overflow = lsn;
	SpinLockRelease(&wbss->mutex);
	/* (only this process writes trees[] and the point table) */
	if (slot >= 0 && !wbs_place_entries(slot, layout, entries, count, len, lsn))
	{
		SpinLockAcquire(&wbss->mutex);
		wbss->trees[slot].last_unplaced = lsn;
		SpinLockRelease(&wbss->mutex);
	}
}

/* Replay of XLOG_DEX_WB_FLUSHED. */
void
dex_wbs_redo_flushed(XLogReaderState *record)
{
	uint64		p[2];			/* life, L */

	if (XLogRecGetDataLen(record) != sizeof(p))
		elog(PANIC, "dex_redo: flushed-position record of %u bytes", XLogRecGetDataLen(record));
	memcpy(p, XLogRecGetData(record), sizeof(p));
	SpinLockAcquire(&wbss->mutex);
	wbss->flushed_gen = p[0];
	if (p[1] > wbss->flushed)
		wbss->flushed = p[1];
	SpinLockRelease(&wbss->mutex);
}

/*
 * The position a scan of tree (node, ns) must see flushed: max(E, S), where
 * E is the last change of the tree replayed, or, for a point scan (`place`
 * not NULL), the last one replayed in the place's slot of the point table
 * (and the last one whose entries were not placed).
 */
static uint64
wbs_needed(uint32 node, uint64 ns, const uint64 *place)
{
	uint64		need;
	int			slot = -1;

	SpinLockAcquire(&wbss->mutex);
	need = wbss->replay_start;
	for (int i = 0; i < DEX_WBS_TREES; i++)
	{
		DexWbsTree *t = &wbss->trees[i];

		if (t->used && t->node == node && t->ns == ns)
		{
			slot = i;
			need = Max(need, place ? t->last_unplaced : t->last_entries);
			break;
		}
	}
	if (slot < 0)
		need = Max(need, wbss->overflow);
	SpinLockRelease(&wbss->mutex);
	if (slot >= 0 && place)
		need = Max(need, wbs_point_need(slot, *place));
	return need;
}

/*
 * Hot standby, before a scan of write-back index `index` (tree node/ns,
 * dirty-owner word `owner_word`) -- of one key place if `place` is not NULL
 * (dex_wbs_point_of_keys / _bytes), of anything in it otherwise: wait until
 * the primary's write-backs covered what this snapshot can need. An owner word naming another life
 * than the one whose flushed position we replayed is a primary that crashed
 * with dirty frames of this tree: its changes come back only when the
 * primary replays them at the index's first use there (dexwbredo.c), which
 * releases the word -- wait for that too. Honours cancel and
 * statement_timeout; ERROR after timeout_ms (dex.standby_wait_timeout).
 */
void
dex_wb_standby_wait(Relation index, DexTree *tree, uint64 owner_word, uint32 node, uint64 ns, int timeout_ms,
					uint64 *checked_life, void (*ask_flush) (uint64 lsn), const uint64 *place)
{
	uint64		flushed = 0;
	uint64		gen = 0;
	uint64		need;
	uint64		word = 0;
	TimestampTz start = 0;
	DexError	err;

	if (wbss == NULL || !RecoveryInProgress())
		return;
	need = wbs_needed(node, ns, place);
	for (;;)
	{
		SpinLockAcquire(&wbss->mutex);
		flushed = wbss->flushed;
		gen = wbss->flushed_gen;
		SpinLockRelease(&wbss->mutex);
		/*
		 * The word is read once per handle and life: while the replayed
		 * flushed position is that life's, the word can only hold 0 or
		 * that life (a crash of it shows as another life's position first).
		 * Life 0 (a primary without a cache) is never taken as checked.
		 */
		if (flushed > need && owner_word != 0 && (gen == 0 || *checked_life != gen))
		{
			int			rc;

			memset(&err, 0, sizeof(err));
			rc = dex_tree_owner_word_read(tree, owner_word, &word, &err);
			if (rc != DEX_OK)
				dex_report_error(rc, &err, index);
			if (word == 0 || word == gen)
			{
				*checked_life = gen;
				break;
			}
		}
		else if (flushed > need)
			break;
		if (start == 0)
		{
			start = GetCurrentTimestamp();
			/* the primary's worker flushes at its next beat, not its next interval */
			if (flushed <= need)
				ask_flush(need + 1);
		}
		CHECK_FOR_INTERRUPTS();
		if (TimestampDifferenceExceeds(start, GetCurrentTimestamp(), timeout_ms))
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("index \"%s\": the primary has not written back the changes this standby's snapshot needs",
							RelationGetRelationName(index)),
					 flushed > need ?
					 errdetail("A primary that crashed with dirty nodes of the index has not replayed its changes yet.") :
					 errdetail("Entry changes up to %X/%X must be in remote memory; the replayed write-backs reach %X/%X.",
							   LSN_FORMAT_ARGS(need), LSN_FORMAT_ARGS(flushed)),
					 errhint("Check that the primary runs, uses the index, and that its dex worker flushes "
							 "(dex.writeback_interval); or query the table without this index.")));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	dex_stats_count_standby_wb_scan(start != 0);
	if (start != 0)
		elog(DEBUG1, "dex: index \"%s\": waited %ld ms for the primary's write-backs to reach %X/%X",
			 RelationGetRelationName(index), (long) ((GetCurrentTimestamp() - start) / 1000),
			 LSN_FORMAT_ARGS(need));
}

#else							/* PG < 15: no custom WAL: no write-back on standbys */

void
dex_wbs_log_flushed(uint64 gen, uint64 l)
{
}

void
dex_wb_standby_wait(Relation index, DexTree *tree, uint64 owner_word, uint32 node, uint64 ns, int timeout_ms,
					uint64 *checked_life, void (*ask_flush) (uint64 lsn), const uint64 *place)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("write-back index \"%s\" cannot be read on a standby before PostgreSQL 15",
						RelationGetRelationName(index))));
}
#endif
