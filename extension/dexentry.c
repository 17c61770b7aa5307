/*
 * dexentry.c — index entries as byte strings (issue 15): what the byte-string
 * tree (src/tree/layout.h SlottedTree) stores for an index tuple, where a
 * scan's keys put its bounds, and which facts about the key columns the
 * metapage records so that a changed catalog or collation is noticed.
 *
 * An entry is the key columns' encodings (dexkeybytes.c: header byte, value,
 * DESC inversion; src/README.md "Keys"), the INCLUDE columns if the index has
 * any (dexentryvalues.c), then the heap TID, 6 bytes big-endian. memcmp
 * order with a proper prefix first is btree's order of the key columns (then
 * of the heap TID, or of INCLUDE columns and TID), so bounds are plain byte
 * strings too.
 *
 * SQL (for tests; the index does not use these entries yet):
 *   dex_entry_bytes(index, tid, VARIADIC vals)        an index tuple's entry
 *   dex_scan_bounds(index, attnos, ops, args[, argtypes])
 *                                                     the bounds of some quals
 *   dex_entry_columns(index)                          the metapage's column facts
 */
#include "dex.h"

#include "access/htup_details.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_database.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/pg_locale.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "tree/key_bytes.h"
#include "tree/node_capacity.h"

PG_FUNCTION_INFO_V1(dex_sql_entry_bytes);
PG_FUNCTION_INFO_V1(dex_sql_scan_bounds);
PG_FUNCTION_INFO_V1(dex_sql_entry_columns);

StaticAssertDecl(DEX_ENTRY_TID_BYTES == DEX_TID_BYTES, "an entry's TID is the core's");

static void *
entry_grow(void *old, size_t newcap)
{
	return old ? repalloc(old, newcap) : palloc(newcap);
}

#define EMPTY_BUF	{NULL, 0, 0, entry_grow}

/* ---------------------------------------------------------------------
 * key columns
 * ---------------------------------------------------------------------
 */

/*
 * The key columns of index as the encoding sees them; returns their number.
 * narrow: image columns take their type's width (DEX_META_NARROW). A
 * nondeterministic collation is refused here, naming the column, before any
 * value is encoded (dexkeybytes.c would name only the collation).
 */
static int
entry_columns(Relation index, DexEntryColumn *cols, bool narrow)
{
	int			n = IndexRelationGetNumberOfKeyAttributes(index);

	for (int i = 0; i < n; i++)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(index), i);
		int16		opt = index->rd_indoption[i];
		DexEntryColumn *c = &cols[i];

		c->typid = getBaseType(att->atttypid);
		c->collid = index->rd_indcollation[i];
		c->desc = (opt & INDOPTION_DESC) != 0;
		c->nulls_first = (opt & INDOPTION_NULLS_FIRST) != 0;
		c->image_width = dex_key_image_width(c->typid, narrow);
		if (OidIsValid(c->collid) && type_is_collatable(c->typid) &&
			!get_collation_isdeterministic(c->collid))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("dex does not support the nondeterministic collation \"%s\" of column \"%s\" of index \"%s\"",
							get_collation_name(c->collid), NameStr(att->attname),
							RelationGetRelationName(index)),
					 errdetail("dex orders keys by their bytes; a nondeterministic collation makes different strings equal."),
					 errhint("Use a deterministic collation, for example COLLATE \"C\" or COLLATE \"und-x-icu\".")));
	}
	return n;
}

/*
 * The key columns of a built index: image widths as its metapage says. A
 * btree index (the SQL test functions accept one, to check the encoding
 * against its order) gets the form new dex indexes store.
 */
int
dex_entry_columns(Relation index, DexEntryColumn *cols)
{
	bool		narrow = index->rd_rel->relam == BTREE_AM_OID || dex_index_narrow_images(index);

	return entry_columns(index, cols, narrow);
}

/*
 * Whether a new index stores narrow images (DEX_META_NARROW). Off only to
 * build indexes as dex did before the flag, which the tests use to check
 * that such indexes keep working (GUC dex.narrow_images, not for users).
 */
bool		dex_narrow_images = true;

/* The key columns of an index being built (no metapage yet). */
int
dex_entry_columns_for_build(Relation index, DexEntryColumn *cols)
{
	return entry_columns(index, cols, dex_narrow_images);
}

/*
 * Does this index need byte-string entries (DEX_META_BYTES)? The 16-byte key
 * of dexkeys.c holds one column of a fixed-width type in ascending order
 * with NULLS LAST: anything else -- several key columns, a DESC or NULLS
 * FIRST column, a type without an 8-byte image (text, uuid, numeric, ...)
 * -- is encoded as bytes. Decided once, at build, and recorded.
 */
