// The B-link tree through the shared node cache (src/README.md "Node cache"):
// model comparisons with a large and a tiny (constantly evicting) cache,
// zero remote operations on a fully cached lookup, two compute servers with
// separate caches over one remote tree (stale cached inner nodes), several
// backends (threads, each with its own Cache handle and transport) sharing one
// CacheRegion, and coherence of every cached frame with remote memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <random>
#include <set>
#include <thread>

#include "cache/cache.h"
#include "cache/region.h"
#include "common/stats.h"
#include "tree_test_util.h"

using namespace dex;
using namespace dex::testing;
using dex::tree::BTree;

namespace {

// A compute server's cache: one region in (here: heap) memory.
struct Region {
    std::unique_ptr<char[]> mem;
    cache::CacheRegion* region;
    Region(uint32_t frames, cache::AdmissionPolicy p) {
        size_t bytes = cache::CacheRegion::bytes_for(size_t(frames) * kNodeSize);
        mem.reset(new char[bytes]);
        region = cache::CacheRegion::init(mem.get(), bytes, p);
    }
};

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
size_t expect_cache_coherent(cache::CacheRegion& r, RemoteMemory& mem) {
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
            for (uint32_t i = 0; i < img->count && i < kInnerCapacity; i++)
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

struct CacheParam {
    const char* name;
    uint32_t frames;
    bool cache_leaves;
    double leaf_admission;
};

void PrintTo(const CacheParam& p, std::ostream* os) { *os << p.name; }

class CachedTreeTest : public ::testing::TestWithParam<CacheParam> {
protected:
    void SetUp() override {
        engine = make_engine(256ull << 20);
        mem = make_mem(*engine);
        ns = ns_create(mem->node(0));
        const CacheParam& p = GetParam();
        reg = std::make_unique<Region>(p.frames, cache::AdmissionPolicy{p.cache_leaves, p.leaf_admission});
        handle = std::make_unique<cache::Cache>(*reg->region, 12345);
        tree::TreeOptions o;
        o.cache = handle.get();
        tree = std::make_unique<BTree>(*mem, 0, ns, o);
        stats().reset();
    }
    void TearDown() override {
        if (tree) expect_cache_coherent(*reg->region, *mem);
        // Every scenario must actually have used the cache.
        EXPECT_GT(stats().cache_hits.load(), 0u);
        if (GetParam().frames <= 64) {
            EXPECT_GT(stats().evictions.load(), 0u) << "tiny cache never evicted";
        }
        std::printf("[ info     ] %s: hits %llu misses %llu admissions %llu evictions %llu restarts %llu\n",
                    GetParam().name, (unsigned long long)stats().cache_hits.load(),
                    (unsigned long long)stats().cache_misses.load(), (unsigned long long)stats().admissions.load(),
                    (unsigned long long)stats().evictions.load(), (unsigned long long)stats().restarts.load());
    }
    void expect_same(const std::set<EntryKey>& model) {
        auto all = scan_all(*tree, neg_inf_key(), pos_inf_key(), false);
        ASSERT_EQ(all.size(), model.size());
        EXPECT_TRUE(std::equal(all.begin(), all.end(), model.begin()));
        auto back = scan_all(*tree, neg_inf_key(), pos_inf_key(), true);
        ASSERT_EQ(back.size(), model.size());
        EXPECT_TRUE(std::equal(back.begin(), back.end(), model.rbegin()));
        EXPECT_EQ(tree->check().entries, model.size());
    }

    std::unique_ptr<memnode::Engine> engine;
    std::unique_ptr<RemoteMemory> mem;
    uint64_t ns = 0;
    std::unique_ptr<Region> reg;
    std::unique_ptr<cache::Cache> handle;
    std::unique_ptr<BTree> tree;
};

TEST_P(CachedTreeTest, RandomInsertsDuplicatesAndNulls) {
    tree->init_empty();
    std::mt19937_64 rng(42);
    std::set<EntryKey> model;
    for (int i = 0; i < 20000; i++) {
        EntryKey k = (rng() % 50 == 0) ? make_null_key(static_cast<uint32_t>(i), 1)
                                       : K(static_cast<int64_t>(rng() % 600) - 300, static_cast<uint32_t>(rng() % 1000),
                                           static_cast<uint16_t>(1 + rng() % 50));
        bool fresh = model.insert(k).second;
        ASSERT_EQ(tree->insert(k), fresh) << i;
    }
    EXPECT_FALSE(tree->insert(*model.begin()));
    EXPECT_FALSE(tree->insert(*model.rbegin()));
    expect_same(model);
    EXPECT_GE(tree->check().height, 2u);
    for (int i = 0; i < 4000; i++) {
        EntryKey k = K(static_cast<int64_t>(rng() % 600) - 300, static_cast<uint32_t>(rng() % 1000),
                       static_cast<uint16_t>(1 + rng() % 50));
        ASSERT_EQ(tree->contains(k), model.count(k) == 1) << tree::key_str(k);
    }
    for (auto& k : model) ASSERT_TRUE(tree->contains(k)) << tree::key_str(k);
}

TEST_P(CachedTreeTest, RangeScansForwardBackward) {
    tree->init_empty();
    std::mt19937_64 rng(7);
    std::set<EntryKey> model;
    for (int i = 0; i < 8000; i++) {
        EntryKey k = (i % 97 == 0) ? make_null_key(static_cast<uint32_t>(i), 2)
                                   : K(static_cast<int64_t>(rng() % 1000), static_cast<uint32_t>(i), 1);
        model.insert(k);
        tree->insert(k);
    }
    auto check_range = [&](const EntryKey& lo, const EntryKey& hi) {
        for (bool bw : {false, true}) {
            auto got = scan_all(*tree, lo, hi, bw);
            auto want = model_range(model, lo, hi, bw);
            ASSERT_EQ(got.size(), want.size()) << tree::key_str(lo) << ".." << tree::key_str(hi) << " backward=" << bw;
            EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin()));
        }
    };
    for (int i = 0; i < 150; i++) {
        int64_t a = static_cast<int64_t>(rng() % 1100) - 50, b = a + static_cast<int64_t>(rng() % 300);
        check_range(KMin(a), KMax(b));
        check_range(KMax(a), KMin(b));
        check_range(KMin(a), KMax(a));
    }
    check_range(neg_inf_key(), pos_inf_key());
    check_range(make_null_key(0, 0), pos_inf_key());
    check_range(KMin(500), KMax(400));
}

