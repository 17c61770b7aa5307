/*
 * dexbuild.c — CREATE INDEX / REINDEX: create a namespace on a memory node,
 * sort the heap's (key, TID) pairs with a PostgreSQL tuplesort, bulk-load the
 * remote tree bottom-up, then write the metapage. Also ambuildempty.
 */
#include "dex.h"

#include "access/tableam.h"
#include "access/xlog.h"
#include "access/tupdesc.h"
#include "catalog/index.h"
#include "catalog/pg_operator_d.h"
#include "catalog/pg_type.h"
#include "commands/progress.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/backend_progress.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/tuplesort.h"
#include "storage/bufmgr.h"
#include "utils/builtins.h"
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif

#include "tree/key_bytes.h"

typedef struct DexBuildState
{
	Oid			atttype;
	TupleDesc	sortdesc;
	TupleTableSlot *slot;		/* virtual: input to the sort */
	TupleTableSlot *outslot;	/* minimal tuple: output of the sort */
	Tuplesortstate *sort;
	double		indtuples;
	MemoryContext tmpcxt;
	bool		unique;			/* CREATE UNIQUE INDEX: live duplicates are refused */
	bool		nulls_distinct;
	/* byte-string entries (DEX_META_BYTES): a datum sort of bytea entries */
	bool		bytes;
	DexEntryColumn cols[INDEX_MAX_KEYS];
	int			ncols;
	DexKeyBuf	kb;

	/* core handles, released by the reset callback on error */
	DexTree    *tree;
	uint64		owner_word;		/* dirty-owner word (write-back mode) */
	uint64		journal;		/* insert journal root */
	DexBulk    *bulk;
	MemoryContextCallback cb;
} DexBuildState;

static void
dex_build_release(void *arg)
{
	DexBuildState *bs = (DexBuildState *) arg;

	if (bs->bulk)
		dex_bulk_abort(bs->bulk);
	bs->bulk = NULL;
	if (bs->tree)
		dex_tree_close(bs->tree);
	bs->tree = NULL;
}

/*
 * A unique index's sort item is its entry and a trailer of DEX_BUILD_TRAILER
 * bytes: 1 if the row is live and its key must not repeat (no NULL, or NULLS
 * NOT DISTINCT), then the key part's length (2 bytes). Entries of one key
 * differ in their TIDs, those of different keys inside their key parts, so
 * the trailer never changes their order.
 */
#define DEX_BUILD_TRAILER 3

/* A byte-string index's row: its entry, as a bytea datum into the sort. */
static void
dex_build_bytes_callback(Relation index, ItemPointer tid, Datum *values,
						 bool *isnull, bool tupleIsAlive, void *state)
{
	DexBuildState *bs = (DexBuildState *) state;
	MemoryContext old = MemoryContextSwitchTo(bs->tmpcxt);
	bytea	   *e;
	size_t		keylen;

	dex_kb_init_palloc(&bs->kb);
	keylen = dex_entry_encode(index, bs->cols, bs->ncols, values, isnull, tid, &bs->kb);
	if (bs->unique)
	{
		bool		check = tupleIsAlive;

		for (int i = 0; i < bs->ncols; i++)
			check &= !isnull[i] || !bs->nulls_distinct;
		dex_kb_byte(&bs->kb, check ? 1 : 0);
		dex_kb_byte(&bs->kb, (uint8) (keylen >> 8));
		dex_kb_byte(&bs->kb, (uint8) keylen);
	}
	e = palloc(VARHDRSZ + bs->kb.len);
	SET_VARSIZE(e, VARHDRSZ + bs->kb.len);
	memcpy(VARDATA(e), bs->kb.data, bs->kb.len);
	tuplesort_putdatum(bs->sort, PointerGetDatum(e), false);	/* copied by the sort */
	bs->indtuples += 1;
	MemoryContextSwitchTo(old);
	MemoryContextReset(bs->tmpcxt);
}

