/*
 * dex_capi.h — the C interface between the PostgreSQL glue (extension/, C)
 * and the C++ core (src/). Nothing here includes PostgreSQL headers, and no
 * C++ exception ever leaves these functions: every call returns 0 on success
 * or a DEX_ERR_* code with *err filled in (message, and a hint when there is
 * one). The caller releases its own resources, then ereport()s.
 *
 * Not thread-safe per handle: one PostgreSQL backend is single-threaded.
 */
#ifndef DEX_CAPI_H
#define DEX_CAPI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Same numbers as dex::ErrorCode (src/common/error.h). */
#define DEX_OK 0
#define DEX_ERR_UNREACHABLE 1
#define DEX_ERR_TIMEOUT 2
#define DEX_ERR_LOST_MEMORY 3
#define DEX_ERR_PROTOCOL 4
#define DEX_ERR_OUT_OF_SPACE 5
#define DEX_ERR_INTERRUPTED 6
#define DEX_ERR_AUTH 7
#define DEX_ERR_CORRUPT 8
#define DEX_ERR_INVALID 9
#define DEX_ERR_NOT_FOUND 10
#define DEX_ERR_REMOTE 11
/*
 * Not an error: the operation changed nothing and must be retried after the
 * log (WAL) is durable up to err->need_lsn (src/README.md "Crash survival").
 * Returned by inserts, deletes and compaction.
 */
#define DEX_ERR_NEED_WAL_FLUSH 12
/*
 * Not an error: dex_tree_insert_nosplit found the entry's leaf full (it would
 * split) and changed nothing (src/README.md "Dead-entry hints", bottom-up
 * deletion).
 */
#define DEX_LEAF_FULL 13

typedef struct DexError
{
	int			code;
	char		message[512];
	char		hint[256];
	uint64_t	need_lsn;		/* DEX_ERR_NEED_WAL_FLUSH: flush up to here */
} DexError;

/* Key classes and layout: src/tree/key_encoding.h, the one definition (dex::KeyClass builds on it too). */
#include "../tree/key_encoding.h"
#define DEX_KEY_NEG_INF DEX_KEYCLASS_NEG_INF
#define DEX_KEY_VALUE DEX_KEYCLASS_VALUE
#define DEX_KEY_NULL DEX_KEYCLASS_NULL
#define DEX_KEY_POS_INF DEX_KEYCLASS_POS_INF

/* The key of src/tree/key_encoding.h (value = DEX_KEY_FROM_INT64(v)), byte-for-byte dex::EntryKey. */
typedef struct DexKey
{
	uint64_t	value;			/* order-preserving image: int64 v -> v ^ (1<<63) */
	uint32_t	block;			/* heap TID */
	uint16_t	offnum;
	uint8_t		cls;			/* DEX_KEY_* */
	uint8_t		pad;			/* must be 0 */
} DexKey;

#define DEX_NS_TAG_LEN 64

typedef struct DexNsInfo
{
	uint64_t	ns;
	uint64_t	root;
	uint64_t	bytes_allocated;
	uint8_t		tag[DEX_NS_TAG_LEN];
} DexNsInfo;

typedef struct DexNodeStats
{
	uint64_t	incarnation;
	uint64_t	pool_bytes;
	uint64_t	used_bytes;
	uint64_t	connections;
	uint64_t	requests;
	uint64_t	offloads;
	uint64_t	namespaces;
} DexNodeStats;

/*
 * Instance-wide counters (a snapshot of dex::Stats): one uint64_t per entry
 * of DEX_STATS_COUNTERS(X), in that order (src/common/stats_list.h, the one
 * list of counters; included relative to this header so that the extension
 * needs no extra include path).
 */
#include "../common/stats_list.h"
typedef struct DexStatsSnapshot
{
#define DEX_STATS_SNAPSHOT_FIELD(name, description) uint64_t name;
	DEX_STATS_COUNTERS(DEX_STATS_SNAPSHOT_FIELD)
#undef DEX_STATS_SNAPSHOT_FIELD
} DexStatsSnapshot;

typedef struct DexTreeInfo
{
	uint64_t	entries;		/* leaf entries */
	uint64_t	leaves;
	uint64_t	inner_nodes;
	uint32_t	height;			/* levels, 1 = root is a leaf */
	uint64_t	root;			/* GAddr */
} DexTreeInfo;

