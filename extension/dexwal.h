/*
 * dexwal.h — dex's WAL and what replays it: the resource manager and its
 * records (dexwal.c), a write-back kill's conflict horizon (dexkillwal.c),
 * write-back indexes after a crash (dexwbcollect.c, dexwbredo.c,
 * dexwbreplay.c, dexwbimage.c) and on hot standbys (dexwbstandby.c,
 * dexwbsplaces.c). Part of dex.h, which includes it (the files' order and
 * the types these declarations use are there); kept apart because it is
 * one concern of about a hundred declarations.
 */
#ifndef DEXWAL_H
#define DEXWAL_H

/* ---- dexwal.c --------------------------------------------------------- */

extern void dex_wal_init(void);

/* dexwal.c / dexwbredo.c: dex's WAL resource manager and its records */
#define DEX_RMGR_ID			141
#define XLOG_DEX_NODES		0x10	/* nodes a write changes (standbys' caches) */
#define XLOG_DEX_ENTRIES	0x20	/* entry changes of a write-back tree (crash redo) */
#define XLOG_DEX_WB_FLUSHED	0x30	/* the primary's flushed position (standbys' scans) */
#define XLOG_DEX_KILL		0x40	/* a write-back kill's conflict horizon (dexkillwal.c) */
#define XLOG_DEX_WB_REPLAYED	0x50	/* a dead life's changes of one tree replayed (dexwbcollect.c) */
#define XLOG_DEX_WB_IMAGED	0x60	/* dirty leaves logged whole: crash redo's flushed position (dexwbimage.c) */

/* dexkillwal.c: a write-back kill's conflict horizon (K7) */
extern bool dex_kill_scan_horizon(Relation heap, ItemPointerData *tids, int n, TransactionId *horizon);
extern uint64 dex_kill_log_horizon(Relation index, TransactionId horizon);
#if PG_VERSION_NUM >= 150000
struct XLogReaderState;
extern void dex_kill_redo(struct XLogReaderState *record);
extern void dex_kill_desc(struct StringInfoData *buf, struct XLogReaderState *record);
#endif

/* dexwbstandby.c: write-back indexes on hot standbys */
extern Size dex_wbstandby_shmem_size(void);
extern void dex_wbstandby_shmem_init(void *mem, bool found);
/* ask_flush: asks the primary to write back up to a position (dex_cluster_request_flush) */
extern void dex_wb_standby_wait(Relation index, DexTree *tree, uint64 owner_word, uint32 node, uint64 ns,
								int timeout_ms, uint64 *checked_life, void (*ask_flush) (uint64 lsn),
								const DexWbsPlaces *places);
extern void dex_wbs_log_flushed(uint64 gen, uint64 l);
extern void dex_wbs_note_standbys(bool live);
#if PG_VERSION_NUM >= 150000
struct XLogReaderState;
extern void dex_wbs_redo_startup(void);
extern void dex_wbs_redo_entries(uint32 node, uint64 ns, int layout, const char *entries, uint32 count,
								 uint32 len, uint64 lsn);
extern void dex_wbs_redo_flushed(uint64 gen, uint64 l);
#endif

/* dexwbsplaces.c: where a standby's replayed entry changes lie in the key order */
#define DEX_WBS_TREES	256		/* trees a standby tracks apart (beyond: one for all) */
struct DexWbsPlaces
{
	uint64		lo;				/* a scan range's key places, lo <= hi */
	uint64		hi;
};
extern Size dex_wbs_places_shmem_size(void);
extern void dex_wbs_places_shmem_init(void *mem, bool found);
extern void dex_wbs_places_of_keys(const DexKey *lo, const DexKey *hi, DexWbsPlaces *out);
extern void dex_wbs_places_of_bytes(const uint8 *lo, size_t lolen, const uint8 *hi, size_t hilen,
									DexWbsPlaces *out);
extern bool dex_wbs_places_note(int tree, int layout, const char *entries, uint32 count, uint32 len,
								uint64 lsn, uint64 flushed);
