// Write-back splits on the memory node (OFFLOAD_SPLIT_IMAGE, src/README.md
// "Write-back mode", splits): a write-back leaf that fills up in place is
// sent with the new key, and its memory node locks the leaf, replaces it by
// the frame's image, splits it and links the sibling into the parent in one
// round trip. The frame's dirty entries reach remote memory with the split;
// a frame whose version a single write-back left behind still splits there;
// a leaf locked by someone else, or an image that is not a leaf of the tree,
// changes nothing.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>

#include "cache/cache.h"
#include "cache/region.h"
#include "common/stats.h"
#include "net/protocol.h"
#include "tree_test_util.h"
#include "writeback_test_util.h"

using namespace dex;
using namespace dex::testing;

namespace {

// A tree with inner levels, every leaf cached and clean.
void ascending(WbFixture& x, tree::BTree& t, std::set<EntryKey>& model, int n) {
    for (int i = 0; i < n; i++) {
        EntryKey k = K(i * 100, static_cast<uint32_t>(i), 1);
        ASSERT_TRUE(t.insert(k));
        model.insert(k);
    }
    x.handle.flush_frames(x.dirty_frames());
}

// `coherent`: every frame at its remote node's version too (not after single
// write-backs, which leave a frame's version behind by design).
void expect_remote_holds(WbFixture& x, const std::set<EntryKey>& model, bool coherent = true) {
    expect_flushed_remote_holds(x, model);
    if (coherent) expect_cache_coherent(*x.reg.region, *x.mem);
}

// A write-back tree over a memory node that takes OFFLOAD_SPLIT_IMAGE or
// not, with `prefill` ascending keys (every leaf cached and clean).
struct WbTree {
    WbFixture x;
    std::unique_ptr<tree::BTree> tp;
    std::set<EntryKey> model;
    WbTree(bool split_image, int prefill) {
        x.t->split_image = split_image;
        tp = x.write_back_tree();
        ascending(x, *tp, model, prefill);
    }
};

struct SplitCounts {
    uint64_t splits = 0, worst = 0, inplace = 0, remote_inserts = 0, memnode_splits = 0;
};

// Fill one leaf in place (dirty) with keys 100000 + j until several inserts split it.
SplitCounts fill_one_leaf(WbFixture& x, tree::BTree& t, std::set<EntryKey>& model, uint32_t block) {
    SplitCounts c;
    const uint64_t ms0 = stats().memnode_splits.load();
    for (int j = 1; j < 99; j++) {
        EntryKey k = K(100000 + j, block, 1);
        const uint64_t before = stats().dirty_updates.load();
        x.t->trips = 0;
        EXPECT_TRUE(t.insert(k));
        model.insert(k);
        if (stats().dirty_updates.load() > before) {
            c.inplace++;
            if (x.t->trips > 0) c.remote_inserts++;  // the first one into a new sibling reads it
            continue;
        }
        c.splits++;
        c.worst = std::max(c.worst, x.t->trips);
    }
    c.memnode_splits = stats().memnode_splits.load() - ms0;
    return c;
}

TEST(WriteBackSplitImage, SplitOfADirtyLeafIsOneRoundTrip) {
    WbTree w(true, 2000);
    WbFixture& x = w.x;
    tree::BTree& t = *w.tp;
    std::set<EntryKey>& model = w.model;
    SplitCounts c = fill_one_leaf(x, t, model, 7);
    for (int j = 1; j < 4; j++) {  // and a few in place after the last split
        EntryKey k = K(100000 + j, 8, 1);
        ASSERT_TRUE(t.insert(k));
        model.insert(k);
    }
    ASSERT_GT(c.splits, 0u) << "no split";
    ASSERT_GT(c.inplace, 10u);
    EXPECT_EQ(c.memnode_splits, c.splits) << "splits done one-sided";
    EXPECT_EQ(c.worst, 1u) << "round trips of a split of a dirty write-back leaf";
    // The sibling is not admitted by the split: the first insert there reads it (once).
    EXPECT_LE(c.remote_inserts, c.splits);
    // Nothing flushed since: the splits published the in-place entries, the
    // last in-place inserts are still only in the frame.
    tree::BTree remote_only(*x.mem, 0, x.ns);
    EXPECT_LT(remote_only.check().entries, model.size());
    expect_remote_holds(x, model);
}

// With spare siblings (kHelloSplitSpare) every split after the first names
// its sibling's block and admits the reply's image: the inserts that follow
// into the new sibling stay in place, where without spares the first of them
// reads it (the test above: one such read per split).
TEST(WriteBackSplitImage, SpareSiblingsAreAdmitted) {
    WbTree w(true, 2000);
    WbFixture& x = w.x;
    x.t->split_spare = true;
    tree::BTree& t = *w.tp;
    SplitCounts c = fill_one_leaf(x, t, w.model, 7);
    ASSERT_GE(c.splits, 2u);
    EXPECT_EQ(c.memnode_splits, c.splits);
    EXPECT_EQ(c.worst, 1u) << "round trips of a split";
    EXPECT_LE(c.remote_inserts, 1u) << "a sibling was read after its split (only the first has no spare)";
    EXPECT_NE(t.held_spare(0), 0u);
    expect_remote_holds(x, w.model);
    t.release_spares();
    EXPECT_EQ(t.held_spare(0), 0u);
}

// The same leaf sequence with the capability off: the one-sided split (the
// comparison the README quotes).
TEST(WriteBackSplitImage, WithoutTheCapabilityTheSplitIsOneSided) {
    WbTree w(false, 2000);
    WbFixture& x = w.x;
    tree::BTree& t = *w.tp;
    std::set<EntryKey>& model = w.model;
    SplitCounts c = fill_one_leaf(x, t, model, 7);
    ASSERT_GT(c.splits, 0u);
    EXPECT_EQ(c.memnode_splits, 0u);
    EXPECT_GE(c.worst, 3u);
    expect_remote_holds(x, model);
}

// A single write-back (flush_frame, an eviction) publishes a version the
// frame does not carry: remote memory is unlocked at a newer version, and the
// memory node locks it there.
TEST(WriteBackSplitImage, RemoteNewerThanTheFrame) {
    WbTree w(true, 2000);
    WbFixture& x = w.x;
    tree::BTree& t = *w.tp;
    std::set<EntryKey>& model = w.model;
    const uint64_t ms0 = stats().memnode_splits.load();
    uint64_t behind = 0;
    for (int j = 1; j < 99; j++) {
        EntryKey k = K(100000 + j, 9, 1);
        ASSERT_TRUE(t.insert(k));
        model.insert(k);
        // write every dirty frame back singly: the frames' versions stay behind
        for (uint32_t f : x.dirty_frames()) {
            ASSERT_TRUE(x.handle.flush_frame(f));
            Node remote;
            x.mem->read(x.reg.region->header(f).gaddr.load(), &remote, kNodeSize);
            if (remote.body_version > x.reg.region->node(f)->body_version) behind++;
        }
    }
    ASSERT_GT(behind, 0u) << "no frame was behind its remote node";
    EXPECT_GT(stats().memnode_splits.load() - ms0, 0u) << "no split on the memory node";
    expect_remote_holds(x, model, false);
}

// A random mix of inserts and deletes (some leaves split on the memory node,
// deletes write the frame back first) ends with the model in remote memory.
TEST(WriteBackSplitImage, RandomInsertsAndDeletes) {
    WbTree w(true, 0);
    WbFixture& x = w.x;
    tree::BTree& t = *w.tp;
    std::set<EntryKey>& model = w.model;
    std::mt19937_64 rng(11);
    const uint64_t ms0 = stats().memnode_splits.load();
    for (int i = 0; i < 30000; i++) {
        EntryKey k = K(static_cast<int64_t>(rng() % 50000), static_cast<uint32_t>(rng() % 4), 1);
        if (rng() % 5 == 0) {
            ASSERT_EQ(t.remove(&k, 1), model.erase(k));
        } else {
            ASSERT_EQ(t.insert(k), model.insert(k).second);
        }
    }
    EXPECT_GT(stats().memnode_splits.load() - ms0, 50u);
    EXPECT_EQ(scan_all(t, KMin(0), KMax(1 << 30), false), std::vector<EntryKey>(model.begin(), model.end()));
    expect_remote_holds(x, model);
}

// A split whose answer never comes (a timeout; the memory node may or may
// not have run it): the leaf's frame must neither lose its dirty entries nor
// later overwrite the split leaf with its pre-split image. Remote memory ends
// up holding the model (plus the failed insert's key if the split ran: an
// entry of a row whose statement failed, which scans skip as dead).
// how: 1, 2 (lose_split_image), 3: a one-sided split's publish batch ran, its answer lost.
void lost_split_answer(int how) {
    WbTree w(how != 3, 2000);
    WbFixture& x = w.x;
    tree::BTree& t = *w.tp;
    std::set<EntryKey>& model = w.model;
    EntryKey failed{};
    bool threw = false;
    for (int j = 1; j < 99 && !threw; j++) {
        EntryKey k = K(100000 + j, 7, 1);
        if (how == 3)
            x.t->lose_publish = true;
        else
            x.t->lose_split_image = how;
        try {
            ASSERT_TRUE(t.insert(k));
            model.insert(k);
        } catch (const Error&) {
            threw = true;
            failed = k;
        }
    }
    x.t->lose_split_image = 0;
    x.t->lose_publish = false;
    ASSERT_TRUE(threw) << "no split was sent";
    tree::BTree remote_now(*x.mem, 0, x.ns);
    const bool applied = !scan_all(remote_now, failed, failed, false).empty();
    EXPECT_EQ(applied, how != 2);
    if (applied) model.insert(failed);
    for (int j = 1; j < 40; j++) {  // more in-place changes and splits of the same leaves
        EntryKey k = K(100000 + j, 8, 1);
        ASSERT_TRUE(t.insert(k));
        model.insert(k);
    }
    EXPECT_EQ(scan_all(t, KMin(0), KMax(1 << 30), false), std::vector<EntryKey>(model.begin(), model.end()));
    expect_remote_holds(x, model, false);
}

TEST(WriteBackSplitImage, LostAnswerAfterTheSplitRan) { lost_split_answer(1); }
TEST(WriteBackSplitImage, LostRequestBeforeTheSplitRan) { lost_split_answer(2); }
TEST(WriteBackSplitImage, LostPublishOfAOneSidedSplit) { lost_split_answer(3); }

// A lost split whose key is still in remote memory though deleted in the
// frame (VACUUM removed it in place; a new row reused its heap slot, same
// key): the settle must not take "the key is there" for "the split ran" --
// the frame's other dirty entry would be lost.
TEST(WriteBackSplitImage, LostSplitOfAKeyDeletedOnlyInTheFrame) {
    WbTree w(true, 2000);
    WbFixture& x = w.x;
    tree::BTree& t = *w.tp;
    std::set<EntryKey>& model = w.model;
    const GAddr leaf = leaf_for(*x.mem, t.root(), K(100000, 0, 0));
    auto frame_count = [&] { return x.reg.region->node(x.reg.region->table().lookup(leaf))->count; };
    EntryKey k0{};
    for (int j = 1; frame_count() < kLeafCapacity; j++) {  // fill the leaf in place, exactly
        k0 = K(100000 + j, 7, 1);
        ASSERT_TRUE(t.insert(k0));
        model.insert(k0);
    }
    x.handle.flush_frames(x.dirty_frames());  // remote memory holds every entry, k0 too
    ASSERT_EQ(t.remove(&k0, 1), 1u);  // in place: the frame is dirty, remote still has k0
    model.erase(k0);
    const EntryKey j = K(100000, 9, 1);  // fills the leaf again, in place
    ASSERT_TRUE(t.insert(j));
    model.insert(j);
    ASSERT_EQ(frame_count(), kLeafCapacity);
    x.t->lose_split_image = 2;  // k0 again: a split, lost before it runs
    EXPECT_THROW(t.insert(k0), Error);
    x.t->lose_split_image = 0;
    EXPECT_EQ(scan_all(t, KMin(0), KMax(1 << 30), false), std::vector<EntryKey>(model.begin(), model.end()));
    expect_remote_holds(x, model, false);
}

// The memory node's side: a leaf locked by someone else answers "restart"
// and stays as it was; an image that is not a leaf of the tree is a protocol
// error that changes nothing.
TEST(WriteBackSplitImage, LockedLeafAndBadImageChangeNothing) {
    WbTree w(true, 2000);
    WbFixture& x = w.x;
    tree::BTree& t = *w.tp;
    const GAddr leaf = leaf_for(*x.mem, t.root(), K(50000, 0, 0));
    Node before;
    x.mem->read(leaf, &before, kNodeSize);
    auto request = [&](const Node& img) {
        std::vector<uint8_t> req(net::kOffloadSplitImageRequest);
        const net::OffloadRequest r = leaf_insert_request(leaf, before.tree_id, K(50001, 1, 1));
        const net::OffloadSplitExt ext{x.ns, 0};
        const net::OffloadImageExt ie{img.body_version};
        std::memcpy(req.data(), &r, sizeof r);
        std::memcpy(req.data() + sizeof r, &ext, sizeof ext);
        std::memcpy(req.data() + sizeof r + sizeof ext, &ie, sizeof ie);
        std::memcpy(req.data() + sizeof r + sizeof ext + sizeof ie, &img, kNodeSize);
        return x.mem->node(0).rpc(net::kOpOffloadSplitImage, req.data(), static_cast<uint32_t>(req.size()));
    };
    const uint64_t locked = make_lock_word(before.body_version, 77, true);
    ASSERT_EQ(x.mem->cas(leaf, before.lock, locked), before.lock);
    std::vector<uint8_t> resp = request(before);
    ASSERT_GE(resp.size(), sizeof(net::OffloadReply));
    EXPECT_EQ(resp[0], net::kOffloadRestart);
    Node after;
    x.mem->read(leaf, &after, kNodeSize);
    EXPECT_EQ(after.lock, locked);
    EXPECT_EQ(std::memcmp(reinterpret_cast<const uint8_t*>(&after) + 8, reinterpret_cast<const uint8_t*>(&before) + 8,
                          kNodeSize - 8),
              0);
    ASSERT_EQ(x.mem->cas(leaf, locked, before.lock), locked);
    Node inner = before;
    inner.level = 1;
    EXPECT_THROW(request(inner), Error);
    Node other = before;
    other.tree_id = before.tree_id + 1;
    EXPECT_THROW(request(other), Error);
    x.mem->read(leaf, &after, kNodeSize);
    EXPECT_EQ(std::memcmp(&after, &before, kNodeSize), 0);
    // unlocked, the same request is executed (the leaf had room: inserted, no split)
    resp = request(before);
    ASSERT_GE(resp.size(), sizeof(net::OffloadReply));
    EXPECT_EQ(resp[0], net::kOffloadDone);
}

}  // namespace

