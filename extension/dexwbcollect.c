/*
 * dexwbcollect.c — recovery collects a write-back life's logged entry
 * changes, so that the first use of a tree that life left dirty replays them
 * (dexwbredo.c; src/README.md "Write-back mode", "Redo after a crash",
 * "Failover").
 *
 * Two recoveries collect (a restore to a point in time collects nothing):
 *   - crash recovery: this server's own dead life's changes;
 *   - a hot standby's replay: the primary's changes, so that a promoted
 *     standby replays what the old primary's crash took from its dirty frames
 *     as the old primary itself would have.
 *
 * In pg_dex_wb/, for a life G (cache generation):
 *   <G>.<node>.<ns>.<seg>.ops  one tree's XLOG_DEX_ENTRIES records as
 *       replayed, segments in log order by number;
 *   <G>.redo_start  R: every change G logged at or after R is collected;
 *   <G>.flushed     L: every change G logged before L is in remote memory
 *       (the primary writes it itself; a standby writes the L of the last
 *       XLOG_DEX_WB_FLUSHED of G it replayed). After XLOG_DEX_WB_IMAGED
 *       (dexwbimage.c), "or in a leaf image G logged after L".
 * The gate replays G's segments when L >= R.
 *
 * Bounded: a replayed XLOG_DEX_WB_FLUSHED(G, L) drops G's segments whose
 * last record comes before L (written back; segments are dropped as a prefix
 * of the log, never from its middle); a segment is closed at
 * WBC_SEGMENT_BYTES. So a standby holds about what the primary has not yet
 * written back.
 *
 * Durability. Crash recovery fsyncs at rm_cleanup, before the end-of-recovery
 * checkpoint recycles the WAL. A standby does not fsync per record: its
 * collection of a life is *sealed* -- fsynced, L written as <G>.flushed --
 * when the life ends in the WAL (a record of another life follows) and at
 * promotion (rm_cleanup). A collection that is not sealed when recovery
 * starts again (no <G>.flushed) is dropped -- its tail may have been lost
 * with the OS's page cache -- and collected again from the new start R'; a
 * promoted standby then replays that life only if its L >= R' (the primary
 * flushes all the time, so L passes R' within a beat of any write), else it
 * refuses the index (REINDEX), never answers without rows.
 *
 * A record replayed twice (recovery started again before the position it had
 * reached) is harmless: insert and delete are idempotent per entry, and a
 * repeated suffix of the log ends in the state it ended in.
 */
#include "dex.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xlogreader.h"
#include "access/xlogrecovery.h"
#include "storage/fd.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#if PG_VERSION_NUM >= 150000

#define WBC_SEGMENT_BYTES	(256 * 1024)	/* a segment is closed past this */
#define WBC_CLOSED_MAX		32	/* closed segments remembered per tree */
#define WBC_BUFFER_BYTES	(32 * 1024)	/* records held per tree before a write */

typedef struct WbcTreeKey
{
	uint64		gen;
	uint64		ns;
	uint32		node;
	uint32		pad;
} WbcTreeKey;

/* one tree's collection in this recovery (startup process memory) */
typedef struct WbcTree
{
	WbcTreeKey	key;
	uint32		seg;			/* the open segment's number */
	uint64		seg_bytes;		/* bytes in it (0: not created yet) */
	uint64		seg_last;		/* position of its last record */
	int			nclosed;
	uint32		closed_seg[WBC_CLOSED_MAX];
	uint64		closed_last[WBC_CLOSED_MAX];
	char	   *buf;			/* records of the open segment not written yet */
	uint32		buf_len;
} WbcTree;

static bool collecting = false;
static XLogRecPtr collect_redo = InvalidXLogRecPtr;
static HTAB *wbc_trees = NULL;
static uint64 cur_gen = 0;		/* the life whose records come now */
static XLogRecPtr cur_l = InvalidXLogRecPtr;	/* its highest replayed L */
static MemoryContext wbc_cxt = NULL;	/* paths etc. of one hook call, reset after it */
static int	open_fd = -1;		/* the open segment of open_tree */
static WbcTree *open_tree = NULL;

/* ---- files -------------------------------------------------------------- */

