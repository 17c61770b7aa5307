/*
 * dexkeybytes.c — datums as order-preserving byte strings (src/tree/key_bytes.h):
 * the PostgreSQL half of the encoding that variable-length and multi-column
 * keys will use. key_bytes.h holds every encoding that needs no PostgreSQL;
 * this file picks the one for a type and adds what needs the server: the
 * 64-bit images of dexkeys.c, collation sort keys (strxfrm, ICU), numeric's
 * text form. See src/README.md "Keys".
 *
 * SQL (for tests and inspection), in the form indexes built now store
 * (narrow images, DEX_META_NARROW):
 *   dex_key_bytes(anyelement) bytea            a value's encoding
 *   dex_key_column(anyelement, descending, nulls_first) bytea
 *                                              one column of a key: header
 *                                              byte, value, DESC inversion
 */
#include "dex.h"

#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/lsyscache.h"
#include "utils/pg_locale.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"
#if PG_VERSION_NUM >= 160000
#include "varatt.h"				/* VARDATA_ANY and friends moved here in 16 */
#endif

#include "tree/key_bytes.h"

PG_FUNCTION_INFO_V1(dex_sql_key_bytes);
PG_FUNCTION_INFO_V1(dex_sql_key_column);

/* DexKeyBuf's grow: palloc in the current memory context (never NULL). */
void *
dex_kb_grow_palloc(void *old, size_t newcap)
{
	return old ? repalloc(old, newcap) : palloc(newcap);
}

/* An empty DexKeyBuf that grows with palloc in the current memory context. */
void
dex_kb_init_palloc(DexKeyBuf *b)
{
	memset(b, 0, sizeof(*b));
	b->grow = dex_kb_grow_palloc;
}

/* ---------------------------------------------------------------------
 * strings under a collation
 *
 * "C"/POSIX: the bytes (memcmp, then length: varstr_cmp). Any other
 * deterministic collation: the collation's sort key (strcmp of sort keys ==
 * strcoll), then the bytes, because varstr_cmp breaks a strcoll tie with
 * strcmp. Both parts escaped and terminated, so the pair stays prefix-free.
 * ---------------------------------------------------------------------
 */
static bool
kb_collate_is_c(Oid collid)
{
#if PG_VERSION_NUM >= 180000
	return pg_newlocale_from_collation(collid)->collate_is_c;
#else
	return lc_collate_is_c(collid);
#endif
}

static bool
kb_deterministic(pg_locale_t locale)
{
#if PG_VERSION_NUM >= 180000
	return locale->deterministic;
#elif PG_VERSION_NUM >= 160000
	return pg_locale_deterministic(locale);
#else
	return !locale || locale->deterministic;	/* NULL: the libc default */
#endif
}

#if PG_VERSION_NUM < 160000 && defined(USE_ICU)
/* ICU sort key of s (len bytes, database encoding), without its final 0 */
static char *
kb_icu_sort_key(const char *s, size_t len, pg_locale_t locale, size_t *keylen)
{
	UChar	   *ustr;
	int32_t		ulen = icu_to_uchar(&ustr, s, len);
	int32_t		cap = 32 + 4 * ulen;
	uint8_t    *key = palloc(cap);
	int32_t		n = ucol_getSortKey(locale->info.icu.ucol, ustr, ulen, key, cap);

	if (n > cap)
	{
		key = repalloc(key, n);
		n = ucol_getSortKey(locale->info.icu.ucol, ustr, ulen, key, n);
	}
	if (n <= 0)
		elog(ERROR, "ucol_getSortKey failed");
	pfree(ustr);
	*keylen = (size_t) n - 1;
	return (char *) key;
}
#endif

