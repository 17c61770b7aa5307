/*
 * dexios.c — index-only scans (src/README.md "Index-only scans").
 *
 * - amcanreturn: a column whose key image gives its datum back exactly
 *   (dexkeys.c, dexkeybytes.c decide which types), and every INCLUDE column;
 *   never during recovery.
 * - The tuple an index-only scan returns: the decoded key as an index tuple
 *   of the index's descriptor; NULL for a NULL entry, and NULL for a column
 *   that cannot be returned (the planner then reads no column: count(*)).
 * - The VACUUM interlock that replaces nbtree's leaf pin: a scan announces
 *   in shared memory, before it reads a batch of entries, that it may still
 *   check the visibility map for them; VACUUM, after removing entries, waits
 *   until every announcement it saw has moved on, before the heap pass that
 *   may set the page all-visible.
 * - Heap verification: where that interlock cannot hold (a hot standby,
 *   whose VACUUM runs on the primary; a backend with no free announcement)
 *   each entry is returned only if the heap holds a tuple visible to the
 *   scan's snapshot, so an all-visible bit is never trusted for it.
 */
#include "dex.h"

#include "access/relscan.h"
#include "access/tableam.h"
#include "access/twophase.h"
#include "access/xlog.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/wait_event.h"

/* announcements per backend: concurrent index-only scans of one backend */
#define DEX_IOS_PER_PROC	4

/*
 * One announcement: 0 = none, else (index OID << 32) | generation. The
 * generation (never 0) changes with every batch, so a VACUUM waiting for an
 * announcement sees it move on when the scan reads its next batch.
 */
typedef struct DexIosShared
{
	int			nprocs;
	/* K8: +1 whenever a dex index's ambulkdelete begins (never 0) */
	pg_atomic_uint64 vacuum_epoch;
	/* ... and how many are running now */
	pg_atomic_uint32 vacuums_running;
	pg_atomic_uint64 slots[FLEXIBLE_ARRAY_MEMBER];	/* nprocs * DEX_IOS_PER_PROC */
} DexIosShared;

static DexIosShared *ios_shared = NULL;
static uint8 ios_used = 0;		/* bit i: this backend's announcement i is taken */
static uint32 ios_generation = 0;
static bool ios_exit_registered = false;

static int
ios_nprocs(void)
{
	return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts;
}

Size
dex_ios_shmem_size(void)
{
	return MAXALIGN(add_size(offsetof(DexIosShared, slots),
							 mul_size(sizeof(pg_atomic_uint64),
									  mul_size(ios_nprocs(), DEX_IOS_PER_PROC))));
}

void
dex_ios_shmem_init(void *mem, bool found)
{
	ios_shared = (DexIosShared *) mem;
	if (!found)
	{
		ios_shared->nprocs = ios_nprocs();
		pg_atomic_init_u64(&ios_shared->vacuum_epoch, 1);
		pg_atomic_init_u32(&ios_shared->vacuums_running, 0);
		for (int i = 0; i < ios_shared->nprocs * DEX_IOS_PER_PROC; i++)
			pg_atomic_init_u64(&ios_shared->slots[i], 0);
	}
}

static int
my_procno(void)
{
#if PG_VERSION_NUM >= 170000
	return MyProcNumber;
#else
	return MyProc ? MyProc->pgprocno : -1;
#endif
}

static pg_atomic_uint64 *
ios_slot(int i)
{
	return &ios_shared->slots[my_procno() * DEX_IOS_PER_PROC + i];
}

/* Withdraws every announcement of this backend (exit, end of transaction). */
static void
ios_clear_all(void)
{
	if (ios_used == 0)
		return;
	pg_memory_barrier();
	for (int i = 0; i < DEX_IOS_PER_PROC; i++)
		if (ios_used & (1 << i))
			pg_atomic_write_u64(ios_slot(i), 0);
	ios_used = 0;
}

static void
ios_before_shmem_exit(int code, Datum arg)
{
	ios_clear_all();
}

/*
 * No scan outlives its transaction (a WITH HOLD cursor is materialized and
 * its scan ended before commit): whatever a failed scan left behind goes.
 */
