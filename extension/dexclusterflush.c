/*
 * dexclusterflush.c — a hot standby's scan asks the primary for a write-back
 * (src/README.md "Write-back mode", hot standbys: "A waiting scan asks for
 * the write-back"), and the dex worker's hurried beats while one is pending.
 * The request is the registry's flush_request_lsn (CAS max, a hint); the
 * primary's worker reads it at its beats (dexcluster.c) and, for
 * DEX_PRIMARY_HURRY_MS after it saw one, every DEX_HURRY_MS between them.
 */
#include "dex.h"
#include "dexcluster.h"

#include "access/xlog.h"

/*
 * The writer's dex worker: the position up to which a hot standby's scan
 * waits for write-backs (read at the last beat; 0: none asked).
 */
uint64
dex_cluster_flush_request(void)
{
	uint64		v;

	if (dex_cluster_shm == NULL)
		return 0;
	SpinLockAcquire(&dex_cluster_shm->mutex);
	v = dex_cluster_shm->flush_request;
	SpinLockRelease(&dex_cluster_shm->mutex);
	return v;
}

/*
 * Did a hot standby's scan ask for a write-back within the last `ms`
 * (a rise of the registry's request this server read)?
 */
bool
dex_cluster_standby_asked_within(int ms)
{
	TimestampTz at;

	if (dex_cluster_shm == NULL)
		return false;
	SpinLockAcquire(&dex_cluster_shm->mutex);
	at = dex_cluster_shm->flush_request_at;
	SpinLockRelease(&dex_cluster_shm->mutex);
	return at != 0 && !TimestampDifferenceExceeds(at, GetCurrentTimestamp(), ms);
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
	SpinLockAcquire(&dex_cluster_shm->mutex);
	dex_cluster_shm->standby_hurry_until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 250);
	SpinLockRelease(&dex_cluster_shm->mutex);
	if (dex_cluster_shm->worker_latch != NULL)
		SetLatch(dex_cluster_shm->worker_latch);
}

/* The dex worker's latch, for scans that hurry it (NULL when it exits). */
void
dex_cluster_set_worker_latch(struct Latch *latch)
{
	if (dex_cluster_shm != NULL)
		dex_cluster_shm->worker_latch = latch;
}

/*
 * Whether the dex worker waits DEX_HURRY_MS instead of a beat: on a standby,
 * while a scan waits for write-backs; on a primary, while standbys are live
 * and one asked for a write-back within DEX_PRIMARY_HURRY_MS (it may ask
 * again soon: dex_cluster_poll_flush_request). A primary whose standbys ask
 * for nothing reads the registry at its beats only: until 2026-11-30 it read
 * it every DEX_HURRY_MS while any standby was live, 500 round trips a
 * second, so a quiet standby's first request is noticed at the next beat.
 */
bool
dex_cluster_hurry(void)
{
	bool		hurry;

	if (dex_cluster_shm == NULL)
		return false;
	SpinLockAcquire(&dex_cluster_shm->mutex);
	if (RecoveryInProgress())
		hurry = GetCurrentTimestamp() < dex_cluster_shm->standby_hurry_until;
	else
		hurry = dex_cluster_shm->live_standbys > 0 && dex_cluster_shm->writer_state == DEX_WRITER_CLAIMED &&
			GetCurrentTimestamp() < dex_cluster_shm->primary_hurry_until;
	SpinLockRelease(&dex_cluster_shm->mutex);
	return hurry;
}

/*
 * The primary: how many hot standbys held a live slot at its last beat
 * (0 before the first, and on a standby).
 */
int
dex_cluster_live_standbys(void)
{
	int			n;

	if (dex_cluster_shm == NULL || RecoveryInProgress())
		return 0;
	SpinLockAcquire(&dex_cluster_shm->mutex);
	n = dex_cluster_shm->writer_state == DEX_WRITER_CLAIMED ? dex_cluster_shm->live_standbys : 0;
	SpinLockRelease(&dex_cluster_shm->mutex);
	return n;
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
	SpinLockAcquire(&dex_cluster_shm->mutex);
	dex_cluster_note_flush_request(st.flush_request_lsn, GetCurrentTimestamp());
	SpinLockRelease(&dex_cluster_shm->mutex);
	return st.flush_request_lsn;
}
