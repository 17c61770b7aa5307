// A warm descent takes no mapping-table bucket lock (src/README.md "Node
// cache", the root's frame hint): the root comes from the frame the handle
// last found it in, the levels below through swizzled pointers, and a
// write-back insert into a cached leaf locks the frame the descent found.
// The root's bucket was the one spin lock every descent of every backend
// took. A stale hint (the root's frame dropped, or given to another node)
// costs one lookup and never a wrong answer.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>

#include "cache/cache.h"
#include "cache/mapping_table.h"
#include "cache/region.h"
#include "common/stats.h"
#include "tree_test_util.h"
#include "writeback_test_util.h"

using namespace dex;
using namespace dex::testing;
using dex::cache::MappingTable;
using dex::tree::BTree;

namespace {

uint64_t lookups() { return MappingTable::lookups_by_this_thread(); }

// A write-back tree of n random keys in [0, range) (model: what it holds).
std::unique_ptr<tree::BTree> random_write_back_tree(WbFixture& x, std::set<EntryKey>& model, int n, uint64_t range,
                                                    uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::unique_ptr<tree::BTree> t = x.write_back_tree();
    insert_random(*t, model, n, range, rng);
    return t;
}

TEST(WarmPathLookups, CachedLookupsTakeNoBucketLockAndAStaleRootHintIsCaught) {
    CachedBulkTree ct(50000);
    auto& [engine, mem, ns, reg, c, o, t] = ct;
    ASSERT_GE(t.check().height, 3u);
    // Warm, twice: a node is swizzled into its parent when a descent comes
    // to it from the parent's frame, which the first pass may only have
    // been admitting.
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < 50000; i += 499) ASSERT_TRUE(t.contains(K(i, 1, 1)));
    uint64_t l0 = lookups();
    for (int i = 0; i < 50000; i += 499) {
        ASSERT_TRUE(t.contains(K(i, 1, 1)));
        ASSERT_FALSE(t.contains(K(i, 1, 2)));
    }
    EXPECT_EQ(lookups() - l0, 0u) << "warm descents looked frames up in the mapping table";

    // The root's frame goes (as an eviction or invalidation takes it): the
    // next descent finds the hint stale, looks the root up, reads it
    // remotely, and is right; once its children are swizzled again (a
    // dropped inner node's are unswizzled), descents are warm again.
    const GAddr root = t.root();
    ASSERT_NE(reg.region->lookup(root), cache::kNoFrame);
    ASSERT_EQ(c.invalidate_if([&](const cache::FrameInfo& i) { return i.gaddr == root; }), 0u);
    ASSERT_EQ(reg.region->lookup(root), cache::kNoFrame);
    l0 = lookups();
    ASSERT_TRUE(t.contains(K(1234, 1, 1)));
    EXPECT_GE(lookups() - l0, 1u);
    for (int pass = 0; pass < 2; pass++) ASSERT_TRUE(t.contains(K(1234, 1, 1)));
    l0 = lookups();
    ASSERT_TRUE(t.contains(K(1234, 1, 1)));
    EXPECT_EQ(lookups() - l0, 0u);

    // The hinted frame given to another node before this handle descends
    // again: the root is dropped, and a leaf of the tree (dropped too) is
    // admitted into the root's old frame -- a valid, hot node of this tree,
    // just not the root. The hint must be looked past, and every answer is
    // still right.
    const uint32_t hinted = reg.region->lookup(root);
    ASSERT_NE(hinted, cache::kNoFrame);
    GAddr leaf = kNullGAddr;
    reg.region->for_each_frame([&](const cache::FrameInfo& i) {  // one in the middle: keys on both sides
        const Node& n = *reg.region->node(i.frame);
        if (leaf == kNullGAddr && i.gaddr != kNullGAddr && i.level == 0 && n.low.cls != kNegInf && n.right != 0)
            leaf = i.gaddr;
    });
    ASSERT_NE(leaf, kNullGAddr);
    Node leaf_img;
    std::memcpy(&leaf_img, reg.region->node(reg.region->lookup(leaf)), kNodeSize);  // (clean: remote holds it)
    ASSERT_EQ(c.invalidate_if([&](const cache::FrameInfo& i) { return i.gaddr == root || i.gaddr == leaf; }), 0u);
    ASSERT_EQ(c.try_begin_io(leaf), MappingTable::Begin::kOwner);
    std::vector<uint32_t> others;
    uint32_t f = cache::kNoFrame;
    for (int i = 0; i < 1 << 14 && f != hinted; i++) {
        f = c.allocate_frame();
        ASSERT_NE(f, cache::kNoFrame);
        if (f != hinted) others.push_back(f);
    }
    for (uint32_t o : others) c.release_frame(o);
    ASSERT_EQ(f, hinted) << "the root's old frame was never handed out again";
    std::memcpy(reg.region->node(f), &leaf_img, kNodeSize);
    ASSERT_TRUE(c.install(f, leaf));
    ASSERT_EQ(reg.region->header(hinted).gaddr.load(), leaf);
    ASSERT_EQ(reg.region->header(hinted).get_state(), cache::FrameState::kHot);
    l0 = lookups();
    const uint64_t restarts0 = stats().restarts.load();
    for (int i = 0; i < 50000; i += 101) {
        ASSERT_TRUE(t.contains(K(i, 1, 1))) << i;
        ASSERT_FALSE(t.contains(K(i, 2, 1))) << i;
    }
    EXPECT_GE(lookups() - l0, 1u);  // the stale hint was looked past ...
    // ... by its address, not by taking the leaf for the root and finding
    // out from its fences (a restart that re-reads the path remotely).
    EXPECT_EQ(stats().restarts.load(), restarts0);
    EXPECT_NE(reg.region->lookup(root), hinted);
    EXPECT_EQ(t.check().entries, 50000u);
}

