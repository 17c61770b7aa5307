/*
 * dexcluster.c — one primary and its hot standbys over the same remote trees
 * (src/README.md "Hot standbys", the registry: src/cluster/registry.h).
 *
 * The dex worker of every server beats in the cluster registry on memory
 * node 0 every DEX_BEAT_MS:
 *   - a primary claims the writer role (refused if another live primary holds
 *     it, or if its WAL does not cover what the trees already depend on: a
 *     backup restore or point-in-time recovery to an earlier point, an old
 *     primary after a failover) and publishes how far the trees may depend on
 *     its WAL: min(flushed WAL, what every live standby has replayed);
 *   - a hot standby holds a slot: it reports its replay position and renews a
 *     lease; its backends read dex indexes only while the lease is valid.
 * Backends then:
 *   - on a primary, write only while this server holds the writer role and its
 *     lease; VACUUM removes entries only after every live standby has replayed
 *     the WAL that made them removable (dex_cluster_wait_standbys);
 *   - on a standby, answer only with a valid lease and once replay has passed
 *     every removal the primary made without waiting for this standby.
 * A standby that falls silent for DEX_LEASE_MS + DEX_MARGIN_MS is expired by
 * the primary (which stops waiting for it); by then it has stopped answering
 * (its lease counts from before its last renewal was sent).
 */
#include "dex.h"
#include "dexcluster.h"

#include <unistd.h>

#include "access/xlog.h"
#include "access/xlogrecovery.h"
#include "common/controldata_utils.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/timestamp.h"


int			dex_standby_wait_timeout_ms = 10000;

DexClusterShared *dex_cluster_shm = NULL;
static uint64 dex_postmaster_last_life = 0;	/* postmaster memory: survives reinit */

Size
dex_cluster_shmem_size(void)
{
	return MAXALIGN(sizeof(DexClusterShared));
}

/*
 * Postmaster, when shared memory is (re)made: choose this life and record
 * what pg_control says.
 */
void
dex_cluster_shmem_init(void *mem, bool found)
{
	uint64		life = 0;

	dex_cluster_shm = (DexClusterShared *) mem;
	if (found)
		return;
	while (life == 0)
		if (!pg_strong_random(&life, sizeof(life)))
			elog(FATAL, "dex: could not generate a random life id");
	memset(dex_cluster_shm, 0, sizeof(*dex_cluster_shm));
	SpinLockInit(&dex_cluster_shm->mutex);
	dex_cluster_shm->life = life;
	dex_cluster_shm->standby_slot = -1;
	dex_cluster_shm->standby_floor = PG_UINT64_MAX;
	dex_cluster_shm->prev_life = dex_postmaster_last_life;
	dex_postmaster_last_life = life;
	{
		bool		crc_ok = false;
		ControlFileData *cf = get_controlfile(DataDir, &crc_ok);

		if (crc_ok && (cf->state == DB_SHUTDOWNED || cf->state == DB_SHUTDOWNED_IN_RECOVERY))
		{
			dex_cluster_shm->clean_start = true;
			dex_cluster_shm->clean_end_lsn = (uint64) cf->checkPoint;
		}
		pfree(cf);
	}
}

/*
 * This compute server's life: a random id chosen whenever shared memory is
 * initialized (postmaster start, crash restart). The writer role and standby
 * slots of the registry belong to a life; an index's insert journal records
 * the life that last recovered it (dexjournal.c).
 */
uint64
dex_life(void)
{
	dex_require_preload();
	if (dex_cluster_shm == NULL || dex_cluster_shm->life == 0)
		elog(ERROR, "dex: shared memory is not set up");
	return dex_cluster_shm->life;
}

static void
dex_cluster_set_problem(char *dst, const char *msg)
{
	SpinLockAcquire(&dex_cluster_shm->mutex);
	strlcpy(dst, msg, 256);
	SpinLockRelease(&dex_cluster_shm->mutex);
}

/* ---------------------------------------------------------------------
 * finding the registry
 * ---------------------------------------------------------------------
 */

/*
 * The registry of the cluster with system identifier `sysid` on memory node 0
 * (0 if there is none and !create). A new one starts with writer_hwm and
 * removal_lsn at `floor`.
 */
