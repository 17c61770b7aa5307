/*
 * dexsession.c — this backend's dex session: the configuration applied to
 * the core (dex.memnodes, dex.token_file, the timeouts), the interrupt hook,
 * and the per-backend registry of open remote trees (DexTree handles keyed by
 * relfilenode) with its invalidation.
 *
 * The GUCs are defined in dexguc.c on the variables below; their assign hooks
 * only mark the configuration dirty (dex_config_changed), and the next use of
 * the core applies it (dex_try_configure). Open trees are closed
 *   - all of them when the configuration is applied (node numbering may
 *     change) and before the backend exits (which also disconnects);
 *   - those of a namespace when it is dropped (dex_forget_tree): at the end
 *     of the transaction that dropped or rebuilt the index or aborted its
 *     creation (dexxact.c), and by dex_free_orphans() (dexfuncs.c);
 *   - one when dex_get_tree finds that the metapage names another memory
 *     node, namespace or incarnation than the open handle, or the core
 *     reports the tree's memory lost.
 * There is no relcache callback: dex_get_tree reads the metapage of the
 * index's current relfilenode on every call (cached in the relcache entry:
 * a metapage never changes in place), and a rebuild (REINDEX, TRUNCATE) gets
 * a new relfilenode, i.e. a new entry; the old one is closed when its
 * namespace is dropped at commit.
 */
#include "dex.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "access/xlog.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/rel.h"

/* ---------------------------------------------------------------------
 * configuration (GUC variables: dexguc.c defines the GUCs)
 * ---------------------------------------------------------------------
 */
char	   *dex_memnodes_guc = NULL;
char	   *dex_token_file = NULL;
int			dex_connect_timeout_ms = 5000;
int			dex_op_timeout_ms = 30000;

/* set while a transaction callback frees remote memory (dexxact.c) */
bool		dex_interrupts_suppressed = false;

static bool dex_config_dirty = true;

/* A GUC the core's configuration depends on changed (assign hook). */
void
dex_config_changed(void)
{
	dex_config_dirty = true;
}

/*
 * Called by the core while it waits on the network. Must not ereport or
 * longjmp: it only looks at the flags.
 */
static int
dex_interrupt_check(void)
{
	if (dex_interrupts_suppressed)
		return 0;
	return (InterruptPending && (QueryCancelPending || ProcDiePending)) ? 1 : 0;
}

/* _PG_init: the core asks this backend's interrupt flags while it waits. */
void
dex_session_init(void)
{
	dex_set_interrupt_check(dex_interrupt_check);
}

/*
 * Read the token file with plain libc (no ereport), so this can also run in
 * transaction callbacks. Returns malloc'ed string or NULL with err set.
 */
static char *
dex_read_token(DexError *err)
{
	FILE	   *f;
	char	   *buf;
	size_t		n;
	size_t		cap = 4096;

	if (dex_token_file == NULL || dex_token_file[0] == '\0')
	{
		buf = malloc(1);
		if (buf)
			buf[0] = '\0';
		return buf;
	}
	f = fopen(dex_token_file, "r");
	if (f == NULL)
	{
		err->code = DEX_ERR_INVALID;
		snprintf(err->message, sizeof(err->message),
				 "could not open dex.token_file \"%s\": %s",
				 dex_token_file, strerror(errno));
		snprintf(err->hint, sizeof(err->hint),
				 "Check the setting of dex.token_file.");
		return NULL;
	}
	buf = malloc(cap + 1);
	if (buf == NULL)
	{
		fclose(f);
		err->code = DEX_ERR_INVALID;
		snprintf(err->message, sizeof(err->message), "out of memory");
		err->hint[0] = '\0';
		return NULL;
	}
	n = fread(buf, 1, cap, f);
	fclose(f);
	buf[n] = '\0';
	/* strip trailing whitespace / newline */
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' ||
					 buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		buf[--n] = '\0';
	return buf;
}

static void dex_before_shmem_exit(int code, Datum arg);
static void dex_on_shmem_exit(int code, Datum arg);
static bool exit_callback_registered = false;

/* Configure the core if the GUCs changed; never ereports. */
int
dex_try_configure(DexError *err)
{
	char	   *token;
	int			rc;

	if (!dex_config_dirty)
		return DEX_OK;

	token = dex_read_token(err);
	if (token == NULL)
		return err->code;

	if (!exit_callback_registered)
	{
		before_shmem_exit(dex_before_shmem_exit, (Datum) 0);
		/* runs after the before_shmem_exit callbacks closed our trees */
		on_shmem_exit(dex_on_shmem_exit, (Datum) 0);
		exit_callback_registered = true;
	}

	/* node numbering may change: cached tree handles are invalid */
	dex_forget_all_trees();

	rc = dex_configure(dex_memnodes_guc ? dex_memnodes_guc : "",
					   token, dex_connect_timeout_ms, dex_op_timeout_ms, err);
	memset(token, 0, strlen(token));
	free(token);
	if (rc == DEX_OK)
		dex_config_dirty = false;
	return rc;
}