TEST_P(CachedTreeTest, AscendingAndDescendingToHeightThree) {
    tree->init_empty();
    std::set<EntryKey> model;
    for (int i = 0; i < 50000; i++) {
        EntryKey k = K(i / 3, static_cast<uint32_t>(i), 1);
        model.insert(k);
        ASSERT_TRUE(tree->insert(k));
    }
    for (int i = 0; i < 15000; i++) {
        EntryKey k = K(-1 - i, 7, 7);
        model.insert(k);
        ASSERT_TRUE(tree->insert(k));
    }
    EXPECT_GE(tree->check().height, 3u);
    expect_same(model);
}

TEST_P(CachedTreeTest, BulkLoadThenInsertsAndDeletes) {
    tree->init_empty();
    // Cache the empty tree's root first: the bulk load replaces it.
    EXPECT_FALSE(tree->contains(K(1, 1, 1)));
    const int n = 200000;
    {
        BTree::BulkLoader bl(*tree, 0.9);
        for (int i = 0; i < n; i++) bl.add(K(2 * i, 1, 1));
        bl.finish();
    }
    EXPECT_EQ(tree->check().entries, static_cast<uint64_t>(n));
    std::mt19937_64 rng(3);
    std::set<EntryKey> model;
    for (int i = 0; i < n; i++) model.insert(K(2 * i, 1, 1));
    for (int i = 0; i < 20000; i++) {
        EntryKey k = K(2 * static_cast<int64_t>(rng() % n) + 1, 1, 1);
        ASSERT_EQ(tree->insert(k), model.insert(k).second);
        if (i % 4 == 0) {  // and delete a random existing key
            EntryKey d = K(2 * static_cast<int64_t>(rng() % n), 1, 1);
            ASSERT_EQ(tree->remove(&d, 1), model.erase(d));
        }
        if (i % 16 == 0) {
            EntryKey q = K(static_cast<int64_t>(rng() % (2 * n)), 1, 1);
            ASSERT_EQ(tree->contains(q), model.count(q) == 1) << tree::key_str(q);
        }
    }
    expect_same(model);
}

