// THE definition of an index key. Key width and ordering live here and
// nowhere else; node_layout.h builds on it.
//
// An entry key is (class, value, heap TID). `class` orders -inf < values <
// NULL < +inf, which gives btree's default NULLS LAST. `value` is the indexed
// datum mapped order-preservingly to an unsigned 64-bit integer (signed ints:
// flip the sign bit). The heap TID makes every entry unique, so duplicates of
// a value are ordinary distinct entries (nbtree's "heap TID as tie-breaker").
#pragma once
#include <cstdint>
#include <cstring>

namespace dex {

enum KeyClass : uint8_t {
    kNegInf = 0,   // only in fences / search bounds
    kValue = 1,
    kNull = 2,     // SQL NULL: sorts after every value (NULLS LAST)
    kPosInf = 3,   // only in fences / search bounds
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

// Order-preserving images of signed / unsigned 64-bit values.
constexpr uint64_t key_from_int64(int64_t v) { return static_cast<uint64_t>(v) ^ (1ull << 63); }
constexpr int64_t key_to_int64(uint64_t k) { return static_cast<int64_t>(k ^ (1ull << 63)); }

inline EntryKey make_key(uint64_t value, uint32_t block, uint16_t offnum) {
    return EntryKey{value, block, offnum, kValue, 0};
}
inline EntryKey make_null_key(uint32_t block, uint16_t offnum) {
    return EntryKey{0, block, offnum, kNull, 0};
}
inline EntryKey neg_inf_key() { return EntryKey{0, 0, 0, kNegInf, 0}; }
inline EntryKey pos_inf_key() { return EntryKey{0, 0, 0, kPosInf, 0}; }

// Total order: class, value, block, offnum.
inline int compare_keys(const EntryKey& a, const EntryKey& b) {
    if (a.cls != b.cls) return a.cls < b.cls ? -1 : 1;
    if (a.value != b.value) return a.value < b.value ? -1 : 1;
    if (a.block != b.block) return a.block < b.block ? -1 : 1;
    if (a.offnum != b.offnum) return a.offnum < b.offnum ? -1 : 1;
    return 0;
}
inline bool operator<(const EntryKey& a, const EntryKey& b) { return compare_keys(a, b) < 0; }
inline bool operator==(const EntryKey& a, const EntryKey& b) { return compare_keys(a, b) == 0; }
inline bool operator<=(const EntryKey& a, const EntryKey& b) { return compare_keys(a, b) <= 0; }

}  // namespace dex
