/*
 * dexjournal.c — crash consistency (src/README.md "Crash survival: the
 * insert journal"): what ties a dex index, whose entries are written to remote
 * memory at once, to the heap, whose rows become durable only with their WAL.
 *
 *  - Inserts tell the core where their row's heap WAL ends and how far WAL is
 *    durable; an entry that could outlive a crash of its row is recorded in
 *    the index's remote journal first (or, without a free journal slot, WAL is
 *    flushed before the entry is written: DEX_ERR_NEED_WAL_FLUSH).
 *  - Removals (VACUUM) and write-backs of dirty cached leaves follow WAL:
 *    the WAL that made the change right is flushed before it reaches remote
 *    memory.
 *  - The first use of an index by a new primary life (after a crash restart,
 *    a restart, or a promotion) recovers its journal before anything else:
 *    every listed entry whose heap slot does not hold a tuple with that key
 *    any more is a stray of a row lost in the crash and is deleted.
 */
#include "dex.h"

#include "access/table.h"
#include "access/tableam.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "catalog/index.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

/* Lock tag (a page lock on the index at an impossible block) serializing recoveries. */
#define DEX_JOURNAL_LOCK_BLKNO	((BlockNumber) 0xFFFFFFF0)

/* ---------------------------------------------------------------------
 * WAL positions
 * ---------------------------------------------------------------------
 */

/*
 * The core's durable-LSN source (dirty write-back leaves wait for it): WAL
 * flushed and published as the trees' high-water mark in the cluster
 * registry, which also covers every live standby's replay (dexcluster.c).
 * Called under frame locks: no error, no remote access.
 */
static uint64_t
dex_wal_durable_cb(void)
{
	return (uint64_t) Min(dex_wal_durable(), dex_cluster_published_hwm());
}

void
dex_journal_init(void)
{
	dex_set_durable_lsn_fn(dex_wal_durable_cb);
}

/*
 * Make every WAL record inserted so far durable. GetXLogInsertRecPtr() may
 * point just past the header of a page nothing was written to yet; no record
 * ends inside a page header, so flushing up to the page start is the same.
 */
void
dex_wal_flush_all(void)
{
	XLogRecPtr	upto;

	if (RecoveryInProgress())
		return;
	upto = GetXLogInsertRecPtr();
	if (XLogSegmentOffset(upto, wal_segment_size) == SizeOfXLogLongPHD)
		upto -= SizeOfXLogLongPHD;
	else if (upto % XLOG_BLCKSZ == SizeOfXLogShortPHD)
		upto -= SizeOfXLogShortPHD;
	XLogFlush(upto);
}

/*
 * Dirty leaves of write-back indexes are written back only once the heap WAL
 * of their entries is durable: flush WAL as far as the dirtiest one needs
 * (nothing if no frame is dirty).
 */
void
dex_wal_flush_dirty(void)
{
	uint64		need = dex_cache_dirty_lsn();

	if (need == 0 || RecoveryInProgress())
		return;
	if (need > dex_wal_durable())
		XLogFlush((XLogRecPtr) need);
	/* and published as the trees' high-water mark (standbys replayed it) */
	dex_cluster_wait_retention(need, NULL);
}

/*
 * A core operation answered DEX_ERR_NEED_WAL_FLUSH (it changed nothing):
 * flush WAL that far, wait until the retention horizon covers it (every live
 * standby replayed it, published in the registry), so it can be retried.
 */
void
dex_wal_flush_for_retry(const DexError *err, Relation index)
{
	if (err->need_lsn == 0 || RecoveryInProgress())
		elog(ERROR, "dex: a remote write waits for WAL that cannot be flushed");
	if (err->need_lsn > dex_wal_durable())
		XLogFlush((XLogRecPtr) err->need_lsn);
	dex_cluster_wait_retention(err->need_lsn, index);
}

/*
 * End of the heap WAL record of the row an aminsert is about to index (0: the
 * heap is not WAL-logged: temporary and unlogged tables, and tables created in
 * this transaction under wal_level = minimal -- a crash takes those rows and
 * the index with them, or empties both).
 */
uint64
dex_row_lsn(Relation heap)
{
	if (!RelationNeedsWAL(heap))
		return 0;
	/* heap_insert / heap_update just WAL-logged the row in this backend */
	if (XactLastRecEnd != InvalidXLogRecPtr)
		return (uint64) XactLastRecEnd;
	return (uint64) GetXLogInsertRecPtr();
}

/* This process's journal lane: its PGPROC number (unique among live processes). */
uint32
dex_journal_lane(void)
{
#if PG_VERSION_NUM >= 170000
	return (uint32) MyProcNumber;
#else
	return MyProc ? (uint32) MyProc->pgprocno : (uint32) 0xFFFFFFFF;
#endif
}

/* ---------------------------------------------------------------------
 * recovery
 * ---------------------------------------------------------------------
 */

/* What the heap check needs, set up once per recovery. */
typedef struct DexHeapCheck
{
	Relation	heap;
	Relation	index;
	IndexInfo  *ii;
	EState	   *estate;
	ExprContext *econtext;
	ExprState  *predicate;
	TupleTableSlot *slot;
	IndexFetchTableData *fetch;
	BlockNumber nblocks;
} DexHeapCheck;

