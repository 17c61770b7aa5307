// Small helpers shared by the source files of the B-link tree (btree.cpp,
// descend_cache.cpp, split_merge.cpp, migration.cpp, bulk_load.cpp, ...).
// Not part of the tree's interface: nothing outside src/tree includes this.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "tree/key.h"
#include "tree/node_layout.h"

namespace dex::tree::detail {

// A fresh node image: all zero, then tree id, level and the widest fences.
inline void init_node(Node& n, uint32_t tree_id, uint8_t level) {
    std::memset(static_cast<void*>(&n), 0, sizeof(Node));
    n.tree_id = tree_id;
    n.level = level;
    n.low = neg_inf_key();
    n.high = pos_inf_key();
}

// The 8-byte value at the start of an RPC response (GET_ROOT, SET_ROOT, ALLOC).
inline uint64_t get_u64(const std::vector<uint8_t>& r, const char* what) {
    if (r.size() < 8) throw Error(ErrorCode::kProtocol, std::string(what) + ": short response from memory node");
    uint64_t v;
    std::memcpy(&v, r.data(), 8);
    return v;
}

// Index of the child covering k among the first `count` entries: largest i
// with sep_i <= k (lt: sep_i < k); -1 if none. On a cached frame this reads
// racily; the caller validates the frame version afterwards.
inline int child_index_n(const Node& n, size_t count, const EntryKey& k, bool lt) {
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = compare_keys(n.inner[mid].sep, k);
        bool go_right = lt ? c < 0 : c <= 0;
        if (go_right)
            lo = mid + 1;
        else
            hi = mid;
    }
    return static_cast<int>(lo) - 1;
}
inline int child_index(const Node& n, const EntryKey& k, bool lt) { return child_index_n(n, n.count, k, lt); }

// Position of the first leaf entry >= k.
inline size_t leaf_lower_bound(const Node& n, const EntryKey& k) {
    return std::lower_bound(n.leaf, n.leaf + n.count, k) - n.leaf;
}

// Microseconds since t0: what one remote read or offload took, for the
// offloading cost model (OffloadPolicy::record_remote_read / record_offload).
inline double micros_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace dex::tree::detail