uint64
dex_cluster_registry_lookup(uint64 sysid, bool create, uint64 floor, DexError *err)
{
	DexNsInfo  *list = NULL;
	int			n = 0;
	uint64		ns = 0;
	uint64		addr = 0;

	if (dex_memnode_count() == 0)
	{
		err->code = DEX_ERR_INVALID;
		snprintf(err->message, sizeof(err->message), "dex.memnodes is empty");
		return 0;
	}
	if (dex_ns_list(0, &list, &n, err) != DEX_OK)
		return 0;
	for (int i = 0; i < n; i++)
	{
		DexNsTag	tag;

		if (dex_parse_tag(list[i].tag, &tag) && tag.sysid == sysid && tag.kind == DEX_NS_REGISTRY)
			ns = list[i].ns;
	}
	dex_free(list);
	if (ns == 0 && create)
	{
		DexNsTag	tag;
		uint64		inc;

		memset(&tag, 0, sizeof(tag));
		memcpy(tag.magic, DEX_TAG_MAGIC, 4);
		tag.tag_version = DEX_TAG_VERSION;
		tag.sysid = sysid;
		tag.kind = DEX_NS_REGISTRY;
		if (dex_ns_create(0, (const uint8_t *) &tag, &ns, &inc, err) != DEX_OK)
			return 0;
	}
	if (ns == 0)
		return 0;
	if (dex_registry_open(0, ns, create ? 1 : 0, floor, &addr, err) != DEX_OK)
		return 0;
	return addr;
}

/* This cluster's registry (found once per shared-memory life, or after memory node 0 restarted). */
static uint64
dex_registry_find(bool create, DexError *err)
{
	uint64		addr;
	uint64		inc = 0;

	if (dex_cluster_shm->registry)
		return dex_cluster_shm->registry;
	if (dex_memnode_count() > 0 && dex_memnode_incarnation(0, &inc, err) != DEX_OK)
		return 0;
	addr = dex_cluster_registry_lookup(GetSystemIdentifier(), create, create ? dex_wal_durable_boundary(true) : 0, err);
	if (addr == 0)
		return 0;
	SpinLockAcquire(&dex_cluster_shm->mutex);
	dex_cluster_shm->registry = addr;
	dex_cluster_shm->registry_inc = inc;
	SpinLockRelease(&dex_cluster_shm->mutex);
	return addr;
}

/*
 * Memory node 0 restarted (lost its memory): the registry is gone with it.
 * Find -- the primary: make -- a new one. The roles start over: this primary
 * claims the new registry as a fresh one, a standby registers again (its
 * lease on the old registry lapses meanwhile).
 */
static void
dex_registry_forget_if_lost(void)
{
	DexError	err;
	uint64		inc = 0;

	memset(&err, 0, sizeof(err));
	if (dex_cluster_shm->registry == 0 || dex_memnode_incarnation(0, &inc, &err) != DEX_OK ||
		inc == dex_cluster_shm->registry_inc)
		return;
	ereport(LOG, (errmsg("dex: memory node 0 restarted and lost the cluster registry; registering again")));
	SpinLockAcquire(&dex_cluster_shm->mutex);
	dex_cluster_shm->registry = 0;
	if (dex_cluster_shm->writer_state == DEX_WRITER_CLAIMED)
		dex_cluster_shm->writer_state = DEX_WRITER_UNKNOWN;
	dex_cluster_shm->standby_slot = -1;
	SpinLockRelease(&dex_cluster_shm->mutex);
}

/* ---------------------------------------------------------------------
 * the primary's beat
 * ---------------------------------------------------------------------
 */

/* How far this server's WAL reached when this life began. */
static uint64
dex_wal_end_at_start(void)
{
	if (dex_cluster_shm->clean_start)
		return dex_cluster_shm->clean_end_lsn;
	return (uint64) GetXLogReplayRecPtr(NULL);
}

static void
dex_writer_refuse(const char *why)
{
	SpinLockAcquire(&dex_cluster_shm->mutex);
	dex_cluster_shm->writer_state = DEX_WRITER_REFUSED;
	strlcpy(dex_cluster_shm->writer_problem, why, sizeof(dex_cluster_shm->writer_problem));
	SpinLockRelease(&dex_cluster_shm->mutex);
}