bool
dex_entry_layout_wanted(Relation index)
{
	Oid			typid;

	if (IndexRelationGetNumberOfKeyAttributes(index) != 1 ||
		IndexRelationGetNumberOfAttributes(index) != 1 ||
		index->rd_indoption[0] != 0)
		return true;
	typid = getBaseType(TupleDescAttr(RelationGetDescr(index), 0)->atttypid);
	return !dex_type_supported(typid);
}

/* ---------------------------------------------------------------------
 * entries
 * ---------------------------------------------------------------------
 */

static void
encode_column(DexKeyBuf *b, const DexEntryColumn *c, Datum d, bool isnull)
{
	size_t		at = dex_kb_column_begin(b, isnull, c->nulls_first);

	if (!isnull)
		dex_key_bytes_append(b, d, c->typid, c->collid, c->image_width);
	dex_kb_column_end(b, at, c->desc);
}

/*
 * The entry of an index tuple into out (reset first): the ncols key columns
 * of values/isnull, the INCLUDE columns (dexentryvalues.c), then tid. A key
 * longer than the tree takes is an ERROR, never truncated: a truncated key
 * would make different rows equal and put rows out of order. Callers must
 * hold no dex lock (this may ereport). Returns the length of the key part,
 * the key columns' bytes (before any INCLUDE payload and the TID): equal SQL
 * keys give equal key parts (deterministic collations only), which is what
 * a unique index compares (dexunique.c).
 */
static size_t
entry_encode(Relation index, const DexEntryColumn *cols, int ncols,
			 Datum *values, bool *isnull, ItemPointer tid, DexKeyBuf *out, bool *fits)
{
	uint16		off = ItemPointerGetOffsetNumberNoCheck(tid);
	size_t		keylen;

	out->len = 0;
	for (int i = 0; i < ncols; i++)
		encode_column(out, &cols[i], values[i], isnull[i]);
	keylen = out->len;			/* the key part: what a unique check compares */
	dex_entry_append_payload(index, values, isnull, out, fits);	/* INCLUDE columns */
	if (fits && (!*fits || out->len > DEX_SLOTTED_MAX_KEY_BYTES))
	{
		*fits = false;
		return 0;
	}
	if (out->len > DEX_SLOTTED_MAX_KEY_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("index row size %zu exceeds dex maximum %d for index \"%s\"",
						out->len, (int) DEX_SLOTTED_MAX_KEY_BYTES,
						RelationGetRelationName(index)),
				 errdetail("A dex entry holds at most %d bytes of encoded key columns and INCLUDE columns, then the %d-byte heap TID.",
						   (int) DEX_SLOTTED_MAX_KEY_BYTES, DEX_ENTRY_TID_BYTES),
				 errhint("Values larger than %d bytes once encoded cannot be indexed.\n"
						 "Consider a function index of an MD5 hash of the value, or use full text indexing.",
						 (int) DEX_SLOTTED_MAX_KEY_BYTES)));
	dex_kb_u32_be(out, ItemPointerGetBlockNumberNoCheck(tid));
	dex_kb_byte(out, (uint8) (off >> 8));
	dex_kb_byte(out, (uint8) off);
	Assert(out->len <= DEX_SLOTTED_MAX_ENTRY_BYTES);
	return keylen;
}

size_t
dex_entry_encode(Relation index, const DexEntryColumn *cols, int ncols,
				 Datum *values, bool *isnull, ItemPointer tid, DexKeyBuf *out)
{
	return entry_encode(index, cols, ncols, values, isnull, tid, out, NULL);
}

/* The heap TID an entry ends with (6 bytes, big-endian). */
void
dex_entry_tid(const uint8 *entry, size_t len, ItemPointer tid)
{
	const uint8 *p;

	if (len < DEX_ENTRY_TID_BYTES)
		elog(ERROR, "dex entry of %zu bytes has no heap TID", len);
	p = entry + len - DEX_ENTRY_TID_BYTES;
	ItemPointerSet(tid, ((BlockNumber) p[0] << 24) | ((BlockNumber) p[1] << 16) |
				   ((BlockNumber) p[2] << 8) | p[3], (OffsetNumber) ((p[4] << 8) | p[5]));
}

/*
 * dex_entry_encode with the index's columns looked up (one-off callers); the
 * same return value: the key part's length.
 */
size_t
dex_entry_build(Relation index, Datum *values, bool *isnull, ItemPointer tid,
				DexKeyBuf *out)
{
	DexEntryColumn cols[INDEX_MAX_KEYS];
	int			n = dex_entry_columns(index, cols);

	return dex_entry_encode(index, cols, n, values, isnull, tid, out);
}

/*
 * dex_entry_build for a row that may be too long to index: false where
 * dex_entry_build would raise "index row size exceeds" (journal recovery:
 * a slot reused by such a row -- whose insert failed -- holds no entry).
 */
