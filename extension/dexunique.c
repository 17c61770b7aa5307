/*
 * dexunique.c — unique indexes (src/README.md "Unique indexes"): the check an
 * insert into a UNIQUE dex index makes before its entry goes in.
 *
 * Only the primary writes dex's trees, so PostgreSQL's own lock manager can
 * serialize the inserters of one key: the check and the insert run under a
 * heavyweight lock on (index, hash of the key) -- a page lock at a block
 * number no dex index has, the role nbtree gives the leaf's buffer lock. The
 * check finds the key's entries with an ordinary core scan (ended before
 * anything else happens: no node latch or remote lock is held while the heap
 * is read, a transaction waited for or an error raised), and asks the heap
 * about each with a dirty snapshot, as _bt_check_unique does:
 *  - a live row (committed, or this transaction's own) is a conflict;
 *  - a row whose inserter or deleter is still running makes the insert wait
 *    for that transaction (after releasing the key lock), then look again;
 *  - a dead row is no conflict.
 * A TID found by the scan may be reused by the time the heap is read (VACUUM
 * removed the entry and freed the slot in between): the row found there is a
 * conflict only if it has the same key.
 */
#include "dex.h"

#include "access/relscan.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "storage/lmgr.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

/*
 * Key locks are page locks on the index at blocks 0x80000000 ..
 * 0xBFFFFFFF (a dex index has one block, its metapage; dexjournal.c uses
 * 0xFFFFFFF0).
 */
#define DEX_KEYLOCK_BASE	((BlockNumber) 0x80000000)
#define DEX_KEYLOCK_MASK	((uint32) 0x3FFFFFFF)

static BlockNumber
dex_keylock_block(const DexKey *key)
{
	uint32		h = hash_bytes((const unsigned char *) &key->value, sizeof(key->value));

	h = hash_combine(h, key->cls);
	return DEX_KEYLOCK_BASE | (h & DEX_KEYLOCK_MASK);
}

/* Every entry of the key's value (or of NULL), in TID order; *n of them. */
static ItemPointerData *
dex_unique_entries(Relation index, DexTree *tree, const DexKey *key, int *n)
{
	DexKey		lo = *key;
	DexKey		hi = *key;
	DexScan    *ds = NULL;
	DexError	err;
	ItemPointerData *tids = NULL;
	int			cap = 0;
	int			rc;

	lo.block = 0;
	lo.offnum = 0;
	hi.block = DEX_KEY_BLOCK_MAX;
	hi.offnum = DEX_KEY_OFFNUM_MAX;
	*n = 0;
	memset(&err, 0, sizeof(err));
	rc = dex_scan_begin(tree, &lo, &hi, 0, &ds, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, index);
	for (;;)
	{
		const DexKey *batch = NULL;
		int			nb = 0;

		rc = dex_scan_next(ds, &batch, &nb, &err);
		if (rc != DEX_OK)
		{
			dex_scan_end(ds);
			dex_report_error(rc, &err, index);
		}
		if (nb == 0)
			break;
		if (*n + nb > cap)
		{
			cap = Max(cap * 2, *n + nb);
			tids = tids ? repalloc(tids, sizeof(ItemPointerData) * cap)
				: palloc(sizeof(ItemPointerData) * cap);
		}
		for (int i = 0; i < nb; i++)
			dex_key_to_tid(&batch[i], &tids[(*n)++]);
	}
	dex_scan_end(ds);
	return tids;
}

/* Does the row in `slot` carry the key being inserted (not a reused TID)? */
static bool
dex_row_has_key(Relation index, IndexInfo *indexInfo, TupleTableSlot *slot,
				const DexKey *key)
{
	AttrNumber	attno = indexInfo->ii_IndexAttrNumbers[0];
	DexKey		k;
	Datum		v;
	bool		isnull;

	if (attno == 0)
		return true;			/* an expression: recomputing it is not worth the race */
	v = slot_getattr(slot, attno, &isnull);
	dex_make_key(&k, index, v, isnull, &slot->tts_tid);
	return k.cls == key->cls && k.value == key->value;
}

typedef enum DexUniqueVerdict
{
	DEX_UNIQUE_OK,				/* no live row with the key */
	DEX_UNIQUE_CONFLICT,		/* a live row has it */
	DEX_UNIQUE_WAIT				/* a running transaction decides: wait for it */
} DexUniqueVerdict;