/* ---- process-wide setup -------------------------------------------- */

/*
 * (Re)configure the memory nodes. `memnodes` is the dex.memnodes GUC:
 * comma-separated "tcp://host:port". Existing connections to nodes whose
 * address is unchanged are kept. Does not connect.
 */
int			dex_configure(const char *memnodes, const char *token,
						  int connect_timeout_ms, int op_timeout_ms, DexError *err);
int			dex_memnode_count(void);
const char *dex_memnode_address(int node);

/* Interrupt hook: returns nonzero when a network wait must be abandoned. */
void		dex_set_interrupt_check(int (*fn) (void));

/*
 * Testing only (dex.crash_at): this process kills itself with SIGKILL when
 * it reaches the named test point of the tree (src/tree/btree.h test_point,
 * e.g. "split:published"), after writing one line naming it to stderr.
 * NULL or "" disarms.
 */
void		dex_set_crash_point(const char *point);

/* Counters: place them in shared memory (size bytes at `mem`), or NULL. */
size_t		dex_stats_shmem_size(void);
void		dex_stats_attach(void *mem, int initialize);
void		dex_stats_read(DexStatsSnapshot *out);
void		dex_stats_reset(void);
/* n dead-entry hints queued until every standby replayed their horizon (the extension's queue). */
void		dex_stats_count_deferred_kills(int n);
/* A hot standby's scan of a write-back index, which waited (waited != 0) for the primary's write-back or not. */
void		dex_stats_count_standby_wb_scan(int waited);
/*
 * Count this process's remote operations privately (on != 0) or in the
 * shared counters again: the dex worker's registry beats are not index work
 * and must not show in dex_stats().
 */
void		dex_stats_private(int on);

/* ---- node cache (shared by every process of this compute server) ------ */

/*
 * Bytes of shared memory for a cache of `cache_bytes` (frames + tables +
 * this API's per-memory-node incarnation table). 0 if cache_bytes is 0.
 */
size_t		dex_cache_shmem_size(uint64_t cache_bytes);
/*
 * Build (initialize != 0: once, in the postmaster's shmem startup) or find
 * the cache in `mem` (dex_cache_shmem_size(cache_bytes) bytes, same memory in
 * every process). This process's cache handle is created lazily, per pid, so a
 * forked child gets its own. From then on every tree opened with
 * dex_tree_open reads through the cache. mem == NULL: no cache.
 */
int			dex_cache_attach(void *mem, uint64_t cache_bytes, int initialize, DexError *err);
/* Admission policy of this process (GUCs dex.leaf_admission / dex.cache_leaves). */
void		dex_cache_set_policy(double leaf_admission, int cache_leaves);
/* Backend exit: give this process's free frames back. Trees must be closed. */
void		dex_cache_detach(void);
/* 1 if this process reads through a cache. */
int			dex_cache_enabled(void);

/* Frames per (memory node, tree id, level); tree_id = low 32 bits of the ns. */
typedef struct DexCacheCensusRow
{
	int			node;
	uint32_t	tree_id;
	int			level;
	uint64_t	frames;			/* mapped frames (hot + cooling) */
	uint64_t	cooling;
	uint64_t	dirty;
} DexCacheCensusRow;

/* *rows is malloc()ed (free with dex_free()); *n = 0 without a cache. */
int			dex_cache_census(DexCacheCensusRow **rows, int *n, DexError *err);

/* Drop all connections (backend exit). */
void		dex_disconnect_all(void);

/* ---- memory nodes and namespaces (one namespace per index) ---------- */

int			dex_memnode_stats(int node, DexNodeStats *out, DexError *err);
/* Connects if needed and returns the node's incarnation. */
int			dex_memnode_incarnation(int node, uint64_t *incarnation, DexError *err);
int			dex_ns_create(int node, const uint8_t tag[DEX_NS_TAG_LEN],
						  uint64_t *ns, uint64_t *incarnation, DexError *err);
/*
 * Both also drop every cached frame of tree id (uint32) ns on that node: a
 * namespace id can come back after a memory node restart, and a dropped
 * namespace's memory is reused by the next one.
 */
int			dex_ns_drop(int node, uint64_t ns, uint64_t *bytes_freed, DexError *err);
/* *out is malloc()ed; free with dex_free(). */
int			dex_ns_list(int node, DexNsInfo **out, int *n, DexError *err);
void		dex_free(void *p);