void
dex_ensure_configured(void)
{
	DexError	err;
	int			rc;

	dex_require_preload();
	memset(&err, 0, sizeof(err));
	rc = dex_try_configure(&err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, NULL);
}

static void
dex_before_shmem_exit(int code, Datum arg)
{
	dex_forget_all_trees();
	dex_disconnect_all();
}

static void
dex_on_shmem_exit(int code, Datum arg)
{
	dex_cache_detach();			/* our free frames go back to the shared stack */
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
	bool		wb_checked;		/* owner word found ours or free (dexwbredo.c) */
	uint64		wbs_life;		/* standby: owner word found free or that life's (dexwbstandby.c) */
	bool		wbs_scans_wait;	/* standby, write-back index: each scan range waits (dex_standby_scan_wait) */
	uint64		owner_word;		/* ... with this dirty-owner word */
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
 * The primary's side of write-back mode for a handle being opened: a crash
 * that took dirty frames is replayed (or the index refused), this life's
 * flushed position exists, then the mode is set (which checks the
 * dirty-owner word once per handle).
 */
static void
dex_open_write_back(Relation index, DexTreeCacheEntry *e, DexTreeCacheKey *key, DexMetaPageData *meta, bool wb)
{
	DexError	err;
	int			rc;

	memset(&err, 0, sizeof(err));
	/* a crash took dirty frames: replay their logged changes, or refuse */
	dex_wb_redo_gate(index, e->tree, meta->owner_word, (uint64) e->node, meta->ns, &e->wb_checked);
	/* before anything of this life can be dirty: its flushed position */
	if (wb && meta->owner_word != 0 && dex_cache_generation() != 0 && !RecoveryInProgress())
		dex_wb_announce_life();
	rc = dex_tree_set_write_back(e->tree, wb ? 1 : 0, meta->owner_word, &err);
	while (rc == DEX_ERR_NEED_WAL_FLUSH)
	{
		/* dirty leaves left by write-back mode wait for their WAL */
		dex_wal_flush_for_retry(&err, index);
		rc = dex_tree_set_write_back(e->tree, wb ? 1 : 0, meta->owner_word, &err);
	}
	if (rc != DEX_OK)
	{
		if (rc == DEX_ERR_LOST_MEMORY)
		{
			dex_tree_close(e->tree);
			hash_search(dex_tree_cache, key, HASH_REMOVE, NULL);
		}
		dex_report_error(rc, &err, index);
	}
}

static DexTree *dex_open_tree_ex(Relation index, bool scan);

/*
 * Open (or find in the cache) the remote tree of a dex index. Reads the
 * metapage every time (a shared buffer), so REINDEX/TRUNCATE (new
 * relfilenode, new namespace) are noticed. On a hot standby, a write-back
 * index is opened once the primary wrote back all that this snapshot can
 * need of it (dexwbstandby.c).
 */
DexTree *
dex_open_tree(Relation index)
{
	return dex_open_tree_ex(index, false);
}

/*
 * The same for an index scan, which waits on a hot standby per key range
 * instead (dex_standby_scan_wait, before each core scan): a range needs
 * only the changes it can meet written back (dexwbsplaces.c).
 */
DexTree *
dex_open_tree_for_scan(Relation index)
{
	return dex_open_tree_ex(index, true);
}

/*
 * Hot standby, before a core scan of an index opened by
 * dex_open_tree_for_scan: of the key places `places` (NULL: of any range).
 */
void
dex_standby_scan_wait(Relation index, const DexWbsPlaces *places)
{
	DexTreeCacheKey key;
	DexTreeCacheEntry *e;

	if (!RecoveryInProgress() || dex_tree_cache == NULL)
		return;
	memset(&key, 0, sizeof(key));
	key.spcoid = DEX_REL_SPC(index);
	key.relnumber = DEX_REL_NUMBER(index);
	e = hash_search(dex_tree_cache, &key, HASH_FIND, NULL);
	if (e == NULL || e->tree == NULL)
	{
		/* the handle went meanwhile: wait as an open for any use does */
		(void) dex_open_tree(index);
		return;
	}
	if (!e->wbs_scans_wait)
		return;
	dex_wb_standby_wait(index, e->tree, e->owner_word, (uint32) e->node, e->ns,
						dex_standby_wait_timeout_ms, &e->wbs_life, dex_cluster_request_flush, places);
}

/*
 * A metapage that names no usable remote tree: pg_upgrade's stub, or an
 * unlogged index reset by crash recovery.
 */
static void
dex_open_refuse_treeless(Relation index, const DexMetaPageData *meta)
{
	if (meta->flags & DEX_META_UPGRADE_STUB)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("index \"%s\" has no remote tree", RelationGetRelationName(index)),
				 errdetail("It was created by pg_upgrade's schema restore, and its data files were not transferred."),
				 errhint("REINDEX INDEX %s", quote_identifier(RelationGetRelationName(index)))));

	if ((meta->flags & DEX_META_INIT_FORK) || meta->ns == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("index \"%s\" lost its remote memory",
						RelationGetRelationName(index)),
				 errdetail("The unlogged index was reset by crash recovery."),
				 errhint("REINDEX INDEX %s",
						 quote_identifier(RelationGetRelationName(index)))));
}