/* The collation's sort key of s: strcmp of two sort keys orders as strcoll. */
static char *
kb_sort_key(const char *s, size_t len, pg_locale_t locale, size_t *keylen)
{
	size_t		cap = 2 * len + 32;
	char	   *key = palloc(cap);
	size_t		n;

#if PG_VERSION_NUM >= 160000
	while ((n = pg_strnxfrm(key, cap, s, len, locale)) >= cap)
	{
		cap = n + 1;
		key = repalloc(key, cap);
	}
#else
	char	   *src;

#ifdef USE_ICU
	if (locale && locale->provider == COLLPROVIDER_ICU)
	{
		pfree(key);
		return kb_icu_sort_key(s, len, locale, keylen);
	}
#endif
	src = pnstrdup(s, len);
	for (;;)
	{
		errno = 0;
		n = locale ? strxfrm_l(key, src, cap, locale->info.lt) : strxfrm(key, src, cap);
		if (errno != 0)
			ereport(ERROR,
					(errmsg("could not transform a string for collation: %m")));
		if (n < cap)
			break;
		cap = n + 1;
		key = repalloc(key, cap);
	}
	pfree(src);
#endif
	*keylen = n;
	return key;
}

static void
kb_text(DexKeyBuf *b, const char *s, size_t len, Oid collid)
{
	pg_locale_t locale;
	char	   *key;
	size_t		keylen;

	if (!OidIsValid(collid))
		ereport(ERROR,
				(errcode(ERRCODE_INDETERMINATE_COLLATION),
				 errmsg("could not determine which collation to use for a dex key"),
				 errhint("Use the COLLATE clause to set the collation explicitly.")));
	if (kb_collate_is_c(collid))
	{
		dex_kb_string(b, s, len);
		return;
	}
	locale = pg_newlocale_from_collation(collid);
	if (!kb_deterministic(locale))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("dex does not support the nondeterministic collation \"%s\"",
						get_collation_name(collid)),
				 errdetail("dex orders keys by their bytes; a nondeterministic collation makes different strings equal."),
				 errhint("Use a deterministic collation, for example COLLATE \"C\" or COLLATE \"und-x-icu\".")));
	key = kb_sort_key(s, len, locale, &keylen);
	dex_kb_string(b, key, keylen);
	pfree(key);
	dex_kb_string(b, s, len);	/* varstr_cmp's strcmp tiebreak */
}

/* bpchar compares without trailing blanks (bpcharcmp: bcTruelen) */
static size_t
kb_bpchar_len(const char *s, size_t len)
{
	while (len > 0 && s[len - 1] == ' ')
		len--;
	return len;
}

/* ---------------------------------------------------------------------
 * the other types
 * ---------------------------------------------------------------------
 */

/* numeric from numeric_out's plain form: sign, digits, point; NaN, ±Infinity */
static void
kb_numeric(DexKeyBuf *b, Datum d)
{
	char	   *text = DatumGetCString(DirectFunctionCall1(numeric_out, d));

	if (dex_kb_numeric_text(b, text) != 0)
		elog(ERROR, "dex cannot encode numeric \"%s\"", text);
	pfree(text);
}

static bool
kb_is_image_type(Oid typid)
{
	switch (typid)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case OIDOID:
		case BOOLOID:
		case TIMEOID:
		case DATEOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
		case FLOAT4OID:
		case FLOAT8OID:
			return true;
		default:
			return false;
	}
}

/*
 * Narrow images (DEX_META_NARROW). A column of one of these types holds only
 * its type's values, whose images (dexkeys.c: the value widened) fill
 * [min, min + 2^(8 * width) - 1]; so the image less min, in width bytes,
 * orders as the 8-byte image does. Cross-type scan keys still place their
 * argument among 64-bit images (dex_datum_bound); image_range clamps that
 * range to the column type's (dex_key_image_clamp) before encoding it.
 * float4 stays 8: its images are float8's, not a dense range.
 */
static int
kb_narrow_width(Oid typid, int64 *min)
{
	switch (typid)
	{
		case BOOLOID:
			*min = 0;
			return 1;
		case INT2OID:
			*min = PG_INT16_MIN;
			return 2;
		case INT4OID:
		case DATEOID:			/* DateADT: int32 days, infinities at the ends */
			*min = PG_INT32_MIN;
			return 4;
		case OIDOID:
			*min = 0;
			return 4;
		default:
			*min = PG_INT64_MIN;
			return DEX_IMAGE_WIDE;
	}
}

/* Bytes of an image-type column's value (0: not an image type). */
int
dex_key_image_width(Oid typid, bool narrow)
{
	int64		min;

	if (!kb_is_image_type(typid))
		return 0;
	return narrow ? kb_narrow_width(typid, &min) : DEX_IMAGE_WIDE;
}

