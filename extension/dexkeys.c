/*
 * dexkeys.c — datums as key images: the one place that knows how each SQL
 * type maps to the 64-bit value of a key (src/tree/key_encoding.h), for
 * build, insert, scan keys and "= ANY" elements alike.
 *
 * An image is an int64 whose signed order is the column type's SQL order
 * (dex_make_value_key flips its sign bit into the key). A scan-key argument
 * of another type of the same operator family is placed among the COLUMN
 * type's images by the same conversion the cross-type operator applies, so
 * the index returns exactly what the operator accepts. See src/README.md
 * "Keys".
 */
#include "dex.h"

#include "catalog/pg_type.h"
#include "datatype/timestamp.h"
#include "pgtime.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/float.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "tree/key_encoding.h"

/* Operator families whose members dex can compare with each other. */
typedef enum DexKeyFamily
{
	DEX_FAMILY_NONE = 0,
	DEX_FAMILY_INTEGER,			/* int2, int4, int8 */
	DEX_FAMILY_OID,
	DEX_FAMILY_FLOAT,			/* float4, float8 */
	DEX_FAMILY_BOOL,
	DEX_FAMILY_TIME,
	DEX_FAMILY_DATETIME			/* date, timestamp, timestamptz */
} DexKeyFamily;

static DexKeyFamily
key_family(Oid typid)
{
	switch (typid)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
			return DEX_FAMILY_INTEGER;
		case OIDOID:
			return DEX_FAMILY_OID;
		case FLOAT4OID:
		case FLOAT8OID:
			return DEX_FAMILY_FLOAT;
		case BOOLOID:
			return DEX_FAMILY_BOOL;
		case TIMEOID:
			return DEX_FAMILY_TIME;
		case DATEOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			return DEX_FAMILY_DATETIME;
		default:
			return DEX_FAMILY_NONE;
	}
}

bool
dex_type_supported(Oid typid)
{
	return key_family(typid) != DEX_FAMILY_NONE;
}

/* The key column's type, through domains. */
Oid
dex_column_basetype(Relation index)
{
	Oid			typid = TupleDescAttr(RelationGetDescr(index), 0)->atttypid;

	/* a key type itself (the usual case) is no domain: no catalog lookup */
	return dex_type_supported(typid) ? typid : getBaseType(typid);
}

/* Can a scan key of type argtype be placed among coltype's images? */
bool
dex_types_comparable(Oid coltype, Oid argtype)
{
	return dex_type_supported(coltype) && key_family(coltype) == key_family(argtype);
}

/* ---------------------------------------------------------------------
 * bounds
 * ---------------------------------------------------------------------
 */

static void
bound_point(DexBound *b, int64 v)
{
	b->lo = b->hi = v;
	b->exact = true;
}

/* The argument falls strictly between images v and v + 1: nothing equals it. */
static void
bound_between(DexBound *b, int64 v)
{
	b->lo = v + 1;
	b->hi = v;
	b->exact = true;
}

/* Only a window [lo, hi] holding every image whose comparison is uncertain. */
static void
bound_window(DexBound *b, int64 lo, int64 hi)
{
	b->lo = lo;
	b->hi = hi;
	b->exact = false;
}

/* ---------------------------------------------------------------------
 * floats: float4 widened exactly to float8 (btfloat48cmp), then the shared
 * bit transform, which puts -0.0 with 0.0 and every NaN together above
 * +Infinity
 * ---------------------------------------------------------------------
 */
static int64
float8_image(float8 d)
{
	return DEX_KEY_TO_INT64(dex_key_from_float8(d));
}

static float8
float_arg(Datum d, Oid typid)
{
	return typid == FLOAT4OID ? (float8) DatumGetFloat4(d) : DatumGetFloat8(d);
}

/* ---------------------------------------------------------------------
 * date, timestamp, timestamptz
 *
 * The cross-type operators convert date -> timestamp -> timestamptz (the
 * latter two in the session time zone) with *_opt_overflow: a finite value
 * that leaves the target's range compares above every finite value and below
 * +infinity (or the mirror image). The images below put such a value on
 * END_TIMESTAMP or MIN_TIMESTAMP - 1, which no stored finite value takes and
 * which lie strictly inside -infinity (INT64_MIN) .. +infinity (INT64_MAX).
 * ---------------------------------------------------------------------
 */
