/*
 * dexutils.c — AM handler, reloptions, metapage, key conversion, namespace
 * tags and the per-backend cache of open remote trees.
 */
#include "dex.h"

#include "access/generic_xlog.h"
#include "access/reloptions.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xloginsert.h"
#include "catalog/pg_type.h"
#include "commands/vacuum.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(dexhandler);

static relopt_kind dex_relopt_kind;

/* ---------------------------------------------------------------------
 * handler
 * ---------------------------------------------------------------------
 */
Datum
dexhandler(PG_FUNCTION_ARGS)
{
	IndexAmRoutine *amroutine = makeNode(IndexAmRoutine);

	amroutine->amstrategies = BTMaxStrategyNumber;
	amroutine->amsupport = 1;
	amroutine->amoptsprocnum = 0;
	amroutine->amcanorder = true;
	amroutine->amcanorderbyop = false;
	amroutine->amcanbackward = true;
	amroutine->amcanunique = false;
	amroutine->amcanmulticol = false;
	amroutine->amoptionalkey = true;
	amroutine->amsearcharray = true;
	amroutine->amsearchnulls = true;
	amroutine->amstorage = false;
	amroutine->amclusterable = false;
	amroutine->ampredlocks = false;
	amroutine->amcanparallel = false;
#if PG_VERSION_NUM >= 170000
	amroutine->amcanbuildparallel = false;
#endif
	amroutine->amcaninclude = false;
	amroutine->amusemaintenanceworkmem = false;
#if PG_VERSION_NUM >= 160000
	amroutine->amsummarizing = false;
#endif
	amroutine->amparallelvacuumoptions = 0;
	amroutine->amkeytype = InvalidOid;

	amroutine->ambuild = dexbuild;
	amroutine->ambuildempty = dexbuildempty;
	amroutine->aminsert = dexinsert;
#if PG_VERSION_NUM >= 170000
	amroutine->aminsertcleanup = NULL;
#endif
	amroutine->ambulkdelete = dexbulkdelete;
	amroutine->amvacuumcleanup = dexvacuumcleanup;
	amroutine->amcanreturn = NULL;
	amroutine->amcostestimate = dexcostestimate;
	amroutine->amoptions = dexoptions;
	amroutine->amproperty = NULL;
	amroutine->ambuildphasename = dexbuildphasename;
	amroutine->amvalidate = dexvalidate;
	amroutine->amadjustmembers = NULL;
	amroutine->ambeginscan = dexbeginscan;
	amroutine->amrescan = dexrescan;
	amroutine->amgettuple = dexgettuple;
	amroutine->amgetbitmap = dexgetbitmap;
	amroutine->amendscan = dexendscan;
	amroutine->ammarkpos = NULL;
	amroutine->amrestrpos = NULL;
	amroutine->amestimateparallelscan = NULL;
	amroutine->aminitparallelscan = NULL;
	amroutine->amparallelrescan = NULL;

	PG_RETURN_POINTER(amroutine);
}

/* ---------------------------------------------------------------------
 * reloptions
 * ---------------------------------------------------------------------
 */
void
dex_init_reloptions(void)
{
	dex_relopt_kind = add_reloption_kind();
	add_int_reloption(dex_relopt_kind, "fillfactor",
					  "Packs dex leaf nodes only this full during CREATE INDEX",
					  DEX_DEFAULT_FILLFACTOR, DEX_MIN_FILLFACTOR, 100,
					  AccessExclusiveLock);
	add_bool_reloption(dex_relopt_kind, "write_back",
					   "Keeps in-place leaf changes in the node cache and writes them back "
					   "later (requires that no other compute server writes the index)",
					   false, AccessExclusiveLock);
	add_int_reloption(dex_relopt_kind, "placement_level",
					  "Every subtree rooted at this tree level lies on one memory node "
					  "(takes effect at the next build: CREATE INDEX / REINDEX)",
					  2, 1, 8, AccessExclusiveLock);
}

bytea *
dexoptions(Datum reloptions, bool validate)
{
	static const relopt_parse_elt tab[] = {
		{"fillfactor", RELOPT_TYPE_INT, offsetof(DexOptions, fillfactor)},
		{"write_back", RELOPT_TYPE_BOOL, offsetof(DexOptions, write_back)},
		{"placement_level", RELOPT_TYPE_INT, offsetof(DexOptions, placement_level)},
	};

	return (bytea *) build_reloptions(reloptions, validate, dex_relopt_kind,
									  sizeof(DexOptions), tab, lengthof(tab));
}

/* ---------------------------------------------------------------------
 * keys
 * ---------------------------------------------------------------------
 */
