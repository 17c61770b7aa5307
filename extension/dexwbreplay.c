/*
 * dexwbreplay.c — the first use of a write-back index after a crash applies
 * the changes its dead life logged (src/README.md "Write-back mode", redo
 * after a crash; the gate that decides to is dex_wb_redo_gate, dexwbredo.c).
 *
 * The collected records of one tree (pg_dex_wb/<life>.<node>.<ns>.<seg>.ops,
 * dexwbcollect.c) are applied in log order, written through. Insert and
 * delete are idempotent per entry, and inserts commute with each other: a
 * run of consecutive insert records is therefore applied as one batch
 * (dex_tree_insert_batch: up to 256 entries per memory node in a round trip)
 * before the next delete or leaf image, which keeps the log's order wherever
 * it matters. One insert at a time, a crash that left 20000 changes made the
 * first query wait for 20000 write-through inserts.
 */
#include "dex.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "storage/fd.h"
#include "utils/rel.h"

#define WB_BATCH_MAX	4096	/* entries gathered before a batch goes */

/* Segment `seg` of the entry changes life `gen` logged for tree (node, ns). */
char *
dex_wb_segment_path(uint64 gen, uint32 node, uint64 ns, uint32 seg)
{
	return psprintf(DEX_WB_SEGMENT_FMT, DEX_WB_DIR, (unsigned long long) gen, node,
					(unsigned long long) ns, seg);
}

/*
 * If file `name` (in DEX_WB_DIR) holds entry changes of (gen, node, ns): its
 * segment number, or -1 for the one file of a dex before segments (older
 * than any segment); otherwise -2.
 */
int
dex_wb_segment_of(const char *name, uint64 gen, uint32 node, uint64 ns)
{
	unsigned long long g;
	unsigned long long n;
	unsigned	nd;
	unsigned	seg;
	int			end = 0;
	int			k;

	if (sscanf(name, "%16llx.%u.%16llx.ops%n", &g, &nd, &n, &end) == 3 && end > 0 && name[end] == '\0')
		k = -1;
	else if (sscanf(name, "%16llx.%u.%16llx.%8x.ops%n", &g, &nd, &n, &seg, &end) == 4 && end > 0 &&
			 name[end] == '\0' && seg <= (unsigned) INT_MAX)
		k = (int) seg;
	else
		return -2;
	return (g == gen && nd == node && n == ns) ? k : -2;
}

/*
 * Append one record to an open segment: its log position, its length, the
 * XLOG_DEX_ENTRIES payload (the form wb_replay_file reads). No ereport (the
 * shutdown's image log runs inside C++ frames): false with errno set.
 */
bool
dex_wb_segment_append(int fd, uint64 lsn, const char *data, uint32 len)
{
	struct iovec iov[3];

	iov[0].iov_base = &lsn;
	iov[0].iov_len = sizeof(lsn);
	iov[1].iov_base = &len;
	iov[1].iov_len = sizeof(len);
	iov[2].iov_base = unconstify(char *, data);
	iov[2].iov_len = len;
	errno = 0;
	return writev(fd, iov, 3) == (ssize_t) (sizeof(lsn) + sizeof(len) + len);
}

/* A run of inserts not applied yet (entries point into the file being replayed). */
typedef struct WbBatch
{
	Relation	index;
	DexTree    *tree;
	bool		bytes;
	int			n;
	DexKey		keys[WB_BATCH_MAX];
	DexBytes	ents[WB_BATCH_MAX];
	uint64		lsns[WB_BATCH_MAX]; /* all 0: the rows are durable */
} WbBatch;

/* the index order: the batch reaches each leaf's entries together */
static int
wb_cmp_key(const void *a, const void *b)
{
	const DexKey *x = a;
	const DexKey *y = b;

	return DEX_KEY_COMPARE(x, y);
}

