/*
 * dex.c — the module: _PG_init (GUCs, reloptions, the dex worker, shared
 * memory, hooks and callbacks) and the access method handler.
 *
 * Every other file of the extension but dexfuncs.c (which asks
 * dex_check_index_relation) lies below this one. The files call each other
 * without cycles, in the order extension/dex.h lists them
 * (scripts/tests/t_layers.sh checks it).
 */
#include "dex.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/rel.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

PG_FUNCTION_INFO_V1(dexhandler);

/* ---------------------------------------------------------------------
 * shared memory: the core's counters, the cluster state, the node cache
 * ---------------------------------------------------------------------
 */
#if PG_VERSION_NUM >= 150000
static shmem_request_hook_type prev_shmem_request_hook = NULL;
#endif
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
dex_shmem_request(void)
{
#if PG_VERSION_NUM >= 150000
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
#endif
	RequestAddinShmemSpace(MAXALIGN(dex_stats_shmem_size()));
	RequestAddinShmemSpace(dex_cluster_shmem_size());
	RequestAddinShmemSpace(dex_ios_shmem_size());
	RequestAddinShmemSpace(dex_wbredo_shmem_size());
	RequestAddinShmemSpace(dex_wbstandby_shmem_size());
	RequestAddinShmemSpace(dex_killdefer_shmem_size());
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

	/* this compute server's life and the cluster registry's state (dexcluster.c) */
	mem = ShmemInitStruct("dex cluster", dex_cluster_shmem_size(), &found);
	dex_cluster_shmem_init(mem, found);

	/* index-only scans' announcements to VACUUM (dexios.c) */
	mem = ShmemInitStruct("dex index-only scans", dex_ios_shmem_size(), &found);
	dex_ios_shmem_init(mem, found);

	/* write-back redo: this life's flushed position (dexwbredo.c) */
	mem = ShmemInitStruct("dex write-back redo", dex_wbredo_shmem_size(), &found);
	dex_wbredo_shmem_init(mem, found);

	/* write-back indexes on hot standbys: replayed positions (dexwbstandby.c) */
	mem = ShmemInitStruct("dex write-back standby", dex_wbstandby_shmem_size(), &found);
	dex_wbstandby_shmem_init(mem, found);

	/* kills waiting for the hot standbys (dexkilldefer.c) */
	mem = ShmemInitStruct("dex deferred kills", dex_killdefer_shmem_size(), &found);
	dex_killdefer_shmem_init(mem, found);

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
		/* no write-back until the dex worker's checkpoint fence is up (dexckptfence.c) */
		if (!found)
			dex_cache_pause_write_back(DEX_WB_PAUSE_NO_FENCE, 1);
	}
	else
		dex_cache_attach(NULL, 0, 0, NULL);
	LWLockRelease(AddinShmemInitLock);
}

/* ---------------------------------------------------------------------
 * module initialization
 * ---------------------------------------------------------------------
 */
void
_PG_init(void)
{
	dex_define_gucs();
	dex_init_reloptions();

	/*
	 * Loaded on demand (not preloaded): every entry point raises the "must
	 * be loaded via shared_preload_libraries" error (dex_require_preload).
	 */
	if (!process_shared_preload_libraries_in_progress)
		return;

	dex_preloaded = true;

	dex_register_worker();

#if PG_VERSION_NUM >= 150000
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = dex_shmem_request;
#else
	dex_shmem_request();
#endif
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = dex_shmem_startup;

	dex_session_init();
	dex_journal_init();
	dex_wal_init();
	dex_xact_init();
	dex_pending_init();
	dex_ios_init();
}

/* ---------------------------------------------------------------------
 * handler
 * ---------------------------------------------------------------------
 */
Datum
dexhandler(PG_FUNCTION_ARGS)
{
	IndexAmRoutine *amroutine = makeNode(IndexAmRoutine);

	amroutine->amstrategies = BTMaxStrategyNumber;
	amroutine->amsupport = 1;
	amroutine->amoptsprocnum = 0;
	amroutine->amcanorder = true;
	amroutine->amcanorderbyop = false;
	amroutine->amcanbackward = true;
	amroutine->amcanunique = true;
	amroutine->amcanmulticol = true;	/* several key columns: byte-string entries (dexentry.c) */
	amroutine->amoptionalkey = true;
	amroutine->amsearcharray = true;
	amroutine->amsearchnulls = true;
	amroutine->amstorage = false;
	amroutine->amclusterable = true;
	amroutine->ampredlocks = false;
	amroutine->amcanparallel = false;
#if PG_VERSION_NUM >= 170000
	amroutine->amcanbuildparallel = false;
#endif
	amroutine->amcaninclude = true;	/* stored in byte-string entries (dexentryvalues.c) */
	amroutine->amusemaintenanceworkmem = false;
#if PG_VERSION_NUM >= 160000
	amroutine->amsummarizing = false;
#endif
	amroutine->amparallelvacuumoptions = 0;
	amroutine->amkeytype = InvalidOid;

	amroutine->ambuild = dexbuild;
	amroutine->ambuildempty = dexbuildempty;
	amroutine->aminsert = dexinsert;
#if PG_VERSION_NUM >= 170000
	amroutine->aminsertcleanup = NULL;
#endif
	amroutine->ambulkdelete = dexbulkdelete;
	amroutine->amvacuumcleanup = dexvacuumcleanup;
	amroutine->amcanreturn = dexcanreturn;
	amroutine->amcostestimate = dexcostestimate;
	amroutine->amoptions = dexoptions;
	amroutine->amproperty = NULL;
	amroutine->ambuildphasename = dexbuildphasename;
	amroutine->amvalidate = dexvalidate;
	amroutine->amadjustmembers = NULL;
	amroutine->ambeginscan = dexbeginscan;
	amroutine->amrescan = dexrescan;
	amroutine->amgettuple = dexgettuple;
	amroutine->amgetbitmap = dexgetbitmap;
	amroutine->amendscan = dexendscan;
	amroutine->ammarkpos = NULL;
	amroutine->amrestrpos = NULL;
	amroutine->amestimateparallelscan = NULL;
	amroutine->aminitparallelscan = NULL;
	amroutine->amparallelrescan = NULL;

	PG_RETURN_POINTER(amroutine);
}

/* Is this relation an index of the dex access method? */
void
dex_check_index_relation(Relation index)
{
	if (index->rd_rel->relkind != RELKIND_INDEX ||
		index->rd_indam == NULL || index->rd_indam->ambuild != dexbuild)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a dex index",
						RelationGetRelationName(index))));
}