static void
ios_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_PARALLEL_ABORT)
		ios_clear_all();
}

void
dex_ios_init(void)
{
	RegisterXactCallback(ios_xact_callback, NULL);
}

/* A free announcement of this backend, or -1. */
static int
ios_claim(void)
{
	int			procno = my_procno();

	if (ios_shared == NULL || procno < 0 || procno >= ios_shared->nprocs)
		return -1;
	for (int i = 0; i < DEX_IOS_PER_PROC; i++)
	{
		if (!(ios_used & (1 << i)))
		{
			if (!ios_exit_registered)
			{
				before_shmem_exit(ios_before_shmem_exit, (Datum) 0);
				ios_exit_registered = true;
			}
			ios_used |= (1 << i);
			return i;
		}
	}
	return -1;
}

/* ---------------------------------------------------------------------
 * amcanreturn
 * ---------------------------------------------------------------------
 */

/*
 * During recovery the tree is the primary's, ahead of this server's heap
 * and visibility map: say no, so that queries reading the column use plain
 * index scans (src/README.md "Index-only scans"). A query reading no column
 * may still be planned as an index-only scan; dexcostestimate prices that as
 * disabled there, and the scan verifies every entry against the heap.
 */
bool
dexcanreturn(Relation index, int attno)
{
	if (RecoveryInProgress())
		return false;
	if (dex_index_is_bytes(index))
	{
		DexEntryColumn cols[INDEX_MAX_KEYS];
		DexKeyForm	form;

		/* INCLUDE columns are stored as they are; key columns if they decode */
		if (attno > IndexRelationGetNumberOfKeyAttributes(index))
			return true;
		(void) dex_entry_columns(index, cols);
		dex_key_bytes_form(cols[attno - 1].typid, cols[attno - 1].collid,
						   cols[attno - 1].image_width, &form);
		return form.returnable;
	}
	return attno == 1 && dex_type_returnable(dex_column_basetype(index));
}

/* ---------------------------------------------------------------------
 * the scan side
 * ---------------------------------------------------------------------
 */

/* First call of an index-only scan: how its entries are returned. */
void
dex_ios_begin(IndexScanDesc scan)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;

	if (so->ios_ready)
		return;
	if (so->bytes)
	{
		DexEntryColumn cols[INDEX_MAX_KEYS];
		int			n = dex_entry_columns(scan->indexRelation, cols);
		MemoryContext old = MemoryContextSwitchTo(so->scancxt);

		so->ios_reader = dex_entry_reader(scan->indexRelation, cols, n);
		MemoryContextSwitchTo(old);
	}
	else
		so->ios_returnable = dex_type_returnable(so->atttype);
	/*
	 * The planner asks for an index-only scan of a column it may not read
	 * only when it reads no such column, hence uses no scan key on it
	 * either; rechecking a key on the NULL we return would drop every row.
	 */
	for (int i = 0; i < scan->numberOfKeys; i++)
	{
		int			col = scan->keyData[i].sk_attno - 1;

		if (so->ios_reader ? !dex_entry_key_returnable(so->ios_reader, col) : !so->ios_returnable)
			elog(ERROR, "index-only scan with keys on column %d of index \"%s\", which cannot be returned",
				 col + 1, RelationGetRelationName(scan->indexRelation));
	}
	so->ios_slot = -1;
	so->ios_verify = RecoveryInProgress();
	if (!so->ios_verify)
	{
		so->ios_slot = ios_claim();
		so->ios_verify = so->ios_slot < 0;
	}
	so->itupcxt = AllocSetContextCreate(so->scancxt, "dex index-only tuple",
										ALLOCSET_SMALL_SIZES);
	scan->xs_itupdesc = RelationGetDescr(scan->indexRelation);
	so->ios_ready = true;
}

/*
 * Before a batch of entries is read: announce it (full barriers: the
 * visibility checks of the previous batch come before, the read of the next
 * after; VACUUM orders its removals before reading announcements).
 */
void
dex_ios_announce(IndexScanDesc scan)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;
	uint64		word;

	if (!so->ios_ready || so->ios_slot < 0)
		return;
	if (++ios_generation == 0)
		ios_generation = 1;
	word = ((uint64) RelationGetRelid(scan->indexRelation) << 32) | ios_generation;
	pg_memory_barrier();
	pg_atomic_write_u64(ios_slot(so->ios_slot), word);
	pg_memory_barrier();
}