static int64
overflowed(int64 v, int overflow)
{
	if (overflow > 0)
		return END_TIMESTAMP;
	if (overflow < 0)
		return MIN_TIMESTAMP - 1;
	return v;
}

/* date as date_cmp_timestamp sees it */
static int64
date_as_timestamp(DateADT d)
{
	int			overflow;
	Timestamp	t = date2timestamp_opt_overflow(d, &overflow);

	return overflowed(t, overflow);
}

/* date as date_cmp_timestamptz sees it (session time zone) */
static int64
date_as_timestamptz(DateADT d)
{
	int			overflow;
	TimestampTz t = date2timestamptz_opt_overflow(d, &overflow);

	return overflowed(t, overflow);
}

/* timestamp as timestamp_cmp_timestamptz sees it (session time zone) */
static int64
timestamp_as_timestamptz(Timestamp ts)
{
	int			overflow;
	TimestampTz t = timestamp2timestamptz_opt_overflow(ts, &overflow);

	return overflowed(t, overflow);
}

#define DEX_DATE_MIN	((DateADT) (DATETIME_MIN_JULIAN - POSTGRES_EPOCH_JDATE))
#define DEX_DATE_MAX	((DateADT) (DATE_END_JULIAN - POSTGRES_EPOCH_JDATE - 1))

/*
 * A timestamp or timestamptz c among dates, where the operator compares
 * as_ts(d) with c. as_ts is strictly increasing over finite dates (midnights
 * are at least a day minus a UTC offset change apart), so the largest finite
 * date d with as_ts(d) <= c is the boundary; it is found by stepping from
 * c's UTC date, which is at most a day or so off.
 */
static void
date_bound(int64 c, int64 (*as_ts) (DateADT), DexBound *b)
{
	int64		guess;
	DateADT		d;

	if (TIMESTAMP_IS_NOBEGIN(c) || TIMESTAMP_IS_NOEND(c))
	{
		/* the infinities map onto each other */
		bound_point(b, TIMESTAMP_IS_NOBEGIN(c) ? DATEVAL_NOBEGIN : DATEVAL_NOEND);
		return;
	}

	guess = c / USECS_PER_DAY - (c % USECS_PER_DAY < 0 ? 1 : 0);	/* floor */
	d = (DateADT) Max(Min(guess, (int64) DEX_DATE_MAX), (int64) DEX_DATE_MIN);
	while (d > DEX_DATE_MIN && as_ts(d) > c)
		d--;
	while (d < DEX_DATE_MAX && as_ts(d + 1) <= c)
		d++;
	if (as_ts(d) == c)
		bound_point(b, d);
	else if (as_ts(d) < c)
		bound_between(b, d);
	else
		bound_between(b, (int64) d - 1);	/* below every finite date */
}

/*
 * PostgreSQL's own assumption (DetermineTimeZoneOffsetInternal): UTC offsets
 * are below a day and DST boundaries at least 48 hours apart. So a local time
 * more than two days from t0 is on the same side of instant c as it is of t0
 * = c's local time, and without a boundary within four days of c every local
 * time near t0 has c's offset.
 */
#define DEX_TZ_WINDOW	(2 * USECS_PER_DAY)
#define DEX_TZ_CALM_SECS	((pg_time_t) 4 * SECS_PER_DAY)

/* Does the session time zone change its UTC offset within 4 days of c? */
static bool
tz_boundary_near(TimestampTz c)
{
	pg_time_t	start = timestamptz_to_time_t(c) - DEX_TZ_CALM_SECS;
	long int	before_gmtoff,
				after_gmtoff;
	int			before_isdst,
				after_isdst;
	pg_time_t	boundary;
	int			res;

	res = pg_next_dst_boundary(&start, &before_gmtoff, &before_isdst,
							   &boundary, &after_gmtoff, &after_isdst,
							   session_timezone);
	if (res < 0)
		return true;			/* cannot tell: assume one */
	return res > 0 && boundary <= start + 2 * DEX_TZ_CALM_SECS;
}

/*
 * A timestamptz c among timestamps, where timestamp_cmp_timestamptz converts
 * each timestamp to timestamptz in the session time zone. That conversion is
 * not monotonic inside a DST gap (02:30 in a spring-forward gap is read as
 * standard time, later than 03:00 daylight time), so near an offset change
 * only a window around c's local time can be given; rows are rechecked.
 */
