/*
 * dex.h — shared declarations of the dex index access method (PostgreSQL
 * glue). The B+-tree itself lives in remote memory and is reached only
 * through the C API in src/capi/dex_capi.h (and the plain C headers
 * src/tree/key_encoding.h and node_capacity.h for the key and node layout).
 *
 * The files call each other without cycles; each uses only files listed
 * after it here (scripts/tests/t_layers.sh checks it):
 *
 *   dexfuncs.c dexclusterfuncs.c  SQL-callable functions
 *   dex.c          _PG_init, shared memory hooks, AM handler
 *   dexbuild.c dexinsert.c dexscan.c dexvacuum.c dexvalidate.c dexcost.c
 *                  access method entry points
 *   dexscanbytes.c  index scans of byte-string indexes
 *   dexscanranges.c  scan keys of byte-string indexes as sorted entry ranges,
 *                  one per combination of "= ANY" elements
 *   dexscanbatch.c  the running core scan of either entry form: batches, its end
 *   dexunique.c    unique indexes: the check before an insert
 *   dexbottomup.c  bottom-up deletion: dead entries of a full leaf removed before
 *                  an UPDATE's insert splits it
 *   dexios.c       index-only scans: amcanreturn, returned tuples, the VACUUM
 *                  interlock, heap verification on a standby
 *   dexkill.c      dead-entry hints: entries kill_prior_tuple found dead, removed
 *                  when the scan leaves their batch
 *   dexkilldefer.c kills and bottom-up removals that must wait for the standbys
 *                  (write-through, or write-back paused): queued until they
 *                  replayed the kill's record
 *   dexworker.c    the dex worker: registry beats, write-back rounds, the
 *                  checkpoint fence's beat, its stop
 *   dexguc.c       GUC definitions
 *   dexckptfence.c checkpoints wait for the dex worker's write-back of dirty nodes
 *   dexpending.c   batched inserts: entries aminsert holds back, their flushes,
 *                  the tree for any other use (dex_get_tree)
 *   dexxact.c      transaction callbacks: remote memory freed at commit/abort
 *   dexsession.c   this backend's configuration of the core, interrupt hook,
 *                  open-tree registry and its invalidation
 *   dexjournal.c   crash consistency: the insert journal, WAL flushes
 *   dexjournalrecover.c  the journal's recovery: journaled entries checked
 *                  against the heap, strays removed (both layouts)
 *   dexupgrade.c   pg_upgrade: taking over the trees of the cluster upgraded from
 *   dexclusterns.c which namespaces on the memory nodes are this cluster's
 *   dexhorizon.c   the WAL positions a primary's writes and VACUUM wait for:
 *                  journal retention, write-backs' hwm, standbys' replay
 *   dexclusterflush.c  a standby scan's request for a write-back, the
 *                  worker's hurried beats
 *   dexcluster.c   primary and hot standbys: the cluster registry, this life
 *   dexlag.c       a standby whose replay lags far behind is detached, and
 *                  claims a slot again only once it keeps up
 *   dexwal.c       dex's WAL resource manager
 *   dexkillwal.c   a write-back index's kill: its conflict horizon, logged for
 *                  hot standbys
 *   dexwbcollect.c recovery (crash or hot standby) collects a write-back life's
 *                  logged entry changes, in segments a flushed position drops
 *   dexwbimage.c   dirty leaves logged whole: by a checkpoint that cannot wait
 *                  for their write-back, saved at a shutdown that cannot either
 *   dexwbredo.c    write-back mode after a crash: entry changes logged, the
 *                  gate at the index's first use on this server (or a promoted
 *                  standby) that replays them or refuses the index
 *   dexwbreplay.c  the replay of the collected changes in log order, inserts
 *                  batched; where collected segments live
 *   dexwbstandby.c write-back indexes on hot standbys: the primary's flushed
 *                  position in WAL, a scan's wait for it
 *   dexwbsplaces.c where in the key order a standby's replayed entry changes
 *                  lie: the point table and spans a scan's wait reads
 *   dexbounds.c    scan keys of a byte-string index as byte bounds
 *   dexentry.c     index entries as byte strings: an index tuple's entry, the
 *                  key columns a metapage records
 *   dexentryvalues.c  the values an entry gives back: INCLUDE columns, decodable
 *                  key columns
 *   dexkeybytes.c  datums as order-preserving byte strings (src/tree/key_bytes.h)
 *   dexkeys.c      datums as key images: every type, cross-type scan keys
 *   dexreloptions.c  index options and their defaults
 *   dexutils.c     keys, metapage, namespace tags, WAL positions, preloading
 *   dexerror.c     DexError -> ereport
 */
#ifndef DEX_H
#define DEX_H

#include "postgres.h"

#include <signal.h>

#include "access/amapi.h"
#include "access/genam.h"
#include "nodes/pathnodes.h"
#include "storage/block.h"
#include "storage/bufpage.h"
#include "common/relpath.h"
#include "storage/itemptr.h"
#include "utils/relcache.h"

#include "dex_capi.h"

/* ---- version compatibility --------------------------------------------- */

