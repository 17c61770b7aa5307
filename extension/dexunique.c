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
 *
 * Byte-string indexes (DEX_META_BYTES: text, uuid, numeric, several columns,
 * DESC, ...) do the same with the entry's key part -- its key columns' bytes,
 * before any INCLUDE payload and the heap TID -- as the key: the lock hashes
 * it, the scan is the prefix range [key, key || 0xFF x 8], a reused TID is
 * told by re-encoding the row's key.
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

#include "tree/key_bytes.h"

/*
 * Key locks are page locks on the index at blocks 0x80000000 ..
 * 0xBFFFFFFF (a dex index has one block, its metapage; dexjournal.c uses
 * 0xFFFFFFF0).
 */
#define DEX_KEYLOCK_BASE	((BlockNumber) 0x80000000)
#define DEX_KEYLOCK_MASK	((uint32) 0x3FFFFFFF)

/*
 * The key a check looks for: a 16-byte key's value and class, or a
 * byte-string entry's key part (its key columns' bytes, dex_entry_build's
 * return value). Equal SQL keys have equal key parts (deterministic
 * collations only, dexentry.c), so the entries of a key are exactly those
 * beginning with its key part.
 */
typedef struct DexUniqueKey
{
	const DexKey *fixed;		/* NULL for a byte-string key */
	const uint8 *bytes;
	size_t		len;
} DexUniqueKey;

static BlockNumber
dex_keylock_block(const DexUniqueKey *uk)
{
	uint32		h;

	if (uk->fixed)
	{
		h = hash_bytes((const unsigned char *) &uk->fixed->value, sizeof(uk->fixed->value));
		h = hash_combine(h, uk->fixed->cls);
	}
	else
		h = hash_bytes((const unsigned char *) uk->bytes, (int) uk->len);
	return DEX_KEYLOCK_BASE | (h & DEX_KEYLOCK_MASK);
}

static void
dex_unique_add_tid(ItemPointerData **tids, int *n, int *cap, ItemPointer tid)
{
	if (*n == *cap)
	{
		*cap = Max(*cap * 2, 16);
		*tids = *tids ? repalloc(*tids, sizeof(ItemPointerData) * *cap)
			: palloc(sizeof(ItemPointerData) * *cap);
	}
	(*tids)[(*n)++] = *tid;
}

/* Every entry of the key's value (or of NULL), in TID order; *n of them. */
static ItemPointerData *
dex_unique_entries_fixed(Relation index, DexTree *tree, const DexKey *key, int *n)
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
		for (int i = 0; i < nb; i++)
		{
			ItemPointerData tid;

			dex_key_to_tid(&batch[i], &tid);
			dex_unique_add_tid(&tids, n, &cap, &tid);
		}
	}
	dex_scan_end(ds);
	return tids;
}

/*
 * Every entry beginning with a byte-string key part: [key, key || 0xFF x 8]
 * (0xFF starts no column, and a TID is below 8 0xFF bytes), in TID order.
 */
static ItemPointerData *
dex_unique_entries_bytes(Relation index, DexTree *tree, const DexUniqueKey *uk, int *n)
{
	uint8	   *hi = palloc(uk->len + DEX_ENTRY_PAD_BYTES);
	DexScan    *ds = NULL;
	DexError	err;
	ItemPointerData *tids = NULL;
	int			cap = 0;
	int			rc;

	memcpy(hi, uk->bytes, uk->len);
	memset(hi + uk->len, 0xFF, DEX_ENTRY_PAD_BYTES);
	*n = 0;
	memset(&err, 0, sizeof(err));
	rc = dex_scan_begin_bytes(tree, uk->bytes, (uint32_t) uk->len, hi,
							  (uint32_t) (uk->len + DEX_ENTRY_PAD_BYTES), 0, &ds, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, index);
	for (;;)
	{
		const DexBytes *batch = NULL;
		int			nb = 0;

		rc = dex_scan_next_bytes(ds, &batch, &nb, &err);
		if (rc != DEX_OK)
		{
			dex_scan_end(ds);
			dex_report_error(rc, &err, index);
		}
		if (nb == 0)
			break;
		for (int i = 0; i < nb; i++)
		{
			ItemPointerData tid;

			Assert(batch[i].len > uk->len && memcmp(batch[i].data, uk->bytes, uk->len) == 0);
			dex_entry_tid(batch[i].data, batch[i].len, &tid);
			dex_unique_add_tid(&tids, n, &cap, &tid);
		}
	}
	dex_scan_end(ds);
	pfree(hi);
	return tids;
}

/*
 * The index's values of a heap row; false if some key column is an
 * expression (recomputing it to rule out a reused TID is not worth it).
 * Include columns are plain columns (PostgreSQL refuses expressions there).
 */
static bool
dex_row_index_values(IndexInfo *indexInfo, TupleTableSlot *slot, Datum *values, bool *isnull)
{
	for (int i = 0; i < indexInfo->ii_NumIndexAttrs; i++)
	{
		AttrNumber	attno = indexInfo->ii_IndexAttrNumbers[i];

		if (attno == 0)
			return false;
		values[i] = slot_getattr(slot, attno, &isnull[i]);
	}
	return true;
}

