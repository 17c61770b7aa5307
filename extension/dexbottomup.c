/*
 * dexbottomup.c — bottom-up deletion (src/README.md "Dead-entry hints").
 *
 * An UPDATE that leaves an index's key alone (aminsert's indexUnchanged)
 * still adds a version to the index; when no index scan revisits the old
 * versions, no kill_prior_tuple removes them and their leaf fills and
 * splits. As nbtree's bottom-up pass, an insert that finds its leaf full
 * (dex_tree_insert_nosplit: DEX_LEAF_FULL, nothing changed, no lock held)
 * first asks the table which of the leaf's entries are dead to everyone
 * (table_index_delete_tuples, duplicates of the new key "promising"), then
 * removes those -- with the kills' gate (dex_kill_gate: writer only, WAL
 * flushed, no live standby slot held) and only if the leaf is still at the
 * version that was read (dex_tree_kill). The caller then inserts as usual,
 * splitting only if that freed nothing. A pass is a hint: anything of
 * dex's that goes wrong drops it (DEBUG1); only the heap access itself may
 * ereport, as any heap access may.
 */
#include "dex.h"

#include "access/tableam.h"
#include "utils/rel.h"

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
 * The insert of `key` found leaf `full` full. Remove its entries dead to
 * everyone; returns how many went (0: the insert will split).
 */
uint64
dex_bottomup_pass(Relation index, Relation heapRel, DexTree *tree, const DexKey *key,
				  const DexLeafStamp *full)
{
	DexKey	   *entries = palloc(sizeof(DexKey) * DEX_LEAF_CAPACITY);
	DexKey	   *dead;
	TM_IndexDeleteOp delstate;
	DexError	err;
	int			n = 0;
	int			ndead = 0;
	uint64_t	removed = 0;
	int			hold;

	/* VACUUM's heap pass waits for us from before the read (dexios.c) */
	hold = dex_ios_hold(index);
	if (hold < 0)
	{
		pfree(entries);
		return 0;
	}
	memset(&err, 0, sizeof(err));
	if (dex_tree_read_leaf(tree, full, entries, &n, &err) != DEX_OK || n == 0)
	{
		dex_ios_unhold(hold);
		/* changed since (another backend made room or split it), or failed */
		if (err.message[0])
			elog(DEBUG1, "dex: bottom-up deletion in \"%s\" skipped: %s",
				 RelationGetRelationName(index), err.message);
		pfree(entries);
		return 0;
	}

	/* Every entry of the leaf, as nbtree passes every tuple of its page. */
	delstate.irel = index;
	delstate.iblknum = InvalidBlockNumber;
	delstate.bottomup = true;
	/*
	 * nbtree asks for 1/16 of its page; a pass here costs more (a WAL flush,
	 * a registry round trip, a leaf read), so ask for half the leaf: the
	 * heap AM visits up to 6 heap blocks, stopping when one frees nothing.
	 */
	delstate.bottomupfreespace = Max(n * (int) sizeof(DexKey) / 2, (int) sizeof(DexKey));
	delstate.ndeltids = 0;
	delstate.deltids = palloc(sizeof(TM_IndexDelete) * n);
	delstate.status = palloc(sizeof(TM_IndexStatus) * n);
	for (int i = 0; i < n; i++)
	{
		if (entries[i].cls != DEX_KEYCLASS_VALUE && entries[i].cls != DEX_KEYCLASS_NULL)
			continue;			/* (only entries carry a heap TID) */
		dex_key_to_tid(&entries[i], &delstate.deltids[delstate.ndeltids].tid);
		delstate.deltids[delstate.ndeltids].id = delstate.ndeltids;
		delstate.status[delstate.ndeltids].idxoffnum = (OffsetNumber) (i + 1);
		delstate.status[delstate.ndeltids].knowndeletable = false;
		delstate.status[delstate.ndeltids].promising = dex_same_value(&entries[i], key);
		delstate.status[delstate.ndeltids].freespace = (int16) sizeof(DexKey);
		delstate.ndeltids++;
	}
	/* the announcement goes even if the heap ereports (a subtransaction may catch it) */
	PG_TRY();
	{
		if (delstate.ndeltids > 0)
			(void) table_index_delete_tuples(heapRel, &delstate);
	}
	PG_FINALLY();
	{
		dex_ios_unhold(hold);
	}
	PG_END_TRY();

	/* the heap AM shrank and reordered deltids to the TIDs it judged */
	dead = palloc(sizeof(DexKey) * n);
	for (int i = 0; i < delstate.ndeltids; i++)
	{
		TM_IndexStatus *st = &delstate.status[delstate.deltids[i].id];

		if (st->knowndeletable)
			dead[ndead++] = entries[st->idxoffnum - 1];
	}
	if (ndead > 0 && dex_kill_gate(index, ndead))
	{
		dex_sort_keys(dead, ndead);
		memset(&err, 0, sizeof(err));
		if (dex_tree_kill(tree, full, dead, ndead, 1, &removed, &err) != DEX_OK)
		{
			elog(DEBUG1, "dex: bottom-up deletion in \"%s\" dropped: %s",
				 RelationGetRelationName(index), err.message);
			removed = 0;
		}
	}
	pfree(dead);
	pfree(delstate.status);
	pfree(delstate.deltids);
	pfree(entries);
	return removed;
}
