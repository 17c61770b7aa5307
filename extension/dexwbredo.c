/*
 * dexwbredo.c — write-back mode survives a crash (src/README.md "Write-back
 * mode", "Redo after a crash").
 *
 * In write-back mode an entry change can live only in a dirty cached leaf,
 * which a crash of this compute server takes with it. Before this file, the
 * index was then lost (REINDEX). Now every entry change of a write-back tree
 * is also logged in WAL (XLOG_DEX_ENTRIES: the life's cache generation, the
 * tree, insert or delete, the entries), and the pieces below put them back:
 *
 *   - Flushed position. Each life that uses write-back keeps, in
 *     $PGDATA/pg_dex_wb/<gen>.flushed, a WAL position L such that every entry
 *     change it logged before L is in remote memory. The first open of a
 *     write-back tree writes it (the insert position: nothing was dirty
 *     before), and the write-back worker raises it after each complete flush
 *     to min(insert position before the flush, the oldest dirty frame's
 *     dirty_since), fsynced.
 *   - Collection in crash recovery. Redo of XLOG_DEX_ENTRIES appends the
 *     record to pg_dex_wb/<gen>.<node>.<ns>.ops (crash recovery only: a
 *     standby never writes the trees). Redo starts at the last checkpoint's
 *     REDO position R, which rm_startup writes into <gen>.redo_start for
 *     every life that left a flushed position and none yet. The files are
 *     fsynced at rm_cleanup, before the end-of-recovery checkpoint recycles
 *     the WAL they came from. A recovery that is itself interrupted starts
 *     again at the same R and rewrites the .ops files of those lives.
 *   - Replay at first use. A tree whose dirty-owner word still names a dead
 *     generation G is replayed by the first backend that opens it (under a
 *     page lock): if L(G) >= R(G), every change missing from remote memory
 *     was logged after R and is in the .ops file; they are applied in log
 *     order, written through (insert and delete are idempotent per entry, so
 *     any mix of frames written back before the crash ends in the logged
 *     state), then the word goes from G back to 0. Otherwise (no flushed
 *     position, no recovery record, or a checkpoint that began after the last
 *     write-back) changes may be missing: the index is refused as before,
 *     "lost its remote memory", HINT REINDEX -- never wrong rows.
 *
 * Stray entries cannot come back this way: a logged insert follows its row's
 * heap record in WAL, so a replayed entry's row survived the crash too.
 */
#include "dex.h"

#include <fcntl.h>
#include <unistd.h>

#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xloginsert.h"
#include "access/xlogreader.h"
#include "access/xlogrecovery.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/fd.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/rel.h"

#define DEX_WB_LOCK_BLKNO		((BlockNumber) 0xFFFFFFEF)	/* page lock: one replay per index */

/* announcement of this life's flushed position (shared) */
typedef struct DexWbShared
{
	pg_atomic_uint32 state;		/* 0: not yet, 1: being written, 2: written */
} DexWbShared;

#define WB_NONE		0
#define WB_WRITING	1
#define WB_WRITTEN	2

static DexWbShared *wbs = NULL;

Size
dex_wbredo_shmem_size(void)
{
	return MAXALIGN(sizeof(DexWbShared));
}

void
dex_wbredo_shmem_init(void *mem, bool found)
{
	wbs = (DexWbShared *) mem;
	if (!found)
		pg_atomic_init_u32(&wbs->state, WB_NONE);
}

/* ---- files -------------------------------------------------------------- */

char *
dex_wb_path(uint64 gen, const char *suffix)
{
	return psprintf("%s/%016llx.%s", DEX_WB_DIR, (unsigned long long) gen, suffix);
}

void
dex_wb_make_dir(void)
{
	if (MakePGDirectory(DEX_WB_DIR) < 0 && errno != EEXIST)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create directory \"%s\": %m", DEX_WB_DIR)));
}

/* Write one LSN durably (temporary file, fsync, rename, fsync directory). */
void
dex_wb_write_lsn(const char *path, XLogRecPtr lsn)
{
	char	   *tmp = psprintf("%s.tmp", path);
	uint64		v = lsn;
	int			fd;

	dex_wb_make_dir();
	fd = OpenTransientFile(tmp, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0)
		ereport(ERROR, (errcode_for_file_access(), errmsg("could not create file \"%s\": %m", tmp)));
	if (write(fd, &v, sizeof(v)) != sizeof(v))
	{
		int			save = errno;

		CloseTransientFile(fd);
		errno = save ? save : ENOSPC;
		ereport(ERROR, (errcode_for_file_access(), errmsg("could not write file \"%s\": %m", tmp)));
	}
	if (pg_fsync(fd) != 0)
		ereport(data_sync_elevel(ERROR),
				(errcode_for_file_access(), errmsg("could not fsync file \"%s\": %m", tmp)));
	CloseTransientFile(fd);
	if (durable_rename(tmp, path, ERROR) != 0)
		ereport(ERROR, (errcode_for_file_access(), errmsg("could not rename \"%s\": %m", tmp)));
	pfree(tmp);
}

