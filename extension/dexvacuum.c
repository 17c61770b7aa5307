/*
 * dexvacuum.c — VACUUM: walk all entries in key order, ask the heap callback
 * which TIDs are dead, delete those entries in sorted chunks.
 *
 * No core lock is held while the callback runs: the core returns a copy of
 * one leaf at a time and holds nothing between dex_scan_next calls. Deletes
 * are issued with the scan closed; the scan then resumes after the last key
 * seen.
 */
#include "dex.h"

#include "commands/vacuum.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#define DEX_VACUUM_CHUNK 8192

typedef struct DexVacuumState
{
	DexScan    *dscan;
	MemoryContextCallback cb;
} DexVacuumState;

/* A failed core call: close the walk's scan (if open), then report. */
static void
dex_vacuum_fail(DexVacuumState *vs, int rc, const DexError *err, Relation index)
{
	if (vs->dscan)
		dex_scan_end(vs->dscan);
	vs->dscan = NULL;
	dex_report_error(rc, err, index);
}

static void *
repalloc_or_alloc(void *p, size_t n)
{
	return p ? repalloc(p, n) : palloc(n);
}

static void
dex_vacuum_release(void *arg)
{
	DexVacuumState *vs = (DexVacuumState *) arg;

	if (vs->dscan)
		dex_scan_end(vs->dscan);
	vs->dscan = NULL;
}

static void
dex_delete_chunk(Relation index, DexTree *tree, DexKey *dead, int ndead,
				 IndexBulkDeleteResult *stats)
{
	int			done = 0;

	while (done < ndead)
	{
		int			n = Min(ndead - done, 1024);
		uint64		deleted = 0;
		DexError	err;
		int			rc;

		memset(&err, 0, sizeof(err));
		rc = dex_tree_delete(tree, dead + done, n, &deleted, &err);
		if (rc == DEX_ERR_NEED_WAL_FLUSH)
		{
			/* a dirty write-back leaf on the way: flush WAL, redo the chunk */
			stats->tuples_removed += (double) deleted;
			dex_wal_flush_for_retry(&err, index);
			continue;
		}
		if (rc != DEX_OK)
			dex_report_error(rc, &err, index);
		stats->tuples_removed += (double) deleted;
		done += n;
		dex_vacuum_delay_point();
	}
}

/*
 * Byte-string indexes: the same walk over entry bytes. Dead entries are
 * copied (up to DEX_VACUUM_CHUNK), the scan closed, the chunk deleted, and
 * the walk resumes at the last entry seen (skipping it).
 */
static double
dex_bulkdelete_bytes(Relation index, DexTree *tree, DexVacuumState *vs, IndexBulkDeleteResult *stats,
					 IndexBulkDeleteCallback callback, void *callback_state)
{
	DexBytes   *dead = palloc(sizeof(DexBytes) * DEX_VACUUM_CHUNK);
	uint8	   *last = NULL;
	size_t		lastlen = 0;
	int			ndead = 0;
	double		live = 0;
	bool		more = true;

	while (more)
	{
		DexError	err;
		int			rc;
		bool		restart = false;

		memset(&err, 0, sizeof(err));
		rc = dex_scan_begin_bytes(tree, last, (uint32_t) lastlen, NULL, 0, 0, &vs->dscan, &err);
		if (rc != DEX_OK)
			dex_vacuum_fail(vs, rc, &err, index);
		for (;;)
		{
			const DexBytes *entries = NULL;
			int			n = 0;

			rc = dex_scan_next_bytes(vs->dscan, &entries, &n, &err);
			if (rc != DEX_OK)
				dex_vacuum_fail(vs, rc, &err, index);
			if (n == 0)
			{
				more = false;
				break;
			}
			for (int i = 0; i < n; i++)
			{
				ItemPointerData tid;
				const DexBytes *e = &entries[i];

				if (last && e->len == lastlen && memcmp(e->data, last, lastlen) == 0)
					continue;	/* where the previous walk stopped */
				dex_entry_tid(e->data, e->len, &tid);
				if (callback(&tid, callback_state))
				{
					uint8	   *copy = palloc(e->len);

					memcpy(copy, e->data, e->len);
					dead[ndead].data = copy;
					dead[ndead++].len = e->len;
				}
				else
					live += 1;
				last = repalloc_or_alloc(last, e->len);
				memcpy(last, e->data, e->len);
				lastlen = e->len;
				if (ndead == DEX_VACUUM_CHUNK)
				{
					restart = true; /* the rest of this batch is walked again */
					break;
				}
			}
			if (restart)
				break;
			dex_vacuum_delay_point();
		}
		dex_scan_end(vs->dscan);
		vs->dscan = NULL;
		while (ndead > 0)
		{
			uint64		deleted = 0;

			memset(&err, 0, sizeof(err));
			rc = dex_tree_delete_bytes(tree, dead, ndead, &deleted, &err);
			if (rc == DEX_ERR_NEED_WAL_FLUSH)
			{
				/* a dirty write-back leaf on the way: flush WAL, redo the chunk */
				stats->tuples_removed += (double) deleted;
				dex_wal_flush_for_retry(&err, index);
				continue;
			}
			if (rc != DEX_OK)
				dex_report_error(rc, &err, index);
			stats->tuples_removed += (double) deleted;
			for (int i = 0; i < ndead; i++)
				pfree((void *) dead[i].data);
			ndead = 0;
			dex_vacuum_delay_point();
		}
	}
	return live;
}

