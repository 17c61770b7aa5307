// Offloaded reads of write-back trees (src/README.md "Write-back mode", W15):
// the memory node reads remote memory, which lacks the changes of dirty
// frames. An answer is used only if the leaf it names has no frame and no
// dirty frame was cleaned while the request was out; otherwise the leaf is
// read here (its frame). Each test builds the window deterministically: the
// level-1 nodes are dropped from the cache (so a descent misses above the
// leaves and offloads) while leaves hold entries remote memory lacks.
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
#include "writeback_test_util.h"

using namespace dex;
using namespace dex::testing;

namespace {

// A write-back tree whose descents offload every miss they may (kOn).
struct WbOffload {
    WbFixture x;
    tree::OffloadPolicy pol;
    std::unique_ptr<tree::BTree> t;
    explicit WbOffload(uint32_t frames = 4096) : x(frames) {
        pol.set_mode(tree::OffloadMode::kOn);
        tree::TreeOptions o;
        o.cache = &x.handle;
        o.offload = &pol;
        t = std::make_unique<tree::BTree>(*x.mem, 0, x.ns, o);
        t->init_empty();
        t->set_write_back(true, [] { return true; });
    }
    // Even keys 0..2n, written back: remote memory holds them.
    void load_even(int64_t n) {
        for (int64_t k = 0; k < n; k++) ASSERT_TRUE(t->insert(K(2 * k, 1, 1)));
        x.handle.flush_frames(x.dirty_frames());
        ASSERT_TRUE(x.dirty_frames().empty());
    }
    // Drop the cached inner nodes just above the leaves (their leaves stay,
    // unswizzled): the next descent misses at level 1 and may offload there.
    void drop_level1() {
        const uint32_t id = t->tree_id();
        x.handle.invalidate_if([id](const cache::FrameInfo& i) { return i.tree_id == id && i.level == 1; });
    }
    uint64_t offloads() const { return stats().offloads.load(); }
    uint64_t fallbacks() const { return stats().wb_offload_fallbacks.load(); }
};

// Another backend of the same compute server: its own connection, Cache
// handle (one per process, per thread here: a handle is not thread-safe) and
// tree object over the shared region, offloading every miss it may.
struct WbOffloadBackend {
    std::unique_ptr<RemoteMemory> mem;
    cache::Cache handle;
    tree::OffloadPolicy pol;
    std::unique_ptr<tree::BTree> t;
    WbOffloadBackend(WbOffload& w, uint64_t seed) : mem(make_mem(*w.x.engine)), handle(*w.x.reg.region, seed) {
        set_write_backs(handle, *mem, *w.x.reg.region);
        pol.set_mode(tree::OffloadMode::kOn);
        tree::TreeOptions o;
        o.cache = &handle;
        o.offload = &pol;
        t = std::make_unique<tree::BTree>(*mem, 0, w.x.ns, o);
        t->set_write_back(true, [] { return true; });
    }
};

// The leaf has a dirty frame when the memory node answers: the frame is read.
TEST(WriteBackOffload, DirtyLeafFrameWinsOverTheOffloadedImage) {
    WbOffload w;
    w.load_even(20000);
    ASSERT_GE(w.t->info().height, 3u);  // level-1 nodes below the root
    std::vector<int64_t> odd;
    for (int64_t k = 1; k < 40000; k += 400) {
        ASSERT_TRUE(w.t->insert(K(k, 1, 1)));  // in place: only the dirty frame has it
        odd.push_back(k);
    }
    ASSERT_FALSE(w.x.dirty_frames().empty());
    const uint64_t off0 = w.offloads(), fb0 = w.fallbacks();
    for (int64_t k : odd) {
        w.drop_level1();
        EXPECT_TRUE(w.t->contains(K(k, 1, 1))) << k;
    }
    EXPECT_GE(w.offloads() - off0, odd.size());       // every lookup was offloaded ...
    EXPECT_GE(w.fallbacks() - fb0, odd.size());       // ... and read its dirty leaf here
    // Forward scans start the same way.
    const uint64_t fb_scan = w.fallbacks();
    for (int64_t k : odd) {
        w.drop_level1();
        auto s = w.t->scan(KMin(k), KMax(k + 10), false);
        std::vector<EntryKey> batch, got;
        while (s->next(batch)) got.insert(got.end(), batch.begin(), batch.end());
        ASSERT_EQ(got.size(), 6u) << k;  // k and the five even keys up to k + 10
        EXPECT_EQ(got[0], K(k, 1, 1));
    }
    EXPECT_GE(w.fallbacks() - fb_scan, odd.size());
    // Leaves that hold only written-back entries: the offloaded answers are used.
    const uint64_t fb1 = w.fallbacks(), off1 = w.offloads();
    w.x.handle.flush_frames(w.x.dirty_frames());
    const uint32_t id = w.t->tree_id();
    w.x.handle.invalidate_if([id](const cache::FrameInfo& i) { return i.tree_id == id && i.level <= 1; });
    for (int64_t k = 0; k < 40000; k += 998) EXPECT_TRUE(w.t->contains(K(k, 1, 1))) << k;
    EXPECT_GT(w.offloads() - off1, 30u);
    EXPECT_EQ(w.fallbacks() - fb1, 0u);
}

// The dirty frame is written back and dropped while the request is out (after
// the memory node read the leaf): no frame is left to see, the cleaning
// count tells the answer may predate the write-back.
TEST(WriteBackOffload, LeafWrittenBackDuringTheRequestIsReadAgain) {
    WbOffload w;
    w.load_even(20000);
    int64_t key = 0;
    int hits = 0;
    const uint64_t fb0 = w.fallbacks();
    for (int i = 0; i < 50; i++) {
        key = 1 + 800 * i;
        w.x.t->after_offload = nullptr;
        w.pol.set_mode(tree::OffloadMode::kOff);  // fetched and changed in place, not offloaded (W17)
        ASSERT_TRUE(w.t->insert(K(key, 1, 1)));
        w.pol.set_mode(tree::OffloadMode::kOn);
        w.drop_level1();
        w.x.t->after_offload = [&] {
            w.x.t->after_offload = nullptr;  // once
            w.x.handle.flush_frames(w.x.dirty_frames());
            const uint32_t id = w.t->tree_id();
            w.x.handle.invalidate_if([id](const cache::FrameInfo& f) { return f.tree_id == id && f.level == 0; });
            hits++;
        };
        EXPECT_TRUE(w.t->contains(K(key, 1, 1))) << key;
    }
    EXPECT_EQ(hits, 50);
    EXPECT_GE(w.fallbacks() - fb0, 50u);
}

// A writer inserting in place, a worker writing dirty frames back, readers
// whose descents offload: through a cache of 96 frames (the tree needs ~700),
// so frames -- dirty ones too, written back first -- are evicted all the
// time. Every key inserted before a lookup began is found.
TEST(WriteBackOffload, ConcurrentWritersWriteBacksAndOffloadedReaders) {
    WbOffload w(96);
    w.load_even(20000);
    std::atomic<int64_t> done_below{0};  // odd keys 1, 3, ..., < this are inserted
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> misses{0}, lookups{0};
    const uint64_t off0 = w.offloads(), fb0 = w.fallbacks();
    std::thread writer([&] {
        for (int64_t k = 1; k < 40000; k += 2) {
            w.t->insert(K(k, 1, 1));
            done_below.store(k + 1);
        }
        stop = true;
    });
    // The writer uses w's handle; the worker and each reader their own.
    std::thread worker([&] {
        WbOffloadBackend b(w, 50);
        while (!stop) {
            b.handle.flush_frames(w.x.dirty_frames());
            std::this_thread::yield();
        }
    });
    std::vector<std::thread> readers;
    for (int rd = 0; rd < 2; rd++)
        readers.emplace_back([&, rd] {
            WbOffloadBackend b(w, 60 + rd);
            std::mt19937_64 rng(rd + 5);
            while (!stop) {
                const int64_t below = done_below.load();
                if (below < 3) continue;
                const int64_t k = 1 + 2 * static_cast<int64_t>(rng() % static_cast<uint64_t>((below - 1) / 2));
                lookups++;
                if (!b.t->contains(K(k, 1, 1))) misses++;
            }
        });
    writer.join();
    worker.join();
    for (auto& r : readers) r.join();
    EXPECT_EQ(misses.load(), 0u);
    EXPECT_GT(lookups.load(), 1000u);
    EXPECT_GT(w.offloads() - off0, 1000u);
    EXPECT_GT(w.fallbacks() - fb0, 0u);
    printf("lookups %llu, offloads %llu, fallbacks %llu\n", (unsigned long long)lookups.load(),
           (unsigned long long)(w.offloads() - off0), (unsigned long long)(w.fallbacks() - fb0));
    for (int64_t k = 0; k < 40000; k++) ASSERT_TRUE(w.t->contains(K(k, 1, 1))) << k;
    w.t->check();
}

}  // namespace