/* Appends image (of a value of type typid) in width bytes. */
void
dex_key_image_append(DexKeyBuf *b, int64 image, Oid typid, int width)
{
	int64		min;

	if (width == DEX_IMAGE_WIDE)
	{
		dex_kb_int64(b, image);
		return;
	}
	if (kb_narrow_width(typid, &min) != width)
		elog(ERROR, "dex image width %d does not fit type %s", width, format_type_be(typid));
	dex_kb_image_narrow(b, image, width, min);
}

/* Narrows [*lo, *hi] to the images a width-byte column of typid can hold. */
void
dex_key_image_clamp(Oid typid, int width, int64 *lo, int64 *hi)
{
	int64		min;
	int64		max;

	if (width == DEX_IMAGE_WIDE)
		return;
	(void) kb_narrow_width(typid, &min);
	max = min + (int64) ((UINT64CONST(1) << (8 * width)) - 1);
	*lo = Max(*lo, min);
	*hi = Min(*hi, max);
}

/* Has base type typid a byte encoding (dex_key_bytes_append)? */
bool
dex_key_bytes_supported(Oid typid)
{
	switch (typid)
	{
		case UUIDOID:
		case BYTEAOID:
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case NAMEOID:
		case NUMERICOID:
		case INTERVALOID:
		case TIMETZOID:
			return true;
		default:
			return kb_is_image_type(typid);
	}
}

/*
 * Appends the encoding of datum d of base type typid (collid: its collation,
 * for the string types) to b; an image type's in image_width bytes (its
 * column's DexEntryColumn.image_width). Varlena datums may be toasted or
 * packed.
 */
void
dex_key_bytes_append(DexKeyBuf *b, Datum d, Oid typid, Oid collid, int image_width)
{
	if (kb_is_image_type(typid))
	{
		/* the 64-bit image of today's keys, big-endian: the same order */
		dex_key_image_append(b, dex_datum_image(d, typid), typid, image_width);
		return;
	}
	switch (typid)
	{
		case UUIDOID:
			dex_kb_uuid(b, DatumGetUUIDP(d)->data);
			break;
		case BYTEAOID:
			{
				bytea	   *v = DatumGetByteaPP(d);

				dex_kb_string(b, VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v));
				break;
			}
		case TEXTOID:
		case VARCHAROID:
			{
				text	   *v = DatumGetTextPP(d);

				kb_text(b, VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v), collid);
				break;
			}
		case BPCHAROID:
			{
				BpChar	   *v = DatumGetBpCharPP(d);

				kb_text(b, VARDATA_ANY(v),
						kb_bpchar_len(VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v)), collid);
				break;
			}
		case NAMEOID:
			{
				Name		v = DatumGetName(d);

				kb_text(b, NameStr(*v), strnlen(NameStr(*v), NAMEDATALEN), collid);
				break;
			}
		case NUMERICOID:
			kb_numeric(b, d);
			break;
		case INTERVALOID:
			{
				Interval   *v = DatumGetIntervalP(d);

				dex_kb_interval(b, v->time, v->day, v->month);
				break;
			}
		case TIMETZOID:
			{
				TimeTzADT  *v = DatumGetTimeTzADTP(d);

				dex_kb_timetz(b, v->time, v->zone);
				break;
			}
		default:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("dex has no byte encoding for type %s", format_type_be(typid))));
	}
}

/* ---------------------------------------------------------------------
 * reading a value back (index-only scans, dexentryvalues.c)
 *
 * Every encoding can be skipped (its shape says where it ends); a value comes
 * back only where the encoding is a bijection: the integer-like images, uuid,
 * bytea, timetz (instant, zone), and strings under any collation (a collated
 * string's sort key is followed by the string's own bytes, the tiebreak).
 * A float (-0.0 and 0.0 share bytes), numeric (1.0 and 1.00), interval
 * ('1 day' and '24 hours') and bpchar (blank-trimmed) are read with a heap
 * fetch.
 * ---------------------------------------------------------------------
 */

/*
 * How the encoding of a column of base type typid (collation collid; an
 * image type's in image_width bytes) is laid out.
 */