static void
dex_build_callback(Relation index, ItemPointer tid, Datum *values,
				   bool *isnull, bool tupleIsAlive, void *state)
{
	DexBuildState *bs = (DexBuildState *) state;
	MemoryContext old = MemoryContextSwitchTo(bs->tmpcxt);
	ItemPointerData tidcopy = *tid;

	ExecClearTuple(bs->slot);
	if (isnull[0])
	{
		bs->slot->tts_values[0] = (Datum) 0;
		bs->slot->tts_isnull[0] = true;
	}
	else
	{
		bs->slot->tts_values[0] = Int64GetDatum(dex_datum_image(values[0], bs->atttype));
		bs->slot->tts_isnull[0] = false;
	}
	bs->slot->tts_values[1] = PointerGetDatum(&tidcopy);
	bs->slot->tts_isnull[1] = false;
	/*
	 * Payload for a unique index's check: liveness, and the value for its
	 * message (NULL columns, i.e. no bytes in the sort, for other indexes).
	 */
	bs->slot->tts_values[2] = BoolGetDatum(tupleIsAlive);
	bs->slot->tts_isnull[2] = !bs->unique;
	bs->slot->tts_values[3] = isnull[0] || !bs->unique ? (Datum) 0 : values[0];
	bs->slot->tts_isnull[3] = isnull[0] || !bs->unique;
	ExecStoreVirtualTuple(bs->slot);
	tuplesort_puttupleslot(bs->sort, bs->slot);
	ExecClearTuple(bs->slot);
	bs->indtuples += 1;

	MemoryContextSwitchTo(old);
	MemoryContextReset(bs->tmpcxt);
}

/*
 * CREATE UNIQUE INDEX over two live rows with one key: btree's error. The
 * bulk load is abandoned first (it holds no lock; its nodes go with the
 * namespace this transaction's abort drops).
 */
static void
dex_build_duplicate(DexBuildState *bs, Relation heap, Relation index)
{
	Datum		values[1];
	bool		isnull[1];
	char	   *key_desc;

	dex_bulk_abort(bs->bulk);
	bs->bulk = NULL;
	values[0] = slot_getattr(bs->outslot, 4, &isnull[0]);
	key_desc = BuildIndexValueDescription(index, values, isnull);
	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("could not create unique index \"%s\"", RelationGetRelationName(index)),
			 key_desc ? errdetail("Key %s is duplicated.", key_desc) : errdetail("Duplicate keys exist."),
			 errtableconstraint(heap, RelationGetRelationName(index))));
}

/*
 * Step 3 of a build: the sorted entries, bottom-up into the tree. A unique
 * index refuses two live rows with one key (rows dead to everyone, or
 * recently dead, may share it: they are kept for older snapshots). Returns
 * the number of entries loaded.
 */
/* The bulk load of step 3 begins; a failed core call abandons it and reports. */
static void
dex_build_bulk_begin(DexBuildState *bs, Relation index, double fillfactor)
{
	DexError	err;
	int			rc;

	memset(&err, 0, sizeof(err));
	rc = dex_bulk_begin(bs->tree, fillfactor, &bs->bulk, &err);
	if (rc != DEX_OK)
	{
		bs->bulk = NULL;
		dex_report_error(rc, &err, index);
	}
}

static void
dex_build_bulk_failed(DexBuildState *bs, int rc, const DexError *err, Relation index)
{
	dex_bulk_abort(bs->bulk);
	bs->bulk = NULL;
	dex_report_error(rc, err, index);
}

static void
dex_build_bulk_finish(DexBuildState *bs, Relation index)
{
	DexError	err;
	int			rc;

	memset(&err, 0, sizeof(err));
	rc = dex_bulk_finish(bs->bulk, &err);
	bs->bulk = NULL;			/* freed by finish in any case */
	if (rc != DEX_OK)
		dex_report_error(rc, &err, index);
}

static double
dex_build_load(DexBuildState *bs, Relation heap, Relation index, double fillfactor)
{
	DexError	err;
	int			rc;
	double		done = 0;
	DexKey		live_key;		/* the last key a live row had */
	bool		have_live = false;

	memset(&err, 0, sizeof(err));
	dex_build_bulk_begin(bs, index, fillfactor);
	while (tuplesort_gettupleslot(bs->sort, true, false, bs->outslot, NULL))
	{
		DexKey		key;
		bool		isnull;
		bool		alive_null;
		Datum		d;
		ItemPointer tid;

		tid = (ItemPointer) DatumGetPointer(slot_getattr(bs->outslot, 2, &isnull));
		d = slot_getattr(bs->outslot, 1, &isnull);
		if (isnull)
			dex_make_null_key(&key, ItemPointerGetBlockNumberNoCheck(tid),
							  ItemPointerGetOffsetNumberNoCheck(tid));
		else
			dex_make_value_key(&key, DatumGetInt64(d),
							   ItemPointerGetBlockNumberNoCheck(tid),
							   ItemPointerGetOffsetNumberNoCheck(tid));
		if (bs->unique && (!isnull || !bs->nulls_distinct) &&
			DatumGetBool(slot_getattr(bs->outslot, 3, &alive_null)))
		{
			if (have_live && live_key.cls == key.cls && live_key.value == key.value)
				dex_build_duplicate(bs, heap, index);
			live_key = key;
			have_live = true;
		}
		rc = dex_bulk_add(bs->bulk, &key, &err);
		if (rc != DEX_OK)
			dex_build_bulk_failed(bs, rc, &err, index);
		done += 1;
		if (((int64) done) % 1024 == 0)
		{
			pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE,
										 (int64) done);
			CHECK_FOR_INTERRUPTS();
		}
	}
	dex_build_bulk_finish(bs, index);
	return done;
}

