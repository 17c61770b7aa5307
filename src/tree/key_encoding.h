/*
 * key_encoding.h -- THE encoding of an index key, in plain C.
 *
 * Included by the core (tree/key.h builds dex::EntryKey, KeyClass,
 * key_from_int64 and compare_keys on it) and by the PostgreSQL glue
 * (extension/dexutils.c encodes datums with it), so the two cannot drift:
 * each side static_asserts its own key struct against the layout below.
 * Plain C99, no PostgreSQL headers, nothing C++-only. See src/README.md
 * "Keys".
 *
 * An entry key is (class, value, heap TID), 16 bytes, packed:
 *
 *   off size
 *     0    8  value   order-preserving image of the datum (unsigned order = SQL order)
 *     8    4  block   heap TID block number
 *    12    2  offnum  heap TID offset number
 *    14    1  cls     DEX_KEYCLASS_*
 *    15    1  pad     always 0 (keeps keys memcmp-stable on the wire)
 *
 * Keys are ordered by class, then value, then block, then offnum
 * (DEX_KEY_COMPARE). The heap TID makes every entry unique.
 */
#ifndef DEX_TREE_KEY_ENCODING_H
#define DEX_TREE_KEY_ENCODING_H

#include <stdint.h>
#include <string.h>

/* Key classes, in key order: -inf < values < NULL < +inf (btree's NULLS LAST). */
#define DEX_KEYCLASS_NEG_INF	0	/* only in fences and search bounds */
#define DEX_KEYCLASS_VALUE		1
#define DEX_KEYCLASS_NULL		2	/* SQL NULL: sorts after every value */
#define DEX_KEYCLASS_POS_INF	3	/* only in fences and search bounds */

/* Layout (see the table above). */
#define DEX_KEY_BYTES			16
#define DEX_KEY_OFFSET_VALUE	0
#define DEX_KEY_OFFSET_BLOCK	8
#define DEX_KEY_OFFSET_OFFNUM	12
#define DEX_KEY_OFFSET_CLS		14
#define DEX_KEY_OFFSET_PAD		15

/*
 * Largest value of each field. (value, 0, 0) .. (value, DEX_KEY_BLOCK_MAX,
 * DEX_KEY_OFFNUM_MAX) brackets every entry of one value: block 0xFFFFFFFF is
 * never a real heap block, so strict scan bounds are expressed with it.
 */
#define DEX_KEY_VALUE_MAX		UINT64_MAX
#define DEX_KEY_BLOCK_MAX		UINT32_C(0xFFFFFFFF)
#define DEX_KEY_OFFNUM_MAX		UINT16_C(0xFFFF)

/* The value field of a NULL, -inf or +inf key. */
#define DEX_KEY_NO_VALUE		UINT64_C(0)

/*
 * Order-preserving image of a signed 64-bit integer (every supported SQL
 * type maps to one: see src/README.md "Keys"): flip the
 * sign bit, so that unsigned comparison of images is signed comparison of
 * the integers. Constant expressions (usable in C++ constexpr functions).
 */
#define DEX_KEY_INT64_SIGN_FLIP	(UINT64_C(1) << 63)
#define DEX_KEY_FROM_INT64(v)	((uint64_t) (int64_t) (v) ^ DEX_KEY_INT64_SIGN_FLIP)
#define DEX_KEY_TO_INT64(k)		((int64_t) ((uint64_t) (k) ^ DEX_KEY_INT64_SIGN_FLIP))

/*
 * Order-preserving image of an IEEE-754 double (float8, and float4 widened
 * exactly to double, as btree's float48 comparisons do), in the order btree
 * gives floats: -Infinity < negatives < -0.0 = 0.0 < positives < +Infinity <
 * NaN, all NaNs equal.
 *
 * DEX_KEY_FROM_FLOAT8_BITS is the bit transform on the raw bits: a negative
 * double inverts all bits (a larger magnitude becomes a smaller image), a
 * non-negative one sets the sign bit (above every negative). Unsigned order of
 * the images is then numeric order, for distinct bit patterns.
 * dex_key_from_float8 first canonicalizes what SQL treats as equal but IEEE
 * spells differently (-0.0 and 0.0; every NaN payload and sign), so equal SQL
 * values get one image. DEX_KEY_TO_INT64 of the result is the int64 whose
 * signed order is the same (what the glue hands around).
 */
#define DEX_KEY_FLOAT8_SIGN		(UINT64_C(1) << 63)
#define DEX_KEY_FLOAT8_NAN_BITS	UINT64_C(0x7FF8000000000000)	/* the one NaN: quiet, positive */
#define DEX_KEY_FROM_FLOAT8_BITS(b) \
	(((uint64_t) (b) & DEX_KEY_FLOAT8_SIGN) ? ~(uint64_t) (b) : ((uint64_t) (b) | DEX_KEY_FLOAT8_SIGN))

static inline uint64_t
dex_key_from_float8(double d)
{
	uint64_t	bits;

	if (d != d)					/* NaN: above +Infinity, all equal */
		bits = DEX_KEY_FLOAT8_NAN_BITS;
	else if (d == 0.0)			/* -0.0 == 0.0 */
		bits = 0;
	else
		memcpy(&bits, &d, sizeof(bits));
	return DEX_KEY_FROM_FLOAT8_BITS(bits);
}

/*
 * The total order of keys: <0, 0, >0 as *a sorts before, equal to, after
 * *b. a and b point to any key struct with the fields above (dex::EntryKey,
 * DexKey); each is evaluated several times.
 */
#define DEX_KEY_COMPARE(a, b) \
	((a)->cls != (b)->cls ? ((a)->cls < (b)->cls ? -1 : 1) : \
	 (a)->value != (b)->value ? ((a)->value < (b)->value ? -1 : 1) : \
	 (a)->block != (b)->block ? ((a)->block < (b)->block ? -1 : 1) : \
	 (a)->offnum != (b)->offnum ? ((a)->offnum < (b)->offnum ? -1 : 1) : 0)

#endif							/* DEX_TREE_KEY_ENCODING_H */
