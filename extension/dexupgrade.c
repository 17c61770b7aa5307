/*
 * dexupgrade.c — pg_upgrade: taking over the remote trees of the cluster an
 * upgrade came from (src/README.md "Hot standbys", Upgrades).
 *
 * pg_upgrade makes a cluster with a new system identifier and copies the
 * index files, so an upgraded dex index's metapage names the old cluster
 * (DexMetaPageData.sysid) and its namespaces carry the old cluster's tags.
 * The first use of such an index on the new primary -- or its DROP --
 * adopts them: once the old cluster's writer is gone, its registry is fenced
 * (writer_life = DEX_WRITER_MOVED, moved_to = us: its servers refuse the trees
 * from then on), the old identifier joins our registry's adopted list (DROP,
 * REINDEX and dex_orphans() then treat those namespaces as ours:
 * dex_list_cluster_namespaces) and the metapage is rewritten with our
 * identifier.
 */
#include "dex.h"

#include "access/generic_xlog.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

/*
 * The system identifier of the cluster an index's metapage names, if it is
 * not this cluster's (0 otherwise, also for a metapage from before the field
 * or an index not built yet). Reads the page without dex_read_metapage's
 * checks: DROP must go on whatever the page holds.
 */
uint64
dex_upgrade_foreign_owner(Relation index)
{
	uint64		sysid = 0;
	Buffer		buf;
	Page		page;

	if (RelationGetNumberOfBlocks(index) == 0)
		return 0;
	buf = ReadBuffer(index, DEX_METAPAGE_BLKNO);
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	if (!PageIsNew(page) &&
		((DexPageOpaqueData *) PageGetSpecialPointer(page))->page_id == DEX_PAGE_ID &&
		DexPageGetMeta(page)->magic == DEX_MAGIC)
		sysid = DexPageGetMeta(page)->sysid;
	UnlockReleaseBuffer(buf);
	return sysid == GetSystemIdentifier() ? 0 : sysid;
}

/* The metapage now names this cluster as the trees' owner (WAL-logged, so standbys follow). */
static void
dex_meta_set_sysid(Relation index, uint64 sysid)
{
	Buffer		buf = ReadBuffer(index, DEX_METAPAGE_BLKNO);
	GenericXLogState *state;
	Page		page;

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	state = GenericXLogStart(index);
	page = GenericXLogRegisterBuffer(state, buf, 0);
	DexPageGetMeta(page)->sysid = sysid;
	GenericXLogFinish(state);
	UnlockReleaseBuffer(buf);
}

/* Sleep `ms`, answering query cancel: the waits below last seconds. */
static void
dex_upgrade_sleep(long ms)
{
	for (long slept = 0; slept < ms; slept += 100)
	{
		CHECK_FOR_INTERRUPTS();
		pg_usleep(100 * 1000L);
	}
}

/*
 * Fence the old cluster's registry: once its writer is gone (released at its
 * clean shutdown, which pg_upgrade requires, or silent for a lease and a
 * margin), mark it moved to us. Its primary then refuses the trees, its
 * standbys stop answering (we wait out their leases). Returns false, with
 * *why set, if the old cluster still runs or another cluster adopted it.
 * *st receives the old registry (its adopted list is ours too).
 */
static bool
dex_fence_old_cluster(uint64 old_sysid, DexRegistryState *st, char *why, size_t whylen)
{
	uint64		mine = GetSystemIdentifier();
	uint64		old;
	DexError	err;
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz since = start;
	uint64		seen_life = 0;
	uint64		seen_beat = 0;

	memset(&err, 0, sizeof(err));
	/* create: a tombstone must exist even if the old registry is gone, or the old cluster could claim the trees again */
	old = dex_cluster_registry_lookup(old_sysid, true, 0, &err);
	if (old == 0)
	{
		snprintf(why, whylen, "%s", err.message);
		return false;
	}
	for (;;)
	{
		TimestampTz now = GetCurrentTimestamp();
		int			done = 0;

		if (dex_registry_read(old, st, &err) != DEX_OK)
		{
			snprintf(why, whylen, "%s", err.message);
			return false;
		}
		if (st->moved_to != 0 && st->moved_to != mine)
		{
			/* without kWriterMoved yet, it claimed them and is fencing: it gets them */
			snprintf(why, whylen, "The cluster with system identifier " UINT64_FORMAT " %s",
					 st->moved_to, st->writer_life == DEX_WRITER_MOVED ? "already took them over" : "is taking them over");
			return false;
		}
		if (st->writer_life == DEX_WRITER_MOVED)
			return true;		/* moved to us */
		/* a writer whose beat keeps changing is alive; "silent" counts from its last change */
		if (st->writer_life != seen_life || st->writer_beat != seen_beat)
		{
			seen_life = st->writer_life;
			seen_beat = st->writer_beat;
			since = now;
		}
		if (st->writer_life == 0 || TimestampDifferenceExceeds(since, now, DEX_LEASE_MS + DEX_MARGIN_MS))
		{
			if (dex_registry_fence_moved(old, st->writer_life, mine, &done, &err) != DEX_OK)
			{
				snprintf(why, whylen, "%s", err.message);
				return false;
			}
			if (done)
			{
				/*
				 * Its standbys may have renewed a lease just before the fence;
				 * they stop answering when they see it, at the latest when
				 * that lease runs out.
				 */
				for (int i = 0; i < DEX_MAX_STANDBYS; i++)
					if (dex_slot_live(&st->slots[i]))
					{
						dex_upgrade_sleep(DEX_LEASE_MS + DEX_MARGIN_MS);
						break;
					}
				continue;		/* re-read: moved to us */
			}
		}
		else if (TimestampDifferenceExceeds(start, now, 2 * (DEX_LEASE_MS + DEX_MARGIN_MS)))
		{
			snprintf(why, whylen,
					 "The cluster with system identifier " UINT64_FORMAT " that built them still runs (its dex worker beats)",
					 old_sysid);
			return false;
		}
		dex_upgrade_sleep(100);
	}
}