TEST_P(CachedTreeTest, DeleteToEmptyAndRefill) {
    tree->init_empty();
    std::mt19937_64 rng(11);
    std::set<EntryKey> model;
    while (model.size() < 30000) {
        EntryKey k = K(static_cast<int64_t>(rng() % 100000), static_cast<uint32_t>(rng() % 100), 1);
        if (model.insert(k).second) {
            ASSERT_TRUE(tree->insert(k));
        }
    }
    auto full = tree->check();
    std::vector<EntryKey> keys(model.begin(), model.end());
    std::vector<size_t> order;
    for (size_t b = 0; b < keys.size(); b += 700) order.push_back(b);
    std::shuffle(order.begin(), order.end(), rng);
    int round = 0;
    for (size_t b : order) {
        std::vector<EntryKey> batch(keys.begin() + b, keys.begin() + std::min(keys.size(), b + 700));
        batch.push_back(K(100000 + static_cast<int64_t>(b), 9, 9));  // absent
        std::sort(batch.begin(), batch.end());
        ASSERT_EQ(tree->remove(batch.data(), batch.size()), batch.size() - 1);
        for (auto& k : batch) model.erase(k);
        // Lookups through the cache between merges (freed leaves must not be found).
        for (int q = 0; q < 50; q++) {
            const EntryKey& k = keys[rng() % keys.size()];
            ASSERT_EQ(tree->contains(k), model.count(k) == 1) << tree::key_str(k);
        }
        if (++round % 10 == 0) expect_same(model);
    }
    auto empty = tree->check();
    EXPECT_EQ(empty.entries, 0u);
    EXPECT_LT(empty.leaves, full.leaves / 10);
    // Refill reuses the freed nodes (cached copies of their old lives must not matter).
    std::shuffle(keys.begin(), keys.end(), rng);
    for (auto& k : keys) {
        ASSERT_TRUE(tree->insert(k));
        model.insert(k);
    }
    expect_same(model);
}

INSTANTIATE_TEST_SUITE_P(Caches, CachedTreeTest,
                         ::testing::Values(CacheParam{"large", 1u << 16, true, 1.0},
                                           CacheParam{"tiny16", 16, true, 1.0},
                                           CacheParam{"dex", 512, true, 0.1},
                                           CacheParam{"inner_only", 512, false, 0.1}),
                         [](const ::testing::TestParamInfo<CacheParam>& i) { return std::string(i.param.name); });

// ---- zero remote operations on a cached path -----------------------------------

