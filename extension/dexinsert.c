/*
 * dexinsert.c — aminsert: write-through insert of one (key, TID) entry.
 *
 * The entry reaches remote memory before its row's heap WAL is durable; the
 * core journals it first (dexjournal.c, src/README.md "Crash survival").
 * A unique index checks the key first (dexunique.c). Other indexes hold the
 * entry back and write it with the statement's next ones (dexpending.c).
 * An entry written at once that is an UPDATE's new version with the key
 * left alone (indexUnchanged), or any entry written at once into a
 * write-back index, gets, if its leaf is full, a bottom-up deletion pass
 * over that leaf's dead versions before the leaf splits (dexbottomup.c).
 */
#include "dex.h"

#include "nodes/execnodes.h"
#include "utils/rel.h"

#include "tree/key_bytes.h"

/*
 * As nbtree: a bottom-up pass for an UPDATE's version of an unchanged key --
 * the churn it is for. A write-back index passes every entry written at once
 * whose leaf is full: its give-up happens in the leaf's cache frame (no round
 * trip, K5), its removals go in place, while the split it may spare is a
 * round trip. Key-changing UPDATEs leave their old versions in leaves no
 * scan revisits (the new key lies next to the old one as often as not), and
 * those leaves split round after round. A pass that finds nothing costs one
 * heap block's visit (the heap AM stops at a block that frees nothing).
 */
static bool
dex_insert_bottom_up(DexTree *tree, bool indexUnchanged)
{
	return dex_bottom_up && (indexUnchanged || dex_tree_is_write_back(tree));
}

/*
 * Puts one entry into the tree. bottom_up: if the leaf is full, look for dead
 * entries there once before letting it split.
 */
static void
dex_insert_entry(Relation index, Relation heapRel, DexTree *tree, const DexKey *key, bool bottom_up)
{
	DexError	err;
	int			rc;

	for (;;)
	{
		DexLeafStamp full;

		memset(&err, 0, sizeof(err));
		/*
		 * Journal slots are reusable up to the retention horizon as last
		 * published (dexcluster.c): no remote access per row. A full lane
		 * comes back as NEED_WAL_FLUSH, and the retry raises the horizon.
		 */
		if (bottom_up)
			rc = dex_tree_insert_nosplit(tree, key, dex_row_lsn(heapRel),
										 dex_cluster_retention_published(), &full, &err);
		else
			rc = dex_tree_insert(tree, key, dex_row_lsn(heapRel), dex_cluster_retention_published(), &err);
		if (rc == DEX_LEAF_FULL)
		{
			/* nothing changed, no lock held: one pass, then insert as usual */
			(void) dex_bottomup_pass(index, heapRel, tree, key, &full);
			bottom_up = false;
			continue;
		}
		if (rc != DEX_ERR_NEED_WAL_FLUSH)
			break;
		/* nothing was changed: flush WAL / wait for the standbys, then retry */
		dex_wal_flush_for_retry(&err, index);
	}
	if (rc != DEX_OK)
		dex_report_error(rc, &err, index);
}

/*
 * Write a byte-string entry (key part: its first keylen bytes) now, as
 * dex_insert_entry writes a 16-byte key: journaled by the core when the
 * row's heap WAL is not durable (or NEED_WAL_FLUSH: the row's WAL is flushed
 * and the insert retried), and with one bottom-up pass first if `bottom_up`
 * and its leaf is full. Returns the core's answer (err filled).
 */
static int
dex_write_entry_bytes(Relation index, Relation heapRel, DexTree *tree, const DexKeyBuf *kb,
					  size_t keylen, bool bottom_up, DexError *err)
{
	uint64		lsn = dex_row_lsn(heapRel);

	for (;;)
	{
		DexLeafStamp full;
		int			rc;

		memset(err, 0, sizeof(*err));
		/* slots reusable up to the horizon last published: as dex_insert_entry */
		if (bottom_up)
			rc = dex_tree_insert_nosplit_bytes(tree, kb->data, (uint32_t) kb->len, lsn,
											   dex_cluster_retention_published(), &full, err);
		else
			rc = dex_tree_insert_bytes(tree, kb->data, (uint32_t) kb->len, lsn,
									   dex_cluster_retention_published(), err);
		if (rc == DEX_LEAF_FULL)
		{
			/* nothing changed, no lock held: one pass, then insert as usual */
			(void) dex_bottomup_pass_bytes(index, heapRel, tree, kb->data, keylen, &full);
			bottom_up = false;
			continue;
		}
		if (rc != DEX_ERR_NEED_WAL_FLUSH)
			return rc;
		/* nothing was changed: flush WAL / wait for the standbys, then retry */
		dex_wal_flush_for_retry(err, index);
	}
}

