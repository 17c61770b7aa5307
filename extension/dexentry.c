/*
 * dexentry.c — index entries as byte strings (issue 15): what the byte-string
 * tree (src/tree/layout.h SlottedTree) stores for an index tuple, and which
 * facts about the key columns the metapage records so that a changed catalog
 * or collation is noticed. Where scan keys put their bounds: dexbounds.c.
 *
 * An entry is the key columns' encodings (dexkeybytes.c: header byte, value,
 * DESC inversion; src/README.md "Keys"), the INCLUDE columns if the index has
 * any (dexentryvalues.c), then the heap TID, 6 bytes big-endian. memcmp
 * order with a proper prefix first is btree's order of the key columns (then
 * of the heap TID, or of INCLUDE columns and TID), so bounds are plain byte
 * strings too.
 *
 * SQL (for tests):
 *   dex_entry_bytes(index, tid, VARIADIC vals)        an index tuple's entry
 *   dex_entry_columns(index)                          the metapage's column facts
 */
#include "dex.h"

#include "access/htup_details.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_database.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/pg_locale.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "tree/key_bytes.h"
#include "tree/node_capacity.h"

PG_FUNCTION_INFO_V1(dex_sql_entry_bytes);
PG_FUNCTION_INFO_V1(dex_sql_entry_columns);

StaticAssertDecl(DEX_ENTRY_TID_BYTES == DEX_TID_BYTES, "an entry's TID is the core's");

#define EMPTY_BUF	{NULL, 0, 0, dex_kb_grow_palloc}

/* Is typid one of the string types btree's text_ops family compares with each other? */
bool
dex_text_like(Oid typid)
{
	return typid == TEXTOID || typid == VARCHAROID || typid == NAMEOID;
}

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

/* A bytea of the n bytes at p. */
bytea *
dex_entry_bytea(const uint8 *p, size_t n)
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

		if (t != cols[i].typid && !(dex_text_like(t) && dex_text_like(cols[i].typid)))
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
	result = dex_entry_bytea(b.data, b.len);
	index_close(index, AccessShareLock);
	PG_RETURN_BYTEA_P(result);
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
