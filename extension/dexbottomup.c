/*
 * dexbottomup.c — bottom-up deletion (src/README.md "Dead-entry hints").
 *
 * An UPDATE that leaves an index's key alone (aminsert's indexUnchanged)
 * still adds a version to the index; when no index scan revisits the old
 * versions, no kill_prior_tuple removes them and their leaf fills and
 * splits. (In a write-back index every entry written at once passes --
 * key-changing UPDATEs leave their old versions the same way, and there the
 * give-up costs no round trip: dexinsert.c.) As nbtree's bottom-up pass, an
 * insert that finds its leaf full
 * (dex_tree_insert_nosplit: DEX_LEAF_FULL, nothing changed, no lock held)
 * first asks the table which of the leaf's entries are dead to everyone
 * (table_index_delete_tuples, duplicates of the new key "promising"), then
 * removes those -- with the kills' gate (dex_kill_gate: writer only, WAL
 * flushed, no live standby slot held), or in a write-back tree's frame with
 * the heap's conflict horizon logged first (dexkillwal.c, K7), and only if
 * the leaf is still at the version that was read (dex_tree_kill). The caller then inserts as usual,
 * splitting only if that freed nothing. While a standby is attached and the
 * frame cannot hold the removal (write-through, or write-back paused for the
 * standby), the removal is deferred as a scan's kill is (K9): the leaf
 * splits now, and the dead entries go once the standbys replayed the
 * horizon (a later scan or insert of the index, in any backend). A pass is a hint: anything of
 * dex's that goes wrong drops it (DEBUG1); only the heap access itself may
 * ereport, as any heap access may.
 */
#include "dex.h"

#include "access/tableam.h"
#include "utils/rel.h"

#include "tree/key_bytes.h"
#include "tree/node_capacity.h"

/* Same key as `key`, whatever the TID: nbtree's "promising" duplicates. */
static bool
dex_same_value(const DexKey *entry, const DexKey *key)
{
	DexKey		e = *entry;

	e.block = key->block;
	e.offnum = key->offnum;
	return dex_key_cmp(&e, key) == 0;
}

/*
 * The heap's verdict on a leaf's n entries (tids[i]; promising[i]: a
 * duplicate of the new key; space[i]: the bytes its removal frees): the
 * positions of those dead to everyone go to dead[], their number is
 * returned, their conflict horizon to *horizon. Releases the announcement
 * `hold` (taken before the leaf was read) once the heap has answered, also
 * if it ereports.
 */
static int
bottomup_ask_heap(Relation index, Relation heapRel, int hold, int n,
				  const ItemPointerData *tids, const bool *promising, const int16 *space,
				  int *dead, TransactionId *horizon)
{
	TM_IndexDeleteOp delstate;
	int			total = 0;
	int			ndead = 0;

	/* Every entry of the leaf, as nbtree passes every tuple of its page. */
	delstate.irel = index;
	delstate.iblknum = InvalidBlockNumber;
	delstate.bottomup = true;
	delstate.ndeltids = 0;
	delstate.deltids = palloc(sizeof(TM_IndexDelete) * Max(n, 1));
	delstate.status = palloc(sizeof(TM_IndexStatus) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		delstate.deltids[i].tid = tids[i];
		delstate.deltids[i].id = i;
		delstate.status[i].idxoffnum = (OffsetNumber) (i + 1);
		delstate.status[i].knowndeletable = false;
		delstate.status[i].promising = promising[i];
		delstate.status[i].freespace = space[i];
		total += space[i];
	}
	delstate.ndeltids = n;
	/*
	 * nbtree asks for 1/16 of its page; a pass here costs more (a WAL flush,
	 * a registry round trip, a leaf read), so ask for half the leaf: the
	 * heap AM visits up to 6 heap blocks, stopping when one frees nothing.
	 */
	delstate.bottomupfreespace = Max(total / 2, 1);
	*horizon = InvalidTransactionId;
	/* the announcement goes even if the heap ereports (a subtransaction may catch it) */
	PG_TRY();
	{
		if (n > 0)
			*horizon = table_index_delete_tuples(heapRel, &delstate);
	}
	PG_FINALLY();
	{
		dex_ios_unhold(hold);
	}
	PG_END_TRY();

	/* the heap AM shrank and reordered deltids to the TIDs it judged */
	for (int i = 0; i < delstate.ndeltids; i++)
	{
		TM_IndexStatus *st = &delstate.status[delstate.deltids[i].id];

		if (st->knowndeletable)
			dead[ndead++] = st->idxoffnum - 1;
	}
	pfree(delstate.status);
	pfree(delstate.deltids);
	return ndead;
}

