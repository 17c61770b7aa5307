/*
 * key_bytes.h -- order-preserving BYTE STRINGS for key columns, in plain C.
 *
 * The route to variable-length and multi-column keys (src/README.md "Keys"):
 * every key column becomes a byte string whose memcmp order (a proper prefix
 * sorting first) is the SQL order of btree's default operator class for the
 * column's type, and equal SQL values give equal bytes. A multi-column key is
 * the concatenation of its columns, each behind a header byte that carries
 * NULL-ness; so the core and the memory node order keys with memcmp alone,
 * without PostgreSQL. This file defines every encoding that needs no
 * PostgreSQL (the glue, extension/dexkeybytes.c, feeds it datums and adds
 * what does: collation sort keys, numeric's text form). Used by the glue and
 * by the unit tests (tests/key_bytes_test.cpp); the node layout that stores
 * such keys is a later step.
 *
 * Every column encoding is PREFIX-FREE (no encoding is a proper prefix of
 * another), which is what makes concatenation order-preserving: two keys
 * differ first inside the first column whose values differ, and the bytes
 * there decide. Inverting every byte of a prefix-free encoding keeps it
 * prefix-free and reverses its order (DESC).
 *
 *   fixed images     8 bytes: the 64-bit key image of key_encoding.h (already
 *                    sign-flipped), big-endian. int2/4/8, oid, bool, time,
 *                    date, timestamp(tz), float4/8: the same order as today's
 *                    16-byte keys. Narrow (DEX_META_NARROW indexes): bool 1,
 *                    int2 2, int4 / oid / date 4 bytes, the image minus the
 *                    type's minimum.
 *   uuid             the 16 bytes as they are (uuid_cmp is memcmp).
 *   strings          every 0x00 byte as 0x00 0xFF, then the terminator
 *                    0x00 0x00 (bytea, "C" text; sort keys and tiebreaks).
 *   int128           16 bytes big-endian, sign bit flipped (interval spans).
 *   numeric          class byte; finite nonzero values add a decimal
 *                    exponent and base-100 digits (dex_kb_numeric_text).
 *   column header    DEX_KB_NULL_FIRST | DEX_KB_VALUE + value | DEX_KB_NULL_LAST;
 *                    0x00 and 0xFF never start a column, so they remain for
 *                    -inf / +inf search bounds.
 *
 * Plain C99, no PostgreSQL headers, nothing C++-only (the int128 encoding
 * takes two 64-bit halves).
 */
#ifndef DEX_TREE_KEY_BYTES_H
#define DEX_TREE_KEY_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tree/key_encoding.h"

/* Column header bytes, in order. Not inverted by DESC. */
#define DEX_KB_NULL_FIRST	0x01	/* NULL, NULLS FIRST */
#define DEX_KB_VALUE		0x02	/* a value follows */
#define DEX_KB_NULL_LAST	0x03	/* NULL, NULLS LAST (btree's default for ASC) */

/* String escaping: 0x00 inside a string, and the end of a string. */
#define DEX_KB_ESCAPE		0x00
#define DEX_KB_ESCAPED_ZERO	0xFF	/* 0x00 -> 0x00 0xFF */
#define DEX_KB_TERMINATOR	0x00	/* end -> 0x00 0x00 */

/* numeric class bytes, in order (numeric_cmp: -Inf < negatives < 0 < positives < +Inf < NaN) */
#define DEX_KB_NUM_NEG_INF	0x01
#define DEX_KB_NUM_NEG		0x02
#define DEX_KB_NUM_ZERO		0x03
#define DEX_KB_NUM_POS		0x04
#define DEX_KB_NUM_POS_INF	0x05
#define DEX_KB_NUM_NAN		0x06

/*
 * A growable byte buffer. grow(old, newcap) returns a block of newcap bytes
 * holding the old contents (old may be NULL): realloc, or a PostgreSQL
 * palloc/repalloc wrapper. It must not return NULL (throw or ereport instead).
 */
