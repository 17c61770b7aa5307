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

typedef enum DexWriterState
{
	DEX_WRITER_UNKNOWN = 0,
	DEX_WRITER_CLAIMED,
	DEX_WRITER_REFUSED
} DexWriterState;

typedef struct DexClusterShared
{
	slock_t		mutex;
	uint64		registry;		/* GAddr of the registry block (0: not yet) */
	uint64		registry_inc;	/* memory node 0's incarnation when it was found */
	/* startup facts, set by the postmaster when shared memory is made */
	uint64		life;			/* this compute server's life (dex_life) */
	bool		clean_start;	/* pg_control said: shut down cleanly */
	uint64		clean_end_lsn;	/* then: its last checkpoint */
	uint64		prev_life;		/* the life before this one in this postmaster */
	/* primary */
	DexWriterState writer_state;
	char		writer_problem[256];
	TimestampTz writer_lease_until;
	uint64		published_hwm;	/* how far the trees may depend on WAL: <= the
								 * registry's removal_lsn, and writer_hwm as of a beat */
	uint64		standby_floor;	/* min replay of live standbys; UINT64_MAX: none */
	uint64		flush_request;	/* the registry's flush_request_lsn at the last beat or poll */
	int			live_standbys;	/* live slots at the last beat */
	Latch	   *worker_latch;	/* the dex worker's (NULL: none running) */
	/* standby */
	TimestampTz standby_hurry_until;	/* a scan waits for write-backs: beat often until then */
	int			standby_slot;	/* -1: none */
	bool		standby_detached;	/* the primary detached it (dexlag.c); not claimed since */
	TimestampTz standby_lease_until;
	uint64		standby_required_lsn;
	char		standby_problem[256];
} DexClusterShared;