/*
 * Step 3 for byte-string entries: the sorted entries (bytea order is memcmp
 * order, a proper prefix first: the tree's) into the tree. A unique index
 * refuses two live rows whose entries begin with the same key part (rows
 * dead to everyone, or recently dead, may share it).
 */
static double
dex_build_load_bytes(DexBuildState *bs, Relation heap, Relation index,
					 IndexInfo *indexInfo, double fillfactor)
{
	DexError	err;
	int			rc;
	double		done = 0;
	Datum		d;
	bool		isnull;
	uint8		live_key[DEX_SLOTTED_MAX_ENTRY_BYTES];	/* the last key part a live row had */
	size_t		live_len = 0;
	ItemPointerData live_tid;
	bool		have_live = false;

	memset(&err, 0, sizeof(err));
	dex_build_bulk_begin(bs, index, fillfactor);
#if PG_VERSION_NUM >= 160000
	while (tuplesort_getdatum(bs->sort, true, false, &d, &isnull, NULL))
#else
	while (tuplesort_getdatum(bs->sort, true, &d, &isnull, NULL))
#endif
	{
		bytea	   *e = DatumGetByteaPP(d);
		const uint8 *p = (const uint8 *) VARDATA_ANY(e);
		size_t		len = VARSIZE_ANY_EXHDR(e);

		if (bs->unique)
		{
			size_t		keylen;

			len -= DEX_BUILD_TRAILER;
			keylen = ((size_t) p[len + 1] << 8) | p[len + 2];
			if (p[len])
			{
				/* the message names the first of the two rows (btree: one of them) */
				if (have_live && keylen == live_len && memcmp(p, live_key, keylen) == 0)
				{
					dex_bulk_abort(bs->bulk);
					bs->bulk = NULL;
					dex_unique_build_duplicate(heap, index, indexInfo, &live_tid);
				}
				dex_entry_tid(p, len, &live_tid);
				memcpy(live_key, p, keylen);
				live_len = keylen;
				have_live = true;
			}
		}
		rc = dex_bulk_add_bytes(bs->bulk, p, (uint32_t) len, &err);
		if (rc != DEX_OK)
			dex_build_bulk_failed(bs, rc, &err, index);
		done += 1;
		if (((int64) done) % 1024 == 0)
		{
			pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, (int64) done);
			CHECK_FOR_INTERRUPTS();
		}
	}
	dex_build_bulk_finish(bs, index);
	return done;
}

/*
 * Namespaces on the memory nodes that were owned by earlier builds of the same
 * index OID (REINDEX, TRUNCATE, VACUUM FULL, CLUSTER keep the OID): free them
 * when this transaction commits.
 */
static void
dex_register_superseded(Relation index, const uint64 *newns, int nnew)
{
	int			count = dex_memnode_count();

	for (int node = 0; node < count; node++)
	{
		DexClusterNs *list;
		int			n;
		DexError	err;
		int			rc = dex_list_cluster_namespaces(node, &list, &n, &err);

		if (rc != DEX_OK)
		{
			if (node < nnew && newns[node] != 0)
				dex_report_error(rc, &err, NULL);
			/* another node: leave its namespaces; dex_orphans() finds them */
			ereport(WARNING,
					(errmsg("could not list namespaces on memory node \"%s\": %s",
							dex_memnode_address(node), err.message)));
			continue;
		}
		for (int i = 0; i < n; i++)
		{
			if (list[i].tag.dboid != MyDatabaseId ||
				list[i].tag.indexoid != RelationGetRelid(index))
				continue;
			if (node < nnew && list[i].ns == newns[node])
				continue;
			dex_register_drop(node, list[i].ns);
		}
		pfree(list);
	}
}