typedef struct DexKeyBuf
{
	uint8_t    *data;
	size_t		len;
	size_t		cap;
	void	   *(*grow) (void *old, size_t newcap);
} DexKeyBuf;

static inline void
dex_kb_reserve(DexKeyBuf *b, size_t more)
{
	size_t		need = b->len + more;
	size_t		cap;

	if (need <= b->cap)
		return;
	cap = b->cap ? b->cap : 32;
	while (cap < need)
		cap *= 2;
	b->data = (uint8_t *) b->grow(b->data, cap);
	b->cap = cap;
}

static inline void
dex_kb_append(DexKeyBuf *b, const void *p, size_t n)
{
	dex_kb_reserve(b, n);
	if (n > 0)
		memcpy(b->data + b->len, p, n);
	b->len += n;
}

static inline void
dex_kb_byte(DexKeyBuf *b, uint8_t c)
{
	dex_kb_reserve(b, 1);
	b->data[b->len++] = c;
}

static inline void
dex_kb_u64_be(DexKeyBuf *b, uint64_t v)
{
	int			i;

	dex_kb_reserve(b, 8);
	for (i = 7; i >= 0; i--)
		b->data[b->len++] = (uint8_t) (v >> (8 * i));
}

static inline void
dex_kb_u32_be(DexKeyBuf *b, uint32_t v)
{
	int			i;

	dex_kb_reserve(b, 4);
	for (i = 3; i >= 0; i--)
		b->data[b->len++] = (uint8_t) (v >> (8 * i));
}

/* ---------------------------------------------------------------------
 * fixed-width values
 * ---------------------------------------------------------------------
 */

/* A 64-bit key image (key_encoding.h: unsigned order = SQL order). */
static inline void
dex_kb_image(DexKeyBuf *b, uint64_t image)
{
	dex_kb_u64_be(b, image);
}

static inline void
dex_kb_int64(DexKeyBuf *b, int64_t v)
{
	dex_kb_image(b, DEX_KEY_FROM_INT64(v));
}

/*
 * A NARROW image: an image v known to lie in [min, min + 2^(8 * width) - 1]
 * (the column type's range: int2, int4, date, oid, bool), as the width bytes
 * of v - min, big-endian. Unsigned order of v - min is the signed order of v,
 * so the order is the 8-byte image's, in the type's own width (width 1, 2 or
 * 4). Indexes built since the metapage flag DEX_META_NARROW use it (src/README.md
 * "Byte-string keys"); the caller guarantees the range (a column's values
 * are of its type; scan bounds are clamped to it first).
 */
static inline void
dex_kb_image_narrow(DexKeyBuf *b, int64_t v, int width, int64_t min)
{
	uint64_t	u = (uint64_t) v - (uint64_t) min;
	int			i;

	dex_kb_reserve(b, (size_t) width);
	for (i = width - 1; i >= 0; i--)
		b->data[b->len++] = (uint8_t) (u >> (8 * i));
}

/* float8, and float4 widened: btree's float order (NaN greatest, -0.0 == 0.0) */
static inline void
dex_kb_float8(DexKeyBuf *b, double d)
{
	dex_kb_image(b, dex_key_from_float8(d));
}

static inline void
dex_kb_uuid(DexKeyBuf *b, const uint8_t *uuid16)
{
	dex_kb_append(b, uuid16, 16);
}

/* A signed 128-bit integer hi * 2^64 + lo: big-endian, sign bit flipped. */
static inline void
dex_kb_int128(DexKeyBuf *b, int64_t hi, uint64_t lo)
{
	dex_kb_u64_be(b, (uint64_t) hi ^ DEX_KEY_INT64_SIGN_FLIP);
	dex_kb_u64_be(b, lo);
}

/*
 * interval as interval_cmp_value sees it: the span time + (month * 30 + day)
 * days in microseconds, a 128-bit value ('1 month' = '30 days' = '720 hours').
 * The product needs up to 74 bits; it is formed from 32-bit limbs.
 */