// A write-back insert into a cached leaf: the descent's root by its hint,
// the leaf's frame by the descent's answer -- no lookup. (The keys put back
// here go into leaves that have room: nothing splits meanwhile, which would
// create nodes to look up once.)
TEST(WarmPathLookups, WriteBackInsertIntoACachedLeafTakesNoBucketLock) {
    WbFixture x;
    std::set<EntryKey> model;
    std::unique_ptr<tree::BTree> t = random_write_back_tree(x, model, 5000, 100000, 7);
    std::vector<EntryKey> out;  // every 10th entry, to be put back
    size_t n = 0;
    for (const EntryKey& k : model)
        if (n++ % 10 == 0) out.push_back(k);
    for (const EntryKey& k : out) ASSERT_EQ(t->remove(&k, 1), 1u);
    // Every node swizzled into its cached parent (two passes, see above).
    for (int pass = 0; pass < 2; pass++)
        for (const EntryKey& k : model) ASSERT_EQ(t->contains(k), !std::binary_search(out.begin(), out.end(), k));
    const uint64_t dirty0 = stats().dirty_updates.load(), splits0 = stats().memnode_splits.load();
    const uint64_t l0 = lookups();
    for (const EntryKey& k : out) ASSERT_TRUE(t->insert(k));
    ASSERT_EQ(stats().memnode_splits.load(), splits0);
    ASSERT_EQ(stats().dirty_updates.load() - dirty0, out.size()) << "not every insert went into its cached leaf";
    EXPECT_EQ(lookups() - l0, 0u) << out.size() << " inserts into cached leaves looked frames up";
    EXPECT_EQ(scan_all(*t, KMin(0), KMax(1 << 30), false), std::vector<EntryKey>(model.begin(), model.end()));
}

}  // namespace

namespace {

// A split replaces its parent's cached image (the new separator); the
// parent's other children stay swizzled at their new slots, so the descents
// after the split look up only the nodes the splits created. (Until
// 2026-12-02 every child of the parent was unswizzled: a bulk load made
// about one mapping-table lookup per row, each followed by the parent's
// exclusive lock to swizzle the child again.)
TEST(WarmPathLookups, ASplitKeepsItsParentsOtherChildrenSwizzled) {
    WbFixture x;
    std::set<EntryKey> model;
    std::mt19937_64 rng(11);
    std::unique_ptr<tree::BTree> t = random_write_back_tree(x, model, 20000, 1000000, 12);
    auto warm = [&] {
        for (int pass = 0; pass < 2; pass++)
            for (const EntryKey& k : model) ASSERT_TRUE(t->contains(k));
    };
    warm();
    const tree::TreeInfo before = t->check();
    ASSERT_GE(before.height, 3u);
    // Inserts that split leaves here and there (each split's parent gets a
    // new image), then one pass over every key.
    insert_random(*t, model, 600, 1000000, rng, 20000);
    const tree::TreeInfo after = t->check();
    const uint64_t created = (after.leaves + after.inner_nodes) - (before.leaves + before.inner_nodes);
    ASSERT_GE(created, 5u) << "the inserts split too few leaves to tell";
    const uint64_t l0 = lookups();
    for (const EntryKey& k : model) ASSERT_TRUE(t->contains(k));
    // Each created node is looked up once (then swizzled); a parent that
    // dropped its children's swizzles would cost a lookup per child reached.
    EXPECT_LE(lookups() - l0, created + 2) << created << " nodes created";
    warm();
    expect_flushed_remote_holds(x, model);
}

}  // namespace