bool
dex_entry_build_if_fits(Relation index, Datum *values, bool *isnull, ItemPointer tid,
						DexKeyBuf *out)
{
	DexEntryColumn cols[INDEX_MAX_KEYS];
	int			n = dex_entry_columns(index, cols);
	bool		fits = true;

	(void) entry_encode(index, cols, n, values, isnull, tid, out, &fits);
	return fits;
}

/* ---------------------------------------------------------------------
 * scan bounds
 *
 * Every scan key on a column becomes an inclusive byte range [l, h] of the
 * column's bytes (header, value and whatever follows: later columns, TID)
 * that holds exactly the entries whose column satisfies the key. Because
 * each column encoding is prefix-free and the byte after it is a column
 * header (0x01..0x03) or a TID byte, "column = V" is [V, V || FF x 8],
 * "column > V" starts at V || FF x 8 (nothing equals it), "column < V" ends
 * at V (every entry starting with V is longer, so above it). Values lie in
 * [0x02, 0x03]: 0x02 is the value header, and 0x03 (NULLS LAST's null) sorts
 * above every value and is no entry itself.
 *
 * A column's keys intersect to [max l, min h]: comparing the ranges as bytes
 * is comparing them in the column's order, so the tightest of several keys
 * of one side is exact and the others are implied, and contradictions show
 * up as lo > hi. Then, as btree positions: the columns with an equality key
 * form a prefix P, the first column without one contributes its range, and
 * keys on later columns are left to the recheck.
 * ---------------------------------------------------------------------
 */

typedef struct ColRange
{
	int			nkeys;
	DexKeyBuf	lo;				/* column bytes, "" = below every column */
	DexKeyBuf	hi;
	bool		has_point;		/* some key is "column = point" exactly */
	DexKeyBuf	point;
	bool		inexact;		/* some key's range is a window: recheck */
} ColRange;

static void
buf_pad(DexKeyBuf *b)
{
	for (int i = 0; i < DEX_ENTRY_PAD_BYTES; i++)
		dex_kb_byte(b, 0xFF);
}

static void
buf_set(DexKeyBuf *dst, const DexKeyBuf *src)
{
	dst->len = 0;
	dex_kb_append(dst, src->data, src->len);
}

static int
buf_cmp(const DexKeyBuf *a, const DexKeyBuf *b)
{
	return dex_kb_compare(a->data, a->len, b->data, b->len);
}

static bool
text_like(Oid typid)
{
	return typid == TEXTOID || typid == VARCHAROID || typid == NAMEOID;
}

/*
 * Can a scan key of argtype be placed among coltype's entries? The image
 * types' families (dexkeys.c), text with varchar and name, and any other
 * byte-encoded type with itself.
 */
bool
dex_entry_types_comparable(Oid coltype, Oid argtype)
{
	if (dex_types_comparable(coltype, argtype))
		return true;
	if (text_like(coltype) && text_like(argtype))
		return true;
	return coltype == argtype && dex_key_bytes_supported(coltype);
}

/* Under DESC the bytes run against SQL order: < and > trade places. */
static StrategyNumber
byte_strategy(StrategyNumber s, bool desc)
{
	if (!desc)
		return s;
	switch (s)
	{
		case BTLessStrategyNumber:
			return BTGreaterStrategyNumber;
		case BTLessEqualStrategyNumber:
			return BTGreaterEqualStrategyNumber;
		case BTGreaterEqualStrategyNumber:
			return BTLessEqualStrategyNumber;
		case BTGreaterStrategyNumber:
			return BTLessStrategyNumber;
		default:
			return s;
	}
}

/* l, h of "value bytes V strat" in byte order (V already DESC-inverted). */
static void
value_range(StrategyNumber bs, const DexKeyBuf *v, DexKeyBuf *l, DexKeyBuf *h)
{
	dex_kb_byte(l, DEX_KB_VALUE);
	dex_kb_byte(h, DEX_KB_VALUE);
	switch (bs)
	{
		case BTLessStrategyNumber:
			dex_kb_append(h, v->data, v->len);
			break;
		case BTLessEqualStrategyNumber:
			dex_kb_append(h, v->data, v->len);
			buf_pad(h);
			break;
		case BTEqualStrategyNumber:
			dex_kb_append(l, v->data, v->len);
			dex_kb_append(h, v->data, v->len);
			buf_pad(h);
			break;
		case BTGreaterEqualStrategyNumber:
			dex_kb_append(l, v->data, v->len);
			h->data[0] = DEX_KB_NULL_LAST;
			break;
		case BTGreaterStrategyNumber:
			dex_kb_append(l, v->data, v->len);
			buf_pad(l);
			h->data[0] = DEX_KB_NULL_LAST;
			break;
		default:
			elog(ERROR, "unrecognized dex strategy number %d", (int) bs);
	}
}