static inline void
dex_kb_interval(DexKeyBuf *b, int64_t time_us, int32_t day, int32_t month)
{
	const uint64_t usecs_per_day = UINT64_C(86400000000);
	int64_t		days = (int64_t) month * 30 + day;	/* |days| < 2^37 */
	int			neg = days < 0;
	uint64_t	mag = neg ? (uint64_t) 0 - (uint64_t) days : (uint64_t) days;
	uint64_t	a0 = mag & 0xFFFFFFFFu,
				a1 = mag >> 32;
	uint64_t	b0 = usecs_per_day & 0xFFFFFFFFu,
				b1 = usecs_per_day >> 32;
	uint64_t	p00 = a0 * b0,
				p01 = a0 * b1,
				p10 = a1 * b0,
				p11 = a1 * b1;
	uint64_t	mid = (p00 >> 32) + (p01 & 0xFFFFFFFFu) + (p10 & 0xFFFFFFFFu);
	uint64_t	lo = (p00 & 0xFFFFFFFFu) | (mid << 32);
	uint64_t	hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
	uint64_t	tlo = (uint64_t) time_us;
	uint64_t	thi = time_us < 0 ? UINT64_MAX : 0;

	/* (hi, lo) = mag * usecs_per_day, schoolbook on 32-bit limbs */
	if (neg)
	{
		/* two's complement negation of (hi, lo) */
		lo = ~lo + 1;
		hi = ~hi + (lo == 0 ? 1 : 0);
	}
	/* + time, sign-extended to 128 bits */
	lo += tlo;
	hi += thi + (lo < tlo ? 1 : 0);
	dex_kb_int128(b, (int64_t) hi, lo);
}

/*
 * timetz as timetz_cmp sees it: first the UTC instant time + zone seconds
 * (zone is seconds WEST of Greenwich, as PostgreSQL stores it), then the zone
 * itself, so the same instant in two zones is two distinct, ordered values.
 */
static inline void
dex_kb_timetz(DexKeyBuf *b, int64_t time_us, int32_t zone_secs)
{
	dex_kb_int64(b, time_us + (int64_t) zone_secs * 1000000);
	dex_kb_u32_be(b, (uint32_t) zone_secs ^ UINT32_C(0x80000000));
}

/* ---------------------------------------------------------------------
 * strings: escaped and terminated
 *
 * A 0x00 byte becomes 0x00 0xFF and the string ends with 0x00 0x00. Where two
 * strings first differ, either both have ordinary bytes (they decide), or one
 * has an escaped 0x00 (0x00 0xFF: the smallest byte, but above the end) or
 * ends (0x00 0x00: below everything). So a proper prefix sorts first, as in
 * memcmp-then-length order (bytea, "C" text), and no encoding is a prefix of
 * another. Inverted (DESC) the end becomes 0xFF 0xFF, above every inverted
 * byte and above the inverted escape 0xFF 0x00: a prefix then sorts LAST,
 * which is exactly the reversed order.
 * ---------------------------------------------------------------------
 */
static inline void
dex_kb_string(DexKeyBuf *b, const void *s, size_t n)
{
	const uint8_t *p = (const uint8_t *) s;
	size_t		i;

	dex_kb_reserve(b, n + 2);
	for (i = 0; i < n; i++)
	{
		if (p[i] == 0x00)
		{
			dex_kb_reserve(b, (n - i) + 3);
			b->data[b->len++] = DEX_KB_ESCAPE;
			b->data[b->len++] = DEX_KB_ESCAPED_ZERO;
		}
		else
			b->data[b->len++] = p[i];
	}
	b->data[b->len++] = DEX_KB_ESCAPE;
	b->data[b->len++] = DEX_KB_TERMINATOR;
}

