/*
 * dexguc.c — _PG_init, GUCs, shared memory for the core's counters and the
 * node cache, the interrupt hook, and lazy (re)configuration of the core.
 */
#include "dex.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/shmem.h"
#include "storage/lwlock.h"
#include "utils/guc.h"
#include "utils/timestamp.h"
#include "access/xlog.h"

PG_MODULE_MAGIC;

void		_PG_init(void);
PGDLLEXPORT void dex_writeback_main(Datum arg);

bool		dex_preloaded = false;
bool		dex_interrupts_suppressed = false;

char	   *dex_memnodes_guc = NULL;
static char *dex_token_file = NULL;
static int	dex_cache_size_kb = 64 * 1024;
static int	dex_connect_timeout_ms = 5000;
static int	dex_op_timeout_ms = 30000;
static double dex_leaf_admission = 0.1;
static bool dex_cache_leaves = true;
static int	dex_writeback_interval_ms = 1000;
static int	dex_offload = DEX_OFFLOAD_AUTO;

static const struct config_enum_entry dex_offload_options[] = {
	{"auto", DEX_OFFLOAD_AUTO, false},
	{"on", DEX_OFFLOAD_ON, false},
	{"off", DEX_OFFLOAD_OFF, false},
	{NULL, 0, false}
};

static bool dex_config_dirty = true;

#define DEX_WORKER_TICK_MS 200	/* the dex worker's beat (dexcluster.c DEX_BEAT_MS) */

/*
 * This compute server's life: a random id chosen whenever shared memory is
 * initialized (postmaster start, crash restart). An index's insert journal
 * records the life that last recovered it (dexjournal.c).
 */
typedef struct DexLifeShared
{
	uint64		life;
} DexLifeShared;
static DexLifeShared *dex_life_shared = NULL;

uint64
dex_life(void)
{
	dex_require_preload();
	if (dex_life_shared == NULL || dex_life_shared->life == 0)
		elog(ERROR, "dex: shared memory is not set up");
	return dex_life_shared->life;
}

#if PG_VERSION_NUM >= 150000
static shmem_request_hook_type prev_shmem_request_hook = NULL;
#endif
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
dex_guc_assign_string(const char *newval, void *extra)
{
	dex_config_dirty = true;
}

static void
dex_guc_assign_int(int newval, void *extra)
{
	dex_config_dirty = true;
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

static uint64
dex_cache_bytes(void)
{
	return (uint64) dex_cache_size_kb * 1024;
}

/*
 * Called by the core while it waits on the network. Must not ereport or
 * longjmp: it only looks at the flags.
 */
static int
dex_interrupt_check(void)
{
	if (dex_interrupts_suppressed)
		return 0;
	return (InterruptPending && (QueryCancelPending || ProcDiePending)) ? 1 : 0;
}

void
dex_require_preload(void)
{
	if (!dex_preloaded)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dex must be loaded via shared_preload_libraries"),
				 errhint("Add dex to shared_preload_libraries in postgresql.conf and restart the server.")));
}

/*
 * Read the token file with plain libc (no ereport), so this can also run in
 * transaction callbacks. Returns malloc'ed string or NULL with err set.
 */
static char *
dex_read_token(DexError *err)
{
	FILE	   *f;
	char	   *buf;
	size_t		n;
	size_t		cap = 4096;

	if (dex_token_file == NULL || dex_token_file[0] == '\0')
	{
		buf = malloc(1);
		if (buf)
			buf[0] = '\0';
		return buf;
	}
	f = fopen(dex_token_file, "r");
	if (f == NULL)
	{
		err->code = DEX_ERR_INVALID;
		snprintf(err->message, sizeof(err->message),
				 "could not open dex.token_file \"%s\": %s",
				 dex_token_file, strerror(errno));
		snprintf(err->hint, sizeof(err->hint),
				 "Check the setting of dex.token_file.");
		return NULL;
	}
	buf = malloc(cap + 1);
	if (buf == NULL)
	{
		fclose(f);
		err->code = DEX_ERR_INVALID;
		snprintf(err->message, sizeof(err->message), "out of memory");
		err->hint[0] = '\0';
		return NULL;
	}
	n = fread(buf, 1, cap, f);
	fclose(f);
	buf[n] = '\0';
	/* strip trailing whitespace / newline */
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' ||
					 buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		buf[--n] = '\0';
	return buf;
}

static void dex_before_shmem_exit(int code, Datum arg);
static void dex_on_shmem_exit(int code, Datum arg);
static bool exit_callback_registered = false;

