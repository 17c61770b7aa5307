/*
 * dexpending.c — entries a backend has inserted but not yet written to remote
 * memory (src/README.md "Batched inserts").
 *
 * A multi-row statement (COPY, INSERT ... SELECT, a batch UPDATE) paid one
 * remote round trip per row. aminsert now keeps the entry in this backend
 * and writes up to dex.insert_batch entries per index in one call of the
 * core (dex_tree_insert_batch: one round trip per memory node). The first
 * entry of a statement for an index is written at once, as before: a
 * single-row INSERT pays nothing for the mechanism (holding back its one
 * entry only to write it at ExecutorEnd cost 2.4% of its throughput), and
 * a multi-row statement holds back from its second row on. Nobody but
 * this backend may need an entry before its transaction commits, except a
 * unique or exclusion check of a concurrent inserter -- so those indexes are
 * never buffered. The rules:
 *
 *   1. Flush before use. Anything else this backend does with an index
 *      (scan, VACUUM, dex_check, ...) goes through dex_get_tree(), which
 *      writes the index's pending entries first: the backend always sees its
 *      own rows.
 *   2. Flush at the end of every statement run by the executor
 *      (ExecutorEnd), so that an unreachable memory node fails the statement
 *      that inserted, and before commit or PREPARE (XACT_EVENT_PRE_COMMIT /
 *      PRE_PREPARE): what COPY FROM (no ExecutorEnd) or an index_insert
 *      outside the executor (CREATE INDEX CONCURRENTLY's validation) left.
 *      In a transaction block, a COPY's last batch may thus fail at the next
 *      use of the index or at COMMIT instead of in the COPY itself. A committed row's entry is therefore in remote memory
 *      before the commit record is written -- what hot standbys and the
 *      crash invariant rely on. Each entry keeps its row's LSN, and the core
 *      journals it at the flush exactly as a single insert (src/README.md
 *      "The insert journal").
 *   3. Discard at abort. A (sub)transaction's rows die with it, and its
 *      entries must not be written afterwards: VACUUM may already have
 *      removed the dead rows and freed their slots for other rows, which a
 *      late entry would then point to. Each entry carries the nesting level
 *      that inserted it.
 *   4. An index that was dropped or rebuilt (a new tree: REINDEX, TRUNCATE,
 *      a table rewrite) in the same transaction gets nothing: the rebuild
 *      read this transaction's rows from the heap. (The tree is told by its
 *      metapage's namespace, not by the relfilenode: ALTER INDEX ... SET
 *      TABLESPACE copies the metapage to a new relfilenode, same tree.)
 */
#include "dex.h"

#include "access/parallel.h"
#include "access/relation.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "tree/key_bytes.h"
#include "tree/node_capacity.h"

/* dex.insert_batch: entries per index held back (1: write each at once) */
int			dex_insert_batch = 256;
/*
 * dex.bottom_up: an UPDATE's entry whose key it did not change is not held
 * back but inserted at once, with a bottom-up deletion pass if its leaf is
 * full (dexinsert.c, dexbottomup.c).
 */
bool		dex_bottom_up = true;

typedef struct DexPendingEntry
{
	DexKey		key;			/* a 16-byte-key index's entry */
	uint32		boff;			/* a byte-string index's entry: blen bytes */
	uint32		blen;			/* at the index's arena + boff */
	uint64		lsn;			/* end of the row's heap WAL record (0: not logged) */
	int			level;			/* transaction nesting level that inserted it */
} DexPendingEntry;

/* a byte-string index's arena: dex.insert_batch entries of the longest size */
#define DEX_PENDING_ARENA_BYTES(n)	((Size) (n) * DEX_SLOTTED_MAX_ENTRY_BYTES)

