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
 *   - An index scan needs less: only the changes its key range can meet.
 *     It waits per range, before each core scan (dex_standby_scan_wait),
 *     and its E is the last replayed change at a key place inside its
 *     range, which dexwbsplaces.c's point table and spans never understate.
 *     So while the primary changes other keys, a scan waits for nothing.
 *     A primary that does not write
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
#include "access/xloginsert.h"
#include "access/xlogreader.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/condition_variable.h"
#include "storage/spin.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

typedef struct DexWbsTree
{
	uint64		ns;
	uint32		node;
	uint32		used;
	uint64		last_entries;	/* position of the last XLOG_DEX_ENTRIES replayed */
	uint64		last_unplaced;	/* ... of the last one whose entries have no places */
} DexWbsTree;

typedef struct DexWbsShared
{
	slock_t		mutex;
	uint64		flushed;		/* highest L of a replayed XLOG_DEX_WB_FLUSHED */
	uint64		flushed_gen;	/* the primary life (cache generation) of the last one */
	uint64		replay_start;	/* where this server's replay began */
	uint64		overflow;		/* last entries position of trees not in trees[] */
	DexWbsTree	trees[DEX_WBS_TREES];
	/* primary: the L of the last XLOG_DEX_WB_FLUSHED logged, and its end */
	uint64		logged_l;
	uint64		logged_end;
	bool		standbys_live;	/* a standby held a live slot at the worker's last beat */
	ConditionVariable flushed_cv;	/* broadcast when `flushed` moves */
} DexWbsShared;

static DexWbsShared *wbss = NULL;

Size
dex_wbstandby_shmem_size(void)
{
	return add_size(MAXALIGN(sizeof(DexWbsShared)), dex_wbs_places_shmem_size());
}

void
dex_wbstandby_shmem_init(void *mem, bool found)
{
	wbss = (DexWbsShared *) mem;
	if (!found)
	{
		memset(wbss, 0, sizeof(*wbss));
		SpinLockInit(&wbss->mutex);
		ConditionVariableInit(&wbss->flushed_cv);
	}
	dex_wbs_places_shmem_init((char *) mem + MAXALIGN(sizeof(DexWbsShared)), found);
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
	bool		standbys_live;

	if (wbss == NULL || !XLogStandbyInfoActive() || RecoveryInProgress())
		return;
	important = GetLastImportantRecPtr();	/* (takes LWLocks: not under the spinlock) */
	SpinLockAcquire(&wbss->mutex);
	standbys_live = wbss->standbys_live;
	/*
	 * Only if L moved and something important was written at or after the
	 * L logged last (entries it did not cover, a checkpoint a standby may
	 * start from): an idle primary stops after one more record.
	 */
	if (l <= wbss->logged_l || important < wbss->logged_l)
	{
		rec = wbss->logged_end;
		SpinLockRelease(&wbss->mutex);
	}
	else
	{
		wbss->logged_l = l;
		SpinLockRelease(&wbss->mutex);
		XLogBeginInsert();
		XLogSetRecordFlags(XLOG_MARK_UNIMPORTANT);
		XLogRegisterData((char *) payload, sizeof(payload));
		rec = XLogInsert(DEX_RMGR_ID, XLOG_DEX_WB_FLUSHED);
		SpinLockAcquire(&wbss->mutex);
		wbss->logged_end = Max(wbss->logged_end, rec);
		SpinLockRelease(&wbss->mutex);
	}
	/*
	 * Sent now while a standby uses dex: walsenders send only flushed WAL,
	 * and on a primary that writes nothing else the WAL writer may leave the
	 * record's partial page in wal_buffers for good (it flushes whole pages
	 * and commits) -- a standby's scan waiting for it would wait for the
	 * next commit. So also the last record logged, when none is logged now:
	 * it may have been logged while no standby was counted. Not while no
	 * standby uses dex: the flush would make every open transaction's WAL
	 * durable at each write-back round, more often than wal_writer_delay
	 * (with asynchronous commits a user's choice). A standby's first scan
	 * claims its slot before it waits, and its flush request reaches a beat
	 * that counts it (dex_wbs_note_standbys).
	 */
	if (rec != InvalidXLogRecPtr && standbys_live)
		XLogFlush(rec);
}

