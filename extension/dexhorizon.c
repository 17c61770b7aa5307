/*
 * dexhorizon.c — the WAL positions a primary's backends wait for before the
 * remote trees may depend on them (src/README.md "Hot standbys", K7):
 *   - retention: how far journal slots may be reused and dirty write-back
 *     frames written back -- flushed WAL that every live standby replayed,
 *     covered by the registry's removal_lsn before it is relied on (the
 *     worker's beats publish it as writer_hwm; a backend that cannot wait
 *     for the next beat raises removal_lsn and reads the slots here);
 *   - VACUUM's removals: recorded as the registry's removal_lsn, then waited
 *     for until every live standby replayed them.
 * The writer's state they read is kept by dexcluster.c's beats.
 */
#include "dex.h"

#include "miscadmin.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

/*
 * How far the trees may depend on WAL (journal slot reuse) without a remote
 * access: min(flushed WAL, every live standby's replay, what the registry
 * shows). The registry's value lags (the worker raises it each beat, and
 * dex_cluster_retention() when a journal lane is full), which only makes an
 * insert wait for a slot sooner, never reuse one too early. An insert passes
 * this, not dex_cluster_retention(): raising the registry on every insert
 * would add a remote round trip per row whenever WAL was flushed since.
 */
uint64
dex_cluster_retention_published(void)
{
	uint64		flush = dex_wal_durable();
	DexWriterView v;

	dex_cluster_writer_view(&v);
	return Min(Min(flush, v.standby_floor), v.published_hwm);
}

/*
 * The live standby slots' replay floor in a registry read, our own slot and
 * expired ones left out (UINT64_MAX: none). A slot whose beat stands still
 * counts until the worker's beat expires it.
 */
static uint64
dex_slots_floor(const DexRegistryState *st, uint64 mine)
{
	uint64		floor = PG_UINT64_MAX;

	for (int i = 0; i < DEX_MAX_STANDBYS; i++)
	{
		const DexStandbySlot *s = &st->slots[i];

		if (dex_slot_live(s) && s->owner != mine)
			floor = Min(floor, s->replay_lsn);
	}
	return floor;
}

/*
 * How far the trees may depend on WAL (journal slot reuse, write-backs):
 * min(flushed WAL, every live standby's replay), and never beyond what the
 * registry shows (raising it there first if needed: a remote round trip).
 * Primary only.
 *
 * The raise is the writer's beat in small (K7), one round trip: removal_lsn
 * is raised to flushed WAL and the slots are read in one batch, and the hwm
 * this server relies on goes no further than that read's floor and
 * removal_lsn. A standby that claimed its slot before the batch is in the
 * read; one that claims after it reads the raised removal_lsn and replays
 * past it before it answers -- so a frame kill written back on this raise
 * was replayed (its horizon's conflicts resolved) by every standby that can
 * answer. The registry's writer_hwm is left to the next beat: a new writer's
 * WAL must cover max(writer_hwm, removal_lsn), and removal_lsn covers what
 * this raise relies on. Without a valid writer lease nothing is raised (an
 * LSN of ours must not bind another primary's standbys).
 */
uint64
dex_cluster_retention(void)
{
	uint64		flush = dex_wal_durable();
	uint64		want;
	DexWriterView v;
	DexRegistryState st;
	DexError	err;

	dex_cluster_writer_view(&v);
	/*
	 * (the last beat's floor holding it back: wait for the next beat rather
	 * than read the slots every time a waiter polls)
	 */
	if (Min(flush, v.standby_floor) <= v.published_hwm || v.registry == 0 ||
		GetCurrentTimestamp() >= v.writer_lease_until)
		return Min(Min(flush, v.standby_floor), v.published_hwm);
	memset(&err, 0, sizeof(err));
	flush = dex_wal_durable_boundary(true);	/* published: a record end (dexutils.c) */
	if (dex_registry_raise_removal_read(v.registry, flush, &st, &err) != DEX_OK || st.writer_life != dex_life())
		return v.published_hwm;
	want = Min(Min(flush, dex_slots_floor(&st, dex_life())), st.removal_lsn);
	if (want <= v.published_hwm)
		return v.published_hwm;
	dex_cluster_note_published_hwm(want);
	return want;
}