typedef struct DexPendingIndex
{
	Oid			indexoid;
	uint64		ns;				/* the tree (home namespace) the entries belong to */
	int			n;
	int			cap;
	DexPendingEntry *entries;	/* cap of them */
	uint8	   *arena;			/* byte-string entries' bytes (NULL: none yet) */
	Size		arena_used;		/* of DEX_PENDING_ARENA_BYTES(cap) */
	uint64		direct_stmt;	/* dex_stmt_seq when an entry was last written at once */
	bool		unwarmed;		/* a full batch was written since the last read-back */
} DexPendingIndex;

static MemoryContext pending_cxt = NULL;
static DexPendingIndex *pending = NULL;
static int	npending = 0;
static int	pending_cap = 0;

static ExecutorEnd_hook_type prev_ExecutorEnd = NULL;

/* Counts statement ends (ExecutorEnd, also nested ones) and transaction ends. */
static uint64 dex_stmt_seq = 1;

/* The index's held-back entries are gone (written or discarded). */
static void
pending_clear(DexPendingIndex *p)
{
	p->n = 0;
	p->arena_used = 0;
	p->unwarmed = false;
}

static DexPendingIndex *
dex_pending_find(Oid indexoid)
{
	for (int i = 0; i < npending; i++)
		if (pending[i].indexoid == indexoid)
			return &pending[i];
	return NULL;
}

static void
dex_pending_forget_all(void)
{
	/*
	 * The buffers stay for the next transaction (a single-row transaction
	 * then allocates nothing), unless many indexes have collected.
	 */
	if (npending <= 32)
	{
		for (int i = 0; i < npending; i++)
			pending_clear(&pending[i]);
		return;
	}
	npending = 0;
	pending_cap = 0;
	pending = NULL;
	if (pending_cxt)
		MemoryContextReset(pending_cxt);
}

static DexPendingIndex *
dex_pending_new(Oid indexoid)
{
	DexPendingIndex *p;

	if (pending_cxt == NULL)
		pending_cxt = AllocSetContextCreate(TopMemoryContext, "dex pending inserts",
											ALLOCSET_DEFAULT_SIZES);
	if (npending == pending_cap)
	{
		int			cap = pending_cap ? pending_cap * 2 : 4;

		pending = pending == NULL ?
			MemoryContextAlloc(pending_cxt, sizeof(DexPendingIndex) * cap) :
			repalloc(pending, sizeof(DexPendingIndex) * cap);
		pending_cap = cap;
	}
	p = &pending[npending++];
	p->indexoid = indexoid;
	p->ns = 0;
	p->n = 0;
	p->cap = 0;
	p->unwarmed = false;
	p->entries = NULL;
	p->arena = NULL;
	p->arena_used = 0;
	p->direct_stmt = 0;
	return p;
}

/*
 * May aminsert hold this entry back? Not for a unique or exclusion-constraint
 * index (a concurrent inserter's check must find it at once), not in a
 * parallel worker (its leader's hooks do not run there), and not while the
 * batch size says "write each entry at once".
 */
bool
dex_pending_allowed(Relation index, IndexUniqueCheck checkUnique, struct IndexInfo *indexInfo)
{
	return dex_insert_batch > 1 && checkUnique == UNIQUE_CHECK_NO &&
		!index->rd_index->indisunique &&
		(indexInfo == NULL || indexInfo->ii_ExclusionOps == NULL) &&
		!IsParallelWorker();
}

/* The tree an index's current relfilenode names (its metapage, cached). */
static uint64
dex_pending_tree_of(Relation index)
{
	return dex_index_tree_ns(index);
}

/*
 * A batch's entries in the core's key order: PostgreSQL's sort template with
 * the key comparison inlined (qsort's call through a pointer per comparison
 * was about 2% of a bulk load's backend CPU).
 */
#define ST_SORT dex_pending_sort
#define ST_ELEMENT_TYPE DexPendingEntry
#define ST_COMPARE(a, b) DEX_KEY_COMPARE(&(a)->key, &(b)->key)
#define ST_SCOPE static
#define ST_DEFINE
#include "lib/sort_template.h"