static DexClusterShared *dcs = NULL;
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

	dcs = (DexClusterShared *) mem;
	if (found)
		return;
	while (life == 0)
		if (!pg_strong_random(&life, sizeof(life)))
			elog(FATAL, "dex: could not generate a random life id");
	memset(dcs, 0, sizeof(*dcs));
	SpinLockInit(&dcs->mutex);
	dcs->life = life;
	dcs->standby_slot = -1;
	dcs->standby_floor = PG_UINT64_MAX;
	dcs->prev_life = dex_postmaster_last_life;
	dex_postmaster_last_life = life;
	{
		bool		crc_ok = false;
		ControlFileData *cf = get_controlfile(DataDir, &crc_ok);

		if (crc_ok && (cf->state == DB_SHUTDOWNED || cf->state == DB_SHUTDOWNED_IN_RECOVERY))
		{
			dcs->clean_start = true;
			dcs->clean_end_lsn = (uint64) cf->checkPoint;
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
	if (dcs == NULL || dcs->life == 0)
		elog(ERROR, "dex: shared memory is not set up");
	return dcs->life;
}

static void
dex_cluster_set_problem(char *dst, const char *msg)
{
	SpinLockAcquire(&dcs->mutex);
	strlcpy(dst, msg, 256);
	SpinLockRelease(&dcs->mutex);
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

	if (dcs->registry)
		return dcs->registry;
	if (dex_memnode_count() > 0 && dex_memnode_incarnation(0, &inc, err) != DEX_OK)
		return 0;
	addr = dex_cluster_registry_lookup(GetSystemIdentifier(), create, create ? dex_wal_durable_boundary(true) : 0, err);
	if (addr == 0)
		return 0;
	SpinLockAcquire(&dcs->mutex);
	dcs->registry = addr;
	dcs->registry_inc = inc;
	SpinLockRelease(&dcs->mutex);
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
	if (dcs->registry == 0 || dex_memnode_incarnation(0, &inc, &err) != DEX_OK || inc == dcs->registry_inc)
		return;
	ereport(LOG, (errmsg("dex: memory node 0 restarted and lost the cluster registry; registering again")));
	SpinLockAcquire(&dcs->mutex);
	dcs->registry = 0;
	if (dcs->writer_state == DEX_WRITER_CLAIMED)
		dcs->writer_state = DEX_WRITER_UNKNOWN;
	dcs->standby_slot = -1;
	SpinLockRelease(&dcs->mutex);
}

/* ---------------------------------------------------------------------
 * the primary's beat
 * ---------------------------------------------------------------------
 */

/* How far this server's WAL reached when this life began. */
static uint64
dex_wal_end_at_start(void)
{
	if (dcs->clean_start)
		return dcs->clean_end_lsn;
	return (uint64) GetXLogReplayRecPtr(NULL);
}

static void
dex_writer_refuse(const char *why)
{
	SpinLockAcquire(&dcs->mutex);
	dcs->writer_state = DEX_WRITER_REFUSED;
	strlcpy(dcs->writer_problem, why, sizeof(dcs->writer_problem));
	SpinLockRelease(&dcs->mutex);
}

/* One word of the shared state, read under its mutex. */
static uint64
dcs_read(const uint64 *field)
{
	uint64		v;

	SpinLockAcquire(&dcs->mutex);
	v = *field;
	SpinLockRelease(&dcs->mutex);
	return v;
}

/* Observation of another writer's beat (worker-local). */
static uint64 seen_writer = 0;
static uint64 seen_beat = 0;
static TimestampTz seen_since = 0;
static uint64 my_writer_beat = 0;
static uint64 slot_beat[DEX_MAX_STANDBYS];	/* standby beats as last seen */
static TimestampTz slot_since[DEX_MAX_STANDBYS];	/* ... and since when */

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
	SpinLockAcquire(&dcs->mutex);
	writer = dcs->writer_state == DEX_WRITER_CLAIMED && issued < dcs->writer_lease_until;
	SpinLockRelease(&dcs->mutex);
	if ((writer ? dex_registry_raise_removal_read(addr, flush, &st, &err)
		 : dex_registry_read(addr, &st, &err)) != DEX_OK)
	{
		dex_cluster_set_problem(dcs->writer_problem, err.message);
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
	if (st.writer_life != mine)
	{
		uint64		seen = 0;

		if (dcs->writer_state == DEX_WRITER_CLAIMED)
		{
			/* taken over: another primary claimed the trees (we were silent too long) */
			snprintf(why, sizeof(why), "Another primary (life %016llx) took over dex's remote memory",
					 (unsigned long long) st.writer_life);
			dex_writer_refuse(why);
			return;
		}
		if (!dex_wal_covers((uint32) st.writer_tli, Max(st.writer_hwm, st.removal_lsn), dex_wal_end_at_start(),
							why, sizeof(why)))
		{
			dex_writer_refuse(why);
			return;
		}
		if (st.writer_life != 0 && st.writer_life != dcs->prev_life)
		{
			/* the previous writer must be gone: silent for a lease and a margin */
			if (st.writer_life != seen_writer || st.writer_beat != seen_beat)
			{
				seen_writer = st.writer_life;
				seen_beat = st.writer_beat;
				seen_since = issued;
			}
			if (!TimestampDifferenceExceeds(seen_since, issued, DEX_LEASE_MS + DEX_MARGIN_MS))
			{
				snprintf(why, sizeof(why),
						 "Waiting for the previous primary (life %016llx) to be gone from dex's remote memory",
						 (unsigned long long) st.writer_life);
				dex_cluster_set_problem(dcs->writer_problem, why);
				return;
			}
		}
		if (dex_registry_cas_writer(addr, st.writer_life, mine, &seen, &err) != DEX_OK || seen != st.writer_life)
			return;				/* raced: next beat */
		ereport(LOG, (errmsg("dex: this server is now the writer of dex's remote memory (life %016llx)",
							 (unsigned long long) mine)));
		my_writer_beat = st.writer_beat;
	}
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
	if (dex_registry_writer_beat(addr, ++my_writer_beat, hwm, GetWALInsertionTimeLine(), &err) != DEX_OK)
	{
		dex_cluster_set_problem(dcs->writer_problem, err.message);
		return;
	}
	SpinLockAcquire(&dcs->mutex);
	dcs->writer_state = DEX_WRITER_CLAIMED;
	dcs->writer_problem[0] = '\0';
	dcs->writer_lease_until = TimestampTzPlusMilliseconds(issued, DEX_LEASE_MS);
	dcs->standby_floor = floor;
	dcs->flush_request = st.flush_request_lsn;
	dcs->live_standbys = live;
	if (hwm > dcs->published_hwm)
		dcs->published_hwm = hwm;
	SpinLockRelease(&dcs->mutex);
}

/*
 * The writer's dex worker: the position up to which a hot standby's scan
 * waits for write-backs (read at the last beat; 0: none asked).
 */
uint64
dex_cluster_flush_request(void)
{
	return dcs == NULL ? 0 : dcs_read(&dcs->flush_request);
}

/*
 * A standby's scan of a write-back index waits for the writer's write-backs
 * to pass `lsn`: ask its worker to flush now rather than at its next
 * dex.writeback_interval. A hint: a failure only means waiting longer.
 */
void
dex_cluster_request_flush(uint64 lsn)
{
	DexError	err;
	uint64		addr = dex_cluster_registry();

	if (!addr)
		return;
	memset(&err, 0, sizeof(err));
	if (dex_registry_request_flush(addr, lsn, &err) != DEX_OK)
		elog(DEBUG1, "dex: could not ask the primary to write back: %s", err.message);
	/* our replay must reach the registry at once: the primary waits for it to write back */
	SpinLockAcquire(&dcs->mutex);
	dcs->standby_hurry_until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 250);
	SpinLockRelease(&dcs->mutex);
	if (dcs->worker_latch != NULL)
		SetLatch(dcs->worker_latch);
}

