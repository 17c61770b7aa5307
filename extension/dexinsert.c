/*
 * dexinsert.c — aminsert: write-through insert of one (key, TID) entry.
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

	memset(&err, 0, sizeof(err));
	rc = dex_tree_insert(tree, &key, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, index);

	return false;
}
