/*
 * dexutils.c — utilities without state of their own: whether dex was
 * preloaded, keys from images (the encoding is src/tree/key_encoding.h,
 * shared with the core; images of datums are dexkeys.c's), namespace tags,
 * the metapage, WAL positions.
 */
#include "dex.h"

#include <stddef.h>

#include "access/timeline.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xloginsert.h"
#include "miscadmin.h"
#include "postmaster/walwriter.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "tree/key_bytes.h"

#include "tree/key_encoding.h"

/* ---------------------------------------------------------------------
 * preloading
 * ---------------------------------------------------------------------
 */

/* set by _PG_init when loaded via shared_preload_libraries */
bool		dex_preloaded = false;

void
dex_require_preload(void)
{
	if (!dex_preloaded)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dex must be loaded via shared_preload_libraries"),
				 errhint("Add dex to shared_preload_libraries in postgresql.conf and restart the server.")));
}

/* ---------------------------------------------------------------------
 * WAL positions
 * ---------------------------------------------------------------------
 */

/*
 * The position a WAL record would start at now: the end of the last record
 * inserted (GetXLogInsertRecPtr() may point just past the header of a page
 * nothing was written to yet; no record ends inside a page header, so the
 * page start is the same boundary).
 */
static XLogRecPtr
dex_wal_insert_boundary(void)
{
	XLogRecPtr	upto = GetXLogInsertRecPtr();

	if (XLogSegmentOffset(upto, wal_segment_size) == SizeOfXLogLongPHD)
		upto -= SizeOfXLogLongPHD;
	else if (upto % XLOG_BLCKSZ == SizeOfXLogShortPHD)
		upto -= SizeOfXLogShortPHD;
	return upto;
}

/*
 * A durable WAL position that is the end of a record -- what may be
 * published to the registry as "the trees depend on WAL up to here"
 * (writer_hwm, removal_lsn: every position the extension gives the registry
 * comes from here or from dex_wal_flush_boundary). Not the flush pointer
 * itself: it may lie inside a record that was only partly flushed (the WAL
 * writer flushes whole pages; an insertion crossing a page reports the page
 * it reached), and the recovery after a crash ends at the last complete
 * record, before that pointer -- every dex index would then refuse queries
 * as if a backup had been restored.
 *
 * The end of every record inserted so far if that is durable. Otherwise,
 * with `wait` (a backend that waits for the horizon anyway): flushed first.
 * Without (the dex worker's beat, every 20 ms): the end seen at an earlier
 * call once the flush pointer passed it -- flushed by this call only if
 * nothing else did for wal_writer_delay, so that the beat never flushes
 * WAL more often than the WAL writer does (with asynchronous commits, a
 * user's choice of wal_writer_delay bounds how often WAL is flushed; it
 * also keeps the crash tests' rows in wal_buffers, t_crash_bytes).
 * 0 on a standby.
 */
uint64
dex_wal_durable_boundary(bool wait)
{
	static XLogRecPtr known = InvalidXLogRecPtr;	/* a record end, durable */
	static XLogRecPtr pending = InvalidXLogRecPtr;	/* a record end, maybe not yet */
	static TimestampTz pending_at = 0;
	XLogRecPtr	flush;
	XLogRecPtr	ins;

	if (RecoveryInProgress())
		return 0;
	flush = (XLogRecPtr) dex_wal_durable();
	ins = dex_wal_insert_boundary();
	if (ins <= flush || wait)
	{
		if (ins > flush)
			XLogFlush(ins);
		known = Max(known, ins);
		pending = InvalidXLogRecPtr;
		return (uint64) known;
	}
	if (pending != InvalidXLogRecPtr && flush >= pending)
	{
		known = Max(known, pending);
		pending = InvalidXLogRecPtr;
	}
	if (pending == InvalidXLogRecPtr)
	{
		pending = ins;
		pending_at = GetCurrentTimestamp();
	}
	else if (TimestampDifferenceExceeds(pending_at, GetCurrentTimestamp(), WalWriterDelay))
	{
		XLogFlush(pending);
		known = Max(known, pending);
		pending = InvalidXLogRecPtr;
	}
	return (uint64) known;
}

