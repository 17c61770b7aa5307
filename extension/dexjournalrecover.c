/*
 * dexjournalrecover.c — recovery of an index's insert journal (src/README.md
 * "Crash survival: the insert journal"), run by dex_journal_gate (dexjournal.c)
 * under its lock when a new primary life first uses the index: every entry
 * the journal lists is checked against the heap, and those whose row did not
 * survive the crash (strays) are deleted, in both layouts:
 *
 *  - fixed keys (DexKey): the key rebuilt from the heap row must be the
 *    journaled one;
 *  - byte-string entries (DEX_META_BYTES): the entry rebuilt from the heap row
 *    with dex_entry_build() must have exactly the journaled bytes (key columns,
 *    TID and whatever an entry carries after them).
 *
 * In both, the row is the HOT-chain root at the entry's TID, in any state
 * (live or dead: VACUUM handles dead ones), that passes the index predicate.
 * An entry of a row whose insert is waiting right now for this recovery also
 * matches (its aminsert then finds it and journals it again).
 */
#include "dex.h"

#include "access/table.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "tree/key_bytes.h"

/* What the heap check needs, set up once per recovery. */
typedef struct DexHeapCheck
{
	Relation	heap;
	Relation	index;
	IndexInfo  *ii;
	EState	   *estate;
	ExprContext *econtext;
	ExprState  *predicate;
	TupleTableSlot *slot;
	IndexFetchTableData *fetch;
	BlockNumber nblocks;
} DexHeapCheck;

static void
heap_check_begin(DexHeapCheck *hc, Relation index)
{
	memset(hc, 0, sizeof(*hc));
	hc->index = index;
	hc->heap = table_open(index->rd_index->indrelid, AccessShareLock);
	hc->ii = BuildIndexInfo(index);
	hc->estate = CreateExecutorState();
	hc->econtext = GetPerTupleExprContext(hc->estate);
	hc->predicate = ExecPrepareQual(hc->ii->ii_Predicate, hc->estate);
	hc->slot = table_slot_create(hc->heap, NULL);
	hc->fetch = table_index_fetch_begin(hc->heap);
	hc->nblocks = RelationGetNumberOfBlocks(hc->heap);
}

static void
heap_check_end(DexHeapCheck *hc)
{
	table_index_fetch_end(hc->fetch);
	ExecDropSingleTupleTableSlot(hc->slot);
	FreeExecutorState(hc->estate);
	table_close(hc->heap, AccessShareLock);
}

/*
 * The index datums of the HOT-chain root at tid, if there is one that the
 * index covers (predicate). False: no such row, the entry is a stray.
 */
static bool
heap_check_row(DexHeapCheck *hc, ItemPointer tid, Datum *values, bool *isnull)
{
	bool		call_again = false;
	bool		all_dead = false;
	ItemPointerData member;

	if (!ItemPointerIsValid(tid) || ItemPointerGetBlockNumber(tid) >= hc->nblocks)
		return false;			/* past the heap's end: the row was never durable */
	ResetExprContext(hc->econtext);
	ExecClearTuple(hc->slot);

	/*
	 * SnapshotAny: the chain's first tuple; a heap-only tuple is never a
	 * root. The fetch overwrites the TID it is given with the chain member's
	 * (a pruned root is a redirect to a heap-only tuple): the caller's `tid`,
	 * the entry's, must stay the root's, or every HOT-updated row whose root
	 * was pruned would look like a stray and lose its entry.
	 */
	member = *tid;
	if (!table_index_fetch_tuple(hc->fetch, &member, SnapshotAny, hc->slot,
								 &call_again, &all_dead))
		return false;
	hc->econtext->ecxt_scantuple = hc->slot;
	if (hc->predicate && !ExecQual(hc->predicate, hc->econtext))
		return false;
	FormIndexDatum(hc->ii, hc->slot, hc->estate, values, isnull);
	return true;
}

/* Does the heap still hold this fixed-key entry's row? */
static bool
key_has_row(DexHeapCheck *hc, const DexKey *k)
{
	ItemPointerData tid;
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	DexKey		k2;

	if (k->cls != DEX_KEY_VALUE && k->cls != DEX_KEY_NULL)
		return false;
	dex_key_to_tid(k, &tid);
	if (!heap_check_row(hc, &tid, values, isnull))
		return false;
	dex_make_key(&k2, hc->index, values[0], isnull[0], &tid);
	return dex_key_cmp(&k2, k) == 0;
}

