// Shared helpers for the tree tests: an in-process memory node + namespace,
// keys, model comparisons, raw leaf lookups, a cache region in heap memory,
// remote-operation counters and the cache coherence check.
#pragma once
#include <cstdio>
#include <string>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "cache/cache.h"
#include "cache/region.h"
#include "common/error.h"
#include "common/stats.h"
#include "engine/engine.h"
#include "transport/inproc_transport.h"
#include "transport/remote_memory.h"
#include "tree/btree.h"
#include "test_util.h"
#include "wire_test_util.h"

namespace dex::testing {

inline EntryKey K(int64_t v, uint32_t block, uint16_t off) { return make_key(key_from_int64(v), block, off); }
// Strict bounds via extreme TIDs.
inline EntryKey KMin(int64_t v) { return K(v, 0, 0); }
// A slotted tree's entry as the glue builds one: text-like key bytes (an
// e-mail address of `user`) and a 6-byte big-endian "heap TID".
inline std::string email_entry(uint32_t user, uint32_t tid = 1) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "user%08u@example.com", user);
    std::string k(buf);
    for (int i = 5; i >= 0; i--) k.push_back(static_cast<char>(i >= 4 ? 0 : (tid >> (8 * i)) & 0xff));
    return k;
}
inline EntryKey KMax(int64_t v) { return K(v, 0xFFFFFFFFu, 0xFFFF); }

inline std::unique_ptr<memnode::Engine> make_engine(uint64_t pool_bytes) {
    memnode::EngineOptions o = small_pool(pool_bytes);
    o.touch_pool = false;
    return std::make_unique<memnode::Engine>(o);
}

// An in-process memory node seen through a wrapper that changes part of what
// the compute side sees (its HELLO capabilities, a lost answer, counted
// frames): every operation goes through; every capability is the Transport
// default (none announced, offloaded writes allowed) unless the wrapper
// overrides it -- each test's wrapper names exactly what its node announces.
class InProcForwarder : public Transport {
public:
    explicit InProcForwarder(memnode::Engine& e) : in_(e) {}
    uint64_t incarnation() override { return in_.incarnation(); }
    uint64_t client_id() override { return in_.client_id(); }
    uint64_t connected_client_id() override { return in_.connected_client_id(); }
    const std::string& address() const override { return in_.address(); }
    void read(uint64_t o, void* d, uint32_t l) override { in_.read(o, d, l); }
    void write(uint64_t o, const void* s, uint32_t l) override { in_.write(o, s, l); }
    uint64_t cas(uint64_t o, uint64_t e, uint64_t d) override { return in_.cas(o, e, d); }
    uint64_t faa(uint64_t o, uint64_t a) override { return in_.faa(o, a); }
    void batch(RemoteOp* ops, size_t n) override { in_.batch(ops, n); }
    std::vector<uint8_t> rpc(net::Op op, const void* p, uint32_t l) override { return in_.rpc(op, p, l); }

protected:
    InProcTransport in_;
};

inline std::unique_ptr<RemoteMemory> make_mem(memnode::Engine& e) {
    std::vector<std::unique_ptr<Transport>> v;
    v.push_back(std::make_unique<InProcTransport>(e));
    return std::make_unique<RemoteMemory>(std::move(v));
}

