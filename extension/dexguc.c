/*
 * dexguc.c — the GUCs (dex.*) and the dex worker (a background worker: the
 * cluster registry's beat, on a primary also the write-back flushes).
 *
 * The variables of the settings that configure the core (dex.memnodes,
 * dex.token_file, the timeouts) live in dexsession.c, which applies them;
 * dex.standby_wait_timeout's in dexcluster.c. The node-cache policy and
 * dex.offload are per backend and applied to the core by their assign hooks.
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
#include "utils/guc.h"
#include "utils/timestamp.h"
#include "access/xlog.h"

PGDLLEXPORT void dex_writeback_main(Datum arg);

static int	dex_cache_size_kb = 64 * 1024;
static double dex_leaf_admission = 0.1;
static bool dex_cache_leaves = true;
static int	dex_writeback_interval_ms = 1000;
int			dex_kill_min_entries = 4;
static int	dex_offload = DEX_OFFLOAD_AUTO;
static char *dex_crash_at = NULL;

static const struct config_enum_entry dex_offload_options[] = {
	{"auto", DEX_OFFLOAD_AUTO, false},
	{"on", DEX_OFFLOAD_ON, false},
	{"off", DEX_OFFLOAD_OFF, false},
	{NULL, 0, false}
};


/* The configuration of the core changed: applied at its next use (dexsession.c). */
static void
dex_guc_assign_string(const char *newval, void *extra)
{
	dex_config_changed();
}

static void
dex_guc_assign_int(int newval, void *extra)
{
	dex_config_changed();
}

/* Admission policy: per backend, applied to this process's cache handle. */
static void
dex_guc_assign_leaf_admission(double newval, void *extra)
{
	dex_cache_set_policy(newval, dex_cache_leaves ? 1 : 0);
}

static void
dex_guc_assign_cache_leaves(bool newval, void *extra)
{
	dex_cache_set_policy(dex_leaf_admission, newval ? 1 : 0);
}

/* Offloading mode: per backend (src/README.md "Offloading"). */
static void
dex_guc_assign_offload(int newval, void *extra)
{
	dex_set_offload_mode(newval);
}

/*
 * Testing only: the backend SIGKILLs itself at the named point of the tree
 * (dex_capi.h dex_set_crash_point), so that a test can crash the server at
 * the worst moment of a split, a migration or an offloaded write rather than
 * hoping a timed kill lands there (scripts/tests/t_crash_points.sh).
 */
static void
dex_guc_assign_crash_at(const char *newval, void *extra)
{
	dex_set_crash_point(newval);
}

/* dex.cache_size in bytes (0: no node cache). */
uint64
dex_cache_bytes(void)
{
	return (uint64) dex_cache_size_kb * 1024;
}