void
dex_key_bytes_form(Oid typid, Oid collid, int image_width, DexKeyForm *f)
{
	Datum		unused;

	memset(f, 0, sizeof(*f));
	if (kb_is_image_type(typid))
	{
		f->shape = DEX_SHAPE_IMAGE;
		f->width = image_width;
		f->returnable = dex_image_datum(0, typid, &unused);
		return;
	}
	switch (typid)
	{
		case UUIDOID:
			f->shape = DEX_SHAPE_FIXED;
			f->width = 16;
			f->returnable = true;
			return;
		case INTERVALOID:
			f->shape = DEX_SHAPE_FIXED;
			f->width = 16;	/* dex_kb_int128 */
			return;
		case TIMETZOID:
			f->shape = DEX_SHAPE_FIXED;
			f->width = 12;	/* dex_kb_timetz: instant, zone */
			f->returnable = true;	/* time = instant - zone */
			return;
		case NUMERICOID:
			f->shape = DEX_SHAPE_NUMERIC;
			return;
		case BYTEAOID:
			f->shape = DEX_SHAPE_STRING;
			f->returnable = true;
			return;
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case NAMEOID:
			if (OidIsValid(collid) && kb_collate_is_c(collid))
				f->shape = DEX_SHAPE_STRING;
			else
				f->shape = DEX_SHAPE_TWO_STRINGS;	/* sort key, then the string */
			/* the string's own bytes are there; bpchar's trailing blanks are not */
			f->returnable = typid != BPCHAROID;
			return;
		default:
			elog(ERROR, "dex has no byte encoding for type %s", format_type_be(typid));
	}
}

/* Bytes of the value encoding at p (n available, inv: 0xFF for DESC); 0 = malformed. */
size_t
dex_key_bytes_span(const DexKeyForm *f, const uint8 *p, size_t n, uint8 inv)
{
	size_t		first;

	switch (f->shape)
	{
		case DEX_SHAPE_IMAGE:
		case DEX_SHAPE_FIXED:
			return n >= f->width ? f->width : 0;
		case DEX_SHAPE_STRING:
			return dex_kb_string_span(p, n, inv);
		case DEX_SHAPE_TWO_STRINGS:
			first = dex_kb_string_span(p, n, inv);
			if (first == 0)
				return 0;
			{
				size_t		second = dex_kb_string_span(p + first, n - first, inv);

				return second == 0 ? 0 : first + second;
			}
		case DEX_SHAPE_NUMERIC:
			return dex_kb_numeric_span(p, n, inv);
	}
	return 0;
}

/* The datum of a returnable form's span bytes at p (palloc'd where by reference). */
static Datum
kb_value_datum(const DexKeyForm *f, Oid typid, const uint8 *p, size_t span, uint8 inv)
{
	Datum		d = (Datum) 0;
	uint8	   *buf;
	size_t		len;

	if (f->shape == DEX_SHAPE_IMAGE)
	{
		int64		min;
		int64		image;

		if (f->width == DEX_IMAGE_WIDE)
			image = dex_kb_read_int64(p, inv);
		else if (kb_narrow_width(typid, &min) == f->width)
			image = dex_kb_read_image_narrow(p, f->width, min, inv);
		else
			elog(ERROR, "dex image width %d does not fit type %s", f->width,
				 format_type_be(typid));
		if (!dex_image_datum(image, typid, &d))
			elog(ERROR, "dex cannot return a value of type %s", format_type_be(typid));
		return d;
	}
	if (typid == UUIDOID)
	{
		pg_uuid_t  *u = palloc(sizeof(pg_uuid_t));

		for (int i = 0; i < UUID_LEN; i++)
			u->data[i] = p[i] ^ inv;
		return UUIDPGetDatum(u);
	}
	if (typid == TIMETZOID)
	{
		TimeTzADT  *v = palloc(sizeof(TimeTzADT));
		uint32		zone = 0;

		for (int i = 8; i < 12; i++)
			zone = (zone << 8) | (uint8) (p[i] ^ inv);
		v->zone = (int32) (zone ^ UINT32_C(0x80000000));
		v->time = dex_kb_read_int64(p, inv) - (int64) v->zone * USECS_PER_SEC;
		return TimeTzADTPGetDatum(v);
	}
	/* a string: bytea, text, varchar, name; after a collation's sort key */
	if (f->shape == DEX_SHAPE_TWO_STRINGS)
	{
		size_t		sortkey = dex_kb_string_span(p, span, inv);

		p += sortkey;
		span -= sortkey;
	}
	buf = palloc(span + 1);
	len = dex_kb_string_decode(p, span, inv, buf);
	if (typid == NAMEOID)
	{
		Name		name = palloc0(NAMEDATALEN);

		memcpy(NameStr(*name), buf, Min(len, NAMEDATALEN - 1));
		pfree(buf);
		return NameGetDatum(name);
	}
	d = PointerGetDatum(cstring_to_text_with_len((char *) buf, (int) len));	/* bytea alike */
	pfree(buf);
	return d;
}