// An offloaded insert of k starting at `leaf` (level 0) of tree `tree_id` on
// memory node 0: what the split requests' tests send by hand.
inline net::OffloadRequest leaf_insert_request(GAddr leaf, uint32_t tree_id, const EntryKey& k) {
    net::OffloadRequest r{};
    r.start = gaddr_offset(leaf);
    r.tree_id = tree_id;
    r.node = 0;
    r.kind = net::kOffloadInsert;
    r.start_level = 0;
    std::memcpy(r.key, &k, sizeof r.key);
    return r;
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

// The leaf whose range holds k, read raw (locks ignored) along downlinks
// only: for a quiet tree.
inline GAddr leaf_for(RemoteMemory& mem, GAddr root, const EntryKey& k) {
    GAddr a = root;
    Node n;
    for (;;) {
        mem.read(a, &n, kNodeSize);
        if (n.is_leaf()) return a;
        size_t i = 0;
        while (i + 1 < n.count && n.inner[i + 1].sep <= k) i++;
        a = n.inner[i].child;
    }
}

// A compute server's node cache: one CacheRegion in (here: heap) memory.
// Each backend of that server opens its own cache::Cache handle on it.
struct Region {
    std::unique_ptr<char[]> mem;
    cache::CacheRegion* region;
    explicit Region(uint32_t frames, cache::AdmissionPolicy p = {true, 1.0}) {
        size_t bytes = cache::CacheRegion::bytes_for(size_t(frames) * kNodeSize);
        mem.reset(new char[bytes]);
        region = cache::CacheRegion::init(mem.get(), bytes, p);
    }
};

// A tree of n keys K(0..n-1, 1, 1), bulk-loaded (fill 0.9) through a cache
// of `frames` frames that admits every node (one process's handle). A test
// binds its parts: auto& [engine, mem, ns, reg, c, o, t] = bulk_tree;
struct CachedBulkTree {
    std::unique_ptr<memnode::Engine> engine;
    std::unique_ptr<RemoteMemory> mem;
    uint64_t ns;
    Region reg;
    cache::Cache c;
    tree::TreeOptions o;
    tree::BTree t;
    explicit CachedBulkTree(int n, uint32_t frames = 1u << 14)
        : engine(make_engine(128ull << 20)),
          mem(make_mem(*engine)),
          ns(ns_create(mem->node(0))),
          reg(frames, {true, 1.0}),
          c(*reg.region, 1),
          o(options(c)),
          t(*mem, 0, ns, o) {
        tree::BTree::BulkLoader bl(t, 0.9);
        for (int i = 0; i < n; i++) bl.add(K(i, 1, 1));
        bl.finish();
    }
    static tree::TreeOptions options(cache::Cache& cache) {
        tree::TreeOptions opts;
        opts.cache = &cache;
        return opts;
    }
};

// The process-wide remote-operation and cache counters (dex::stats()) at one
// moment, to count what an operation cost.
struct Snapshot {
    uint64_t reads, writes, atomics, rpcs, trips, hits, misses, restarts;
    static Snapshot take() {
        auto& s = stats();
        return {s.remote_reads.load(), s.remote_writes.load(), s.remote_atomics.load(), s.remote_rpcs.load(),
                s.round_trips.load(),  s.cache_hits.load(),    s.cache_misses.load(),   s.restarts.load()};
    }
    uint64_t remote_ops() const { return reads + writes + atomics + rpcs + trips; }
};

// Every mapped frame must hold exactly the remote node (write-through keeps
// them equal once nobody is writing), with child pointers unswizzled.
// Returns the number of frames compared; adds a failure per mismatch.
inline size_t expect_cache_coherent(cache::CacheRegion& r, RemoteMemory& mem) {
    std::vector<std::pair<GAddr, uint32_t>> mapped;
    r.table().for_each([&](GAddr g, uint32_t f) {
        if (f != cache::MappingTable::kIoInProgress) mapped.emplace_back(g, f);
    });
    size_t bad = 0;
    for (auto [g, f] : mapped) {
        // The swizzle count is the number of swizzled child pointers in use
        // (an undercount that wrapped below zero made the frame impossible to
        // drop, and every descent that needed to drop it spun).
        const Node* img = r.node(f);
        if (img->level > 0) {
            uint32_t swizzled = 0;
            for (uint32_t i = 0; i < img->count && i < tree::max_inner_slots(tree::is_slotted(*img)); i++)
                if (gaddr_is_swizzled(cache::CacheRegion::load_child(img, i))) swizzled++;
            EXPECT_EQ(r.header(f).swizzled_children.load(), swizzled) << "frame " << f << " level " << int(img->level);
        }
        Node cached, remote;
        r.copy_unswizzled(f, cached);
        mem.read(g, &remote, kNodeSize);
        EXPECT_EQ(r.header(f).gaddr.load(), g);
        size_t used = tree::used_bytes(remote);
        if (cached.body_version != remote.body_version ||
            std::memcmp(reinterpret_cast<char*>(&cached) + 8, reinterpret_cast<char*>(&remote) + 8, used - 8) != 0) {
            if (bad++ < 5)
                ADD_FAILURE() << "frame " << f << " holding " << tree::hex_addr(g) << " differs from remote memory: "
                              << "cached version " << cached.body_version << " count " << cached.count
                              << ", remote version " << remote.body_version << " count " << remote.count;
        }
    }
    return mapped.size();
}

// A slotted tree holds exactly `model` (check() and a full scan), and its
// cached nodes equal remote memory.
inline void expect_slotted_tree_is(tree::SlottedTree& t, const std::set<std::string>& model, cache::CacheRegion& r,
                                   RemoteMemory& mem) {
    EXPECT_EQ(t.check().entries, model.size());
    std::vector<std::string> all, b;
    auto s = t.scan(tree::SlottedLayout::neg_inf(), tree::SlottedLayout::pos_inf(), false);
    while (s->next(b)) all.insert(all.end(), b.begin(), b.end());
    EXPECT_TRUE(all == std::vector<std::string>(model.begin(), model.end()));
    expect_cache_coherent(r, mem);
}

// A tree on one in-process memory node, uncached or with a node cache of
// `frames` frames, and a model of its entries: TearDown compares the tree
// with the model and, when cached, the cache with remote memory. For suites
// parameterized over cache configurations (kill_test, bottomup_test).
struct CacheConfig {
    const char* name;
    uint32_t frames;  // 0: no cache
};
inline void PrintTo(const CacheConfig& c, std::ostream* os) { *os << c.name; }
inline std::string cache_config_name(const ::testing::TestParamInfo<CacheConfig>& i) { return i.param.name; }

class ModelTreeTest : public ::testing::TestWithParam<CacheConfig> {
protected:
    void SetUp() override {
        engine = make_engine(64ull << 20);
        mem = make_mem(*engine);
        ns = ns_create(mem->node(0));
        if (GetParam().frames) {
            reg = std::make_unique<Region>(GetParam().frames);
            handle = std::make_unique<cache::Cache>(*reg->region, 777);
            opts.cache = handle.get();
        }
        t = std::make_unique<tree::BTree>(*mem, 0, ns, opts);
        t->init_empty();
    }
    void TearDown() override {
        if (reg) expect_cache_coherent(*reg->region, *mem);
        EXPECT_EQ(t->check().entries, model.size());
        auto all = scan_all(*t, neg_inf_key(), pos_inf_key(), false);
        EXPECT_TRUE(std::equal(all.begin(), all.end(), model.begin(), model.end()));
    }

    std::unique_ptr<memnode::Engine> engine;
    std::unique_ptr<RemoteMemory> mem;
    uint64_t ns = 0;
    std::unique_ptr<Region> reg;
    std::unique_ptr<cache::Cache> handle;
    tree::TreeOptions opts;  // the tree's (with the cache, if any)
    std::unique_ptr<tree::BTree> t;
    std::set<EntryKey> model;
};

}  // namespace dex::testing