#if PG_VERSION_NUM >= 160000
#define DEX_REL_NUMBER(rel)		((rel)->rd_locator.relNumber)
#define DEX_REL_SPC(rel)		((rel)->rd_locator.spcOid)
#define DEX_REL_DB(rel)			((rel)->rd_locator.dbOid)
#else
#define DEX_REL_NUMBER(rel)		((rel)->rd_node.relNode)
#define DEX_REL_SPC(rel)		((rel)->rd_node.spcNode)
#define DEX_REL_DB(rel)			((rel)->rd_node.dbNode)
#endif

#if PG_VERSION_NUM < 160000
#define InitMaterializedSRF(fcinfo, flags) SetSingleFuncCall(fcinfo, flags)
#endif

/* 18 added vacuum_delay_point's is_analyze argument */
#if PG_VERSION_NUM >= 180000
#define dex_vacuum_delay_point()	vacuum_delay_point(false)
#else
#define dex_vacuum_delay_point()	vacuum_delay_point()
#endif

/* ---- metapage (block 0 of the index relation) --------------------------- */

#define DEX_METAPAGE_BLKNO	0
#define DEX_MAGIC			0x44455831	/* "DEX1" */
#define DEX_VERSION			2		/* 2: insert journal (src/README.md "Crash survival") */
#define DEX_PAGE_ID			0xFF83		/* in the special space */

