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

inline size_t entry_size(uint8_t level) { return level == 0 ? sizeof(EntryKey) : sizeof(InnerEntry); }
inline size_t capacity_of(uint8_t level) { return level == 0 ? kLeafCapacity : kInnerCapacity; }
// Bytes [0, used) of the node carry information (header + entries in use).
inline size_t used_bytes(const Node& n) {
    size_t c = n.count > capacity_of(n.level) ? capacity_of(n.level) : n.count;
    return kNodeHeaderBytes + c * entry_size(n.level);
}

// A 64-bit hash of len bytes (multiply-xorshift over 8-byte words).
uint64_t hash_words(const uint8_t* p, size_t len);
// 64-bit hash over bytes [16, 72 + count * entry size).
uint64_t node_checksum(const Node& n);
// Snapshot is acceptable: unlocked, body_version == lock version, sane count, checksum ok.
bool snapshot_valid(const Node& n);
// Set body_version = version, the checksum, and an unlocked lock word (v, 0, 0).
void seal_node(Node& n, uint64_t version);

}  // namespace dex::tree