/* The dex worker's latch, for scans that hurry it (NULL when it exits). */
void
dex_cluster_set_worker_latch(struct Latch *latch)
{
	if (dcs != NULL)
		dcs->worker_latch = latch;
}

/*
 * Whether the dex worker waits DEX_HURRY_MS instead of a beat: on a standby,
 * while a scan waits for write-backs; on a primary, while standbys are live
 * (one may ask for a write-back: dex_cluster_poll_flush_request).
 */
bool
dex_cluster_hurry(void)
{
	bool		hurry;

	if (dcs == NULL)
		return false;
	SpinLockAcquire(&dcs->mutex);
	if (RecoveryInProgress())
		hurry = GetCurrentTimestamp() < dcs->standby_hurry_until;
	else
		hurry = dcs->live_standbys > 0 && dcs->writer_state == DEX_WRITER_CLAIMED;
	SpinLockRelease(&dcs->mutex);
	return hurry;
}

/*
 * The writer's dex worker between beats: the registry's flush request as it
 * is now (one remote read), also kept for dex_cluster_flush_request(). 0 if
 * the registry cannot be read (the next beat reports why).
 */
uint64
dex_cluster_poll_flush_request(void)
{
	DexError	err;
	DexRegistryState st;
	uint64		addr = dex_cluster_registry();

	if (!addr)
		return 0;
	memset(&err, 0, sizeof(err));
	dex_stats_private(1);		/* registry traffic is not index work (dex_stats()) */
	if (dex_registry_read(addr, &st, &err) != DEX_OK)
		st.flush_request_lsn = 0;
	dex_stats_private(0);
	if (st.flush_request_lsn == 0)
		return 0;
	SpinLockAcquire(&dcs->mutex);
	if (st.flush_request_lsn > dcs->flush_request)
		dcs->flush_request = st.flush_request_lsn;
	SpinLockRelease(&dcs->mutex);
	return st.flush_request_lsn;
}