/*
 * pg_upgrade restores the schema on empty tables, then copies the old
 * cluster's index files over this one: a remote tree built now would be
 * thrown away (leaked). The copied metapage names the old cluster; the first
 * use adopts its trees (dexupgrade.c). Until then: a stub.
 */
static IndexBuildResult *
dex_build_upgrade_stub(Relation index)
{
	DexMetaPageData meta;

	memset(&meta, 0, sizeof(meta));
	meta.magic = DEX_MAGIC;
	meta.version = DEX_VERSION;
	meta.flags = DEX_META_UPGRADE_STUB;
	meta.node = -1;
	meta.sysid = GetSystemIdentifier();
	dex_write_metapage(index, MAIN_FORKNUM, &meta);
	return (IndexBuildResult *) palloc0(sizeof(IndexBuildResult));
}

/*
 * The build's state in the current (build) memory context: the entry form
 * the index's columns take, refusing types dex cannot order; its core handles
 * are released by a reset callback if the build fails.
 */
static DexBuildState *
dex_build_state_new(Relation index, IndexInfo *indexInfo)
{
	DexBuildState *bs = palloc0(sizeof(DexBuildState));

	bs->bytes = dex_entry_layout_wanted(index);
	if (bs->bytes)
	{
		bs->ncols = dex_entry_columns_for_build(index, bs->cols);	/* refuses nondeterministic collations */
		for (int i = 0; i < bs->ncols; i++)
			if (!dex_key_bytes_supported(bs->cols[i].typid))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("dex does not support data type %s",
								format_type_be(bs->cols[i].typid))));
	}
	bs->unique = indexInfo->ii_Unique;
	bs->nulls_distinct = !DEX_NULLS_NOT_DISTINCT(indexInfo);
	bs->atttype = dex_column_basetype(index);
	if (!bs->bytes && !dex_type_supported(bs->atttype))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("dex does not support data type %s",
						format_type_be(bs->atttype))));
	bs->cb.func = dex_build_release;
	bs->cb.arg = bs;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, &bs->cb);
	return bs;
}

/* The remote memory an index gets: one namespace per memory node. */
typedef struct DexBuildParts
{
	int			nnodes;
	uint64		ns[DEX_MAX_MEMNODES];
	uint64		incarnation[DEX_MAX_MEMNODES];
	int			placement_level;
} DexBuildParts;

/*
 * 1. The index's namespaces (from here on an abort frees them), its tree
 * handle, its dirty-owner word and insert journal. One namespace per memory
 * node (allocation accounting, freed on DROP); the tree spreads over all of
 * them (src/README.md "Placement over several memory nodes"). The first one,
 * the home node, holds the root and the words.
 */
static void
dex_build_remote(DexBuildState *bs, Relation index, DexBuildParts *parts)
{
	DexOptions *opts = (DexOptions *) index->rd_options;
	DexNsTag	tag;
	DexError	err;
	int			rc;

	dex_make_tag(&tag, RelationGetRelid(index), DEX_REL_NUMBER(index),
				 DEX_REL_SPC(index));
	memset(&err, 0, sizeof(err));
	parts->placement_level = opts ? opts->placement_level : DEX_DEFAULT_PLACEMENT_LEVEL;
	parts->nnodes = dex_memnode_count();
	if (parts->nnodes > DEX_MAX_MEMNODES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("dex.memnodes lists %d memory nodes, at most %d are supported",
						parts->nnodes, DEX_MAX_MEMNODES)));
	for (int i = 0; i < parts->nnodes; i++)
	{
		rc = dex_ns_create(i, (const uint8_t *) &tag, &parts->ns[i], &parts->incarnation[i], &err);
		if (rc != DEX_OK)
			dex_report_error(rc, &err, NULL);
		dex_register_created(i, parts->ns[i]);
	}

	/* earlier namespaces of this index are freed at commit */
	dex_register_superseded(index, parts->ns, parts->nnodes);

	rc = dex_tree_open_parts(0, parts->nnodes, parts->ns, parts->incarnation, parts->placement_level,
							 RelationGetRelationName(index), &bs->tree, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, index);
	if (bs->bytes && (rc = dex_tree_set_layout(bs->tree, DEX_LAYOUT_BYTES, &err)) != DEX_OK)
		dex_report_error(rc, &err, index);

	/* the dirty-owner word of write-back mode (every index gets one) */
	rc = dex_ns_alloc_word(0, parts->ns[0], &bs->owner_word, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, index);

	/*
	 * The insert journal (src/README.md "Crash survival"), recovered as of
	 * this life: the entries loaded below are all of rows made durable by
	 * this command's commit at the latest.
	 */
	rc = dex_journal_create(bs->tree, dex_life(), &bs->journal, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, index);
}

