/*
 * dexfuncs.c — SQL-callable functions: dex_check, dex_index_info, dex_stats,
 * dex_stats_reset, dex_memnodes, dex_orphans, dex_free_orphans, dex_cache_stats
 * (the cluster registry's: dexclusterfuncs.c).
 */
#include "dex.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/heapam.h"
#include "access/tableam.h"
#include "commands/defrem.h"
#include "access/xlog.h"
#include "catalog/index.h"
#include "catalog/pg_class.h"
#include "catalog/pg_am.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/tuplestore.h"

PG_FUNCTION_INFO_V1(dex_sql_check);
PG_FUNCTION_INFO_V1(dex_sql_index_info);
PG_FUNCTION_INFO_V1(dex_sql_stats);
PG_FUNCTION_INFO_V1(dex_sql_stats_reset);
PG_FUNCTION_INFO_V1(dex_sql_memnodes);
PG_FUNCTION_INFO_V1(dex_sql_orphans);
PG_FUNCTION_INFO_V1(dex_sql_free_orphans);
PG_FUNCTION_INFO_V1(dex_sql_cache_stats);
PG_FUNCTION_INFO_V1(dex_sql_flush);
PG_FUNCTION_INFO_V1(dex_sql_placement);

static TupleDesc
dex_result_desc(FunctionCallInfo fcinfo)
{
	TupleDesc	tupdesc;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	return BlessTupleDesc(tupdesc);
}

static Relation
dex_open_index_arg(Oid relid)
{
	Relation	rel = relation_open(relid, AccessShareLock);

	dex_check_index_relation(rel);
	return rel;
}

/*
 * dex_check() and dex_placement() walk the tree level by level without
 * remote locks. A leaf merge running meanwhile (only VACUUM merges) could show
 * them a parent from before it and a child from after it. They therefore take
 * ShareUpdateExclusiveLock on the table first, as VACUUM does: a manual VACUUM
 * finishes first, an autovacuum is cancelled by the wait, and none can start
 * until the transaction ends. Plain DML (splits only) goes on. Heap before
 * index, in PostgreSQL's usual order.
 */
static Relation
dex_open_index_for_check(Oid relid)
{
	Oid			heapoid = IndexGetRelation(relid, true);

	if (OidIsValid(heapoid))
		LockRelationOid(heapoid, ShareUpdateExclusiveLock);
	return dex_open_index_arg(relid);
}

/* dex_check(regclass) -> (entries, leaves, inner_nodes, height) */
Datum
dex_sql_check(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	TupleDesc	tupdesc;
	Relation	rel;
	DexTree    *tree;
	DexTreeInfo info;
	DexError	err;
	int			rc;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};

	dex_require_preload();
	tupdesc = dex_result_desc(fcinfo);
	rel = dex_open_index_for_check(relid);
	tree = dex_get_tree(rel);

	memset(&info, 0, sizeof(info));
	memset(&err, 0, sizeof(err));
	dex_wal_flush_dirty();		/* check() writes the index's dirty leaves first */
	rc = dex_tree_check(tree, &info, &err);
	if (rc != DEX_OK)
	{
		if (rc == DEX_ERR_CORRUPT)
			ereport(ERROR,
					(errcode(ERRCODE_INDEX_CORRUPTED),
					 errmsg("index \"%s\" is corrupted: %s",
							RelationGetRelationName(rel), err.message),
					 err.hint[0] ? errhint("%s", err.hint) :
					 errhint("REINDEX INDEX %s",
							 quote_identifier(RelationGetRelationName(rel)))));
		dex_report_error(rc, &err, rel);
	}
	relation_close(rel, AccessShareLock);

	values[0] = Int64GetDatum((int64) info.entries);
	values[1] = Int64GetDatum((int64) info.leaves);
	values[2] = Int64GetDatum((int64) info.inner_nodes);
	values[3] = Int32GetDatum((int32) info.height);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * dex_index_info(regclass) -> (memnode, namespace, incarnation, root,
 *                              entries, leaves, inner_nodes, height, bytes)
 */