/* ---- trees ------------------------------------------------------------ */

typedef struct DexTree DexTree;

/*
 * Open the tree in namespace `ns` on memory node `node`. `incarnation` is the
 * one recorded when the tree was built; if the node's differs, fails with
 * DEX_ERR_LOST_MEMORY naming `index_name` (hint: REINDEX INDEX <name>).
 */
int			dex_tree_open(int node, uint64_t ns, uint64_t incarnation,
						  const char *index_name, DexTree **out, DexError *err);
/*
 * Open a tree spread over several memory nodes (src/README.md "Placement over
 * several memory nodes"): ns[i] / incarnation[i] are its namespace on memory
 * node i and that node's incarnation at build time (ns 0: node not used);
 * `home` holds the root. Only the home node is checked here; another node's
 * incarnation is checked when an operation first touches it, so a query that
 * needs only reachable nodes works while another node is lost.
 */
#define DEX_MAX_MEMNODES 32
int			dex_tree_open_parts(int home, int nnodes, const uint64_t *ns,
								const uint64_t *incarnation, int placement_level,
								const char *index_name, DexTree **out, DexError *err);
/*
 * Offloading (src/README.md "Offloading"; GUC dex.offload): on a cache miss at
 * or below the placement level, lookups, forward scans and single-entry
 * inserts / deletes may let the memory node finish the operation:
 * DEX_OFFLOAD_AUTO (default) decides by the DEX cost model, ON always, OFF
 * never. Per process.
 */
#define DEX_OFFLOAD_AUTO 0
#define DEX_OFFLOAD_ON 1
#define DEX_OFFLOAD_OFF 2
void		dex_set_offload_mode(int mode);
/* Tree id stamped in the nodes of the tree homed in namespace ns on `home`. */
uint32_t	dex_tree_id(int home, uint64_t ns);
/*
 * Verify the tree (as dex_tree_check, including placement: every subtree
 * rooted at the placement level on one memory node) and count its nodes and
 * subtrees per memory node (arrays of `max` entries).
 */
int			dex_tree_placement(DexTree *tree, int *placement_level, uint64_t *nodes_on,
							   uint64_t *subtrees_on, int max, DexError *err);
void		dex_tree_close(DexTree *tree);
/* Re-validate the incarnation (cheap: no round trip while connected). */
int			dex_tree_validate(DexTree *tree, DexError *err);

/* Create an empty tree (one empty leaf as root). */
int			dex_tree_init_empty(DexTree *tree, DexError *err);

/* Bottom-up bulk load: keys strictly ascending (compare order above). */
typedef struct DexBulk DexBulk;
int			dex_bulk_begin(DexTree *tree, double fill_factor, DexBulk **out, DexError *err);
int			dex_bulk_add(DexBulk *bulk, const DexKey *key, DexError *err);
int			dex_bulk_finish(DexBulk *bulk, DexError *err);	/* frees bulk */
void		dex_bulk_abort(DexBulk *bulk);	/* frees bulk */

/*
 * Write-through: on return the entry is in remote memory. `lsn` is the end of
 * the heap WAL record of the entry's row (0: the heap is not WAL-logged) and
 * WAL is durable up to `durable`; if lsn > durable the insert first records
 * itself in the tree's journal (dex_tree_set_journal), or answers
 * DEX_ERR_NEED_WAL_FLUSH when it cannot.
 */
int			dex_tree_insert(DexTree *tree, const DexKey *key, uint64_t lsn,
							uint64_t durable, DexError *err);
/*
 * Insert n entries (keys sorted ascending, distinct) as dex_tree_insert would
 * each, lsns[i] being entry i's row LSN, WAL durable up to `durable`. On
 * DEX_OK all n are in remote memory. On DEX_ERR_NEED_WAL_FLUSH, *done entries
 * (a prefix of keys[]) are in the tree and nothing of the rest was changed:
 * the caller flushes WAL up to err->need_lsn and calls again with the rest.
 * On other errors *done is a lower bound. Up to 256 entries per memory node
 * travel in one round trip (src/README.md "Offloading", batched inserts);
 * where batching is not possible (no node cache, dex.offload = off,
 * write-back indexes, memory nodes that refuse offloaded writes) the entries
 * are inserted one at a time, with the same prefix rule.
 */
int			dex_tree_insert_batch(DexTree *tree, const DexKey *keys, const uint64_t *lsns, int n,
								  uint64_t durable, int *done, DexError *err);