Oid
dex_column_basetype(Relation index)
{
	Oid			typid = TupleDescAttr(RelationGetDescr(index), 0)->atttypid;

	return getBaseType(typid);
}

bool
dex_type_supported(Oid typid)
{
	switch (typid)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case DATEOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
		case OIDOID:
			return true;
		default:
			return false;
	}
}

/* Order-preserving int64 image of a datum of one of the supported types. */
int64
dex_datum_to_int64(Datum d, Oid typid)
{
	switch (typid)
	{
		case INT2OID:
			return (int64) DatumGetInt16(d);
		case INT4OID:
			return (int64) DatumGetInt32(d);
		case INT8OID:
			return DatumGetInt64(d);
		case DATEOID:
			return (int64) DatumGetDateADT(d);
		case TIMESTAMPOID:
			return (int64) DatumGetTimestamp(d);
		case TIMESTAMPTZOID:
			return (int64) DatumGetTimestampTz(d);
		case OIDOID:
			return (int64) DatumGetObjectId(d);	/* unsigned: 0..2^32-1 */
		default:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("dex does not support data type %s",
							format_type_be(typid))));
	}
	return 0;					/* keep compiler quiet */
}

void
dex_make_value_key(DexKey *key, int64 v, uint32 block, uint16 off)
{
	key->value = ((uint64) v) ^ (UINT64CONST(1) << 63);
	key->block = block;
	key->offnum = off;
	key->cls = DEX_KEY_VALUE;
	key->pad = 0;
}

void
dex_make_null_key(DexKey *key, uint32 block, uint16 off)
{
	key->value = 0;
	key->block = block;
	key->offnum = off;
	key->cls = DEX_KEY_NULL;
	key->pad = 0;
}

void
dex_make_key(DexKey *key, Relation index, Datum value, bool isnull,
			 ItemPointer tid)
{
	uint32		block = ItemPointerGetBlockNumberNoCheck(tid);
	uint16		off = ItemPointerGetOffsetNumberNoCheck(tid);

	if (isnull)
		dex_make_null_key(key, block, off);
	else
		dex_make_value_key(key, dex_datum_to_int64(value, dex_column_basetype(index)),
						   block, off);
}

int
dex_key_cmp(const DexKey *a, const DexKey *b)
{
	if (a->cls != b->cls)
		return a->cls < b->cls ? -1 : 1;
	if (a->value != b->value)
		return a->value < b->value ? -1 : 1;
	if (a->block != b->block)
		return a->block < b->block ? -1 : 1;
	if (a->offnum != b->offnum)
		return a->offnum < b->offnum ? -1 : 1;
	return 0;
}

/* Largest key strictly smaller than *k; false if none. */
bool
dex_key_prev(DexKey *k)
{
	if (k->offnum > 0)
	{
		k->offnum--;
		return true;
	}
	k->offnum = 0xFFFF;
	if (k->block > 0)
	{
		k->block--;
		return true;
	}
	k->block = 0xFFFFFFFF;
	if (k->value > 0)
	{
		k->value--;
		return true;
	}
	k->value = PG_UINT64_MAX;
	if (k->cls > DEX_KEY_NEG_INF)
	{
		k->cls--;
		return true;
	}
	return false;
}

/* Smallest key strictly larger than *k; false if none. */
bool
dex_key_next(DexKey *k)
{
	if (k->offnum < 0xFFFF)
	{
		k->offnum++;
		return true;
	}
	k->offnum = 0;
	if (k->block < 0xFFFFFFFF)
	{
		k->block++;
		return true;
	}
	k->block = 0;
	if (k->value < PG_UINT64_MAX)
	{
		k->value++;
		return true;
	}
	k->value = 0;
	if (k->cls < DEX_KEY_POS_INF)
	{
		k->cls++;
		return true;
	}
	return false;
}

void
dex_key_to_tid(const DexKey *k, ItemPointer tid)
{
	ItemPointerSet(tid, k->block, k->offnum);
}

/* ---------------------------------------------------------------------
 * namespace tags
 * ---------------------------------------------------------------------
 */
void
dex_make_tag(DexNsTag *tag, Oid indexoid, Oid relfilenode, Oid spcoid)
{
	memset(tag, 0, sizeof(*tag));
	memcpy(tag->magic, DEX_TAG_MAGIC, 4);
	tag->tag_version = DEX_TAG_VERSION;
	tag->sysid = GetSystemIdentifier();
	tag->dboid = MyDatabaseId;
	tag->indexoid = indexoid;
	tag->relfilenode = relfilenode;
	tag->spcoid = spcoid;
}