static void
timestamp_bound_of_timestamptz(TimestampTz c, DexBound *b)
{
	struct pg_tm tm;
	fsec_t		fsec;
	int			tz;
	int64		t0;

	if (TIMESTAMP_NOT_FINITE(c))
	{
		bound_point(b, c);
		return;
	}
	if (timestamp2tm(c, &tz, &tm, &fsec, NULL, NULL) != 0)
	{
		bound_window(b, MIN_TIMESTAMP - 1, END_TIMESTAMP);	/* every finite timestamp */
		return;
	}
	t0 = c - (int64) tz * USECS_PER_SEC;	/* c's local time (tz: seconds west) */

	if (!tz_boundary_near(c))
	{
		/* one offset all around: the conversion is a shift, t0 is exact */
		if (t0 >= END_TIMESTAMP)
			bound_point(b, END_TIMESTAMP);
		else if (t0 < MIN_TIMESTAMP)
			bound_point(b, MIN_TIMESTAMP - 1);
		else if (timestamp_as_timestamptz(t0) == c)
			bound_point(b, t0);
		else
			goto window;		/* not expected; stay correct anyway */
		return;
	}
window:
	bound_window(b, Max(t0 - DEX_TZ_WINDOW, MIN_TIMESTAMP - 1),
				 Min(t0 + DEX_TZ_WINDOW, END_TIMESTAMP));
}

static void
datetime_bound(Datum d, Oid argtype, Oid coltype, DexBound *b)
{
	if (argtype == coltype)
		/* date: int32 days; timestamp(tz): int64 microseconds; ±infinity at the ends */
		bound_point(b, coltype == DATEOID ? (int64) DatumGetDateADT(d) :
					(int64) DatumGetTimestamp(d));
	else if (coltype == DATEOID)
		date_bound(DatumGetTimestamp(d),
				   argtype == TIMESTAMPOID ? date_as_timestamp : date_as_timestamptz, b);
	else if (coltype == TIMESTAMPOID && argtype == DATEOID)
		bound_point(b, date_as_timestamp(DatumGetDateADT(d)));
	else if (coltype == TIMESTAMPOID)
		timestamp_bound_of_timestamptz(DatumGetTimestampTz(d), b);
	else if (argtype == DATEOID)	/* timestamptz column */
		bound_point(b, date_as_timestamptz(DatumGetDateADT(d)));
	else
		bound_point(b, timestamp_as_timestamptz(DatumGetTimestamp(d)));
}

/* ---------------------------------------------------------------------
 * the conversion
 * ---------------------------------------------------------------------
 */

/*
 * Places datum d of type argtype among the images of column type coltype
 * (both base types, of one family). argtype == coltype gives a point: the
 * datum's own image.
 */
void
dex_datum_bound(Datum d, Oid argtype, Oid coltype, DexBound *b)
{
	if (!dex_types_comparable(coltype, argtype))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("dex cannot compare a %s column with %s",
						format_type_be(coltype), format_type_be(argtype))));

	switch (argtype)
	{
		case INT2OID:
			bound_point(b, (int64) DatumGetInt16(d));
			break;
		case INT4OID:
			bound_point(b, (int64) DatumGetInt32(d));
			break;
		case INT8OID:
			bound_point(b, DatumGetInt64(d));
			break;
		case OIDOID:
			bound_point(b, (int64) DatumGetObjectId(d));	/* 0..2^32-1 */
			break;
		case BOOLOID:
			bound_point(b, DatumGetBool(d) ? 1 : 0);	/* false < true */
			break;
		case TIMEOID:
			bound_point(b, (int64) DatumGetTimeADT(d));	/* microseconds */
			break;
		case FLOAT4OID:
		case FLOAT8OID:
			bound_point(b, float8_image(float_arg(d, argtype)));
			break;
		default:
			datetime_bound(d, argtype, coltype, b);
			break;
	}
}

/* The image of a column value (build, insert). */
int64
dex_datum_image(Datum d, Oid coltype)
{
	DexBound	b;

	dex_datum_bound(d, coltype, coltype, &b);
	Assert(b.exact && b.lo == b.hi);
	return b.lo;
}

/* ---------------------------------------------------------------------
 * back from images: index-only scans
 * ---------------------------------------------------------------------
 */