/* The scan is done with every entry it read (end of scan, rescan). */
void
dex_ios_quiet(DexScanOpaque so)
{
	if (so->ios_slot < 0)
		return;
	pg_memory_barrier();
	pg_atomic_write_u64(ios_slot(so->ios_slot), 0);
}

/* The scan ends (also from its memory context's reset callback: no ereport). */
void
dex_ios_release(DexScanOpaque so)
{
	if (so->ios_slot < 0)
		return;
	dex_ios_quiet(so);
	ios_used &= ~(1 << so->ios_slot);
	so->ios_slot = -1;
}

/*
 * Bottom-up deletion (dexbottomup.c) hands TIDs it read from a leaf to
 * table_index_delete_tuples, which calls a TID whose line pointer is unused
 * index corruption: a VACUUM that removed those entries meanwhile must not
 * reach its heap pass before the pass is done. The same announcement as an
 * index-only scan's batch, taken before the leaf is read and held until the
 * heap answered. Returns it (dex_ios_unhold), or -1: none free (or a
 * standby), skip the pass. An error in between: cleared at transaction end.
 */
int
dex_ios_hold(Relation index)
{
	int			slot;
	uint64		word;

	if (RecoveryInProgress() || (slot = ios_claim()) < 0)
		return -1;
	if (++ios_generation == 0)
		ios_generation = 1;
	word = ((uint64) RelationGetRelid(index) << 32) | ios_generation;
	pg_memory_barrier();
	pg_atomic_write_u64(ios_slot(slot), word);
	pg_memory_barrier();		/* before the leaf is read */
	return slot;
}

void
dex_ios_unhold(int slot)
{
	if (slot < 0)
		return;
	pg_memory_barrier();
	pg_atomic_write_u64(ios_slot(slot), 0);
	ios_used &= ~(1 << slot);
}

/*
 * Kills of entries still present (src/README.md K8). A scan judged entries
 * of a batch dead; by the time it leaves the batch the leaf may have
 * changed. An entry (key, TID) still there can only be a different row than
 * the one judged if VACUUM removed the old entry, its heap pass freed the
 * TID and a new row with the same key took it -- and that pass comes after
 * this index's ambulkdelete, which waits for the announcements it sees
 * (K4). So: a batch read while no ambulkdelete of a dex index ran remembers
 * the epoch (dex_ios_vacuum_epoch; 0: one was running); when it kills, it
 * announces (dex_ios_hold_unvacuumed) and then checks that no ambulkdelete
 * began since. One that began before that check changed the epoch (the kill
 * keeps to the exact frame version then); one that begins after it sees the
 * announcement and keeps its heap pass until the kill is done.
 */
void
dex_ios_vacuum_begin(void)
{
	pg_atomic_fetch_add_u32(&ios_shared->vacuums_running, 1);
	pg_atomic_fetch_add_u64(&ios_shared->vacuum_epoch, 1);
}

void
dex_ios_vacuum_end(void)
{
	pg_atomic_fetch_sub_u32(&ios_shared->vacuums_running, 1);
}

uint64
dex_ios_vacuum_epoch(void)
{
	uint64		e;

	if (ios_shared == NULL)
		return 0;
	e = pg_atomic_read_u64(&ios_shared->vacuum_epoch);
	pg_memory_barrier();
	return pg_atomic_read_u32(&ios_shared->vacuums_running) == 0 ? e : 0;
}

/* An announcement for index, if no ambulkdelete began since `epoch`; else -1. */
int
dex_ios_hold_unvacuumed(Relation index, uint64 epoch)
{
	int			slot;

	if (epoch == 0 || (slot = dex_ios_hold(index)) < 0)
		return -1;
	if (pg_atomic_read_u64(&ios_shared->vacuum_epoch) != epoch)
	{
		dex_ios_unhold(slot);
		return -1;
	}
	return slot;
}

