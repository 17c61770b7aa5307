/*
 * dexkilldefer.c — kills that must wait for the hot standbys (src/README.md
 * "Dead-entry hints", K9): a write-through index's, and a write-back index's
 * while its write-back is paused for a standby (W18; its frames then take no
 * in-place change, so the K7 hold in the frame is not available).
 *
 * Such a removal is remote at once, where standbys read: it may not happen
 * before every standby has replayed the kill's conflict horizon (whose redo
 * cancels the standby queries that could still see the rows). So such a kill logs XLOG_DEX_KILL now (dexkillwal.c) and is queued
 * here, in this backend, with the record's end; a later scan of the same
 * index takes it back once the writer's published hwm -- every live standby
 * replayed that far, and any standby claiming a slot later replays past
 * removal_lsn >= hwm first -- has passed the record, and removes the
 * entries still in the leaf (present-only: the leaf has usually changed
 * meanwhile), provided no ambulkdelete began since the batch was read (only
 * VACUUM's heap pass can give one of their TIDs to a new row; the caller
 * checks it under an announcement, dexscanbatch.c).
 *
 * A bottom-up pass (dexbottomup.c) that may not remove now queues its dead
 * entries the same way (its insert splits the leaf meanwhile); a later
 * insert into the index in this backend applies queued kills too.
 *
 * Kills are hints: the queue is bounded (the oldest goes when it is full),
 * lost at backend exit, and dropped for an index that was rebuilt.
 */
#include "dex.h"

#include "utils/memutils.h"
#include "utils/rel.h"

#define DEX_DEFERRED_KILLS 64

struct DexDeferredKill
{
	Oid			index;
	Oid			relnumber;		/* the index's storage when queued (REINDEX: dropped) */
	uint64		record;			/* end of the kill's XLOG_DEX_KILL */
	uint64		epoch;			/* dex_ios_vacuum_epoch() when the batch was read */
	uint64		leaf;			/* the leaf the batch came from */
	bool		bytes;
	bool		bottom_up;		/* a bottom-up pass's (counted in bottomup_removed) */
	int			n;
	DexKey	   *keys;			/* sorted; 16-byte keys */
	DexBytes   *entries;		/* sorted; byte-string entries (data copied behind) */
};

static DexDeferredKill *queue[DEX_DEFERRED_KILLS];
static int	nqueued = 0;

static void
deferred_free(DexDeferredKill *k)
{
	pfree(k);					/* keys / entries live in the same chunk */
}

static void
queue_remove(int i)
{
	memmove(&queue[i], &queue[i + 1], sizeof(queue[0]) * (nqueued - i - 1));
	nqueued--;
}

/*
 * Is the same kill queued already? Scans that meet the dead entries before
 * the first kill of them is applied remember and kill them again: one record
 * and one queued kill suffice.
 */
bool
dex_kill_deferred_queued(Relation index, uint64 leaf, bool bytes, const DexKey *keys, const DexBytes *entries, int n)
{
	for (int i = 0; i < nqueued; i++)
	{
		DexDeferredKill *k = queue[i];
		bool		same = true;

		if (k->index != RelationGetRelid(index) || k->leaf != leaf || k->bytes != bytes || k->n != n)
			continue;
		if (!bytes)
			same = memcmp(k->keys, keys, sizeof(DexKey) * n) == 0;
		for (int j = 0; bytes && same && j < n; j++)
			same = k->entries[j].len == entries[j].len &&
				memcmp(k->entries[j].data, entries[j].data, entries[j].len) == 0;
		if (same)
			return true;
	}
	return false;
}

