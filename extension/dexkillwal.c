/*
 * dexkillwal.c — the conflict horizon of a write-back index's kill
 * (src/README.md "Dead-entry hints", K7).
 *
 * A kill in a write-back tree removes entries in the primary's cache frame;
 * remote memory, where hot standbys read, sees the removal only when the
 * frame is written back. Like nbtree's deletion records, the kill first logs
 * XLOG_DEX_KILL with the newest xid whose row versions it may remove (the
 * conflict horizon); replaying it on a hot standby cancels the queries whose
 * snapshots could still see those versions. The frame then stays dirty until
 * WAL is durable up to the record and every live standby has replayed it
 * (the frame's lsn, BTree::wb_kill), so no standby query can miss an entry
 * it still needs -- and the scan pays no registry round trip, and kills go
 * on while standbys are attached.
 */
#include "dex.h"

#include "access/heapam.h"
#include "access/heapam_xlog.h"
#include "access/tableam.h"
#include "access/xlog.h"
#include "access/xlogutils.h"
#include "access/xloginsert.h"
#include "access/xlogreader.h"
#include "lib/stringinfo.h"
#include "storage/bufmgr.h"
#include "storage/standby.h"
#include "utils/rel.h"

#if PG_VERSION_NUM >= 150000

#if PG_VERSION_NUM >= 160000
#define dex_advance_horizon HeapTupleHeaderAdvanceConflictHorizon
#else
#define dex_advance_horizon HeapTupleHeaderAdvanceLatestRemovedXid
#endif

/* XLOG_DEX_KILL's payload: the index (its database scopes the conflict) */
typedef struct DexWalKill
{
	Oid			spc;
	Oid			db;
	Oid			rel;
	TransactionId horizon;		/* InvalidTransactionId: nothing to cancel */
} DexWalKill;

static int
tid_cmp(const void *a, const void *b)
{
	return ItemPointerCompare((ItemPointer) a, (ItemPointer) b);
}

/*
 * Advance *horizon over the HOT chain starting at `off` of a share-locked
 * heap page, as the heap AM does for its own index deletions. Tolerant of
 * whatever the page holds now -- a line pointer a concurrent VACUUM made
 * unused, or one reused since, only stops the walk or makes the horizon more
 * careful -- because a hint must never raise an error.
 */
static void
chain_horizon(Page page, BlockNumber blk, OffsetNumber off, TransactionId *horizon)
{
	OffsetNumber maxoff = PageGetMaxOffsetNumber(page);
	TransactionId prior = InvalidTransactionId;

	for (int hops = 0; off >= FirstOffsetNumber && off <= maxoff && hops < MaxHeapTuplesPerPage; hops++)
	{
		ItemId		lp = PageGetItemId(page, off);
		HeapTupleHeader htup;

		if (ItemIdIsRedirected(lp))
		{
			off = ItemIdGetRedirect(lp);
			continue;
		}
		if (!ItemIdIsNormal(lp))
			break;				/* dead or unused: its prune record came first */
		htup = (HeapTupleHeader) PageGetItem(page, lp);
		if (TransactionIdIsValid(prior) && !TransactionIdEquals(prior, HeapTupleHeaderGetXmin(htup)))
			break;				/* not the chain's next version */
		dex_advance_horizon(htup, horizon);
		if (!HeapTupleHeaderIsHotUpdated(htup) ||
			ItemPointerGetBlockNumber(&htup->t_ctid) != blk)
			break;
		off = ItemPointerGetOffsetNumber(&htup->t_ctid);
		prior = HeapTupleHeaderGetUpdateXid(htup);
	}
}

/*
 * The conflict horizon of removing the entries of tids[0..n) (sorted here),
 * which a scan found dead to everyone. *ok = false: not a heap table (the
 * caller then uses the kills' registry gate instead).
 */
