/*
 * dexinsert.c — aminsert: write-through insert of one (key, TID) entry.
 *
 * The entry reaches remote memory before its row's heap WAL is durable; the
 * core journals it first (dexjournal.c, src/README.md "Crash survival").
 */
#include "dex.h"

#include "utils/rel.h"

bool
dexinsert(Relation index, Datum *values, bool *isnull,
		  ItemPointer ht_ctid, Relation heapRel,
		  IndexUniqueCheck checkUnique,
		  bool indexUnchanged,
		  struct IndexInfo *indexInfo)
{
	DexTree    *tree;
	DexKey		key;
	DexError	err;
	int			rc;

	tree = dex_get_tree(index);
	dex_make_key(&key, index, values[0], isnull[0], ht_ctid);

	for (;;)
	{
		memset(&err, 0, sizeof(err));
		/*
		 * Journal slots are reusable up to the retention horizon as last
		 * published (dexcluster.c): no remote access per row. A full lane
		 * comes back as NEED_WAL_FLUSH, and the retry raises the horizon.
		 */
		rc = dex_tree_insert(tree, &key, dex_row_lsn(heapRel), dex_cluster_retention_published(), &err);
		if (rc != DEX_ERR_NEED_WAL_FLUSH)
			break;
		/* nothing was changed: flush WAL / wait for the standbys, then retry */
		dex_wal_flush_for_retry(&err, index);
	}
	if (rc != DEX_OK)
		dex_report_error(rc, &err, index);

	return false;
}
