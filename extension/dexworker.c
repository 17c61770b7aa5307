/*
 * dexworker.c — the dex worker, a background worker: the cluster registry's
 * beat (dexcluster.c), on a hot standby the standby lease; on a primary also
 * the write-back flushes and the checkpoint fence (dexckptfence.c).
 */
#include "dex.h"

#include <errno.h>

#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/fd.h"
#include "utils/guc.h"
#include "utils/pidfile.h"
#include "utils/timestamp.h"

PGDLLEXPORT void dex_writeback_main(Datum arg);

/*
 * _PG_init, when preloaded: register the dex worker. It beats in the cluster
 * registry (dexcluster.c), on hot standbys too; on a primary it also does
 * the write-back flushes.
 */
void
dex_register_worker(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	worker.bgw_restart_time = 1;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "dex");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "dex_writeback_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "dex worker");
	snprintf(worker.bgw_type, BGW_MAXLEN, "dex worker");
	RegisterBackgroundWorker(&worker);
}

/* ---------------------------------------------------------------------
 * write-back worker (src/README.md "Write-back mode"): every
 * dex.writeback_interval it writes back all dirty frames and clears the
 * dirty-owner words of the flushed indexes; every checkpoint waits until it
 * wrote back what was dirty before the checkpoint began (dexckptfence.c); on
 * SIGTERM (fast or smart shutdown: the postmaster signals background workers
 * before the shutdown checkpoint; or pg_terminate_backend) it pauses
 * write-back and does a final flush before exiting (dex_worker_stop). An
 * immediate shutdown or a crash skips it: the first use of such an index
 * replays its changes from WAL (dexwbredo.c).
 * ---------------------------------------------------------------------
 */
static volatile sig_atomic_t dex_wb_stop = false;

/*
 * A hot standby's scan that waits for write-backs (the registry's
 * flush_request_lsn beyond what this worker flushed) gets a flush within
 * DEX_REQUESTED_FLUSH_MS: every query of a standby reading an index the
 * primary keeps writing waits for one, so a longer pause here is added to
 * each of them (100 ms gave 200 ms per standby select,
 * bench/standby_wb_reads.sh). The worker reads the request every
 * DEX_HURRY_MS while standbys are live (dex_cluster_poll_flush_request),
 * and while one is pending it beats at that pace (learning the standbys'
 * replay, which their hurried beats report) and flushes every
 * DEX_REQUESTED_FLUSH_MS, writing back what is covered as soon as it is.
 */

static void
dex_wb_sigterm(SIGNAL_ARGS)
{
	int			save_errno = errno;

	dex_wb_stop = true;
	SetLatch(MyLatch);
	errno = save_errno;
}

/* the L this worker's last successful round logged for hot standbys (what they wait for) */
static uint64 worker_flushed = 0;

/*
 * Before a write-back round: which dirty leaves must drain (src/README.md
 * "Write-back mode", W14). A leaf that keeps taking inserts is never covered
 * by the durable position (its rows' WAL must be flushed and replayed by
 * every standby first), so it would never be written back and hold the
 * flushed position back: checkpoints (the fence raises it to their REDO),
 * standbys' scans and crash redo would wait for it for ever. A leaf dirty
 * since before the previous interval's round, and one holding changes a
 * standby's scan asked for, stop taking in-place inserts until written.
 */
static void
dex_worker_drain(bool by_interval)
{
	static uint64 prev_round = 0;
	uint64		request = dex_cluster_flush_request();

	if (by_interval)
	{
		if (prev_round != 0)
			dex_cache_drain_before(prev_round);
		prev_round = (uint64) GetXLogInsertRecPtr();
	}
	if (request > worker_flushed)
		dex_cache_drain_before(request);
}

/*
 * One write-back round. *flushed (if given): the flushed position on record
 * afterwards (dex_wb_publish_flushed), 0 if the round failed.
 */
static uint64
dex_worker_flush(bool quiet, uint64 *flushed, bool *failed)
{
	DexError	err;
	uint64_t	written = 0;
	int			rc;
	XLogRecPtr	before = GetXLogInsertRecPtr();

	memset(&err, 0, sizeof(err));
	rc = dex_try_configure(&err);

	/*
	 * Dirty leaves carry entries whose heap WAL must be durable (and replayed
	 * by every live standby) first; the ones not covered yet stay dirty for
	 * the next round -- this worker must keep beating to learn the standbys'
	 * replay, so it never waits for it here.
	 */
	(void) dex_wal_flush_dirty_nowait();
	if (rc == DEX_OK)
		rc = dex_cache_flush(&written, &err);
	/* all that was logged before `before` and is not dirty now is remote */
	if (flushed)
		*flushed = 0;
	if (rc == DEX_OK)
	{
		uint64		l = dex_wb_publish_flushed(before, &worker_flushed);

		if (flushed)
			*flushed = l;
	}
	if (failed)
		*failed = rc != DEX_OK;
	if (rc != DEX_OK && !quiet)
		ereport(LOG,
				(errmsg("dex write-back worker: %s", err.message[0] ? err.message : "flush failed")));
	return (uint64) written;
}