static void
wbc_close_fd(void)
{
	if (open_fd >= 0)
		CloseTransientFile(open_fd);
	open_fd = -1;
	open_tree = NULL;
}

/* Open tree t's open segment for appending (the one cached descriptor). */
static void
wbc_open_segment(WbcTree *t)
{
	char	   *path;

	if (open_tree == t)
		return;
	wbc_close_fd();
	path = dex_wb_segment_path(t->key.gen, t->key.node, t->key.ns, t->seg);
	open_fd = OpenTransientFile(path, O_WRONLY | O_CREAT | O_APPEND | PG_BINARY);
	if (open_fd < 0)
		ereport(PANIC, (errcode_for_file_access(), errmsg("could not open \"%s\": %m", path)));
	open_tree = t;
	pfree(path);
}

/*
 * Write what tree t holds back to its open segment. (Held back in memory
 * only: a standby's unsealed collection is dropped by a restart anyway, and
 * every seal and the end of recovery write it first. The startup process
 * replays every insert of the primary: no system call per record.)
 */
static void
wbc_write_out(WbcTree *t)
{
	if (t->buf_len == 0)
		return;
	wbc_open_segment(t);
	if (write(open_fd, t->buf, t->buf_len) != (ssize_t) t->buf_len)
		ereport(PANIC, (errcode_for_file_access(), errmsg("could not write a write-back redo segment: %m")));
	t->buf_len = 0;
}

static void
wbc_unlink(const char *path)
{
	if (unlink(path) != 0 && errno != ENOENT)
		ereport(ERROR, (errcode_for_file_access(), errmsg("could not remove \"%s\": %m", path)));
}

static bool
wbc_exists(const char *path)
{
	return access(path, F_OK) == 0;
}

/*
 * Before this recovery collects: give lives that left a flushed position
 * their start; drop collections this recovery redoes (started at this same
 * R) and unsealed ones (no flushed position).
 */
static void
wbc_prepare_dir(void)
{
	DIR		   *dir;
	struct dirent *de;

	dex_wb_make_dir();
	dir = AllocateDir(DEX_WB_DIR);
	while ((de = ReadDir(dir, DEX_WB_DIR)) != NULL)
	{
		unsigned long long gen;
		char		rest[64];
		XLogRecPtr	r;

		if (sscanf(de->d_name, "%16llx.%63s", &gen, rest) == 2 && strcmp(rest, "flushed") == 0 &&
			!dex_wb_read_lsn(dex_wb_path(gen, "redo_start"), &r))
			dex_wb_write_lsn(dex_wb_path(gen, "redo_start"), collect_redo);
	}
	FreeDir(dir);

	dir = AllocateDir(DEX_WB_DIR);
	while ((de = ReadDir(dir, DEX_WB_DIR)) != NULL)
	{
		unsigned long long gen;
		char		rest[64];
		XLogRecPtr	r;
		bool		sealed;
		bool		ops;

		if (sscanf(de->d_name, "%16llx.%63s", &gen, rest) != 2)
			continue;
		ops = strlen(rest) > 4 && strcmp(rest + strlen(rest) - 4, ".ops") == 0;
		if (!ops && strcmp(rest, "redo_start") != 0)
			continue;
		sealed = wbc_exists(dex_wb_path(gen, "flushed"));
		if (!sealed || (ops && dex_wb_read_lsn(dex_wb_path(gen, "redo_start"), &r) && r == collect_redo))
			wbc_unlink(psprintf("%s/%s", DEX_WB_DIR, de->d_name));
	}
	FreeDir(dir);
}

/* The number after the highest segment of a tree on disk (0: none). */
static uint32
wbc_next_segment(const WbcTreeKey *k)
{
	DIR		   *dir = AllocateDir(DEX_WB_DIR);
	struct dirent *de;
	uint32		next = 0;

	while ((de = ReadDir(dir, DEX_WB_DIR)) != NULL)
	{
		int			seg = dex_wb_segment_of(de->d_name, k->gen, k->node, k->ns);

		if (seg >= 0 && (uint32) seg + 1 > next)
			next = (uint32) seg + 1;
	}
	FreeDir(dir);
	return next;
}

/* ---- lives -------------------------------------------------------------- */