/* A journal slot waits for lsn to fall under the retention horizon. */
void
dex_cluster_wait_retention(uint64 lsn, Relation index)
{
	TimestampTz start = GetCurrentTimestamp();

	while (dex_cluster_retention() < lsn)
	{
		if (TimestampDifferenceExceeds(start, GetCurrentTimestamp(),
									   dex_standby_wait_timeout_ms + DEX_DETACH_SLACK_MS))
			ereport(ERROR,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("%s%s%sa standby did not replay WAL up to %X/%X within dex.standby_wait_timeout",
							index ? "index \"" : "", index ? RelationGetRelationName(index) : "",
							index ? "\": " : "", LSN_FORMAT_ARGS((XLogRecPtr) lsn)),
					 errhint("A row stays recorded in dex's insert journal until every live standby replayed it, "
							 "and the dex worker detaches a standby that lags more than dex.standby_wait_timeout: "
							 "check that the dex worker runs.")));
		CHECK_FOR_INTERRUPTS();
		pg_usleep(2 * 1000L);
	}
}

/*
 * VACUUM on a primary: before removing entries whose removal the WAL up to
 * `target` justifies, record it in the registry (a standby registering later
 * replays past it first) and wait until every live standby has replayed it
 * (replaying the heap's prune records resolves its conflicts: no standby
 * snapshot can still need the entries). A standby silent for a lease and a
 * margin is expired instead.
 */
void
dex_cluster_wait_standbys(uint64 target, Relation index)
{
	TimestampTz start = GetCurrentTimestamp();
	uint64		addr = dex_cluster_registry();
	uint64		mine = dex_life();
	uint64		beats[DEX_MAX_STANDBYS];
	TimestampTz since[DEX_MAX_STANDBYS];
	DexError	err;

	if (addr == 0)
		return;
	memset(&err, 0, sizeof(err));
	if (dex_registry_set_removal_lsn(addr, target, &err) != DEX_OK)
		dex_report_error(err.code, &err, index);
	memset(beats, 0, sizeof(beats));
	memset(since, 0, sizeof(since));
	for (;;)
	{
		DexRegistryState st;
		TimestampTz now = GetCurrentTimestamp();
		bool		waiting = false;

		if (dex_registry_read(addr, &st, &err) != DEX_OK)
			dex_report_error(err.code, &err, index);
		for (int i = 0; i < DEX_MAX_STANDBYS; i++)
		{
			DexStandbySlot *s = &st.slots[i];

			if (!dex_slot_live(s) || s->owner == mine || s->replay_lsn >= target)
				continue;
			if (s->beat != beats[i])
			{
				beats[i] = s->beat;
				since[i] = now;
			}
			if (TimestampDifferenceExceeds(since[i], now, DEX_LEASE_MS + DEX_MARGIN_MS))
			{
				int			done = 0;

				if (dex_registry_expire_slot(addr, i, s->beat, &done, &err) != DEX_OK)
					dex_report_error(err.code, &err, index);
				if (done)
				{
					ereport(LOG,
							(errmsg("dex: a standby (life %016llx) was silent for %d ms: VACUUM no longer waits for it",
									(unsigned long long) s->owner, DEX_LEASE_MS + DEX_MARGIN_MS)));
					continue;
				}
			}
			waiting = true;
		}
		if (!waiting)
			return;
		if (TimestampDifferenceExceeds(start, now, dex_standby_wait_timeout_ms + DEX_DETACH_SLACK_MS))
			ereport(ERROR,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("index \"%s\": VACUUM waited dex.standby_wait_timeout for a standby to replay WAL up to %X/%X",
							RelationGetRelationName(index), LSN_FORMAT_ARGS((XLogRecPtr) target)),
					 errhint("The dex worker detaches a standby that lags more than dex.standby_wait_timeout: "
							 "check that the dex worker runs.")));
		CHECK_FOR_INTERRUPTS();
		pg_usleep(10 * 1000L);
	}
}