/*
 * The end of a multi-row statement (after its last dex_tree_insert_batch*):
 * read back into the node cache the leaves its batches changed that were
 * cached before (a batch drops them: src/README.md "Batched offloaded
 * inserts"). Best effort: an error only means some stay uncached.
 */
int			dex_tree_rewarm(DexTree *tree, DexError *err);
/*
 * Bottom-up deletion (src/README.md "Dead-entry hints"). dex_tree_insert_nosplit
 * is dex_tree_insert, except that where the entry's leaf is full and would
 * split it answers DEX_LEAF_FULL instead, with *full = that leaf and the body
 * version it was locked at, having changed nothing (journal included) and
 * released every lock. (Write-back trees, and an insert whose offloaded
 * attempt already wrote its journal record, split as usual.)
 * dex_tree_read_leaf copies the leaf's entries (at most DEX_LEAF_CAPACITY)
 * into out[] if it is still at full->version; else *n = 0.
 */
typedef struct DexLeafStamp
{
	uint64_t	leaf;
	uint64_t	version;
	/* steady-clock ns at which `version` was current (0: unknown); a kill
	 * within a second of it locks without reading the leaf first */
	uint64_t	seen_at_ns;
	/* write-back trees: the cache frame the image was copied from and that
	 * frame's version word then (0: not from a frame); a kill goes in place
	 * only while the frame is still at it */
	uint32_t	frame;
	uint64_t	frame_version;
	/* write-back trees: the leaf had room for fewer than three more entries
	 * like its last one (a kill of fewer than dex.kill_min_entries is worth
	 * it there: it saves the split an insert would make) */
	int			nearly_full;
} DexLeafStamp;
int			dex_tree_insert_nosplit(DexTree *tree, const DexKey *key, uint64_t lsn,
									uint64_t durable, DexLeafStamp *full, DexError *err);
int			dex_tree_read_leaf(DexTree *tree, const DexLeafStamp *stamp, DexKey *out, int *n,
							   DexError *err);
/* Delete exact entries; `keys` sorted ascending. *deleted = how many existed. */
/*
 * Write-back crash redo of a leaf image logged by dex_cache_log_dirty_images
 * (len bytes, kNodeSize): its key range is made to hold exactly its entries,
 * written through (either layout). *changed: entries removed or inserted.
 */
int			dex_tree_replay_leaf_image(DexTree *tree, const uint8_t *image, uint32_t len, uint64_t *changed,
									   DexError *err);
int			dex_tree_delete(DexTree *tree, const DexKey *keys, int n,
							uint64_t *deleted, DexError *err);

/*
 * Range scan over entries k with lo <= k <= hi (inclusive EntryKey bounds;
 * express strict bounds with extreme TIDs). Entries come a leaf at a time in
 * ascending order, or descending if `backward`. dex_scan_next sets *n = 0 at
 * the end; *entries stays valid until the next call on the scan.
 */
typedef struct DexScan DexScan;
int			dex_scan_begin(DexTree *tree, const DexKey *lo, const DexKey *hi,
						   int backward, DexScan **out, DexError *err);
int			dex_scan_next(DexScan *scan, const DexKey **entries, int *n, DexError *err);
void		dex_scan_end(DexScan *scan);

/*
 * Dead-entry hints (src/README.md "Dead-entry hints"). dex_scan_stamp: the
 * leaf the last dex_scan_next batch came from and the body version of the
 * image read (both 0: unknown). dex_tree_kill removes keys[0..n) (sorted
 * ascending, all from that batch) only if the leaf is still at that version;
 * *removed = how many went (0: it changed since, or a write-back tree).
 * flags: DEX_KILL_BOTTOM_UP, a bottom-up deletion pass's removal (counted
 * in bottomup_removed instead of kills); DEX_KILL_PRESENT, a write-back
 * frame's entries (K8) or a write-through leaf's (a deferred kill, K9) go if
 * still there, whether or not the frame or leaf changed since (the caller
 * knows no VACUUM recycled their TIDs meanwhile).
 * hold_lsn (a write-back tree's frame kill, K7): the WAL position of the
 * kill's conflict-horizon record; the frame is written back only once WAL
 * is durable and every live standby has replayed that far. 0: the caller
 * passed the kills' gate instead.
 */