/*
 * Life G's collection is complete up to here: its segments fsynced, its L
 * durable (never lowered: the primary's own file may be ahead).
 */
static void
wbc_seal(uint64 gen, XLogRecPtr l)
{
	DIR		   *dir;
	struct dirent *de;
	XLogRecPtr	old;
	char	   *flushed = dex_wb_path(gen, "flushed");
	HASH_SEQ_STATUS seq;
	WbcTree    *t;

	hash_seq_init(&seq, wbc_trees);
	while ((t = hash_seq_search(&seq)) != NULL)
		if (t->key.gen == gen)
			wbc_write_out(t);
	wbc_close_fd();
	dir = AllocateDir(DEX_WB_DIR);
	while ((de = ReadDir(dir, DEX_WB_DIR)) != NULL)
	{
		unsigned long long g;
		char		rest[64];

		if (sscanf(de->d_name, "%16llx.%63s", &g, rest) == 2 && g == gen && strcmp(rest, "flushed") != 0)
			fsync_fname(psprintf("%s/%s", DEX_WB_DIR, de->d_name), false);
	}
	FreeDir(dir);
	fsync_fname(DEX_WB_DIR, true);
	if (l != InvalidXLogRecPtr && (!dex_wb_read_lsn(flushed, &old) || old < l))
		dex_wb_write_lsn(flushed, l);
}

/* A record of life `gen` is replayed: the previous life ended in the WAL. */
static void
wbc_switch_life(uint64 gen)
{
	XLogRecPtr	r;

	if (gen == cur_gen)
		return;
	if (cur_gen != 0)
		wbc_seal(cur_gen, cur_l);
	cur_gen = gen;
	cur_l = InvalidXLogRecPtr;
	if (!dex_wb_read_lsn(dex_wb_path(gen, "redo_start"), &r))
		dex_wb_write_lsn(dex_wb_path(gen, "redo_start"), collect_redo);
}

static WbcTree *
wbc_tree(uint64 gen, uint32 node, uint64 ns)
{
	WbcTreeKey	k;
	WbcTree    *t;
	bool		found;

	memset(&k, 0, sizeof(k));
	k.gen = gen;
	k.node = node;
	k.ns = ns;
	t = hash_search(wbc_trees, &k, HASH_ENTER, &found);
	if (!found)
	{
		/* after what an earlier recovery left of it (a sealed life's segments) */
		t->seg = wbc_next_segment(&k);
		t->seg_bytes = 0;
		t->seg_last = 0;
		t->nclosed = 0;
		t->buf = NULL;
		t->buf_len = 0;
	}
	return t;
}

/* Life `gen` wrote back everything it logged before l: drop those segments. */
static void
wbc_prune(uint64 gen, XLogRecPtr l)
{
	HASH_SEQ_STATUS seq;
	WbcTree    *t;

	hash_seq_init(&seq, wbc_trees);
	while ((t = hash_seq_search(&seq)) != NULL)
	{
		int			keep = 0;

		if (t->key.gen != gen)
			continue;
		for (int i = 0; i < t->nclosed; i++)
		{
			if (t->closed_last[i] < l)
				wbc_unlink(dex_wb_segment_path(gen, t->key.node, t->key.ns, t->closed_seg[i]));
			else
			{
				t->closed_seg[keep] = t->closed_seg[i];
				t->closed_last[keep++] = t->closed_last[i];
			}
		}
		t->nclosed = keep;
		if (t->seg_bytes == 0)
			continue;
		if (t->seg_last < l)
		{
			/* (then every closed one went above: segments are in log order) */
			if (open_tree == t)
				wbc_close_fd();
			t->buf_len = 0;
			wbc_unlink(dex_wb_segment_path(gen, t->key.node, t->key.ns, t->seg));
		}
		else if (t->seg_bytes >= WBC_SEGMENT_BYTES && t->nclosed < WBC_CLOSED_MAX)
		{
			wbc_write_out(t);
			if (open_tree == t)
				wbc_close_fd();
			t->closed_seg[t->nclosed] = t->seg;
			t->closed_last[t->nclosed++] = t->seg_last;
		}
		else
			continue;			/* (keeps appending to the open segment) */
		t->seg++;
		t->seg_bytes = 0;
		t->seg_last = 0;
	}
}

