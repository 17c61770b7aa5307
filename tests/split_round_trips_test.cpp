// Round trips of a leaf split (src/README.md "Structure modifications",
// round trips of a split): a leaf the descent read remotely is locked from
// that image, the new node is allocated before the lock and its version read
// in the lock's batch, the parent is read at the end of the publish batch and
// the child check rides on the parent's lock. Exact trees under many splits
// (inner splits and new roots included), with concurrent writers, and no
// node left allocated that the tree does not use.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <set>
#include <thread>

#include "cache/cache.h"
#include "cache/region.h"
#include "common/stats.h"
#include "tree/offload_policy.h"
#include "tree_test_util.h"

namespace dex::testing {
namespace {

using tree::BTree;

// A tree bulk-loaded with even keys 0..2*(count-1) at `fill`, and a client
// with a node cache of inner nodes only (every leaf is read remotely, as a
// bulk load finds the leaves its batches changed) and offloading off (every
// insert goes one-sided: the path under test).
struct SplitTree {
    std::unique_ptr<memnode::Engine> engine = make_engine(64 << 20);
    std::unique_ptr<RemoteMemory> mem = make_mem(*engine);
    uint64_t ns = ns_create(mem->node(0));
    std::unique_ptr<char[]> rmem;
    std::unique_ptr<cache::Cache> c;
    tree::OffloadPolicy pol;
    std::unique_ptr<BTree> t;
    SplitTree(int64_t count, double fill) {
        {
            BTree loader(*mem, 0, ns);
            BTree::BulkLoader bl(loader, fill);
            for (int64_t i = 0; i < count; i++) bl.add(K(2 * i, 1, 1));
            bl.finish();
        }
        const size_t bytes = cache::CacheRegion::bytes_for(4096 * kNodeSize);
        rmem.reset(new char[bytes]);
        cache::AdmissionPolicy ap;
        ap.cache_leaves = false;  // inner nodes only: every leaf is read remotely
        c = std::make_unique<cache::Cache>(*cache::CacheRegion::init(rmem.get(), bytes, ap), 5);
        pol.set_mode(tree::OffloadMode::kOff);
        tree::TreeOptions o;
        o.cache = c.get();
        o.offload = &pol;
        t = std::make_unique<BTree>(*mem, 0, ns, o);
    }
    // Every node allocated since count_nodes() is a node of the tree: a spare
    // node allocated for a split that did not happen was given back.
    void expect_no_stray_nodes() {
        tree::TreeInfo info = t->check();
        EXPECT_EQ(ns_bytes(mem->node(0), ns) - bytes0, (info.leaves + info.inner_nodes - nodes0) * kNodeSize);
    }
    // What the namespace holds now (the bulk loader's extents included).
    void count_nodes() {
        tree::TreeInfo info = t->check();
        bytes0 = ns_bytes(mem->node(0), ns);
        nodes0 = info.leaves + info.inner_nodes;
    }
    uint64_t bytes0 = 0, nodes0 = 0;
};

std::set<EntryKey> loaded(int64_t count) {
    std::set<EntryKey> m;
    for (int64_t i = 0; i < count; i++) m.insert(K(2 * i, 1, 1));
    return m;
}

// What the memory node holds, read by a client of its own without a cache (a
// cached client that is not the only writer caches inner nodes only, C9).
void expect_tree_is(memnode::Engine& e, uint64_t ns, const std::set<EntryKey>& model) {
    std::unique_ptr<RemoteMemory> own = make_mem(e);
    BTree t(*own, 0, ns);
    tree::TreeInfo info = t.check();
    EXPECT_EQ(info.entries, model.size());
    const std::vector<EntryKey> got = scan_all(t, neg_inf_key(), pos_inf_key(), false);
    const std::vector<EntryKey> want = model_range(model, neg_inf_key(), pos_inf_key(), false);
    EXPECT_TRUE(got == want) << got.size() << " entries scanned, " << want.size() << " expected";
}

// Full leaves, inner nodes cached: an insert reads its leaf (1), allocates
// the new node (2), locks the leaf and reads the new node's old version (3),
// publishes both halves and reads the parent (4), locks the parent and reads
// the new child (5), publishes the parent (6). Before: 10 (the leaf and the
// parent each read twice, the version and the child read on their own).
TEST(SplitRoundTrips, ASplitOfAMissedLeafCostsSix) {
    SplitTree s(20000, 1.0);
    std::set<EntryKey> model = loaded(20000);
    for (int64_t k = 0; k < 40000; k += 200) ASSERT_TRUE(s.t->contains(K(k, 1, 1)));  // inner nodes cached
    ASSERT_TRUE(s.t->insert(K(30001, 1, 1)));  // a first split (the tree object's first write)
    model.insert(K(30001, 1, 1));
    tree::TreeInfo before = s.t->check();
    s.count_nodes();
    const uint64_t rt0 = stats().round_trips.load();
    ASSERT_TRUE(s.t->insert(K(20001, 1, 1)));
    const uint64_t trips = stats().round_trips.load() - rt0;
    model.insert(K(20001, 1, 1));
    EXPECT_EQ(s.t->check().leaves, before.leaves + 1) << "the insert must have split its leaf";
    EXPECT_EQ(trips, 6u) << "round trips of one leaf split";
    expect_tree_is(*s.engine, s.ns, model);
    s.expect_no_stray_nodes();
}

// Thousands of splits into many leaves, inner splits and new levels on the
// way (full leaves, random keys): the tree is exactly the set, and every
// allocated node is in it.
TEST(SplitRoundTrips, ManySplitsIntoManyLeavesStayExact) {
    SplitTree s(3000, 1.0);
    std::set<EntryKey> model = loaded(3000);
    const uint64_t inner0 = s.t->check().inner_nodes;
    s.count_nodes();
    std::mt19937_64 rng(11);
    for (int i = 0; i < 30000; i++) {
        const EntryKey k = K(static_cast<int64_t>(rng() % 60000) * 2 + 1, 1, 1);
        EXPECT_EQ(s.t->insert(k), model.insert(k).second);
    }
    EXPECT_GT(s.t->check().inner_nodes, inner0) << "the load must have split inner nodes";
    expect_tree_is(*s.engine, s.ns, model);
    s.expect_no_stray_nodes();
}

// Two writers on the same full leaves: one's descent often sees a leaf full
// that the other splits before the lock (the lock from the descent's image
// fails, the leaf is read again and may have room: the spare node goes back).
TEST(SplitRoundTrips, ConcurrentWritersOnTheSameLeaves) {
    SplitTree s(20000, 1.0);
    std::set<EntryKey> model = loaded(20000);
    s.count_nodes();
    std::atomic<int> bad{0};
    std::thread other([&] {
        std::unique_ptr<RemoteMemory> own = make_mem(*s.engine);  // another compute server: own connection,
        BTree w(*own, 0, s.ns);                                   // no cache
        for (int64_t k = 1; k < 40000; k += 4)
            if (!w.insert(K(k, 2, 1))) bad++;
    });
    for (int64_t k = 3; k < 40000; k += 4) ASSERT_TRUE(s.t->insert(K(k, 1, 1)));
    other.join();
    EXPECT_EQ(bad.load(), 0);
    for (int64_t k = 1; k < 40000; k += 4) model.insert(K(k, 2, 1));
    for (int64_t k = 3; k < 40000; k += 4) model.insert(K(k, 1, 1));
    expect_tree_is(*s.engine, s.ns, model);
    s.expect_no_stray_nodes();
}

}  // namespace
}  // namespace dex::testing
