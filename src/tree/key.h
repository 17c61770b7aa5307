// THE definition of an index key for the C++ core. The encoding itself (classes,
// layout, value image, order) is tree/key_encoding.h, a plain C header the
// PostgreSQL glue includes too; this file builds the C++ API on it and
// static_asserts that EntryKey has exactly that layout. node_layout.h builds on it.
//
// An entry key is (class, value, heap TID). `class` orders -inf < values <
// NULL < +inf, which gives btree's default NULLS LAST. `value` is the indexed
// datum mapped order-preservingly to an unsigned 64-bit integer (signed ints:
// flip the sign bit). The heap TID makes every entry unique, so duplicates of
// a value are ordinary distinct entries (nbtree's "heap TID as tie-breaker").
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tree/key_encoding.h"

namespace dex {

enum KeyClass : uint8_t {
    kNegInf = DEX_KEYCLASS_NEG_INF,  // only in fences / search bounds
    kValue = DEX_KEYCLASS_VALUE,
    kNull = DEX_KEYCLASS_NULL,       // SQL NULL: sorts after every value (NULLS LAST)
    kPosInf = DEX_KEYCLASS_POS_INF,  // only in fences / search bounds
};

#pragma pack(push, 1)
struct EntryKey {
    uint64_t value;      // order-preserving image of the datum
    uint32_t block;      // heap TID block number
    uint16_t offnum;     // heap TID offset number
    uint8_t cls;         // KeyClass
    uint8_t pad;         // always 0 (keeps keys memcmp-stable on the wire)
};
#pragma pack(pop)
static_assert(sizeof(EntryKey) == 16, "EntryKey is 16 bytes; node_layout.h depends on it");
// The layout of key_encoding.h, field by field (the glue asserts the same of DexKey).
static_assert(sizeof(EntryKey) == DEX_KEY_BYTES);
static_assert(offsetof(EntryKey, value) == DEX_KEY_OFFSET_VALUE && sizeof(EntryKey::value) == 8);
static_assert(offsetof(EntryKey, block) == DEX_KEY_OFFSET_BLOCK && sizeof(EntryKey::block) == 4);
static_assert(offsetof(EntryKey, offnum) == DEX_KEY_OFFSET_OFFNUM && sizeof(EntryKey::offnum) == 2);
static_assert(offsetof(EntryKey, cls) == DEX_KEY_OFFSET_CLS && sizeof(EntryKey::cls) == 1);
static_assert(offsetof(EntryKey, pad) == DEX_KEY_OFFSET_PAD && sizeof(EntryKey::pad) == 1);
static_assert(DEX_KEY_BLOCK_MAX == UINT32_MAX && DEX_KEY_OFFNUM_MAX == UINT16_MAX);

// Order-preserving images of signed / unsigned 64-bit values (key_encoding.h).
constexpr uint64_t key_from_int64(int64_t v) { return DEX_KEY_FROM_INT64(v); }
constexpr int64_t key_to_int64(uint64_t k) { return DEX_KEY_TO_INT64(k); }
static_assert(key_from_int64(INT64_MIN) == 0 && key_from_int64(-1) < key_from_int64(0) &&
              key_from_int64(INT64_MAX) == UINT64_MAX && key_to_int64(key_from_int64(-42)) == -42);

inline EntryKey make_key(uint64_t value, uint32_t block, uint16_t offnum) {
    return EntryKey{value, block, offnum, kValue, 0};
}
inline EntryKey make_null_key(uint32_t block, uint16_t offnum) {
    return EntryKey{DEX_KEY_NO_VALUE, block, offnum, kNull, 0};
}
inline EntryKey neg_inf_key() { return EntryKey{DEX_KEY_NO_VALUE, 0, 0, kNegInf, 0}; }
inline EntryKey pos_inf_key() { return EntryKey{DEX_KEY_NO_VALUE, 0, 0, kPosInf, 0}; }

// Total order: class, value, block, offnum (key_encoding.h).
inline int compare_keys(const EntryKey& a, const EntryKey& b) { return DEX_KEY_COMPARE(&a, &b); }
inline bool operator<(const EntryKey& a, const EntryKey& b) { return compare_keys(a, b) < 0; }
inline bool operator==(const EntryKey& a, const EntryKey& b) { return compare_keys(a, b) == 0; }
inline bool operator<=(const EntryKey& a, const EntryKey& b) { return compare_keys(a, b) <= 0; }

}  // namespace dex