/* Does the heap hold a tuple at tid (a HOT chain's root) visible to the scan? */
static bool
ios_heap_visible(IndexScanDesc scan, ItemPointer tid)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;
	ItemPointerData t = *tid;
	bool		call_again = false;
	bool		all_dead = false;
	bool		found;

	if (so->vfetch == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(so->scancxt);

		so->vfetch = table_index_fetch_begin(scan->heapRelation);
		so->vslot = table_slot_create(scan->heapRelation, NULL);
		MemoryContextSwitchTo(old);
	}
	found = table_index_fetch_tuple(so->vfetch, &t, scan->xs_snapshot, so->vslot,
									&call_again, &all_dead);
	ExecClearTuple(so->vslot);
	return found;
}

/*
 * Fills scan->xs_itup with the columns of the entry returned now: a 16-byte
 * key k (NULL: none), or byte-string entry bytes (NULL: none); false: skip
 * the entry (verification found no visible tuple).
 */
static bool
ios_form(IndexScanDesc scan, const DexKey *k, const uint8 *entry, size_t len)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	MemoryContext old;

	if (so->ios_verify && !ios_heap_visible(scan, &scan->xs_heaptid))
		return false;
	MemoryContextReset(so->itupcxt);
	old = MemoryContextSwitchTo(so->itupcxt);
	if (entry)
	{
		/* INCLUDE columns and the key columns that decode (dexentryvalues.c) */
		dex_entry_values(so->ios_reader, entry, len, values, isnull);
	}
	else
	{
		/* every column NULL, unless column 1 decodes */
		for (int i = 0; i < scan->xs_itupdesc->natts; i++)
		{
			values[i] = (Datum) 0;
			isnull[i] = true;
		}
		if (k && k->cls == DEX_KEY_VALUE && so->ios_returnable)
			isnull[0] = !dex_key_datum(k, so->atttype, &values[0]);
	}
	scan->xs_itup = index_form_tuple(scan->xs_itupdesc, values, isnull);
	MemoryContextSwitchTo(old);
	return true;
}

bool
dex_ios_entry(IndexScanDesc scan, const DexKey *k)
{
	return ios_form(scan, k, NULL, 0);
}

bool
dex_ios_entry_bytes(IndexScanDesc scan, const uint8 *entry, size_t len)
{
	return ios_form(scan, NULL, entry, len);
}

/* amendscan: what only a normal end may release (a buffer pin). */
void
dex_ios_end(IndexScanDesc scan)
{
	DexScanOpaque so = (DexScanOpaque) scan->opaque;

	if (so->vslot)
		ExecDropSingleTupleTableSlot(so->vslot);
	if (so->vfetch)
		table_index_fetch_end(so->vfetch);
	so->vslot = NULL;
	so->vfetch = NULL;
	dex_ios_release(so);
}

/* ---------------------------------------------------------------------
 * the VACUUM side
 * ---------------------------------------------------------------------
 */

/*
 * After ambulkdelete removed entries: wait until every index-only scan of
 * this index that may have read one of them before its removal has checked
 * the visibility map for it. Such a scan announced the batch before reading
 * it, and keeps the announcement until it asks for the next batch, which
 * the executor does only after checking every entry of this one. Scans that
 * announce later read the tree after the removals. An announcement of the
 * same OID in another database makes this wait needlessly, never wrongly.
 * Like nbtree's wait for a leaf pin, this waits for a paused cursor.
 */
void
dex_ios_wait_readers(Relation index)
{
	uint64		relid = RelationGetRelid(index);
	int			me = my_procno();
	int			n;

	if (ios_shared == NULL)
		return;
	pg_memory_barrier();		/* the removals before the announcements we read */
	n = ios_shared->nprocs * DEX_IOS_PER_PROC;
	for (int i = 0; i < n; i++)
	{
		uint64		seen = pg_atomic_read_u64(&ios_shared->slots[i]);
		long		sleep_ms = 1;

		if (seen == 0 || (seen >> 32) != relid || i / DEX_IOS_PER_PROC == me)
			continue;
		while (pg_atomic_read_u64(&ios_shared->slots[i]) == seen)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 sleep_ms, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
			sleep_ms = Min(sleep_ms * 2, 10);
		}
	}
}
