/*
 * dexcluster.h — the cluster registry's shared-memory state, for the files
 * of dexcluster.c's concern (dexcluster.c, dexclusterflush.c). Not for the
 * rest of the extension: they call the functions dex.h declares.
 */
#ifndef DEXCLUSTER_H
#define DEXCLUSTER_H

#include "storage/latch.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

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
	bool		flush_request_read; /* flush_request was read once (its first value may be old) */
	TimestampTz flush_request_at;	/* when a standby's request last rose (0: not in this life) */
	int			live_standbys;	/* live slots at the last beat */
	TimestampTz primary_hurry_until;	/* a standby asked for a write-back lately: poll often until then */
	Latch	   *worker_latch;	/* the dex worker's (NULL: none running) */
	/* standby */
	TimestampTz standby_hurry_until;	/* a scan waits for write-backs: beat often until then */
	int			standby_slot;	/* -1: none */
	bool		standby_detached;	/* the primary detached it (dexlag.c); not claimed since */
	TimestampTz standby_lease_until;
	uint64		standby_required_lsn;
	char		standby_problem[256];
} DexClusterShared;

extern DexClusterShared *dex_cluster_shm;

/*
 * The primary read the registry's flush request `lsn` at `now` (the caller
 * holds the mutex): a new one hurries the worker for DEX_PRIMARY_HURRY_MS
 * (dex_cluster_hurry) and, unless it is the first value this server read
 * (a request of an earlier life of the cluster), says a standby's scan waits
 * for write-backs now (dex.write_back_with_standbys = auto).
 */
static inline void
dex_cluster_note_flush_request(uint64 lsn, TimestampTz now)
{
	const bool	first = !dex_cluster_shm->flush_request_read;

	dex_cluster_shm->flush_request_read = true;
	if (lsn <= dex_cluster_shm->flush_request)
		return;
	dex_cluster_shm->flush_request = lsn;
	dex_cluster_shm->primary_hurry_until = TimestampTzPlusMilliseconds(now, DEX_PRIMARY_HURRY_MS);
	if (!first)
		dex_cluster_shm->flush_request_at = now;
}

#endif							/* DEXCLUSTER_H */