/*
 * A fixed-image column (dexkeys.c): the argument placed among the column
 * type's 64-bit images by dex_datum_bound (cross-type keys, out-of-range
 * arguments, NaN: all as the fixed keys do), turned into an inclusive range
 * of images [a, b], then into column bytes. Returns false for an empty key.
 */
static bool
image_range(const DexEntryColumn *c, ScanKey sk, Oid argtype, ColRange *cr,
			DexKeyBuf *l, DexKeyBuf *h, bool *point)
{
	DexBound	b;
	int64		a = PG_INT64_MIN,
				z = PG_INT64_MAX;
	size_t		lv,
				hv;

	dex_datum_bound(sk->sk_argument, argtype, c->typid, &b);
	if (!b.exact)
		cr->inexact = true;
	switch (sk->sk_strategy)
	{
		case BTLessStrategyNumber:
			if (b.exact && b.lo == PG_INT64_MIN)
				return false;
			z = b.exact ? b.lo - 1 : b.hi;
			break;
		case BTLessEqualStrategyNumber:
			z = b.hi;
			break;
		case BTEqualStrategyNumber:
			a = b.lo;
			z = b.hi;
			break;
		case BTGreaterEqualStrategyNumber:
			a = b.lo;
			break;
		case BTGreaterStrategyNumber:
			if (b.exact && b.hi == PG_INT64_MAX)
				return false;
			a = b.exact ? b.hi + 1 : b.lo;
			break;
		default:
			elog(ERROR, "unrecognized dex strategy number %d", (int) sk->sk_strategy);
	}
	/* a narrow column holds only its type's images: none outside them */
	dex_key_image_clamp(c->typid, c->image_width, &a, &z);
	if (a > z)
		return false;
	*point = sk->sk_strategy == BTEqualStrategyNumber && b.exact && a == z;
	/* DESC: the inverted image of the largest value comes first */
	dex_kb_byte(l, DEX_KB_VALUE);
	lv = l->len;
	dex_key_image_append(l, c->desc ? z : a, c->typid, c->image_width);
	dex_kb_byte(h, DEX_KB_VALUE);
	hv = h->len;
	dex_key_image_append(h, c->desc ? a : z, c->typid, c->image_width);
	if (c->desc)
	{
		dex_kb_invert(l, lv);
		dex_kb_invert(h, hv);
	}
	buf_pad(h);
	return true;
}

/*
 * The column bytes [l, h] of one scan key on column c; false if no value
 * satisfies it (comparison with NULL, an image range that is empty).
 */
static bool
key_range(const DexEntryColumn *c, ScanKey sk, ColRange *cr,
		  DexKeyBuf *l, DexKeyBuf *h, bool *point)
{
	Oid			argtype;
	DexKeyBuf	v = EMPTY_BUF;

	*point = false;
	if (sk->sk_flags & SK_ISNULL)
	{
		uint8		nullhdr = c->nulls_first ? DEX_KB_NULL_FIRST : DEX_KB_NULL_LAST;

		if (sk->sk_flags & SK_SEARCHNULL)
		{
			/* btree treats IS NULL as an equality: it extends the prefix */
			dex_kb_byte(l, nullhdr);
			dex_kb_byte(h, nullhdr);
			buf_pad(h);
			*point = true;
			return true;
		}
		if (sk->sk_flags & SK_SEARCHNOTNULL)
		{
			dex_kb_byte(l, DEX_KB_VALUE);
			dex_kb_byte(h, DEX_KB_NULL_LAST);
			return true;
		}
		return false;			/* an operator never matches NULL */
	}
	argtype = OidIsValid(sk->sk_subtype) && sk->sk_subtype != c->typid ?
		getBaseType(sk->sk_subtype) : c->typid;
	if (dex_type_supported(c->typid))
		return image_range(c, sk, argtype, cr, l, h, point);

	/*
	 * The byte-encoded types: btree's families pair only text with name
	 * (text_ops); both encode through one collated string form, under the
	 * column's collation, as the cross-type operators compare.
	 */
	if (argtype != c->typid && !(text_like(argtype) && text_like(c->typid)))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("dex cannot compare a %s column with %s",
						format_type_be(c->typid), format_type_be(argtype))));
	dex_key_bytes_append(&v, sk->sk_argument, argtype, c->collid, 0);	/* no image type */
	if (c->desc)
		dex_kb_invert(&v, 0);
	value_range(byte_strategy(sk->sk_strategy, c->desc), &v, l, h);
	*point = sk->sk_strategy == BTEqualStrategyNumber;
	return true;
}