static int
wb_cmp_bytes(const void *a, const void *b)
{
	const DexBytes *x = a;
	const DexBytes *y = b;
	int			c = memcmp(x->data, y->data, Min(x->len, y->len));

	return c != 0 ? c : (x->len > y->len) - (x->len < y->len);
}

/* Apply the gathered inserts (deduplicated: a record may repeat an entry). */
static void
wb_batch_flush(WbBatch *b)
{
	DexError	err;
	int			rc;
	int			n = 0;
	int			done = 0;

	if (b->n == 0)
		return;
	if (b->bytes)
	{
		qsort(b->ents, b->n, sizeof(DexBytes), wb_cmp_bytes);
		for (int i = 0; i < b->n; i++)
			if (n == 0 || wb_cmp_bytes(&b->ents[n - 1], &b->ents[i]) != 0)
				b->ents[n++] = b->ents[i];
	}
	else
	{
		qsort(b->keys, b->n, sizeof(DexKey), wb_cmp_key);
		for (int i = 0; i < b->n; i++)
			if (n == 0 || wb_cmp_key(&b->keys[n - 1], &b->keys[i]) != 0)
				b->keys[n++] = b->keys[i];
	}
	memset(&err, 0, sizeof(err));
	rc = b->bytes ? dex_tree_insert_batch_bytes(b->tree, b->ents, b->lsns, n, PG_UINT64_MAX, &done, &err)
		: dex_tree_insert_batch(b->tree, b->keys, b->lsns, n, PG_UINT64_MAX, &done, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, b->index);
	b->n = 0;
}

/* Redo at first use of one collected leaf image (record payload p..end). */
static void
wb_apply_image(Relation index, DexTree *tree, const char *p, const char *end, uint64 *changed)
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

/* One collected record: inserts join the batch, anything else applies after it. */
static uint64
wb_apply(WbBatch *b, const DexWalEntries *hdr, const char *p, const char *end)
{
	DexBytes   *be = NULL;
	DexKey	   *ke = NULL;
	uint64		deleted = 0;
	DexError	err;
	int			rc;

	if (hdr->insert != 1)
		wb_batch_flush(b);		/* a delete or an image: after the inserts before it */
	if (hdr->insert == DEX_WAL_LEAF_IMAGE)
	{
		uint64		changed;

		wb_apply_image(b->index, b->tree, p, end, &changed);
		return changed;
	}
	if (!hdr->insert)
	{
		be = palloc(sizeof(DexBytes) * Max(hdr->count, 1));
		ke = palloc(sizeof(DexKey) * Max(hdr->count, 1));
	}
	for (uint32 i = 0; i < hdr->count; i++)
	{
		const uint8 *e;
		uint32		len;

		if (!dex_wal_entry_next(&p, end, &e, &len) || (!b->bytes && len != sizeof(DexKey)))
			elog(ERROR, "dex: write-back redo of index \"%s\": truncated record or bad entry",
				 RelationGetRelationName(b->index));
		if (hdr->insert)
		{
			if (b->n == WB_BATCH_MAX)
				wb_batch_flush(b);
			if (b->bytes)
			{
				b->ents[b->n].data = e;
				b->ents[b->n].len = len;
			}
			else
				memcpy(&b->keys[b->n], e, sizeof(DexKey));
			b->n++;
		}
		else
		{
			be[i].data = e;
			be[i].len = len;
			if (!b->bytes)
				memcpy(&ke[i], e, sizeof(DexKey));
		}
	}
	if (hdr->insert)
		return hdr->count;
	memset(&err, 0, sizeof(err));
	rc = b->bytes ? dex_tree_delete_bytes(b->tree, be, (int) hdr->count, &deleted, &err)
		: dex_tree_delete(b->tree, ke, (int) hdr->count, &deleted, &err);
	if (rc != DEX_OK)
		dex_report_error(rc, &err, b->index);
	pfree(be);
	pfree(ke);
	return hdr->count;
}