/* _PG_init: define every dex.* setting. */
void
dex_define_gucs(void)
{
	DefineCustomStringVariable("dex.memnodes",
							   "Memory nodes holding dex indexes (comma-separated tcp://host:port).",
							   NULL,
							   &dex_memnodes_guc,
							   "tcp://127.0.0.1:7400",
							   PGC_SUSET,
							   0,
							   NULL, dex_guc_assign_string, NULL);
	/*
	 * PostgreSQL refuses to create a PGC_POSTMASTER variable after startup, so
	 * when dex is loaded on demand (not preloaded) the cache size is not
	 * defined at all; every entry point then raises the "must be loaded via
	 * shared_preload_libraries" error instead of failing here.
	 */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("dex.cache_size",
								"Size of the shared dex node cache.",
								NULL,
								&dex_cache_size_kb,
								64 * 1024, 0, INT_MAX / 2,
								PGC_POSTMASTER,
								GUC_UNIT_KB,
								NULL, NULL, NULL);
	DefineCustomRealVariable("dex.leaf_admission",
							 "Probability that a leaf read from remote memory is admitted to the node cache.",
							 "Inner nodes are always admitted. 1 = every leaf, 0 = none.",
							 &dex_leaf_admission,
							 0.1, 0.0, 1.0,
							 PGC_SUSET,
							 0,
							 NULL, dex_guc_assign_leaf_admission, NULL);
	DefineCustomBoolVariable("dex.cache_leaves",
							 "Whether leaves are cached at all (off: inner nodes only, leaves always read remotely).",
							 NULL,
							 &dex_cache_leaves,
							 true,
							 PGC_SUSET,
							 0,
							 NULL, dex_guc_assign_cache_leaves, NULL);
	DefineCustomIntVariable("dex.insert_batch",
							"Index entries a backend holds back and writes to remote memory together.",
							"Entries of non-unique indexes are written at the latest at the end of the statement, before the backend scans the index, and before commit. 1 = write each entry at once.",
							&dex_insert_batch,
							256, 1, 4096,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("dex.bottom_up",
							 "Whether an UPDATE that did not change an index's key removes dead versions from a full leaf before splitting it.",
							 "Such entries are then written at once rather than held back by dex.insert_batch.",
							 &dex_bottom_up,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("dex.kill_min_entries",
							"Fewest dead entries an index scan must have found in one leaf before it removes them.",
							"A removal costs a remote round trip (the cluster registry's check; a write-back index's a WAL record), a heap fetch of a dead entry none; "
							"fewer stay until a later scan finds enough, a bottom-up pass or VACUUM. 1 removes every one found.",
							&dex_kill_min_entries,
							4, 1, 10000,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("dex.narrow_images",
							 "Whether a new byte-string index stores bool, int2, int4, oid and date key columns in their type's width.",
							 "Off builds them with 8-byte images as dex did before; for testing that such indexes keep working.",
							 &dex_narrow_images,
							 true,
							 PGC_USERSET,
							 GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);
	DefineCustomEnumVariable("dex.offload",
							 "Whether an index operation that misses the node cache at or below the placement level may be finished by the memory node's CPU.",
							 "auto (default): when the DEX cost model says it is cheaper; on: always; off: never.",
							 &dex_offload,
							 DEX_OFFLOAD_AUTO,
							 dex_offload_options,
							 PGC_USERSET,
							 0,
							 NULL, dex_guc_assign_offload, NULL);
	DefineCustomStringVariable("dex.crash_at",
							   "Testing only: the backend kills itself (SIGKILL, a crash restart) at this named point of the index code.",
							   "For crash tests: e.g. split:published, migrate:published, dirty-split:published, offload-write:answered. Empty: never.",
							   &dex_crash_at,
							   "",
							   PGC_SUSET,
							   GUC_NOT_IN_SAMPLE,
							   NULL, dex_guc_assign_crash_at, NULL);
	DefineCustomStringVariable("dex.token_file",
							   "File containing the token presented to memory nodes.",
							   NULL,
							   &dex_token_file,
							   "",
							   PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY,
							   NULL, dex_guc_assign_string, NULL);
	DefineCustomIntVariable("dex.connect_timeout",
							"Timeout for connecting to a memory node.",
							NULL,
							&dex_connect_timeout_ms,
							5000, 1, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, dex_guc_assign_int, NULL);
	DefineCustomIntVariable("dex.op_timeout",
							"Timeout for a single remote memory operation.",
							NULL,
							&dex_op_timeout_ms,
							30000, 1, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, dex_guc_assign_int, NULL);

	DefineCustomIntVariable("dex.standby_wait_timeout",
							"How far a hot standby's replay may lag before the primary detaches it "
							"(then it stops reading dex indexes until it keeps up again, and the "
							"primary's inserts, write-backs and VACUUM no longer wait for it); how "
							"long a standby's scan waits for the primary's write-back.",
							NULL,
							&dex_standby_wait_timeout_ms,
							10000, 100, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dex.checkpoint_writeback_timeout",
							"How long a checkpoint waits for the dex worker to write back the dirty "
							"nodes of write-back indexes changed before it began.",
							"Past it (or at 0: checkpoints do not wait) a crash soon after the checkpoint "
							"makes those indexes refuse queries until REINDEX.",
							&dex_checkpoint_writeback_timeout_ms,
							60000, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dex.fence_switch_pause",
							"Testing only: the dex worker sleeps this long at the checkpoint fence's most exposed moment.",
							"For tests that checkpoints beginning then still wait for the write-back (dexckptfence.c). 0: never.",
							&dex_fence_switch_pause_ms,
							0, 0, 60000,
							PGC_SIGHUP,
							GUC_UNIT_MS | GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dex.writeback_interval",
							"Interval at which the dex write-back worker writes dirty cached "
							"nodes of write-back indexes to remote memory (the checkpoint-like "
							"bound on what a crash can lose).",
							NULL,
							&dex_writeback_interval_ms,
							1000, 10, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	/*
	 * Last: reserving the prefix removes every dex.* placeholder not defined
	 * yet, and with it the value postgresql.conf gave it (a variable defined
	 * after this starts at its default until the next reload).
	 */
#if PG_VERSION_NUM >= 150000
	MarkGUCPrefixReserved("dex");
#else
	EmitWarningsOnPlaceholders("dex");
#endif
}

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
 * before the shutdown checkpoint) it does a final flush before exiting. An
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

	/*
	 * Shutdown: backends get SIGTERM at the same time and may still finish a
	 * change; flush until a round finds nothing (bounded). Then give the
	 * writer role back, with the final WAL position.
	 */
	dex_ckpt_fence_release();	/* (the shutdown checkpoint comes after this worker exited) */
	if (!RecoveryInProgress() && dex_cache_size_kb > 0)
	{
		for (int round = 0; round < 100; round++)
		{
			/* (frames whose rows a standby has not replayed yet stay dirty) */
			if (dex_worker_flush(round > 0, NULL, NULL) == 0 && round > 0 && dex_cache_dirty_lsn() == 0)
				break;
			pg_usleep(100 * 1000L);
			dex_worker_beat();	/* learn how far the standbys replayed */
		}
		ereport(LOG, (errmsg("dex write-back worker: final flush done")));
		/* held back by a standby: into this life's redo files for the next start */
		if (dex_cache_dirty_since_min() != PG_UINT64_MAX)
			dex_wb_spill_images();
		dex_wb_forget_life();
	}
	dex_cluster_set_worker_latch(NULL);
	dex_cluster_release_writer();
	proc_exit(0);
}
