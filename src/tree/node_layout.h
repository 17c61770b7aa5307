// THE definition of a remote tree node (1 KiB). See src/README.md, "Node layout"
// and "Synchronization", for why each field exists.
//
//  off  size
//    0     8  lock word   bit 0 locked | bits 1..23 owner client id | bits 24..63 version
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

namespace dex {

constexpr size_t kNodeSize = 1024;
constexpr size_t kNodeHeaderBytes = 72;

constexpr uint64_t kLockBit = 1;
constexpr int kLockOwnerShift = 1;
constexpr uint64_t kLockOwnerMask = (1ull << 23) - 1;
constexpr int kLockVersionShift = 24;

constexpr uint8_t kNodeDeleted = 0x01;

#pragma pack(push, 1)
struct InnerEntry {
    EntryKey sep;
    GAddr child;
};
#pragma pack(pop)
static_assert(sizeof(InnerEntry) == 24);

constexpr size_t kLeafCapacity = (kNodeSize - kNodeHeaderBytes) / sizeof(EntryKey);    // 59
constexpr size_t kInnerCapacity = (kNodeSize - kNodeHeaderBytes) / sizeof(InnerEntry); // 39

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
constexpr uint32_t lock_owner(uint64_t w) { return static_cast<uint32_t>((w >> kLockOwnerShift) & kLockOwnerMask); }
constexpr bool lock_held(uint64_t w) { return (w & kLockBit) != 0; }
constexpr uint64_t make_lock_word(uint64_t version, uint32_t owner, bool locked) {
    return (version << kLockVersionShift) | ((static_cast<uint64_t>(owner) & kLockOwnerMask) << kLockOwnerShift) |
           (locked ? kLockBit : 0);
}

}  // namespace dex