void		dex_scan_stamp(const DexScan *scan, DexLeafStamp *out);
/* 1: a kill of n entries at `stamp` would be skipped (a write-back tree's
 * frame changed since, or a write-through tree's cached frame of the leaf is
 * past the stamp's version; counted as kills_skipped); 0: it may remove
 * something. A local check, never an error. */
int			dex_tree_kill_futile(DexTree *tree, const DexLeafStamp *stamp, int n);
#define DEX_KILL_BOTTOM_UP	1
#define DEX_KILL_PRESENT	2
int			dex_tree_kill(DexTree *tree, const DexLeafStamp *stamp, const DexKey *keys, int n,
						  int flags, uint64_t hold_lsn, uint64_t *removed, DexError *err);

/*
 * Merge away leaves left empty by deletes (merges skipped under contention are
 * retried here). *freed = nodes returned to the memory node. VACUUM calls it.
 */
int			dex_tree_compact(DexTree *tree, uint64_t *freed, DexError *err);

/* ---- byte-string entries (src/README.md "Slotted nodes", "Tree over a layout") ---- */

/*
 * A tree's layout, fixed when it is built and recorded by the caller (the
 * index's metapage): DEX_LAYOUT_FIXED (16-byte DexKeys, the functions above)
 * or DEX_LAYOUT_BYTES (entries are byte strings of 1..DEX_SLOTTED_MAX_ENTRY_BYTES
 * bytes, compared with memcmp, a proper prefix first: the functions below).
 * dex_tree_set_layout is called once, after open and before any operation.
 * A function of the other layout fails with DEX_ERR_INVALID.
 */
#include "../tree/node_capacity.h"
#define DEX_LAYOUT_FIXED 0
#define DEX_LAYOUT_BYTES 1
int			dex_tree_set_layout(DexTree *tree, int layout, DexError *err);

/* One entry (or bound): `len` bytes at `data`. */
typedef struct DexBytes
{
	const uint8_t *data;
	uint32_t	len;
} DexBytes;

/* As dex_bulk_add / dex_tree_insert / ... with byte-string entries. */
int			dex_bulk_add_bytes(DexBulk *bulk, const uint8_t *entry, uint32_t len, DexError *err);
int			dex_tree_insert_bytes(DexTree *tree, const uint8_t *entry, uint32_t len, uint64_t lsn,
								  uint64_t durable, DexError *err);
int			dex_tree_insert_batch_bytes(DexTree *tree, const DexBytes *entries, const uint64_t *lsns, int n,
										uint64_t durable, int *done, DexError *err);
int			dex_tree_insert_nosplit_bytes(DexTree *tree, const uint8_t *entry, uint32_t len, uint64_t lsn,
										  uint64_t durable, DexLeafStamp *full, DexError *err);
/* *out points into the handle: valid until the next call on this tree. */
int			dex_tree_read_leaf_bytes(DexTree *tree, const DexLeafStamp *stamp, const DexBytes **out, int *n,
									 DexError *err);
int			dex_tree_delete_bytes(DexTree *tree, const DexBytes *entries, int n, uint64_t *deleted,
								  DexError *err);
int			dex_tree_kill_bytes(DexTree *tree, const DexLeafStamp *stamp, const DexBytes *entries, int n,
								int flags, uint64_t hold_lsn, uint64_t *removed, DexError *err);
/*
 * Entries e with lo <= e <= hi (memcmp order). lo NULL: from the first entry;
 * hi NULL: to the last. A bound need not be an entry (a key prefix: "every
 * entry beginning with P" is [P, P || 0xFF x 8], 0xFF starting no column and
 * 8 bytes being more than a heap TID). *entries stays valid until the next
 * call on the scan.
 */
int			dex_scan_begin_bytes(DexTree *tree, const uint8_t *lo, uint32_t lo_len, const uint8_t *hi,
								 uint32_t hi_len, int backward, DexScan **out, DexError *err);
int			dex_scan_next_bytes(DexScan *scan, const DexBytes **entries, int *n, DexError *err);

/* ---- insert journal (src/README.md "Crash survival: the insert journal") --- */

/*
 * How far the log is durable (PostgreSQL: GetFlushRecPtr), for write-backs
 * of dirty cached leaves. Must not fail or call into dex. Per process.
 */
void		dex_set_durable_lsn_fn(uint64_t (*fn) (void));
/*
 * Create the journal of a freshly built tree (root on its home node), owned
 * by `life`; its record form follows the tree's layout (set it first).
 */
