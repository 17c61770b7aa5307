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
 *    any more is a stray of a row lost in the crash and is deleted
 *    (dexjournalrecover.c, for fixed keys and byte-string entries alike).
 */
#include "dex.h"

#include "access/xlog.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/rel.h"

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
 * Dirty leaves of write-back indexes are written back only once the heap WAL
 * of their entries is durable: flush WAL as far as the dirtiest one needs
 * (nothing if no frame is dirty).
 */
void
dex_wal_flush_dirty(void)
{
	uint64		need = dex_wal_flush_dirty_nowait();

	/* and published as the trees' high-water mark (standbys replayed it) */
	if (need != 0)
		dex_cluster_wait_retention(need, NULL);
}

/*
 * The dex worker's variant: WAL flushed, no wait for the standbys -- the
 * worker itself reads their replay positions at its beats, so it must not
 * wait for them to advance (frames not covered yet stay dirty for its next
 * round). Returns the position the dirtiest frame needs (0: none).
 */
uint64
dex_wal_flush_dirty_nowait(void)
{
	uint64		need = dex_cache_dirty_lsn();

	if (need == 0 || RecoveryInProgress())
		return 0;
	if (need > dex_wal_durable())
		XLogFlush((XLogRecPtr) need);
	return need;
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
 * recovery (the heap check itself: dexjournalrecover.c)
 * ---------------------------------------------------------------------
 */

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
	if (dex_index_is_bytes(index))
		dex_journal_recover_bytes(index, tree, mine);
	else
		dex_journal_recover_fixed(index, tree, mine);
	UnlockPage(index, DEX_JOURNAL_LOCK_BLKNO, ExclusiveLock);
	*verified = mine;
}
