/*
 * dexxact.c — transactional lifecycle of remote memory.
 *
 * Remote memory is freed only when the transaction that made it unreachable
 * commits, and memory created by a transaction is freed if it aborts:
 *
 *   CREATED     namespace made by ambuild in this (sub)transaction:
 *               dropped at (sub)transaction abort, kept at commit.
 *   DROP        namespace superseded by a rebuild (REINDEX, TRUNCATE, ...):
 *               dropped at commit, forgotten at abort.
 *   INDEX_DROP  DROP INDEX / DROP TABLE of a dex index (object_access_hook):
 *               at commit every namespace tagged with that index OID is
 *               dropped, at abort forgotten.
 *
 * Failures at commit or abort never raise an ERROR: they emit a WARNING and
 * leave an orphan that dex_orphans() lists.
 */
#include "dex.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

typedef enum DexPendingAction
{
	DEX_PENDING_CREATED,
	DEX_PENDING_DROP,
	DEX_PENDING_INDEX_DROP
} DexPendingAction;

typedef struct DexPending
{
	DexPendingAction action;
	int			level;			/* transaction nest level */
	uint64		ns;
	Oid			indexoid;
	char		address[DEX_ADDR_LEN];	/* memory node, resolved at the end */
} DexPending;

static List *dex_pending = NIL;

static object_access_hook_type prev_object_access_hook = NULL;

static void
dex_add_pending(DexPendingAction action, int node, uint64 ns, Oid indexoid)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	DexPending *p = palloc0(sizeof(DexPending));

	p->action = action;
	p->level = GetCurrentTransactionNestLevel();
	p->ns = ns;
	p->indexoid = indexoid;
	if (node >= 0 && dex_memnode_address(node))
		strlcpy(p->address, dex_memnode_address(node), sizeof(p->address));
	dex_pending = lappend(dex_pending, p);
	MemoryContextSwitchTo(old);
}

void
dex_register_created(int node, uint64 ns)
{
	dex_add_pending(DEX_PENDING_CREATED, node, ns, InvalidOid);
}

void
dex_register_drop(int node, uint64 ns)
{
	ListCell   *lc;

	/* don't register the same drop twice at the same level */
	foreach(lc, dex_pending)
	{
		DexPending *p = (DexPending *) lfirst(lc);

		if (p->action == DEX_PENDING_DROP && p->ns == ns &&
			p->level == GetCurrentTransactionNestLevel() &&
			dex_memnode_address(node) &&
			strcmp(p->address, dex_memnode_address(node)) == 0)
			return;
	}
	dex_add_pending(DEX_PENDING_DROP, node, ns, InvalidOid);
}

void
dex_register_index_drop(Oid indexoid)
{
	dex_add_pending(DEX_PENDING_INDEX_DROP, -1, 0, indexoid);
}

bool
dex_ns_is_pending(int node, uint64 ns)
{
	ListCell   *lc;
	const char *addr = dex_memnode_address(node);

	if (addr == NULL)
		return false;
	foreach(lc, dex_pending)
	{
		DexPending *p = (DexPending *) lfirst(lc);

		if (p->action != DEX_PENDING_INDEX_DROP && p->ns == ns &&
			strcmp(p->address, addr) == 0)
			return true;
	}
	return false;
}

static int
dex_node_by_address(const char *address)
{
	int			count = dex_memnode_count();
	int			i;

	for (i = 0; i < count; i++)
	{
		const char *a = dex_memnode_address(i);

		if (a && strcmp(a, address) == 0)
			return i;
	}
	return -1;
}

/* Drop one namespace now; WARNING on failure. Never ERRORs. */
static void
dex_drop_now(const char *address, uint64 ns)
{
	int			node = dex_node_by_address(address);
	DexError	err;
	uint64		freed = 0;
	int			rc;

	if (!dex_cluster_is_writer())
	{
		/* the remote memory belongs to the server that writes it, not to us */
		ereport(WARNING,
				(errmsg("dex namespace " UINT64_FORMAT " on memory node \"%s\" was not freed: this server does not write dex's remote memory",
						ns, address),
				 errhint("The server that writes it frees unused namespaces with dex_free_orphans().")));
		return;
	}
	if (node < 0)
	{
		ereport(WARNING,
				(errmsg("could not free dex namespace " UINT64_FORMAT " on memory node \"%s\": the node is no longer configured",
						ns, address),
				 errhint("Use dex_orphans() to find and free unused remote memory.")));
		return;
	}
	dex_forget_tree(node, ns);
	memset(&err, 0, sizeof(err));
	rc = dex_ns_drop(node, ns, &freed, &err);
	if (rc != DEX_OK && rc != DEX_ERR_NOT_FOUND)
		ereport(WARNING,
				(errmsg("could not free dex namespace " UINT64_FORMAT " on memory node \"%s\": %s",
						ns, address, err.message),
				 errhint("Use dex_orphans() to find and free unused remote memory.")));
}

/* Drop every namespace of this database tagged with one of the index OIDs. */
static void
dex_drop_index_namespaces(List *indexoids)
{
	int			count = dex_memnode_count();

	for (int node = 0; node < count; node++)
	{
		DexClusterNs *list;
		int			n;
		DexError	err;

		if (dex_list_cluster_namespaces(node, &list, &n, &err) != DEX_OK)
		{
			ereport(WARNING,
					(errmsg("could not free remote memory of dropped dex index on memory node \"%s\": %s",
							dex_memnode_address(node), err.message),
					 errhint("Use dex_orphans() to find and free unused remote memory.")));
			continue;
		}
		for (int i = 0; i < n; i++)
		{
			if (list[i].tag.dboid == MyDatabaseId &&
				list_member_oid(indexoids, list[i].tag.indexoid))
				dex_drop_now(dex_memnode_address(node), list[i].ns);
		}
		pfree(list);
	}
}