/*
 * The value of column type coltype (a base type) whose image is v, if the
 * image gives the original datum back *exactly*: the inverse of
 * dex_datum_image. This switch is the one place that decides which types an
 * index-only scan may return (dex_type_returnable asks it), next to the
 * encoder above, and the caller re-encodes what it decoded (dex_key_datum),
 * so the two cannot drift apart silently.
 *
 * Every image but a float's is the value itself widened to int64 (date: the
 * int32 day count, ±infinity at INT32_MIN/MAX; timestamp(tz): int64
 * microseconds, ±infinity at INT64_MIN/MAX; oid 0..2^32-1; bool 0/1): a
 * bijection. Floats are not: -0.0 and 0.0 share one image, and so do all
 * NaN payloads (btree returns -0 for a stored -0, so must we).
 */
bool
dex_image_datum(int64 v, Oid coltype, Datum *out)
{
	switch (coltype)
	{
		case INT2OID:
			*out = Int16GetDatum((int16) v);
			return true;
		case INT4OID:
			*out = Int32GetDatum((int32) v);
			return true;
		case INT8OID:
			*out = Int64GetDatum(v);
			return true;
		case OIDOID:
			*out = ObjectIdGetDatum((Oid) v);
			return true;
		case BOOLOID:
			*out = BoolGetDatum(v != 0);
			return true;
		case TIMEOID:
			*out = TimeADTGetDatum((TimeADT) v);
			return true;
		case DATEOID:
			*out = DateADTGetDatum((DateADT) v);
			return true;
		case TIMESTAMPOID:
			*out = TimestampGetDatum((Timestamp) v);
			return true;
		case TIMESTAMPTZOID:
			*out = TimestampTzGetDatum((TimestampTz) v);
			return true;
		case FLOAT4OID:
		case FLOAT8OID:
			/* lossy: -0.0 is stored as 0.0, every NaN as one NaN */
			return false;
		default:
			return false;
	}
}

/* Can an index-only scan return a column of base type coltype? */
bool
dex_type_returnable(Oid coltype)
{
	Datum		unused;

	return dex_image_datum(0, coltype, &unused);
}

/*
 * The datum of a VALUE key of a column of base type coltype; false if the
 * type is not returnable. Re-encodes the result and compares: an image the
 * decoder does not map back to itself (a drift between the two switches, or
 * a corrupt key) is an error, never a wrong row.
 */
bool
dex_key_datum(const DexKey *key, Oid coltype, Datum *out)
{
	int64		v = DEX_KEY_TO_INT64(key->value);

	Assert(key->cls == DEX_KEY_VALUE);
	if (!dex_image_datum(v, coltype, out))
		return false;
	if (dex_datum_image(*out, coltype) != v)
		elog(ERROR, "dex key image " INT64_FORMAT " of type %s does not decode exactly",
			 v, format_type_be(coltype));
	return true;
}

void
dex_make_key(DexKey *key, Relation index, Datum value, bool isnull,
			 ItemPointer tid)
{
	uint32		block = ItemPointerGetBlockNumberNoCheck(tid);
	uint16		off = ItemPointerGetOffsetNumberNoCheck(tid);

	if (isnull)
		dex_make_null_key(key, block, off);
	else
		dex_make_value_key(key, dex_datum_image(value, dex_column_basetype(index)),
						   block, off);
}

/*
 * dex_key_roundtrip(v) RETURNS anyelement: v through a key and back, the way
 * an index-only scan returns it (for tests: must give v back bit for bit for
 * every returnable type; an error for the others).
 */
PG_FUNCTION_INFO_V1(dex_sql_key_roundtrip);

Datum
dex_sql_key_roundtrip(PG_FUNCTION_ARGS)
{
	Oid			typid = getBaseType(get_fn_expr_argtype(fcinfo->flinfo, 0));
	DexKey		key;
	Datum		out;

	if (!dex_type_supported(typid))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("dex does not index type %s", format_type_be(typid))));
	dex_make_value_key(&key, dex_datum_image(PG_GETARG_DATUM(0), typid), 1, 1);
	if (!dex_key_datum(&key, typid, &out))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("dex cannot give a %s back from its key", format_type_be(typid)),
				 errdetail("Its key stores -0 as 0 and every NaN as one NaN.")));
	PG_RETURN_DATUM(out);
}