/* ---------------------------------------------------------------------
 * numeric, from its plain text form ([-]digits[.digits], "NaN",
 * "Infinity", "-Infinity": what numeric_out prints)
 *
 * A finite nonzero value is written 0.d1d2...dn x 10^e with d1 != 0 and dn
 * != 0 (trailing zeros, i.e. the scale, do not change the value: 1.0 = 1.00).
 * Positive: class, e as a sign-flipped big-endian int32, then the digits in
 * pairs (d1d2)(d3d4)..., the last padded with 0, each pair as byte pair + 1
 * (1..100), then 0x00. A larger exponent is a larger value; with equal
 * exponents digit strings compare digit by digit, and a shorter string (all
 * further digits 0) is smaller: the 0x00 end below every pair byte. Negative:
 * the same bytes after the class, inverted, so a larger magnitude is smaller.
 * Returns 0, or -1 when text is not such a number.
 * ---------------------------------------------------------------------
 */
static inline int
dex_kb_numeric_text(DexKeyBuf *b, const char *text)
{
	const char *p = text;
	int			neg = 0;
	long		int_digits = -1;	/* digits before the point, leading zeros included */
	long		pos = 0;		/* index of the current digit among all digits */
	long		first = -1;		/* index of the first nonzero digit */
	long		last = -1;		/* index of the last nonzero digit */
	const char *q;
	size_t		start;
	long		i,
				exponent;
	int			pair = 0,
				half = 0;

	if (strcmp(text, "NaN") == 0)
	{
		dex_kb_byte(b, DEX_KB_NUM_NAN);
		return 0;
	}
	if (*p == '-')
	{
		neg = 1;
		p++;
	}
	if (strcmp(p, "Infinity") == 0)
	{
		dex_kb_byte(b, neg ? DEX_KB_NUM_NEG_INF : DEX_KB_NUM_POS_INF);
		return 0;
	}
	/* one pass to find the shape */
	for (q = p; *q; q++)
	{
		if (*q == '.')
		{
			if (int_digits >= 0 || q == p)
				return -1;
			int_digits = pos;
			continue;
		}
		if (*q < '0' || *q > '9')
			return -1;
		if (*q != '0')
		{
			if (first < 0)
				first = pos;
			last = pos;
		}
		pos++;
	}
	if (pos == 0)
		return -1;
	if (int_digits < 0)
		int_digits = pos;
	if (first < 0)
	{
		dex_kb_byte(b, DEX_KB_NUM_ZERO);	/* -0.00 too */
		return 0;
	}
	dex_kb_byte(b, neg ? DEX_KB_NUM_NEG : DEX_KB_NUM_POS);
	start = b->len;
	exponent = int_digits - first;
	dex_kb_u32_be(b, (uint32_t) (int32_t) exponent ^ UINT32_C(0x80000000));
	/* the digits first..last, in pairs */
	pos = 0;
	for (q = p; *q; q++)
	{
		if (*q == '.')
			continue;
		if (pos >= first && pos <= last)
		{
			pair = pair * 10 + (*q - '0');
			if (++half == 2)
			{
				dex_kb_byte(b, (uint8_t) (pair + 1));
				pair = half = 0;
			}
		}
		pos++;
	}
	if (half)
		dex_kb_byte(b, (uint8_t) (pair * 10 + 1));
	dex_kb_byte(b, 0x00);
	if (neg)
		for (i = (long) start; i < (long) b->len; i++)
			b->data[i] = (uint8_t) ~b->data[i];
	return 0;
}

/* ---------------------------------------------------------------------
 * columns of a multi-column key
 *
 *   size_t at = dex_kb_column_begin(b, isnull, nulls_first);
 *   if (!isnull) ... append the value's encoding ...
 *   dex_kb_column_end(b, at, descending);
 *
 * A NULL is one header byte, below or above every value's header; DESC
 * inverts the value's bytes (not the header: NULLS FIRST/LAST is its own
 * option, as in indoption).
 * ---------------------------------------------------------------------
 */
static inline size_t
dex_kb_column_begin(DexKeyBuf *b, int isnull, int nulls_first)
{
	dex_kb_byte(b, isnull ? (nulls_first ? DEX_KB_NULL_FIRST : DEX_KB_NULL_LAST) : DEX_KB_VALUE);
	return b->len;
}

static inline void
dex_kb_invert(DexKeyBuf *b, size_t from)
{
	size_t		i;

	for (i = from; i < b->len; i++)
		b->data[i] = (uint8_t) ~b->data[i];
}

