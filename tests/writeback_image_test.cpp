// Leaves logged whole when a checkpoint cannot write them back
// (WritebackRegistry::log_images, BTreeT::replay_leaf_image; src/README.md
// "Write-back mode", redo after a crash): every dirty leaf frame is logged
// under its lock and remembers where (imaged_at, crash_since_min); replaying
// the images over what remote memory held at the crash restores exactly the
// tree the frames held -- in-place inserts and deletes alike -- whatever
// remote memory did with those key ranges meanwhile.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "cache/writeback_registry.h"
#include "writeback_test_util.h"

using namespace dex;
using namespace dex::testing;

namespace {

// The registry of a WbFixture's cache with the tree registered, and the
// images log_images hands out (positions 1000, 1001, ...).
struct Imaging {
    cache::WritebackRegistry reg;
    std::vector<Node> images;
    std::vector<uint64_t> ns_seen;
    explicit Imaging(WbFixture& x) {
        reg.init();
        GAddr word = make_gaddr(0, rpc::alloc(x.mem->node(0), x.ns, 8));
        EXPECT_GE(reg.find_or_add(0, x.ns, word, x.mem->node(0).incarnation(), tree::tree_id_for(0, x.ns)), 0);
    }
    uint64_t log_all(WbFixture& x) {
        return reg.log_images(*x.reg.region, [this](int32_t node, uint64_t ns, const Node& img) {
            EXPECT_EQ(node, 0);
            ns_seen.push_back(ns);
            images.push_back(img);
            return uint64_t(1000 + images.size() - 1);
        });
    }
};

std::set<EntryKey> scan_set(tree::BTree& t) {
    auto v = scan_all(t, neg_inf_key(), pos_inf_key(), false);
    return std::set<EntryKey>(v.begin(), v.end());
}

}  // namespace

TEST(WriteBackImages, ReplayRestoresInPlaceInsertsAndDeletes) {
    WbFixture x;
    auto t = x.write_back_tree();
    std::set<EntryKey> model;
    for (int i = 0; i < 3000; i++) {
        EntryKey k = K(i * 3, 1, 1);
        ASSERT_TRUE(t->insert(k));
        model.insert(k);
    }
    x.handle.flush_frames(x.dirty_frames());
    ASSERT_TRUE(x.dirty_frames().empty());
    // In-place changes only remote memory lacks: inserts between the keys
    // (splits of full leaves write through), deletes.
    for (int i = 0; i < 3000; i += 7) {
        EntryKey k = K(i * 3 + 1, 2, 2);
        ASSERT_TRUE(t->insert(k));
        model.insert(k);
    }
    std::vector<EntryKey> gone;
    for (int i = 0; i < 3000; i += 5) gone.push_back(K(i * 3, 1, 1));
    EXPECT_EQ(t->remove(gone.data(), gone.size()), gone.size());
    for (const EntryKey& k : gone) model.erase(k);
    const size_t dirty = x.dirty_frames().size();
    ASSERT_GT(dirty, 10u);

    Imaging im(x);
    EXPECT_EQ(x.reg.region->header(x.dirty_frames()[0]).imaged_at.load(), 0u);
    EXPECT_EQ(im.log_all(x), dirty);
    EXPECT_EQ(im.images.size(), dirty);
    for (uint64_t ns : im.ns_seen) EXPECT_EQ(ns, x.ns);
    // Redo must start no later than the first image; the standbys' promise
    // (what remote memory holds) does not move.
    EXPECT_EQ(im.reg.crash_since_min(*x.reg.region), 1000u);
    EXPECT_EQ(im.reg.dirty_since_min(*x.reg.region), 0u);

    // The crash: only remote memory is left, which lacks every change above.
    tree::BTree remote_only(*x.mem, 0, x.ns);
    ASSERT_NE(scan_set(remote_only), model);
    uint64_t changed = 0;
    for (const Node& img : im.images) changed += remote_only.replay_leaf_image(img);
    EXPECT_EQ(changed, gone.size() + (3000 + 6) / 7);
    EXPECT_EQ(scan_set(remote_only), model);
    // Idempotent: a redo interrupted and run again ends the same.
    for (const Node& img : im.images) EXPECT_EQ(remote_only.replay_leaf_image(img), 0u);
    EXPECT_EQ(remote_only.check().entries, model.size());
}