/*
 * A byte-string index's entry (DEX_META_BYTES), the same way as a 16-byte
 * key's: held back from a multi-row statement's second row on
 * (dexpending.c); else a unique index checks the entry's key part first
 * (dexunique.c), unless a key column is NULL (distinct, unless NULLS NOT
 * DISTINCT), and the entry is written (dex_write_entry_bytes). Returns
 * aminsert's answer.
 */
static bool
dex_insert_bytes(Relation index, Relation heapRel, Datum *values, bool *isnull,
				 ItemPointer tid, IndexUniqueCheck checkUnique, IndexInfo *indexInfo,
				 bool indexUnchanged)
{
	DexKeyBuf	kb;
	DexError	err;
	int			rc = DEX_OK;
	size_t		keylen;
	bool		check = checkUnique != UNIQUE_CHECK_NO;
	bool		unique = check;	/* NULL keys are unique, as in nbtree */
	BlockNumber lockblk = InvalidBlockNumber;
	DexTree    *tree;
	bool		bottom_up;

	dex_kb_init_palloc(&kb);
	keylen = dex_entry_build(index, values, isnull, tid, &kb);	/* may ERROR: key too long */
	if (dex_pending_allowed(index, checkUnique, indexInfo) &&
		dex_pending_add_bytes(index, heapRel, kb.data, kb.len))
	{
		pfree(kb.data);
		return false;			/* held back (no handle needed: see dexinsert) */
	}
	tree = dex_open_tree(index);
	bottom_up = dex_insert_bottom_up(tree, indexUnchanged);
	dex_kill_apply_deferred(index, tree);	/* (bottom-up passes' deferred removals) */
	for (int i = 0; check && i < IndexRelationGetNumberOfKeyAttributes(index); i++)
		if (isnull[i] && !DEX_NULLS_NOT_DISTINCT(indexInfo))
			check = false;
	if (check)
		unique = dex_unique_check_bytes(index, heapRel, indexInfo, tree, kb.data, keylen,
										values, isnull, tid, checkUnique, &lockblk);
	/* UNIQUE_CHECK_EXISTING rechecks an entry that is already there */
	if (checkUnique != UNIQUE_CHECK_EXISTING)
		rc = dex_write_entry_bytes(index, heapRel, tree, &kb, keylen, bottom_up, &err);
	if (check)
		dex_unique_release(index, lockblk);
	pfree(kb.data);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, index);
	return unique;
}

bool
dexinsert(Relation index, Datum *values, bool *isnull,
		  ItemPointer ht_ctid, Relation heapRel,
		  IndexUniqueCheck checkUnique,
		  bool indexUnchanged,
		  struct IndexInfo *indexInfo)
{
	DexTree    *tree;
	DexKey		key;
	bool		bottom_up;

	if (dex_index_is_bytes(index))
		return dex_insert_bytes(index, heapRel, values, isnull, ht_ctid,
								checkUnique, indexInfo, indexUnchanged);
	dex_make_key(&key, index, values[0], isnull[0], ht_ctid);
	/*
	 * A multi-row statement's entries from the second on are held back and
	 * written in batches (dexpending.c), bottom-up or not: a batch UPDATE
	 * keeps its one round trip per batch, and its leaves split as a batch's
	 * do. The bottom-up pass is for entries written at once -- single-row
	 * UPDATEs, the churn of OLTP hot rows.
	 *
	 * A held-back entry needs no handle: the batch's write opens the tree
	 * (writer role, lost memory: dex_open_tree's checks), within
	 * dex.insert_batch rows or at the statement's end, so a lost tree still
	 * fails the statement that inserted. Opening it for each row cost a bulk
	 * load about 4% of its backend's CPU (a clock read for the writer lease,
	 * the cached metapage, the handle's hash table).
	 */
	if (dex_pending_allowed(index, checkUnique, indexInfo) &&
		dex_pending_add(index, heapRel, &key))
		return false;			/* held back */
	tree = dex_open_tree(index);
	bottom_up = dex_insert_bottom_up(tree, indexUnchanged);
	/* an index only inserted into applies its bottom-up passes' deferred removals */
	dex_kill_apply_deferred(index, tree);

	/* NULLs never conflict, unless the index says NULLS NOT DISTINCT */
	if (checkUnique != UNIQUE_CHECK_NO &&
		(!isnull[0] || DEX_NULLS_NOT_DISTINCT(indexInfo)))
	{
		BlockNumber lockblk;
		bool		unique = dex_unique_check(index, heapRel, indexInfo, tree, &key,
											  values, isnull, ht_ctid, checkUnique,
											  &lockblk);

		/* UNIQUE_CHECK_EXISTING rechecks an entry that is already there */
		if (checkUnique != UNIQUE_CHECK_EXISTING)
			dex_insert_entry(index, heapRel, tree, &key, bottom_up);
		dex_unique_release(index, lockblk);
		return unique;
	}

	dex_insert_entry(index, heapRel, tree, &key, bottom_up);
	return false;
}