/* A byte-string entry and its row's LSN, for sorting. */
typedef struct DexPendingBytes
{
	DexBytes	e;
	uint64		lsn;
} DexPendingBytes;

/* (e comes first: dex_bytes_cmp orders DexPendingBytes by their entries) */
StaticAssertDecl(offsetof(DexPendingBytes, e) == 0, "the entry leads a DexPendingBytes");

/*
 * Write n sorted, distinct entries (16-byte keys, or byte strings) in calls
 * of the core; a NEED_WAL_FLUSH means a prefix went in: flush WAL, go on.
 */
static void
dex_pending_send(Relation index, const DexKey *keys, const DexBytes *bytes,
				 const uint64_t *lsns, int n)
{
	DexTree    *tree = dex_open_tree(index);
	int			from = 0;

	while (from < n)
	{
		DexError	err;
		int			done = 0;
		int			rc;

		memset(&err, 0, sizeof(err));
		if (bytes)
			rc = dex_tree_insert_batch_bytes(tree, bytes + from, lsns + from, n - from,
											 dex_cluster_retention_published(), &done, &err);
		else
			rc = dex_tree_insert_batch(tree, keys + from, lsns + from, n - from,
									   dex_cluster_retention_published(), &done, &err);
		if (rc == DEX_ERR_NEED_WAL_FLUSH)
		{
			from += done;
			dex_wal_flush_for_retry(&err, index);
			continue;
		}
		if (rc != DEX_OK)
			dex_report_error(rc, &err, index);
		from = n;
	}
}

/* A byte-string index's entries, sorted and distinct, to dex_pending_send. */
static void
dex_pending_write_bytes(Relation index, DexPendingIndex *p, int n)
{
	DexPendingBytes *sorted = palloc(sizeof(DexPendingBytes) * n);
	DexBytes   *bytes = palloc(sizeof(DexBytes) * n);
	uint64_t   *lsns = palloc(sizeof(uint64_t) * n);
	int			m = 0;

	for (int i = 0; i < n; i++)
	{
		sorted[i].e.data = p->arena + p->entries[i].boff;
		sorted[i].e.len = p->entries[i].blen;
		sorted[i].lsn = p->entries[i].lsn;
	}
	qsort(sorted, n, sizeof(DexPendingBytes), dex_bytes_cmp);
	for (int i = 0; i < n; i++)
	{
		/* an entry ends with its row's TID: a repeat can only be the same entry */
		if (m > 0 && dex_bytes_cmp(&sorted[i], &sorted[i - 1]) == 0)
			continue;
		bytes[m] = sorted[i].e;
		lsns[m++] = sorted[i].lsn;
	}
	dex_pending_send(index, NULL, bytes, lsns, m);
	pfree(sorted);
	pfree(bytes);
	pfree(lsns);
}

/*
 * The statement's last entries for the index are in: read back the cached
 * leaves its batches dropped (dex_tree_rewarm). Not after each full batch:
 * a bulk load changes the same leaves batch after batch. A failure only
 * leaves leaves uncached, and the next use of the index meets its cause.
 */
static void
dex_pending_rewarm(Relation index)
{
	DexError	err;

	memset(&err, 0, sizeof(err));
	if (dex_tree_rewarm(dex_open_tree(index), &err) != DEX_OK)
		elog(DEBUG1, "dex: reading back the cached leaves of index \"%s\" failed: %s",
			 RelationGetRelationName(index), err.message);
}

/* A 16-byte-key index's n entries, sorted and distinct, to dex_pending_send. */
static void
dex_pending_write_keys(Relation index, DexPendingIndex *p, int n)
{
	DexKey	   *keys = palloc(sizeof(DexKey) * n);
	uint64_t   *lsns = palloc(sizeof(uint64_t) * n);
	int			m = 0;

	dex_pending_sort(p->entries, n);
	for (int i = 0; i < n; i++)
	{
		/* (key, TID) is unique: a repeat can only be the same entry */
		if (m > 0 && dex_key_cmp(&keys[m - 1], &p->entries[i].key) == 0)
			continue;
		keys[m] = p->entries[i].key;
		lsns[m++] = p->entries[i].lsn;
	}
	dex_pending_send(index, keys, NULL, lsns, m);
	pfree(keys);
	pfree(lsns);
}

