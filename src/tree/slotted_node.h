// Slotted nodes: the node layout for byte-string keys (text, uuid, numeric,
// several columns; src/README.md "Slotted nodes"). The sizes and the longest
// entry are plain C constants in tree/node_capacity.h (the glue names the
// limit in its error); this file asserts that they hold for the layout below.
//
// Same 1 KiB as dex::Node and the same first 40 bytes, so the remote-lock
// and version protocol (lock word, checksum, body_version, tree id, level,
// flags, count, right link) is unchanged:
//
//  off  size
//    0    40  as dex::Node (flags additionally carry kSlotted, kHighPosInf)
//   40     2  heap_top    entry bytes live in [heap_top, kNodeSize)
//   42     2  garbage     bytes in that heap no slot or fence refers to
//   44     4  low fence   offset, length (length 0: -inf)
//   48     4  high fence  offset, length (ignored if kHighPosInf)
//   52     4  spare (0)
//   56   ...  slots       leaf: {u16 offset, u16 length}; inner: {u64 child,
//                         u16 offset, u16 length, u32 0}, 8-byte aligned so a
//                         child can be read and swizzled atomically
//
// An entry is compared as a byte string: memcmp, a proper prefix first. The
// tree gives it meaning (key column bytes, tree/key_bytes.h, then the heap
// TID big-endian); nothing here knows it. An empty string is -inf (only a low
// fence or the first separator of a leftmost inner node).
//
// Readers see nodes torn (optimistic reads): layout_valid() bounds every
// offset before anything is dereferenced, and the checksum then decides.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "common/gaddr.h"
#include "tree/node_capacity.h"
#include "tree/node_layout.h"

namespace dex::tree::slotted {

constexpr size_t kHeaderBytes = DEX_SLOTTED_HEADER_BYTES;
constexpr size_t kLeafSlotBytes = DEX_SLOTTED_LEAF_SLOT_BYTES;
constexpr size_t kInnerSlotBytes = DEX_SLOTTED_INNER_SLOT_BYTES;
constexpr size_t kBodyBytes = DEX_SLOTTED_BODY_BYTES;
constexpr size_t kMaxEntryBytes = DEX_SLOTTED_MAX_ENTRY_BYTES;

// flags, beside dex::kNodeDeleted
constexpr uint8_t kSlotted = kNodeSlotted;        // this layout (node_layout.h)
constexpr uint8_t kHighPosInf = kNodeHighPosInf;  // the high fence is +inf
constexpr size_t kMaxInnerSlots = DEX_SLOTTED_MAX_INNER_SLOTS;

// A byte string inside a node or a caller's buffer. Compared with memcmp, a
// proper prefix first.
using Bytes = std::string_view;
inline Bytes bytes(const uint8_t* p, size_t n) { return Bytes(reinterpret_cast<const char*>(p), n); }
inline int compare(Bytes a, Bytes b) {
    int c = a.compare(b);  // char_traits<char> compares as unsigned char: memcmp order
    return (c > 0) - (c < 0);
}

#pragma pack(push, 1)
struct LeafSlot {
    uint16_t off;
    uint16_t len;
};
struct InnerSlot {
    GAddr child;
    uint16_t off;
    uint16_t len;
    uint32_t spare;
};
#pragma pack(pop)
static_assert(sizeof(LeafSlot) == kLeafSlotBytes && sizeof(InnerSlot) == kInnerSlotBytes);

struct alignas(8) SNode {
    uint64_t lock;
    uint64_t checksum;
    uint64_t body_version;
    uint32_t tree_id;
    uint8_t level;
    uint8_t flags;
    uint16_t count;
    GAddr right;
    uint16_t heap_top;
    uint16_t garbage;
    uint16_t low_off, low_len;
    uint16_t high_off, high_len;
    uint32_t spare;
    uint8_t raw[kNodeSize - kHeaderBytes];