bool
dex_wb_read_lsn(const char *path, XLogRecPtr *lsn)
{
	uint64		v = 0;
	int			fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	bool		ok;

	if (fd < 0)
		return false;
	ok = read(fd, &v, sizeof(v)) == sizeof(v);
	CloseTransientFile(fd);
	*lsn = v;
	return ok;
}

/* ---- logging (primary) -------------------------------------------------- */

#if PG_VERSION_NUM >= 150000	/* custom WAL resource managers */

static char *log_buf = NULL;	/* malloc'd: never palloc inside dex's frames */
static size_t log_cap = 0;

/*
 * The core's entry log (dex_set_entry_log_fn): runs inside dex's C++ frames,
 * so no error may escape as a longjmp -- the critical section turns one into
 * a PANIC, as for any WAL insertion of a page change.
 */
static void
dex_wb_log_entries(uint32_t node, uint64_t ns, int layout, int insert, int through,
				   const uint8_t *const *entries, const uint32_t *lens, size_t n)
{
	DexWalEntries hdr;
	size_t		size = sizeof(hdr);
	char	   *p;

	if (n == 0 || RecoveryInProgress())
		return;
	for (size_t i = 0; i < n; i++)
		size += sizeof(uint32) + lens[i];
	START_CRIT_SECTION();
	if (size > log_cap)
	{
		char	   *nb = realloc(log_buf, size);

		if (nb == NULL)
			elog(ERROR, "dex: out of memory logging %zu entry changes", n);	/* PANIC here */
		log_buf = nb;
		log_cap = size;
	}
	memset(&hdr, 0, sizeof(hdr));
	hdr.gen = dex_cache_generation();
	hdr.ns = ns;
	hdr.node = node;
	hdr.count = (uint32) n;
	hdr.insert = insert ? 1 : 0;
	hdr.layout = (uint8) (layout + 1);
	hdr.through = through ? 1 : 0;
	memcpy(log_buf, &hdr, sizeof(hdr));
	p = log_buf + sizeof(hdr);
	for (size_t i = 0; i < n; i++)
	{
		memcpy(p, &lens[i], sizeof(uint32));
		memcpy(p + sizeof(uint32), entries[i], lens[i]);
		p += sizeof(uint32) + lens[i];
	}
	XLogBeginInsert();
	XLogRegisterData(log_buf, (uint32) size);
	(void) XLogInsert(DEX_RMGR_ID, XLOG_DEX_ENTRIES);
	END_CRIT_SECTION();
}

static uint64_t
dex_wb_log_position(void)
{
	return RecoveryInProgress() ? 0 : (uint64_t) GetXLogInsertRecPtr();
}

void
dex_wbredo_init(void)
{
	dex_set_entry_log_fn(dex_wb_log_entries);
	dex_set_log_position_fn(dex_wb_log_position);
}
#endif							/* PG_VERSION_NUM >= 150000 */

/*
 * Before a backend turns write-back mode on: this life's flushed position
 * exists on disk (once per life; concurrent openers wait for the first).
 * Nothing of this life was dirty before, so the insert position is one.
 */
void
dex_wb_announce_life(void)
{
	for (;;)
	{
		uint32		s = pg_atomic_read_u32(&wbs->state);

		if (s == WB_WRITTEN)
			return;
		if (s == WB_NONE && pg_atomic_compare_exchange_u32(&wbs->state, &s, WB_WRITING))
		{
			PG_TRY();
			{
				dex_wb_write_lsn(dex_wb_path(dex_cache_generation(), "flushed"), GetXLogInsertRecPtr());
			}
			PG_CATCH();
			{
				pg_atomic_write_u32(&wbs->state, WB_NONE);
				PG_RE_THROW();
			}
			PG_END_TRY();
			pg_atomic_write_u32(&wbs->state, WB_WRITTEN);
			return;
		}
		CHECK_FOR_INTERRUPTS();
		pg_usleep(1000L);
	}
}

/*
 * The write-back worker, after a flush that succeeded: `before` is the WAL
 * insert position it read before the flush began. Every change logged before
 * L = min(before, oldest dirty frame's dirty_since) is in remote memory; L
 * goes, for hot standbys, to WAL (*logged). This life's flushed file gets
 * the same with a frame logged whole since it turned dirty counted from its
 * image (dexwbimage.c): for crash redo, a change before L is in remote
 * memory or in an image logged after L.
 * Returns the flushed position on record for crash redo (PG_UINT64_MAX: no
 * write-back tree in this life, nothing to cover).
 */