// Remote memory may hold more in an image's range than the image (a change
// logged before the image and written back after it was undone... or simply
// entries the image's leaf lost since), spread over several leaves: the
// replay removes exactly those, and changes logged after the image still apply.
TEST(WriteBackImages, ReplayByKeyRangeOverOtherLeaves) {
    WbFixture x;
    auto t = x.write_back_tree();
    for (int i = 0; i < 400; i++) ASSERT_TRUE(t->insert(K(i * 100, 1, 1)));
    x.handle.flush_frames(x.dirty_frames());
    ASSERT_TRUE(t->insert(K(150, 3, 3)));  // one leaf dirty
    ASSERT_EQ(x.dirty_frames().size(), 1u);
    Imaging im(x);
    ASSERT_EQ(im.log_all(x), 1u);
    const Node& img = im.images[0];
    tree::BTree remote_only(*x.mem, 0, x.ns);
    std::set<EntryKey> model = scan_set(*t);
    // Remote memory gets many entries inside the image's range (they split
    // its leaf), and one outside it.
    const EntryKey lo = img.low, hi = img.high;
    int added = 0;
    for (int v = 101; v < 5000; v += 3) {
        EntryKey k = K(v, 9, 9);
        if (compare_keys(k, lo) < 0 || (hi.cls != kPosInf && compare_keys(k, hi) >= 0)) continue;
        if (remote_only.insert(k)) added++;
    }
    ASSERT_GT(added, 60);  // more than a leaf holds
    ASSERT_TRUE(hi.cls == kPosInf || compare_keys(K(100000, 9, 9), hi) >= 0);
    ASSERT_TRUE(remote_only.insert(K(100000, 9, 9)));
    model.insert(K(100000, 9, 9));
    EXPECT_EQ(remote_only.replay_leaf_image(img), uint64_t(added) + 1);  // (+ the dirty insert)
    EXPECT_EQ(scan_set(remote_only), model);
    // A change logged after the image.
    ASSERT_TRUE(remote_only.insert(K(250, 4, 4)));
    model.insert(K(250, 4, 4));
    EXPECT_EQ(scan_set(remote_only), model);
    EXPECT_EQ(remote_only.check().entries, model.size());
}

TEST(WriteBackImages, ByteStringTree) {
    WbFixture x;
    auto tp = x.write_back_tree<tree::SlottedTree>();
    tree::SlottedTree& t = *tp;
    auto key = [](int i) { return "order-" + std::to_string(i * 7919 % 100003) + std::string(i % 13, 'y'); };
    std::set<std::string> model;
    for (int i = 0; i < 2000; i++) ASSERT_EQ(t.insert(key(i)), model.insert(key(i)).second);
    x.handle.flush_frames(x.dirty_frames());
    for (int i = 2000; i < 2300; i++) ASSERT_EQ(t.insert(key(i)), model.insert(key(i)).second);
    std::vector<std::string> gone;
    for (int i = 0; i < 2000; i += 9) gone.push_back(key(i));
    std::sort(gone.begin(), gone.end());
    gone.erase(std::unique(gone.begin(), gone.end()), gone.end());
    EXPECT_EQ(t.remove(gone.data(), gone.size()), gone.size());
    for (const std::string& k : gone) model.erase(k);
    Imaging im(x);
    EXPECT_EQ(im.log_all(x), x.dirty_frames().size());
    tree::SlottedTree remote_only(*x.mem, 0, x.ns);
    for (const Node& img : im.images) remote_only.replay_leaf_image(img);
    std::set<std::string> got;
    std::vector<std::string> batch;
    auto s = remote_only.scan(std::string(), tree::SlottedLayout::pos_inf());
    while (s->next(batch)) got.insert(batch.begin(), batch.end());
    EXPECT_EQ(got, model);
    EXPECT_EQ(remote_only.check().entries, model.size());
}

// A frame written back after its image is clean again and no longer holds
// redo back; one dirtied afresh starts from its dirty_since.
TEST(WriteBackImages, ImagedAtEndsWithTheDirtyState) {
    WbFixture x;
    auto t = x.write_back_tree();
    for (int i = 0; i < 500; i++) ASSERT_TRUE(t->insert(K(i * 2, 1, 1)));
    x.handle.flush_frames(x.dirty_frames());
    ASSERT_TRUE(t->insert(K(1, 1, 1)));
    Imaging im(x);
    ASSERT_EQ(im.log_all(x), 1u);
    EXPECT_EQ(im.reg.crash_since_min(*x.reg.region), 1000u);
    x.handle.flush_frames(x.dirty_frames());
    EXPECT_EQ(im.reg.crash_since_min(*x.reg.region), UINT64_MAX);
    ASSERT_TRUE(t->insert(K(3, 1, 1)));
    EXPECT_EQ(im.reg.crash_since_min(*x.reg.region), 0u);  // (this tree logs no positions: 0)
}
