// Paused write-back (src/README.md W18): while a compute server has nothing
// that makes checkpoints wait for its dirty leaves (PostgreSQL: the dex
// worker's fence is down), no frame turns dirty or takes a change in place.
// Inserts and deletes write through, a dirty frame goes out with the next
// change to it, kills are skipped, and pausing waits for a change that read
// "not paused" under its frame lock.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <set>
#include <thread>

#include "cache/cache.h"
#include "cache/region.h"
#include "common/stats.h"
#include "tree_test_util.h"
#include "writeback_test_util.h"

using namespace dex;
using namespace dex::testing;

namespace {

std::set<uint32_t> as_set(const std::vector<uint32_t>& v) { return std::set<uint32_t>(v.begin(), v.end()); }

// A key inside the leaf of frame f (just right of its low fence).
EntryKey key_in_frame(WbFixture& x, uint32_t f, uint32_t block) {
    EntryKey k = x.reg.region->node(f)->low;
    if (k.cls == kValue) {
        k.block = block;
        k.offnum = 7;
    } else {
        k = K(-(1 << 20), block, 7);
    }
    return k;
}

TEST(WriteBackPause, PausedWritesGoThroughAndNoFrameTurnsDirty) {
    WbFixture x;
    std::unique_ptr<tree::BTree> tp = x.write_back_tree();
    tree::BTree& t = *tp;
    std::set<EntryKey> model;
    std::mt19937_64 rng(11);
    insert_random(t, model, 4000, 50000, rng);
    const std::set<uint32_t> dirty_before = as_set(x.dirty_frames());
    ASSERT_GE(dirty_before.size(), 4u);

    x.reg.region->pause_write_back();
    ASSERT_TRUE(x.reg.region->write_back_paused());
    const uint64_t paused_writes = stats().wb_paused_writes.load();
    // A dirty leaf's next change takes its dirty entries along: the frame is clean after.
    uint32_t f0 = cache::kNoFrame;
    for (uint32_t f : dirty_before)
        if (f0 == cache::kNoFrame && x.reg.region->node(f)->low.cls == kValue) f0 = f;
    ASSERT_NE(f0, cache::kNoFrame);
    EntryKey extra = key_in_frame(x, f0, 999999);
    ASSERT_TRUE(t.insert(extra));
    model.insert(extra);
    EXPECT_EQ(x.reg.region->header(f0).dirty.load(), 0) << "a paused insert left its leaf's frame dirty";
    // Inserts and deletes anywhere: no frame that was clean turns dirty.
    std::vector<EntryKey> keys(model.begin(), model.end());
    for (int i = 0; i < 300; i++) {
        EntryKey k = K(static_cast<int64_t>(rng() % 50000), static_cast<uint32_t>(100000 + i), 2);
        ASSERT_EQ(t.insert(k), model.insert(k).second);
        const EntryKey& d = keys[rng() % keys.size()];
        ASSERT_EQ(t.remove(&d, 1), model.erase(d));
    }
    std::set<uint32_t> dirty_paused = as_set(x.dirty_frames());
    for (uint32_t f : dirty_paused)
        EXPECT_TRUE(dirty_before.count(f)) << "frame " << f << " turned dirty while write-back was paused";
    EXPECT_LT(dirty_paused.size(), dirty_before.size());
    EXPECT_GE(stats().wb_paused_writes.load() - paused_writes, 300u) << "paused writes not counted";
    // Remote memory plus the frames still dirty from before hold the model.
    EXPECT_EQ(scan_all(t, KMin(-(1 << 21)), KMax(1 << 30), false), std::vector<EntryKey>(model.begin(), model.end()));

    // Resumed: in place again.
    x.reg.region->resume_write_back();
    const std::set<uint32_t> dirty_resumed_before = as_set(x.dirty_frames());
    uint32_t clean = cache::kNoFrame;
    x.reg.region->for_each_frame([&](const cache::FrameInfo& i) {
        const Node* n = x.reg.region->node(i.frame);
        // (a clean leaf with room, not the leftmost: key_in_frame lands in it)
        if (clean == cache::kNoFrame && !i.dirty && i.level == 0 && i.gaddr != kNullGAddr &&
            n->low.cls == kValue && n->count < 40)
            clean = i.frame;
    });
    ASSERT_NE(clean, cache::kNoFrame);
    EntryKey again = key_in_frame(x, clean, 999998);
    ASSERT_TRUE(t.insert(again));
    model.insert(again);
    EXPECT_EQ(x.dirty_frames().size(), dirty_resumed_before.size() + 1) << "no in-place insert after resuming";
    expect_flushed_remote_holds(x, model);
}

// pause_write_back() returns only after a holder of a frame lock -- which
// may have read "not paused" and be about to mark the frame dirty -- let go.
TEST(WriteBackPause, PauseWaitsForFrameLockHolders) {
    WbFixture x(64);
    cache::FrameHeader& h = x.reg.region->header(0);
    // (frame 0 in use, so the sweep covers it)
    ASSERT_NE(x.reg.region->take_unused(), cache::kNoFrame);
    h.lock();
    std::atomic<bool> returned{false};
    std::thread pauser([&] {
        x.reg.region->pause_write_back();
        returned = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_TRUE(x.reg.region->write_back_paused()) << "the flag is set before the sweep";
    EXPECT_FALSE(returned.load()) << "pause_write_back returned while a frame lock was held";
    h.unlock_unchanged();
    pauser.join();
    EXPECT_TRUE(returned.load());
}


// Two owners pause for their own reasons (no fence; a hot standby attached):
// write-back resumes only when neither reason is left, whichever order they
// go in, and resuming a reason that was not set changes nothing.
TEST(WriteBackPause, ResumesOnlyWhenNoReasonIsLeft) {
    WbFixture x;
    cache::CacheRegion& R = *x.reg.region;
    using CR = cache::CacheRegion;
    R.resume_write_back(CR::kPauseNoFence | CR::kPauseStandby);
    ASSERT_FALSE(R.write_back_paused());
    R.pause_write_back(CR::kPauseNoFence);
    R.pause_write_back(CR::kPauseStandby);
    EXPECT_EQ(R.write_back_pause_reasons(), CR::kPauseNoFence | CR::kPauseStandby);
    R.resume_write_back(CR::kPauseNoFence);
    EXPECT_TRUE(R.write_back_paused()) << "resumed while a hot standby still paused it";
    R.resume_write_back(CR::kPauseNoFence);
    EXPECT_EQ(R.write_back_pause_reasons(), CR::kPauseStandby);
    R.pause_write_back(CR::kPauseNoFence);
    R.resume_write_back(CR::kPauseStandby);
    EXPECT_TRUE(R.write_back_paused()) << "resumed while no fence was held";
    R.resume_write_back(CR::kPauseNoFence);
    EXPECT_FALSE(R.write_back_paused());
    // and the tree writes in place again
    std::unique_ptr<tree::BTree> t = x.write_back_tree();
    const uint64_t in_place = stats().dirty_updates.load();
    for (int i = 0; i < 20; i++) ASSERT_TRUE(t->insert(K(i, 1, 1)));
    EXPECT_GT(stats().dirty_updates.load(), in_place);
}
}  // namespace