int			dex_journal_create(DexTree *tree, uint64_t life, uint64_t *root, DexError *err);
/*
 * Journal of this tree (root from the metapage; 0: none) and this process's
 * lane in it (PostgreSQL: the PGPROC number; >= 1024: no lane, inserts then
 * wait for durable WAL instead).
 */
int			dex_tree_set_journal(DexTree *tree, uint64_t root, uint32_t lane, DexError *err);
/* The compute-server life that last recovered the journal. */
int			dex_journal_life(DexTree *tree, uint64_t *life, DexError *err);
/*
 * Every entry the journal lists (sorted, distinct; *keys malloc()ed, free
 * with dex_free()) and the journal's life.
 */
int			dex_journal_read(DexTree *tree, DexKey **keys, int *n, uint64_t *life, DexError *err);
/*
 * Recovery done: delete the stray entries (sorted ascending), clear every
 * lane and move the journal from life `old_life` to `new_life`. Fails with
 * DEX_ERR_INVALID if the journal's life is no longer old_life.
 */
int			dex_journal_finish(DexTree *tree, uint64_t old_life, uint64_t new_life,
							   const DexKey *strays, int n, uint64_t *removed, DexError *err);
/*
 * The same for a byte-string tree (DEX_LAYOUT_BYTES), whose journal
 * dex_journal_create makes in the byte form: every entry the journal lists
 * (memcmp order, distinct; *entries and the bytes they point to are one
 * malloc()ed block, free with dex_free()), and the recovery's end (strays in
 * any order). A fixed-form journal (a byte-string index built before byte
 * entries were journaled; its inserts wait for durable WAL instead) lists
 * nothing. dex_journal_read / dex_journal_finish refuse a byte-form journal.
 */
int			dex_journal_read_bytes(DexTree *tree, DexBytes **entries, int *n, uint64_t *life,
								   DexError *err);
int			dex_journal_finish_bytes(DexTree *tree, uint64_t old_life, uint64_t new_life,
									 const DexBytes *strays, int n, uint64_t *removed, DexError *err);

/* ---- hot standbys (src/README.md "Hot standbys") ------------------------- */

/*
 * Called by every tree write with the remote nodes it is about to change or
 * create (while holding their remote locks): PostgreSQL logs them in WAL so
 * that standbys drop their cached copies. Must not fail or call into dex.
 * Per process; NULL: nothing is logged.
 */
void		dex_set_change_log_fn(void (*fn) (const uint64_t *nodes, size_t n));
/*
 * WAL replay on a standby: drop the cached copies of these nodes (GAddrs) from
 * this compute server's cache; admissions in progress of them are not
 * installed. Never fails (no remote access).
 */
void		dex_cache_forget_nodes(const uint64_t *nodes, size_t n);

/*
 * The cluster registry (src/cluster/registry.h): the block on memory node 0
 * through which a primary and its standbys coordinate. All calls are single
 * remote operations or a few; none waits.
 */
#define DEX_MAX_STANDBYS 62
#define DEX_SLOT_EXPIRED (UINT64_C(1) << 63)
#define DEX_SLOT_DETACHED (UINT64_C(1) << 62)	/* lagging: renewals fail, live until expired */
#define DEX_MAX_ADOPTED 32
#define DEX_WRITER_MOVED UINT64_MAX	/* writer_life: trees adopted by another cluster (pg_upgrade) */
typedef struct DexStandbySlot
{
	uint64_t	owner;			/* standby life id, 0 = free */
	uint64_t	beat;			/* DEX_SLOT_EXPIRED / _DETACHED: set by the primary */
	uint64_t	replay_lsn;
	uint64_t	tli;
} DexStandbySlot;
typedef struct DexRegistryState
{
	uint64_t	writer_life;
	uint64_t	writer_beat;
	uint64_t	writer_hwm;
	uint64_t	removal_lsn;
	uint64_t	writer_tli;
	uint64_t	flush_request_lsn;	/* hot standbys' scans wait for write-backs up to here */
	DexStandbySlot slots[DEX_MAX_STANDBYS];
	uint64_t	moved_to;		/* writer_life == DEX_WRITER_MOVED: the adopting cluster */
	uint64_t	adopted[DEX_MAX_ADOPTED];	/* 0-terminated */
} DexRegistryState;
/* The registry in namespace ns on memory node `node` (create: make it if missing; *addr 0: none). */
int			dex_registry_open(int node, uint64_t ns, int create, uint64_t floor_lsn, uint64_t *addr,
							  DexError *err);