static inline void
dex_kb_column_end(DexKeyBuf *b, size_t value_start, int descending)
{
	if (descending)
		dex_kb_invert(b, value_start);
}

/* ---------------------------------------------------------------------
 * reading encodings back (index-only scans)
 *
 * Where a value's bytes end, and what a string encoding holds. `inv` is 0,
 * or 0xFF for a DESC column, whose value bytes are all inverted. Every
 * function returns 0 for bytes that are no such encoding (a caller treats
 * that as corruption, never as a shorter value).
 * ---------------------------------------------------------------------
 */

/* Bytes of the escaped, terminated string at p (n bytes available). */
static inline size_t
dex_kb_string_span(const uint8_t *p, size_t n, uint8_t inv)
{
	size_t		i = 0;

	while (i + 1 < n)
	{
		if ((uint8_t) (p[i] ^ inv) != DEX_KB_ESCAPE)
		{
			i++;
			continue;
		}
		if ((uint8_t) (p[i + 1] ^ inv) == DEX_KB_TERMINATOR)
			return i + 2;
		if ((uint8_t) (p[i + 1] ^ inv) != DEX_KB_ESCAPED_ZERO)
			return 0;
		i += 2;
	}
	return 0;
}

/*
 * The string held by the span bytes at p (span from dex_kb_string_span),
 * written to out (room for span bytes); returns its length.
 */
static inline size_t
dex_kb_string_decode(const uint8_t *p, size_t span, uint8_t inv, uint8_t *out)
{
	size_t		i = 0,
				o = 0;

	while (i + 2 < span)		/* the last two bytes: the terminator */
	{
		uint8_t		c = (uint8_t) (p[i] ^ inv);

		out[o++] = c;			/* an escape pair stands for 0x00 == c */
		i += c == DEX_KB_ESCAPE ? 2 : 1;
	}
	return o;
}

/* Bytes of the numeric encoding at p (dex_kb_numeric_text). */
static inline size_t
dex_kb_numeric_span(const uint8_t *p, size_t n, uint8_t inv)
{
	uint8_t		cls,
				end;
	size_t		i;

	if (n < 1)
		return 0;
	cls = (uint8_t) (p[0] ^ inv);
	if (cls < DEX_KB_NUM_NEG_INF || cls > DEX_KB_NUM_NAN)
		return 0;
	if (cls != DEX_KB_NUM_NEG && cls != DEX_KB_NUM_POS)
		return 1;
	/* class, 4 exponent bytes, digit pairs (never 0x00 / 0xFF), the end */
	end = (uint8_t) ((cls == DEX_KB_NUM_NEG ? 0xFF : 0x00) ^ inv);
	for (i = 5; i < n; i++)
		if (p[i] == end)
			return i + 1;
	return 0;
}

/* The 8 bytes at p as the int64 whose image they are (dex_kb_int64). */
static inline int64_t
dex_kb_read_int64(const uint8_t *p, uint8_t inv)
{
	uint64_t	v = 0;
	int			i;

	for (i = 0; i < 8; i++)
		v = (v << 8) | (uint8_t) (p[i] ^ inv);
	return DEX_KEY_TO_INT64(v);
}

/* The width bytes at p as the image dex_kb_image_narrow(min) wrote. */
static inline int64_t
dex_kb_read_image_narrow(const uint8_t *p, int width, int64_t min, uint8_t inv)
{
	uint64_t	u = 0;
	int			i;

	for (i = 0; i < width; i++)
		u = (u << 8) | (uint8_t) (p[i] ^ inv);
	return (int64_t) (u + (uint64_t) min);
}

/* memcmp order of two byte strings, a proper prefix first: <0, 0, >0 */
static inline int
dex_kb_compare(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	int			c = memcmp(a, b, alen < blen ? alen : blen);

	if (c != 0)
		return c < 0 ? -1 : 1;
	return alen == blen ? 0 : (alen < blen ? -1 : 1);
}

#endif							/* DEX_TREE_KEY_BYTES_H */
