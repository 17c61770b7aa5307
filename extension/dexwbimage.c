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
 * A clean shutdown that cannot write dirty leaves back either saves them the
 * same way into this life's redo files (dex_wb_spill_images, below).
 *
 * Hot standbys read remote memory, not WAL: their promise (the flushed
 * position in XLOG_DEX_WB_FLUSHED) still follows dirty_since, and an image
 * is no change they wait for. Their collection, which a promotion replays,
 * learns the position crash redo may start at from XLOG_DEX_WB_IMAGED. The
 * price is WAL: a kilobyte per dirty leaf, at each checkpoint the
 * write-back could not cover.
 */
#include "dex.h"

#include <fcntl.h>
#include <unistd.h>

#include "access/xlog.h"
#include "access/xloginsert.h"
#include "common/file_perm.h"
#include "miscadmin.h"
#include "storage/fd.h"

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

/*
 * Clean shutdown with leaves still dirty: the worker's final flush could not
 * write them back (a standby that does not replay -- paused, or delayed by
 * recovery_min_apply_delay -- holds them back). No crash recovery will
 * collect this life's changes at the next start, and the first use would
 * refuse the index (REINDEX). So the worker writes the dirty leaves whole
 * into this life's redo files itself, as a recovery would have collected
 * images of them: one segment per tree, the life's redo start and flushed
 * position at the moment of the pass. The next start's first use replays
 * them (dex_wb_redo_gate). Runs after the backends were told to stop; a
 * change one of them still makes afterwards belongs to a transaction that
 * aborts (its row is dead), as for the final flush.
 */
#define WB_SPILL_TREES	64		/* files fsynced after the pass; more: at each write */

static uint64 spill_gen;
static XLogRecPtr spill_at;
static bool spill_failed;
static int	spill_ntrees;
static struct
{
	uint32		node;
	uint64		ns;
}			spill_trees[WB_SPILL_TREES];

/* The cache's image log at shutdown: append to the tree's segment (no ereport: C++ frames). */
static uint64_t
wb_spill_image(uint32_t node, uint64_t ns, const uint8_t *image, uint32_t len)
{
	char		path[MAXPGPATH];
	DexWalEntries hdr;
	char		rec[sizeof(DexWalEntries) + sizeof(uint32) + DEX_NODE_BYTES];
	bool		known = false;
	int			fd;

	if (len != DEX_NODE_BYTES)
	{
		spill_failed = true;
		return 0;
	}
	memset(&hdr, 0, sizeof(hdr));
	hdr.gen = spill_gen;
	hdr.ns = ns;
	hdr.node = node;
	hdr.count = 1;
	hdr.insert = DEX_WAL_LEAF_IMAGE;
	snprintf(path, sizeof(path), DEX_WB_SEGMENT_FMT, DEX_WB_DIR, (unsigned long long) spill_gen, node,
			 (unsigned long long) ns, 0u);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | PG_BINARY, pg_file_create_mode);
	if (fd < 0)
	{
		spill_failed = true;
		return 0;
	}
	/* the payload an XLOG_DEX_ENTRIES leaf image carries: header, then (length, image) */
	memcpy(rec, &hdr, sizeof(hdr));
	memcpy(rec + sizeof(hdr), &len, sizeof(len));
	memcpy(rec + sizeof(hdr) + sizeof(len), image, len);
	for (int i = 0; i < spill_ntrees; i++)
		known |= spill_trees[i].node == node && spill_trees[i].ns == ns;
	if (!known && spill_ntrees < WB_SPILL_TREES)
	{
		spill_trees[spill_ntrees].node = node;
		spill_trees[spill_ntrees++].ns = ns;
		known = true;
	}
	if (!dex_wb_segment_append(fd, (uint64) spill_at, rec, sizeof(rec)) || (!known && pg_fsync(fd) != 0))
	{
		close(fd);
		spill_failed = true;
		return 0;
	}
	close(fd);
	return (uint64_t) spill_at;
}

void
dex_wb_spill_images(void)
{
	uint64		logged = 0;
	DexError	err;

	spill_gen = dex_cache_generation();
	spill_at = GetXLogInsertRecPtr();
	spill_failed = false;
	spill_ntrees = 0;
	memset(&err, 0, sizeof(err));
	dex_wb_make_dir();
	if (dex_cache_log_dirty_images(wb_spill_image, &logged, &err) != DEX_OK || spill_failed)
	{
		ereport(LOG, (errmsg("dex: could not write the dirty leaves of write-back indexes to %s at shutdown%s%s",
							 DEX_WB_DIR, err.message[0] ? ": " : "", err.message),
					  errdetail("Their indexes will refuse queries until REINDEX.")));
		return;
	}
	if (logged == 0)
		return;
	for (int i = 0; i < spill_ntrees; i++)
		fsync_fname(dex_wb_segment_path(spill_gen, spill_trees[i].node, spill_trees[i].ns, 0), false);
	fsync_fname(DEX_WB_DIR, true);
	/* redo of this life starts at the images, and everything before them is covered */
	dex_wb_write_lsn(dex_wb_path(spill_gen, "redo_start"), spill_at);
	(void) dex_wb_publish_flushed(spill_at, NULL);
	ereport(LOG,
			(errmsg("dex: " UINT64_FORMAT " dirty leaves of write-back indexes could not be written back before shutdown "
					"and were written to %s instead", logged, DEX_WB_DIR),
			 errdetail("The first use of each index after the next start replays them.")));
}

#else

void
dex_wb_spill_images(void)
{
}

bool
dex_wb_cover_with_images(uint64 redo, uint64 *flushed)
{
	*flushed = 0;
	return false;				/* no custom rmgr: nothing replays them */
}

#endif							/* PG_VERSION_NUM >= 150000 */