/*
 * Does the heap still hold, at this entry's TID, a HOT-chain root whose index
 * key is this entry's key (in any state, live or dead: VACUUM handles dead
 * ones)? If not, the entry is a stray and must go. An entry of a row whose
 * insert is waiting right now for this recovery also matches (its aminsert
 * then finds it and journals it again).
 */
static bool
dex_entry_has_row(DexHeapCheck *hc, const DexKey *k)
{
	ItemPointerData tid;
	bool		call_again = false;
	bool		all_dead = false;
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	DexKey		k2;
	bool		found;

	if (k->cls != DEX_KEY_VALUE && k->cls != DEX_KEY_NULL)
		return false;
	dex_key_to_tid(k, &tid);
	if (!ItemPointerIsValid(&tid) || k->block >= hc->nblocks)
		return false;			/* past the heap's end: the row was never durable */

	ResetExprContext(hc->econtext);
	ExecClearTuple(hc->slot);
	/* SnapshotAny: the chain's first tuple; a heap-only tuple is never a root */
	found = table_index_fetch_tuple(hc->fetch, &tid, SnapshotAny, hc->slot,
									&call_again, &all_dead);
	if (!found)
		return false;
	hc->econtext->ecxt_scantuple = hc->slot;
	if (hc->predicate && !ExecQual(hc->predicate, hc->econtext))
		return false;
	FormIndexDatum(hc->ii, hc->slot, hc->estate, values, isnull);
	dex_make_key(&k2, hc->index, values[0], isnull[0], &tid);
	return dex_key_cmp(&k2, k) == 0;
}

/* Entries of keys[0..n) without their row, palloc'd. */
static DexKey *
dex_find_strays(Relation index, const DexKey *keys, int n, int *nstrays)
{
	DexHeapCheck hc;
	DexKey	   *strays = palloc(sizeof(DexKey) * Max(n, 1));

	*nstrays = 0;
	memset(&hc, 0, sizeof(hc));
	hc.index = index;
	hc.heap = table_open(index->rd_index->indrelid, AccessShareLock);
	hc.ii = BuildIndexInfo(index);
	hc.estate = CreateExecutorState();
	hc.econtext = GetPerTupleExprContext(hc.estate);
	hc.predicate = ExecPrepareQual(hc.ii->ii_Predicate, hc.estate);
	hc.slot = table_slot_create(hc.heap, NULL);
	hc.fetch = table_index_fetch_begin(hc.heap);
	hc.nblocks = RelationGetNumberOfBlocks(hc.heap);

	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (!dex_entry_has_row(&hc, &keys[i]))
			strays[(*nstrays)++] = keys[i];
	}

	table_index_fetch_end(hc.fetch);
	ExecDropSingleTupleTableSlot(hc.slot);
	FreeExecutorState(hc.estate);
	table_close(hc.heap, AccessShareLock);
	return strays;
}

/*
 * Before this backend uses the index (see the file header): if the journal
 * was last recovered by another life of this compute server (or by another
 * compute server, e.g. the primary before a promotion), recover it now.
 * *verified caches the life it was found recovered in (per backend and open
 * tree). A hot standby never changes the tree: it reads, and the primary (or
 * the standby itself once promoted) recovers.
 */
void
dex_journal_gate(Relation index, DexTree *tree, uint64 journal_root, uint64 *verified)
{
	uint64		mine = dex_life();
	uint64		life = 0;
	DexKey	   *keys = NULL;
	DexKey	   *copy;
	DexKey	   *strays;
	int			n = 0;
	int			nstrays = 0;
	uint64_t	removed = 0;
	DexError	err;
	int			rc;

	if (journal_root == 0 || *verified == mine)
		return;
	if (RecoveryInProgress())
		return;

	memset(&err, 0, sizeof(err));
	rc = dex_journal_life(tree, &life, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, index);
	if (life == mine)
	{
		*verified = mine;
		return;
	}

	LockPage(index, DEX_JOURNAL_LOCK_BLKNO, ExclusiveLock);
	rc = dex_journal_read(tree, &keys, &n, &life, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, index);
	copy = palloc(sizeof(DexKey) * Max(n, 1));
	memcpy(copy, keys, sizeof(DexKey) * n);
	dex_free(keys);
	if (life != mine)
	{
		strays = dex_find_strays(index, copy, n, &nstrays);
		rc = dex_journal_finish(tree, life, mine, strays, nstrays, &removed, &err);
		if (rc != DEX_OK)
			dex_report_error(rc, &err, index);
		ereport(removed > 0 ? LOG : DEBUG1,
				(errmsg("dex: recovered the insert journal of index \"%s\": %d journaled entries checked against the heap, " UINT64_FORMAT " stray entries removed",
						RelationGetRelationName(index), n, (uint64) removed)));
		pfree(strays);
	}
	pfree(copy);
	UnlockPage(index, DEX_JOURNAL_LOCK_BLKNO, ExclusiveLock);
	*verified = mine;
}
