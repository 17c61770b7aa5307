// Batched write-back of dirty leaves (tree::write_back_nodes through
// Cache::flush_frames, src/README.md "Write-back mode"): a flush of many dirty
// leaves costs two round trips per batch instead of three per leaf, remote
// memory ends up holding exactly the frames, a frame whose version a single
// write-back left behind is still written by the batch, and a locked leaf is
// left to the single path.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "cache/cache.h"
#include "cache/region.h"
#include "common/stats.h"
#include "tree_test_util.h"
#include "writeback_test_util.h"

using namespace dex;
using namespace dex::testing;

namespace {

// A write-back tree with `n` random keys, every leaf cached and most dirty.
void fill(WbFixture& x, tree::BTree& t, std::set<EntryKey>& model, int n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    insert_random(t, model, n, 100000, rng);
}

TEST(WriteBackBatch, FlushOfManyLeavesTakesTwoRoundTripsPerBatch) {
    WbFixture x;
    std::unique_ptr<tree::BTree> tp = x.write_back_tree();
    tree::BTree& t = *tp;
    std::set<EntryKey> model;
    fill(x, t, model, 20000, 3);
    // dirty every leaf once more (in place), so all of them need a write-back
    for (const EntryKey& k : std::vector<EntryKey>(model.begin(), model.end())) {
        if (k.block % 7 != 0) continue;
        ASSERT_EQ(t.remove(&k, 1), 1u);
        model.erase(k);
    }
    std::vector<uint32_t> frames = x.dirty_frames();
    ASSERT_GT(frames.size(), 200u) << "too few dirty leaves to tell batches from single write-backs";
    x.t->trips = 0;
    EXPECT_EQ(x.handle.flush_frames(frames), frames.size());
    const size_t batches = (frames.size() + cache::Cache::kFlushBatch - 1) / cache::Cache::kFlushBatch;
    EXPECT_LE(x.t->trips, 2 * batches) << frames.size() << " leaves";  // single write-backs: 3 each
    EXPECT_TRUE(x.dirty_frames().empty());
    tree::BTree remote_only(*x.mem, 0, x.ns);
    EXPECT_EQ(remote_only.check().entries, model.size());
    EXPECT_EQ(scan_all(remote_only, KMin(0), KMax(1 << 30), false), std::vector<EntryKey>(model.begin(), model.end()));
    expect_cache_coherent(*x.reg.region, *x.mem);
}

// A single write-back (eviction, a split's wb_acquire) publishes a version
// the frame does not carry; the batch then finds the leaf unlocked at a newer
// version and takes it there (one more CAS round). A leaf whose lock someone
// holds is not written by the batch but by the single path after it.
TEST(WriteBackBatch, StaleFrameVersionAndLockedLeaf) {
    WbFixture x;
    std::unique_ptr<tree::BTree> tp = x.write_back_tree();
    tree::BTree& t = *tp;
    std::set<EntryKey> model;
    fill(x, t, model, 3000, 5);
    std::vector<uint32_t> frames = x.dirty_frames();
    ASSERT_GE(frames.size(), 4u);
    // frame 0: written back singly (remote version moves, the frame's not), then dirtied again
    uint32_t f0 = frames[0];
    ASSERT_TRUE(x.handle.flush_frame(f0));
    const Node* n0 = x.reg.region->node(f0);
    EntryKey extra = n0->low;  // just right of the low fence: inside the leaf
    if (extra.cls == kValue) {
        extra.block = 999999;
        extra.offnum = 9;
    } else {
        extra = K(-(1 << 20), 999999, 9);
    }
    ASSERT_TRUE(t.insert(extra));
    model.insert(extra);
    ASSERT_TRUE(x.reg.region->header(f0).dirty.load()) << "the extra entry did not stay in place";
    // frame 1: its remote lock held by someone else
    uint32_t f1 = frames[1];
    GAddr g1 = x.reg.region->header(f1).gaddr.load();
    uint64_t w1 = 0;
    x.mem->read(g1, &w1, 8);
    const uint64_t locked = make_lock_word(lock_version(w1), 77, true);
    ASSERT_EQ(x.mem->cas(g1, w1, locked), w1);
    // the batch: f0 written (second CAS round), f1 not
    std::vector<Node> imgs(2);
    x.reg.region->header(f0).lock();
    x.reg.region->header(f1).lock();
    x.reg.region->copy_unswizzled(f0, imgs[0]);
    x.reg.region->copy_unswizzled(f1, imgs[1]);
    logged_nodes().clear();
    const GAddr g0 = x.reg.region->header(f0).gaddr.load();
    std::vector<bool> done = tree::write_back_nodes(*x.mem, 0, {g0, g1}, {&imgs[0], &imgs[1]}, log_nodes);
    x.reg.region->header(f0).unlock_unchanged();
    x.reg.region->header(f1).unlock_unchanged();
    EXPECT_TRUE(done[0]);
    EXPECT_FALSE(done[1]);
    // hot standbys' caches: the leaf it published is named, the one it did not, not
    EXPECT_EQ(logged_nodes(), std::vector<GAddr>{g0});
    uint64_t w1_after = 0;
    x.mem->read(g1, &w1_after, 8);
    EXPECT_EQ(w1_after, locked) << "the batch touched a leaf it did not lock";
    ASSERT_EQ(x.mem->cas(g1, locked, w1), locked);  // the holder lets go
    // everything, including both, through flush_frames
    expect_flushed_remote_holds(x, model);
}

// A write-back leaf that fills up in place splits without writing its dirty
// frame back first: the remote lock is taken with the frame as the snapshot
// (no read), the split's node allocated before it and its version read in
// the lock's batch, and the frame's image -- its dirty entries included --
// published with the split; the parent is read at the end of that batch.
// Five round trips: lock (+ spare's version), allocation, publish (+ parent
// read), parent lock, parent publish. (Before: a write-back of three, a read
// and a CAS for the lock, a version read and a parent read more: eleven.)
// In-place inserts cost nothing remote, but the first into a split's new
// sibling, which reads it (it is not cached yet).
TEST(WriteBackBatch, SplitOfADirtyLeafPublishesItsFrame) {
    WbFixture x;
    std::unique_ptr<tree::BTree> tp = x.write_back_tree();
    tree::BTree& t = *tp;
    std::set<EntryKey> model;
    for (int i = 0; i < 2000; i++) {  // a tree with inner levels, every leaf cached
        EntryKey k = K(i * 100, static_cast<uint32_t>(i), 1);
        ASSERT_TRUE(t.insert(k));
        model.insert(k);
    }
    x.handle.flush_frames(x.dirty_frames());
    // fill one leaf in place (dirty) until an insert splits it
    uint64_t splits = 0, worst = 0, inplace = 0, sibling_reads = 0;
    for (int j = 1; j < 99; j++) {
        EntryKey k = K(100000 + j, 7, 1);
        const uint64_t before = stats().dirty_updates.load();
        x.t->trips = 0;
        ASSERT_TRUE(t.insert(k));
        model.insert(k);
        if (stats().dirty_updates.load() > before) {
            inplace++;
            // (the split admitted its new sibling: the first insert there is in place too)
            if (x.t->trips > 0) sibling_reads++;
            EXPECT_EQ(x.t->trips, 0u) << "insert " << j;
            continue;
        }
        splits++;
        worst = std::max(worst, x.t->trips);
    }
    for (int j = 1; j < 4; j++) {  // and a few in place after the last split
        EntryKey k = K(100000 + j, 8, 1);
        ASSERT_TRUE(t.insert(k));
        model.insert(k);
    }
    ASSERT_GT(inplace, 10u);
    EXPECT_EQ(sibling_reads, 0u) << "in-place inserts that went remote";
    ASSERT_GT(splits, 0u) << "no split";
    EXPECT_LE(worst, 5u) << "round trips of a split of a dirty write-back leaf";
    // nothing flushed since the in-place inserts: the splits published them
    tree::BTree remote_only(*x.mem, 0, x.ns);
    const size_t remote = remote_only.check().entries;
    x.handle.flush_frames(x.dirty_frames());
    EXPECT_EQ(remote_only.check().entries, model.size());
    EXPECT_EQ(scan_all(remote_only, KMin(0), KMax(1 << 30), false), std::vector<EntryKey>(model.begin(), model.end()));
    EXPECT_LT(remote, model.size()) << "nothing stayed dirty after the last split (no in-place insert to check)";
}

}  // namespace