int			dex_registry_read(uint64_t addr, DexRegistryState *out, DexError *err);
/* The writer: raise removal_lsn to at least lsn, then read (one batch, in that order). */
int			dex_registry_raise_removal_read(uint64_t addr, uint64_t lsn, DexRegistryState *out, DexError *err);
int			dex_registry_cas_writer(uint64_t addr, uint64_t expected, uint64_t life, uint64_t *seen, DexError *err);
int			dex_registry_writer_beat(uint64_t addr, uint64_t beat, uint64_t hwm, uint32_t tli, DexError *err);
/*
 * The writer's later beats in one round trip (Registry::beat_and_read): raise
 * writer_hwm to hwm (the previous beat's), CAS writer_beat beat_from ->
 * beat_from + 1 (*beat_done), raise removal_lsn to lsn, then read.
 */
int			dex_registry_beat_read(uint64_t addr, uint64_t beat_from, uint64_t hwm, uint64_t lsn,
								   DexRegistryState *out, int *beat_done, DexError *err);
int			dex_registry_set_removal_lsn(uint64_t addr, uint64_t lsn, DexError *err);
/*
 * Dead-entry hints: may writer `life` remove n entries (dead by its WAL up to
 * lsn) without waiting? Raises removal_lsn to lsn, then *allowed = 1 only if
 * life is the writer and no standby slot is held (live or expired); a refusal
 * counts n in kills_refused.
 */
int			dex_registry_kill_allowed(uint64_t addr, uint64_t life, uint64_t lsn, int n, int *allowed,
									  DexError *err);
int			dex_registry_raise_hwm(uint64_t addr, uint64_t lsn, DexError *err);
/* Standby: ask the writer to write back every entry change logged before lsn (a hint). */
int			dex_registry_request_flush(uint64_t addr, uint64_t lsn, DexError *err);
int			dex_registry_expire_slot(uint64_t addr, int slot, uint64_t beat, int *done, DexError *err);
int			dex_registry_detach_slot(uint64_t addr, int slot, uint64_t beat, int *done, DexError *err);
int			dex_registry_claim_slot(uint64_t addr, uint64_t life, uint64_t replay_lsn, uint32_t tli,
									int *slot, uint64_t *beat, DexError *err);
/* pg_upgrade: fence an old cluster's registry (*done: moved to sysid), record an adopted sysid. */
int			dex_registry_fence_moved(uint64_t addr, uint64_t expected_life, uint64_t sysid, int *done,
									 DexError *err);
int			dex_registry_add_adopted(uint64_t addr, uint64_t sysid, int *done, DexError *err);
int			dex_registry_standby_beat(uint64_t addr, int slot, uint64_t life, uint64_t *beat,
									  uint64_t replay_lsn, int *ok, DexError *err);

/* ---- write-back mode (src/README.md "Write-back mode") ------------------ */

/*
 * Allocate the tree's 8-byte dirty-owner word (zeroed) in namespace ns; its
 * GAddr goes into the metapage.
 */
int			dex_ns_alloc_word(int node, uint64_t ns, uint64_t *addr, DexError *err);
/*
 * Called on every open of an index: owner_word is the metapage's (0: none,
 * write-back impossible). If the word names another cache generation (an
 * instance that crashed with dirty nodes), fails with DEX_ERR_LOST_MEMORY.
 * on != 0 (and a cache) turns write-back mode on for this handle; off writes
 * back dirty frames of the tree left by others first.
 */
int			dex_tree_set_write_back(DexTree *tree, int on, uint64_t owner_word, DexError *err);
/* Whether this handle is in write-back mode now (the last dex_tree_set_write_back turned it on). */
int			dex_tree_is_write_back(const DexTree *tree);
/*
 * Write back every dirty frame whose entries' heap WAL is durable (the caller
 * flushes WAL up to dex_cache_dirty_lsn() first); clears the owner words of
 * flushed trees.
 */
int			dex_cache_flush(uint64_t *written, DexError *err);
/* Highest heap-WAL position carried by a dirty frame (0: none, or no cache). */
uint64_t	dex_cache_dirty_lsn(void);
/* Random id of this cache region (0 without a cache). */
uint64_t	dex_cache_generation(void);