/*
 * Does the heap still hold this byte-string entry's row: is the entry that
 * row would get today, byte for byte, the journaled one? (Not a comparison
 * of the key columns alone: the TID is part of the entry, and an entry may
 * carry more after it, all rebuilt by dex_entry_build().)
 */
static bool
entry_has_row(DexHeapCheck *hc, const uint8 *entry, uint32 len, DexKeyBuf *kb)
{
	ItemPointerData tid;
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];

	if (len < DEX_ENTRY_TID_BYTES)
		return false;			/* no entry of this index: never a row's */
	dex_entry_tid(entry, len, &tid);
	if (!heap_check_row(hc, &tid, values, isnull))
		return false;
	/* a row too long to index (its insert failed) has no entry */
	if (!dex_entry_build_if_fits(hc->index, values, isnull, &tid, kb))
		return false;
	return kb->len == len && memcmp(kb->data, entry, len) == 0;
}

static void
report_recovered(Relation index, int n, uint64 removed)
{
	ereport(removed > 0 ? LOG : DEBUG1,
			(errmsg("dex: recovered the insert journal of index \"%s\": %d journaled entries checked against the heap, " UINT64_FORMAT " stray entries removed",
					RelationGetRelationName(index), n, removed)));
}

/*
 * Recovery of a fixed-key index's journal, moving it to life `mine`. The
 * caller holds the recovery lock. The core's array is copied first: the heap
 * check may ERROR, and palloc'd memory goes with the transaction.
 */
void
dex_journal_recover_fixed(Relation index, DexTree *tree, uint64 mine)
{
	DexKey	   *keys = NULL;
	DexKey	   *copy;
	DexKey	   *strays;
	int			n = 0;
	int			nstrays = 0;
	uint64		life = 0;
	uint64_t	removed = 0;
	DexError	err;
	int			rc;
	DexHeapCheck hc;

	memset(&err, 0, sizeof(err));
	rc = dex_journal_read(tree, &keys, &n, &life, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, index);
	copy = palloc(sizeof(DexKey) * Max(n, 1));
	memcpy(copy, keys, sizeof(DexKey) * n);
	dex_free(keys);
	if (life == mine)
		return;					/* another backend of this life recovered it meanwhile */

	strays = palloc(sizeof(DexKey) * Max(n, 1));
	heap_check_begin(&hc, index);
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (!key_has_row(&hc, &copy[i]))
		{
			if (nstrays < 20)
				ereport(DEBUG1,
						(errmsg("dex: index \"%s\": journaled entry (key image " UINT64_FORMAT ", TID (%u,%u)) has no row: a stray",
								RelationGetRelationName(index), copy[i].value, copy[i].block, copy[i].offnum)));
			strays[nstrays++] = copy[i];
		}
	}
	heap_check_end(&hc);

	rc = dex_journal_finish(tree, life, mine, strays, nstrays, &removed, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, index);
	report_recovered(index, n, (uint64) removed);
	pfree(strays);
	pfree(copy);
}

/* The same for a byte-string index (DEX_META_BYTES). */
void
dex_journal_recover_bytes(Relation index, DexTree *tree, uint64 mine)
{
	DexBytes   *entries = NULL;
	DexBytes   *copy;
	DexBytes   *strays;
	int			n = 0;
	int			nstrays = 0;
	uint64		life = 0;
	uint64_t	removed = 0;
	DexError	err;
	int			rc;
	DexHeapCheck hc;
	DexKeyBuf	kb;

	memset(&err, 0, sizeof(err));
	rc = dex_journal_read_bytes(tree, &entries, &n, &life, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, index);
	copy = palloc(sizeof(DexBytes) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		uint8	   *p = palloc(Max(entries[i].len, 1));

		memcpy(p, entries[i].data, entries[i].len);
		copy[i].data = p;
		copy[i].len = entries[i].len;
	}
	dex_free(entries);
	if (life == mine)
		return;					/* another backend of this life recovered it meanwhile */

	strays = palloc(sizeof(DexBytes) * Max(n, 1));
	dex_kb_init_palloc(&kb);
	heap_check_begin(&hc, index);
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (!entry_has_row(&hc, copy[i].data, copy[i].len, &kb))
			strays[nstrays++] = copy[i];
	}
	heap_check_end(&hc);

	rc = dex_journal_finish_bytes(tree, life, mine, strays, nstrays, &removed, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, index);
	report_recovered(index, n, (uint64) removed);
}