/* Folds one key's range into its column's: the intersection. */
static void
col_add_key(ColRange *cr, const DexEntryColumn *c, ScanKey sk, bool *empty)
{
	DexKeyBuf	l = EMPTY_BUF,
				h = EMPTY_BUF;
	bool		point;

	cr->nkeys++;
	if (!key_range(c, sk, cr, &l, &h, &point))
	{
		*empty = true;
		return;
	}
	if (buf_cmp(&l, &cr->lo) > 0)
		buf_set(&cr->lo, &l);
	if (buf_cmp(&h, &cr->hi) < 0)
		buf_set(&cr->hi, &h);
	if (point && !cr->has_point)
	{
		cr->has_point = true;
		buf_set(&cr->point, &l);
	}
}

/*
 * Contradiction within a column: an empty intersection, or an equality whose
 * point is not exactly what all the column's keys allow ([E, E || FF x 8] is
 * E's own range; any tighter intersection excludes E, e.g. a second,
 * different equality or "a = 1 AND a > 1").
 */
static bool
col_empty(ColRange *cr)
{
	DexKeyBuf	ehi = EMPTY_BUF;

	if (cr->nkeys == 0)
		return false;
	if (buf_cmp(&cr->lo, &cr->hi) > 0)
		return true;
	if (!cr->has_point)
		return false;
	buf_set(&ehi, &cr->point);
	buf_pad(&ehi);
	return buf_cmp(&cr->lo, &cr->point) != 0 || buf_cmp(&cr->hi, &ehi) != 0;
}

/*
 * The inclusive byte bounds of index's entries that scan keys (scalar keys
 * on key columns, btree strategies; "= ANY" expanded by the caller) can
 * match, positioned as btree positions.
 */
void
dex_entry_bounds(Relation index, ScanKey keys, int nkeys, DexEntryBounds *out)
{
	DexEntryColumn cols[INDEX_MAX_KEYS];
	ColRange	cr[INDEX_MAX_KEYS];
	int			ncols = dex_entry_columns(index, cols);
	DexKeyBuf	lo = EMPTY_BUF,
				hi = EMPTY_BUF;
	bool		empty = false;
	int			range_col;

	memset(out, 0, sizeof(*out));
	for (int i = 0; i < ncols; i++)
	{
		DexKeyBuf	z = EMPTY_BUF;

		cr[i].nkeys = 0;
		cr[i].lo = z;			/* "": below every column */
		cr[i].hi = z;
		buf_pad(&cr[i].hi);		/* FF x 8: above every column */
		cr[i].has_point = false;
		cr[i].point = z;
		cr[i].inexact = false;
	}
	for (int k = 0; k < nkeys; k++)
	{
		ScanKey		sk = &keys[k];

		/* a row comparison only narrows: leaving it to the recheck is safe */
		if (sk->sk_flags & (SK_ROW_HEADER | SK_ROW_MEMBER))
		{
			out->recheck = true;
			continue;
		}
		if (sk->sk_flags & SK_SEARCHARRAY)
			elog(ERROR, "dex scan bounds take array keys one element at a time");
		if (sk->sk_attno < 1 || sk->sk_attno > ncols)
			elog(ERROR, "dex scan key on column %d of a %d-column key",
				 (int) sk->sk_attno, ncols);
		col_add_key(&cr[sk->sk_attno - 1], &cols[sk->sk_attno - 1], sk, &empty);
	}
	for (int i = 0; i < ncols; i++)
	{
		empty = empty || col_empty(&cr[i]);
		out->recheck = out->recheck || cr[i].inexact;
	}
	if (empty)
	{
		out->empty = true;
		return;
	}

	/* equality columns form the prefix; the first other column gives the range */
	for (range_col = 0; range_col < ncols; range_col++)
	{
		if (!cr[range_col].has_point)
			break;
		dex_kb_append(&lo, cr[range_col].point.data, cr[range_col].point.len);
	}
	buf_set(&hi, &lo);
	if (range_col < ncols)
	{
		dex_kb_append(&lo, cr[range_col].lo.data, cr[range_col].lo.len);
		dex_kb_append(&hi, cr[range_col].hi.data, cr[range_col].hi.len);
		for (int i = range_col + 1; i < ncols; i++)
			out->recheck = out->recheck || cr[i].nkeys > 0;
	}
	else
		buf_pad(&hi);			/* every entry starting with the prefix */
	out->lo = lo.data;
	out->lolen = lo.len;
	out->hi = hi.data;
	out->hilen = hi.len;
}

/* ---------------------------------------------------------------------
 * metapage facts: the key columns an index's entries were encoded for
 *
 * Encoded entries are only as valid as the catalog facts and the collation
 * library they were made with: a changed collation version reorders strings
 * (as it does for btree), a changed indoption or type would misread them.
 * ---------------------------------------------------------------------
 */