/*
 * Write-back redo (src/README.md "Write-back mode", redo after a crash).
 * The compute server's log position (PostgreSQL: the WAL insert position),
 * read when a clean frame becomes dirty. Per process; must not fail.
 */
void		dex_set_log_position_fn(uint64_t (*fn) (void));
/*
 * Told of every entry change of a write-back tree right after it was made
 * (insert != 0: added unless present; 0: removed if present): entries[i] has
 * lens[i] bytes (layout DEX_LAYOUT_FIXED: a DexKey image; DEX_LAYOUT_BYTES:
 * the entry). (node, ns) is the tree's home namespace. through != 0: the
 * change is in remote memory already and left no frame dirty (a hot standby
 * need not wait for a write-back of it; 0 whenever unsure). Runs inside dex's
 * C++ frames: must not longjmp (PostgreSQL: a critical section). Per
 * process; NULL: nothing.
 */
typedef void (*DexEntryLogFn) (uint32_t node, uint64_t ns, int layout, int insert, int through,
							   const uint8_t *const *entries, const uint32_t *lens, size_t n);
void		dex_set_entry_log_fn(DexEntryLogFn fn);
/*
 * Lowest log position at which a frame still dirty became dirty: every entry
 * change logged before it is in remote memory. UINT64_MAX: nothing dirty.
 */
uint64_t	dex_cache_dirty_since_min(void);
/*
 * Lowest log position crash redo needs for a frame still dirty: where it was
 * last logged whole (dex_cache_log_dirty_images), else where it became
 * dirty. Every change remote memory lacks is logged at or after it, or is in
 * an image logged at or after it. UINT64_MAX: nothing dirty; 0: unknown.
 */
uint64_t	dex_cache_crash_since_min(void);
/*
 * Log every dirty leaf frame of every write-back tree whole, through `fn`
 * (node, ns: the tree's home namespace; image: kNodeSize bytes), under the
 * frame's lock; fn returns a log position at or before its record (0: not
 * logged). Same rules as DexEntryLogFn (no longjmp). *logged: frames logged.
 */
typedef uint64_t (*DexImageLogFn) (uint32_t node, uint64_t ns, const uint8_t *image, uint32_t len);
int			dex_cache_log_dirty_images(DexImageLogFn fn, uint64_t *logged, DexError *err);
/*
 * Raise the drain position (src/README.md "Write-back mode", W14): a dirty
 * leaf that became dirty at a log position before `lsn` takes no more
 * in-place inserts until it is written back (monotonic; a lower lsn is a
 * no-op).
 */
void		dex_cache_drain_before(uint64_t lsn);
/*
 * Pause (1) or resume (0) write-back mode for every tree of this compute
 * server, for one reason (src/README.md W18): while paused for any reason no
 * frame takes an in-place change, every write goes through. Pausing returns
 * once every change that began before it has finished (its dirty frame is
 * then seen by a flush). No cache: no-op.
 */
#define DEX_WB_PAUSE_NO_FENCE	1	/* no checkpoint fence is held (W18) */
#define DEX_WB_PAUSE_STANDBY	2	/* a hot standby is attached (dex.write_back_with_standbys = off) */
void		dex_cache_pause_write_back(int why, int paused);
/* The reasons (DEX_WB_PAUSE_*) write-back mode is paused for now; 0: not paused. */
int			dex_cache_write_back_paused(void);
/* The tree's dirty-owner word as it is in remote memory now. */
int			dex_tree_owner_word_read(DexTree *tree, uint64_t owner_word, uint64_t *value, DexError *err);
/*
 * After replaying the changes the dead generation `expected` lost: its word
 * back to 0 (CAS). Fails (DEX_ERR_LOST_MEMORY) if it held something else.
 */
int			dex_tree_owner_word_release(DexTree *tree, uint64_t owner_word, uint64_t expected, DexError *err);

/* Verify the whole tree (order, fences, levels, siblings, reachability). */
int			dex_tree_check(DexTree *tree, DexTreeInfo *info, DexError *err);
/* Count entries/nodes by walking the levels (no invariant checks). */
int			dex_tree_info(DexTree *tree, DexTreeInfo *info, DexError *err);

#ifdef __cplusplus
}
#endif

#endif							/* DEX_CAPI_H */
