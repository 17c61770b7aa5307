/*
 * dexckptfence.c — checkpoints wait for the write-back of dirty nodes
 * (src/README.md "Write-back mode", "Redo after a crash").
 *
 * A dirty cached leaf of a write-back index holds entry changes that remote
 * memory lacks; after a crash they come back from WAL (dexwbredo.c), but
 * crash recovery reads WAL only from the last checkpoint's REDO position R.
 * So every change logged before R must be in remote memory by the time that
 * checkpoint counts: this life's flushed position L (pg_dex_wb/<gen>.flushed)
 * must reach R. PostgreSQL has no checkpoint hook for extensions. Until this
 * file, a checkpoint that began within dex.writeback_interval of a crash left
 * such an index refusing queries until REINDEX.
 *
 * The fence uses the wait every checkpoint already makes for transactions in
 * their commit critical section: after it publishes R, CreateCheckPoint()
 * collects the virtual transactions whose PGPROC has DELAY_CHKPT_START set
 * and sleeps (10 ms at a time) until none of *those* still has it. The dex
 * worker on a primary keeps that flag set, inside a transaction that holds a
 * virtual xid and nothing else (no xid, no snapshot, no lock: it holds back
 * no horizon and blocks no DDL). At each of its beats (DEX_BEAT_MS) it reads
 * the REDO position; once it moved to a new R, it flushes until L >= R (a
 * standby that has not replayed a dirty leaf's rows holds that leaf back:
 * the worker keeps beating to learn its replay), then ends that transaction
 * -- the waiting checkpoint goes on -- and starts the next one, flag set, for
 * the next checkpoint.
 *
 * When it cannot wait any longer -- a write-back round failed (remote memory
 * unreachable), or dex.checkpoint_writeback_timeout passed (a standby that
 * does not replay) -- the worker logs the dirty leaves whole instead
 * (dexwbimage.c), which covers R as well, and lets the checkpoint go on.
 *
 * What is left: a checkpoint that begins within the microseconds between
 * the end of one fence transaction and the flag on the next one does not
 * wait; the worker sees its R at once and flushes, so only a crash in the
 * moments after such a checkpoint completes can still make the index refuse
 * (never answer wrongly). The same holds while the worker is not running
 * (it restarts a second after an error) and if logging the images failed
 * (a LOG message says so).
 */
#include "dex.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/backend_status.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

int			dex_checkpoint_writeback_timeout_ms = 60000;

static bool fence_held = false;
/* the newest REDO position the flushed position is known to cover */
static XLogRecPtr covered_redo = InvalidXLogRecPtr;

static void
fence_set_flag(bool on)
{
#if PG_VERSION_NUM >= 150000
	if (on)
		MyProc->delayChkptFlags |= DELAY_CHKPT_START;
	else
		MyProc->delayChkptFlags &= ~DELAY_CHKPT_START;
#else
	MyProc->delayChkpt = on;
#endif
}

/* A transaction for its virtual xid (checkpoints wait for vxids), flag set. */
static void
fence_hold(void)
{
	MemoryContext old = CurrentMemoryContext;

	StartTransactionCommand();
	/* the worker's allocations stay where they were, not in the transaction's context */
	MemoryContextSwitchTo(old);
	/* not a long-running transaction to pg_stat_activity's xact_start and the alerts built on it */
	pgstat_report_xact_timestamp(0);
	fence_set_flag(true);
	fence_held = true;
}

void
dex_ckpt_fence_release(void)
{
	MemoryContext old = CurrentMemoryContext;

	if (!fence_held)
		return;
	fence_set_flag(false);
	CommitTransactionCommand();
	MemoryContextSwitchTo(old);
	fence_held = false;
}

/*
 * Flush until the flushed position covers `redo`, or until the timeout.
 * True if covered.
 */
static bool
fence_cover(XLogRecPtr redo, DexFlushRound flush, void (*beat) (void), volatile sig_atomic_t *stop)
{
	TimestampTz start = GetCurrentTimestamp();

	/* leaves dirty since before it stop taking in-place inserts until written (W14) */
	dex_cache_drain_before((uint64) redo);
	for (;;)
	{
		uint64		flushed = 0;
		bool		failed = false;

		(void) flush(true, &flushed, &failed);
		if (flushed >= redo)
			return true;
		/* (a failed round: remote memory unreachable -- waiting would only delay the checkpoint) */
		if (failed || *stop ||
			TimestampDifferenceExceeds(start, GetCurrentTimestamp(), dex_checkpoint_writeback_timeout_ms))
		{
			/* the dirty leaves go into WAL instead (dexwbimage.c) */
			if (dex_wb_cover_with_images(redo, &flushed))
				return true;
			ereport(LOG,
					(errmsg("dex: a checkpoint (REDO %X/%X) goes on before the dirty nodes of write-back indexes "
							"were written back (flushed to %X/%X)",
							LSN_FORMAT_ARGS(redo), LSN_FORMAT_ARGS((XLogRecPtr) flushed)),
					 errdetail("A crash before their next write-back makes those indexes refuse queries until REINDEX."),
					 errhint("A hot standby that does not replay holds dirty nodes back; see dex.checkpoint_writeback_timeout.")));
			return false;
		}
		/* learn how far the standbys replayed (they hold dirty leaves back) */
		beat();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * At every beat of the dex worker. Holds the fence on a primary with a node
 * cache (while dex.checkpoint_writeback_timeout > 0); a new REDO position
 * since the last one covered is flushed for, and the checkpoint let go.
 */
void
dex_ckpt_fence_poll(bool has_cache, DexFlushRound flush, void (*beat) (void), volatile sig_atomic_t *stop)
{
	XLogRecPtr	redo;

	if (!has_cache || dex_checkpoint_writeback_timeout_ms <= 0 || RecoveryInProgress())
	{
		dex_ckpt_fence_release();
		covered_redo = InvalidXLogRecPtr;	/* (after a promotion: cover the first R again) */
		return;
	}
	if (!fence_held)
		fence_hold();
	/* (a checkpoint that began before the hold does not wait; covering it is still right) */
	redo = GetRedoRecPtr();
	if (redo <= covered_redo)
		return;
	/* (given up on, it is not flushed for again: the LOG said so) */
	(void) fence_cover(redo, flush, beat, stop);
	covered_redo = redo;
	/* let the waiting checkpoint go on, and fence the next one */
	dex_ckpt_fence_release();
	fence_hold();
}