/*
 * One beat in the cluster registry, every DEX_BEAT_MS: with the core
 * configured first (a failure is the beat's problem to report).
 */
static void
dex_worker_beat(void)
{
	DexError	err;

	memset(&err, 0, sizeof(err));
	if (dex_try_configure(&err) != DEX_OK)
		dex_cluster_beat(&err);
	else
		dex_cluster_beat(NULL);
}

/*
 * Should write-back pause for the hot standbys? off: while one holds a
 * live slot (as of the last beat); auto: while one does and a standby's
 * scan asked for a write-back within dex.standby_pause_hold (it reads what
 * this server changes: its scans would wait for write-backs); on: never.
 */
static bool
dex_worker_standby_pause_wanted(void)
{
	if (dex_write_back_with_standbys == DEX_WBWS_ON || dex_cluster_live_standbys() == 0)
		return false;
	if (dex_write_back_with_standbys == DEX_WBWS_OFF)
		return true;
	return dex_cluster_standby_asked_within(dex_standby_pause_hold_ms);
}

/*
 * Write-back pauses for the hot standbys (dex_worker_standby_pause_wanted),
 * for this reason only (a missing fence is the other). Every change is then
 * written through and logged as such, so the standbys' scans wait for no
 * write-back of it (W11); what was dirty before goes out with the next
 * write-back rounds, and the scans that meet it wait for those as before. A
 * standby that claims its slot between two beats (or, with auto, whose scan
 * asks between two polls) meets a primary still writing back: its scans wait
 * as they would with the setting on, never answer without a change.
 */
static void
dex_worker_standby_pause(void)
{
	bool		want;
	bool		paused;

	if (RecoveryInProgress() || dex_cache_size_kb <= 0)
		return;
	want = dex_worker_standby_pause_wanted();
	paused = (dex_cache_write_back_paused() & DEX_WB_PAUSE_STANDBY) != 0;
	if (want == paused)
		return;
	dex_cache_pause_write_back(DEX_WB_PAUSE_STANDBY, want ? 1 : 0);
	if (want && dex_write_back_with_standbys == DEX_WBWS_AUTO)
		ereport(LOG,
				(errmsg("dex: write-back indexes write through while a hot standby reads them"),
				 errdetail("dex.write_back_with_standbys is auto and a standby's scan asked for a write-back; "
						   "changes stay in the node cache again once dex.standby_pause_hold passes without another request.")));
	else if (want)
		ereport(LOG,
				(errmsg("dex: write-back indexes write through while a hot standby is attached"),
				 errdetail("dex.write_back_with_standbys is off: the standby's scans wait for no write-back.")));
	else
		ereport(LOG,
				(errmsg("dex: write-back indexes keep changes in the node cache again"),
				 errdetail("No hot standby is attached or reads them, or dex.write_back_with_standbys is on.")));
}

/*
 * Is the postmaster shutting down? It writes "stopping" into postmaster.pid
 * before it signals any process (pg_ctl reads the same line); a SIGTERM
 * without it is pg_terminate_backend(). Unreadable: no -- the safe side
 * (keeping the writer role only delays the next writer's claim by a lease).
 */
static bool
dex_postmaster_stopping(void)
{
	FILE	   *f = AllocateFile("postmaster.pid", "r");	/* (the data directory is the cwd) */
	char		line[MAXPGPATH];
	bool		stopping = false;

	if (!f)
		return false;
	for (int n = 1; fgets(line, sizeof(line), f) != NULL; n++)
		if (n == LOCK_FILE_LINE_PM_STATUS)
		{
			stopping = strncmp(line, PM_STATUS_STOPPING, strlen(PM_STATUS_STOPPING)) == 0;
			break;
		}
	FreeFile(f);
	return stopping;
}

/*
 * The worker stops. Write-back pauses and what is dirty is written back
 * while the checkpoint fence is still held (dex_ckpt_fence_stop, W18): until
 * the next worker holds the fence again, writes go through and nothing turns
 * dirty, so no checkpoint meanwhile misses a dirty leaf. Leaves a standby
 * holds back are logged whole (a shutdown saves them for the next start).
 *
 * At a shutdown, the writer role is given back with the final WAL position
 * (and the worker exits with 0). Stopped otherwise -- pg_terminate_backend(), an error -- the
 * worker keeps the role for the next one, which the postmaster starts a
 * second later (exit 1: a background worker that exits with 0 is never
 * restarted, and writes would fail when its lease ran out).
 */