bool
dex_parse_tag(const uint8_t *raw, DexNsTag *tag)
{
	memcpy(tag, raw, sizeof(DexNsTag));
	if (memcmp(tag->magic, DEX_TAG_MAGIC, 4) != 0)
		return false;
	if (tag->tag_version != DEX_TAG_VERSION)
		return false;
	return true;
}

/*
 * The namespaces this cluster (same system identifier) created on memory node
 * `node`, as a palloc'd array; namespaces of other clusters or not made by dex
 * are skipped. Returns a DEX_* code; on failure *err says why.
 */
int
dex_list_cluster_namespaces(int node, DexClusterNs **out, int *n, DexError *err)
{
	DexNsInfo  *list = NULL;
	int			nlist = 0;
	int			rc;
	uint64		sysid = GetSystemIdentifier();

	*out = NULL;
	*n = 0;
	memset(err, 0, sizeof(*err));
	rc = dex_ns_list(node, &list, &nlist, err);
	if (rc != DEX_OK)
		return rc;
	PG_TRY();
	{
		*out = palloc(sizeof(DexClusterNs) * Max(nlist, 1));
		for (int i = 0; i < nlist; i++)
		{
			DexClusterNs *c = &(*out)[*n];

			if (!dex_parse_tag(list[i].tag, &c->tag) || c->tag.sysid != sysid)
				continue;
			c->ns = list[i].ns;
			c->bytes = list[i].bytes_allocated;
			(*n)++;
		}
	}
	PG_FINALLY();
	{
		dex_free(list);
	}
	PG_END_TRY();
	return DEX_OK;
}

/* ---------------------------------------------------------------------
 * metapage
 * ---------------------------------------------------------------------
 */
void
dex_write_metapage(Relation index, ForkNumber fork, const DexMetaPageData *meta)
{
	Buffer		buf;
	Page		page;
	DexPageOpaqueData *opaque;

#if PG_VERSION_NUM >= 160000
	buf = ExtendBufferedRel(BMR_REL(index), fork, NULL,
							EB_LOCK_FIRST | EB_SKIP_EXTENSION_LOCK);
#else
	LockRelationForExtension(index, ExclusiveLock);
	buf = ReadBufferExtended(index, fork, P_NEW, RBM_NORMAL, NULL);
	UnlockRelationForExtension(index, ExclusiveLock);
	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
#endif
	if (BufferGetBlockNumber(buf) != DEX_METAPAGE_BLKNO)
		elog(ERROR, "dex metapage of index \"%s\" is not block 0",
			 RelationGetRelationName(index));

	page = BufferGetPage(buf);

	START_CRIT_SECTION();
	PageInit(page, BLCKSZ, sizeof(DexPageOpaqueData));
	opaque = (DexPageOpaqueData *) PageGetSpecialPointer(page);
	opaque->flags = 0;
	opaque->page_id = DEX_PAGE_ID;
	memcpy(DexPageGetMeta(page), meta, sizeof(DexMetaPageData));
	((PageHeader) page)->pd_lower =
		((char *) DexPageGetMeta(page) + sizeof(DexMetaPageData)) - (char *) page;
	MarkBufferDirty(buf);
	if (RelationNeedsWAL(index) || fork == INIT_FORKNUM)
		log_newpage_buffer(buf, true);
	END_CRIT_SECTION();

	UnlockReleaseBuffer(buf);
}

void
dex_read_metapage(Relation index, DexMetaPageData *meta)
{
	Buffer		buf;
	Page		page;
	DexPageOpaqueData *opaque;

	if (RelationGetNumberOfBlocks(index) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("index \"%s\" is not built yet",
						RelationGetRelationName(index))));

	buf = ReadBuffer(index, DEX_METAPAGE_BLKNO);
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	opaque = (DexPageOpaqueData *) PageGetSpecialPointer(page);
	memcpy(meta, DexPageGetMeta(page), sizeof(DexMetaPageData));
	UnlockReleaseBuffer(buf);

	if (PageIsNew(page) || opaque->page_id != DEX_PAGE_ID ||
		meta->magic != DEX_MAGIC)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("index \"%s\" is not a dex index",
						RelationGetRelationName(index))));
	if (meta->version != DEX_VERSION)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("index \"%s\" has dex metapage version %u, expected %u",
						RelationGetRelationName(index), meta->version, DEX_VERSION),
				 errhint("REINDEX INDEX %s",
						 quote_identifier(RelationGetRelationName(index)))));
	meta->address[DEX_ADDR_LEN - 1] = '\0';
	if (meta->nparts < 0 || meta->nparts > DEX_MAX_MEMNODES)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("index \"%s\" has a dex metapage with %d memory nodes",
						RelationGetRelationName(index), meta->nparts),
				 errhint("REINDEX INDEX %s",
						 quote_identifier(RelationGetRelationName(index)))));
	for (int i = 0; i < meta->nparts; i++)
		meta->parts[i].address[DEX_ADDR_LEN - 1] = '\0';
}