/* Configure the core if the GUCs changed; never ereports. */
int
dex_try_configure(DexError *err)
{
	char	   *token;
	int			rc;

	if (!dex_config_dirty)
		return DEX_OK;

	token = dex_read_token(err);
	if (token == NULL)
		return err->code;

	if (!exit_callback_registered)
	{
		before_shmem_exit(dex_before_shmem_exit, (Datum) 0);
		/* runs after the before_shmem_exit callbacks closed our trees */
		on_shmem_exit(dex_on_shmem_exit, (Datum) 0);
		exit_callback_registered = true;
	}

	/* node numbering may change: cached tree handles are invalid */
	dex_forget_all_trees();

	rc = dex_configure(dex_memnodes_guc ? dex_memnodes_guc : "",
					   token, dex_connect_timeout_ms, dex_op_timeout_ms, err);
	memset(token, 0, strlen(token));
	free(token);
	if (rc == DEX_OK)
		dex_config_dirty = false;
	return rc;
}

void
dex_ensure_configured(void)
{
	DexError	err;
	int			rc;

	dex_require_preload();
	memset(&err, 0, sizeof(err));
	rc = dex_try_configure(&err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, NULL);
}

static void
dex_shmem_request(void)
{
#if PG_VERSION_NUM >= 150000
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
#endif
	RequestAddinShmemSpace(MAXALIGN(dex_stats_shmem_size()));
	RequestAddinShmemSpace(MAXALIGN(sizeof(DexLifeShared)));
	RequestAddinShmemSpace(dex_cluster_shmem_size());
	/* dex.cache_size = 0: no cache, trees run uncached */
	if (dex_cache_bytes() > 0)
		RequestAddinShmemSpace(MAXALIGN(dex_cache_shmem_size(dex_cache_bytes())));
}

static void
dex_shmem_startup(void)
{
	bool		found;
	void	   *mem;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	mem = ShmemInitStruct("dex stats", MAXALIGN(dex_stats_shmem_size()), &found);
	dex_stats_attach(mem, found ? 0 : 1);

	dex_life_shared = ShmemInitStruct("dex life", MAXALIGN(sizeof(DexLifeShared)), &found);
	if (!found)
	{
		uint64		life = 0;

		while (life == 0)
			if (!pg_strong_random(&life, sizeof(life)))
				elog(FATAL, "dex: could not generate a random life id");
		dex_life_shared->life = life;
	}
	mem = ShmemInitStruct("dex cluster", dex_cluster_shmem_size(), &found);
	dex_cluster_shmem_init(mem, found, dex_life_shared->life);

	/*
	 * The node cache, in the main segment so every backend (forked from the
	 * postmaster) sees it at the same address. Built when the segment is
	 * created, i.e. also after a crash re-initialized shared memory: the cache
	 * then starts empty (remote memory is complete: writes are write-through).
	 */
	if (dex_cache_bytes() > 0)
	{
		size_t		size = MAXALIGN(dex_cache_shmem_size(dex_cache_bytes()));
		DexError	err;

		mem = ShmemInitStruct("dex node cache", size, &found);
		memset(&err, 0, sizeof(err));
		if (dex_cache_attach(mem, dex_cache_bytes(), found ? 0 : 1, &err) != DEX_OK)
		{
			LWLockRelease(AddinShmemInitLock);
			ereport(FATAL,
					(errmsg("could not set up the dex node cache: %s", err.message)));
		}
	}
	else
		dex_cache_attach(NULL, 0, 0, NULL);
	LWLockRelease(AddinShmemInitLock);
}

static void
dex_before_shmem_exit(int code, Datum arg)
{
	dex_forget_all_trees();
	dex_disconnect_all();
}

static void
dex_on_shmem_exit(int code, Datum arg)
{
	dex_cache_detach();			/* our free frames go back to the shared stack */
}

void
_PG_init(void)
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
	DefineCustomEnumVariable("dex.offload",
							 "Whether an index operation that misses the node cache at or below the placement level may be finished by the memory node's CPU.",
							 "auto (default): when the DEX cost model says it is cheaper; on: always; off: never.",
							 &dex_offload,
							 DEX_OFFLOAD_AUTO,
							 dex_offload_options,
							 PGC_USERSET,
							 0,
							 NULL, dex_guc_assign_offload, NULL);
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

#if PG_VERSION_NUM >= 150000
	MarkGUCPrefixReserved("dex");