TEST(TreeCache, FullyCachedLookupIssuesNoRemoteOps) {
    auto engine = make_engine(128ull << 20);
    auto mem = make_mem(*engine);
    uint64_t ns = ns_create(mem->node(0));
    Region reg(1u << 14, {true, 1.0});
    cache::Cache c(*reg.region, 1);
    tree::TreeOptions o;
    o.cache = &c;
    BTree t(*mem, 0, ns, o);
    {
        BTree::BulkLoader bl(t, 0.9);
        for (int i = 0; i < 100000; i++) bl.add(K(i, 1, 1));
        bl.finish();
    }
    const uint32_t height = t.check().height;
    ASSERT_GE(height, 3u);
    auto ops = [&](int i) {
        ASSERT_TRUE(t.contains(K(i, 1, 1)));
        ASSERT_FALSE(t.contains(K(i, 1, 2)));
        auto got = scan_all(t, KMin(i), KMax(i), false);  // an equality scan (may start a leaf to the left)
        ASSERT_EQ(got.size(), 1u);
    };
    for (int i = 0; i < 100000; i += 997) {
        ops(i);  // warm: admits every node these operations visit
        Snapshot s0 = Snapshot::take();
        ops(i);
        Snapshot s1 = Snapshot::take();
        ASSERT_EQ(s1.remote_ops(), s0.remote_ops())
            << "a fully cached lookup touched remote memory: reads " << s1.reads - s0.reads << " rpcs "
            << s1.rpcs - s0.rpcs << " misses " << s1.misses - s0.misses;
        ASSERT_EQ(s1.misses, s0.misses);
        // Every level was a hit: the root by the mapping table, the rest through
        // swizzled pointers (+1 when the scan moves on to the right sibling).
        ASSERT_GE(s1.hits - s0.hits, 3u * height);
        ASSERT_LE(s1.hits - s0.hits, 3u * height + 1);
    }
    // Control: the same lookups without the cache do go remote.
    BTree plain(*mem, 0, ns);
    Snapshot s0 = Snapshot::take();
    ASSERT_TRUE(plain.contains(K(5, 1, 1)));
    EXPECT_GE(Snapshot::take().reads - s0.reads, height);
    // Inserts stay write-through and the cached leaf sees them at once.
    s0 = Snapshot::take();
    ASSERT_TRUE(t.insert(K(5, 2, 2)));
    EXPECT_GT(Snapshot::take().writes, s0.writes);
    s0 = Snapshot::take();
    ASSERT_TRUE(t.contains(K(5, 2, 2)));
    EXPECT_EQ(Snapshot::take().remote_ops(), s0.remote_ops());
    EXPECT_TRUE(plain.contains(K(5, 2, 2)));
    expect_cache_coherent(*reg.region, *mem);
}

// A scan walks right through leaves it did not descend to; those leaves are
// admitted like descended ones (here: while the cache has unused frames, which
// admits leaves whatever the admission probability), so a repeated scan is
// served from the cache. Once the cache is full the probability decides again.
TEST(TreeCache, ScansAdmitTheLeavesTheyWalk) {
    auto engine = make_engine(128ull << 20);
    auto mem = make_mem(*engine);
    uint64_t ns = ns_create(mem->node(0));
    Region reg(1u << 12, {true, 0.0});
    cache::Cache c(*reg.region, 1);
    tree::TreeOptions o;
    o.cache = &c;
    BTree t(*mem, 0, ns, o);
    {
        BTree::BulkLoader bl(t, 0.9);
        for (int i = 0; i < 20000; i++) bl.add(K(i, 1, 1));
        bl.finish();
    }
    const uint64_t leaves = t.check().leaves;
    ASSERT_GT(leaves, 100u);
    ASSERT_LT(leaves + 50, 1u << 12) << "the whole index must fit";
    Snapshot s0 = Snapshot::take();
    ASSERT_EQ(scan_all(t, neg_inf_key(), pos_inf_key(), false).size(), 20000u);
    Snapshot s1 = Snapshot::take();
    EXPECT_GE(s1.reads - s0.reads, leaves) << "the first scan reads every leaf remotely";
    ASSERT_EQ(scan_all(t, neg_inf_key(), pos_inf_key(), false).size(), 20000u);
    Snapshot s2 = Snapshot::take();
    EXPECT_EQ(s2.remote_ops(), s1.remote_ops()) << "the second scan must be served by the cache";
    expect_cache_coherent(*reg.region, *mem);

    // A cache far smaller than the index, admission probability 0: once its
    // frames are used, walked leaves are no longer admitted.
    Region small(64, {true, 0.0});
    cache::Cache cs(*small.region, 2);
    tree::TreeOptions os;
    os.cache = &cs;
    BTree ts(*mem, 0, ns, os);
    ASSERT_EQ(scan_all(ts, neg_inf_key(), pos_inf_key(), false).size(), 20000u);
    Snapshot s3 = Snapshot::take();
    ASSERT_EQ(scan_all(ts, neg_inf_key(), pos_inf_key(), false).size(), 20000u);
    Snapshot s4 = Snapshot::take();
    EXPECT_GE(s4.reads - s3.reads, leaves - 64) << "a full cache admits no leaf at probability 0";
}