/* One word of the shared state, read under its mutex. */
static uint64
dcs_read(const uint64 *field)
{
	uint64		v;

	SpinLockAcquire(&dex_cluster_shm->mutex);
	v = *field;
	SpinLockRelease(&dex_cluster_shm->mutex);
	return v;
}

/* Observation of another writer's beat (worker-local). */
static uint64 seen_writer = 0;
static uint64 seen_beat = 0;
static TimestampTz seen_since = 0;
static uint64 my_writer_beat = 0;
/*
 * The registry holds our beat my_writer_beat, written with timeline
 * beat_tli; beat_hwm is the hwm of that beat. Then the next beat can be one
 * round trip (dex_registry_beat_read), which publishes beat_hwm -- the
 * registry's writer_hwm trails by a beat, covered by removal_lsn.
 */
static bool beat_in_registry = false;
static uint32 beat_tli = 0;
static uint64 beat_hwm = 0;
static uint64 slot_beat[DEX_MAX_STANDBYS];	/* standby beats as last seen */
static TimestampTz slot_since[DEX_MAX_STANDBYS];	/* ... and since when */

/*
 * The primary's beat found another writer (or none) in the registry: claim
 * the role if that one is gone and our WAL covers what the trees depend on.
 * True if this server is the writer now.
 */
static bool
dex_writer_claim(uint64 addr, uint64 mine, const DexRegistryState *st, TimestampTz issued)
{
	uint64		seen = 0;
	DexError	err;
	char		why[256];

	memset(&err, 0, sizeof(err));
	if (dex_cluster_shm->writer_state == DEX_WRITER_CLAIMED)
	{
		/* taken over: another primary claimed the trees (we were silent too long) */
		snprintf(why, sizeof(why), "Another primary (life %016llx) took over dex's remote memory",
				 (unsigned long long) st->writer_life);
		dex_writer_refuse(why);
		return false;
	}
	if (!dex_wal_covers((uint32) st->writer_tli, Max(st->writer_hwm, st->removal_lsn), dex_wal_end_at_start(),
						why, sizeof(why)))
	{
		dex_writer_refuse(why);
		return false;
	}
	if (st->writer_life != 0 && st->writer_life != dex_cluster_shm->prev_life)
	{
		/* the previous writer must be gone: silent for a lease and a margin */
		if (st->writer_life != seen_writer || st->writer_beat != seen_beat)
		{
			seen_writer = st->writer_life;
			seen_beat = st->writer_beat;
			seen_since = issued;
		}
		if (!TimestampDifferenceExceeds(seen_since, issued, DEX_LEASE_MS + DEX_MARGIN_MS))
		{
			snprintf(why, sizeof(why),
					 "Waiting for the previous primary (life %016llx) to be gone from dex's remote memory",
					 (unsigned long long) st->writer_life);
			dex_cluster_set_problem(dex_cluster_shm->writer_problem, why);
			return false;
		}
	}
	if (dex_registry_cas_writer(addr, st->writer_life, mine, &seen, &err) != DEX_OK || seen != st->writer_life)
		return false;			/* raced: next beat */
	ereport(LOG, (errmsg("dex: this server is now the writer of dex's remote memory (life %016llx)",
						 (unsigned long long) mine)));
	my_writer_beat = st->writer_beat;
	return true;
}