/* An index of no rows: a tree of one empty leaf. */
static void
dex_build_empty_tree(DexBuildState *bs, Relation index)
{
	DexError	err;
	int			rc;

	memset(&err, 0, sizeof(err));
	rc = dex_tree_init_empty(bs->tree, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, index);
}

/*
 * 2. and 3. for byte-string entries: a datum sort of the entries, then the
 * bottom-up load. Returns the entries loaded; *reltuples: the heap's rows.
 */
static double
dex_build_sorted_bytes(DexBuildState *bs, Relation heap, Relation index, IndexInfo *indexInfo,
					   double fillfactor, double *reltuples)
{
	double		done = 0;

	bs->sort = tuplesort_begin_datum(BYTEAOID, ByteaLessOperator, InvalidOid, false,
									 maintenance_work_mem, NULL, TUPLESORT_NONE);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, DEX_PHASE_SCAN);
	*reltuples = table_index_build_scan(heap, index, indexInfo, true, true,
										dex_build_bytes_callback, bs, NULL);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, DEX_PHASE_SORT);
	tuplesort_performsort(bs->sort);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, DEX_PHASE_LOAD);
	if (bs->indtuples == 0)
		dex_build_empty_tree(bs, index);
	else
		done = dex_build_load_bytes(bs, heap, index, indexInfo, fillfactor);
	tuplesort_end(bs->sort);
	bs->sort = NULL;
	return done;
}

/*
 * 2. for 16-byte keys: the heap scanned into a sort over (int8 key NULLS
 * LAST, tid); 3. the bottom-up load. Returns the entries loaded;
 * *reltuples: the heap's rows.
 */
static double
dex_build_sorted_keys(DexBuildState *bs, Relation heap, Relation index, IndexInfo *indexInfo,
					  double fillfactor, double *reltuples)
{
	AttrNumber	attnums[2] = {1, 2};
	Oid			sortops[2] = {Int8LessOperator, TIDLessOperator};
	Oid			collations[2] = {InvalidOid, InvalidOid};
	bool		nullsfirst[2] = {false, false};
	const int	index_params[] = {
		PROGRESS_CREATEIDX_SUBPHASE,
		PROGRESS_CREATEIDX_TUPLES_TOTAL,
		PROGRESS_CREATEIDX_TUPLES_DONE
	};
	int64		vals[3];
	double		done = 0;

	bs->sortdesc = CreateTemplateTupleDesc(4);
	TupleDescInitEntry(bs->sortdesc, 1, "key", INT8OID, -1, 0);
	TupleDescInitEntry(bs->sortdesc, 2, "tid", TIDOID, -1, 0);
	TupleDescInitEntry(bs->sortdesc, 3, "alive", BOOLOID, -1, 0);
	TupleDescInitEntry(bs->sortdesc, 4, "value",
					   TupleDescAttr(RelationGetDescr(index), 0)->atttypid, -1, 0);
	bs->slot = MakeSingleTupleTableSlot(bs->sortdesc, &TTSOpsVirtual);
	bs->outslot = MakeSingleTupleTableSlot(bs->sortdesc, &TTSOpsMinimalTuple);
	bs->sort = tuplesort_begin_heap(bs->sortdesc, 2, attnums, sortops,
									collations, nullsfirst,
									maintenance_work_mem, NULL, TUPLESORT_NONE);

	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, DEX_PHASE_SCAN);
	*reltuples = table_index_build_scan(heap, index, indexInfo, true, true,
										dex_build_callback, bs, NULL);

	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, DEX_PHASE_SORT);
	tuplesort_performsort(bs->sort);

	vals[0] = DEX_PHASE_LOAD;
	vals[1] = (int64) bs->indtuples;
	vals[2] = 0;
	pgstat_progress_update_multi_param(3, index_params, vals);
	if (bs->indtuples == 0)
		dex_build_empty_tree(bs, index);
	else
	{
		done = dex_build_load(bs, heap, index, fillfactor);
		pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, (int64) done);
	}
	tuplesort_end(bs->sort);
	bs->sort = NULL;
	ExecDropSingleTupleTableSlot(bs->slot);
	ExecDropSingleTupleTableSlot(bs->outslot);
	bs->slot = bs->outslot = NULL;
	return done;
}