/* Replay one segment of (gen, tree); returns the entry changes applied. */
static uint64
wb_replay_file(WbBatch *b, const char *path, uint64 gen)
{
	struct stat st;
	char	   *buf;
	char	   *p;
	char	   *end;
	int			fd;
	uint64		changes = 0;

	fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	if (fd < 0)
	{
		if (errno == ENOENT)
			return 0;			/* nothing of this tree was logged after R */
		ereport(ERROR, (errcode_for_file_access(), errmsg("could not open \"%s\": %m", path)));
	}
	if (fstat(fd, &st) != 0)
		ereport(ERROR, (errcode_for_file_access(), errmsg("could not stat \"%s\": %m", path)));
	buf = palloc_extended(Max(st.st_size, 1), MCXT_ALLOC_HUGE);
	if (read(fd, buf, st.st_size) != st.st_size)
		ereport(ERROR, (errcode_for_file_access(), errmsg("could not read \"%s\": %m", path)));
	CloseTransientFile(fd);
	p = buf;
	end = buf + st.st_size;
	while (p < end)
	{
		uint64		lsn;
		uint32		len;
		DexWalEntries hdr;

		if (end - p < (ptrdiff_t) (sizeof(lsn) + sizeof(len)))
			elog(ERROR, "dex: write-back redo file \"%s\" is truncated", path);
		memcpy(&lsn, p, sizeof(lsn));
		memcpy(&len, p + sizeof(lsn), sizeof(len));
		p += sizeof(lsn) + sizeof(len);
		if (end - p < (ptrdiff_t) len || len < sizeof(hdr))
			elog(ERROR, "dex: write-back redo file \"%s\" is truncated", path);
		memcpy(&hdr, p, sizeof(hdr));
		if (hdr.gen != gen)
			elog(ERROR, "dex: write-back redo file \"%s\" holds another life's record", path);
		changes += wb_apply(b, &hdr, p + sizeof(hdr), p + len);
		p += len;
	}
	wb_batch_flush(b);			/* (its entries point into buf) */
	pfree(buf);
	return changes;
}

static int
wb_cmp_segment(const void *a, const void *b)
{
	int			x = ((const DexWbSegmentFile *) a)->seg;
	int			y = ((const DexWbSegmentFile *) b)->seg;

	return (x > y) - (x < y);
}

/*
 * Replay life gen's segments of tree (node, ns) in log order; returns the
 * entry changes applied and the files (*files, *nfiles), which the caller
 * removes once the tree no longer names the life.
 */
uint64
dex_wb_replay_segments(Relation index, DexTree *tree, uint64 gen, uint32 node, uint64 ns,
					   DexWbSegmentFile **files, int *nfiles)
{
	DIR		   *dir = AllocateDir(DEX_WB_DIR);
	struct dirent *de;
	int			cap = 16;
	int			n = 0;
	DexWbSegmentFile *f = palloc(sizeof(DexWbSegmentFile) * cap);
	uint64		changes = 0;
	WbBatch    *b = palloc0(sizeof(WbBatch));

	b->index = index;
	b->tree = tree;
	b->bytes = dex_index_is_bytes(index);
	while (dir != NULL && (de = ReadDir(dir, DEX_WB_DIR)) != NULL)
	{
		int			k = dex_wb_segment_of(de->d_name, gen, node, ns);

		if (k < -1)
			continue;
		if (n == cap)
			f = repalloc(f, sizeof(DexWbSegmentFile) * (cap *= 2));
		f[n].seg = k;
		f[n++].path = psprintf("%s/%s", DEX_WB_DIR, de->d_name);
	}
	if (dir != NULL)
		FreeDir(dir);
	qsort(f, n, sizeof(DexWbSegmentFile), wb_cmp_segment);
	for (int i = 0; i < n; i++)
		changes += wb_replay_file(b, f[i].path, gen);
	pfree(b);
	*files = f;
	*nfiles = n;
	return changes;
}
