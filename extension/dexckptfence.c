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
 * The fence uses the waits every checkpoint already makes for transactions
 * in critical sections. CreateCheckPoint() publishes R, then collects the
 * virtual transactions whose PGPROC has DELAY_CHKPT_START set and sleeps
 * (10 ms at a time) until none of *those* still has it; it writes the
 * buffers (CheckPointGuts), then does the same for DELAY_CHKPT_COMPLETE, and
 * only then logs the checkpoint. The dex worker on a primary holds one of
 * the two flags at every moment, inside a transaction that holds a virtual
 * xid and nothing else (no xid, no snapshot, no lock: it holds back no
 * horizon and blocks no DDL). At each of its beats (DEX_BEAT_MS) it reads
 * the REDO position and flushes until L covers it (a standby that has not
 * replayed a dirty leaf's rows holds that leaf back: the worker keeps
 * beating to learn its replay). Every FENCE_PHASE_MS or so it moves to the
 * other flag, always in this order: set the other flag; read R and cover it
 * (again, until a read finds it covered); clear the flag it held. A
 * checkpoint waiting on the cleared flag goes on.
 *
 * Why no checkpoint can complete with L < R. A flag is cleared only after a
 * read of R that came after the other flag was set. Take a checkpoint with R
 * published at p, collecting START holders at s > p and COMPLETE holders at
 * c > s. (1) START is clear at s: then COMPLETE is held at s (one flag always
 * is), and it is cleared only by a switch that set START after s, read R
 * after that and covered it. The checkpoint either collects COMPLETE and
 * waits for that clear, or comes to c after it. (2) START is held at s and
 * the checkpoint waits until it is cleared: the switch that clears it read
 * R after setting COMPLETE. If that read came after p, R is covered;
 * otherwise COMPLETE was already set at s and is cleared only by a later
 * switch, as in (1). So a checkpoint's R is covered before it logs the
 * checkpoint. (One transaction ending and the next one starting, as until
 * 2026-11-30, left a gap of some microseconds without a flag: a checkpoint
 * that collected the flags then did not wait at all.)
 *
 * When it cannot wait any longer -- a write-back round failed (remote memory
 * unreachable), or dex.checkpoint_writeback_timeout passed (a standby that
 * does not replay) -- the worker logs the dirty leaves whole instead
 * (dexwbimage.c), which covers R as well, and lets the checkpoint go on.
 *
 * While no fence is up -- before the worker's first beat, and from its stop
 * until the next worker's first beat (it restarts a second after an error or
 * a pg_terminate_backend) -- write-back is paused (src/README.md W18): no
 * frame turns dirty, writes go through, so a checkpoint then has nothing to
 * wait for. The stopping worker pauses it with the fence still held and
 * writes back what is dirty (dex_ckpt_fence_stop); the next one resumes it
 * once it holds the fence and covered the REDO position.
 *
 * What is left: leaves a hot standby still holds back when the worker stops
 * are logged whole (they cover checkpoints begun until then), and a
 * checkpoint begun and ended after that, before the next worker's first
 * beat, does not wait for them; nor does one after logging the images
 * failed (a LOG message says so). A crash soon after it makes the index
 * refuse queries (never answer wrongly). PostgreSQL before 14.5 has one flag
 * only: there the fence changes transactions, with the old gap.
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

#if PG_VERSION_NUM >= 150000
#define DEX_FENCE_START		DELAY_CHKPT_START
#define DEX_FENCE_COMPLETE	DELAY_CHKPT_COMPLETE
#else
#define DEX_FENCE_START		1	/* PGPROC.delayChkpt */
#define DEX_FENCE_COMPLETE	2	/* PGPROC.delayChkptEnd (14.5 and later) */
#endif

int			dex_checkpoint_writeback_timeout_ms = 60000;
int			dex_fence_switch_pause_ms = 0;

static bool fence_held = false;
/* the flag the fence holds now (DELAY_CHKPT_START or _COMPLETE), and since when */
static int	fence_flag = 0;
static TimestampTz fence_flag_since = 0;
/* the newest REDO position the flushed position is known to cover */
static XLogRecPtr covered_redo = InvalidXLogRecPtr;

/*
 * A flag stays held at least this long before the fence moves to the other
 * one: the checkpointer looks every 10 ms whether the flag it waits on is
 * still set, and must see it cleared (or it waits for the next switch).
 */
#define FENCE_PHASE_MS	(3 * DEX_BEAT_MS / 2)

static void
fence_set_flag(int flag, bool on)
{
#if PG_VERSION_NUM >= 150000
	if (on)
		MyProc->delayChkptFlags |= flag;
	else
		MyProc->delayChkptFlags &= ~flag;
#elif PG_VERSION_NUM >= 140005
	if (flag == DEX_FENCE_START)
		MyProc->delayChkpt = on;
	else
		MyProc->delayChkptEnd = on;
#else
	/* (no second flag before 14.5: the fence holds the first one only) */
	if (flag == DEX_FENCE_START)
		MyProc->delayChkpt = on;
#endif
}

