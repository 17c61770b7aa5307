/*
 * dexkilldefer.c — kills that must wait for the hot standbys (src/README.md
 * "Dead-entry hints", K9): a write-through index's, and a write-back index's
 * while its write-back is paused for a standby (W18; its frames then take no
 * in-place change, so the K7 hold in the frame is not available).
 *
 * Such a removal is remote at once, where standbys read: it may not happen
 * before every standby has replayed the kill's conflict horizon (whose redo
 * cancels the standby queries that could still see the rows). So such a kill
 * logs XLOG_DEX_KILL now (dexkillwal.c) and is queued here, in shared memory,
 * with the record's end; a later scan of the same index -- in any backend of
 * this server -- takes it back once the writer's published hwm -- every
 * live standby replayed that far, and any standby claiming a slot later
 * replays past removal_lsn >= hwm first -- has passed the record, and removes
 * the entries still in the index (present-only: the leaf has usually changed
 * meanwhile), provided no ambulkdelete began since the batch was read (only
 * VACUUM's heap pass can give one of their TIDs to a new row; the caller
 * checks it under an announcement, dexscanbatch.c). The epoch and the hwm
 * are this server's, the same for every backend: who applies a kill does not
 * matter, and a backend that exits right after its scan leaves its kills to
 * the next one.
 *
 * A bottom-up pass (dexbottomup.c) that may not remove now queues its dead
 * entries the same way (its insert splits the leaf meanwhile); a later
 * insert into the index applies queued kills too.
 *
 * Kills are hints: the queue is bounded (the oldest goes when it is full; a
 * kill too large for a slot is not queued), lost at a restart, and dropped
 * for an index that was rebuilt. A spinlock guards the slots: it is held
 * only to copy a slot in or out (never across an allocation, an error or a
 * remote operation); a per-index-bucket count lets the scans that have
 * nothing queued skip it.
 */
#include "dex.h"

#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/rel.h"

#define DEX_DEFERRED_SLOTS		128
#define DEX_DEFERRED_DATA		2048	/* a 1 KiB leaf's entries with their lengths fit */
#define DEX_DEFERRED_BUCKETS	64

typedef struct DexDeferredSlot
{
	uint64		seq;			/* 0: free; else the order queued in (the oldest goes) */
	Oid			db;
	Oid			index;
	Oid			relnumber;		/* the index's storage when queued (REINDEX: dropped) */
	uint64		record;			/* end of the kill's XLOG_DEX_KILL */
	uint64		epoch;			/* dex_ios_vacuum_epoch() when the batch was read */
	uint64		leaf;			/* the leaf the batch came from */
	bool		bytes;
	bool		bottom_up;		/* a bottom-up pass's (counted in bottomup_removed) */
	uint16		n;
	uint16		datalen;
	/* keys: n x DexKey; byte-string entries: n x uint16 length, then the bytes */
	char		data[DEX_DEFERRED_DATA];
} DexDeferredSlot;

typedef struct DexDeferredShared
{
	slock_t		lock;
	uint64		next_seq;
	pg_atomic_uint32 queued[DEX_DEFERRED_BUCKETS];	/* slots in use per bucket of (db, index) */
	DexDeferredSlot slots[DEX_DEFERRED_SLOTS];
} DexDeferredShared;

/* A kill taken out of the queue: this backend's copy of its slot. */
struct DexDeferredKill
{
	DexKey	   *keys;			/* sorted 16-byte keys (in slot.data) ... */
	DexBytes   *entries;		/* ... or sorted byte-string entries (their bytes in slot.data) */
	DexDeferredSlot slot;
};

static DexDeferredShared *deferred;

Size
dex_killdefer_shmem_size(void)
{
	return MAXALIGN(sizeof(DexDeferredShared));
}

void
dex_killdefer_shmem_init(void *mem, bool found)
{
	deferred = (DexDeferredShared *) mem;
	if (found)
		return;
	memset(deferred, 0, sizeof(*deferred));
	SpinLockInit(&deferred->lock);
	deferred->next_seq = 1;
	for (int i = 0; i < DEX_DEFERRED_BUCKETS; i++)
		pg_atomic_init_u32(&deferred->queued[i], 0);
}