// ---- two compute servers, separate caches ----------------------------------------

TEST(TreeCache, TwoComputeServersSeeEachOthersSplitsAndMerges) {
    auto engine = make_engine(256ull << 20);
    auto mem_a = make_mem(*engine);
    auto mem_b = make_mem(*engine);
    uint64_t ns = ns_create(mem_a->node(0));
    // Server A: writer, caches everything. Server B: caches inner nodes only
    // (leaves of a node another server writes must be read remotely unless the
    // tree is partitioned, DEX 4; see src/README.md "Node cache").
    Region reg_a(1u << 14, {true, 1.0}), reg_b(1u << 14, {false, 0});
    cache::Cache ca(*reg_a.region, 1), cb(*reg_b.region, 2);
    tree::TreeOptions oa, ob;
    oa.cache = &ca;
    ob.cache = &cb;
    BTree ta(*mem_a, 0, ns, oa), tb(*mem_b, 0, ns, ob);
    std::set<EntryKey> model;
    {
        BTree::BulkLoader bl(ta, 1.0);  // full nodes: the first inserts split them
        for (int i = 0; i < 60000; i++) {
            bl.add(K(4 * i, 1, 1));
            model.insert(K(4 * i, 1, 1));
        }
        bl.finish();
    }
    const uint32_t h0 = ta.check().height;
    for (auto& k : model) ASSERT_TRUE(tb.contains(k));  // B caches every inner node
    Node before_root;
    ASSERT_TRUE(tb.root() != 0);
    mem_b->read(tb.root(), &before_root, kNodeSize);
    uint32_t b_cached = 0;
    reg_b.region->table().for_each([&](GAddr, uint32_t) { b_cached++; });
    ASSERT_GT(b_cached, 1000u / 40);

    // A: insert between every key (splits every leaf and inner node, grows
    // the tree), then empty a stretch (merges, FREE) and insert elsewhere
    // (reuses the freed nodes).
    std::mt19937_64 rng(5);
    for (int i = 0; i < 60000; i++) {
        EntryKey k = K(4 * i + 1 + static_cast<int64_t>(rng() % 3), 2, 2);
        if (model.insert(k).second) {
            ASSERT_TRUE(ta.insert(k));
        }
    }
    std::vector<EntryKey> doomed;
    for (auto& k : model)
        if (k.value >= key_from_int64(40000) && k.value < key_from_int64(120000)) doomed.push_back(k);
    ASSERT_EQ(ta.remove(doomed.data(), doomed.size()), doomed.size());
    for (auto& k : doomed) model.erase(k);
    for (int i = 0; i < 20000; i++) {
        EntryKey k = K(300000 + i, 3, 3);
        model.insert(k);
        ASSERT_TRUE(ta.insert(k));
    }
    auto info = ta.check();
    EXPECT_GT(info.height, h0) << "the root did not split";

    // B's cache is now stale: its inner nodes differ from remote memory.
    size_t stale = 0;
    {
        std::vector<std::pair<GAddr, uint32_t>> mapped;
        reg_b.region->table().for_each([&](GAddr g, uint32_t f) { mapped.emplace_back(g, f); });
        for (auto [g, f] : mapped) {
            Node cached, remote;
            reg_b.region->copy_unswizzled(f, cached);
            mem_b->read(g, &remote, kNodeSize);
            if (cached.body_version != remote.body_version) stale++;
        }
    }
    ASSERT_GT(stale, 10u) << "test does not exercise stale cached nodes";

    // B must still answer everything right.
    Snapshot s0 = Snapshot::take();
    for (auto& k : model) ASSERT_TRUE(tb.contains(k)) << tree::key_str(k);
    for (auto& k : doomed) ASSERT_FALSE(tb.contains(k)) << tree::key_str(k);
    for (int i = 0; i < 2000; i++) {
        EntryKey k = K(static_cast<int64_t>(rng() % 400000), static_cast<uint32_t>(rng() % 4), 2);
        ASSERT_EQ(tb.contains(k), model.count(k) == 1) << tree::key_str(k);
    }
    auto all = scan_all(tb, neg_inf_key(), pos_inf_key(), false);
    ASSERT_EQ(all.size(), model.size());
    EXPECT_TRUE(std::equal(all.begin(), all.end(), model.begin()));
    auto back = scan_all(tb, neg_inf_key(), pos_inf_key(), true);
    ASSERT_EQ(back.size(), model.size());
    EXPECT_TRUE(std::equal(back.begin(), back.end(), model.rbegin()));
    Snapshot s1 = Snapshot::take();
    std::printf("[ info     ] B: %zu stale cached nodes; %llu restarts while reading\n", stale,
                (unsigned long long)(s1.restarts - s0.restarts));
    EXPECT_GT(s1.restarts, s0.restarts) << "freed nodes were never detected through fences";

    // B writes through its (partly refreshed) cache; A reads through its own.
    for (int i = 0; i < 5000; i++) {
        EntryKey k = K(40000 + 8 * i, 4, 4);
        model.insert(k);
        ASSERT_TRUE(tb.insert(k));
    }
    std::vector<EntryKey> del;
    for (auto& k : model)
        if (k.value >= key_from_int64(200000) && k.value < key_from_int64(210000)) del.push_back(k);
    ASSERT_EQ(tb.remove(del.data(), del.size()), del.size());
    for (auto& k : del) model.erase(k);
    EXPECT_EQ(tb.check().entries, model.size());
    // A's leaves are cached: B's writes to them are not visible to A's cache
    // (not partitioned); A's inner-node view must still route correctly for
    // keys in leaves A never cached. Compare with a cache-less view instead.
    BTree plain(*mem_a, 0, ns);
    auto p = scan_all(plain, neg_inf_key(), pos_inf_key(), false);
    ASSERT_EQ(p.size(), model.size());
    EXPECT_TRUE(std::equal(p.begin(), p.end(), model.begin()));
}