#else
	EmitWarningsOnPlaceholders("dex");
#endif

	DefineCustomIntVariable("dex.standby_wait_timeout",
							"How long a primary waits for its hot standbys: VACUUM for their replay "
							"before removing index entries, an insert for a journal slot that "
							"standbys still need.",
							NULL,
							&dex_standby_wait_timeout_ms,
							60000, 100, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
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

	dex_init_reloptions();

	if (!process_shared_preload_libraries_in_progress)
		return;

	dex_preloaded = true;

	/*
	 * The dex worker: beats in the cluster registry (dexcluster.c), on hot
	 * standbys too; on a primary also the write-back flushes.
	 */
	{
		BackgroundWorker worker;

		memset(&worker, 0, sizeof(worker));
		worker.bgw_flags = BGWORKER_SHMEM_ACCESS;
		worker.bgw_start_time = BgWorkerStart_ConsistentState;
		worker.bgw_restart_time = 1;
		snprintf(worker.bgw_library_name, BGW_MAXLEN, "dex");
		snprintf(worker.bgw_function_name, BGW_MAXLEN, "dex_writeback_main");
		snprintf(worker.bgw_name, BGW_MAXLEN, "dex worker");
		snprintf(worker.bgw_type, BGW_MAXLEN, "dex worker");
		RegisterBackgroundWorker(&worker);
	}

#if PG_VERSION_NUM >= 150000
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = dex_shmem_request;
#else
	dex_shmem_request();
#endif
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = dex_shmem_startup;

	dex_set_interrupt_check(dex_interrupt_check);
	dex_journal_init();
	dex_wal_init();
	dex_xact_init();
}

/* ---------------------------------------------------------------------
 * write-back worker (src/README.md "Write-back mode"): PostgreSQL has no
 * checkpoint hook for extensions, so this worker is the checkpoint
 * equivalent: every dex.writeback_interval it writes back all dirty frames
 * and clears the dirty-owner words of the flushed indexes; on SIGTERM (fast
 * or smart shutdown: the postmaster signals background workers before the
 * shutdown checkpoint) it does a final flush before exiting. An immediate
 * shutdown or a crash skips it: those indexes then report lost memory.
 * ---------------------------------------------------------------------
 */
static volatile sig_atomic_t dex_wb_stop = false;

static void
dex_wb_sigterm(SIGNAL_ARGS)
{
	int			save_errno = errno;

	dex_wb_stop = true;
	SetLatch(MyLatch);
	errno = save_errno;
}

static uint64
dex_wb_flush_once(bool quiet)
{
	DexError	err;
	uint64_t	written = 0;
	int			rc;

	memset(&err, 0, sizeof(err));
	rc = dex_try_configure(&err);
	/* dirty leaves carry entries whose heap WAL must be durable first */
	dex_wal_flush_dirty();
	if (rc == DEX_OK)
		rc = dex_cache_flush(&written, &err);
	if (rc != DEX_OK && !quiet)
		ereport(LOG,
				(errmsg("dex write-back worker: %s", err.message[0] ? err.message : "flush failed")));
	return (uint64) written;
}

void
dex_writeback_main(Datum arg)
{
	TimestampTz last_flush = GetCurrentTimestamp();

	pqsignal(SIGTERM, dex_wb_sigterm);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();

	while (!dex_wb_stop)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 DEX_WORKER_TICK_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (dex_wb_stop)
			break;
		/* the cluster registry: writer role / standby lease (dexcluster.c) */
		dex_cluster_beat();
		if (!RecoveryInProgress() && dex_cache_size_kb > 0 &&
			TimestampDifferenceExceeds(last_flush, GetCurrentTimestamp(), dex_writeback_interval_ms))
		{
			(void) dex_wb_flush_once(false);
			last_flush = GetCurrentTimestamp();
		}
	}

	/*
	 * Shutdown: backends get SIGTERM at the same time and may still finish a
	 * change; flush until a round finds nothing (bounded). Then give the
	 * writer role back, with the final WAL position.
	 */
	if (!RecoveryInProgress() && dex_cache_size_kb > 0)
	{
		for (int round = 0; round < 20; round++)
		{
			if (dex_wb_flush_once(round > 0) == 0 && round > 0)
				break;
			pg_usleep(100 * 1000L);
		}
		ereport(LOG, (errmsg("dex write-back worker: final flush done")));
	}
	dex_cluster_release_writer();
	proc_exit(0);
}
