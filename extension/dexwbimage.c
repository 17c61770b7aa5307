/*
 * dexwbimage.c — a checkpoint that cannot wait for the write-back logs the
 * dirty leaves whole (src/README.md "Write-back mode", redo after a crash).
 *
 * Crash redo starts at the last checkpoint's REDO position R, so a change
 * that only a dirty frame holds must be in remote memory before that
 * checkpoint completes, or be logged again after R. The checkpoint fence
 * (dexckptfence.c) waits for the write-back; when it cannot wait any longer
 * -- a hot standby that does not replay holds the dirty leaves back, remote
 * memory is unreachable, dex.checkpoint_writeback_timeout passed -- it used
 * to let the checkpoint go on, and a crash before the next write-back made
 * those indexes refuse every query until REINDEX. Now it logs each dirty
 * leaf frame whole instead, as PostgreSQL logs a full-page image after a
 * checkpoint: one XLOG_DEX_ENTRIES record of kind DEX_WAL_LEAF_IMAGE per
 * leaf, taken under the frame's lock, whose position becomes the frame's
 * imaged_at. Every change in that frame logged before the record is in the
 * image, every later one is logged later; so crash redo may start at the
 * lowest imaged_at instead of the lowest dirty_since, and this life's
 * flushed file (dexwbredo.c) says so. Collection (dexwbcollect.c) keeps the
 * records with the tree's entry changes, and the first use after the crash
 * replays them in log order: an image makes its key range hold exactly its
 * entries (BTreeT::replay_leaf_image), the changes after it follow.
 *
 * Hot standbys read remote memory, not WAL: their promise (the flushed
 * position in XLOG_DEX_WB_FLUSHED) still follows dirty_since, and an image
 * is no change they wait for. Their collection, which a promotion replays,
 * learns the position crash redo may start at from XLOG_DEX_WB_IMAGED. The
 * price is WAL: a kilobyte per dirty leaf, at each checkpoint the
 * write-back could not cover.
 */
#include "dex.h"

#include "access/xlog.h"
#include "access/xloginsert.h"
#include "miscadmin.h"
#include "utils/rel.h"

#if PG_VERSION_NUM >= 150000	/* custom WAL resource managers */

/*
 * The cache's image log (dex_cache_log_dirty_images): runs inside dex's C++
 * frames under a frame lock, so no error may escape as a longjmp -- the
 * critical section turns one into a PANIC, as for the entry log.
 */
static uint64_t
wb_log_image(uint32_t node, uint64_t ns, const uint8_t *image, uint32_t len)
{
	DexWalEntries hdr;
	uint32		elen = len;
	XLogRecPtr	at;

	if (RecoveryInProgress())
		return 0;
	memset(&hdr, 0, sizeof(hdr));
	hdr.gen = dex_cache_generation();
	hdr.ns = ns;
	hdr.node = node;
	hdr.count = 1;
	hdr.insert = DEX_WAL_LEAF_IMAGE;
	START_CRIT_SECTION();
	/* at or before the record: every later change of the frame is logged after it */
	at = GetXLogInsertRecPtr();
	XLogBeginInsert();
	XLogRegisterData((char *) &hdr, sizeof(hdr));
	XLogRegisterData((char *) &elen, sizeof(elen));
	XLogRegisterData(unconstify(char *, (const char *) image), len);
	(void) XLogInsert(DEX_RMGR_ID, XLOG_DEX_ENTRIES);
	END_CRIT_SECTION();
	return (uint64_t) at;
}

/*
 * The fence gave up waiting for the write-back of checkpoint `redo`: log the
 * dirty leaves whole, make them durable, and publish the flushed position
 * that covers them (*flushed). True if it reaches `redo` (the checkpoint may
 * go on: a crash after it loses nothing).
 */
bool
dex_wb_cover_with_images(uint64 redo, uint64 *flushed)
{
	XLogRecPtr	before = GetXLogInsertRecPtr();
	uint64		logged = 0;
	DexError	err;

	*flushed = 0;
	memset(&err, 0, sizeof(err));
	if (dex_cache_log_dirty_images(wb_log_image, &logged, &err) != DEX_OK)
	{
		ereport(LOG, (errmsg("dex: could not log the dirty leaves of write-back indexes whole: %s", err.message)));
		return false;
	}
	/* durable before the flushed file says a crash may start after them */
	XLogFlush(GetXLogInsertRecPtr());
	*flushed = dex_wb_publish_flushed(before, NULL);
	if (*flushed < redo)
		return false;
	if (*flushed != PG_UINT64_MAX && logged > 0)
	{
		/* the same position for a standby's collection: promoted, it replays as we would */
		uint64		payload[2] = {dex_cache_generation(), *flushed};

		XLogBeginInsert();
		XLogRegisterData((char *) payload, sizeof(payload));
		XLogFlush(XLogInsert(DEX_RMGR_ID, XLOG_DEX_WB_IMAGED));
	}
	ereport(LOG,
			(errmsg("dex: a checkpoint (REDO %X/%X) goes on before the dirty leaves of write-back indexes "
					"were written back: " UINT64_FORMAT " leaves were logged whole instead",
					LSN_FORMAT_ARGS((XLogRecPtr) redo), logged),
			 errdetail("Crash recovery from this checkpoint restores them from WAL.")));
	return true;
}

#else

bool
dex_wb_cover_with_images(uint64 redo, uint64 *flushed)
{
	*flushed = 0;
	return false;				/* no custom rmgr: nothing replays them */
}

#endif							/* PG_VERSION_NUM >= 150000 */

/* Redo at first use of one collected leaf image (record payload p..end). */
void
dex_wb_apply_image(Relation index, DexTree *tree, const char *p, const char *end, uint64 *changed)
{
	const uint8 *img;
	uint32		len;
	DexError	err;
	int			rc;

	*changed = 0;
	if (!dex_wal_entry_next(&p, end, &img, &len))
		elog(ERROR, "dex: write-back redo of index \"%s\": truncated leaf image",
			 RelationGetRelationName(index));
	memset(&err, 0, sizeof(err));
	rc = dex_tree_replay_leaf_image(tree, img, len, changed, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, index);
}