/* meta flags */
#define DEX_META_INIT_FORK	0x0001	/* written by ambuildempty: no remote tree */
#define DEX_META_UPGRADE_STUB 0x0002	/* built by pg_upgrade's schema restore: no remote
										 * tree (the old cluster's metapage replaces it) */
#define DEX_META_BYTES		0x0004	/* the tree's entries are byte strings
									 * (DEX_LAYOUT_BYTES: several columns, a DESC or
									 * NULLS FIRST column, text, uuid, numeric, ...) */
#define DEX_META_NARROW		0x0008	/* with DEX_META_BYTES: bool, int2, int4, oid
									 * and date columns take their type's width
									 * (1, 2, 4 bytes), not the 8-byte image
									 * (dex_key_image_width); older byte-string
									 * indexes keep 8 */

#define DEX_ADDR_LEN		128

/*
 * The key columns an index was built with, as its metapage records them:
 * fixed-size fields only, so the struct is its own serialization. A
 * collation version longer than the field is recorded truncated (and
 * compared truncated).
 */
#define DEX_COLLVERSION_LEN		40
#define DEX_META_COL_DESC		0x0001
#define DEX_META_COL_NULLS_FIRST	0x0002

typedef struct DexMetaColumn
{
	uint32		typid;
	uint32		collid;
	uint16		flags;			/* DEX_META_COL_* */
	uint16		pad;
	char		collversion[DEX_COLLVERSION_LEN];	/* "" = none (C, no collation) */
} DexMetaColumn;

typedef struct DexMetaColumns
{
	uint32		ncolumns;
	uint32		pad;
	DexMetaColumn col[INDEX_MAX_KEYS];
} DexMetaColumns;

/* One memory node of an index spread over several (position i in dex.memnodes). */
typedef struct DexMetaPart
{
	uint64		ns;				/* namespace on that node, 0 = node not used */
	uint64		incarnation;	/* its incarnation at build time */
	char		address[DEX_ADDR_LEN];	/* its address at build time */
} DexMetaPart;

typedef struct DexMetaPageData
{
	uint32		magic;
	uint32		version;
	uint32		flags;
	int32		node;			/* memory node index at build time */
	uint64		ns;				/* namespace id, 0 = none */
	uint64		incarnation;	/* memory node incarnation at build time */
	char		address[DEX_ADDR_LEN];	/* memory node address (for messages) */
	uint64		owner_word;		/* write-back mode: GAddr of the remote dirty-owner
								 * word (src/README.md "Write-back mode"); 0 =
								 * none (index built before it existed) */
	/*
	 * Several memory nodes (src/README.md "Placement over several memory
	 * nodes"). nparts = 0: a single-node index (fields above only, as
	 * built before placement existed). Otherwise parts[i] is memory node i
	 * of dex.memnodes at build time; node/ns/incarnation/address above are
	 * the home node's (root word, owner word, upper levels).
	 */
	int32		nparts;
	int32		placement_level;	/* subtrees rooted here lie on one node */
	DexMetaPart parts[DEX_MAX_MEMNODES];
	uint64		journal;		/* GAddr of the insert journal's root on the
								 * home node (src/README.md "Crash survival") */
	uint64		sysid;			/* system identifier of the cluster that owns
								 * the trees; another one's after pg_upgrade
								 * until adopted (dexupgrade.c); 0: built
								 * before this field */
	/*
	 * DEX_META_BYTES indexes (entries are byte strings, dexentry.c): the key
	 * columns they were built with, checked when the index is opened
	 * (collation versions: HINT REINDEX). Zero in metapages written before
	 * this field, which are all 16-byte-key indexes.
	 */
	DexMetaColumns columns;
} DexMetaPageData;

StaticAssertDecl(sizeof(DexMetaPageData) <= BLCKSZ - 128, "dex metapage must fit a page");

typedef struct DexPageOpaqueData
{
	uint16		flags;
	uint16		page_id;		/* DEX_PAGE_ID */
} DexPageOpaqueData;

#define DexPageGetMeta(page) ((DexMetaPageData *) PageGetContents(page))

/* ---- namespace tag (64 bytes, ownership of remote memory) --------------- */

#define DEX_TAG_MAGIC "pgdx"
#define DEX_TAG_VERSION 1

typedef struct DexNsTag
{
	char		magic[4];		/* "pgdx" */
	uint32		tag_version;
	uint64		sysid;			/* GetSystemIdentifier() */
	uint32		dboid;
	uint32		indexoid;
	uint32		relfilenode;
	uint32		spcoid;
	uint32		kind;			/* DEX_NS_INDEX or DEX_NS_REGISTRY */
	uint32		pad0;
	char		pad[DEX_NS_TAG_LEN - 40];
} DexNsTag;

#define DEX_NS_INDEX	0		/* an index's tree */
#define DEX_NS_REGISTRY	1		/* the cluster registry (dexcluster.c): never an orphan */

StaticAssertDecl(sizeof(DexNsTag) == DEX_NS_TAG_LEN, "DexNsTag must be 64 bytes");

/* ---- reloptions (dexreloptions.c) ------------------------------------- */

typedef struct DexOptions
{
	int32		vl_len_;		/* varlena header (do not touch directly!) */
	int			fillfactor;
	bool		write_back;		/* write-back mode (DEX_DEFAULT_WRITE_BACK) */
	int			placement_level;	/* subtrees rooted at this level lie on one memory node */
} DexOptions;

#define DEX_DEFAULT_FILLFACTOR 90
#define DEX_MIN_FILLFACTOR 10
#define DEX_DEFAULT_WRITE_BACK true
#define DEX_DEFAULT_PLACEMENT_LEVEL 2

extern void dex_init_reloptions(void);
extern bytea *dexoptions(Datum reloptions, bool validate);
extern bool dex_index_write_back(Relation index);

/* ---- build phases (progress reporting) ------------------------------- */

#define DEX_PHASE_SCAN		2
#define DEX_PHASE_SORT		3
#define DEX_PHASE_LOAD		4
#define DEX_PHASE_META		5

/* ---- scan opaque ------------------------------------------------------- */

typedef struct DexRange
{
	DexKey		lo;
	DexKey		hi;
} DexRange;

typedef enum DexScanPos
{
	DEX_POS_START,				/* nothing returned yet in current direction */
	DEX_POS_AT,					/* last returned entry is curkey */
	DEX_POS_END					/* ran off the end in curdir */
} DexScanPos;

typedef struct DexScanOpaqueData
{
	DexTree    *tree;
	Oid			atttype;		/* base type of the indexed column */
	MemoryContext scancxt;		/* holds this struct; deleted by amendscan */
	MemoryContext keycxt;		/* ranges; reset by each key preparation */

	/* set up by dex_prepare_keys (amrescan) */
	bool		keys_ready;
	bool		empty;			/* contradictory keys */
	int			nranges;
	DexRange   *ranges;			/* ascending, non-overlapping */

	/* running state */
	bool		started;
	ScanDirection dir;			/* direction of the running core scan */
	int			range_idx;		/* current range index */
	DexScan    *dscan;			/* running core scan or NULL */
	const DexKey *batch;
	int			nbatch;
	int			batch_pos;
	DexScanPos	pos;
	DexKey		curkey;
	int			cur_range;
	BlockNumber heap_nblocks;	/* hot standby: heap size seen (0 = not yet) */

	/* index-only scans (dexios.c) */
	bool		ios_ready;		/* dex_ios_begin ran */
	bool		ios_returnable;	/* the column's keys decode exactly */
	struct DexEntryReader *ios_reader;	/* byte-string entries: their values */
	bool		ios_verify;		/* check each entry's heap tuple (standby) */
	int			ios_slot;		/* this scan's announcement, -1 = none */
	MemoryContext itupcxt;		/* holds xs_itup; reset per tuple */
	struct IndexFetchTableData *vfetch; /* heap verification */
	struct TupleTableSlot *vslot;

	/*
	 * Byte-string indexes (DEX_META_BYTES; dexscanbytes.c): ascending,
	 * disjoint inclusive ranges of entries (dexscanranges.c; range_idx and
	 * cur_range above index them), the core scan's batch, and a copy of the
	 * entry returned last (a direction change restarts the core scan there,
	 * skipping it).
	 */
	bool		bytes;
	int			nbranges;
	struct DexByteRange *branges;
	const DexBytes *bbatch;
	uint8	   *bcur;
	size_t		bcurlen;
	size_t		bcurcap;
	bool		bskip;			/* skip the core scan's first entry if it is bcur */

	/* dead-entry hints (dexkill.c) */
	DexLeafStamp stamp;			/* leaf and version the current batch was read at */
	uint64		kill_epoch;		/* dex_ios_vacuum_epoch() when it was read (K8) */
	DexKey	   *killed;			/* entries of this batch found dead */
	DexBytes   *bkilled;		/* the same for byte-string entries, */
	uint8	   *bkillbuf;		/* whose bytes are copied here */
	int			nkilled;

	MemoryContextCallback cb;	/* ends the core scan on context reset */
} DexScanOpaqueData;

typedef DexScanOpaqueData *DexScanOpaque;

/* ---- dexscanbytes.c, dexscanbatch.c ---------------------------------- */

/* Inclusive range [lo, hi] of byte-string entries (NULL, 0: an open end). */
typedef struct DexByteRange
{
	uint8	   *lo;
	size_t		lolen;
	uint8	   *hi;
	size_t		hilen;
} DexByteRange;

extern int	dex_bytes_ranges(Relation index, ScanKey keys, int nkeys,
							 DexByteRange **out);

extern bool dex_bytes_gettuple(IndexScanDesc scan, ScanDirection dir);
extern int64 dex_bytes_getbitmap(IndexScanDesc scan, TIDBitmap *tbm);
extern void dex_end_core_scan(DexScanOpaque so);
extern bool dex_next_batch(IndexScanDesc scan);
extern void dex_kill_leave_batch(IndexScanDesc scan);
extern void dex_kill_apply_deferred(Relation index, DexTree *tree);
extern bool dex_standby_block_exists(IndexScanDesc scan, BlockNumber block);

/* ---- dexentry.c ------------------------------------------------------- */

/*
 * Entries of the byte-string tree (src/tree/layout.h SlottedTree): the key
 * columns' encodings (src/README.md "Keys"), then the heap TID, 6 bytes
 * big-endian. memcmp order, a proper prefix first, is btree's order.
 */
struct DexKeyBuf;				/* src/tree/key_bytes.h */

#define DEX_ENTRY_TID_BYTES		6
#define DEX_ENTRY_PAD_BYTES		8	/* 0xFF bytes: above any column header or TID */

/* One key column as the encoding sees it. */
typedef struct DexEntryColumn
{
	Oid			typid;			/* base type of the index column */
	Oid			collid;			/* the index column's collation, or InvalidOid */
	bool		desc;			/* indoption DESC */
	bool		nulls_first;	/* indoption NULLS FIRST */
	uint8		image_width;	/* a 64-bit-image type (dexkeys.c): the bytes of
								 * its encoding, 8 or narrower (DEX_META_NARROW);
								 * 0 for the other types */
} DexEntryColumn;

/*
 * Inclusive bounds [lo, hi] (palloc'd) of the entries a set of scan keys can
 * match. empty: the keys contradict each other (lo/hi meaningless). recheck:
 * some key is not enforced by the bounds (the caller sets xs_recheck).
 */
typedef struct DexEntryBounds
{
	uint8	   *lo;
	size_t		lolen;
	uint8	   *hi;
	size_t		hilen;
	bool		empty;
	bool		recheck;
} DexEntryBounds;


extern bool dex_entry_layout_wanted(Relation index);
extern bool dex_entry_types_comparable(Oid coltype, Oid argtype);
extern void dex_entry_tid(const uint8 *entry, size_t len, ItemPointer tid);
extern int	dex_entry_columns(Relation index, DexEntryColumn *cols);
extern bool dex_text_like(Oid typid);
extern bytea *dex_entry_bytea(const uint8 *p, size_t n);
extern int	dex_entry_columns_for_build(Relation index, DexEntryColumn *cols);
extern bool dex_narrow_images;
/* both return the key part's length: the entry's bytes before the TID */
extern size_t dex_entry_build(Relation index, Datum *values, bool *isnull,
							  ItemPointer tid, struct DexKeyBuf *out);
extern bool dex_entry_build_if_fits(Relation index, Datum *values, bool *isnull,
									ItemPointer tid, struct DexKeyBuf *out);
extern size_t dex_entry_encode(Relation index, const DexEntryColumn *cols, int ncols,
							   Datum *values, bool *isnull, ItemPointer tid,
							   struct DexKeyBuf *out);
extern void dex_entry_bounds(Relation index, ScanKey keys, int nkeys,
							 DexEntryBounds *out);
extern void dex_entry_meta_columns(Relation index, DexMetaColumns *out);
extern char *dex_entry_meta_check(Relation index, const DexMetaColumns *recorded);

/* ---- dexentryvalues.c ------------------------------------------------- */

typedef struct DexEntryReader DexEntryReader;

extern bool dex_entry_has_payload(Relation index);
extern void dex_entry_append_payload(Relation index, Datum *values, bool *isnull,
									 struct DexKeyBuf *out, bool *fits);
extern DexEntryReader *dex_entry_reader(Relation index, const DexEntryColumn *cols, int nkey);
extern bool dex_entry_key_returnable(const DexEntryReader *r, int i);
extern void dex_entry_values(const DexEntryReader *r, const uint8 *entry, size_t len,
							 Datum *values, bool *isnull);

/* ---- dexkeybytes.c ---------------------------------------------------- */

/* How a column's encoding is laid out, for reading it back. */
typedef enum DexKeyShape
{
	DEX_SHAPE_IMAGE,			/* a 64-bit image in width bytes (8, or narrow) */
	DEX_SHAPE_FIXED,			/* width bytes */
	DEX_SHAPE_STRING,			/* escaped and terminated */
	DEX_SHAPE_TWO_STRINGS,		/* a collation's sort key, then the string */
	DEX_SHAPE_NUMERIC			/* class byte [exponent, digit pairs, end] */
} DexKeyShape;

typedef struct DexKeyForm
{
	DexKeyShape shape;
	uint8		width;			/* DEX_SHAPE_IMAGE, DEX_SHAPE_FIXED */
	bool		returnable;		/* the bytes give the datum back exactly */
} DexKeyForm;

#define DEX_IMAGE_WIDE		8	/* an image's width before DEX_META_NARROW */
extern int	dex_key_image_width(Oid typid, bool narrow);
extern void dex_key_image_append(struct DexKeyBuf *b, int64 image, Oid typid, int width);
extern void dex_key_image_clamp(Oid typid, int width, int64 *lo, int64 *hi);
extern void dex_key_bytes_append(struct DexKeyBuf *b, Datum d, Oid typid, Oid collid,
								 int image_width);
extern void dex_key_bytes_form(Oid typid, Oid collid, int image_width, DexKeyForm *f);
extern size_t dex_key_bytes_span(const DexKeyForm *f, const uint8 *p, size_t n, uint8 inv);
extern bool dex_key_bytes_datum(const DexKeyForm *f, Oid typid, Oid collid, const uint8 *p,
								size_t span, uint8 inv, Datum *out);
extern void dex_kb_init_palloc(struct DexKeyBuf *b);
extern void *dex_kb_grow_palloc(void *old, size_t newcap);
extern bool dex_key_bytes_supported(Oid typid);

/* ---- dexkeys.c -------------------------------------------------------- */

/*
 * A scan-key argument placed among the column type's images (int64 whose
 * signed order is SQL order). exact: the column values equal to the argument
 * are exactly the images lo..hi (none when lo = hi + 1: it falls between two
 * images); smaller images compare less, larger ones greater. Not exact:
 * lo..hi is a window holding every image whose comparison is uncertain
 * (rows are rechecked against the operator anyway).
 */
typedef struct DexBound
{
	int64		lo;
	int64		hi;
	bool		exact;
} DexBound;

extern bool dex_type_supported(Oid typid);
extern Oid	dex_column_basetype(Relation index);
extern bool dex_types_comparable(Oid coltype, Oid argtype);
extern void dex_datum_bound(Datum d, Oid argtype, Oid coltype, DexBound *b);
extern int64 dex_datum_image(Datum d, Oid coltype);
extern void dex_make_key(DexKey *key, Relation index, Datum value, bool isnull,
						 ItemPointer tid);
extern bool dex_image_datum(int64 v, Oid coltype, Datum *out);
extern bool dex_type_returnable(Oid coltype);
extern bool dex_key_datum(const DexKey *key, Oid coltype, Datum *out);

/* ---- dexutils.c ------------------------------------------------------- */
extern char *dex_hex64(uint64 v);
extern bool dex_wal_entry_next(const char **p, const char *end, const uint8 **entry, uint32 *len);

extern int	dex_bytes_cmp(const void *a, const void *b);

extern bool dex_preloaded;
extern void dex_require_preload(void);
extern uint64 dex_wal_durable(void);
extern uint64 dex_wal_durable_boundary(bool wait);
extern bool dex_wal_covers(uint32 tli, uint64 need, uint64 end, char *why, size_t whylen);
extern uint64 dex_wal_flush_boundary(void);

extern void dex_make_value_key(DexKey *key, int64 v, uint32 block, uint16 off);
extern void dex_make_null_key(DexKey *key, uint32 block, uint16 off);
extern int	dex_key_cmp(const DexKey *a, const DexKey *b);
extern void dex_sort_keys(DexKey *keys, int n);
extern bool dex_key_prev(DexKey *k);
extern bool dex_key_next(DexKey *k);
extern void dex_key_to_tid(const DexKey *k, ItemPointer tid);

extern void dex_write_metapage(Relation index, ForkNumber fork,
							   const DexMetaPageData *meta);
extern void dex_read_metapage(Relation index, DexMetaPageData *meta);
extern void dex_read_metapage_cached(Relation index, DexMetaPageData *meta);
extern void dex_read_metapage_head(Relation index, DexMetaPageData *meta);
extern uint64 dex_index_tree_ns(Relation index);
extern bool dex_index_is_bytes(Relation index);
extern bool dex_index_narrow_images(Relation index);
extern uint32 dex_meta_tree_id(const DexMetaPageData *meta);
extern bool dex_meta_owns_ns(const DexMetaPageData *meta, int node, uint64 ns);
extern void dex_make_tag(DexNsTag *tag, Oid indexoid, Oid relfilenode, Oid spcoid);
extern bool dex_parse_tag(const uint8_t *raw, DexNsTag *tag);

/* ---- dex.c ------------------------------------------------------------ */

extern void dex_check_index_relation(Relation index);

/* ---- dexworker.c ------------------------------------------------------ */

extern void dex_register_worker(void);

/* ---- dexguc.c --------------------------------------------------------- */

extern void dex_define_gucs(void);
extern uint64 dex_cache_bytes(void);
/* fewest dead entries of one batch worth a kill (its gate is a round trip) */
extern int	dex_kill_min_entries;
/* dex.cache_size (kB) and dex.writeback_interval (ms), for the dex worker */
extern int	dex_cache_size_kb;
extern int	dex_writeback_interval_ms;
/*
 * dex.write_back_with_standbys: whether write-back indexes keep changes in
 * the node cache while a hot standby is attached. off: write through (its
 * scans never wait); on: keep them (its scans of changed ranges wait for a
 * write-back); auto (default): keep them until a standby's scan asks for a
 * write-back, then write through for dex.standby_pause_hold after the last
 * request.
 */
#define DEX_WBWS_OFF	0
#define DEX_WBWS_ON		1
#define DEX_WBWS_AUTO	2
extern int	dex_write_back_with_standbys;
extern int	dex_standby_pause_hold_ms;	/* dex.standby_pause_hold */
extern bool dex_worker_fail;	/* dex.worker_fail (testing) */

/* ---- dexsession.c ----------------------------------------------------- */

/* GUC variables (defined in dexguc.c) of the core's configuration */
extern char *dex_memnodes_guc;
extern char *dex_token_file;
extern int	dex_connect_timeout_ms;
extern int	dex_op_timeout_ms;
extern bool dex_interrupts_suppressed;

extern void dex_session_init(void);
extern void dex_config_changed(void);
extern int	dex_try_configure(DexError *err);
extern void dex_ensure_configured(void);
extern DexTree *dex_open_tree(Relation index);
extern DexTree *dex_open_tree_for_scan(Relation index);
typedef struct DexWbsPlaces DexWbsPlaces;	/* dexwbsplaces.c */
extern void dex_standby_scan_wait(Relation index, const DexWbsPlaces *places);

/* dexpending.c: entries held back by aminsert (src/README.md "Batched inserts") */
extern int	dex_insert_batch;
extern bool dex_bottom_up;
extern DexTree *dex_get_tree(Relation index);
extern DexTree *dex_get_tree_for_scan(Relation index);
extern bool dex_pending_allowed(Relation index, IndexUniqueCheck checkUnique,
								struct IndexInfo *indexInfo);
extern bool dex_pending_add(Relation index, Relation heapRel, const DexKey *key);
extern bool dex_pending_add_bytes(Relation index, Relation heapRel, const uint8 *entry,
								  size_t len);
extern void dex_pending_flush_index(Relation index);
extern void dex_pending_init(void);
extern void dex_forget_tree(int node, uint64 ns);
extern void dex_forget_all_trees(void);

/* ---- dexupgrade.c ----------------------------------------------------- */

extern uint64 dex_upgrade_foreign_owner(Relation index);
extern bool dex_upgrade_adopt(Relation index, uint64 old_sysid, bool for_drop);

/* ---- dexclusterns.c --------------------------------------------------- */

/* A namespace this cluster created (or adopted) on a memory node, with its parsed tag. */
typedef struct DexClusterNs
{
	uint64		ns;
	uint64		bytes;
	DexNsTag	tag;
} DexClusterNs;
extern int	dex_list_cluster_namespaces(int node, DexClusterNs **out, int *n,
										DexError *err);

/* ---- dexcluster.c ----------------------------------------------------- */

extern int	dex_standby_wait_timeout_ms;
extern Size dex_cluster_shmem_size(void);
extern void dex_cluster_shmem_init(void *mem, bool found);
extern uint64 dex_life(void);
/*
 * The dex worker beats in the cluster registry this often (dexworker.c runs it,
 * dexcluster.c does it). Short, because the primary's journal horizon follows
 * the standbys' replay only as fast as they report it and it reads it: a
 * journal lane (170 records) then refills within one beat or two, not one
 * every 200 ms (which capped inserts at ~300/s per backend with a standby).
 * Leases and expiry count milliseconds, not beats.
 */
#define DEX_BEAT_MS		20
extern void dex_cluster_beat(const DexError *config_err);
/*
 * A hot standby's scan that waits for write-backs hurries both workers
 * (src/README.md "Write-back mode", standbys): the standby's beats every
 * DEX_HURRY_MS for a while, so its replay reaches the registry at once; the
 * primary's worker, for DEX_PRIMARY_HURRY_MS after it saw a request, reads
 * the registry's flush request every DEX_HURRY_MS between its beats and,
 * while one is pending,
 * beats at that pace and flushes every DEX_REQUESTED_FLUSH_MS -- so the wait
 * is a few of these, not a few 20 ms beats.
 */
#define DEX_HURRY_MS	2
#define DEX_REQUESTED_FLUSH_MS	10
#define DEX_PRIMARY_HURRY_MS	1000	/* after a standby's request: it may ask again */
struct Latch;
extern void dex_cluster_set_worker_latch(struct Latch *latch);
extern bool dex_cluster_hurry(void);
extern uint64 dex_cluster_poll_flush_request(void);

/*
 * dexckptfence.c: checkpoints wait for the write-back. The dex worker
 * (dexworker.c) hands it its rounds: a write-back round (*flushed: the flushed
 * position on record after it, *failed: the round failed), a beat, and its
 * stop flag.
 */
typedef uint64 (*DexFlushRound) (bool quiet, uint64 *flushed, bool *failed);
extern int	dex_checkpoint_writeback_timeout_ms;
extern int	dex_fence_switch_pause_ms;
extern void dex_ckpt_fence_poll(bool has_cache, DexFlushRound flush, void (*beat) (void),
								volatile sig_atomic_t *stop);
extern bool dex_ckpt_fence_stop(DexFlushRound flush, void (*beat) (void), int rounds);
extern void dex_ckpt_fence_release(void);
extern void dex_cluster_release_writer(void);
extern void dex_cluster_check(Relation index);
extern uint64 dex_cluster_retention(void);
extern uint64 dex_cluster_retention_published(void);
extern void dex_cluster_wait_retention(uint64 lsn, Relation index);
extern void dex_cluster_wait_standbys(uint64 target, Relation index);
extern void dex_cluster_require_writer(const char *what);
extern bool dex_cluster_is_writer(void);
extern uint64 dex_cluster_published_hwm(void);
extern uint64 dex_cluster_flush_request(void);
extern bool dex_cluster_standby_asked_within(int ms);
extern int	dex_cluster_live_standbys(void);
extern void dex_cluster_request_flush(uint64 lsn);
extern uint64 dex_cluster_registry_lookup(uint64 sysid, bool create, uint64 floor,
										  DexError *err);
extern uint64 dex_cluster_registry(void);

/*
 * dexlag.c: the primary's worker detaches a live standby that did not replay
 * its WAL within dex.standby_wait_timeout; a standby claims a slot only once
 * its replay keeps up. The primary's waits for its standbys end in an ERROR
 * only if the detach did not free them (the worker not running): the
 * timeout, then the detached slot's lease and margin, and a beat or two.
 */
extern void dex_lag_check_slot(uint64 addr, int i, const DexStandbySlot *s, uint64 durable,
							   TimestampTz now, int timeout_ms);
extern bool dex_lag_standby_keeps_up(uint64 replay, uint64 removal_lsn, TimestampTz now, int timeout_ms,
									 char *why, size_t whylen);
extern void dex_lag_log_detached(uint64 replay);
extern void dex_lag_log_keeps_up(uint64 removal_lsn);
#define DEX_DETACH_SLACK_MS (DEX_LEASE_MS + DEX_MARGIN_MS + 2000)

/*
 * A standby slot that is held and not expired by the writer (a live standby;
 * a detached one too, until it expires: its lease may still run).
 */
static inline bool
dex_slot_live(const DexStandbySlot *s)
{
	return s->owner != 0 && !(s->beat & DEX_SLOT_EXPIRED);
}

/* The writer's state as dexcluster.c's beats keep it (dexhorizon.c reads it). */
typedef struct DexWriterView
{
	uint64		registry;		/* 0: not found yet */
	uint64		standby_floor;	/* live standbys' min replay at the last beat; UINT64_MAX: none */
	uint64		published_hwm;	/* how far the trees may depend on WAL (<= removal_lsn) */
	TimestampTz writer_lease_until; /* this server's writer lease (0: not the writer) */
} DexWriterView;
extern void dex_cluster_writer_view(DexWriterView *v);
extern void dex_cluster_note_published_hwm(uint64 hwm);

/*
 * A server that holds the writer role beats at least every DEX_LEASE_MS; one
 * silent for DEX_LEASE_MS + DEX_MARGIN_MS is gone (src/README.md "Hot standbys").
 */
#define DEX_LEASE_MS	3000
#define DEX_MARGIN_MS	2000

/* ---- dexwal.c and recovery: dexwal.h --------------------------------- */

#include "dexwal.h"

/* ---- dexjournal.c ----------------------------------------------------- */

extern void dex_journal_init(void);
extern void dex_wal_flush_dirty(void);
extern uint64 dex_wal_flush_dirty_nowait(void);
extern void dex_wal_flush_for_retry(const DexError *err, Relation index);
extern uint64 dex_row_lsn(Relation heap);
extern uint32 dex_journal_lane(void);
extern void dex_journal_gate(Relation index, DexTree *tree, uint64 journal_root,
							 uint64 *verified);

/* ---- dexjournalrecover.c ---------------------------------------------- */

extern void dex_journal_recover_fixed(Relation index, DexTree *tree, uint64 mine);
extern void dex_journal_recover_bytes(Relation index, DexTree *tree, uint64 mine);

/* ---- dexerror.c ------------------------------------------------------- */

#if PG_VERSION_NUM >= 180000
/* 18 replaced the pg_attribute_noreturn() suffix by a pg_noreturn prefix */
pg_noreturn extern void dex_report_error(int rc, const DexError *err, Relation index);
pg_noreturn extern void dex_report_error_name(int rc, const DexError *err, const char *indexname);
#else
extern void dex_report_error(int rc, const DexError *err, Relation index) pg_attribute_noreturn();
extern void dex_report_error_name(int rc, const DexError *err, const char *indexname) pg_attribute_noreturn();
#endif

/* ---- dexxact.c -------------------------------------------------------- */

extern void dex_xact_init(void);
extern void dex_register_created(int node, uint64 ns);
extern void dex_register_drop(int node, uint64 ns);
extern void dex_register_index_drop(Oid indexoid);
extern bool dex_ns_is_pending(int node, uint64 ns);

/* ---- dexunique.c ------------------------------------------------------ */

/* NULLS NOT DISTINCT (PostgreSQL 15+): NULL keys conflict like values */
#if PG_VERSION_NUM >= 150000
#define DEX_NULLS_NOT_DISTINCT(ii)	((ii) != NULL && (ii)->ii_NullsNotDistinct)
#else
#define DEX_NULLS_NOT_DISTINCT(ii)	false
#endif

extern bool dex_unique_check(Relation index, Relation heap,
							 struct IndexInfo *indexInfo, DexTree *tree,
							 const DexKey *key, Datum *values, bool *isnull,
							 ItemPointer tid, IndexUniqueCheck mode,
							 BlockNumber *lockblk);
extern bool dex_unique_check_bytes(Relation index, Relation heap,
								   struct IndexInfo *indexInfo, DexTree *tree,
								   const uint8 *key, size_t keylen,
								   Datum *values, bool *isnull, ItemPointer tid,
								   IndexUniqueCheck mode, BlockNumber *lockblk);
extern void dex_unique_release(Relation index, BlockNumber lockblk);
extern void dex_unique_build_duplicate(Relation heap, Relation index,
									   struct IndexInfo *indexInfo, ItemPointer tid);

/* ---- dexios.c --------------------------------------------------------- */

extern Size dex_ios_shmem_size(void);
extern void dex_ios_shmem_init(void *mem, bool found);
extern void dex_ios_init(void);
extern void dex_ios_begin(IndexScanDesc scan);
extern void dex_ios_announce(IndexScanDesc scan);
extern void dex_ios_quiet(DexScanOpaque so);
extern void dex_ios_release(DexScanOpaque so);
extern bool dex_ios_entry(IndexScanDesc scan, const DexKey *k);
extern bool dex_ios_entry_bytes(IndexScanDesc scan, const uint8 *entry, size_t len);
extern void dex_ios_end(IndexScanDesc scan);
extern void dex_ios_wait_readers(Relation index);
extern int	dex_ios_hold(Relation index);
extern void dex_ios_unhold(int slot);
extern void dex_ios_vacuum_begin(void);
extern void dex_ios_vacuum_end(void);
extern uint64 dex_ios_vacuum_epoch(void);
extern int	dex_ios_hold_unvacuumed(Relation index, uint64 epoch);

/* ---- dexbottomup.c ---------------------------------------------------- */

extern uint64 dex_bottomup_pass(Relation index, Relation heapRel, DexTree *tree,
								const DexKey *key, const DexLeafStamp *full);
extern uint64 dex_bottomup_pass_bytes(Relation index, Relation heapRel, DexTree *tree,
									  const uint8 *key, size_t keylen,
									  const DexLeafStamp *full);

/* ---- dexkill.c -------------------------------------------------------- */

extern bool dex_kill_gate(Relation index, int n);
extern bool dex_kill_frame_hold(Relation index, const DexLeafStamp *stamp, TransactionId horizon,
								uint64 *hold);
extern void dex_kill_remember(IndexScanDesc scan);
extern void dex_kill_flush(IndexScanDesc scan, bool present_only);
extern bool dex_kill_worth_it(DexScanOpaque so, int n);
extern bool dex_kill_standbys_attached(void);
extern bool dex_kill_may_defer(uint64 leaf, uint64 epoch);
extern void dex_kill_defer_logged(Relation index, uint64 leaf, bool bytes, const DexKey *keys,
								  const DexBytes *entries, int n, TransactionId horizon, uint64 epoch,
								  bool bottom_up);

/* ---- dexkilldefer.c --------------------------------------------------- */

typedef struct DexDeferredKill DexDeferredKill;
extern Size dex_killdefer_shmem_size(void);
extern void dex_killdefer_shmem_init(void *mem, bool found);
extern void dex_kill_defer(Relation index, uint64 leaf, bool bytes, const DexKey *keys,
						   const DexBytes *entries, int n, uint64 record, uint64 epoch, bool bottom_up);
extern bool dex_kill_deferred_queued(Relation index, uint64 leaf, bool bytes, const DexKey *keys,
									 const DexBytes *entries, int n);
extern bool dex_kill_deferred_any(Relation index);
extern DexDeferredKill *dex_kill_deferred_take(Relation index, uint64 hwm, uint64 *epoch);
extern void dex_kill_deferred_apply(Relation index, DexTree *tree, DexDeferredKill *k, bool apply);

/* ---- access method entry points ------------------------------------- */

extern IndexBuildResult *dexbuild(Relation heap, Relation index,
								  struct IndexInfo *indexInfo);
extern void dexbuildempty(Relation index);
extern char *dexbuildphasename(int64 phasenum);
extern bool dexinsert(Relation index, Datum *values, bool *isnull,
					  ItemPointer ht_ctid, Relation heapRel,
					  IndexUniqueCheck checkUnique,
					  bool indexUnchanged,
					  struct IndexInfo *indexInfo);
extern IndexBulkDeleteResult *dexbulkdelete(IndexVacuumInfo *info,
											IndexBulkDeleteResult *stats,
											IndexBulkDeleteCallback callback,
											void *callback_state);
extern IndexBulkDeleteResult *dexvacuumcleanup(IndexVacuumInfo *info,
											   IndexBulkDeleteResult *stats);
extern bool dexcanreturn(Relation index, int attno);
extern void dexcostestimate(PlannerInfo *root, IndexPath *path,
							double loop_count, Cost *indexStartupCost,
							Cost *indexTotalCost, Selectivity *indexSelectivity,
							double *indexCorrelation, double *indexPages);
extern bool dexvalidate(Oid opclassoid);
extern IndexScanDesc dexbeginscan(Relation r, int nkeys, int norderbys);
extern void dexrescan(IndexScanDesc scan, ScanKey scankey, int nscankeys,
					  ScanKey orderbys, int norderbys);
extern bool dexgettuple(IndexScanDesc scan, ScanDirection dir);
extern int64 dexgetbitmap(IndexScanDesc scan, TIDBitmap *tbm);
extern void dexendscan(IndexScanDesc scan);

#endif							/* DEX_H */