/*
 * Looks at every entry of the key except `self` (the row being inserted or,
 * for UNIQUE_CHECK_EXISTING, rechecked). On DEX_UNIQUE_WAIT, *xwait and
 * *spec_token say whom to wait for; on DEX_UNIQUE_CONFLICT nothing else.
 */
static DexUniqueVerdict
dex_unique_verdict(Relation index, Relation heap, IndexInfo *indexInfo,
				   DexTree *tree, const DexKey *key, ItemPointer self,
				   TransactionId *xwait, uint32 *spec_token)
{
	ItemPointerData *tids;
	int			n;
	DexUniqueVerdict verdict = DEX_UNIQUE_OK;
	IndexFetchTableData *fetch;
	TupleTableSlot *slot;
	SnapshotData dirty;

	tids = dex_unique_entries(index, tree, key, &n);
	if (n == 0)
		return DEX_UNIQUE_OK;
	InitDirtySnapshot(dirty);
	fetch = table_index_fetch_begin(heap);
	slot = table_slot_create(heap, NULL);
	for (int i = 0; i < n && verdict == DEX_UNIQUE_OK; i++)
	{
		bool		call_again = false;
		bool		all_dead = false;
		ItemPointerData tid = tids[i];

		if (ItemPointerEquals(&tid, self))
			continue;
		if (!table_index_fetch_tuple(fetch, &tid, &dirty, slot, &call_again, &all_dead))
			continue;			/* dead (or never durable) */
		if (!dex_row_has_key(index, indexInfo, slot, key))
			continue;			/* the TID was reused by another row */
		*xwait = TransactionIdIsValid(dirty.xmin) ? dirty.xmin : dirty.xmax;
		*spec_token = dirty.speculativeToken;
		verdict = TransactionIdIsValid(*xwait) ? DEX_UNIQUE_WAIT : DEX_UNIQUE_CONFLICT;
	}
	ExecDropSingleTupleTableSlot(slot);
	table_index_fetch_end(fetch);
	pfree(tids);
	return verdict;
}

static void
dex_unique_violation(Relation index, Relation heap, Datum *values, bool *isnull)
{
	char	   *key_desc = BuildIndexValueDescription(index, values, isnull);

	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("duplicate key value violates unique constraint \"%s\"",
					RelationGetRelationName(index)),
			 key_desc ? errdetail("Key %s already exists.", key_desc) : 0,
			 errtableconstraint(heap, RelationGetRelationName(index))));
}

/*
 * The check before an entry goes into a unique index. Returns with the key
 * lock held (*lockblk; the caller inserts the entry, then calls
 * dex_unique_release), or raises the unique violation. Returns false only for
 * UNIQUE_CHECK_PARTIAL when the key may not be unique (a live row or a
 * running transaction has it): the caller inserts anyway and PostgreSQL
 * rechecks later.
 */
bool
dex_unique_check(Relation index, Relation heap, IndexInfo *indexInfo,
				 DexTree *tree, const DexKey *key, Datum *values, bool *isnull,
				 ItemPointer tid, IndexUniqueCheck mode, BlockNumber *lockblk)
{
	BlockNumber blk = dex_keylock_block(key);
	bool		unique = true;

	LockPage(index, blk, ExclusiveLock);
	for (;;)
	{
		TransactionId xwait = InvalidTransactionId;
		uint32		spec_token = 0;
		DexUniqueVerdict v = dex_unique_verdict(index, heap, indexInfo, tree, key,
												tid, &xwait, &spec_token);

		if (v == DEX_UNIQUE_OK)
			break;
		if (mode == UNIQUE_CHECK_PARTIAL)
		{
			unique = false;		/* rechecked at the end of the statement or transaction */
			break;
		}
		UnlockPage(index, blk, ExclusiveLock);
		if (v == DEX_UNIQUE_CONFLICT)
			dex_unique_violation(index, heap, values, isnull);
		/* wait for the transaction (never while holding the key lock), then look again */
		if (spec_token)
			SpeculativeInsertionWait(xwait, spec_token);
		else
			XactLockTableWait(xwait, heap, tid, XLTW_InsertIndex);
		LockPage(index, blk, ExclusiveLock);
	}
	*lockblk = blk;
	return unique;
}

/* After the entry went in (or was rechecked): the next inserter of the key may look. */
void
dex_unique_release(Relation index, BlockNumber lockblk)
{
	UnlockPage(index, lockblk, ExclusiveLock);
}