/*
 * The value of a column (base type typid, collation collid) from the span
 * bytes of its encoding at p; false if the form is not returnable. The value
 * is encoded again and compared: bytes that do not decode exactly (a drift
 * between encoder and decoder, or corruption) are an ERROR, never a wrong row.
 */
bool
dex_key_bytes_datum(const DexKeyForm *f, Oid typid, Oid collid, const uint8 *p, size_t span,
					uint8 inv, Datum *out)
{
	DexKeyBuf	check;
	bool		exact;

	if (!f->returnable)
		return false;
	*out = kb_value_datum(f, typid, p, span, inv);
	/* the whole span is compared below, the sort key of a collated string too */
	dex_kb_init_palloc(&check);
	dex_key_bytes_append(&check, *out, typid, collid, f->width);
	exact = check.len == span;
	for (size_t i = 0; exact && i < span; i++)
		exact = (uint8) (check.data[i] ^ inv) == p[i];
	pfree(check.data);
	if (!exact)
		elog(ERROR, "dex key bytes of type %s do not decode exactly", format_type_be(typid));
	return true;
}

/* ---------------------------------------------------------------------
 * SQL
 * ---------------------------------------------------------------------
 */

static bytea *
kb_to_bytea(DexKeyBuf *b)
{
	bytea	   *result = palloc(VARHDRSZ + b->len);

	SET_VARSIZE(result, VARHDRSZ + b->len);
	if (b->len > 0)
		memcpy(VARDATA(result), b->data, b->len);
	return result;
}

static Oid
kb_arg_basetype(FunctionCallInfo fcinfo)
{
	Oid			typid = get_fn_expr_argtype(fcinfo->flinfo, 0);

	if (!OidIsValid(typid))
		elog(ERROR, "could not determine the argument type of a dex key function");
	return getBaseType(typid);
}

/* dex_key_bytes(anyelement) RETURNS bytea: a (non-NULL) value's encoding */
Datum
dex_sql_key_bytes(PG_FUNCTION_ARGS)
{
	DexKeyBuf	b = {NULL, 0, 0, dex_kb_grow_palloc};
	Oid			typid = kb_arg_basetype(fcinfo);

	dex_key_bytes_append(&b, PG_GETARG_DATUM(0), typid, PG_GET_COLLATION(),
						 dex_key_image_width(typid, true));
	PG_RETURN_BYTEA_P(kb_to_bytea(&b));
}

/*
 * dex_key_column(value anyelement, descending bool, nulls_first bool)
 * RETURNS bytea: one column of a multi-column key (value may be NULL); the
 * key of (a, b DESC) is dex_key_column(a) || dex_key_column(b, true).
 */
Datum
dex_sql_key_column(PG_FUNCTION_ARGS)
{
	DexKeyBuf	b = {NULL, 0, 0, dex_kb_grow_palloc};
	bool		isnull = PG_ARGISNULL(0);
	bool		descending = !PG_ARGISNULL(1) && PG_GETARG_BOOL(1);
	bool		nulls_first = !PG_ARGISNULL(2) && PG_GETARG_BOOL(2);
	Oid			typid = kb_arg_basetype(fcinfo);
	size_t		at = dex_kb_column_begin(&b, isnull, nulls_first);

	if (!isnull)
		dex_key_bytes_append(&b, PG_GETARG_DATUM(0), typid, PG_GET_COLLATION(),
							 dex_key_image_width(typid, true));
	dex_kb_column_end(&b, at, descending);
	PG_RETURN_BYTEA_P(kb_to_bytea(&b));
}