static char *
text_attr(HeapTuple tup, int cacheid, AttrNumber attno)
{
	bool		isnull;
	Datum		d = SysCacheGetAttr(cacheid, tup, attno, &isnull);

	return isnull ? NULL : TextDatumGetCString(d);
}

/* The database default collation's provider and locale (PostgreSQL 15+). */
static char *
db_default_locale(char *provider)
{
	HeapTuple	tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(MyDatabaseId));
	Form_pg_database db;
	char	   *locale;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for database %u", MyDatabaseId);
	db = (Form_pg_database) GETSTRUCT(tup);
	*provider = db->datlocprovider;
#if PG_VERSION_NUM >= 170000
	if (*provider != COLLPROVIDER_LIBC)
		locale = text_attr(tup, DATABASEOID, Anum_pg_database_datlocale);
#else
	if (*provider == COLLPROVIDER_ICU)
		locale = text_attr(tup, DATABASEOID, Anum_pg_database_daticulocale);
#endif
	else
		locale = text_attr(tup, DATABASEOID, Anum_pg_database_datcollate);
	ReleaseSysCache(tup);
	return locale;
}

/*
 * The collation library's current version for collid into buf ("" when it
 * has none: C, POSIX, no collation), truncated to the field.
 */
static void
collation_version(Oid collid, char *buf)
{
	char		provider;
	char	   *locale;
	char	   *version;

	buf[0] = '\0';
	if (!OidIsValid(collid) || collid == C_COLLATION_OID || collid == POSIX_COLLATION_OID)
		return;
	if (collid == DEFAULT_COLLATION_OID)
		locale = db_default_locale(&provider);
	else
	{
		HeapTuple	tup = SearchSysCache1(COLLOID, ObjectIdGetDatum(collid));

		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for collation %u", collid);
		provider = ((Form_pg_collation) GETSTRUCT(tup))->collprovider;
#if PG_VERSION_NUM >= 170000
		locale = text_attr(tup, COLLOID, provider == COLLPROVIDER_LIBC ?
						   Anum_pg_collation_collcollate : Anum_pg_collation_colllocale);
#else
		locale = text_attr(tup, COLLOID, provider == COLLPROVIDER_ICU ?
						   Anum_pg_collation_colliculocale : Anum_pg_collation_collcollate);
#endif
		ReleaseSysCache(tup);
	}
	if (locale == NULL)
		return;
	version = get_collation_actual_version(provider, locale);
	if (version != NULL)
		strlcpy(buf, version, DEX_COLLVERSION_LEN);
}

/* The descriptors of index's key columns, as its metapage records them. */
void
dex_entry_meta_columns(Relation index, DexMetaColumns *out)
{
	DexEntryColumn cols[INDEX_MAX_KEYS];
	int			n = entry_columns(index, cols, false);	/* widths are not recorded per column */

	memset(out, 0, sizeof(*out));
	out->ncolumns = n;
	for (int i = 0; i < n; i++)
	{
		DexMetaColumn *m = &out->col[i];

		m->typid = cols[i].typid;
		m->collid = cols[i].collid;
		m->flags = (cols[i].desc ? DEX_META_COL_DESC : 0) |
			(cols[i].nulls_first ? DEX_META_COL_NULLS_FIRST : 0);
		collation_version(cols[i].collid, m->collversion);
	}
}

static const char *
order_name(uint16 flags)
{
	return (flags & DEX_META_COL_DESC) ?
		((flags & DEX_META_COL_NULLS_FIRST) ? "DESC NULLS FIRST" : "DESC NULLS LAST") :
		((flags & DEX_META_COL_NULLS_FIRST) ? "ASC NULLS FIRST" : "ASC NULLS LAST");
}

/*
 * NULL if recorded matches index's key columns now; otherwise a message
 * naming the first difference (the caller reports it with a REINDEX hint).
 */
char *
dex_entry_meta_check(Relation index, const DexMetaColumns *recorded)
{
	DexMetaColumns now;
	const char *name = RelationGetRelationName(index);

	dex_entry_meta_columns(index, &now);
	if (now.ncolumns != recorded->ncolumns)
		return psprintf("index \"%s\" was built with %u key columns, it has %u now",
						name, recorded->ncolumns, now.ncolumns);
	for (uint32 i = 0; i < now.ncolumns; i++)
	{
		const DexMetaColumn *r = &recorded->col[i];
		const DexMetaColumn *c = &now.col[i];

		if (r->typid != c->typid)
			return psprintf("column %u of index \"%s\" was built for type %u, it is %s now",
							i + 1, name, r->typid, format_type_be(c->typid));
		if (r->collid != c->collid)
			return psprintf("column %u of index \"%s\" was built for collation %u, it has collation %u now",
							i + 1, name, r->collid, c->collid);
		if (r->flags != c->flags)
			return psprintf("column %u of index \"%s\" was built %s, it is %s now",
							i + 1, name, order_name(r->flags), order_name(c->flags));
		if (strncmp(r->collversion, c->collversion, DEX_COLLVERSION_LEN) != 0)
			return psprintf("column %u of index \"%s\" was built with version \"%.*s\" of collation \"%s\", the version is \"%s\" now",
							i + 1, name, DEX_COLLVERSION_LEN, r->collversion,
							get_collation_name(c->collid), c->collversion);
	}
	return NULL;
}