/* Tree id stamped in the index's nodes (src/tree/btree.h tree_id_for). */
uint32
dex_meta_tree_id(const DexMetaPageData *meta)
{
	return dex_tree_id(meta->node < 0 ? 0 : meta->node, meta->ns);
}

/* Is namespace `ns` on memory node number `node` one of this index's? */
bool
dex_meta_owns_ns(const DexMetaPageData *meta, int node, uint64 ns)
{
	const char *addr = dex_memnode_address(node);

	if (meta->nparts > 0)
		return node >= 0 && node < meta->nparts && meta->parts[node].ns == ns &&
			addr && strcmp(meta->parts[node].address, addr) == 0;
	return meta->ns == ns &&
		((addr && strcmp(meta->address, addr) == 0) || meta->node == node);
}

/* Is this relation an index of the dex access method? */
void
dex_check_index_relation(Relation index)
{
	if (index->rd_rel->relkind != RELKIND_INDEX ||
		index->rd_indam == NULL || index->rd_indam->ambuild != dexbuild)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a dex index",
						RelationGetRelationName(index))));
}

/* ---------------------------------------------------------------------
 * per-backend cache of open trees, keyed by relfilenode
 * ---------------------------------------------------------------------
 */
typedef struct DexTreeCacheKey
{
	Oid			spcoid;
	Oid			relnumber;
} DexTreeCacheKey;

typedef struct DexTreeCacheEntry
{
	DexTreeCacheKey key;
	int			node;
	uint64		ns;
	uint64		incarnation;
	DexTree    *tree;
	uint64		verified_life;	/* journal found recovered in this life (dexjournal.c) */
} DexTreeCacheEntry;

static HTAB *dex_tree_cache = NULL;

static void
dex_tree_cache_init(void)
{
	HASHCTL		ctl;

	if (dex_tree_cache)
		return;
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(DexTreeCacheKey);
	ctl.entrysize = sizeof(DexTreeCacheEntry);
	ctl.hcxt = TopMemoryContext;
	dex_tree_cache = hash_create("dex open trees", 32, &ctl,
								 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/* Close cached trees of one namespace (it was dropped). */
void
dex_forget_tree(int node, uint64 ns)
{
	HASH_SEQ_STATUS status;
	DexTreeCacheEntry *e;

	if (!dex_tree_cache)
		return;
	hash_seq_init(&status, dex_tree_cache);
	while ((e = hash_seq_search(&status)) != NULL)
	{
		if (e->node == node && e->ns == ns)
		{
			if (e->tree)
				dex_tree_close(e->tree);
			e->tree = NULL;
			hash_search(dex_tree_cache, &e->key, HASH_REMOVE, NULL);
		}
	}
}

void
dex_forget_all_trees(void)
{
	HASH_SEQ_STATUS status;
	DexTreeCacheEntry *e;

	if (!dex_tree_cache)
		return;
	hash_seq_init(&status, dex_tree_cache);
	while ((e = hash_seq_search(&status)) != NULL)
	{
		if (e->tree)
			dex_tree_close(e->tree);
		e->tree = NULL;
		hash_search(dex_tree_cache, &e->key, HASH_REMOVE, NULL);
	}
}

/* Which configured memory node holds this index's tree? */
static int
dex_resolve_node(Relation index, const DexMetaPageData *meta)
{
	int			count = dex_memnode_count();
	int			i;

	/* prefer the node with the recorded address (the list may be reordered) */
	for (i = 0; i < count; i++)
	{
		const char *addr = dex_memnode_address(i);

		if (addr && strcmp(addr, meta->address) == 0)
			return i;
	}
	/* else the same position: the incarnation check catches a wrong node */
	if (meta->node >= 0 && meta->node < count)
		return meta->node;

	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("memory node \"%s\" of index \"%s\" is not configured",
					meta->address, RelationGetRelationName(index)),
			 errhint("Add it to dex.memnodes.")));
	return -1;					/* keep compiler quiet */
}

/*
 * Open (or find in the cache) the remote tree of a dex index. Reads the
 * metapage every time (a shared buffer), so REINDEX/TRUNCATE (new
 * relfilenode, new namespace) are noticed.
 */