static void
dex_finish_pending(bool commit)
{
	List	   *pending = dex_pending;
	List	   *indexoids = NIL;
	ListCell   *lc;
	DexError	err;
	bool		work = false;

	dex_pending = NIL;
	if (pending == NIL)
		return;

	foreach(lc, pending)
	{
		DexPending *p = (DexPending *) lfirst(lc);

		if (commit ? (p->action != DEX_PENDING_CREATED) :
			(p->action == DEX_PENDING_CREATED))
			work = true;
	}

	if (work)
	{
		dex_interrupts_suppressed = true;
		memset(&err, 0, sizeof(err));
		if (dex_try_configure(&err) != DEX_OK)
		{
			ereport(WARNING,
					(errmsg("could not free dex remote memory: %s", err.message),
					 errhint("Use dex_orphans() to find and free unused remote memory.")));
			work = false;
		}
	}

	if (work)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		foreach(lc, pending)
		{
			DexPending *p = (DexPending *) lfirst(lc);

			if (commit)
			{
				if (p->action == DEX_PENDING_DROP)
					dex_drop_now(p->address, p->ns);
				else if (p->action == DEX_PENDING_INDEX_DROP)
					indexoids = lappend_oid(indexoids, p->indexoid);
			}
			else if (p->action == DEX_PENDING_CREATED)
				dex_drop_now(p->address, p->ns);
		}
		if (indexoids != NIL)
			dex_drop_index_namespaces(indexoids);
		list_free(indexoids);
		MemoryContextSwitchTo(old);
	}
	dex_interrupts_suppressed = false;
	list_free_deep(pending);
}

static void
dex_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			if (dex_pending != NIL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that has created, rebuilt or dropped a dex index")));
			break;
		case XACT_EVENT_COMMIT:
			dex_finish_pending(true);
			break;
		case XACT_EVENT_ABORT:
			dex_finish_pending(false);
			break;
		default:
			break;
	}
}

static void
dex_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					 SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	List	   *keep = NIL;
	List	   *todrop = NIL;
	ListCell   *lc;

	if (dex_pending == NIL)
		return;

	if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		foreach(lc, dex_pending)
		{
			DexPending *p = (DexPending *) lfirst(lc);

			if (p->level >= level)
				p->level = level - 1;
		}
		return;
	}
	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;

	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		foreach(lc, dex_pending)
		{
			DexPending *p = (DexPending *) lfirst(lc);

			if (p->level < level)
				keep = lappend(keep, p);
			else if (p->action == DEX_PENDING_CREATED)
				todrop = lappend(todrop, p);
			else
				pfree(p);
		}
		list_free(dex_pending);
		dex_pending = keep;
		MemoryContextSwitchTo(old);
	}

	if (todrop != NIL)
	{
		DexError	err;

		dex_interrupts_suppressed = true;
		memset(&err, 0, sizeof(err));
		if (dex_try_configure(&err) != DEX_OK)
			ereport(WARNING,
					(errmsg("could not free dex remote memory: %s", err.message),
					 errhint("Use dex_orphans() to find and free unused remote memory.")));
		else
		{
			foreach(lc, todrop)
			{
				DexPending *p = (DexPending *) lfirst(lc);

				dex_drop_now(p->address, p->ns);
			}
		}
		dex_interrupts_suppressed = false;
		list_free_deep(todrop);
	}
}

static bool
dex_is_dex_am(Oid amoid)
{
	HeapTuple	tup;
	bool		result = false;

	tup = SearchSysCache1(AMOID, ObjectIdGetDatum(amoid));
	if (HeapTupleIsValid(tup))
	{
		Form_pg_am am = (Form_pg_am) GETSTRUCT(tup);

		result = (strcmp(NameStr(am->amname), "dex") == 0 &&
				  am->amtype == AMTYPE_INDEX);
		ReleaseSysCache(tup);
	}
	return result;
}

/*
 * DROP of an index pg_upgrade carried here that nobody used since: adopt it
 * first (dexupgrade.c), so the namespaces dropped by tag at commit include the
 * old cluster's. Remote trouble never stops the drop: its remote memory then
 * stays allocated (a WARNING says so; without a configuration, commit warns).
 */
static void
dex_adopt_before_drop(Oid indexoid)
{
	Relation	rel;
	uint64		owner;
	DexError	err;

	if (RecoveryInProgress())
		return;
	rel = relation_open(indexoid, NoLock);	/* DROP holds its lock */
	owner = dex_upgrade_foreign_owner(rel);
	memset(&err, 0, sizeof(err));
	if (owner != 0 && dex_try_configure(&err) == DEX_OK)
		(void) dex_upgrade_adopt(rel, owner, true);
	relation_close(rel, NoLock);
}

static void
dex_object_access(ObjectAccessType access, Oid classId, Oid objectId,
				  int subId, void *arg)
{
	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);

	if (access == OAT_DROP && classId == RelationRelationId && subId == 0)
	{
		HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(objectId));

		if (HeapTupleIsValid(tup))
		{
			Form_pg_class rel = (Form_pg_class) GETSTRUCT(tup);

			if (rel->relkind == RELKIND_INDEX && dex_is_dex_am(rel->relam))
			{
				dex_adopt_before_drop(objectId);
				dex_register_index_drop(objectId);
			}
			ReleaseSysCache(tup);
		}
	}
}

void
dex_xact_init(void)
{
	RegisterXactCallback(dex_xact_callback, NULL);
	RegisterSubXactCallback(dex_subxact_callback, NULL);
	prev_object_access_hook = object_access_hook;
	object_access_hook = dex_object_access;
}