/*
 * Write one index's entries: sorted (the core groups them by leaf and memory
 * node), in calls of at most dex.insert_batch. The buffer is emptied before
 * any error is raised: an aborting transaction must not write it again (the
 * arena's bytes stay valid until the next entry is added). `last`: the
 * statement's (or the transaction's) final write for the index, or one
 * before another use of it: then the dropped cached leaves are read back.
 */
static void
dex_pending_write(Relation index, DexPendingIndex *p, bool last)
{
	int			n = p->n;

	pending_clear(p);
	p->unwarmed = !last;
	if (n > 0 && p->arena)
		dex_pending_write_bytes(index, p, n);
	else if (n > 0)
		dex_pending_write_keys(index, p, n);
	if (last)
		dex_pending_rewarm(index);
}

/*
 * aminsert: a slot for the entry of `len` bytes (0: a 16-byte key) if it is
 * held back -- written when the index's batch is full -- or NULL: the caller
 * writes it now, the statement's first entry for this index.
 */
static DexPendingEntry *
dex_pending_slot(Relation index, Relation heapRel, size_t len, DexPendingIndex **pp)
{
	DexPendingIndex *p = dex_pending_find(RelationGetRelid(index));
	uint64		ns;
	DexPendingEntry *e;

	/* the statement's first entry for this index: the caller writes it */
	if (p == NULL)
		p = dex_pending_new(RelationGetRelid(index));
	if (p->n == 0 && p->direct_stmt != dex_stmt_seq)
	{
		p->direct_stmt = dex_stmt_seq;
		return NULL;
	}
	ns = dex_pending_tree_of(index);
	if (p->n > 0 && p->ns != ns)
		pending_clear(p);		/* rebuilt since (rule 4) */
	p->ns = ns;
	/* dex.insert_batch may have changed since the buffer was made */
	if (p->n >= dex_insert_batch ||
		(p->arena && p->arena_used + len > DEX_PENDING_ARENA_BYTES(p->cap)))
		dex_pending_write(index, p, false);
	if (p->cap < dex_insert_batch)
	{
		p->entries = p->entries == NULL ?
			MemoryContextAlloc(pending_cxt, sizeof(DexPendingEntry) * dex_insert_batch) :
			repalloc(p->entries, sizeof(DexPendingEntry) * dex_insert_batch);
		if (p->arena)
			p->arena = repalloc(p->arena, DEX_PENDING_ARENA_BYTES(dex_insert_batch));
		p->cap = dex_insert_batch;
	}
	if (len > 0 && p->arena == NULL)
		p->arena = MemoryContextAlloc(pending_cxt, DEX_PENDING_ARENA_BYTES(p->cap));
	e = &p->entries[p->n++];
	e->lsn = dex_row_lsn(heapRel);
	e->level = GetCurrentTransactionNestLevel();
	*pp = p;
	return e;
}

/* After the slot was filled: write the batch if it is full. */
static void
dex_pending_filled(Relation index, DexPendingIndex *p)
{
	if (p->n >= dex_insert_batch)
		dex_pending_write(index, p, false);
}

/*
 * aminsert of a 16-byte key: hold it back (true), or false: the caller
 * writes it now.
 */
bool
dex_pending_add(Relation index, Relation heapRel, const DexKey *key)
{
	DexPendingIndex *p;
	DexPendingEntry *e = dex_pending_slot(index, heapRel, 0, &p);

	if (e == NULL)
		return false;
	e->key = *key;
	dex_pending_filled(index, p);
	return true;
}