/*
 * Flush every WAL record inserted so far; returns where they end (a record
 * end, durable).
 */
uint64
dex_wal_flush_boundary(void)
{
	XLogRecPtr	upto;

	if (RecoveryInProgress())
		return 0;
	upto = dex_wal_insert_boundary();
	XLogFlush(upto);
	return (uint64) upto;
}

/* How far WAL is durable (flushed) on this primary; 0 on a standby. */
uint64
dex_wal_durable(void)
{
	if (RecoveryInProgress())
		return 0;
#if PG_VERSION_NUM >= 150000
	return (uint64) GetFlushRecPtr(NULL);
#else
	return (uint64) GetFlushRecPtr();
#endif
}

/* ---------------------------------------------------------------------
 * keys
 * ---------------------------------------------------------------------
 */

/*
 * DexKey (src/capi/dex_capi.h) must be the key of src/tree/key_encoding.h,
 * as dex::EntryKey is (src/tree/key.h asserts the same on the C++ side).
 */
StaticAssertDecl(sizeof(DexKey) == DEX_KEY_BYTES, "DexKey must be a key_encoding.h key");
StaticAssertDecl(offsetof(DexKey, value) == DEX_KEY_OFFSET_VALUE &&
				 sizeof(((DexKey *) 0)->value) == 8, "DexKey.value");
StaticAssertDecl(offsetof(DexKey, block) == DEX_KEY_OFFSET_BLOCK &&
				 sizeof(((DexKey *) 0)->block) == 4, "DexKey.block");
StaticAssertDecl(offsetof(DexKey, offnum) == DEX_KEY_OFFSET_OFFNUM &&
				 sizeof(((DexKey *) 0)->offnum) == 2, "DexKey.offnum");
StaticAssertDecl(offsetof(DexKey, cls) == DEX_KEY_OFFSET_CLS &&
				 sizeof(((DexKey *) 0)->cls) == 1, "DexKey.cls");
StaticAssertDecl(offsetof(DexKey, pad) == DEX_KEY_OFFSET_PAD &&
				 sizeof(((DexKey *) 0)->pad) == 1, "DexKey.pad");
StaticAssertDecl(DEX_KEY_NEG_INF == DEX_KEYCLASS_NEG_INF && DEX_KEY_VALUE == DEX_KEYCLASS_VALUE &&
				 DEX_KEY_NULL == DEX_KEYCLASS_NULL && DEX_KEY_POS_INF == DEX_KEYCLASS_POS_INF,
				 "DEX_KEY_* classes must be key_encoding.h's");
/* a heap TID fits the key's TID fields, and the largest one is no real heap TID */
StaticAssertDecl(sizeof(BlockNumber) == sizeof(((DexKey *) 0)->block) &&
				 sizeof(OffsetNumber) == sizeof(((DexKey *) 0)->offnum) &&
				 DEX_KEY_BLOCK_MAX == InvalidBlockNumber, "heap TIDs in keys");
void
dex_make_value_key(DexKey *key, int64 v, uint32 block, uint16 off)
{
	key->value = DEX_KEY_FROM_INT64(v);
	key->block = block;
	key->offnum = off;
	key->cls = DEX_KEYCLASS_VALUE;
	key->pad = 0;
}

void
dex_make_null_key(DexKey *key, uint32 block, uint16 off)
{
	key->value = DEX_KEY_NO_VALUE;
	key->block = block;
	key->offnum = off;
	key->cls = DEX_KEYCLASS_NULL;
	key->pad = 0;
}

/* The core's key order (key_encoding.h). */
int
dex_key_cmp(const DexKey *a, const DexKey *b)
{
	return DEX_KEY_COMPARE(a, b);
}

static int
dex_key_qsort_cmp(const void *a, const void *b)
{
	return dex_key_cmp((const DexKey *) a, (const DexKey *) b);
}

/* Sort keys into the core's order (removals take them ascending). */
void
dex_sort_keys(DexKey *keys, int n)
{
	qsort(keys, n, sizeof(DexKey), dex_key_qsort_cmp);
}

/*
 * Largest key strictly smaller than *k; false if none. Steps the fields in
 * reverse order of DEX_KEY_COMPARE, each over its whole range.
 */