static void
bottomup_skipped(Relation index, const DexError *err)
{
	/* changed since (another backend made room or split it), or failed */
	if (err->message[0])
		elog(DEBUG1, "dex: bottom-up deletion in \"%s\" skipped: %s",
			 RelationGetRelationName(index), err->message);
}

typedef enum BottomUpWay
{
	BOTTOMUP_NONE,				/* nothing to remove, or no way to */
	BOTTOMUP_NOW,				/* remove now (*wal_hold: in the frame, K7) */
	BOTTOMUP_DEFER				/* log the horizon, queue the removal (K9) */
} BottomUpWay;

/*
 * How may `ndead` entries go? A write-back frame's removal logs its conflict
 * horizon and waits for it in the frame (*wal_hold, K7); anything else
 * passes the kills' registry gate -- or, while a standby is attached (a
 * write-through tree, or a write-back one paused for the standby, W18) or
 * the gate refuses, is deferred as a scan's kill is (K9): the insert splits
 * the leaf now, and the dead entries go once every standby replayed the
 * horizon. `epoch`: the vacuum epoch when the leaf was read (0: none).
 */
static BottomUpWay
bottomup_way(Relation index, const DexLeafStamp *full, int ndead, TransactionId horizon, uint64 epoch,
			 uint64 *wal_hold)
{
	*wal_hold = 0;
	if (ndead <= 0)
		return BOTTOMUP_NONE;
	if (dex_kill_frame_hold(index, full, horizon, wal_hold) ||
		(!dex_kill_standbys_attached() && dex_kill_gate(index, ndead)))
		return BOTTOMUP_NOW;
	return dex_kill_may_defer(full->leaf, epoch) ? BOTTOMUP_DEFER : BOTTOMUP_NONE;
}

static void
bottomup_dropped(Relation index, const DexError *err)
{
	elog(DEBUG1, "dex: bottom-up deletion in \"%s\" dropped: %s",
		 RelationGetRelationName(index), err->message);
}

/*
 * The pass's last step, either layout: the ndead entries the heap found dead
 * (16-byte keys, or byte-string entries if `bytes`) go now, are deferred, or
 * stay (bottomup_way). Sorts them. Returns how many went now.
 */
static uint64
bottomup_remove(Relation index, DexTree *tree, const DexLeafStamp *full, bool bytes, DexKey *keys,
				DexBytes *entries, int ndead, TransactionId horizon, uint64 epoch)
{
	uint64		wal_hold;
	uint64_t	removed = 0;
	DexError	err;
	int			rc;
	BottomUpWay way = bottomup_way(index, full, ndead, horizon, epoch, &wal_hold);

	if (way == BOTTOMUP_NONE)
		return 0;
	if (bytes)
		qsort(entries, ndead, sizeof(DexBytes), dex_bytes_cmp);
	else
		dex_sort_keys(keys, ndead);
	if (way == BOTTOMUP_DEFER)
	{
		dex_kill_defer_logged(index, full->leaf, bytes, keys, entries, ndead, horizon, epoch, true);
		return 0;
	}
	memset(&err, 0, sizeof(err));
	rc = bytes ? dex_tree_kill_bytes(tree, full, entries, ndead, DEX_KILL_BOTTOM_UP, wal_hold, &removed, &err)
		: dex_tree_kill(tree, full, keys, ndead, DEX_KILL_BOTTOM_UP, wal_hold, &removed, &err);
	if (rc != DEX_OK)
	{
		bottomup_dropped(index, &err);
		removed = 0;
	}
	return removed;
}

/*
 * The insert of `key` found leaf `full` full. Remove its entries dead to
 * everyone; returns how many went (0: the insert will split).
 */