static IndexBulkDeleteResult *
bulkdelete_run(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
			   IndexBulkDeleteCallback callback, void *callback_state)
{
	Relation	index = info->index;
	DexTree    *tree;
	MemoryContext cxt;
	MemoryContext old;
	DexVacuumState *vs;
	DexKey		lo,
				hi,
				last;
	DexKey	   *dead;
	int			ndead = 0;
	bool		more = true;
	uint64		flushed;
	bool		have_last = false;
	double		live = 0;

	if (stats == NULL)
		stats = (IndexBulkDeleteResult *) palloc0(sizeof(IndexBulkDeleteResult));

	tree = dex_get_tree(index);

	/*
	 * WAL before removal (src/README.md "Crash survival"): the dead TIDs come
	 * from prunes and deleting commits whose WAL may not be durable yet. A
	 * crash that lost it would bring the rows back -- so their entries must
	 * not be gone from remote memory before it is durable.
	 */
	flushed = dex_wal_flush_boundary();
	/*
	 * ... and no hot standby may still need them: every live standby must
	 * have replayed that WAL (src/README.md "Hot standbys"). (Published to
	 * the registry: a record end, which WAL after any crash holds.)
	 */
	dex_cluster_wait_standbys(flushed, index);

	cxt = AllocSetContextCreate(CurrentMemoryContext, "dex vacuum",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	vs = palloc0(sizeof(DexVacuumState));
	vs->cb.func = dex_vacuum_release;
	vs->cb.arg = vs;
	MemoryContextRegisterResetCallback(cxt, &vs->cb);
	if (dex_index_is_bytes(index))
	{
		live = dex_bulkdelete_bytes(index, tree, vs, stats, callback, callback_state);
		more = false;			/* (the 16-byte walk below is skipped) */
	}
	dead = palloc(sizeof(DexKey) * DEX_VACUUM_CHUNK);

	memset(&lo, 0, sizeof(lo));
	lo.cls = DEX_KEY_NEG_INF;
	memset(&hi, 0, sizeof(hi));
	hi.cls = DEX_KEY_POS_INF;

	while (more)
	{
		DexError	err;
		int			rc;
		bool		restart = false;

		memset(&err, 0, sizeof(err));
		if (have_last)
		{
			lo = last;
			if (!dex_key_next(&lo))
				break;
		}
		rc = dex_scan_begin(tree, &lo, &hi, 0, &vs->dscan, &err);
		if (rc != DEX_OK)
			dex_vacuum_fail(vs, rc, &err, index);

		for (;;)
		{
			const DexKey *entries = NULL;
			int			n = 0;
			int			i;

			rc = dex_scan_next(vs->dscan, &entries, &n, &err);
			if (rc != DEX_OK)
				dex_vacuum_fail(vs, rc, &err, index);
			if (n == 0)
			{
				more = false;
				break;
			}
			for (i = 0; i < n; i++)
			{
				ItemPointerData tid;

				dex_key_to_tid(&entries[i], &tid);
				if (callback(&tid, callback_state))
					dead[ndead++] = entries[i];
				else
					live += 1;
				last = entries[i];
				have_last = true;
				if (ndead == DEX_VACUUM_CHUNK)
				{
					/* lose the rest of this batch: rescanned after `last` */
					restart = true;
					break;
				}
			}
			if (restart)
				break;
			dex_vacuum_delay_point();
		}
		dex_scan_end(vs->dscan);
		vs->dscan = NULL;

		if (ndead > 0)
		{
			dex_delete_chunk(index, tree, dead, ndead, stats);
			ndead = 0;
		}
	}

	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);

	/*
	 * Before the heap pass may set pages all-visible: no index-only scan may
	 * still be about to trust the visibility map for an entry read before
	 * its removal (src/README.md "Index-only scans"). Always, not only when
	 * this pass removed something: a scan's dead-entry hints may have
	 * removed this pass's dead entries before it got to them (src/README.md
	 * "Dead-entry hints").
	 */
	dex_ios_wait_readers(index);

	stats->num_index_tuples = live;
	stats->num_pages = RelationGetNumberOfBlocks(index);
	stats->estimated_count = false;
	return stats;
}