DexTree *
dex_get_tree(Relation index)
{
	DexMetaPageData meta;
	DexTreeCacheKey key;
	DexTreeCacheEntry *e;
	bool		found;
	int			node;
	DexError	err;
	int			rc;

	dex_ensure_configured();
	dex_cluster_check(index);	/* writer role / standby lease (dexcluster.c) */
	dex_read_metapage(index, &meta);

	if ((meta.flags & DEX_META_INIT_FORK) || meta.ns == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("index \"%s\" lost its remote memory",
						RelationGetRelationName(index)),
				 errdetail("The unlogged index was reset by crash recovery."),
				 errhint("REINDEX INDEX %s",
						 quote_identifier(RelationGetRelationName(index)))));

	if (meta.nparts > 0)
	{
		/*
		 * Addresses embed the memory node's position in dex.memnodes. As for
		 * single-node indexes, a node that moved to another address is used
		 * at the same position; each node's incarnation check catches a
		 * different node there (src/README.md "Placement over several
		 * memory nodes").
		 */
		node = meta.node;
	}
	else
		node = dex_resolve_node(index, &meta);

	dex_tree_cache_init();
	memset(&key, 0, sizeof(key));
	key.spcoid = DEX_REL_SPC(index);
	key.relnumber = DEX_REL_NUMBER(index);
	e = hash_search(dex_tree_cache, &key, HASH_ENTER, &found);
	if (found && e->tree &&
		(e->node != node || e->ns != meta.ns || e->incarnation != meta.incarnation))
	{
		dex_tree_close(e->tree);
		e->tree = NULL;
	}
	if (!found)
		e->tree = NULL;

	memset(&err, 0, sizeof(err));
	if (e->tree == NULL)
	{
		DexTree    *tree = NULL;

		e->node = node;
		e->ns = meta.ns;
		e->incarnation = meta.incarnation;
		if (meta.nparts > 0)
		{
			uint64		ns[DEX_MAX_MEMNODES];
			uint64		inc[DEX_MAX_MEMNODES];

			for (int i = 0; i < meta.nparts; i++)
			{
				ns[i] = meta.parts[i].ns;
				inc[i] = meta.parts[i].incarnation;
			}
			rc = dex_tree_open_parts(node, meta.nparts, ns, inc, meta.placement_level,
									 RelationGetRelationName(index), &tree, &err);
		}
		else
			rc = dex_tree_open(node, meta.ns, meta.incarnation,
							   RelationGetRelationName(index), &tree, &err);
		if (rc != DEX_OK)
		{
			hash_search(dex_tree_cache, &key, HASH_REMOVE, NULL);
			dex_report_error(rc, &err, index);
		}
		e->tree = tree;
		e->verified_life = 0;
	}
	else
	{
		rc = dex_tree_validate(e->tree, &err);
		if (rc != DEX_OK)
		{
			if (rc == DEX_ERR_LOST_MEMORY)
			{
				dex_tree_close(e->tree);
				hash_search(dex_tree_cache, &key, HASH_REMOVE, NULL);
			}
			dex_report_error(rc, &err, index);
		}
	}

	/*
	 * Write-back mode (reloption write_back): checks the remote dirty-owner
	 * word once per handle (an instance that crashed holding dirty nodes of
	 * this index -> "lost its remote memory"), then sets the mode.
	 */
	{
		DexOptions *opts = (DexOptions *) index->rd_options;
		bool		wb = opts ? opts->write_back : false;

		rc = dex_tree_set_write_back(e->tree, wb ? 1 : 0, meta.owner_word, &err);
		while (rc == DEX_ERR_NEED_WAL_FLUSH)
		{
			/* dirty leaves left by write-back mode wait for their WAL */
			dex_wal_flush_for_retry(&err, index);
			rc = dex_tree_set_write_back(e->tree, wb ? 1 : 0, meta.owner_word, &err);
		}
		if (rc != DEX_OK)
		{
			if (rc == DEX_ERR_LOST_MEMORY)
			{
				dex_tree_close(e->tree);
				hash_search(dex_tree_cache, &key, HASH_REMOVE, NULL);
			}
			dex_report_error(rc, &err, index);
		}
	}

	/*
	 * Crash consistency (dexjournal.c): inserts journal themselves in this
	 * process's lane; a new primary life recovers the journal before the
	 * index is used.
	 */
	rc = dex_tree_set_journal(e->tree, meta.journal, dex_journal_lane(), &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, index);
	dex_journal_gate(index, e->tree, meta.journal, &e->verified_life);
	return e->tree;
}