static void
dex_primary_beat(uint64 addr, uint64 mine)
{
	DexRegistryState st;
	DexError	err;
	TimestampTz issued = GetCurrentTimestamp();
	uint64		floor = PG_UINT64_MAX;
	uint64		flush;
	uint64		hwm;
	int			live = 0;
	bool		writer;
	bool		merged;
	int			beat_done = 0;
	int			rc;
	uint32		tli = GetWALInsertionTimeLine();
	char		why[256];

	memset(&err, 0, sizeof(err));
	/*
	 * The writer raises removal_lsn to its flushed WAL before it reads the
	 * standby slots (one batch): every standby it does not count below will
	 * replay past that before it answers, so the position published from
	 * this beat (hwm: what write-backs may depend on) covers the removals a
	 * write-back publishes -- frame kills wait for it (K7). Not the writer
	 * with a valid lease: only read (an LSN of ours must not bind another
	 * primary's standbys; one that took over waited for our silence to
	 * exceed the lease, so a server resuming from such a stall reads first
	 * and learns it).
	 */
	flush = dex_wal_durable_boundary(false);	/* a record end: what the WAL after a crash surely holds */
	SpinLockAcquire(&dex_cluster_shm->mutex);
	writer = dex_cluster_shm->writer_state == DEX_WRITER_CLAIMED && issued < dex_cluster_shm->writer_lease_until;
	SpinLockRelease(&dex_cluster_shm->mutex);
	/* (a beat of a claim already in the registry: its own writes in the same batch) */
	merged = writer && beat_in_registry && tli == beat_tli;
	if (merged)
		rc = dex_registry_beat_read(addr, my_writer_beat, beat_hwm, flush, &st, &beat_done, &err);
	else if (writer)
		rc = dex_registry_raise_removal_read(addr, flush, &st, &err);
	else
		rc = dex_registry_read(addr, &st, &err);
	beat_in_registry = false;	/* (again once this beat is there) */
	if (rc != DEX_OK)
	{
		dex_cluster_set_problem(dex_cluster_shm->writer_problem, err.message);
		return;
	}
	if (st.writer_life == DEX_WRITER_MOVED)
	{
		snprintf(why, sizeof(why),
				 "dex's remote trees were taken over by the cluster with system identifier " UINT64_FORMAT
				 " (pg_upgrade): this cluster must not use them any more", st.moved_to);
		dex_writer_refuse(why);
		return;
	}
	if (st.writer_life != mine && !dex_writer_claim(addr, mine, &st, issued))
		return;
	/*
	 * The standbys the trees must wait for: every live slot but our own. One
	 * whose beat stood still for a lease and a margin is expired here (it
	 * stopped answering by then), so a standby that is gone does not hold
	 * back the journal or VACUUM for long.
	 */
	for (int i = 0; i < DEX_MAX_STANDBYS; i++)
	{
		DexStandbySlot *s = &st.slots[i];
		int			done = 0;

		if (!dex_slot_live(s) || s->owner == mine)
			continue;
		if (s->beat != slot_beat[i])
		{
			slot_beat[i] = s->beat;
			slot_since[i] = issued;
		}
		else if (TimestampDifferenceExceeds(slot_since[i], issued, DEX_LEASE_MS + DEX_MARGIN_MS) &&
				 dex_registry_expire_slot(addr, i, s->beat, &done, &err) == DEX_OK && done)
		{
			ereport(LOG,
					(errmsg("dex: standby (life %016llx) silent for %d ms: no longer waited for",
							(unsigned long long) s->owner, DEX_LEASE_MS + DEX_MARGIN_MS)));
			continue;
		}
		/* (still counted below when detached now: it may answer until its lease ends) */
		if (!(s->beat & DEX_SLOT_DETACHED))
			dex_lag_check_slot(addr, i, s, flush, issued, dex_standby_wait_timeout_ms);
		floor = Min(floor, s->replay_lsn);
	}
	/*
	 * (capped at the removal position this beat read: a standby that claims
	 * a slot after this read reads at least that and replays past it -- the
	 * beats that only read do not publish past it either)
	 */
	for (int i = 0; i < DEX_MAX_STANDBYS; i++)
		if (dex_slot_live(&st.slots[i]) && st.slots[i].owner != mine)
			live++;
	hwm = Min(Min(flush, floor), st.removal_lsn);
	if (merged)
	{
		/* another process moved the beat word: no renewal now, the long way next beat */
		if (!beat_done)
			return;
		my_writer_beat++;
	}
	else if (dex_registry_writer_beat(addr, ++my_writer_beat, hwm, tli, &err) != DEX_OK)
	{
		dex_cluster_set_problem(dex_cluster_shm->writer_problem, err.message);
		return;
	}
	beat_in_registry = true;
	beat_tli = tli;
	beat_hwm = hwm;
	SpinLockAcquire(&dex_cluster_shm->mutex);
	dex_cluster_shm->writer_state = DEX_WRITER_CLAIMED;
	dex_cluster_shm->writer_problem[0] = '\0';
	dex_cluster_shm->writer_lease_until = TimestampTzPlusMilliseconds(issued, DEX_LEASE_MS);
	dex_cluster_shm->standby_floor = floor;
	dex_cluster_note_flush_request(st.flush_request_lsn, issued);
	dex_cluster_shm->live_standbys = live;
	if (hwm > dex_cluster_shm->published_hwm)
		dex_cluster_shm->published_hwm = hwm;
	SpinLockRelease(&dex_cluster_shm->mutex);
}

