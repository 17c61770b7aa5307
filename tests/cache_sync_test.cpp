// Cache coherence of one compute server during structure modifications
// (src/README.md "Node cache", writes; issue: a cached node must never be
// older than what a committed change requires).
//
// Three backends share one cache region: A does a structure modification and
// is paused by a test hook right after its remote publish (before its cached
// frames are updated); B inserts a key that, after the modification, lives in
// another node; C looks the key up through the cache. Before the fix, B's
// insert completed inside that window (its descent used the old cached image,
// its remote lock moved right) and C, reading the old cached image, missed
// B's committed key. Now the frames whose entries move are held from before
// the publish until their new images are in: B (and C) wait instead.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "cache/cache.h"
#include "cache/region.h"
#include "common/stats.h"
#include "tree_test_util.h"

namespace dex::testing {
namespace {

using tree::BTree;

// One backend: its own connection, its own cache handle on the shared region.
struct Backend {
    std::unique_ptr<RemoteMemory> mem;
    std::unique_ptr<cache::Cache> cache;
    std::unique_ptr<BTree> tree;
    Backend(memnode::Engine& e, uint64_t ns, cache::CacheRegion* r, int timeout_ms = 30000, uint64_t seed = 1) {
        mem = make_mem(e);
        tree::TreeOptions o;
        o.op_timeout_ms = timeout_ms;
        if (r) {
            cache = std::make_unique<cache::Cache>(*r, seed);
            o.cache = cache.get();
        }
        tree = std::make_unique<BTree>(*mem, 0, ns, o);
    }
};

// The window between A's publish and the update of its cached frames.
struct Window {
    const char* point = nullptr;
    std::atomic<int> state{0};  // 0: not reached, 1: A paused in it, 2: A may go on
};
Window* g_window = nullptr;
void window_hook(const char* point) {
    Window* w = g_window;
    if (!w || std::strcmp(point, w->point) != 0) return;
    int expected = 0;
    if (!w->state.compare_exchange_strong(expected, 1)) return;  // only the first one
    for (int i = 0; i < 1000 && w->state.load() != 2; i++) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

template <class Pred>
bool wait_for(Pred p, int ms) {
    for (int i = 0; i < ms; i++) {
        if (p()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return p();
}

// Runs `a_op` (a structure modification) in a thread; in its window, B inserts
// `k` (in a thread); if B's insert returns while A is still paused, C must find
// `k` through the cache (or wait: a timeout is not a wrong answer). Afterwards
// C finds `k`. Returns whether B got through inside the window.
bool run_window(const char* point, const std::function<void()>& a_op, Backend& b, Backend& c, const EntryKey& k) {
    Window w;
    w.point = point;
    g_window = &w;
    tree::set_test_hook(window_hook);
    std::atomic<bool> a_done{false};
    std::thread ta([&] {
        a_op();
        a_done = true;
    });
    EXPECT_TRUE(wait_for([&] { return w.state.load() == 1 || a_done.load(); }, 5000));
    EXPECT_EQ(w.state.load(), 1) << "the operation did not reach " << point;
    std::atomic<bool> b_done{false};
    std::thread tb([&] {
        EXPECT_TRUE(b.tree->insert(k));
        b_done = true;
    });
    bool b_in_window = wait_for([&] { return b_done.load(); }, 300);
    if (b_in_window) {
        bool found = false, threw = false;
        try {
            found = c.tree->contains(k);
        } catch (const Error& e) {
            threw = true;  // waited for A's frames until its (short) timeout: not an answer
        }
        EXPECT_TRUE(found || threw) << "a committed key was missed through a stale cached node (" << point << ")";
    }
    w.state = 2;
    ta.join();
    tb.join();
    tree::set_test_hook(nullptr);
    g_window = nullptr;
    EXPECT_TRUE(c.tree->contains(k)) << point;
    return b_in_window;
}

// Full leaves of keys 0, 10, 20, ... (59 per leaf) under full level-1 nodes.
void load_full(BTree& t, int n) {
    BTree::BulkLoader bl(t, 1.0);
    for (int i = 0; i < n; i++) bl.add(K(i * 10, 1, 1));
    bl.finish();
}

TEST(CacheSync, LeafSplitHoldsTheCachedLeafUntilItShowsTheLowerHalf) {
    auto engine = make_engine(64ull << 20);
    auto mem = make_mem(*engine);
    uint64_t ns = ns_create(mem->node(0));
    Region reg(1 << 12);
    Backend a(*engine, ns, reg.region, 30000, 1), b(*engine, ns, reg.region, 30000, 2), c(*engine, ns, reg.region, 200, 3);
    load_full(*a.tree, 2000);
    ASSERT_TRUE(c.tree->contains(K(500, 1, 1)));  // caches the path to leaf 0 (keys 0..580)
    // A's insert of 505 splits leaf 0 at key 300; 575 then lives in the new right leaf.
    run_window("split:published", [&] { EXPECT_TRUE(a.tree->insert(K(505, 1, 1))); }, b, c, K(575, 1, 1));
    EXPECT_TRUE(c.tree->contains(K(505, 1, 1)));
    EXPECT_EQ(a.tree->check().entries, 2002u);
}

TEST(CacheSync, MergeHoldsBothCachedLeavesUntilTheyShowTheMergedState) {
    auto engine = make_engine(64ull << 20);
    auto mem = make_mem(*engine);
    uint64_t ns = ns_create(mem->node(0));
    Region reg(1 << 12);
    Backend a(*engine, ns, reg.region, 30000, 1), b(*engine, ns, reg.region, 30000, 2), c(*engine, ns, reg.region, 200, 3);
    {  // leaves of 40 keys: leaf 0 = 0..390, leaf 1 = 400..790
        BTree::BulkLoader bl(*a.tree, 40.0 / kLeafCapacity);
        for (int i = 0; i < 4000; i++) bl.add(K(i * 10, 1, 1));
        bl.finish();
    }
    // empty leaf 0 but for one key; cache both leaves through C
    for (int i = 1; i < 40; i++) {
        EntryKey k = K(i * 10, 1, 1);
        ASSERT_EQ(a.tree->remove(&k, 1), 1u);
    }
    ASSERT_TRUE(c.tree->contains(K(0, 1, 1)));
    ASSERT_TRUE(c.tree->contains(K(500, 1, 1)));
    // A deletes the last key of leaf 0: leaf 0 absorbs leaf 1, which becomes a
    // deleted node forwarding to it; 505 then lives in leaf 0.
    EntryKey last = K(0, 1, 1);
    run_window("merge:published", [&] { EXPECT_EQ(a.tree->remove(&last, 1), 1u); }, b, c, K(505, 1, 1));
    EXPECT_TRUE(c.tree->contains(K(790, 1, 1)));
    EXPECT_FALSE(c.tree->contains(K(0, 1, 1)));
}

TEST(CacheSync, AdmissionThatReadBeforeASplitIsNeverInstalled) {
    // D reads leaf 0 from remote memory (an admission in progress: it holds the
    // leaf's I/O marker) before A splits it. Before the fix A waited for D's
    // marker after its publish and gave up when its deadline passed (or on a
    // cancel); D then installed its pre-split image and the new right leaf's
    // keys were invisible through the cache until eviction.
    auto engine = make_engine(64ull << 20);
    auto mem = make_mem(*engine);
    uint64_t ns = ns_create(mem->node(0));
    Region reg(1 << 12);
    Backend a(*engine, ns, reg.region, 300, 1), b(*engine, ns, nullptr), c(*engine, ns, reg.region, 30000, 3);
    // A caches inner nodes only, so its descent reads the leaf remotely instead
    // of waiting for D's admission: D's read then predates A's split.
    a.cache->set_policy({false, 0.0});
    load_full(*a.tree, 2000);
    ASSERT_TRUE(c.tree->contains(K(500, 1, 1)));
    GAddr leaf = kNullGAddr;
    reg.region->for_each_frame([&](const cache::FrameInfo& i) {
        if (i.level != 0) return;
        const Node* n = reg.region->node(i.frame);
        if (n->count > 0 && n->leaf[0] == K(0, 1, 1)) leaf = i.gaddr;
    });
    ASSERT_NE(leaf, kNullGAddr);
    cache::Cache d(*reg.region, 4);
    ASSERT_TRUE(d.invalidate(leaf));                        // not cached now ...
    ASSERT_EQ(d.try_begin_io(leaf), cache::MappingTable::Begin::kOwner);  // ... but being admitted by D
    Node old_image;
    mem->read(leaf, &old_image, kNodeSize);
    try {
        a.tree->insert(K(505, 1, 1));  // splits leaf 0 at key 300
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kTimeout) << e.what();  // (before the fix: waiting for D)
    }
    EXPECT_EQ(d.admit(leaf, old_image), cache::kNoFrame) << "a pre-split image was admitted";
    ASSERT_TRUE(b.tree->insert(K(575, 1, 1)));  // lands in the new right leaf
    EXPECT_TRUE(c.tree->contains(K(575, 1, 1))) << "a committed key is hidden by a stale cached leaf";
}

TEST(CacheSync, MigrationHoldsTheMovedSubtreeUntilItForwards) {
    // Three memory nodes, placement level 1, full level-1 nodes on a small
    // node: a level-1 split copies its right half to an emptier node. The
    // moved leaves' cached copies must not be read after the publish (they are
    // deleted there, forwarding to their copies).
    std::vector<std::unique_ptr<memnode::Engine>> engines;
    engines.push_back(make_engine(6ull << 20));
    engines.push_back(make_engine(64ull << 20));
    engines.push_back(make_engine(64ull << 20));
    auto three = [&] {
        std::vector<std::unique_ptr<Transport>> v;
        for (auto& e : engines) v.push_back(std::make_unique<InProcTransport>(*e));
        return std::make_unique<RemoteMemory>(std::move(v));
    };
    auto setup_mem = three();
    std::vector<uint64_t> ns;
    for (uint32_t i = 0; i < 3; i++) ns.push_back(ns_create(setup_mem->node(i)));
    Region reg(1 << 14);
    struct B3 {
        std::unique_ptr<RemoteMemory> mem;
        std::unique_ptr<cache::Cache> cache;
        std::unique_ptr<BTree> tree;
    };
    auto make = [&](int timeout, uint64_t seed) {
        B3 x;
        x.mem = three();
        x.cache = std::make_unique<cache::Cache>(*reg.region, seed);
        tree::TreeOptions o;
        o.cache = x.cache.get();
        o.op_timeout_ms = timeout;
        x.tree = std::make_unique<BTree>(*x.mem, 0, ns[0], o);
        x.tree->set_placement(ns, 1);
        return x;
    };
    B3 a = make(30000, 1), b = make(30000, 2), c = make(200, 3);
    {  // every subtree on node 0 (the others are not parts yet): full leaves, full level-1 nodes
        BTree t(*setup_mem, 0, ns[0]);
        t.set_placement({ns[0], 0, 0}, 1);
        load_full(t, 30000);
    }
    for (int i = 0; i < 30000; i += 7) ASSERT_TRUE(c.tree->contains(K(i * 10, 1, 1)));  // cache everything
    // Insert into the middle of one level-1 subtree until a split migrates.
    const uint64_t m0 = stats().migrations.load();
    Window w;
    w.point = "migrate:published";
    g_window = &w;
    tree::set_test_hook(window_hook);
    std::atomic<bool> a_done{false};
    std::thread ta([&] {
        for (int j = 1; j < 2000 && w.state.load() == 0; j++) a.tree->insert(K(j * 10 % 200000 + 5, 1, 1));
        a_done = true;
    });
    ASSERT_TRUE(wait_for([&] { return w.state.load() == 1 || a_done.load(); }, 20000));
    ASSERT_EQ(w.state.load(), 1) << "no split migrated a subtree";
    // The first level-1 node covers leaves 0..38 (keys 0..22990); its right
    // half (from about leaf 20) moved: 20005 is in it.
    std::atomic<bool> b_done{false};
    EntryKey k = K(20005, 1, 1);
    std::thread tb([&] {
        EXPECT_TRUE(b.tree->insert(k));
        b_done = true;
    });
    if (wait_for([&] { return b_done.load(); }, 300)) {
        bool found = false, threw = false;
        try {
            found = c.tree->contains(k);
        } catch (const Error&) {
            threw = true;
        }
        EXPECT_TRUE(found || threw) << "a committed key was missed through a stale cached node (migration)";
    }
    w.state = 2;
    ta.join();
    tb.join();
    tree::set_test_hook(nullptr);
    g_window = nullptr;
    EXPECT_GT(stats().migrations.load(), m0);
    EXPECT_TRUE(c.tree->contains(k));
    for (int i = 0; i < 30000; i += 101) EXPECT_TRUE(c.tree->contains(K(i * 10, 1, 1))) << i;
}

}  // namespace
}  // namespace dex::testing