/*
 * Kills of entries still present (K8) rely on seeing every ambulkdelete: its
 * start changes the epoch they check, and while one runs no batch read
 * qualifies for them (dexios.c).
 */
IndexBulkDeleteResult *
dexbulkdelete(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
			  IndexBulkDeleteCallback callback, void *callback_state)
{
	IndexBulkDeleteResult *r;

	dex_ios_vacuum_begin();
	PG_TRY();
	{
		r = bulkdelete_run(info, stats, callback, callback_state);
	}
	PG_FINALLY();
	{
		dex_ios_vacuum_end();
	}
	PG_END_TRY();
	return r;
}

IndexBulkDeleteResult *
dexvacuumcleanup(IndexVacuumInfo *info, IndexBulkDeleteResult *stats)
{
	if (info->analyze_only)
		return stats;

	if (stats == NULL)
	{
		DexTree    *tree = dex_get_tree(info->index);
		DexTreeInfo ti;
		DexError	err;
		int			rc;

		memset(&err, 0, sizeof(err));
		memset(&ti, 0, sizeof(ti));
		rc = dex_tree_info(tree, &ti, &err);
		if (rc != DEX_OK)
			dex_report_error(rc, &err, info->index);
		stats = (IndexBulkDeleteResult *) palloc0(sizeof(IndexBulkDeleteResult));
		stats->num_index_tuples = (double) ti.entries;
		stats->estimated_count = false;
	}
	else if (stats->tuples_removed > 0)
	{
		/*
		 * Deletes merge the leaves they empty, but skip a merge when a lock is
		 * busy; retry those now so the memory goes back to the memory node.
		 */
		DexTree    *tree = dex_get_tree(info->index);
		DexError	err;
		uint64		freed = 0;
		int			rc;

		memset(&err, 0, sizeof(err));
		dex_wal_flush_dirty();	/* dirty write-back leaves are written first */
		rc = dex_tree_compact(tree, &freed, &err);
		while (rc == DEX_ERR_NEED_WAL_FLUSH)
		{
			dex_wal_flush_for_retry(&err, info->index);
			rc = dex_tree_compact(tree, &freed, &err);
		}
		if (rc != DEX_OK)
			dex_report_error(rc, &err, info->index);
		elog(DEBUG1, "dex: vacuum of \"%s\" freed " UINT64_FORMAT " empty remote leaves",
			 RelationGetRelationName(info->index), freed);
	}
	stats->num_pages = RelationGetNumberOfBlocks(info->index);
	return stats;
}