uint64
dex_bottomup_pass(Relation index, Relation heapRel, DexTree *tree, const DexKey *key,
				  const DexLeafStamp *full)
{
	DexKey	   *entries = palloc(sizeof(DexKey) * DEX_LEAF_CAPACITY);
	ItemPointerData *tids = palloc(sizeof(ItemPointerData) * DEX_LEAF_CAPACITY);
	bool	   *promising = palloc(sizeof(bool) * DEX_LEAF_CAPACITY);
	int16	   *space = palloc(sizeof(int16) * DEX_LEAF_CAPACITY);
	int		   *pos = palloc(sizeof(int) * DEX_LEAF_CAPACITY);
	DexKey	   *dead = palloc(sizeof(DexKey) * DEX_LEAF_CAPACITY);
	DexError	err;
	int			n = 0;
	int			m = 0;
	int			ndead;
	int			hold;
	TransactionId horizon;
	uint64		epoch;

	/* VACUUM's heap pass waits for us from before the read (dexios.c) */
	hold = dex_ios_hold(index);
	if (hold < 0)
		return 0;
	memset(&err, 0, sizeof(err));
	if (dex_tree_read_leaf(tree, full, entries, &n, &err) != DEX_OK || n == 0)
	{
		dex_ios_unhold(hold);
		bottomup_skipped(index, &err);
		return 0;
	}
	/* (under the announcement: no ambulkdelete can end before it is read) */
	epoch = dex_ios_vacuum_epoch();
	for (int i = 0; i < n; i++)
	{
		if (entries[i].cls != DEX_KEYCLASS_VALUE && entries[i].cls != DEX_KEYCLASS_NULL)
			continue;			/* (only entries carry a heap TID) */
		dex_key_to_tid(&entries[i], &tids[m]);
		promising[m] = dex_same_value(&entries[i], key);
		space[m] = (int16) sizeof(DexKey);
		entries[m++] = entries[i];
	}
	ndead = bottomup_ask_heap(index, heapRel, hold, m, tids, promising, space, pos, &horizon);
	for (int i = 0; i < ndead; i++)
		dead[i] = entries[pos[i]];
	return bottomup_remove(index, tree, full, false, dead, NULL, ndead, horizon, epoch);
}

/*
 * The same for a byte-string index: the insert of an entry whose key part
 * (dex_entry_build's return value) is key[0..keylen) found leaf `full` full.
 * The promising entries are those with the same key part (key encodings are
 * prefix-free: an entry beginning with it has exactly that key).
 */
uint64
dex_bottomup_pass_bytes(Relation index, Relation heapRel, DexTree *tree,
						const uint8 *key, size_t keylen, const DexLeafStamp *full)
{
	const DexBytes *leaf = NULL;
	DexBytes   *entries;
	DexBytes   *dead;
	ItemPointerData *tids;
	bool	   *promising;
	int16	   *space;
	int		   *pos;
	DexError	err;
	int			n = 0;
	int			ndead;
	int			hold;
	TransactionId horizon;
	uint64		epoch;

	hold = dex_ios_hold(index);
	if (hold < 0)
		return 0;
	memset(&err, 0, sizeof(err));
	if (dex_tree_read_leaf_bytes(tree, full, &leaf, &n, &err) != DEX_OK || n == 0)
	{
		dex_ios_unhold(hold);
		bottomup_skipped(index, &err);
		return 0;
	}
	epoch = dex_ios_vacuum_epoch();	/* (under the announcement, as above) */
	/* copies: the leaf's bytes live in the tree handle until its next call */
	entries = palloc(sizeof(DexBytes) * n);
	tids = palloc(sizeof(ItemPointerData) * n);
	promising = palloc(sizeof(bool) * n);
	space = palloc(sizeof(int16) * n);
	pos = palloc(sizeof(int) * n);
	for (int i = 0; i < n; i++)
	{
		entries[i].data = memcpy(palloc(leaf[i].len), leaf[i].data, leaf[i].len);
		entries[i].len = leaf[i].len;
		dex_entry_tid(entries[i].data, entries[i].len, &tids[i]);
		promising[i] = entries[i].len > keylen && memcmp(entries[i].data, key, keylen) == 0;
		space[i] = (int16) (entries[i].len + DEX_SLOTTED_LEAF_SLOT_BYTES);
	}
	ndead = bottomup_ask_heap(index, heapRel, hold, n, tids, promising, space, pos, &horizon);
	dead = palloc(sizeof(DexBytes) * Max(ndead, 1));
	for (int i = 0; i < ndead; i++)
		dead[i] = entries[pos[i]];
	return bottomup_remove(index, tree, full, true, NULL, dead, ndead, horizon, epoch);
}