/*
 * An index whose metapage names another cluster (old_sysid): pg_upgrade
 * carried it here. On the primary: fence the old cluster, record its system
 * identifier (and those it had adopted) in our registry, then rewrite the
 * metapage. A standby waits for its primary to do that. `for_drop`: failures
 * are WARNINGs (DROP INDEX must work without the memory nodes; the core must
 * be configured); returns whether it adopted.
 */
bool
dex_upgrade_adopt(Relation index, uint64 old_sysid, bool for_drop)
{
	DexRegistryState *st;
	char		why[256];
	uint64		myreg = 0;
	DexError	err;
	int			done = 0;
	bool		ok;

	if (RecoveryInProgress())
	{
		if (for_drop)
			return false;
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("index \"%s\" was built by another cluster (system identifier " UINT64_FORMAT ")",
						RelationGetRelationName(index), old_sysid),
				 errdetail("Its primary has not taken the index over since pg_upgrade."),
				 errhint("Use the index once on the primary.")));
	}
	if (!dex_cluster_is_writer() || (myreg = dex_cluster_registry()) == 0)
	{
		if (for_drop)
		{
			ereport(WARNING,
					(errmsg("index \"%s\" was built by another cluster (system identifier " UINT64_FORMAT ") and cannot be taken over",
							RelationGetRelationName(index), old_sysid),
					 errdetail("This server does not hold the writer role of dex's remote memory."),
					 errhint("Its remote memory stays allocated.")));
			return false;
		}
		dex_cluster_require_writer("taking over a dex index built by another cluster");
	}
	st = palloc(sizeof(DexRegistryState));
	why[0] = '\0';
	ok = dex_fence_old_cluster(old_sysid, st, why, sizeof(why));
	memset(&err, 0, sizeof(err));
	if (ok)
	{
		/* the old cluster's own adopted clusters (an upgrade of an upgrade) are ours too */
		ok = dex_registry_add_adopted(myreg, old_sysid, &done, &err) == DEX_OK && done;
		for (int i = 0; ok && i < DEX_MAX_ADOPTED && st->adopted[i] != 0; i++)
			ok = dex_registry_add_adopted(myreg, st->adopted[i], &done, &err) == DEX_OK && done;
		if (!ok)
			snprintf(why, sizeof(why), "%s",
					 err.message[0] ? err.message : "This cluster's registry lists too many adopted clusters");
	}
	pfree(st);
	if (!ok)
	{
		ereport(for_drop ? WARNING : ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("index \"%s\" was built by another cluster (system identifier " UINT64_FORMAT ") and cannot be taken over",
						RelationGetRelationName(index), old_sysid),
				 errdetail("%s.", why),
				 for_drop ? errhint("Its remote memory stays allocated.")
				 : errhint("Stop the cluster it was upgraded from, or give this cluster memory nodes of its own "
						   "(dex.memnodes) and REINDEX INDEX %s.",
						   quote_identifier(RelationGetRelationName(index)))));
		return false;
	}
	ereport(LOG, (errmsg("dex: index \"%s\" taken over from the cluster with system identifier " UINT64_FORMAT,
						 RelationGetRelationName(index), old_sysid)));
	dex_meta_set_sysid(index, GetSystemIdentifier());
	return true;
}