static int
bucket_of(Oid db, Oid index)
{
	return (int) ((db * 31u + index) % DEX_DEFERRED_BUCKETS);
}

/* Under the lock: slot i is given up. */
static void
slot_free(int i)
{
	DexDeferredSlot *s = &deferred->slots[i];

	pg_atomic_fetch_sub_u32(&deferred->queued[bucket_of(s->db, s->index)], 1);
	s->seq = 0;
}

/* The slot's payload of a kill (false: it does not fit a slot). */
static bool
payload_of(DexDeferredSlot *s, bool bytes, const DexKey *keys, const DexBytes *entries, int n)
{
	Size		len = 0;

	if (n > PG_UINT16_MAX)
		return false;
	if (!bytes)
	{
		len = sizeof(DexKey) * n;
		if (len > DEX_DEFERRED_DATA)
			return false;
		memcpy(s->data, keys, len);
	}
	else
	{
		len = sizeof(uint16) * n;
		for (int i = 0; i < n; i++)
			len += entries[i].len;
		if (len > DEX_DEFERRED_DATA)
			return false;
		len = sizeof(uint16) * n;
		for (int i = 0; i < n; i++)
		{
			uint16		l = (uint16) entries[i].len;

			memcpy(s->data + sizeof(uint16) * i, &l, sizeof(l));
			memcpy(s->data + len, entries[i].data, l);
			len += l;
		}
	}
	s->datalen = (uint16) len;
	s->n = (uint16) n;
	s->bytes = bytes;
	return true;
}

/* Anything queued for this index at all (the scans' cheap test)? */
bool
dex_kill_deferred_any(Relation index)
{
	return deferred != NULL &&
		pg_atomic_read_u32(&deferred->queued[bucket_of(MyDatabaseId, RelationGetRelid(index))]) > 0;
}

/*
 * Is the same kill queued already? Scans that meet the dead entries before
 * the first kill of them is applied remember and kill them again: one record
 * and one queued kill suffice.
 */
bool
dex_kill_deferred_queued(Relation index, uint64 leaf, bool bytes, const DexKey *keys, const DexBytes *entries, int n)
{
	DexDeferredSlot *probe;
	Oid			relid = RelationGetRelid(index);
	bool		same = false;

	if (!dex_kill_deferred_any(index))
		return false;
	probe = palloc(sizeof(DexDeferredSlot));
	if (!payload_of(probe, bytes, keys, entries, n))
	{
		pfree(probe);
		return false;
	}
	SpinLockAcquire(&deferred->lock);
	for (int i = 0; i < DEX_DEFERRED_SLOTS && !same; i++)
	{
		DexDeferredSlot *s = &deferred->slots[i];

		same = s->seq != 0 && s->db == MyDatabaseId && s->index == relid && s->leaf == leaf &&
			s->bytes == bytes && s->n == probe->n && s->datalen == probe->datalen &&
			memcmp(s->data, probe->data, probe->datalen) == 0;
	}
	SpinLockRelease(&deferred->lock);
	pfree(probe);
	return same;
}

/* Queue a kill of n sorted keys (or byte-string entries) logged at `record`. */
void
dex_kill_defer(Relation index, uint64 leaf, bool bytes, const DexKey *keys, const DexBytes *entries, int n,
			   uint64 record, uint64 epoch, bool bottom_up)
{
	DexDeferredSlot *k;
	int			at = -1;

	if (n <= 0 || leaf == 0 || deferred == NULL)
		return;
	k = palloc(sizeof(DexDeferredSlot));
	if (!payload_of(k, bytes, keys, entries, n))
	{
		pfree(k);
		return;					/* (larger than any leaf holds: never) */
	}
	k->db = MyDatabaseId;
	k->index = RelationGetRelid(index);
	k->relnumber = (Oid) DEX_REL_NUMBER(index);
	k->record = record;
	k->epoch = epoch;
	k->leaf = leaf;
	k->bottom_up = bottom_up;

	SpinLockAcquire(&deferred->lock);
	for (int i = 0; i < DEX_DEFERRED_SLOTS; i++)
	{
		if (deferred->slots[i].seq == 0)
		{
			at = i;
			break;
		}
		if (at < 0 || deferred->slots[i].seq < deferred->slots[at].seq)
			at = i;
	}
	if (deferred->slots[at].seq != 0)
		slot_free(at);			/* full: the oldest hint goes */
	k->seq = deferred->next_seq++;
	memcpy(&deferred->slots[at], k, offsetof(DexDeferredSlot, data) + k->datalen);
	pg_atomic_fetch_add_u32(&deferred->queued[bucket_of(k->db, k->index)], 1);
	SpinLockRelease(&deferred->lock);
	pfree(k);
	dex_stats_count_deferred_kills(n);
}