/* ---------------------------------------------------------------------
 * SQL
 * ---------------------------------------------------------------------
 */

static bytea *
bytes_to_bytea(const uint8 *p, size_t n)
{
	bytea	   *result = palloc(VARHDRSZ + n);

	SET_VARSIZE(result, VARHDRSZ + n);
	if (n > 0)
		memcpy(VARDATA(result), p, n);
	return result;
}

/*
 * dex_entry_bytes(index regclass, tid tid, VARIADIC vals "any") RETURNS
 * bytea: the entry of an index tuple with key columns vals (any index, of
 * any access method: only its columns' types, collations and indoption
 * count). Each value must be of its column's type (text and varchar mix).
 */
Datum
dex_sql_entry_bytes(PG_FUNCTION_ARGS)
{
	Relation	index;
	DexEntryColumn cols[INDEX_MAX_KEYS];
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	DexKeyBuf	b = EMPTY_BUF;
	int			ncols;
	int			nvals = PG_NARGS() - 2;
	bytea	   *result;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	if (get_fn_expr_variadic(fcinfo->flinfo))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("dex_entry_bytes takes its values as separate arguments, not as an array")));
	index = index_open(PG_GETARG_OID(0), AccessShareLock);
	ncols = dex_entry_columns(index, cols);
	if (dex_entry_has_payload(index))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("dex_entry_bytes does not take INCLUDE columns (index \"%s\")",
						RelationGetRelationName(index))));
	if (nvals != ncols)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("index \"%s\" has %d key columns, %d values given",
						RelationGetRelationName(index), ncols, nvals)));
	for (int i = 0; i < ncols; i++)
	{
		Oid			t = getBaseType(get_fn_expr_argtype(fcinfo->flinfo, i + 2));

		if (t != cols[i].typid && !(text_like(t) && text_like(cols[i].typid)))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("value %d is of type %s, column %d of index \"%s\" of type %s",
							i + 1, format_type_be(t), i + 1,
							RelationGetRelationName(index), format_type_be(cols[i].typid))));
		isnull[i] = PG_ARGISNULL(i + 2);
		values[i] = isnull[i] ? (Datum) 0 : PG_GETARG_DATUM(i + 2);
	}
	dex_entry_encode(index, cols, ncols, values, isnull,
					 (ItemPointer) PG_GETARG_POINTER(1), &b);
	result = bytes_to_bytea(b.data, b.len);
	index_close(index, AccessShareLock);
	PG_RETURN_BYTEA_P(result);
}

/* "<", "<=", "=", ">=", ">": its strategy; "is null", "is not null": 0 and flags */
static StrategyNumber
parse_op(const char *op, int *flags)
{
	static const char *const names[] = {"<", "<=", "=", ">=", ">"};

	*flags = 0;
	for (int s = 0; s < 5; s++)
		if (strcmp(op, names[s]) == 0)
			return (StrategyNumber) (s + 1);
	if (pg_strcasecmp(op, "is null") == 0)
		*flags = SK_ISNULL | SK_SEARCHNULL;
	else if (pg_strcasecmp(op, "is not null") == 0)
		*flags = SK_ISNULL | SK_SEARCHNOTNULL;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown dex scan operator \"%s\"", op)));
	return InvalidStrategy;
}

static void
sql_array(ArrayType *a, Oid elemtype, Datum **elems, bool **nulls, int *n)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;

	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(a, elemtype, typlen, typbyval, typalign, elems, nulls, n);
}

/* One SQL qual as a scan key: the argument read by its type's input function. */
static void
sql_scan_key(Relation index, ScanKey sk, int attno, const char *op,
			 const char *arg, Oid argtype)
{
	int			flags;
	StrategyNumber strat = parse_op(op, &flags);
	Datum		d = (Datum) 0;
	Oid			typinput,
				typioparam;

	if (attno < 1 || attno > IndexRelationGetNumberOfKeyAttributes(index))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("index \"%s\" has no key column %d",
						RelationGetRelationName(index), attno)));
	if (!OidIsValid(argtype))
		argtype = TupleDescAttr(RelationGetDescr(index), attno - 1)->atttypid;
	if (flags == 0 && arg == NULL)
		flags = SK_ISNULL;		/* "col op NULL" */
	else if (flags == 0)
	{
		getTypeInputInfo(argtype, &typinput, &typioparam);
		d = OidInputFunctionCall(typinput, (char *) arg, typioparam, -1);
	}
	ScanKeyEntryInitialize(sk, flags, (AttrNumber) attno, strat, argtype,
						   index->rd_indcollation[attno - 1], InvalidOid, d);
}