/* Does the row in `slot` carry the key being inserted (not a reused TID)? */
static bool
dex_row_has_key(Relation index, IndexInfo *indexInfo, TupleTableSlot *slot,
				const DexUniqueKey *uk)
{
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	DexKeyBuf	kb;
	size_t		keylen;
	bool		same;

	if (!dex_row_index_values(indexInfo, slot, values, isnull))
		return true;
	if (uk->fixed)
	{
		DexKey		k;

		dex_make_key(&k, index, values[0], isnull[0], &slot->tts_tid);
		return k.cls == uk->fixed->cls && k.value == uk->fixed->value;
	}
	dex_kb_init_palloc(&kb);
	keylen = dex_entry_build(index, values, isnull, &slot->tts_tid, &kb);
	same = keylen == uk->len && memcmp(kb.data, uk->bytes, keylen) == 0;
	pfree(kb.data);
	return same;
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
				   DexTree *tree, const DexUniqueKey *uk, ItemPointer self,
				   TransactionId *xwait, uint32 *spec_token)
{
	ItemPointerData *tids;
	int			n;
	DexUniqueVerdict verdict = DEX_UNIQUE_OK;
	IndexFetchTableData *fetch;
	TupleTableSlot *slot;
	SnapshotData dirty;

	tids = uk->fixed ? dex_unique_entries_fixed(index, tree, uk->fixed, &n)
		: dex_unique_entries_bytes(index, tree, uk, &n);
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
		if (!dex_row_has_key(index, indexInfo, slot, uk))
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

/* dex_unique_check / dex_unique_check_bytes for either kind of key. */
static bool
dex_unique_check_key(Relation index, Relation heap, IndexInfo *indexInfo,
					 DexTree *tree, const DexUniqueKey *uk, Datum *values, bool *isnull,
					 ItemPointer tid, IndexUniqueCheck mode, BlockNumber *lockblk)
{
	BlockNumber blk = dex_keylock_block(uk);
	bool		unique = true;

	LockPage(index, blk, ExclusiveLock);
	for (;;)
	{
		TransactionId xwait = InvalidTransactionId;
		uint32		spec_token = 0;
		DexUniqueVerdict v = dex_unique_verdict(index, heap, indexInfo, tree, uk,
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
	DexUniqueKey uk = {key, NULL, 0};

	return dex_unique_check_key(index, heap, indexInfo, tree, &uk, values, isnull,
								tid, mode, lockblk);
}

/*
 * The same for a byte-string index (DEX_META_BYTES): key = the first keylen
 * bytes of the entry being inserted (dex_entry_build's return value).
 */
bool
dex_unique_check_bytes(Relation index, Relation heap, IndexInfo *indexInfo,
					   DexTree *tree, const uint8 *key, size_t keylen,
					   Datum *values, bool *isnull, ItemPointer tid,
					   IndexUniqueCheck mode, BlockNumber *lockblk)
{
	DexUniqueKey uk = {NULL, key, keylen};

	return dex_unique_check_key(index, heap, indexInfo, tree, &uk, values, isnull,
								tid, mode, lockblk);
}

/* After the entry went in (or was rechecked): the next inserter of the key may look. */
void
dex_unique_release(Relation index, BlockNumber lockblk)
{
	UnlockPage(index, lockblk, ExclusiveLock);
}

/*
 * CREATE UNIQUE INDEX over two live rows of one key, in a byte-string index:
 * btree's error. The build's sort holds entries, not values: the values for
 * the message are the row's at `tid` (either of the two), computed as
 * unique_key_recheck does. The caller holds no dex lock and has abandoned
 * its bulk load.
 */
void
dex_unique_build_duplicate(Relation heap, Relation index, IndexInfo *indexInfo,
						   ItemPointer tid)
{
	EState	   *estate = CreateExecutorState();
	ExprContext *econtext = GetPerTupleExprContext(estate);
	TupleTableSlot *slot = table_slot_create(heap, NULL);
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	char	   *key_desc = NULL;
	IndexFetchTableData *fetch = table_index_fetch_begin(heap);
	bool		call_again = false;
	bool		all_dead = false;

	/* the TID may be a HOT chain's root: its members share the key */
	if (table_index_fetch_tuple(fetch, tid, SnapshotAny, slot, &call_again, &all_dead))
	{
		econtext->ecxt_scantuple = slot;
		indexInfo->ii_ExpressionsState = NIL;	/* the build scan's estate is gone */
		FormIndexDatum(indexInfo, slot, estate, values, isnull);
		key_desc = BuildIndexValueDescription(index, values, isnull);
	}
	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("could not create unique index \"%s\"", RelationGetRelationName(index)),
			 key_desc ? errdetail("Key %s is duplicated.", key_desc) : errdetail("Duplicate keys exist."),
			 errtableconstraint(heap, RelationGetRelationName(index))));
}
