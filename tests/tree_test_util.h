// Shared helpers for the tree tests: an in-process memory node + namespace.
#pragma once
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "common/error.h"
#include "engine/engine.h"
#include "transport/inproc_transport.h"
#include "transport/remote_memory.h"
#include "tree/btree.h"
#include "wire_test_util.h"

namespace dex::testing {

inline EntryKey K(int64_t v, uint32_t block, uint16_t off) { return make_key(key_from_int64(v), block, off); }
// Strict bounds via extreme TIDs.
inline EntryKey KMin(int64_t v) { return K(v, 0, 0); }
inline EntryKey KMax(int64_t v) { return K(v, 0xFFFFFFFFu, 0xFFFF); }

inline std::unique_ptr<memnode::Engine> make_engine(uint64_t pool_bytes) {
    memnode::EngineOptions o;
    o.pool_bytes = pool_bytes;
    o.try_hugepages = false;
    o.touch_pool = false;
    return std::make_unique<memnode::Engine>(o);
}

inline std::unique_ptr<RemoteMemory> make_mem(memnode::Engine& e) {
    std::vector<std::unique_ptr<Transport>> v;
    v.push_back(std::make_unique<InProcTransport>(e));
    return std::make_unique<RemoteMemory>(std::move(v));
}

inline uint64_t ns_create(Transport& t) { return rpc::ns_create(t, "tree-test"); }

inline uint64_t ns_bytes(Transport& t, uint64_t ns) {
    auto r = t.rpc(net::kOpNsList, nullptr, 0);
    uint32_t n;
    std::memcpy(&n, r.data(), 4);
    for (uint32_t i = 0; i < n; i++) {
        net::NsInfo info;
        std::memcpy(&info, r.data() + 4 + i * sizeof info, sizeof info);
        if (info.ns == ns) return info.bytes_allocated;
    }
    return 0;
}

inline std::vector<EntryKey> scan_all(tree::BTree& t, const EntryKey& lo, const EntryKey& hi, bool backward) {
    std::vector<EntryKey> all, batch;
    auto s = t.scan(lo, hi, backward);
    while (s->next(batch)) all.insert(all.end(), batch.begin(), batch.end());
    return all;
}

inline std::vector<EntryKey> model_range(const std::set<EntryKey>& m, const EntryKey& lo, const EntryKey& hi,
                                         bool backward) {
    std::vector<EntryKey> r;
    if (hi < lo) return r;
    for (auto it = m.lower_bound(lo); it != m.end() && *it <= hi; ++it) r.push_back(*it);
    if (backward) std::reverse(r.begin(), r.end());
    return r;
}

}  // namespace dex::testing