/* Clean shutdown: publish the final WAL position and give the role back. */
void
dex_cluster_release_writer(void)
{
	DexError	err;
	uint64		seen;
	uint64		addr = dex_cluster_shm ? dex_cluster_shm->registry : 0;
	uint64		durable;

	if (!addr || dex_cluster_shm->writer_state != DEX_WRITER_CLAIMED || RecoveryInProgress())
		return;
	durable = dex_wal_durable_boundary(true);
	memset(&err, 0, sizeof(err));
	/* removal_lsn first: writer_hwm never passes it (K7) */
	if (dex_registry_set_removal_lsn(addr, durable, &err) == DEX_OK &&
		dex_registry_raise_hwm(addr, durable, &err) == DEX_OK)
		(void) dex_registry_cas_writer(addr, dex_life(), 0, &seen, &err);
}

/* ---------------------------------------------------------------------
 * the standby's beat
 * ---------------------------------------------------------------------
 */

static uint64 my_standby_beat = 0;

/* The primary detached our slot (no lock held): stop answering now, say so. */
static void
dex_standby_detached(uint64 replay)
{
	SpinLockAcquire(&dex_cluster_shm->mutex);
	dex_cluster_shm->standby_slot = -1;
	dex_cluster_shm->standby_lease_until = 0;
	dex_cluster_shm->standby_detached = true;
	SpinLockRelease(&dex_cluster_shm->mutex);
	dex_lag_log_detached(replay);
}

