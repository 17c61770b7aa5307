/*
 * dexlag.c — a hot standby whose replay lags far behind is detached, so it
 * never holds the primary back (src/README.md "Hot standbys", detaching).
 *
 * The primary keeps a row journaled, a dirty write-back leaf in its cache
 * and VACUUM's removals waiting until every live standby replayed the WAL
 * they depend on. A standby whose replay stands still -- paused, delayed by
 * recovery_min_apply_delay, held by a long query -- would stall the
 * primary's inserts within a few hundred rows and fail its VACUUMs. As
 * PostgreSQL itself does (the primary never waits for a hot standby's
 * queries; the standby's own queries give way), the standby gives way here:
 *   - the primary's dex worker times every live standby: one that has not
 *     replayed, within dex.standby_wait_timeout, the WAL the primary had
 *     durable when the clock started is detached (a registry CAS: its next
 *     renewal fails, so its lease runs out within DEX_LEASE_MS, and the
 *     slot, live until then, expires like any silent standby's a lease and
 *     a margin later). From then on nothing on the primary waits for it;
 *   - a standby without a slot claims one only once its replay keeps up: it
 *     passes a removal position read from the registry within half that
 *     timeout. A standby replaying an hour behind never claims, so it never
 *     stalls the primary again; one that caught up claims and answers.
 * A detached standby's dex queries fail with an ERROR saying so (never a
 * wrong answer: it answers only with a slot, after replaying past the
 * removals made without it). Promoted, it takes the trees over if the WAL
 * it received -- streaming goes on while replay lags, and promotion
 * replays all of it -- covers them (dexcluster.c, dex_wal_covers); a
 * standby cut off from the primary's WAL is refused (REINDEX).
 */
#include "dex.h"

#include "utils/timestamp.h"

/* primary (its dex worker): per slot, whose replay is timed since when */
static uint64 lag_owner[DEX_MAX_STANDBYS];
static uint64 lag_mark[DEX_MAX_STANDBYS];	/* must be replayed ... */
static TimestampTz lag_since[DEX_MAX_STANDBYS];	/* ... within the timeout from here */

/*
 * The primary's worker, at a beat, for live slot i (not detached, not its
 * own), `durable` being the durable end of its WAL now: detach the standby
 * if it did not replay the position marked timeout_ms ago.
 */
void
dex_lag_check_slot(uint64 addr, int i, const DexStandbySlot *s, uint64 durable, TimestampTz now,
				   int timeout_ms)
{
	DexError	err;
	int			done = 0;

	if (s->owner != lag_owner[i] || s->replay_lsn >= lag_mark[i])
	{
		/* caught up with the last mark (or a new standby): time the next */
		lag_owner[i] = s->owner;
		lag_mark[i] = durable;
		lag_since[i] = now;
		return;
	}
	if (!TimestampDifferenceExceeds(lag_since[i], now, timeout_ms))
		return;
	memset(&err, 0, sizeof(err));
	if (dex_registry_detach_slot(addr, i, s->beat, &done, &err) != DEX_OK || !done)
		return;					/* it renewed meanwhile (or a remote error): next beat */
	ereport(LOG,
			(errmsg("dex: standby (life %016llx) did not replay WAL up to %X/%X within dex.standby_wait_timeout "
					"(%d ms; it is at %X/%X): detached, the primary no longer waits for it",
					(unsigned long long) s->owner, LSN_FORMAT_ARGS((XLogRecPtr) lag_mark[i]), timeout_ms,
					LSN_FORMAT_ARGS((XLogRecPtr) s->replay_lsn)),
			 errdetail("It stops reading dex indexes until its replay keeps up again.")));
}

/* standby (its dex worker): the removal position its replay is timed to */
static uint64 catchup_mark = 0;
static TimestampTz catchup_since = 0;

/*
 * A standby's worker, before it claims a slot: does its replay keep up?
 * Yes if it is past the registry's removal position now, or passed the one
 * marked at an earlier beat within half of timeout_ms (half: a standby that
 * would be detached again at once does not claim). Otherwise it marks the
 * current one and says why in `why`.
 */
bool
dex_lag_standby_keeps_up(uint64 replay, uint64 removal_lsn, TimestampTz now, int timeout_ms, char *why,
						 size_t whylen)
{
	if (replay >= removal_lsn)
	{
		catchup_mark = 0;
		return true;
	}
	if (catchup_mark != 0 && replay >= catchup_mark)
	{
		bool		quick = !TimestampDifferenceExceeds(catchup_since, now, timeout_ms / 2);

		catchup_mark = 0;
		if (quick)
			return true;
	}
	if (catchup_mark == 0)
	{
		catchup_mark = removal_lsn;
		catchup_since = now;
	}
	snprintf(why, whylen,
			 "This standby's replay (at %X/%X) does not keep up with the primary (at %X/%X or later): "
			 "it reads dex indexes again once it replays the primary's WAL within half of dex.standby_wait_timeout",
			 LSN_FORMAT_ARGS((XLogRecPtr) replay), LSN_FORMAT_ARGS((XLogRecPtr) catchup_mark));
	return false;
}

/* The standby's worker found its slot detached (no lock held). */
void
dex_lag_log_detached(uint64 replay)
{
	ereport(LOG,
			(errmsg("dex: the primary detached this standby: its replay (at %X/%X) lagged more than "
					"dex.standby_wait_timeout", LSN_FORMAT_ARGS((XLogRecPtr) replay)),
			 errdetail("Queries here cannot use dex indexes until replay keeps up with the primary again.")));
}

/* ... and claimed a slot again (no lock held). */
void
dex_lag_log_keeps_up(uint64 removal_lsn)
{
	ereport(LOG,
			(errmsg("dex: replay keeps up with the primary again: this standby reads dex indexes once it "
					"replayed past %X/%X", LSN_FORMAT_ARGS((XLogRecPtr) removal_lsn))));
}
