// The B-link tree through the shared node cache (src/README.md "Node cache"):
// zero remote operations on a fully cached lookup, scans admitting the
// leaves they walk, two compute servers with separate caches over one remote
// tree (stale cached inner nodes), with coherence of every cached frame
// with remote memory. The model scenarios run through caches of several
// kinds in tree_test.cpp (TreeModelTest), concurrent backends sharing one
// region in tree_concurrency_test.cpp (ConcurrentTreeTest).
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

// ---- zero remote operations on a cached path -----------------------------------

TEST(TreeCache, FullyCachedLookupIssuesNoRemoteOps) {
    CachedBulkTree ct(100000);
    auto& [engine, mem, ns, reg, c, o, t] = ct;
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

}  // namespace