extern uint64 dex_wbs_places_need(int tree, const DexWbsPlaces *r);

/* dexwbcollect.c: recovery collects a write-back life's logged entry changes */
#if PG_VERSION_NUM >= 150000
struct XLogReaderState;
extern void dex_wb_redo_startup(void);
extern void dex_wb_redo_entries(struct XLogReaderState *record);
extern void dex_wb_redo_flushed(struct XLogReaderState *record);
extern void dex_wb_redo_replayed(struct XLogReaderState *record);
extern void dex_wb_redo_imaged(struct XLogReaderState *record);
extern void dex_wb_redo_cleanup(void);
#endif

/* dexwbredo.c: write-back mode survives a crash */
#define DEX_WB_DIR			"pg_dex_wb"

/* XLOG_DEX_ENTRIES payload: this header, then count x (uint32 len, bytes) */
typedef struct DexWalEntries
{
	uint64		gen;			/* cache generation (life) that made the change */
	uint64		ns;				/* the tree's home namespace ... */
	uint32		node;			/* ... on this memory node */
	uint32		count;
	uint8		insert;			/* 1: insert, 0: delete, DEX_WAL_LEAF_IMAGE: a leaf logged whole */
	uint8		layout;			/* DEX_LAYOUT_* + 1; 0: not told (records of dex before 2026-11-29) */
	uint8		through;		/* 1: in remote memory before it was logged, no frame left dirty
								 * (standbys' scans need not wait for it); 0: maybe not */
	uint8		pad[5];
} DexWalEntries;

/*
 * DexWalEntries.insert of a leaf logged whole (dexwbimage.c): count 1, the
 * entry is the leaf's node image; redo makes its key range hold exactly its
 * entries. No change of its own: standbys' scans do not wait for it.
 */
#define DEX_WAL_LEAF_IMAGE	2

extern char *dex_wb_path(uint64 gen, const char *suffix);
/* a tree's collected records: DEX_WB_DIR/<life>.<node>.<ns>.<seg>.ops (path helpers: dexwbreplay.c) */
#define DEX_WB_SEGMENT_FMT	"%s/%016llx.%u.%016llx.%08x.ops"
extern char *dex_wb_segment_path(uint64 gen, uint32 node, uint64 ns, uint32 seg);
extern int	dex_wb_segment_of(const char *name, uint64 gen, uint32 node, uint64 ns);
extern bool dex_wb_segment_append(int fd, uint64 lsn, const char *data, uint32 len);
extern void dex_wb_make_dir(void);
extern void dex_wb_write_lsn(const char *path, uint64 lsn);
extern bool dex_wb_read_lsn(const char *path, uint64 *lsn);
extern Size dex_wbredo_shmem_size(void);
extern void dex_wbredo_shmem_init(void *mem, bool found);
extern void dex_wbredo_init(void);
extern void dex_wb_announce_life(void);
/* returns the flushed position on record (PG_UINT64_MAX: no write-back tree in this life) */
extern uint64 dex_wb_publish_flushed(uint64 before, uint64 *logged);
extern void dex_wb_forget_life(void);

/* dexwbreplay.c: the first use after a crash applies the collected changes */
typedef struct DexWbSegmentFile
{
	int			seg;			/* -1: the one file of a dex before segments */
	char	   *path;
} DexWbSegmentFile;
extern uint64 dex_wb_replay_segments(Relation index, DexTree *tree, uint64 gen, uint32 node, uint64 ns,
									 DexWbSegmentFile **files, int *nfiles);

/* dexwbimage.c: a checkpoint that cannot write back logs the dirty leaves */
extern bool dex_wb_cover_with_images(uint64 redo, uint64 *flushed);
extern void dex_wb_spill_images(void);
extern void dex_wb_redo_gate(Relation index, DexTree *tree, uint64 owner_word, uint64 node, uint64 ns,
							 bool *checked);

#endif							/* DEXWAL_H */