/* Clean shutdown: publish the final WAL position and give the role back. */
void
dex_cluster_release_writer(void)
{
	DexError	err;
	uint64		seen;
	uint64		addr = dcs ? dcs->registry : 0;
	uint64		durable;

	if (!addr || dcs->writer_state != DEX_WRITER_CLAIMED || RecoveryInProgress())
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
			dex_cluster_set_problem(dcs->standby_problem, err.message);
			return;
		}
		if (cur.writer_life == DEX_WRITER_MOVED)
		{
			SpinLockAcquire(&dcs->mutex);
			dcs->standby_lease_until = 0;
			snprintf(dcs->standby_problem, sizeof(dcs->standby_problem),
					 "dex's remote trees were taken over by the cluster with system identifier " UINT64_FORMAT
					 " (pg_upgrade)", cur.moved_to);
			SpinLockRelease(&dcs->mutex);
			return;
		}
		if (dcs->standby_slot >= 0 && cur.slots[dcs->standby_slot].owner == mine &&
			(cur.slots[dcs->standby_slot].beat & DEX_SLOT_DETACHED))
		{
			/* lagged too far: stop answering now, claim again once replay keeps up */
			SpinLockAcquire(&dcs->mutex);
			dcs->standby_slot = -1;
			dcs->standby_lease_until = 0;
			dcs->standby_detached = true;
			SpinLockRelease(&dcs->mutex);
			dex_lag_log_detached(replay);
		}
		if (dcs->standby_slot < 0 &&
			!dex_lag_standby_keeps_up(replay, cur.removal_lsn, issued, dex_standby_wait_timeout_ms,
									  why, sizeof(why)))
		{
			dex_cluster_set_problem(dcs->standby_problem, why);
			return;
		}
	}
	if (dcs->standby_slot < 0)
	{
		int			slot = -1;
		bool		was_detached;
		DexRegistryState st;

		if (dex_registry_claim_slot(addr, mine, replay, tli, &slot, &my_standby_beat, &err) != DEX_OK)
		{
			dex_cluster_set_problem(dcs->standby_problem, err.message);
			return;
		}
		if (slot < 0)
		{
			dex_cluster_set_problem(dcs->standby_problem,
									"Every standby slot of dex's cluster registry is taken by a live standby");
			return;
		}
		/* removals the primary made without us: replay must pass them first */
		if (dex_registry_read(addr, &st, &err) != DEX_OK)
		{
			dex_cluster_set_problem(dcs->standby_problem, err.message);
			return;
		}
		SpinLockAcquire(&dcs->mutex);
		was_detached = dcs->standby_detached;
		dcs->standby_slot = slot;
		dcs->standby_detached = false;
		dcs->standby_required_lsn = st.removal_lsn;
		dcs->standby_lease_until = TimestampTzPlusMilliseconds(issued, DEX_LEASE_MS);
		dcs->standby_problem[0] = '\0';
		SpinLockRelease(&dcs->mutex);
		if (was_detached)
			dex_lag_log_keeps_up(st.removal_lsn);
		return;
	}
	if (dex_registry_standby_beat(addr, dcs->standby_slot, mine, &my_standby_beat, replay, &ok, &err) != DEX_OK)
	{
		dex_cluster_set_problem(dcs->standby_problem, err.message);
		return;
	}
	SpinLockAcquire(&dcs->mutex);
	if (ok)
	{
		dcs->standby_lease_until = TimestampTzPlusMilliseconds(issued, DEX_LEASE_MS);
		dcs->standby_problem[0] = '\0';
	}
	else
	{
		/* expired by the primary: register again (and catch up) next beat */
		dcs->standby_slot = -1;
		strlcpy(dcs->standby_problem, "The primary stopped waiting for this standby (it was silent or lagged too long)",
				sizeof(dcs->standby_problem));
	}
	SpinLockRelease(&dcs->mutex);
}

static void dex_cluster_beat_once(bool standby, const DexError *config_err);

/*
 * One beat of the dex worker (dexguc.c), every DEX_BEAT_MS. config_err: why
 * the worker could not configure the core (NULL: it is configured).
 */