Datum
dex_sql_index_info(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	TupleDesc	tupdesc;
	Relation	rel;
	DexTree    *tree;
	DexTreeInfo info;
	DexMetaPageData meta;
	DexError	err;
	int			rc;
	Datum		values[9];
	bool		nulls[9];
	DexNsInfo  *list = NULL;
	int			n = 0;
	int			i;
	int			node = -1;

	dex_require_preload();
	tupdesc = dex_result_desc(fcinfo);
	rel = dex_open_index_arg(relid);
	tree = dex_get_tree(rel);
	dex_read_metapage(rel, &meta);

	memset(&info, 0, sizeof(info));
	memset(&err, 0, sizeof(err));
	rc = dex_tree_info(tree, &info, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, rel);

	memset(nulls, 0, sizeof(nulls));
	values[0] = CStringGetTextDatum(meta.address);
	values[1] = Int64GetDatum((int64) meta.ns);
	values[2] = CStringGetTextDatum(dex_hex64(meta.incarnation));
	values[3] = Int64GetDatum((int64) info.root);
	values[4] = Int64GetDatum((int64) info.entries);
	values[5] = Int64GetDatum((int64) info.leaves);
	values[6] = Int64GetDatum((int64) info.inner_nodes);
	values[7] = Int32GetDatum((int32) info.height);
	nulls[8] = true;

	if (meta.nparts > 0)
	{
		/* bytes over every memory node the index uses */
		int64		total = 0;

		for (int p = 0; p < meta.nparts; p++)
		{
			if (meta.parts[p].ns == 0)
				continue;
			rc = dex_ns_list(p, &list, &n, &err);
			if (rc != DEX_OK)
				dex_report_error(rc, &err, rel);
			for (i = 0; i < n; i++)
				if (list[i].ns == meta.parts[p].ns)
					total += (int64) list[i].bytes_allocated;
			dex_free(list);
			list = NULL;
		}
		values[8] = Int64GetDatum(total);
		nulls[8] = false;
		node = meta.node;
	}
	else
	{
		for (i = 0; i < dex_memnode_count(); i++)
			if (dex_memnode_address(i) && strcmp(dex_memnode_address(i), meta.address) == 0)
				node = i;
		if (node < 0 && meta.node < dex_memnode_count())
			node = meta.node;
	}
	if (node >= 0 && meta.nparts == 0)
	{
		rc = dex_ns_list(node, &list, &n, &err);
		if (rc != DEX_OK)
			dex_report_error(rc, &err, rel);
		for (i = 0; i < n; i++)
			if (list[i].ns == meta.ns)
			{
				values[8] = Int64GetDatum((int64) list[i].bytes_allocated);
				nulls[8] = false;
			}
		dex_free(list);
	}
	relation_close(rel, AccessShareLock);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * dex_stats(): one bigint column per counter of DEX_STATS_COUNTERS
 * (src/common/stats_list.h), in that order. The SQL definition in
 * dex--0.1.sql cannot be generated from that list, so every call checks that
 * its OUT columns are exactly these names (tests/stats_list_test.cpp checks
 * the file at build time): a dex.so and SQL script from different versions
 * fail with a clear error instead of showing a counter under another name.
 */
static const char *const dex_stats_names[] = {
#define DEX_STATS_NAME(name, description) #name,
	DEX_STATS_COUNTERS(DEX_STATS_NAME)
#undef DEX_STATS_NAME
};
#define DEX_STATS_NCOUNTERS lengthof(dex_stats_names)
StaticAssertDecl(sizeof(DexStatsSnapshot) == DEX_STATS_NCOUNTERS * sizeof(uint64_t),
				 "DexStatsSnapshot must hold exactly the counters of stats_list.h");

static void
dex_stats_check_columns(TupleDesc tupdesc)
{
	int			n = (int) DEX_STATS_NCOUNTERS;
	int			i;

	for (i = 0; i < n || i < tupdesc->natts; i++)
	{
		Form_pg_attribute att = i < tupdesc->natts ? TupleDescAttr(tupdesc, i) : NULL;

		if (att && i < n && strcmp(NameStr(att->attname), dex_stats_names[i]) == 0 && att->atttypid == INT8OID)
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the SQL function dex_stats() does not match the dex library"),
				 !att ? errdetail("The function has %d columns, the library counts %d counters: \"%s\" is missing.",
								  tupdesc->natts, n, dex_stats_names[i]) :
				 i >= n ? errdetail("The function has %d columns, the library counts %d counters: \"%s\" is not one of them.",
									tupdesc->natts, n, NameStr(att->attname)) :
				 errdetail("Column %d is \"%s\" (%s), the library's counter %d is \"%s\" (bigint).",
						   i + 1, NameStr(att->attname), format_type_be(att->atttypid), i + 1, dex_stats_names[i]),
				 errhint("Install dex.so and the dex extension's SQL script from the same build, then DROP and CREATE EXTENSION dex.")));
	}
}

