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

namespace dex::tree::detail {

// The 8-byte value at the start of an RPC response (GET_ROOT, SET_ROOT, ALLOC).
inline uint64_t get_u64(const std::vector<uint8_t>& r, const char* what) {
    if (r.size() < 8) throw Error(ErrorCode::kProtocol, std::string(what) + ": short response from memory node");
    uint64_t v;
    std::memcpy(&v, r.data(), 8);
    return v;
}

// Microseconds since t0: what one remote read or offload took, for the
// offloading cost model (OffloadPolicy::record_remote_read / record_offload).
inline double micros_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace dex::tree::detail