/* Queue a kill of n sorted keys (or byte-string entries) logged at `record`. */
void
dex_kill_defer(Relation index, uint64 leaf, bool bytes, const DexKey *keys, const DexBytes *entries, int n,
			   uint64 record, uint64 epoch, bool bottom_up)
{
	Size		size = MAXALIGN(sizeof(DexDeferredKill));
	DexDeferredKill *k;
	char	   *p;

	if (n <= 0 || leaf == 0)
		return;
	if (bytes)
	{
		size += MAXALIGN(sizeof(DexBytes) * n);
		for (int i = 0; i < n; i++)
			size += entries[i].len;
	}
	else
		size += sizeof(DexKey) * n;
	k = MemoryContextAlloc(TopMemoryContext, size);
	k->index = RelationGetRelid(index);
	k->relnumber = (Oid) DEX_REL_NUMBER(index);
	k->record = record;
	k->epoch = epoch;
	k->leaf = leaf;
	k->bytes = bytes;
	k->bottom_up = bottom_up;
	k->n = n;
	k->keys = NULL;
	k->entries = NULL;
	p = (char *) k + MAXALIGN(sizeof(DexDeferredKill));
	if (bytes)
	{
		k->entries = (DexBytes *) p;
		p += MAXALIGN(sizeof(DexBytes) * n);
		for (int i = 0; i < n; i++)
		{
			memcpy(p, entries[i].data, entries[i].len);
			k->entries[i].data = (const uint8 *) p;
			k->entries[i].len = entries[i].len;
			p += entries[i].len;
		}
	}
	else
	{
		k->keys = (DexKey *) p;
		memcpy(k->keys, keys, sizeof(DexKey) * n);
	}
	if (nqueued == DEX_DEFERRED_KILLS)
	{
		deferred_free(queue[0]);	/* the oldest hint goes */
		queue_remove(0);
	}
	queue[nqueued++] = k;
	dex_stats_count_deferred_kills(n);
}

/* Anything queued at all (the scans' cheap test)? */
bool
dex_kill_deferred_any(void)
{
	return nqueued > 0;
}

/*
 * The oldest queued kill of `index` whose record is at or below `hwm`, out of
 * the queue (the caller passes it to dex_kill_deferred_apply, which frees it), or
 * NULL. Kills queued for an earlier storage of the index are dropped.
 */
DexDeferredKill *
dex_kill_deferred_take(Relation index, uint64 hwm, uint64 *epoch)
{
	Oid			relid = RelationGetRelid(index);
	Oid			relnumber = (Oid) DEX_REL_NUMBER(index);

	for (int i = 0; i < nqueued; i++)
	{
		DexDeferredKill *k = queue[i];

		if (k->index != relid)
			continue;
		if (k->relnumber != relnumber)
		{
			deferred_free(k);
			queue_remove(i--);
			continue;
		}
		if (k->record > hwm)
			continue;
		queue_remove(i);
		*epoch = k->epoch;
		return k;
	}
	return NULL;
}

/*
 * Remove the entries of a taken kill still in its leaf (the caller holds an
 * announcement and checked that no ambulkdelete began since its batch was
 * read). Never errors: a failure drops the hint (DEBUG1). Frees it.
 */
void
dex_kill_deferred_apply(Relation index, DexTree *tree, DexDeferredKill *k, bool apply)
{
	DexLeafStamp stamp;
	DexError	err;
	uint64_t	removed = 0;
	int			rc = DEX_OK;
	int			flags = DEX_KILL_PRESENT | (k->bottom_up ? DEX_KILL_BOTTOM_UP : 0);

	if (apply)
	{
		memset(&stamp, 0, sizeof(stamp));
		stamp.leaf = k->leaf;
		stamp.frame = 0xFFFFFFFFu;
		memset(&err, 0, sizeof(err));
		if (k->bytes)
			rc = dex_tree_kill_bytes(tree, &stamp, k->entries, k->n, flags, 0, &removed, &err);
		else
			rc = dex_tree_kill(tree, &stamp, k->keys, k->n, flags, 0, &removed, &err);
		if (rc != DEX_OK)
			elog(DEBUG1, "dex: deferred dead-entry hints of \"%s\" dropped: %s",
				 RelationGetRelationName(index), err.message);
	}
	deferred_free(k);
}