bool
dex_key_prev(DexKey *k)
{
	if (k->offnum > 0)
	{
		k->offnum--;
		return true;
	}
	k->offnum = DEX_KEY_OFFNUM_MAX;
	if (k->block > 0)
	{
		k->block--;
		return true;
	}
	k->block = DEX_KEY_BLOCK_MAX;
	if (k->value > 0)
	{
		k->value--;
		return true;
	}
	k->value = DEX_KEY_VALUE_MAX;
	if (k->cls > DEX_KEYCLASS_NEG_INF)
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
	if (k->offnum < DEX_KEY_OFFNUM_MAX)
	{
		k->offnum++;
		return true;
	}
	k->offnum = 0;
	if (k->block < DEX_KEY_BLOCK_MAX)
	{
		k->block++;
		return true;
	}
	k->block = 0;
	if (k->value < DEX_KEY_VALUE_MAX)
	{
		k->value++;
		return true;
	}
	k->value = 0;
	if (k->cls < DEX_KEYCLASS_POS_INF)
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

#if PG_VERSION_NUM >= 170000
	buf = ExtendBufferedRel(BMR_REL(index), fork, NULL,
							EB_LOCK_FIRST | EB_SKIP_EXTENSION_LOCK);
#elif PG_VERSION_NUM >= 160000
	/* 17 renamed ExtendBufferedWhat/EB_REL to BufferManagerRelation/BMR_REL */
	buf = ExtendBufferedRel(EB_REL(index), fork, NULL,
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

/*
 * The metapage as of the index's current relfilenode, cached in the relcache
 * entry (rd_amcache) after its first read. A metapage is written once, when
 * its relfilenode is built (dex_write_metapage extends block 0 of a new
 * file); REINDEX and TRUNCATE give a new relfilenode, whose relcache
 * invalidation frees rd_amcache, and the cached copy also names the file it
 * came from. The one change in place is the adoption of a metapage that
 * pg_upgrade brought from another cluster (dexupgrade.c rewrites `sysid`),
 * so such a metapage is never cached. This saves a buffer pin and the
 * relation-size probe (an lseek) on every use of the index.
 */
typedef struct DexCachedMeta
{
	Oid			spcoid;
	Oid			relnumber;
	DexMetaPageData meta;
} DexCachedMeta;

void
dex_read_metapage_cached(Relation index, DexMetaPageData *meta)
{
	DexCachedMeta *c = (DexCachedMeta *) index->rd_amcache;

	if (c == NULL || c->spcoid != DEX_REL_SPC(index) || c->relnumber != DEX_REL_NUMBER(index))
	{
		DexMetaPageData m;

		dex_read_metapage(index, &m);	/* may ERROR: nothing cached then */
		if (m.sysid != 0 && m.sysid != GetSystemIdentifier())
		{
			*meta = m;			/* another cluster's: adoption rewrites it */
			return;
		}
		if (c == NULL)
			c = MemoryContextAlloc(index->rd_indexcxt, sizeof(DexCachedMeta));
		c->spcoid = DEX_REL_SPC(index);
		c->relnumber = DEX_REL_NUMBER(index);
		c->meta = m;
		index->rd_amcache = c;
	}
	memcpy(meta, &c->meta, sizeof(*meta));
}

/*
 * The cached metapage itself (no copy) when it is current; otherwise it is
 * read into *scratch (and cached, unless another cluster's) and the result
 * is returned. For callers that need a field or two on every use.
 */
static const DexMetaPageData *
dex_meta_ref(Relation index, DexMetaPageData *scratch)
{
	DexCachedMeta *c = (DexCachedMeta *) index->rd_amcache;

	if (c != NULL && c->spcoid == DEX_REL_SPC(index) && c->relnumber == DEX_REL_NUMBER(index))
		return &c->meta;
	dex_read_metapage_cached(index, scratch);
	return scratch;
}

/*
 * The namespace of the index's tree (its metapage's ns), without copying the
 * metapage out of the cache: aminsert asks it for every held-back row.
 */
uint64
dex_index_tree_ns(Relation index)
{
	DexMetaPageData scratch;

	return dex_meta_ref(index, &scratch)->ns;
}

/*
 * dex_read_metapage_cached without the key columns (meta->columns reads as
 * none): what every use of the index needs, without copying the ~1.7 KB of
 * column records a byte-string index's handle reads once.
 */
void
dex_read_metapage_head(Relation index, DexMetaPageData *meta)
{
	const DexMetaPageData *m = dex_meta_ref(index, meta);

	if (m == meta)
		return;					/* read whole, columns included */
	memcpy(meta, m, offsetof(DexMetaPageData, columns));
	meta->columns.ncolumns = 0;
}

/* Are the index's entries byte strings (DEX_META_BYTES)? From the cached metapage. */
bool
dex_index_is_bytes(Relation index)
{
	DexMetaPageData scratch;

	return (dex_meta_ref(index, &scratch)->flags & DEX_META_BYTES) != 0;
}

/* Do the index's image columns take their type's width (DEX_META_NARROW)? */
bool
dex_index_narrow_images(Relation index)
{
	DexMetaPageData scratch;

	return (dex_meta_ref(index, &scratch)->flags & DEX_META_NARROW) != 0;
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

/* qsort order of DexBytes: memcmp, a proper prefix first (the tree's order). */
int
dex_bytes_cmp(const void *a, const void *b)
{
	const DexBytes *x = (const DexBytes *) a;
	const DexBytes *y = (const DexBytes *) b;

	return dex_kb_compare(x->data, x->len, y->data, y->len);
}

/* A 64-bit id (incarnation, life) as SQL functions show it: 16 hex digits. */
char *
dex_hex64(uint64 v)
{
	return psprintf("%016llx", (unsigned long long) v);	/* 18 has no INT64_MODIFIER */
}

/*
 * The next entry of an XLOG_DEX_ENTRIES payload (after its header: count x
 * (uint32 len, bytes), dexwbredo.c) at *p, before `end`; false if the
 * payload ends, or is cut, there.
 */
bool
dex_wal_entry_next(const char **p, const char *end, const uint8 **entry, uint32 *len)
{
	if (end - *p < (ptrdiff_t) sizeof(uint32))
		return false;
	memcpy(len, *p, sizeof(uint32));
	*p += sizeof(uint32);
	if (end - *p < (ptrdiff_t) *len)
		return false;
	*entry = (const uint8 *) *p;
	*p += *len;
	return true;
}

/*
 * Does this server's WAL contain the writer's up to `need` on timeline
 * `tli` (dexcluster.c, claiming the writer role)? Same timeline: WAL up to
 * `end`, where this life began. Another one: this timeline's history must
 * have branched off `tli` at or after `need`.
 */
bool
dex_wal_covers(uint32 tli, uint64 need, uint64 end, char *why, size_t whylen)
{
	TimeLineID	mytli = GetWALInsertionTimeLine();

	if (tli == 0 || need == 0)
		return true;
	if (tli == mytli)
	{
		if (end >= need)
			return true;
		snprintf(why, whylen,
				 "This server's WAL ends at %X/%X, but the trees already depend on WAL up to %X/%X "
				 "(a backup restored, or recovery stopped, before that point)",
				 LSN_FORMAT_ARGS((XLogRecPtr) end), LSN_FORMAT_ARGS((XLogRecPtr) need));
		return false;
	}
	{
		List	   *hist = readTimeLineHistory(mytli);
		ListCell   *lc;

		foreach(lc, hist)
		{
			TimeLineHistoryEntry *e = (TimeLineHistoryEntry *) lfirst(lc);

			if (e->tli == tli)
			{
				if (e->end != InvalidXLogRecPtr && (uint64) e->end >= need)
					return true;
				snprintf(why, whylen,
						 "This server left timeline %u at %X/%X, but the trees already depend on its WAL up to %X/%X",
						 tli, LSN_FORMAT_ARGS(e->end), LSN_FORMAT_ARGS((XLogRecPtr) need));
				return false;
			}
		}
	}
	snprintf(why, whylen,
			 "The trees are written by timeline %u, which is not in this server's history (timeline %u): "
			 "an old primary after a failover, or a separate recovery",
			 tli, mytli);
	return false;
}