/*
 * A new handle of the tree the metapage names (memory node `node`), into
 * cache entry e; on an error the entry is removed before the ERROR.
 */
static void
dex_open_new_handle(Relation index, DexTreeCacheEntry *e, DexTreeCacheKey *key,
					DexMetaPageData *meta, int node)
{
	DexTree    *tree = NULL;
	DexError	err;
	int			rc;

	memset(&err, 0, sizeof(err));
	e->node = node;
	e->ns = meta->ns;
	e->incarnation = meta->incarnation;
	if (meta->nparts > 0)
	{
		uint64		ns[DEX_MAX_MEMNODES];
		uint64		inc[DEX_MAX_MEMNODES];

		for (int i = 0; i < meta->nparts; i++)
		{
			ns[i] = meta->parts[i].ns;
			inc[i] = meta->parts[i].incarnation;
		}
		rc = dex_tree_open_parts(node, meta->nparts, ns, inc, meta->placement_level,
								 RelationGetRelationName(index), &tree, &err);
	}
	else
		rc = dex_tree_open(node, meta->ns, meta->incarnation,
						   RelationGetRelationName(index), &tree, &err);
	if (rc == DEX_OK && (meta->flags & DEX_META_BYTES))
		rc = dex_tree_set_layout(tree, DEX_LAYOUT_BYTES, &err);
	if (rc != DEX_OK)
	{
		if (tree)
			dex_tree_close(tree);
		hash_search(dex_tree_cache, key, HASH_REMOVE, NULL);
		dex_report_error(rc, &err, index);
	}
	if (meta->flags & DEX_META_BYTES)
	{
		/*
		 * The entries were encoded under the column types, collations (and
		 * their versions) and DESC / NULLS FIRST the metapage records:
		 * anything else would misread them (wrong answers, as for a btree
		 * after a collation change). Checked once per backend and tree
		 * handle.
		 */
		char	   *why;

		dex_read_metapage_cached(index, meta);
		why = dex_entry_meta_check(index, &meta->columns);

		if (why)
		{
			dex_tree_close(tree);
			hash_search(dex_tree_cache, key, HASH_REMOVE, NULL);
			ereport(ERROR,
					(errcode(ERRCODE_INDEX_CORRUPTED),
					 errmsg("index \"%s\" was built under other key columns: %s",
							RelationGetRelationName(index), why),
					 errhint("REINDEX INDEX %s",
							 quote_identifier(RelationGetRelationName(index)))));
		}
	}
	e->tree = tree;
	e->verified_life = 0;
	e->wb_checked = false;
	e->wbs_life = 0;
}

/*
 * Write-back mode (reloption write_back): checks the remote dirty-owner word
 * once per handle (an instance that crashed holding dirty nodes of this
 * index -> "lost its remote memory"), then sets the mode.
 */
static void
dex_open_set_mode(Relation index, DexTreeCacheEntry *e, DexTreeCacheKey *key,
				  DexMetaPageData *meta, bool scan)
{
	bool		wb = dex_index_write_back(index);
	DexError	err;
	int			rc;

	memset(&err, 0, sizeof(err));
	e->wbs_scans_wait = false;
	if (wb && RecoveryInProgress())
	{
		/*
		 * A hot standby reads a write-back index like any other (its handle
		 * writes nothing, so it checks no owner word), once the primary
		 * wrote back what this snapshot can need.
		 */
		rc = dex_tree_set_write_back(e->tree, 0, 0, &err);
		if (rc != DEX_OK)
			dex_report_error(rc, &err, index);
		e->owner_word = meta->owner_word;
		e->wbs_scans_wait = true;
		if (!scan)
			dex_wb_standby_wait(index, e->tree, meta->owner_word, (uint32) e->node, meta->ns,
								dex_standby_wait_timeout_ms, &e->wbs_life, dex_cluster_request_flush,
								NULL);
	}
	else
		dex_open_write_back(index, e, key, meta, wb);
}

static DexTree *
dex_open_tree_ex(Relation index, bool scan)
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
	dex_read_metapage_head(index, &meta);	/* (the key columns: below, once per handle) */
	if (meta.sysid != 0 && meta.sysid != GetSystemIdentifier())
		(void) dex_upgrade_adopt(index, meta.sysid, false);	/* pg_upgrade carried it here */
	dex_open_refuse_treeless(index, &meta);

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
		dex_open_new_handle(index, e, &key, &meta, node);
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
	dex_open_set_mode(index, e, &key, &meta, scan);

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