static void
dex_standby_beat(uint64 addr, uint64 mine)
{
	DexError	err;
	TimeLineID	tli;
	uint64		replay = (uint64) GetXLogReplayRecPtr(&tli);
	TimestampTz issued = GetCurrentTimestamp();
	int			ok = 0;
	char		why[256];

	memset(&err, 0, sizeof(err));
	{
		/* an upgraded cluster took the trees over: stop answering at once */
		DexRegistryState cur;

		if (dex_registry_read(addr, &cur, &err) != DEX_OK)
		{
			dex_cluster_set_problem(dex_cluster_shm->standby_problem, err.message);
			return;
		}
		if (cur.writer_life == DEX_WRITER_MOVED)
		{
			SpinLockAcquire(&dex_cluster_shm->mutex);
			dex_cluster_shm->standby_lease_until = 0;
			snprintf(dex_cluster_shm->standby_problem, sizeof(dex_cluster_shm->standby_problem),
					 "dex's remote trees were taken over by the cluster with system identifier " UINT64_FORMAT
					 " (pg_upgrade)", cur.moved_to);
			SpinLockRelease(&dex_cluster_shm->mutex);
			return;
		}
		if (dex_cluster_shm->standby_slot >= 0 && cur.slots[dex_cluster_shm->standby_slot].owner == mine &&
			(cur.slots[dex_cluster_shm->standby_slot].beat & DEX_SLOT_DETACHED))
		{
			/* lagged too far: stop answering now, claim again once replay keeps up */
			dex_standby_detached(replay);
		}
		if (dex_cluster_shm->standby_slot < 0 &&
			!dex_lag_standby_keeps_up(replay, cur.removal_lsn, issued, dex_standby_wait_timeout_ms,
									  why, sizeof(why)))
		{
			dex_cluster_set_problem(dex_cluster_shm->standby_problem, why);
			return;
		}
	}
	if (dex_cluster_shm->standby_slot < 0)
	{
		int			slot = -1;
		bool		was_detached;
		DexRegistryState st;

		if (dex_registry_claim_slot(addr, mine, replay, tli, &slot, &my_standby_beat, &err) != DEX_OK)
		{
			dex_cluster_set_problem(dex_cluster_shm->standby_problem, err.message);
			return;
		}
		if (slot < 0)
		{
			dex_cluster_set_problem(dex_cluster_shm->standby_problem,
									"Every standby slot of dex's cluster registry is taken by a live standby");
			return;
		}
		/* removals the primary made without us: replay must pass them first */
		if (dex_registry_read(addr, &st, &err) != DEX_OK)
		{
			dex_cluster_set_problem(dex_cluster_shm->standby_problem, err.message);
			return;
		}
		SpinLockAcquire(&dex_cluster_shm->mutex);
		was_detached = dex_cluster_shm->standby_detached;
		dex_cluster_shm->standby_slot = slot;
		dex_cluster_shm->standby_detached = false;
		dex_cluster_shm->standby_required_lsn = st.removal_lsn;
		dex_cluster_shm->standby_lease_until = TimestampTzPlusMilliseconds(issued, DEX_LEASE_MS);
		dex_cluster_shm->standby_problem[0] = '\0';
		SpinLockRelease(&dex_cluster_shm->mutex);
		if (was_detached)
			dex_lag_log_keeps_up(st.removal_lsn);
		return;
	}
	if (dex_registry_standby_beat(addr, dex_cluster_shm->standby_slot, mine, &my_standby_beat, replay, &ok,
								  &err) != DEX_OK)
	{
		dex_cluster_set_problem(dex_cluster_shm->standby_problem, err.message);
		return;
	}
	if (!ok)
	{
		/*
		 * The renewal lost: a detach that landed between this beat's read and
		 * its CAS is a detach all the same (the next beat, slot-less, would
		 * never see the bit), anything else an expiry.
		 */
		DexRegistryState cur;
		int			slot = dex_cluster_shm->standby_slot;

		if (dex_registry_read(addr, &cur, &err) == DEX_OK && cur.slots[slot].owner == mine &&
			(cur.slots[slot].beat & DEX_SLOT_DETACHED))
		{
			dex_standby_detached(replay);
			if (!dex_lag_standby_keeps_up(replay, cur.removal_lsn, issued, dex_standby_wait_timeout_ms, why,
										  sizeof(why)))
				dex_cluster_set_problem(dex_cluster_shm->standby_problem, why);
			return;
		}
	}
	SpinLockAcquire(&dex_cluster_shm->mutex);
	if (ok)
	{
		dex_cluster_shm->standby_lease_until = TimestampTzPlusMilliseconds(issued, DEX_LEASE_MS);
		dex_cluster_shm->standby_problem[0] = '\0';
	}
	else
	{
		/* expired by the primary: register again (and catch up) next beat */
		dex_cluster_shm->standby_slot = -1;
		strlcpy(dex_cluster_shm->standby_problem,
				"The primary stopped waiting for this standby (it was silent or lagged too long)",
				sizeof(dex_cluster_shm->standby_problem));
	}
	SpinLockRelease(&dex_cluster_shm->mutex);
}

static void dex_cluster_beat_once(bool standby, const DexError *config_err);

/*
 * One beat of the dex worker (dexworker.c), every DEX_BEAT_MS. config_err: why
 * the worker could not configure the core (NULL: it is configured).
 */
void
dex_cluster_beat(const DexError *config_err)
{
	bool		standby = RecoveryInProgress();

	if (dex_cluster_shm == NULL)
		return;
	dex_stats_private(1);		/* registry traffic is not index work (dex_stats()) */
	PG_TRY();
	{
		dex_cluster_beat_once(standby, config_err);
	}
	PG_FINALLY();
	{
		dex_stats_private(0);
	}
	PG_END_TRY();
}

static void
dex_cluster_beat_once(bool standby, const DexError *config_err)
{
	DexError	err;
	uint64		addr;

	memset(&err, 0, sizeof(err));
	if (config_err != NULL)
	{
		dex_cluster_set_problem(standby ? dex_cluster_shm->standby_problem : dex_cluster_shm->writer_problem,
								config_err->message);
		return;
	}
	dex_registry_forget_if_lost();
	addr = dex_registry_find(!standby, &err);
	if (addr == 0)
	{
		dex_cluster_set_problem(standby ? dex_cluster_shm->standby_problem : dex_cluster_shm->writer_problem,
								err.message[0] ? err.message
								: "The primary has not created dex's cluster registry yet");
		return;
	}
	if (standby)
		dex_standby_beat(addr, dex_life());
	else
	{
		if (dex_cluster_shm->standby_slot >= 0)
		{
			/* promoted: this server's standby slot is no longer needed */
			SpinLockAcquire(&dex_cluster_shm->mutex);
			dex_cluster_shm->standby_slot = -1;
			SpinLockRelease(&dex_cluster_shm->mutex);
		}
		dex_primary_beat(addr, dex_life());
	}
}