/* The same for a byte-string entry (dex_entry_build's, at most 152 bytes). */
bool
dex_pending_add_bytes(Relation index, Relation heapRel, const uint8 *entry, size_t len)
{
	DexPendingIndex *p;
	DexPendingEntry *e;

	Assert(len > 0 && len <= DEX_SLOTTED_MAX_ENTRY_BYTES);
	e = dex_pending_slot(index, heapRel, len, &p);
	if (e == NULL)
		return false;
	memcpy(p->arena + p->arena_used, entry, len);
	e->boff = (uint32) p->arena_used;
	e->blen = (uint32) len;
	p->arena_used += len;
	dex_pending_filled(index, p);
	return true;
}

/* Rule 1: before this backend uses the index for anything else. */
void
dex_pending_flush_index(Relation index)
{
	DexPendingIndex *p;

	if (npending == 0)
		return;
	p = dex_pending_find(RelationGetRelid(index));
	if (p == NULL || (p->n == 0 && !p->unwarmed))
		return;
	if (p->ns != dex_pending_tree_of(index))
	{
		pending_clear(p);				/* rule 4 */
		return;
	}
	dex_pending_write(index, p, true);
}

/*
 * The remote tree of a dex index, for any use but aminsert's: with the
 * entries this backend's inserts still hold back written first
 * (rule 1), so that it sees its own rows.
 */
DexTree *
dex_get_tree(Relation index)
{
	dex_pending_flush_index(index);
	return dex_open_tree(index);
}

/* The same for an index scan (dex_open_tree_for_scan: it waits per range). */
DexTree *
dex_get_tree_for_scan(Relation index)
{
	dex_pending_flush_index(index);
	return dex_open_tree_for_scan(index);
}

/* Rule 2: every index's entries (end of statement, commit, PREPARE). */
static void
dex_pending_flush_all(void)
{
	for (int i = 0; i < npending; i++)
	{
		DexPendingIndex *p = &pending[i];
		Relation	index;

		if (p->n == 0 && !p->unwarmed)
			continue;
		/* the inserting statement holds RowExclusiveLock until commit */
		index = try_relation_open(p->indexoid, RowExclusiveLock);
		if (index == NULL)
		{
			pending_clear(p);			/* dropped in this transaction (rule 4) */
				continue;
		}
		if (p->ns == dex_pending_tree_of(index))
			dex_pending_write(index, p, true);
		pending_clear(p);
		relation_close(index, RowExclusiveLock);
	}
}

static void
dex_pending_executor_end(QueryDesc *queryDesc)
{
	if (prev_ExecutorEnd)
		prev_ExecutorEnd(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);
	dex_stmt_seq++;
	if (npending > 0)
		dex_pending_flush_all();
}

static void
dex_pending_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			if (npending > 0)
				dex_pending_flush_all();
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			dex_pending_forget_all();	/* rule 3 (empty already after a commit) */
			dex_stmt_seq++;
			break;
		default:
			break;
	}
}

/* Rule 3 for subtransactions; a committed one hands its entries to its parent. */
static void
dex_pending_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							 SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();

	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;
	for (int i = 0; i < npending; i++)
	{
		DexPendingIndex *p = &pending[i];
		int			keep = 0;

		for (int j = 0; j < p->n; j++)
		{
			DexPendingEntry *e = &p->entries[j];

			if (e->level >= level)
			{
				if (event == SUBXACT_EVENT_ABORT_SUB)
					continue;
				e->level = level - 1;
			}
			p->entries[keep++] = *e;
		}
		p->n = keep;
	}
}

/* _PG_init */
void
dex_pending_init(void)
{
	prev_ExecutorEnd = ExecutorEnd_hook;
	ExecutorEnd_hook = dex_pending_executor_end;
	RegisterXactCallback(dex_pending_xact_callback, NULL);
	RegisterSubXactCallback(dex_pending_subxact_callback, NULL);
}