    bool is_leaf() const { return level == 0; }
    bool is_deleted() const { return (flags & kNodeDeleted) != 0; }
    size_t slot_bytes() const { return is_leaf() ? kLeafSlotBytes : kInnerSlotBytes; }
};
static_assert(sizeof(SNode) == kNodeSize);
static_assert(offsetof(SNode, lock) == offsetof(Node, lock) && offsetof(SNode, checksum) == offsetof(Node, checksum) &&
              offsetof(SNode, body_version) == offsetof(Node, body_version) &&
              offsetof(SNode, tree_id) == offsetof(Node, tree_id) && offsetof(SNode, level) == offsetof(Node, level) &&
              offsetof(SNode, flags) == offsetof(Node, flags) && offsetof(SNode, count) == offsetof(Node, count) &&
              offsetof(SNode, right) == offsetof(Node, right),
              "the first 40 bytes are dex::Node's: the lock and version protocol is shared");
static_assert(offsetof(SNode, raw) == kHeaderBytes && kHeaderBytes % 8 == 0);
static_assert(kHeaderBytes + kMaxInnerSlots * kInnerSlotBytes <= kNodeSize && offsetof(InnerSlot, child) == 0);
// The split argument of node_capacity.h: half the body holds one more entry
// (inner slot + longest entry) and two longest fences.
static_assert(kInnerSlotBytes + 3 * kMaxEntryBytes <= kBodyBytes / 2);
static_assert(kMaxEntryBytes % 8 == 0 && kMaxEntryBytes > DEX_TID_BYTES);

// ---- reading (every accessor assumes layout_valid()) ----
inline const LeafSlot* leaf_slots(const SNode& n) { return reinterpret_cast<const LeafSlot*>(n.raw); }
inline const InnerSlot* inner_slots(const SNode& n) { return reinterpret_cast<const InnerSlot*>(n.raw); }
inline const uint8_t* base(const SNode& n) { return reinterpret_cast<const uint8_t*>(&n); }

inline Bytes key(const SNode& n, size_t i) {
    if (n.is_leaf()) return bytes(base(n) + leaf_slots(n)[i].off, leaf_slots(n)[i].len);
    return bytes(base(n) + inner_slots(n)[i].off, inner_slots(n)[i].len);
}
inline GAddr child(const SNode& n, size_t i) { return inner_slots(n)[i].child; }
inline Bytes low(const SNode& n) { return bytes(base(n) + n.low_off, n.low_len); }
inline bool high_is_inf(const SNode& n) { return (n.flags & kHighPosInf) != 0; }
inline Bytes high(const SNode& n) { return bytes(base(n) + n.high_off, n.high_len); }
// low <= k < high
inline bool covers(const SNode& n, Bytes k) {
    return compare(low(n), k) <= 0 && (high_is_inf(n) || compare(k, high(n)) < 0);
}
// First i with key_i >= k.
size_t lower_bound(const SNode& n, Bytes k);
// Inner: largest i with sep_i <= k (lt: sep_i < k); -1 if none.
int child_index(const SNode& n, Bytes k, bool lt = false);

// Bytes a new entry of `len` needs (slot included), and what is free
// (contiguous space plus garbage a compaction recovers).
inline size_t entry_cost(const SNode& n, size_t len) { return n.slot_bytes() + len; }
inline size_t free_bytes(const SNode& n) {
    return n.heap_top - kHeaderBytes - n.count * n.slot_bytes() + n.garbage;
}

// Offsets, lengths and count in bounds, fences and entries inside the heap,
// the format flag set. Cheap; run on every snapshot before its checksum.
bool layout_valid(const SNode& n);
// 64-bit hash over [16, slot end) and [heap_top, kNodeSize).
uint64_t checksum(const SNode& n);
// layout_valid, unlocked, body_version matches the lock word, checksum ok.
bool snapshot_valid(const SNode& n);
void seal(SNode& n, uint64_t version);

// ---- writing (a private image: the caller holds the node's lock) ----
// All zero, then tree id, level, kSlotted and the widest fences.
void init(SNode& n, uint32_t tree_id, uint8_t level);
// Entries and fences are copied; a fence longer than kMaxEntryBytes, or no
// room, returns false and leaves n unchanged.
bool set_fences(SNode& n, Bytes lo, Bytes hi, bool hi_inf);
// Insert at position pos (keeping order is the caller's: pos = lower_bound).
// False, n unchanged, if the entry is longer than kMaxEntryBytes or does not
// fit even after compaction: the node must split.
bool insert_leaf(SNode& n, size_t pos, Bytes k);
bool insert_inner(SNode& n, size_t pos, Bytes sep, GAddr child);
void erase(SNode& n, size_t pos);
// Rewrite the heap without garbage (insert does it when it has to).
void compact(SNode& n);

// Split a node that cannot take entry (k, child) at pos: `left` (the node's
// address; low fence kept, high fence = sep, right link = the caller's) and
// `right` (low fence = sep, high fence and right link the old node's) hold
// every entry plus the new one, balanced by bytes. sep: for leaves the
// shortest prefix of right's first entry above left's last; for inner nodes
// right's first separator (which stays there: sep_0 == low fence). Both
// halves get the old node's tree id, level and flags except kNodeDeleted.
// False if k is longer than kMaxEntryBytes. The argument of node_capacity.h
// guarantees both halves fit otherwise.
bool split_insert(const SNode& n, size_t pos, Bytes k, GAddr child, SNode& left, SNode& right, std::string& sep);

}  // namespace dex::tree::slotted