/* ---------------------------------------------------------------------
 * backends
 * ---------------------------------------------------------------------
 */

/*
 * Before any use of a dex index. On a primary: this server must hold the
 * writer role (waits a few seconds for the worker after a restart or a
 * promotion). On a hot standby: a valid lease, and replay past every removal
 * the primary made without waiting for this standby. (A write-back index then
 * waits for the primary's write-backs: dexwbstandby.c.)
 */
/*
 * The test dex_cluster_check() makes on every use of an index, without
 * building the messages of its slow path: one clock read and the mutex.
 */
static inline bool
dex_cluster_usable(bool standby, TimestampTz now)
{
	bool		ok;
	/* read before our mutex: it takes the recovery state's own spinlock */
	uint64		replay = standby ? (uint64) GetXLogReplayRecPtr(NULL) : 0;

	SpinLockAcquire(&dex_cluster_shm->mutex);
	if (standby)
		ok = dex_cluster_shm->standby_slot >= 0 && now < dex_cluster_shm->standby_lease_until &&
			replay >= dex_cluster_shm->standby_required_lsn;
	else
		ok = dex_cluster_shm->writer_state == DEX_WRITER_CLAIMED && now < dex_cluster_shm->writer_lease_until;
	SpinLockRelease(&dex_cluster_shm->mutex);
	return ok;
}

void
dex_cluster_check(Relation index)
{
	TimestampTz start;
	bool		standby = RecoveryInProgress();
	char		problem[256];
	bool		detached = false;

	dex_require_preload();
	start = GetCurrentTimestamp();
	if (dex_cluster_usable(standby, start))
		return;
	for (;;)
	{
		TimestampTz now = GetCurrentTimestamp();
		bool		ok;
		/* read before our mutex: it takes the recovery state's own spinlock */
		uint64		replay = standby ? (uint64) GetXLogReplayRecPtr(NULL) : 0;

		SpinLockAcquire(&dex_cluster_shm->mutex);
		if (standby)
		{
			ok = dex_cluster_shm->standby_slot >= 0 && now < dex_cluster_shm->standby_lease_until &&
				replay >= dex_cluster_shm->standby_required_lsn;
			if (dex_cluster_shm->standby_slot >= 0 && now < dex_cluster_shm->standby_lease_until && !ok)
				snprintf(problem, sizeof(problem),
						 "Replay has not yet reached %X/%X, where the primary removed index entries while this standby was not registered",
						 LSN_FORMAT_ARGS((XLogRecPtr) dex_cluster_shm->standby_required_lsn));
			else
				strlcpy(problem, dex_cluster_shm->standby_problem[0] ? dex_cluster_shm->standby_problem
						: "This standby holds no valid lease in dex's cluster registry", sizeof(problem));
			detached = dex_cluster_shm->standby_detached;
		}
		else
		{
			ok = dex_cluster_shm->writer_state == DEX_WRITER_CLAIMED && now < dex_cluster_shm->writer_lease_until;
			strlcpy(problem, dex_cluster_shm->writer_problem[0] ? dex_cluster_shm->writer_problem
					: "This server does not hold the writer role of dex's remote memory yet", sizeof(problem));
			if (dex_cluster_shm->writer_state == DEX_WRITER_REFUSED)
			{
				SpinLockRelease(&dex_cluster_shm->mutex);
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("index \"%s\" lost its remote memory",
								RelationGetRelationName(index)),
						 errdetail("%s.", problem),
						 errhint("This server's heap is not the one dex's remote trees belong to. Give it memory "
								 "nodes of its own (dex.memnodes) and REINDEX INDEX %s, or drop its dex indexes.",
								 quote_identifier(RelationGetRelationName(index)))));
			}
		}
		SpinLockRelease(&dex_cluster_shm->mutex);
		if (ok)
			return;
		if (TimestampDifferenceExceeds(start, now, standby ? 5000 : DEX_LEASE_MS * 2 + DEX_MARGIN_MS + 1000))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("index \"%s\" cannot be used on this %s now",
							RelationGetRelationName(index), standby ? "standby" : "server"),
					 errdetail("%s.", problem),
					 detached ? errhint("The primary detached this standby: its replay lagged more than dex.standby_wait_timeout "
										"(paused, recovery_min_apply_delay, or held by a query), and a lagging standby must not "
										"hold the primary's writes back. Let replay catch up, or read without the dex index here.")
					 : errhint(standby ? "Check that the dex worker runs, that dex.memnodes matches the primary's, and that replay progresses."
							   : "Check that the dex worker runs and the memory nodes are reachable.")));
		CHECK_FOR_INTERRUPTS();
		pg_usleep(10 * 1000L);
	}
}