namespace {

// W17: an insert of a write-back tree that misses at the leaf itself is
// finished by the memory node under the leaf's marker, and the leaf is
// admitted clean -- one round trip, no fetch now, no write-back later.
TEST(WriteBackOffload, InsertAtAnUncachedLeafIsOffloadedAndAdmittedClean) {
    WbOffload w;
    w.load_even(20000);
    const uint32_t id = w.t->tree_id();
    std::set<EntryKey> model;
    for (int64_t k = 0; k < 20000; k++) model.insert(K(2 * k, 1, 1));
    const uint64_t off0 = w.offloads(), dirty0 = stats().dirty_updates.load();
    int n = 0;
    for (int64_t k = 1; k < 40000; k += 400, n++) {
        w.x.handle.invalidate_if([id](const cache::FrameInfo& i) { return i.tree_id == id && i.level == 0; });
        ASSERT_TRUE(w.t->insert(K(k, 1, 1))) << k;
        model.insert(K(k, 1, 1));
    }
    EXPECT_GE(w.offloads() - off0, static_cast<uint64_t>(n));
    EXPECT_EQ(stats().dirty_updates.load() - dirty0, 0u);  // nothing in place
    EXPECT_TRUE(w.x.dirty_frames().empty());
    for (int64_t k = 1; k < 40000; k += 400) EXPECT_TRUE(w.t->contains(K(k, 1, 1))) << k;
    // the admitted leaves are clean copies of remote memory: remote alone has it all
    tree::BTree remote_only(*w.x.mem, 0, w.x.ns);
    EXPECT_TRUE(scan_all(remote_only, KMin(-1), KMax(1 << 30), false) ==
                std::vector<EntryKey>(model.begin(), model.end()));
}

// W17, the other answer: the memory node put the entry into a leaf right of
// the one the descent missed at (that leaf split after the cached parent was
// read; built here by a second, uncached writer splitting it behind the
// cache's back), and that right leaf has a dirty frame. The insert goes on
// along the usual path, so the frame gets the entry too, and a write-back of
// that frame keeps it.
TEST(WriteBackOffload, InsertThatTheMemoryNodePutRightGoesIntoTheDirtyFrameToo) {
    WbOffload w;
    w.load_even(20000);
    const uint32_t id = w.t->tree_id();
    // The leaf holding key 20000, and its cached parent (level 1).
    ASSERT_TRUE(w.t->contains(K(20000, 1, 1)));
    // Drop the leaves (parents stay), then split the leaf of 20000..
    // remotely: an uncached writer inserts until it splits.
    w.x.handle.invalidate_if([id](const cache::FrameInfo& i) { return i.tree_id == id && i.level == 0; });
    tree::BTree other(*w.x.mem, 0, w.x.ns);
    std::set<EntryKey> model;
    for (int64_t k = 0; k < 20000; k++) model.insert(K(2 * k, 1, 1));
    const uint64_t leaves0 = other.check().leaves;
    for (int i = 0; other.check().leaves == leaves0; i++) {
        EntryKey e = K(20000, 2, static_cast<uint16_t>(i + 1));  // same key value, more entries
        ASSERT_TRUE(other.insert(e));
        model.insert(e);
    }
    // The new right half: cache it and dirty it (an in-place insert of ours).
    EntryKey far = K(20000, 9, 9);
    w.pol.set_mode(tree::OffloadMode::kOff);
    ASSERT_TRUE(w.t->insert(far));
    w.pol.set_mode(tree::OffloadMode::kOn);
    model.insert(far);
    ASSERT_FALSE(w.x.dirty_frames().empty());
    // Drop only the clean leaves: the dirty right half stays, the leaf left of
    // it is uncached, and our parent frame still sends the key there.
    w.x.handle.invalidate_if([&](const cache::FrameInfo& i) { return i.tree_id == id && i.level == 0 && !i.dirty; });
    const uint64_t off0 = w.offloads();
    EntryKey k = K(20000, 8, 8);
    w.t->insert(k);  // (true or "already there": the memory node may have put it into remote memory)
    model.insert(k);
    EXPECT_GT(w.offloads() - off0, 0u);
    EXPECT_TRUE(w.t->contains(k));
    expect_flushed_remote_holds(w.x, model);
}

// An offloaded insert whose answer carries an invalid leaf image fails with a
// protocol error and leaves neither the leaf's I/O marker nor the parent's
// pin behind: the next insert into that leaf goes through at once.
TEST(WriteBackOffload, InvalidAnswerLeavesNoMarkerBehind) {
    WbOffload w;
    w.load_even(20000);
    w.t->set_op_timeout(3000);
    const uint32_t id = w.t->tree_id();
    w.x.handle.invalidate_if([id](const cache::FrameInfo& i) { return i.tree_id == id && i.level == 0; });
    w.x.t->corrupt_offload_image = true;
    try {
        w.t->insert(K(101, 1, 1));
        ADD_FAILURE() << "an invalid leaf image was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kProtocol) << e.what();
    }
    EXPECT_FALSE(w.x.t->corrupt_offload_image.load());  // the insert was offloaded
    w.t->insert(K(101, 1, 1));  // (true, or already there: the memory node applied the first)
    EXPECT_TRUE(w.t->contains(K(101, 1, 1)));
    EXPECT_TRUE(w.t->insert(K(103, 1, 1)));
}

}  // namespace