/*
 * dex_scan_bounds(index regclass, attnos int[], ops text[], args text[],
 * argtypes regtype[] DEFAULT NULL, OUT lo bytea, OUT hi bytea, OUT empty
 * boolean, OUT recheck boolean): the bounds of the quals "column attnos[i]
 * ops[i] args[i]::argtypes[i]" (argtypes NULL or an element 0: the column's
 * type; ops "is null" / "is not null" ignore args; a NULL arg is "op NULL").
 */
Datum
dex_sql_scan_bounds(PG_FUNCTION_ARGS)
{
	Relation	index = index_open(PG_GETARG_OID(0), AccessShareLock);
	Datum	   *attnos,
			   *ops,
			   *args,
			   *types = NULL;
	bool	   *attnulls,
			   *opnulls,
			   *argnulls,
			   *typenulls = NULL;
	int			n,
				nops,
				nargs,
				ntypes = 0;
	ScanKey		keys;
	DexEntryBounds b;
	TupleDesc	tupdesc;
	Datum		result[4];
	bool		nulls[4] = {false, false, false, false};

	sql_array(PG_GETARG_ARRAYTYPE_P(1), INT4OID, &attnos, &attnulls, &n);
	sql_array(PG_GETARG_ARRAYTYPE_P(2), TEXTOID, &ops, &opnulls, &nops);
	sql_array(PG_GETARG_ARRAYTYPE_P(3), TEXTOID, &args, &argnulls, &nargs);
	if (!PG_ARGISNULL(4))
		sql_array(PG_GETARG_ARRAYTYPE_P(4), REGTYPEOID, &types, &typenulls, &ntypes);
	if (nops != n || nargs != n || (types && ntypes != n))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dex_scan_bounds needs arrays of one length")));
	keys = palloc0(sizeof(ScanKeyData) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		if (attnulls[i] || opnulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("dex_scan_bounds: attno and op must not be NULL")));
		sql_scan_key(index, &keys[i], DatumGetInt32(attnos[i]),
					 TextDatumGetCString(ops[i]),
					 argnulls[i] ? NULL : TextDatumGetCString(args[i]),
					 types && !typenulls[i] ? DatumGetObjectId(types[i]) : InvalidOid);
	}
	dex_entry_bounds(index, keys, n, &b);
	index_close(index, AccessShareLock);

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "dex_scan_bounds must return a record");
	nulls[0] = nulls[1] = b.empty;
	if (!b.empty)
	{
		result[0] = PointerGetDatum(bytes_to_bytea(b.lo, b.lolen));
		result[1] = PointerGetDatum(bytes_to_bytea(b.hi, b.hilen));
	}
	result[2] = BoolGetDatum(b.empty);
	result[3] = BoolGetDatum(b.recheck);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), result, nulls)));
}

/*
 * dex_entry_columns(index regclass) RETURNS TABLE (attno, type regtype,
 * collation oid, descending, nulls_first, collversion text): what the
 * metapage records of index's key columns; with "check" the message of
 * dex_entry_meta_check against the same facts (NULL: no mismatch).
 */
Datum
dex_sql_entry_columns(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Relation	index = index_open(PG_GETARG_OID(0), AccessShareLock);
	DexMetaColumns m;
	char	   *mismatch;

	InitMaterializedSRF(fcinfo, 0);
	dex_entry_meta_columns(index, &m);
	mismatch = dex_entry_meta_check(index, &m);
	for (uint32 i = 0; i < m.ncolumns; i++)
	{
		Datum		v[7];
		bool		isnull[7] = {false, false, false, false, false, false, false};

		v[0] = Int32GetDatum((int32) i + 1);
		v[1] = ObjectIdGetDatum(m.col[i].typid);
		v[2] = ObjectIdGetDatum(m.col[i].collid);
		v[3] = BoolGetDatum((m.col[i].flags & DEX_META_COL_DESC) != 0);
		v[4] = BoolGetDatum((m.col[i].flags & DEX_META_COL_NULLS_FIRST) != 0);
		v[5] = CStringGetTextDatum(m.col[i].collversion);
		isnull[6] = mismatch == NULL;
		if (mismatch)
			v[6] = CStringGetTextDatum(mismatch);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, isnull);
	}
	index_close(index, AccessShareLock);
	return (Datum) 0;
}
