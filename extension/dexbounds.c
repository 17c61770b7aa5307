/*
 * dexbounds.c — where a byte-string index's scan keys put their bounds
 * (issue 15): each scan key becomes an inclusive byte range of its column,
 * the ranges of one column intersect, and the columns combine as btree
 * positions (an equality prefix, then one range). The entries themselves
 * are dexentry.c's; "= ANY" is expanded by dexscanranges.c.
 *
 * SQL (for tests):
 *   dex_scan_bounds(index, attnos, ops, args[, argtypes])
 *                                                     the bounds of some quals
 */
#include "dex.h"

#include "access/skey.h"
#include "access/stratnum.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "tree/key_bytes.h"

PG_FUNCTION_INFO_V1(dex_sql_scan_bounds);

#define EMPTY_BUF	{NULL, 0, 0, dex_kb_grow_palloc}

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
	if (dex_text_like(coltype) && dex_text_like(argtype))
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
	if (argtype != c->typid && !(dex_text_like(argtype) && dex_text_like(c->typid)))
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
 * SQL
 * ---------------------------------------------------------------------
 */

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
		result[0] = PointerGetDatum(dex_entry_bytea(b.lo, b.lolen));
		result[1] = PointerGetDatum(dex_entry_bytea(b.hi, b.hilen));
	}
	result[2] = BoolGetDatum(b.empty);
	result[3] = BoolGetDatum(b.recheck);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), result, nulls)));
}