/* A transaction for its virtual xid (checkpoints wait for vxids), one flag set. */
static void
fence_hold(void)
{
	MemoryContext old = CurrentMemoryContext;

	StartTransactionCommand();
	/* the worker's allocations stay where they were, not in the transaction's context */
	MemoryContextSwitchTo(old);
	/* not a long-running transaction to pg_stat_activity's xact_start and the alerts built on it */
	pgstat_report_xact_timestamp(0);
	fence_set_flag(DEX_FENCE_START, true);
	fence_flag = DEX_FENCE_START;
	fence_flag_since = GetCurrentTimestamp();
	fence_held = true;
}

/*
 * The worker stops (SIGTERM, or an error on its way out), and with it the
 * fence: write-back pauses first (W18: no frame turns dirty or takes a
 * change in place from then on, writes go through), then up to `rounds`
 * write-back rounds 100 ms apart write back what is dirty, beating in
 * between (a hot standby that has not replayed a leaf's rows holds it back).
 * The fence is still held meanwhile: a checkpoint waits for this. True if
 * nothing is dirty any more. The caller releases the fence.
 */
bool
dex_ckpt_fence_stop(DexFlushRound flush, void (*beat) (void), int rounds)
{
	dex_cache_pause_write_back(DEX_WB_PAUSE_NO_FENCE, 1);
	for (int round = 0; round < rounds; round++)
	{
		bool		failed = false;

		(void) flush(round > 0, NULL, &failed);
		if (dex_cache_dirty_since_min() == PG_UINT64_MAX)
			return true;
		if (failed)
			return false;		/* (remote memory unreachable: more rounds would not help) */
		pg_usleep(100 * 1000L);
		beat();
	}
	return false;
}

void
dex_ckpt_fence_release(void)
{
	MemoryContext old = CurrentMemoryContext;

	if (!fence_held)
		return;
	fence_set_flag(DEX_FENCE_START, false);
	fence_set_flag(DEX_FENCE_COMPLETE, false);
	fence_flag = 0;
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
 * Flush for every REDO position newer than the last one covered, until a
 * read of the position finds it covered (or given up on: fence_cover logged
 * that). The read comes after whatever flag change precedes the call.
 */
static void
fence_cover_current(DexFlushRound flush, void (*beat) (void), volatile sig_atomic_t *stop)
{
	for (;;)
	{
		XLogRecPtr	redo = GetRedoRecPtr();

		if (redo <= covered_redo)
			return;
		(void) fence_cover(redo, flush, beat, stop);
		covered_redo = redo;
	}
}

/*
 * At every beat of the dex worker. Holds the fence on a primary with a node
 * cache (while dex.checkpoint_writeback_timeout > 0): a new REDO position is
 * flushed for, and the fence moves from the flag it holds to the other one
 * (file comment: set the other, read and cover, clear the held one), which
 * lets a checkpoint waiting on the held flag go on.
 */
void
dex_ckpt_fence_poll(bool has_cache, DexFlushRound flush, void (*beat) (void), volatile sig_atomic_t *stop)
{
	int			other;

	if (!has_cache || dex_checkpoint_writeback_timeout_ms <= 0 || RecoveryInProgress())
	{
		dex_ckpt_fence_release();
		covered_redo = InvalidXLogRecPtr;	/* (after a promotion: cover the first R again) */
		/* checkpoints that do not wait, asked for: write-back without the fence */
		if (has_cache && dex_checkpoint_writeback_timeout_ms <= 0 && !RecoveryInProgress())
			dex_cache_pause_write_back(DEX_WB_PAUSE_NO_FENCE, 0);
		return;
	}
	if (!fence_held)
		fence_hold();
	/* (a checkpoint that began before the hold does not wait; covering it is still right) */
	pg_memory_barrier();
	fence_cover_current(flush, beat, stop);
	/*
	 * Write-back starts (or goes on) only now (W18): from here on every
	 * checkpoint waits for the fence. One that began before the hold did not,
	 * but nothing turned dirty while write-back was paused.
	 */
	if (dex_cache_write_back_paused() & DEX_WB_PAUSE_NO_FENCE)
		dex_cache_pause_write_back(DEX_WB_PAUSE_NO_FENCE, 0);
	if (!TimestampDifferenceExceeds(fence_flag_since, GetCurrentTimestamp(), FENCE_PHASE_MS))
		return;
	other = fence_flag == DEX_FENCE_START ? DEX_FENCE_COMPLETE : DEX_FENCE_START;
#if PG_VERSION_NUM < 140005
	/* one flag only: a new transaction for a new vxid, with the old one's gap */
	dex_ckpt_fence_release();
	fence_hold();
	(void) other;
#else
	fence_set_flag(other, true);
	/* the flag is visible before the read of the REDO position (file comment) */
	pg_memory_barrier();
	fence_cover_current(flush, beat, stop);
	if (dex_fence_switch_pause_ms > 0)
		pg_usleep(dex_fence_switch_pause_ms * 1000L);
	fence_set_flag(fence_flag, false);
	fence_flag = other;
	fence_flag_since = GetCurrentTimestamp();
#endif
}