Datum
dex_sql_stats(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	DexStatsSnapshot s;
	Datum		values[DEX_STATS_NCOUNTERS];
	bool		nulls[DEX_STATS_NCOUNTERS];
	int			i = 0;

	dex_require_preload();
	tupdesc = dex_result_desc(fcinfo);
	dex_stats_check_columns(tupdesc);
	memset(&s, 0, sizeof(s));
	dex_stats_read(&s);
	memset(nulls, 0, sizeof(nulls));
#define DEX_STATS_VALUE(name, description) values[i++] = Int64GetDatum((int64) s.name);
	DEX_STATS_COUNTERS(DEX_STATS_VALUE)
#undef DEX_STATS_VALUE
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

Datum
dex_sql_stats_reset(PG_FUNCTION_ARGS)
{
	dex_require_preload();
	dex_stats_reset();
	PG_RETURN_VOID();
}

/*
 * dex_memnodes() -> (address, incarnation, pool_bytes, used_bytes,
 *                    connections, requests, offloads, namespaces, reachable)
 * An unreachable node is a row with reachable = false and NULLs.
 */
Datum
dex_sql_memnodes(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			count;
	int			i;

	dex_ensure_configured();
	InitMaterializedSRF(fcinfo, 0);

	count = dex_memnode_count();
	for (i = 0; i < count; i++)
	{
		DexNodeStats st;
		DexError	err;
		Datum		values[9];
		bool		nulls[9];
		int			rc;
		const char *addr = dex_memnode_address(i);

		memset(&st, 0, sizeof(st));
		memset(&err, 0, sizeof(err));
		memset(nulls, 0, sizeof(nulls));
		rc = dex_memnode_stats(i, &st, &err);
		if (rc == DEX_ERR_INTERRUPTED)
			dex_report_error(rc, &err, NULL);

		values[0] = CStringGetTextDatum(addr ? addr : "");
		if (rc == DEX_OK)
		{
			values[1] = CStringGetTextDatum(dex_hex64(st.incarnation));
			values[2] = Int64GetDatum((int64) st.pool_bytes);
			values[3] = Int64GetDatum((int64) st.used_bytes);
			values[4] = Int64GetDatum((int64) st.connections);
			values[5] = Int64GetDatum((int64) st.requests);
			values[6] = Int64GetDatum((int64) st.offloads);
			values[7] = Int64GetDatum((int64) st.namespaces);
			values[8] = BoolGetDatum(true);
		}
		else
		{
			int			c;

			for (c = 1; c <= 7; c++)
				nulls[c] = true;
			values[8] = BoolGetDatum(false);
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* ---- orphans --------------------------------------------------------- */

typedef struct DexOrphan
{
	int			node;
	uint64		ns;
	uint64		bytes;
	Oid			dboid;
	Oid			indexoid;
	Oid			relfilenode;
	const char *reason;
} DexOrphan;

/*
 * Is namespace (node, ns) owned by index `indexoid` of this database?
 * Returns NULL when owned (or busy: being built, rebuilt or dropped by
 * another transaction), else the reason it is an orphan.
 */
static const char *
dex_orphan_reason_local(int node, uint64 ns, Oid indexoid)
{
	HeapTuple	tup;
	const char *reason = NULL;

	if (dex_ns_is_pending(node, ns))
		return NULL;			/* this transaction will settle it */

	/*
	 * A transaction that creates, rebuilds or drops the index holds a lock
	 * on it (CREATE INDEX locks the new OID before it is visible to us).
	 */
	if (!ConditionalLockRelationOid(indexoid, AccessShareLock))
		return NULL;

	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(indexoid));
	if (!HeapTupleIsValid(tup))
		reason = "index does not exist";
	else
	{
		Form_pg_class form = (Form_pg_class) GETSTRUCT(tup);
		bool		isdex = false;

		if (form->relkind == RELKIND_INDEX)
		{
			HeapTuple	amtup = SearchSysCache1(AMOID, ObjectIdGetDatum(form->relam));

			if (HeapTupleIsValid(amtup))
			{
				isdex = strcmp(NameStr(((Form_pg_am) GETSTRUCT(amtup))->amname), "dex") == 0;
				ReleaseSysCache(amtup);
			}
		}
		ReleaseSysCache(tup);

		if (!isdex)
			reason = "not a dex index";
		else
		{
			Relation	rel = relation_open(indexoid, NoLock);

			if (RelationGetNumberOfBlocks(rel) == 0)
				reason = NULL;	/* not built yet (CREATE INDEX CONCURRENTLY) */
			else
			{
				DexMetaPageData meta;
				const char *addr = dex_memnode_address(node);

				dex_read_metapage(rel, &meta);
				(void) addr;
				if (dex_meta_owns_ns(&meta, node, ns))
					reason = NULL;
				else
					reason = "superseded";
			}
			relation_close(rel, NoLock);
		}
	}
	UnlockRelationOid(indexoid, AccessShareLock);
	return reason;
}

static List *
dex_collect_orphans(void)
{
	List	   *result = NIL;
	int			count;

	dex_ensure_configured();
	count = dex_memnode_count();
	for (int node = 0; node < count; node++)
	{
		DexClusterNs *list;
		int			n;
		DexError	err;
		int			rc = dex_list_cluster_namespaces(node, &list, &n, &err);

		if (rc != DEX_OK)
		{
			if (rc == DEX_ERR_INTERRUPTED)
				dex_report_error(rc, &err, NULL);
			ereport(WARNING,
					(errmsg("could not list namespaces on memory node \"%s\": %s",
							dex_memnode_address(node), err.message)));
			continue;
		}
		for (int i = 0; i < n; i++)
		{
			const DexNsTag *tag = &list[i].tag;
			const char *reason;

			if (tag->kind != DEX_NS_INDEX)
				continue;		/* the cluster registry */
			if (tag->dboid != MyDatabaseId)
			{
				if (SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(tag->dboid)))
					continue;	/* can't see its catalogs */
				reason = "database does not exist";
			}
			else
				reason = dex_orphan_reason_local(node, list[i].ns, tag->indexoid);

			if (reason)
			{
				DexOrphan  *o = palloc0(sizeof(DexOrphan));

				o->node = node;
				o->ns = list[i].ns;
				o->bytes = list[i].bytes;
				o->dboid = tag->dboid;
				o->indexoid = tag->indexoid;
				o->relfilenode = tag->relfilenode;
				o->reason = reason;
				result = lappend(result, o);
			}
		}
		pfree(list);
	}
	return result;
}

Datum
dex_sql_orphans(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	List	   *orphans;
	ListCell   *lc;

	dex_require_preload();
	/* only the writer knows which namespaces are orphans (a standby or a restored clone would list the primary's) */
	dex_cluster_require_writer("dex_orphans()");
	InitMaterializedSRF(fcinfo, 0);
	orphans = dex_collect_orphans();
	foreach(lc, orphans)
	{
		DexOrphan  *o = (DexOrphan *) lfirst(lc);
		Datum		values[7];
		bool		nulls[7] = {false, false, false, false, false, false, false};
		const char *addr = dex_memnode_address(o->node);

		values[0] = CStringGetTextDatum(addr ? addr : "");
		values[1] = Int64GetDatum((int64) o->ns);
		values[2] = Int64GetDatum((int64) o->bytes);
		values[3] = ObjectIdGetDatum(o->dboid);
		values[4] = ObjectIdGetDatum(o->indexoid);
		values[5] = ObjectIdGetDatum(o->relfilenode);
		values[6] = CStringGetTextDatum(o->reason);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* dex_free_orphans() -> (namespaces, bytes) */
Datum
dex_sql_free_orphans(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	List	   *orphans;
	ListCell   *lc;
	int64		count = 0;
	int64		bytes = 0;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	dex_require_preload();
	dex_cluster_require_writer("dex_free_orphans()");
	tupdesc = dex_result_desc(fcinfo);
	orphans = dex_collect_orphans();
	foreach(lc, orphans)
	{
		DexOrphan  *o = (DexOrphan *) lfirst(lc);
		DexError	err;
		uint64		freed = 0;
		int			rc;

		memset(&err, 0, sizeof(err));
		dex_forget_tree(o->node, o->ns);
		rc = dex_ns_drop(o->node, o->ns, &freed, &err);
		if (rc == DEX_ERR_NOT_FOUND)
			continue;			/* freed concurrently */
		if (rc != DEX_OK)
			dex_report_error(rc, &err, NULL);
		count++;
		bytes += (int64) freed;
	}
	values[0] = Int64GetDatum(count);
	values[1] = Int64GetDatum(bytes);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* ---- dex_cache_stats ---------------------------------------------------- */

typedef struct DexTreeOwner
{
	int			node;
	uint32		tree_id;
	Oid			indexoid;
} DexTreeOwner;

/*
 * (memory node, tree id) of every built dex index of this database, from the
 * metapages. Indexes locked by another transaction (being built, rebuilt or
 * dropped) are skipped.
 */
static List *
dex_index_tree_owners(void)
{
	Oid			amoid = get_index_am_oid("dex", true);
	List	   *oids = NIL;
	List	   *result = NIL;
	Relation	pgclass;
	TableScanDesc scan;
	HeapTuple	tup;
	ListCell   *lc;

	if (!OidIsValid(amoid))
		return NIL;
	pgclass = table_open(RelationRelationId, AccessShareLock);
	scan = table_beginscan_catalog(pgclass, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_class form = (Form_pg_class) GETSTRUCT(tup);

		if (form->relkind == RELKIND_INDEX && form->relam == amoid)
			oids = lappend_oid(oids, form->oid);
	}
	table_endscan(scan);
	table_close(pgclass, AccessShareLock);

	foreach(lc, oids)
	{
		Oid			oid = lfirst_oid(lc);
		Relation	rel;

		if (!ConditionalLockRelationOid(oid, AccessShareLock))
			continue;
		rel = try_relation_open(oid, NoLock);
		if (rel != NULL)
		{
			if (RelationGetNumberOfBlocks(rel) > 0)
			{
				DexMetaPageData meta;

				dex_read_metapage(rel, &meta);
				if (meta.ns != 0 && !(meta.flags & DEX_META_INIT_FORK))
				{
					DexTreeOwner *o = palloc(sizeof(DexTreeOwner));

					o->node = meta.node;
					o->tree_id = dex_meta_tree_id(&meta);
					o->indexoid = oid;
					result = lappend(result, o);
				}
			}
			relation_close(rel, NoLock);
		}
		UnlockRelationOid(oid, AccessShareLock);
	}
	return result;
}

/*
 * dex_cache_stats() -> (index regclass, level int, frames bigint,
 *                       cooling bigint, dirty bigint)
 * One row per (tree, level) with frames in this server's node cache. index is
 * NULL for frames of a tree that is no index of this database (another
 * database's, or a dropped one's not yet evicted).
 */
Datum
dex_sql_cache_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DexCacheCensusRow *raw = NULL;
	DexCacheCensusRow *rows;
	int			n = 0;
	DexError	err;
	int			rc;
	List	   *owners;

	dex_require_preload();
	InitMaterializedSRF(fcinfo, 0);
	memset(&err, 0, sizeof(err));
	rc = dex_cache_census(&raw, &n, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, NULL);
	rows = palloc(sizeof(DexCacheCensusRow) * (n > 0 ? n : 1));
	if (n > 0)
		memcpy(rows, raw, sizeof(DexCacheCensusRow) * n);
	dex_free(raw);

	owners = dex_index_tree_owners();
	for (int i = 0; i < n; i++)
	{
		Datum		values[5];
		bool		nulls[5];
		ListCell   *lc;

		memset(nulls, 0, sizeof(nulls));
		nulls[0] = true;
		foreach(lc, owners)
		{
			DexTreeOwner *o = lfirst(lc);

			if (o->tree_id == rows[i].tree_id)	/* a tree spans memory nodes */
			{
				values[0] = ObjectIdGetDatum(o->indexoid);
				nulls[0] = false;
				break;
			}
		}
		values[1] = Int32GetDatum(rows[i].level);
		values[2] = Int64GetDatum((int64) rows[i].frames);
		values[3] = Int64GetDatum((int64) rows[i].cooling);
		values[4] = Int64GetDatum((int64) rows[i].dirty);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* ---- dex_flush ---------------------------------------------------------- */

/* Write back every dirty cached node now (write-back mode); frames written. */
Datum
dex_sql_flush(PG_FUNCTION_ARGS)
{
	DexError	err;
	uint64_t	written = 0;
	int			rc;
	XLogRecPtr	before;

	dex_ensure_configured();
	memset(&err, 0, sizeof(err));
	before = RecoveryInProgress() ? InvalidXLogRecPtr : GetXLogInsertRecPtr();
	dex_wal_flush_dirty();		/* dirty leaves wait for their entries' heap WAL */
	rc = dex_cache_flush(&written, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, NULL);
	/* as after the worker's flushes: crash redo's and standbys' position */
	if (before != InvalidXLogRecPtr)
		(void) dex_wb_publish_flushed(before, NULL);
	PG_RETURN_INT64((int64) written);
}

/*
 * dex_placement(regclass) -> SETOF (memnode, namespace, placement_level,
 * subtrees, nodes, bytes): how the index is spread over the memory nodes.
 * Runs the full dex_check() first, including the placement invariant (every
 * subtree rooted at placement_level lies on one memory node), so a violation
 * is an ERROR here.
 */
Datum
dex_sql_placement(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Relation	rel;
	DexTree    *tree;
	DexMetaPageData meta;
	DexError	err;
	int			rc;
	int			level = 0;
	uint64		nodes_on[DEX_MAX_MEMNODES];
	uint64		subtrees_on[DEX_MAX_MEMNODES];
	int			nparts;

	dex_require_preload();
	InitMaterializedSRF(fcinfo, 0);
	rel = dex_open_index_for_check(relid);
	tree = dex_get_tree(rel);
	dex_read_metapage(rel, &meta);
	memset(&err, 0, sizeof(err));
	dex_wal_flush_dirty();		/* the check writes the index's dirty leaves first */
	rc = dex_tree_placement(tree, &level, nodes_on, subtrees_on, DEX_MAX_MEMNODES, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, rel);
	nparts = meta.nparts > 0 ? meta.nparts : meta.node + 1;
	for (int p = 0; p < nparts; p++)
	{
		uint64		ns = meta.nparts > 0 ? meta.parts[p].ns : (p == meta.node ? meta.ns : 0);
		const char *addr = meta.nparts > 0 ? meta.parts[p].address : meta.address;
		Datum		values[6];
		bool		nulls[6];
		DexNsInfo  *list = NULL;
		int			n = 0;

		if (ns == 0)
			continue;
		memset(nulls, 0, sizeof(nulls));
		values[0] = CStringGetTextDatum(addr);
		values[1] = Int64GetDatum((int64) ns);
		values[2] = Int32GetDatum(level);
		values[3] = Int64GetDatum((int64) subtrees_on[p]);
		values[4] = Int64GetDatum((int64) nodes_on[p]);
		nulls[5] = true;
		rc = dex_ns_list(p, &list, &n, &err);
		if (rc != DEX_OK)
			dex_report_error(rc, &err, rel);
		for (int i = 0; i < n; i++)
			if (list[i].ns == ns)
			{
				values[5] = Int64GetDatum((int64) list[i].bytes_allocated);
				nulls[5] = false;
			}
		dex_free(list);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	relation_close(rel, AccessShareLock);
	return (Datum) 0;
}