static TransactionId
kill_horizon(Relation heap, ItemPointerData *tids, int n, bool *ok)
{
	TransactionId horizon = InvalidTransactionId;
	Buffer		buf = InvalidBuffer;
	BlockNumber blk = InvalidBlockNumber;

	*ok = heap != NULL && heap->rd_tableam == GetHeapamTableAmRoutine();
	if (!*ok)
		return InvalidTransactionId;
	/*
	 * (The scan still holds its lock on the table, so no VACUUM truncation
	 * can have removed a page it fetched from.)
	 */
	qsort(tids, n, sizeof(ItemPointerData), tid_cmp);
	for (int i = 0; i < n; i++)
	{
		if (ItemPointerGetBlockNumber(&tids[i]) != blk)
		{
			if (BufferIsValid(buf))
				UnlockReleaseBuffer(buf);
			blk = ItemPointerGetBlockNumber(&tids[i]);
			buf = ReadBuffer(heap, blk);
			LockBuffer(buf, BUFFER_LOCK_SHARE);
		}
		chain_horizon(BufferGetPage(buf), blk, ItemPointerGetOffsetNumber(&tids[i]), &horizon);
	}
	if (BufferIsValid(buf))
		UnlockReleaseBuffer(buf);
	return horizon;
}

/*
 * Log a kill of `index`'s entries with conflict horizon `horizon`; returns
 * the position its frame must wait for (the record's end). Without standby
 * information in WAL (wal_level minimal: no standby can exist) nothing is
 * logged and the position is WAL's insert position, which still covers the
 * commits that made the rows dead. 0 (PG < 15, no dex WAL records): none;
 * the caller must pass the kills' registry gate instead.
 */
uint64
dex_kill_log_horizon(Relation index, TransactionId horizon)
{
	DexWalKill	rec;

	if (!XLogStandbyInfoActive())
		return (uint64) GetXLogInsertRecPtr();
	memset(&rec, 0, sizeof(rec));
	rec.spc = DEX_REL_SPC(index);
	rec.db = DEX_REL_DB(index);
	rec.rel = DEX_REL_NUMBER(index);
	rec.horizon = horizon;
	XLogBeginInsert();
	XLogRegisterData((char *) &rec, sizeof(rec));
	return (uint64) XLogInsert(DEX_RMGR_ID, XLOG_DEX_KILL);
}

/*
 * A scan's kill of tids[0..n) (reordered): its conflict horizon. False: not
 * known here (not a heap table); use the gate.
 */
bool
dex_kill_scan_horizon(Relation heap, ItemPointerData *tids, int n, TransactionId *horizon)
{
	bool		ok;

	*horizon = kill_horizon(heap, tids, n, &ok);
	return ok;
}

/* Redo: on a hot standby, cancel the queries that could see the rows. */
void
dex_kill_redo(XLogReaderState *record)
{
	DexWalKill	rec;

	if (XLogRecGetDataLen(record) != sizeof(rec))
		elog(PANIC, "dex_redo: kill record of %u bytes", XLogRecGetDataLen(record));
	memcpy(&rec, XLogRecGetData(record), sizeof(rec));
	if (!InHotStandby || !TransactionIdIsValid(rec.horizon))
		return;
	{
#if PG_VERSION_NUM >= 160000
		RelFileLocator loc = {rec.spc, rec.db, rec.rel};

		ResolveRecoveryConflictWithSnapshot(rec.horizon, false, loc);
#else
		RelFileNode loc = {rec.spc, rec.db, rec.rel};

		ResolveRecoveryConflictWithSnapshot(rec.horizon, loc);
#endif
	}
}

void
dex_kill_desc(struct StringInfoData *buf, XLogReaderState *record)
{
	DexWalKill	rec;

	if (XLogRecGetDataLen(record) != sizeof(rec))
		return;
	memcpy(&rec, XLogRecGetData(record), sizeof(rec));
	appendStringInfo(buf, "kill in rel %u/%u/%u, conflict horizon %u", rec.spc, rec.db, rec.rel, rec.horizon);
}

#else							/* PG < 15: no custom WAL resource managers */

bool
dex_kill_scan_horizon(Relation heap, ItemPointerData *tids, int n, TransactionId *horizon)
{
	return false;
}

uint64
dex_kill_log_horizon(Relation index, TransactionId horizon)
{
	return 0;
}

#endif