/*
 * The oldest queued kill of `index` whose record is at or below `hwm`, out of
 * the queue into this backend (the caller passes it to
 * dex_kill_deferred_apply, which frees it), or NULL. Kills queued for an
 * earlier storage of the index are dropped.
 */
DexDeferredKill *
dex_kill_deferred_take(Relation index, uint64 hwm, uint64 *epoch)
{
	Oid			relid = RelationGetRelid(index);
	Oid			relnumber = (Oid) DEX_REL_NUMBER(index);
	DexDeferredKill *k = palloc(sizeof(DexDeferredKill));
	int			at = -1;
	char	   *p;

	SpinLockAcquire(&deferred->lock);
	for (int i = 0; i < DEX_DEFERRED_SLOTS; i++)
	{
		DexDeferredSlot *s = &deferred->slots[i];

		if (s->seq == 0 || s->db != MyDatabaseId || s->index != relid)
			continue;
		if (s->relnumber != relnumber)
		{
			slot_free(i);
			continue;
		}
		if (s->record <= hwm && (at < 0 || s->seq < deferred->slots[at].seq))
			at = i;
	}
	if (at >= 0)
	{
		memcpy(&k->slot, &deferred->slots[at], offsetof(DexDeferredSlot, data) + deferred->slots[at].datalen);
		slot_free(at);
	}
	SpinLockRelease(&deferred->lock);
	if (at < 0)
	{
		pfree(k);
		return NULL;
	}
	k->keys = NULL;
	k->entries = NULL;
	if (!k->slot.bytes)
		k->keys = (DexKey *) k->slot.data;
	else
	{
		k->entries = palloc(sizeof(DexBytes) * k->slot.n);
		p = k->slot.data + sizeof(uint16) * k->slot.n;
		for (int i = 0; i < k->slot.n; i++)
		{
			uint16		l;

			memcpy(&l, k->slot.data + sizeof(uint16) * i, sizeof(l));
			k->entries[i].data = (const uint8 *) p;
			k->entries[i].len = l;
			p += l;
		}
	}
	*epoch = k->slot.epoch;
	return k;
}

/*
 * Remove the entries of a taken kill still in the index (the caller holds
 * an announcement and checked that no ambulkdelete began since its batch was
 * read). Never errors: a failure drops the hint (DEBUG1). Frees it.
 */
void
dex_kill_deferred_apply(Relation index, DexTree *tree, DexDeferredKill *k, bool apply)
{
	DexLeafStamp stamp;
	DexError	err;
	uint64_t	removed = 0;
	int			rc = DEX_OK;
	int			flags = DEX_KILL_PRESENT | (k->slot.bottom_up ? DEX_KILL_BOTTOM_UP : 0);

	if (apply)
	{
		memset(&stamp, 0, sizeof(stamp));
		stamp.leaf = k->slot.leaf;
		stamp.frame = 0xFFFFFFFFu;
		memset(&err, 0, sizeof(err));
		if (k->slot.bytes)
			rc = dex_tree_kill_bytes(tree, &stamp, k->entries, k->slot.n, flags, 0, &removed, &err);
		else
			rc = dex_tree_kill(tree, &stamp, k->keys, k->slot.n, flags, 0, &removed, &err);
		if (rc != DEX_OK)
			elog(DEBUG1, "dex: deferred dead-entry hints of \"%s\" dropped: %s",
				 RelationGetRelationName(index), err.message);
	}
	if (k->entries)
		pfree(k->entries);
	pfree(k);
}
