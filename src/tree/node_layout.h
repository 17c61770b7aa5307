// THE definition of a remote tree node (1 KiB). See src/README.md, "Node layout"
// and "Synchronization", for why each field exists. The node and header sizes
// and the capacities are plain C constants in tree/node_capacity.h (read by the
// PostgreSQL glue's cost model too); this file takes them from there and
// static_asserts that the layout below agrees.
//
//  off  size
//    0     8  lock word   bit 0 locked | bits 1..39 owner client id | bits 40..63 version
//                         (the low 24 bits of body_version)
//    8     8  checksum    over bytes [16, 16 + kHeaderBytes - 16 + count * entry size)
//   16     8  body_version  = version the writer will publish on unlock; readers
//                             require body_version == lock-word version
//   24     4  tree_id     low 32 bits of the namespace id (detects reused memory)
//   28     1  level       0 = leaf
//   29     1  flags       kNodeDeleted: merged away, `right` then forwards to the survivor
//   30     2  count       entries in use
//   32     8  right       right sibling GAddr (0 = rightmost at its level)
//   40    16  low fence   EntryKey: every key k in the node has low <= k < high
//   56    16  high fence
//   72   ...  entries     leaf: EntryKey; inner: InnerEntry (separator, child)
//
// Inner node: entry i's child covers [sep_i, sep_{i+1}); sep_0 equals the node's
// low fence; the last child covers up to the node's high fence.
#pragma once
#include <cstddef>
#include <cstdint>

#include "common/gaddr.h"
#include "tree/key.h"
#include "tree/node_capacity.h"

namespace dex {

constexpr size_t kNodeSize = DEX_NODE_BYTES;
constexpr size_t kNodeHeaderBytes = DEX_NODE_HEADER_BYTES;

// Lock word. The owner is the memory node's client id of the holder's
// connection, whole: ids are 39 bits and never reused within one memory-node
// incarnation (a waiter asks CLIENT_ALIVE about exactly the holder). The
// version is the low 24 bits of body_version: enough to tell a torn read (two
// consecutive versions) and, since a writer CASes within a second of reading
// (Locks::try_lock), to rule out ABA -- 2^24 publishes of one node within a
// second are impossible (each costs a CAS and a write round trip, serialized
// by the lock).
constexpr uint64_t kLockBit = 1;
constexpr int kLockOwnerShift = 1;
constexpr int kLockOwnerBits = 39;
constexpr uint64_t kLockOwnerMask = (1ull << kLockOwnerBits) - 1;
constexpr uint64_t kMaxClientId = kLockOwnerMask;
constexpr int kLockVersionShift = 40;
constexpr uint64_t kLockVersionMask = (1ull << 24) - 1;

constexpr uint8_t kNodeDeleted = 0x01;
// The node has the slotted layout of tree/slotted_node.h (byte-string keys);
// only the first 40 bytes above are then as described here. A tree uses one
// layout; the flag lets code below the tree (validation, node I/O, the
// cache's child pointers) handle either, and makes a reused node of the
// other layout fail validation.
constexpr uint8_t kNodeSlotted = 0x02;
// Slotted nodes only: the high fence is +inf.
constexpr uint8_t kNodeHighPosInf = 0x04;

#pragma pack(push, 1)
struct InnerEntry {
    EntryKey sep;
    GAddr child;
};
#pragma pack(pop)
static_assert(sizeof(InnerEntry) == 24);
static_assert(sizeof(InnerEntry) == DEX_INNER_ENTRY_BYTES && sizeof(GAddr) == DEX_GADDR_BYTES);

constexpr size_t kLeafCapacity = (kNodeSize - kNodeHeaderBytes) / sizeof(EntryKey);    // 59
constexpr size_t kInnerCapacity = (kNodeSize - kNodeHeaderBytes) / sizeof(InnerEntry); // 39
static_assert(kLeafCapacity == DEX_LEAF_CAPACITY && kInnerCapacity == DEX_INNER_CAPACITY,
              "tree/node_capacity.h must state the capacities of this layout");

struct alignas(8) Node {
    uint64_t lock;
    uint64_t checksum;
    uint64_t body_version;
    uint32_t tree_id;
    uint8_t level;
    uint8_t flags;
    uint16_t count;
    GAddr right;
    EntryKey low;
    EntryKey high;
    union {
        EntryKey leaf[kLeafCapacity];
        InnerEntry inner[kInnerCapacity];
        uint8_t raw[kNodeSize - kNodeHeaderBytes];
    };

    bool is_leaf() const { return level == 0; }
    bool is_deleted() const { return (flags & kNodeDeleted) != 0; }
    size_t capacity() const { return is_leaf() ? kLeafCapacity : kInnerCapacity; }
};
static_assert(sizeof(Node) == kNodeSize, "node must be exactly kNodeSize bytes");
static_assert(offsetof(Node, low) == 40 && offsetof(Node, leaf) == kNodeHeaderBytes);

constexpr uint64_t lock_version(uint64_t w) { return w >> kLockVersionShift; }
constexpr uint64_t lock_owner(uint64_t w) { return (w >> kLockOwnerShift) & kLockOwnerMask; }
constexpr bool lock_held(uint64_t w) { return (w & kLockBit) != 0; }
// `version` may be a full body_version: only its low 24 bits are kept.
constexpr uint64_t make_lock_word(uint64_t version, uint64_t owner, bool locked) {
    return ((version & kLockVersionMask) << kLockVersionShift) | ((owner & kLockOwnerMask) << kLockOwnerShift) |
           (locked ? kLockBit : 0);
}
// Does a node's body_version belong to this lock word's version?
constexpr bool versions_match(uint64_t body_version, uint64_t w) {
    return (body_version & kLockVersionMask) == lock_version(w);
}
// The version a reused block's new node starts at, given the first 24 bytes
// of its previous life (lock word, checksum, body_version -- or any bytes):
// above the previous life's lock version (a CAS prepared from it cannot
// succeed) and, if it was a node, above its full body version (a cached copy
// of it can never look newer). One rule for the compute side
// (BTree::fresh_version) and the memory node's own splits.
constexpr uint64_t fresh_version_after(uint64_t lock_word, uint64_t body_version) {
    const uint64_t v = (lock_version(lock_word) > body_version ? lock_version(lock_word) : body_version) + 1;
    return v < (1ull << 62) ? v : lock_version(lock_word) + 1;
}
static_assert(lock_owner(make_lock_word(~0ull, kMaxClientId, true)) == kMaxClientId);
static_assert(lock_version(make_lock_word(~0ull, kMaxClientId, true)) == kLockVersionMask);

}  // namespace dex