static void
dex_worker_stop(bool shutdown, bool on_error)
{
	static bool stopped = false;

	if (stopped)
		return;
	stopped = true;
	if (!RecoveryInProgress() && dex_cache_size_kb > 0)
	{
		/* (a shutdown waits up to 10 s for standbys' replay, a restart 2 s) */
		bool		clean = dex_ckpt_fence_stop(dex_worker_flush, dex_worker_beat, shutdown ? 100 : 20);
		uint64		flushed;

		ereport(LOG, (errmsg("dex write-back worker: final flush done")));
		if (!clean && shutdown)
			dex_wb_spill_images();	/* into this life's redo files for the next start */
		else if (!clean)
			(void) dex_wb_cover_with_images((uint64) GetRedoRecPtr(), &flushed);
		if (shutdown)
			dex_wb_forget_life();
	}
	/*
	 * (A shutdown checkpoint comes after this worker exited.) On the way out
	 * of an error the fence's transaction is not committed: the connection's
	 * exit callback aborts it next, and the flag goes with the process.
	 */
	if (!on_error)
		dex_ckpt_fence_release();
	dex_cluster_set_worker_latch(NULL);
	if (shutdown)
		dex_cluster_release_writer();
}

/*
 * proc_exit() of the worker for any other reason than dex_worker_stop's: an
 * ERROR (promoted to FATAL in a background worker) or a FATAL. Runs before
 * the connection's own exit callback, so the fence's transaction and flag
 * are still there while dex_worker_stop writes back.
 */
static void
dex_worker_on_exit(int code, Datum arg)
{
	dex_worker_stop(dex_postmaster_stopping(), true);
}

void
dex_writeback_main(Datum arg)
{
	TimestampTz last_flush = GetCurrentTimestamp();
	TimestampTz last_beat = 0;

	pqsignal(SIGTERM, dex_wb_sigterm);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	/*
	 * No database: a backend id, for the virtual xids of the checkpoint fence
	 * (dexckptfence.c), as a physical walsender has one.
	 */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	/* (after the connection's own exit callback: this one runs before it, the fence still held) */
	before_shmem_exit(dex_worker_on_exit, (Datum) 0);

	dex_cluster_set_worker_latch(MyLatch);
	while (!dex_wb_stop)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 dex_cluster_hurry() ? DEX_HURRY_MS : DEX_BEAT_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (dex_wb_stop)
			break;
		/*
		 * Between beats (hurried, dex.h DEX_HURRY_MS): a standby beats at
		 * once (one of its scans waits for write-backs); a primary only if a
		 * standby's flush request is pending.
		 */
		if (!TimestampDifferenceExceeds(last_beat, GetCurrentTimestamp(), DEX_BEAT_MS) &&
			!RecoveryInProgress() && dex_cluster_poll_flush_request() <= worker_flushed)
			continue;
		/* the cluster registry: writer role / standby lease (dexcluster.c) */
		dex_worker_beat();
		last_beat = GetCurrentTimestamp();
		if (dex_worker_fail)
			ereport(ERROR,
					(errmsg("dex worker: failing after a beat, as dex.worker_fail asks (testing)")));
		dex_worker_standby_pause();
		dex_wbs_note_standbys(dex_cluster_live_standbys() > 0);	/* (flushes FLUSHED for them) */
		/* checkpoints wait for the write-back of what was dirty before them */
		dex_ckpt_fence_poll(dex_cache_size_kb > 0, dex_worker_flush, dex_worker_beat, &dex_wb_stop);
		if (!RecoveryInProgress() &&
			(TimestampDifferenceExceeds(last_flush, GetCurrentTimestamp(), dex_writeback_interval_ms) ||
			 (dex_cluster_flush_request() > worker_flushed &&
			  TimestampDifferenceExceeds(last_flush, GetCurrentTimestamp(), DEX_REQUESTED_FLUSH_MS))))
		{
			dex_worker_drain(TimestampDifferenceExceeds(last_flush, GetCurrentTimestamp(),
														dex_writeback_interval_ms));
			if (dex_cache_size_kb > 0)
				(void) dex_worker_flush(false, NULL, NULL);
			else				/* no cache: nothing is ever dirty (standbys' scans) */
			{
				worker_flushed = GetXLogInsertRecPtr();
				dex_wbs_log_flushed(0, worker_flushed);
			}
			last_flush = GetCurrentTimestamp();
		}
	}

	{
		bool		shutdown = dex_postmaster_stopping();

		dex_worker_stop(shutdown, false);
		proc_exit(shutdown ? 0 : 1);
	}
}