// ---- several backends sharing one region -------------------------------------------

class SharedRegionTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(SharedRegionTest, ConcurrentInsertsDeletesAndScans) {
    auto engine = make_engine(256ull << 20);
    auto setup = make_mem(*engine);
    uint64_t ns = ns_create(setup->node(0));
    Region reg(GetParam(), {true, 0.5});
    stats().reset();
    std::set<EntryKey> keep, doomed;
    {
        cache::Cache c(*reg.region, 7);
        tree::TreeOptions o;
        o.cache = &c;
        BTree base(*setup, 0, ns, o);
        base.init_empty();
        for (int v = 0; v < 12000; v++) {
            EntryKey k = K(v * 10, 0, 1);
            base.insert(k);
            (v % 2 == 1 || v >= 6000 ? keep : doomed).insert(k);
        }
        for (int v = 8000; v < 9000; v++) {
            EntryKey k = K(v * 10, 0, 1);
            keep.erase(k);
            doomed.insert(k);
        }
    }
    const int kWriters = 3;
    std::atomic<bool> stop{false};
    std::atomic<int> failures{0};
    std::atomic<uint64_t> scans{0};
    std::vector<std::set<EntryKey>> inserted(kWriters);
    std::vector<std::thread> th;
    struct Backend {  // one "backend": own transport, own Cache handle, own BTree
        std::unique_ptr<RemoteMemory> mem;
        std::unique_ptr<cache::Cache> cache;
        std::unique_ptr<BTree> tree;
        Backend(memnode::Engine& e, cache::CacheRegion& r, uint64_t ns, uint64_t seed)
            : mem(make_mem(e)), cache(std::make_unique<cache::Cache>(r, seed)) {
            tree::TreeOptions o;
            o.cache = cache.get();
            tree = std::make_unique<BTree>(*mem, 0, ns, o);
        }
    };
    for (int w = 0; w < kWriters; w++) {
        th.emplace_back([&, w] {
            Backend b(*engine, *reg.region, ns, 100 + w);
            std::mt19937_64 rng(100 + w);
            auto& mine = inserted[w];
            for (int i = 0; i < 5000; i++) {
                EntryKey k = K(static_cast<int64_t>(rng() % 130000), static_cast<uint32_t>(w + 1),
                               static_cast<uint16_t>(1 + rng() % 1000));
                bool fresh = mine.insert(k).second;
                if (b.tree->insert(k) != fresh) failures++;
                if (i % 7 == 0) {  // lookups of own keys and of keep keys through the shared cache
                    if (!b.tree->contains(k)) failures++;
                }
                if (i % 500 == 499) {
                    std::vector<EntryKey> del;
                    for (auto it = mine.begin(); it != mine.end() && del.size() < 100; ++it)
                        if (rng() % 3 == 0) del.push_back(*it);
                    if (b.tree->remove(del.data(), del.size()) != del.size()) failures++;
                    for (auto& d : del) {
                        mine.erase(d);
                        if (b.tree->contains(d)) failures++;
                    }
                }
            }
        });
    }
    th.emplace_back([&] {
        Backend b(*engine, *reg.region, ns, 55);
        std::vector<EntryKey> all(doomed.begin(), doomed.end());
        for (size_t i = 0; i < all.size(); i += 250) {
            size_t e = std::min(all.size(), i + 250);
            if (b.tree->remove(all.data() + i, e - i) != e - i) failures++;
        }
    });
    th.emplace_back([&] {  // reader: scans and point lookups of keys that always exist
        Backend b(*engine, *reg.region, ns, 77);
        std::vector<EntryKey> kv(keep.begin(), keep.end());
        std::mt19937_64 rng(9);
        while (!stop.load()) {
            auto got = scan_all(*b.tree, neg_inf_key(), pos_inf_key(), scans % 2 == 1);
            if (scans % 2 == 1) std::reverse(got.begin(), got.end());
            for (size_t i = 1; i < got.size(); i++)
                if (!(got[i - 1] < got[i])) {
                    failures++;
                    break;
                }
            for (auto& k : keep)
                if (!std::binary_search(got.begin(), got.end(), k)) {
                    failures++;
                    ADD_FAILURE() << "scan missed " << tree::key_str(k);
                    break;
                }
            for (int q = 0; q < 500; q++)
                if (!b.tree->contains(kv[rng() % kv.size()])) {
                    failures++;
                    ADD_FAILURE() << "lookup missed a kept key";
                    break;
                }
            scans++;
        }
    });
    for (int i = 0; i < kWriters + 1; i++) th[i].join();
    stop = true;
    th.back().join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_GT(scans.load(), 0u);
    std::set<EntryKey> model = keep;
    for (auto& m : inserted) model.insert(m.begin(), m.end());
    BTree plain(*setup, 0, ns);
    EXPECT_EQ(plain.check().entries, model.size());
    auto all = scan_all(plain, neg_inf_key(), pos_inf_key(), false);
    ASSERT_EQ(all.size(), model.size());
    EXPECT_TRUE(std::equal(all.begin(), all.end(), model.begin()));
    {  // and through the (shared) cache
        cache::Cache c(*reg.region, 8);
        tree::TreeOptions o;
        o.cache = &c;
        BTree t(*setup, 0, ns, o);
        auto got = scan_all(t, neg_inf_key(), pos_inf_key(), false);
        ASSERT_EQ(got.size(), model.size());
        EXPECT_TRUE(std::equal(got.begin(), got.end(), model.begin()));
        for (auto& k : model) ASSERT_TRUE(t.contains(k));
    }
    expect_cache_coherent(*reg.region, *setup);
    EXPECT_GT(stats().cache_hits.load(), 0u);
    if (GetParam() <= 64) {
        EXPECT_GT(stats().evictions.load(), 0u);
    }
    std::printf("[ info     ] frames %u: hits %llu misses %llu evictions %llu restarts %llu\n", GetParam(),
                (unsigned long long)stats().cache_hits.load(), (unsigned long long)stats().cache_misses.load(),
                (unsigned long long)stats().evictions.load(), (unsigned long long)stats().restarts.load());
}

INSTANTIATE_TEST_SUITE_P(Frames, SharedRegionTest, ::testing::Values(16u, 256u, 8192u));

}  // namespace