/* 4. The metapage: where the tree is, its words, the entry form. */
static void
dex_build_metapage(DexBuildState *bs, Relation index, const DexBuildParts *parts)
{
	DexMetaPageData meta;

	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, DEX_PHASE_META);
	memset(&meta, 0, sizeof(meta));
	meta.magic = DEX_MAGIC;
	meta.version = DEX_VERSION;
	meta.flags = 0;
	if (bs->bytes)
	{
		meta.flags |= DEX_META_BYTES;
		if (dex_narrow_images)	/* bs->cols' widths */
			meta.flags |= DEX_META_NARROW;
		dex_entry_meta_columns(index, &meta.columns);
	}
	meta.node = 0;				/* the home memory node */
	meta.ns = parts->ns[0];
	meta.incarnation = parts->incarnation[0];
	strlcpy(meta.address, dex_memnode_address(0) ? dex_memnode_address(0) : "",
			sizeof(meta.address));
	meta.owner_word = bs->owner_word;
	meta.journal = bs->journal;
	meta.sysid = GetSystemIdentifier();
	meta.nparts = parts->nnodes;
	meta.placement_level = parts->placement_level;
	for (int i = 0; i < parts->nnodes; i++)
	{
		meta.parts[i].ns = parts->ns[i];
		meta.parts[i].incarnation = parts->incarnation[i];
		strlcpy(meta.parts[i].address, dex_memnode_address(i) ? dex_memnode_address(i) : "",
				sizeof(meta.parts[i].address));
	}
	dex_write_metapage(index, MAIN_FORKNUM, &meta);
}

IndexBuildResult *
dexbuild(Relation heap, Relation index, IndexInfo *indexInfo)
{
	IndexBuildResult *result;
	DexBuildState *bs;
	DexBuildParts parts;
	DexOptions *opts = (DexOptions *) index->rd_options;
	MemoryContext buildcxt;
	MemoryContext oldcxt;
	double		reltuples;
	double		done;
	double		fillfactor;

	if (IsBinaryUpgrade)
		return dex_build_upgrade_stub(index);
	dex_ensure_configured();
	dex_cluster_check(index);	/* only the writer of dex's remote memory builds */

	if (RelationGetNumberOfBlocks(index) != 0)
		elog(ERROR, "index \"%s\" already contains data",
			 RelationGetRelationName(index));

	buildcxt = AllocSetContextCreate(CurrentMemoryContext, "dex build",
									 ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(buildcxt);
	bs = dex_build_state_new(index, indexInfo);

	dex_build_remote(bs, index, &parts);

	bs->tmpcxt = AllocSetContextCreate(buildcxt, "dex build tuple",
									   ALLOCSET_DEFAULT_SIZES);
	fillfactor = (opts ? opts->fillfactor : DEX_DEFAULT_FILLFACTOR) / 100.0;
	if (bs->bytes)
		done = dex_build_sorted_bytes(bs, heap, index, indexInfo, fillfactor, &reltuples);
	else
		done = dex_build_sorted_keys(bs, heap, index, indexInfo, fillfactor, &reltuples);

	dex_build_metapage(bs, index, &parts);

	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(buildcxt);	/* closes the tree handle */

	result = (IndexBuildResult *) palloc(sizeof(IndexBuildResult));
	result->heap_tuples = reltuples;
	result->index_tuples = done;
	return result;
}

/*
 * Init fork of an unlogged index: a metapage without a remote tree. After a
 * crash the main fork is reset to this, and every use of the index raises
 * "lost its remote memory" with HINT REINDEX (the remote namespace of the old
 * relfilenode is freed by that REINDEX).
 */
void
dexbuildempty(Relation index)
{
	DexMetaPageData meta;

	memset(&meta, 0, sizeof(meta));
	meta.magic = DEX_MAGIC;
	meta.version = DEX_VERSION;
	meta.flags = DEX_META_INIT_FORK;
	meta.node = -1;
	meta.ns = 0;
	meta.incarnation = 0;
	dex_write_metapage(index, INIT_FORKNUM, &meta);
}

char *
dexbuildphasename(int64 phasenum)
{
	switch (phasenum)
	{
		case PROGRESS_CREATEIDX_SUBPHASE_INITIALIZE:
			return "initializing";
		case DEX_PHASE_SCAN:
			return "scanning table";
		case DEX_PHASE_SORT:
			return "sorting";
		case DEX_PHASE_LOAD:
			return "building remote tree";
		case DEX_PHASE_META:
			return "writing metapage";
		default:
			return NULL;
	}
}