/* ---- the resource manager's hooks --------------------------------------- */

void
dex_wb_redo_startup(void)
{
	HASHCTL		ctl;

	dex_wbs_redo_startup();
	collecting = !ArchiveRecoveryRequested || StandbyMode;
	if (!collecting)
		return;
	collect_redo = GetRedoRecPtr();
	if (wbc_cxt == NULL)
		wbc_cxt = AllocSetContextCreate(TopMemoryContext, "dex write-back collection",
										ALLOCSET_SMALL_SIZES);
	wbc_prepare_dir();
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(WbcTreeKey);
	ctl.entrysize = sizeof(WbcTree);
	ctl.hcxt = TopMemoryContext;
	wbc_trees = hash_create("dex write-back collection", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	cur_gen = 0;
	cur_l = InvalidXLogRecPtr;
}

static void wbc_collect_entries(XLogReaderState *record, const DexWalEntries *hdr);

void
dex_wb_redo_entries(XLogReaderState *record)
{
	const char *data = XLogRecGetData(record);
	uint32		len = XLogRecGetDataLen(record);
	DexWalEntries hdr;
	MemoryContext old;

	if (len < sizeof(hdr))
		elog(PANIC, "dex_redo: short entries record");
	memcpy(&hdr, data, sizeof(hdr));
	/*
	 * A hot standby's scans wait until the primary wrote this back -- not for
	 * an image (no change) nor for a change written through (in remote memory
	 * before it was logged, W11). Crash redo collects both kinds alike: a
	 * change written through may follow one made in place.
	 */
	if (hdr.insert != DEX_WAL_LEAF_IMAGE && !hdr.through)
		dex_wbs_redo_entries(hdr.node, hdr.ns, (int) hdr.layout - 1, data + sizeof(hdr), hdr.count,
							 len - (uint32) sizeof(hdr), record->ReadRecPtr);
	if (!collecting)
		return;
	old = MemoryContextSwitchTo(wbc_cxt);
	wbc_collect_entries(record, &hdr);
	MemoryContextSwitchTo(old);
	MemoryContextReset(wbc_cxt);
}

/* Append the record to its tree's open segment (held back up to WBC_BUFFER_BYTES). */
static void
wbc_collect_entries(XLogReaderState *record, const DexWalEntries *hdr)
{
	const char *data = XLogRecGetData(record);
	uint32		len = XLogRecGetDataLen(record);
	uint64		lsn = record->ReadRecPtr;
	WbcTree    *t;
	size_t		size = sizeof(lsn) + sizeof(len) + len;

	wbc_switch_life(hdr->gen);
	t = wbc_tree(hdr->gen, hdr->node, hdr->ns);
	if (t->buf == NULL)
		t->buf = MemoryContextAlloc(TopMemoryContext, WBC_BUFFER_BYTES);
	if (t->buf_len + size > WBC_BUFFER_BYTES)
		wbc_write_out(t);
	if (size > WBC_BUFFER_BYTES)
	{
		wbc_open_segment(t);
		if (!dex_wb_segment_append(open_fd, lsn, data, len))
			ereport(PANIC, (errcode_for_file_access(), errmsg("could not write a write-back redo segment: %m")));
	}
	else
	{
		memcpy(t->buf + t->buf_len, &lsn, sizeof(lsn));
		memcpy(t->buf + t->buf_len + sizeof(lsn), &len, sizeof(len));
		memcpy(t->buf + t->buf_len + sizeof(lsn) + sizeof(len), data, len);
		t->buf_len += (uint32) size;
	}
	t->seg_bytes += (uint64) size;
	t->seg_last = lsn;
}

/* Collection: life gen's changes logged before l need no redo (its L, its segments before l). */
static void
wbc_raise_flushed(uint64 gen, XLogRecPtr l)
{
	MemoryContext old;

	if (!collecting)
		return;
	old = MemoryContextSwitchTo(wbc_cxt);
	wbc_switch_life(gen);
	if (l > cur_l)
		cur_l = l;
	wbc_prune(gen, l);
	MemoryContextSwitchTo(old);
	MemoryContextReset(wbc_cxt);
}

/* Replay of XLOG_DEX_WB_FLUSHED: a life wrote back what it logged before L. */
void
dex_wb_redo_flushed(XLogReaderState *record)
{
	uint64		p[2];			/* life, L */

	if (XLogRecGetDataLen(record) != sizeof(p))
		elog(PANIC, "dex_redo: flushed-position record of %u bytes", XLogRecGetDataLen(record));
	memcpy(p, XLogRecGetData(record), sizeof(p));
	dex_wbs_redo_flushed(p[0], p[1]);	/* a hot standby's waiting scans */
	wbc_raise_flushed(p[0], p[1]);
}

/*
 * Replay of XLOG_DEX_WB_IMAGED (dexwbimage.c): life gen logged its dirty
 * leaves whole, and every change it logged before L is in remote memory or
 * in one of those images (after L). Crash redo -- and a standby promoted in
 * the primary's place -- may start at L: it raises the life's L and drops
 * the segments before it, as a flushed position does. A hot standby's scans
 * are not told: what they read, remote memory, did not change.
 */
void
dex_wb_redo_imaged(XLogReaderState *record)
{
	uint64		p[2];			/* life, L */

	if (XLogRecGetDataLen(record) != sizeof(p))
		elog(PANIC, "dex_redo: images record of %u bytes", XLogRecGetDataLen(record));
	memcpy(p, XLogRecGetData(record), sizeof(p));
	wbc_raise_flushed(p[0], p[1]);
}

/*
 * Replay of XLOG_DEX_WB_REPLAYED: a server replayed a dead life's changes of
 * one tree, which no longer names that life -- its segments are of no use.
 */
void
dex_wb_redo_replayed(XLogReaderState *record)
{
	uint64		p[3];			/* life, ns, node */
	WbcTree    *t;
	WbcTreeKey	k;
	DIR		   *dir;
	struct dirent *de;

	if (XLogRecGetDataLen(record) != sizeof(p))
		elog(PANIC, "dex_redo: replayed-life record of %u bytes", XLogRecGetDataLen(record));
	memcpy(p, XLogRecGetData(record), sizeof(p));
	if (!collecting)
		return;
	memset(&k, 0, sizeof(k));
	k.gen = p[0];
	k.ns = p[1];
	k.node = (uint32) p[2];
	t = hash_search(wbc_trees, &k, HASH_FIND, NULL);
	if (t != NULL && open_tree == t)
		wbc_close_fd();
	if (t != NULL)
	{
		if (t->buf)
			pfree(t->buf);
		hash_search(wbc_trees, &k, HASH_REMOVE, NULL);
	}
	dir = AllocateDir(DEX_WB_DIR);
	while ((de = ReadDir(dir, DEX_WB_DIR)) != NULL)
	{
		if (dex_wb_segment_of(de->d_name, k.gen, k.node, k.ns) >= -1)
		{
			char	   *path = psprintf("%s/%s", DEX_WB_DIR, de->d_name);

			wbc_unlink(path);
			pfree(path);
		}
	}
	FreeDir(dir);
}

/* End of redo (crash recovery or promotion), before the checkpoint recycles the WAL. */
void
dex_wb_redo_cleanup(void)
{
	DIR		   *dir;
	struct dirent *de;

	if (!collecting)
		return;
	if (cur_gen != 0)
		wbc_seal(cur_gen, cur_l);
	{
		HASH_SEQ_STATUS seq;
		WbcTree    *t;

		hash_seq_init(&seq, wbc_trees);
		while ((t = hash_seq_search(&seq)) != NULL)
		{
			wbc_write_out(t);	/* (a record of a sealed life replayed again) */
			if (t->buf)
				pfree(t->buf);
		}
	}
	wbc_close_fd();
	dir = AllocateDir(DEX_WB_DIR);
	while ((de = ReadDir(dir, DEX_WB_DIR)) != NULL)
	{
		if (de->d_name[0] == '.')
			continue;
		fsync_fname(psprintf("%s/%s", DEX_WB_DIR, de->d_name), false);
	}
	FreeDir(dir);
	fsync_fname(DEX_WB_DIR, true);
	hash_destroy(wbc_trees);
	wbc_trees = NULL;
	collecting = false;
}
#endif							/* PG_VERSION_NUM >= 150000 */