/*
 * What dexhorizon.c's retention needs of the writer's state, in one read:
 * the registry, the live standbys' replay floor and the hwm as the last
 * beats read and published, and this server's writer lease (no clock read
 * here: an insert reads the view for every row).
 */
void
dex_cluster_writer_view(DexWriterView *v)
{
	SpinLockAcquire(&dex_cluster_shm->mutex);
	v->registry = dex_cluster_shm->registry;
	v->standby_floor = dex_cluster_shm->standby_floor;
	v->published_hwm = dex_cluster_shm->published_hwm;
	v->writer_lease_until = dex_cluster_shm->writer_state == DEX_WRITER_CLAIMED ? dex_cluster_shm->writer_lease_until : 0;
	SpinLockRelease(&dex_cluster_shm->mutex);
}

/*
 * A backend may rely on hwm: the registry's removal_lsn covers it (raised by
 * the backend, dexhorizon.c; writer_hwm itself follows at the next beat).
 */
void
dex_cluster_note_published_hwm(uint64 hwm)
{
	SpinLockAcquire(&dex_cluster_shm->mutex);
	if (hwm > dex_cluster_shm->published_hwm)
		dex_cluster_shm->published_hwm = hwm;
	SpinLockRelease(&dex_cluster_shm->mutex);
}

/* How far the trees may depend on WAL (no remote access: callable anywhere). */
uint64
dex_cluster_published_hwm(void)
{
	return dex_cluster_shm == NULL ? 0 : dcs_read(&dex_cluster_shm->published_hwm);
}

/*
 * May this server free remote memory (DROP / REINDEX at commit)? Only the
 * writer: a refused server (a restored backup, an old primary) shares the
 * memory nodes with the real owner. Waits briefly after a restart for the
 * worker's first claim. Never errors (runs at commit).
 */
bool
dex_cluster_is_writer(void)
{
	for (int i = 0; i < (DEX_LEASE_MS * 2 + DEX_MARGIN_MS) / 10; i++)
	{
		DexWriterState st;

		if (dex_cluster_shm == NULL || RecoveryInProgress())
			return false;
		SpinLockAcquire(&dex_cluster_shm->mutex);
		st = dex_cluster_shm->writer_state;
		SpinLockRelease(&dex_cluster_shm->mutex);
		if (st != DEX_WRITER_UNKNOWN)
			return st == DEX_WRITER_CLAIMED;
		pg_usleep(10 * 1000L);
	}
	return false;
}

/* Orphan decisions are the writer's only (never a standby's, a clone's or a restore's). */
void
dex_cluster_require_writer(const char *what)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("%s cannot run during recovery", what),
				 errhint("Run it on the primary.")));
	if (dex_cluster_shm == NULL || dex_cluster_shm->writer_state != DEX_WRITER_CLAIMED)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s can run only on the server that writes dex's remote memory", what),
				 errdetail("%s.", dex_cluster_shm && dex_cluster_shm->writer_problem[0] ? dex_cluster_shm->writer_problem
						   : "This server does not hold the writer role")));
}

/*
 * This cluster's registry as the dex worker found it (0: not yet, or memory
 * node 0 restarted and it has not found the new one).
 */
uint64
dex_cluster_registry(void)
{
	return dex_cluster_shm == NULL ? 0 : dcs_read(&dex_cluster_shm->registry);
}
