/*
 * dexwal.c — dex's WAL resource manager (src/README.md "Hot standbys").
 *
 * A dex index's data does not travel in WAL: it lives on the memory nodes,
 * which the primary and its standbys share. What a standby lacks is word of
 * which remote nodes the primary changed, so that its own node cache never
 * serves a copy older than what its replay position requires. Every tree
 * write logs, while it holds the remote locks of the nodes it is about to
 * change and before it publishes them, one XLOG_DEX_NODES record naming them;
 * replaying it drops those nodes from the standby's cache (an admission in
 * progress is not installed). A standby that has replayed a commit has
 * replayed the records of every change the committed rows depend on, and a
 * node it then reads remotely is either already published or still locked
 * (a reader waits for that), so it sees the new image.
 *
 * On the primary itself replay only happens in crash recovery, when the cache
 * is empty: the records cost a few dozen bytes of WAL per write and nothing
 * else. With wal_level = minimal nothing is logged (no standby can exist).
 */
#include "dex.h"

#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xloginsert.h"
#include "access/xlogreader.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"

#if PG_VERSION_NUM >= 150000

/*
 * Custom resource manager id. 128 is reserved for experiments; dex uses 141
 * (https://wiki.postgresql.org/wiki/CustomWALResourceManagers). Change it
 * here only if another extension in shared_preload_libraries uses 141.
 */
/* DEX_RMGR_ID, XLOG_DEX_NODES (payload: DexWalNodes + nodes[]) and
 * XLOG_DEX_ENTRIES (dexwbredo.c) are defined in dex.h */

typedef struct DexWalNodes
{
	uint32		count;
	uint32		pad;
	/* uint64 GAddr nodes[count] follow */
} DexWalNodes;

static void
dex_redo(XLogReaderState *record)
{
	uint8		info = XLogRecGetInfo(record) & ~XLR_INFO_MASK;
	const char *data = XLogRecGetData(record);
	DexWalNodes hdr;

	if (info == XLOG_DEX_ENTRIES)
	{
		dex_wb_redo_entries(record);
		return;
	}
	if (info == XLOG_DEX_WB_FLUSHED)
	{
		dex_wb_redo_flushed(record);
		return;
	}
	if (info == XLOG_DEX_KILL)
	{
		dex_kill_redo(record);
		return;
	}
	if (info == XLOG_DEX_WB_REPLAYED)
	{
		dex_wb_redo_replayed(record);
		return;
	}
	if (info == XLOG_DEX_WB_IMAGED)
	{
		dex_wb_redo_imaged(record);
		return;
	}
	if (info != XLOG_DEX_NODES)
		elog(PANIC, "dex_redo: unknown op code %u", info);
	if (XLogRecGetDataLen(record) < sizeof(hdr))
		elog(PANIC, "dex_redo: short record");
	memcpy(&hdr, data, sizeof(hdr));
	if (XLogRecGetDataLen(record) != sizeof(hdr) + (size_t) hdr.count * sizeof(uint64))
		elog(PANIC, "dex_redo: record of %u nodes has %u bytes", hdr.count, XLogRecGetDataLen(record));
	{
		/* the payload may be unaligned in the reader's buffer */
		uint64	   *nodes = palloc(sizeof(uint64) * Max(hdr.count, 1));

		memcpy(nodes, data + sizeof(hdr), sizeof(uint64) * hdr.count);
		dex_cache_forget_nodes(nodes, hdr.count);
		pfree(nodes);
	}
}

