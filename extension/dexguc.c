/*
 * dexguc.c — the GUCs (dex.*). The dex worker, which several of them
 * configure, is dexworker.c.
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

int			dex_cache_size_kb = 64 * 1024;
static double dex_leaf_admission = 0.1;
static bool dex_cache_leaves = true;
int			dex_writeback_interval_ms = 1000;
int			dex_write_back_with_standbys = DEX_WBWS_AUTO;
int			dex_standby_pause_hold_ms = 60000;
bool		dex_worker_fail = false;
int			dex_kill_min_entries = 4;
static int	dex_offload = DEX_OFFLOAD_AUTO;
static char *dex_crash_at = NULL;

/* (the boolean spellings of its former bool GUC stay accepted) */
static const struct config_enum_entry dex_wbws_options[] = {
	{"off", DEX_WBWS_OFF, false},
	{"on", DEX_WBWS_ON, false},
	{"auto", DEX_WBWS_AUTO, false},
	{"false", DEX_WBWS_OFF, true},
	{"true", DEX_WBWS_ON, true},
	{"no", DEX_WBWS_OFF, true},
	{"yes", DEX_WBWS_ON, true},
	{"0", DEX_WBWS_OFF, true},
	{"1", DEX_WBWS_ON, true},
	{NULL, 0, false}
};

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

/* Where the memory nodes are and how long a remote wait may take. */
static void
dex_define_connection_gucs(void)
{
	DefineCustomStringVariable("dex.memnodes",
							   "Memory nodes holding dex indexes (comma-separated tcp://host:port).",
							   NULL,
							   &dex_memnodes_guc,
							   "tcp://127.0.0.1:7400",
							   PGC_SUSET,
							   0,
							   NULL, dex_guc_assign_string, NULL);
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
}

/* The node cache and offloading to memory-node CPUs. */
static void
dex_define_cache_gucs(void)
{
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
}

/* Writes: batched inserts, dead-entry removal, the entry images of new indexes. */
static void
dex_define_write_gucs(void)
{
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
}

/* Write-back, checkpoints and hot standbys. */
static void
dex_define_cluster_gucs(void)
{
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
	DefineCustomEnumVariable("dex.write_back_with_standbys",
							 "Whether write-back indexes keep changes in the node cache while "
							 "a hot standby is attached.",
							 "auto (default): they keep them until a standby's scan asks for a "
							 "write-back, then write through until dex.standby_pause_hold passes "
							 "without another request; off: while one is attached, they write through, and the standby's "
							 "scans never wait for a write-back (writes cost a round trip); on: "
							 "they keep them, and the standby's scans of changed ranges wait for "
							 "a write-back.",
							 &dex_write_back_with_standbys,
							 DEX_WBWS_AUTO,
							 dex_wbws_options,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("dex.standby_pause_hold",
							"With dex.write_back_with_standbys = auto: how long write-back indexes "
							"keep writing through after a hot standby's scan last asked for a write-back.",
							NULL,
							&dex_standby_pause_hold_ms,
							60000, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
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
}

/* Testing only: named crash points and the dex worker's injected pauses and failures. */
static void
dex_define_testing_gucs(void)
{
	DefineCustomStringVariable("dex.crash_at",
							   "Testing only: the backend kills itself (SIGKILL, a crash restart) at this named point of the index code.",
							   "For crash tests: e.g. split:published, migrate:published, dirty-split:published, offload-write:answered. Empty: never.",
							   &dex_crash_at,
							   "",
							   PGC_SUSET,
							   GUC_NOT_IN_SAMPLE,
							   NULL, dex_guc_assign_crash_at, NULL);
	DefineCustomIntVariable("dex.fence_switch_pause",
							"Testing only: the dex worker sleeps this long at the checkpoint fence's most exposed moment.",
							"For tests that checkpoints beginning then still wait for the write-back (dexckptfence.c). 0: never.",
							&dex_fence_switch_pause_ms,
							0, 0, 60000,
							PGC_SIGHUP,
							GUC_UNIT_MS | GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("dex.worker_fail",
							 "Testing only: the dex worker raises an ERROR after each registry beat (and so exits, "
							 "and is started again a second later).",
							 "For tests that no checkpoint misses a dirty node while the worker is not running.",
							 &dex_worker_fail,
							 false,
							 PGC_SIGHUP,
							 GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);
}

/* _PG_init: define every dex.* setting. */
void
dex_define_gucs(void)
{
	dex_define_connection_gucs();
	dex_define_cache_gucs();
	dex_define_write_gucs();
	dex_define_cluster_gucs();
	dex_define_testing_gucs();

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