uint64
dex_wb_publish_flushed(XLogRecPtr before, uint64 *logged)
{
	/* (per process: the worker's, or a dex_flush() caller's; a lower L
	 * written by another process is only more careful) */
	static XLogRecPtr published = InvalidXLogRecPtr;
	uint64		oldest;
	XLogRecPtr	l;
	uint32		state;

	if (logged)
		*logged = 0;
	if (wbs == NULL)
		return PG_UINT64_MAX;
	/* crash redo: a leaf logged whole since it turned dirty needs redo only from there (dexwbimage.c) */
	l = Min(before, (XLogRecPtr) dex_cache_crash_since_min());
	state = pg_atomic_read_u32(&wbs->state);
	/* (no write-back tree opened in this life: nothing of it can be dirty) */
	if (state == WB_WRITTEN && l > published)
	{
		dex_wb_write_lsn(dex_wb_path(dex_cache_generation(), "flushed"), l);
		published = l;
	}
	/* hot standbys read remote memory: only what is there counts */
	oldest = dex_cache_dirty_since_min();
	l = Min(before, (XLogRecPtr) oldest);
	dex_wbs_log_flushed(dex_cache_generation(), l);	/* hot standbys' scans (dexwbstandby.c) */
	if (logged)
		*logged = l;
	/* being announced: nothing to write yet, and nothing covered yet either */
	return state == WB_NONE ? PG_UINT64_MAX : state == WB_WRITING ? 0 : published;
}

/* Clean shutdown, nothing dirty: no later crash can concern this life. */
void
dex_wb_forget_life(void)
{
	if (wbs == NULL || pg_atomic_read_u32(&wbs->state) != WB_WRITTEN)
		return;
	if (dex_cache_dirty_since_min() != PG_UINT64_MAX)
		return;
	(void) durable_unlink(dex_wb_path(dex_cache_generation(), "flushed"), LOG);
}

/* ---- replay at first use (the records: dexwbreplay.c) --------------------- */

/*
 * Before the index is used in this backend (dexsession.c): if its owner word
 * names a dead life, replay that life's logged changes, or refuse the index.
 * *checked caches "done" per backend and tree handle.
 */
void
dex_wb_redo_gate(Relation index, DexTree *tree, uint64 owner_word, uint64 node, uint64 ns, bool *checked)
{
	uint64		mine = dex_cache_generation();
	uint64		val = 0;
	DexError	err;
	int			rc;
	XLogRecPtr	flushed = InvalidXLogRecPtr;
	XLogRecPtr	redo = InvalidXLogRecPtr;
	const char *why = NULL;
	uint64		changes;
	DexWbSegmentFile *files;
	int			nfiles;

	if (owner_word == 0 || *checked)
		return;
	memset(&err, 0, sizeof(err));
	rc = dex_tree_owner_word_read(tree, owner_word, &val, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, index);
	if (val == 0 || val == mine || RecoveryInProgress())
	{
		/* a standby never replays: dex_tree_set_write_back refuses the index */
		*checked = (val == 0 || val == mine);
		return;
	}

	LockPage(index, DEX_WB_LOCK_BLKNO, ExclusiveLock);
	rc = dex_tree_owner_word_read(tree, owner_word, &val, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, index);
	if (val == 0 || val == mine)
	{
		UnlockPage(index, DEX_WB_LOCK_BLKNO, ExclusiveLock);
		*checked = true;
		return;
	}
	if (!dex_wb_read_lsn(dex_wb_path(val, "flushed"), &flushed))
		why = "this server has no record of how far the crashed instance had written back";
	else if (!dex_wb_read_lsn(dex_wb_path(val, "redo_start"), &redo))
		why = "no recovery of this server collected the crashed instance's changes";
	else if (flushed < redo)
		why = psprintf("its last write-back (%X/%X) came before the checkpoint this server's recovery collected its changes from (%X/%X)",
					   LSN_FORMAT_ARGS(flushed), LSN_FORMAT_ARGS(redo));
	if (why)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("index \"%s\" lost its remote memory", RelationGetRelationName(index)),
				 errdetail("Dirty nodes of write-back mode were lost in a crash and cannot be replayed: %s.", why),
				 errhint("REINDEX INDEX %s", quote_identifier(RelationGetRelationName(index)))));

	/* write through while replaying: the word is not ours yet */
	rc = dex_tree_set_write_back(tree, 0, 0, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, index);
	changes = dex_wb_replay_segments(index, tree, val, (uint32) node, ns, &files, &nfiles);
	rc = dex_tree_owner_word_release(tree, owner_word, val, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, index);
	/* the word no longer names that life: its files can never be used again */
	for (int i = 0; i < nfiles; i++)
		if (unlink(files[i].path) != 0 && errno != ENOENT)
			ereport(WARNING, (errcode_for_file_access(), errmsg("could not remove \"%s\": %m", files[i].path)));
#if PG_VERSION_NUM >= 150000
	{
		/* ... nor the copies a standby collected (their replay drops them) */
		uint64		p[3] = {val, ns, node};

		XLogBeginInsert();
		XLogRegisterData((char *) p, sizeof(p));
		(void) XLogInsert(DEX_RMGR_ID, XLOG_DEX_WB_REPLAYED);
	}
#endif
	UnlockPage(index, DEX_WB_LOCK_BLKNO, ExclusiveLock);
	ereport(LOG,
			(errmsg("dex: index \"%s\": replayed %llu entry changes that a crash took from write-back frames",
					RelationGetRelationName(index), (unsigned long long) changes)));
	*checked = true;
}
