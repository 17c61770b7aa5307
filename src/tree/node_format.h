// Node format rules that need no transport: entry sizes and capacities, the
// checksum, snapshot validation and sealing. Shared by the compute side
// (tree/node_io.h includes this) and dex-memnode's offload engine, which links
// only the wire library (libdexwire: net/ + this), not the client core.
// Depends on node_layout.h only. See src/README.md, "Node layout".
#pragma once
#include <cstddef>
#include <cstdint>

#include "tree/node_layout.h"

namespace dex::tree {

// Either layout (node_layout.h's kNodeSlotted): the functions below dispatch
// on the flag, so node I/O, the memory node and the cache handle both.
inline bool is_slotted(const Node& n) { return (n.flags & kNodeSlotted) != 0; }

// Fixed layout only (slotted nodes size their entries themselves).
inline size_t entry_size(uint8_t level) { return level == 0 ? sizeof(EntryKey) : sizeof(InnerEntry); }
inline size_t capacity_of(uint8_t level) { return level == 0 ? kLeafCapacity : kInnerCapacity; }
// Bytes [0, used) of the node carry information: header + entries in use;
// a slotted node's entry heap ends at the node's end, so all of it.
inline size_t used_bytes(const Node& n) {
    if (is_slotted(n)) return kNodeSize;
    size_t c = n.count > capacity_of(n.level) ? capacity_of(n.level) : n.count;
    return kNodeHeaderBytes + c * entry_size(n.level);
}

// Inner nodes: byte offset of slot i's child address (8-aligned, read and
// swizzled atomically by the cache) and how many slots a node can have.
constexpr size_t child_offset(bool slotted, uint32_t i) {
    return slotted ? DEX_SLOTTED_HEADER_BYTES + i * size_t(DEX_SLOTTED_INNER_SLOT_BYTES)
                   : kNodeHeaderBytes + i * sizeof(InnerEntry) + sizeof(EntryKey);
}
constexpr uint32_t max_inner_slots(bool slotted) {
    return slotted ? uint32_t(DEX_SLOTTED_MAX_INNER_SLOTS) : uint32_t(kInnerCapacity);
}

// A 64-bit hash of len bytes (multiply-xorshift over 8-byte words).
uint64_t hash_words(const uint8_t* p, size_t len);
// Fixed layout: 64-bit hash over bytes [16, 72 + count * entry size).
uint64_t node_checksum(const Node& n);
// The body (everything but the lock word) is one complete image: sane
// level/count (slotted: every offset in bounds) and the checksum matches.
bool body_intact(const Node& n);
// Snapshot is acceptable: unlocked, body_version == lock version, body intact.
bool snapshot_valid(const Node& n);
// Set body_version = version, the checksum, and an unlocked lock word (v, 0, 0).
void seal_node(Node& n, uint64_t version);

}  // namespace dex::tree