void
dex_cluster_beat(const DexError *config_err)
{
	bool		standby = RecoveryInProgress();

	if (dcs == NULL)
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
		dex_cluster_set_problem(standby ? dcs->standby_problem : dcs->writer_problem, config_err->message);
		return;
	}
	dex_registry_forget_if_lost();
	addr = dex_registry_find(!standby, &err);
	if (addr == 0)
	{
		dex_cluster_set_problem(standby ? dcs->standby_problem : dcs->writer_problem,
								err.message[0] ? err.message
								: "The primary has not created dex's cluster registry yet");
		return;
	}
	if (standby)
		dex_standby_beat(addr, dex_life());
	else
	{
		if (dcs->standby_slot >= 0)
		{
			/* promoted: this server's standby slot is no longer needed */
			SpinLockAcquire(&dcs->mutex);
			dcs->standby_slot = -1;
			SpinLockRelease(&dcs->mutex);
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

	SpinLockAcquire(&dcs->mutex);
	if (standby)
		ok = dcs->standby_slot >= 0 && now < dcs->standby_lease_until &&
			replay >= dcs->standby_required_lsn;
	else
		ok = dcs->writer_state == DEX_WRITER_CLAIMED && now < dcs->writer_lease_until;
	SpinLockRelease(&dcs->mutex);
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

		SpinLockAcquire(&dcs->mutex);
		if (standby)
		{
			ok = dcs->standby_slot >= 0 && now < dcs->standby_lease_until &&
				replay >= dcs->standby_required_lsn;
			if (dcs->standby_slot >= 0 && now < dcs->standby_lease_until && !ok)
				snprintf(problem, sizeof(problem),
						 "Replay has not yet reached %X/%X, where the primary removed index entries while this standby was not registered",
						 LSN_FORMAT_ARGS((XLogRecPtr) dcs->standby_required_lsn));
			else
				strlcpy(problem, dcs->standby_problem[0] ? dcs->standby_problem
						: "This standby holds no valid lease in dex's cluster registry", sizeof(problem));
			detached = dcs->standby_detached;
		}
		else
		{
			ok = dcs->writer_state == DEX_WRITER_CLAIMED && now < dcs->writer_lease_until;
			strlcpy(problem, dcs->writer_problem[0] ? dcs->writer_problem
					: "This server does not hold the writer role of dex's remote memory yet", sizeof(problem));
			if (dcs->writer_state == DEX_WRITER_REFUSED)
			{
				SpinLockRelease(&dcs->mutex);
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
		SpinLockRelease(&dcs->mutex);
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
	SpinLockAcquire(&dcs->mutex);
	v->registry = dcs->registry;
	v->standby_floor = dcs->standby_floor;
	v->published_hwm = dcs->published_hwm;
	v->writer_lease_until = dcs->writer_state == DEX_WRITER_CLAIMED ? dcs->writer_lease_until : 0;
	SpinLockRelease(&dcs->mutex);
}

/*
 * A backend may rely on hwm: the registry's removal_lsn covers it (raised by
 * the backend, dexhorizon.c; writer_hwm itself follows at the next beat).
 */
void
dex_cluster_note_published_hwm(uint64 hwm)
{
	SpinLockAcquire(&dcs->mutex);
	if (hwm > dcs->published_hwm)
		dcs->published_hwm = hwm;
	SpinLockRelease(&dcs->mutex);
}

/* How far the trees may depend on WAL (no remote access: callable anywhere). */
uint64
dex_cluster_published_hwm(void)
{
	return dcs == NULL ? 0 : dcs_read(&dcs->published_hwm);
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

		if (dcs == NULL || RecoveryInProgress())
			return false;
		SpinLockAcquire(&dcs->mutex);
		st = dcs->writer_state;
		SpinLockRelease(&dcs->mutex);
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
	if (dcs == NULL || dcs->writer_state != DEX_WRITER_CLAIMED)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s can run only on the server that writes dex's remote memory", what),
				 errdetail("%s.", dcs && dcs->writer_problem[0] ? dcs->writer_problem
						   : "This server does not hold the writer role")));
}

/*
 * This cluster's registry as the dex worker found it (0: not yet, or memory
 * node 0 restarted and it has not found the new one).
 */
uint64
dex_cluster_registry(void)
{
	return dcs == NULL ? 0 : dcs_read(&dcs->registry);
}