namespace {

// Byte-string (slotted) trees: OFFLOAD_BYTES_SPLIT_IMAGE. Covered entries
// (the durable position passes every row's LSN) into a write-back slotted
// tree: its full dirty leaves are split by the memory node from the frame's
// image in about one round trip where one-sided takes five, the frame's
// dirty entries reach remote memory with the split; lost answers and lost
// requests are settled by remote memory; a flush makes remote memory the model.
TEST(WriteBackSplitImage, ByteStringTree) {
    uint64_t per_kind[2] = {0, 0};
    for (bool offloaded : {true, false}) {
        WbFixture x;
        x.t->split_image = offloaded;
        x.t->split_spare = true;
        auto tp = x.write_back_tree<tree::SlottedTree>();
        tree::SlottedTree& t = *tp;
        std::set<std::string> model;
        auto key = [](int i) { return "customer-" + std::to_string(i * 7919 % 100003) + std::string(i % 13, 'y'); };
        for (int i = 0; i < 1000; i++) ASSERT_EQ(t.insert(key(i)), model.insert(key(i)).second);
        x.handle.flush_frames(x.dirty_frames());
        const uint64_t ms0 = stats().memnode_splits.load();
        uint64_t split_trips = 0, split_inserts = 0;
        int lost = 0;
        for (int i = 1000; i < 4000; i++) {
            const uint64_t before = x.t->trips, in_place = stats().dirty_updates.load();
            if (offloaded && i % 11 == 0) x.t->lose_split_image = 1 + (i / 11) % 2;
            bool threw = false;
            try {
                t.insert(key(i), 0);
            } catch (const Error&) {
                threw = true;
                lost++;
            }
            const bool lose_armed = x.t->lose_split_image.exchange(0) != 0;
            if (threw) ASSERT_NO_THROW(t.insert(key(i), 0)) << "the retry";
            model.insert(key(i));
            if (!threw && !lose_armed && stats().dirty_updates.load() == in_place)
                split_trips += x.t->trips - before, split_inserts++;
        }
        per_kind[offloaded] = split_inserts ? split_trips * 100 / split_inserts : 0;
        std::printf("[ split image ] byte-string tree, %s: %llu splitting inserts, %.2f round trips each, %d lost\n",
                    offloaded ? "OFFLOAD_BYTES_SPLIT_IMAGE" : "one-sided",
                    static_cast<unsigned long long>(split_inserts),
                    split_inserts ? double(split_trips) / double(split_inserts) : 0.0, lost);
        ASSERT_GT(split_inserts, 30u);
        if (offloaded) {
            EXPECT_GT(stats().memnode_splits.load() - ms0, 30u);
            EXPECT_GT(lost, 0) << "no split's answer or request was lost";
        }
        for (const std::string& k : model) ASSERT_TRUE(t.contains(k)) << k;
        x.handle.flush_frames(x.dirty_frames());
        EXPECT_TRUE(x.dirty_frames().empty());
        tree::SlottedTree remote_only(*x.mem, 0, x.ns);
        EXPECT_EQ(remote_only.check().entries, model.size());
        for (const std::string& k : model) ASSERT_TRUE(remote_only.contains(k)) << k;
        expect_cache_coherent(*x.reg.region, *x.mem);
    }
    EXPECT_LT(per_kind[1] * 2, per_kind[0]) << "round trips per split (x100): memory node vs one-sided";
}

}  // namespace