/* Primary, dex worker, each beat: does a standby hold a live slot? */
void
dex_wbs_note_standbys(bool live)
{
	if (wbss == NULL)
		return;
	SpinLockAcquire(&wbss->mutex);
	wbss->standbys_live = live;
	SpinLockRelease(&wbss->mutex);
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
	/* (only this process writes trees[], `flushed` and the places) */
	if (slot >= 0 && !dex_wbs_places_note(slot, layout, entries, count, len, lsn, wbss->flushed))
	{
		SpinLockAcquire(&wbss->mutex);
		wbss->trees[slot].last_unplaced = lsn;
		SpinLockRelease(&wbss->mutex);
	}
}

/* Replay of XLOG_DEX_WB_FLUSHED: life gen wrote back what it logged before l. */
void
dex_wbs_redo_flushed(uint64 gen, uint64 l)
{
	SpinLockAcquire(&wbss->mutex);
	wbss->flushed_gen = gen;
	if (l > wbss->flushed)
		wbss->flushed = l;
	SpinLockRelease(&wbss->mutex);
	/* waiting scans go on now, not at their next poll */
	ConditionVariableBroadcast(&wbss->flushed_cv);
}

/*
 * The position a scan of tree (node, ns) must see flushed: max(E, S), where
 * E is the last change of the tree replayed, or, for a scan of key places
 * `places` (not NULL), the last one it can meet (dexwbsplaces.c) and the
 * last one whose places are unknown.
 */
static uint64
wbs_needed(uint32 node, uint64 ns, const DexWbsPlaces *places)
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
			need = Max(need, places ? t->last_unplaced : t->last_entries);
			break;
		}
	}
	if (slot < 0)
		need = Max(need, wbss->overflow);
	SpinLockRelease(&wbss->mutex);
	if (slot >= 0 && places)
		need = Max(need, dex_wbs_places_need(slot, places));
	return need;
}

/*
 * Hot standby, before a scan of write-back index `index` (tree node/ns,
 * dirty-owner word `owner_word`) -- of the key places `places` if not NULL
 * (dex_wbs_places_of_keys / _bytes), of anything in it otherwise: wait
 * until the primary's write-backs covered what this snapshot can need. An
 * owner word naming another life than the one whose flushed position we
 * replayed is a primary that crashed
 * with dirty frames of this tree: its changes come back only when the
 * primary replays them at the index's first use there (dexwbredo.c), which
 * releases the word -- wait for that too. Honours cancel and
 * statement_timeout; ERROR after timeout_ms (dex.standby_wait_timeout).
 */
void
dex_wb_standby_wait(Relation index, DexTree *tree, uint64 owner_word, uint32 node, uint64 ns, int timeout_ms,
					uint64 *checked_life, void (*ask_flush) (uint64 lsn), const DexWbsPlaces *places)
{
	uint64		flushed = 0;
	uint64		gen = 0;
	uint64		need;
	uint64		word = 0;
	TimestampTz start = 0;
	DexError	err;

	if (wbss == NULL || !RecoveryInProgress())
		return;
	need = wbs_needed(node, ns, places);
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
		/*
		 * Woken by the replay of the next flushed position; the 10 ms bound
		 * keeps the timeout's check and the owner word's re-read going.
		 * (An ERROR above cancels the sleep with the transaction.)
		 */
		(void) ConditionVariableTimedSleep(&wbss->flushed_cv, 10L, PG_WAIT_EXTENSION);
	}
	if (start != 0)
		ConditionVariableCancelSleep();
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
dex_wbs_note_standbys(bool live)
{
}

void
dex_wb_standby_wait(Relation index, DexTree *tree, uint64 owner_word, uint32 node, uint64 ns, int timeout_ms,
					uint64 *checked_life, void (*ask_flush) (uint64 lsn), const DexWbsPlaces *places)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("write-back index \"%s\" cannot be read on a standby before PostgreSQL 15",
						RelationGetRelationName(index))));
}
#endif