static void
dex_desc(StringInfo buf, XLogReaderState *record)
{
	uint8		info = XLogRecGetInfo(record) & ~XLR_INFO_MASK;
	const char *data = XLogRecGetData(record);
	DexWalNodes hdr;

	if (info == XLOG_DEX_ENTRIES)
	{
		uint64		w[3];		/* DexWalEntries: gen, ns, node | count */

		if (XLogRecGetDataLen(record) < sizeof(w) + 8)
			return;
		memcpy(w, data, sizeof(w));
		appendStringInfo(buf, "%s of %u entries, life %016llx, tree %u:" UINT64_FORMAT,
						 data[sizeof(w)] == DEX_WAL_LEAF_IMAGE ? "leaf image" : data[sizeof(w)] ? "insert" : "delete",
						 (uint32) (w[2] >> 32),
						 (unsigned long long) w[0], (uint32) w[2], w[1]);
		return;
	}
	if (info == XLOG_DEX_KILL)
	{
		dex_kill_desc(buf, record);
		return;
	}
	if (info == XLOG_DEX_WB_FLUSHED && XLogRecGetDataLen(record) == 2 * sizeof(uint64))
	{
		uint64		p[2];		/* life, L */

		memcpy(p, data, sizeof(p));
		appendStringInfo(buf, "write-backs of life %016llx reached %X/%X", (unsigned long long) p[0],
						 LSN_FORMAT_ARGS(p[1]));
		return;
	}
	if (info == XLOG_DEX_WB_IMAGED && XLogRecGetDataLen(record) == 2 * sizeof(uint64))
	{
		uint64		p[2];		/* life, L */

		memcpy(p, data, sizeof(p));
		appendStringInfo(buf, "dirty leaves of life %016llx logged whole: crash redo from %X/%X",
						 (unsigned long long) p[0], LSN_FORMAT_ARGS(p[1]));
		return;
	}
	if (info == XLOG_DEX_WB_REPLAYED && XLogRecGetDataLen(record) == 3 * sizeof(uint64))
	{
		uint64		p[3];		/* life, ns, node */

		memcpy(p, data, sizeof(p));
		appendStringInfo(buf, "changes of life %016llx to tree %u:" UINT64_FORMAT " replayed",
						 (unsigned long long) p[0], (uint32) p[2], p[1]);
		return;
	}
	if (info != XLOG_DEX_NODES || XLogRecGetDataLen(record) < sizeof(hdr))
		return;
	memcpy(&hdr, data, sizeof(hdr));
	appendStringInfo(buf, "%u nodes:", hdr.count);
	for (uint32 i = 0; i < hdr.count && i < 16; i++)
	{
		uint64		g;

		memcpy(&g, data + sizeof(hdr) + i * sizeof(uint64), sizeof(g));
		appendStringInfo(buf, " %u:" UINT64_FORMAT, (uint32) ((g >> 48) & 0x7FFF),
						 g & ((UINT64CONST(1) << 48) - 1));
	}
	if (hdr.count > 16)
		appendStringInfoString(buf, " ...");
}

static const char *
dex_identify(uint8 info)
{
	if ((info & ~XLR_INFO_MASK) == XLOG_DEX_NODES)
		return "NODES";
	if ((info & ~XLR_INFO_MASK) == XLOG_DEX_WB_FLUSHED)
		return "WB_FLUSHED";
	if ((info & ~XLR_INFO_MASK) == XLOG_DEX_ENTRIES)
		return "ENTRIES";
	if ((info & ~XLR_INFO_MASK) == XLOG_DEX_KILL)
		return "KILL";
	if ((info & ~XLR_INFO_MASK) == XLOG_DEX_WB_REPLAYED)
		return "WB_REPLAYED";
	if ((info & ~XLR_INFO_MASK) == XLOG_DEX_WB_IMAGED)
		return "WB_IMAGED";
	return NULL;
}

static const RmgrData dex_rmgr = {
	.rm_name = "dex",
	.rm_redo = dex_redo,
	.rm_startup = dex_wb_redo_startup,
	.rm_cleanup = dex_wb_redo_cleanup,
	.rm_desc = dex_desc,
	.rm_identify = dex_identify,
};

/*
 * The core's change log (dex_set_change_log_fn): runs while the core holds
 * remote locks, so no error may escape as a longjmp through its frames -- the
 * critical section turns any error of XLogInsert into a PANIC, as for every
 * WAL insertion PostgreSQL makes while changing a page.
 */
static void
dex_log_changes(const uint64_t *nodes, size_t n)
{
	DexWalNodes hdr;

	if (n == 0 || !XLogStandbyInfoActive() || RecoveryInProgress())
		return;
	memset(&hdr, 0, sizeof(hdr));
	hdr.count = (uint32) n;
	START_CRIT_SECTION();
	XLogBeginInsert();
	XLogRegisterData((char *) &hdr, sizeof(hdr));
	XLogRegisterData((char *) nodes, (uint32) (n * sizeof(uint64)));
	(void) XLogInsert(DEX_RMGR_ID, XLOG_DEX_NODES);
	END_CRIT_SECTION();
}

void
dex_wal_init(void)
{
	RegisterCustomRmgr(DEX_RMGR_ID, (RmgrData *) &dex_rmgr);
	dex_set_change_log_fn(dex_log_changes);
	dex_wbredo_init();
}

#else							/* PG < 15: no custom WAL resource managers */

void
dex_wal_init(void)
{
}

#endif
