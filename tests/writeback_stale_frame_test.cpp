// A clean cached frame that fails validation in write-back mode (src/README.md
// C8): a node the cache could not drop because a reader had it pinned is made
// unreadable instead (tree id 0), and the next descent through it must
// re-read it remotely. Write-back descents used to never replace any frame
// (a dirty leaf is the newest copy, W2) and so looped on such a frame until
// dex.op_timeout; only dirty frames are kept now.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "cache/cache.h"
#include "cache/region.h"
#include "tree/write_back_nodes.h"
#include "tree_test_util.h"
#include "writeback_test_util.h"

using namespace dex;
using namespace dex::testing;

namespace {

// The tree holds `n` random keys (model) and no frame is dirty.
std::set<EntryKey> fill_and_flush(WbFixture& x, tree::BTree& t, int n) {
    std::set<EntryKey> model;
    std::mt19937_64 rng(29);
    for (int i = 0; i < n; i++) {
        EntryKey k = K(static_cast<int64_t>(rng() % 100000), static_cast<uint32_t>(i), 1);
        EXPECT_EQ(t.insert(k), model.insert(k).second);
    }
    x.handle.flush_frames(x.dirty_frames());
    EXPECT_TRUE(x.dirty_frames().empty());
    return model;
}

// Drops g's frame while a reader has it pinned: the cache's fallback makes the
// frame's image unreadable (tree id 0) and leaves it mapped.
void make_unreadable_while_pinned(WbFixture& x, GAddr g) {
    cache::CacheRegion& R = *x.reg.region;
    const uint32_t f = R.table().lookup(g);
    ASSERT_LT(f, R.frame_count()) << "node " << tree::hex_addr(g) << " is not cached";
    ASSERT_FALSE(R.header(f).dirty.load());
    ASSERT_TRUE(R.pin(f, g));
    tree::drop_cached_node(x.handle, g);
    R.unpin(f);
    ASSERT_EQ(R.table().lookup(g), f) << "the pinned frame was dropped after all";
    ASSERT_EQ(R.node(f)->tree_id, 0u) << "the pinned frame was not made unreadable";
}

void expect_every_key_found(tree::BTree& t, const std::set<EntryKey>& model) {
    size_t found = 0;
    try {
        for (const EntryKey& k : model) found += t.contains(k);
    } catch (const Error& e) {
        FAIL() << "a descent through the unreadable frame failed: " << e.what();
    }
    EXPECT_EQ(found, model.size());
}

TEST(WriteBackStaleFrame, UnreadableInnerFrameIsReadAgain) {
    WbFixture x;
    auto tp = x.write_back_tree();
    tree::BTree& t = *tp;
    const std::set<EntryKey> model = fill_and_flush(x, t, 4000);
    const GAddr root = t.root();
    Node rn;
    x.mem->read(root, &rn, kNodeSize);
    ASSERT_GE(rn.level, 1) << "the tree needs an inner node";
    make_unreadable_while_pinned(x, root);
    t.set_op_timeout(2000);
    expect_every_key_found(t, model);
    // The inner node's frame holds its image again (dropped and re-admitted).
    const uint32_t f = x.reg.region->table().lookup(root);
    ASSERT_LT(f, x.reg.region->frame_count());
    EXPECT_EQ(x.reg.region->node(f)->tree_id, rn.tree_id);
}

TEST(WriteBackStaleFrame, UnreadableCleanLeafFrameIsReadAgain) {
    WbFixture x;
    auto tp = x.write_back_tree();
    tree::BTree& t = *tp;
    const std::set<EntryKey> model = fill_and_flush(x, t, 4000);
    const EntryKey k = *std::next(model.begin(), static_cast<std::ptrdiff_t>(model.size() / 2));
    const GAddr leaf = leaf_for(*x.mem, t.root(), k);
    make_unreadable_while_pinned(x, leaf);
    t.set_op_timeout(2000);
    expect_every_key_found(t, model);
    // And it takes changes again.
    const EntryKey k2 = K(key_to_int64(k.value), 999999, 2);
    ASSERT_TRUE(t.insert(k2));
    EXPECT_TRUE(t.contains(k2));
}

// A refresh may meet a frame that turned dirty after it looked, and a drop
// of a dirty frame whose WAL is not durable cannot write it back: the frame
// must stay as it is (the newest image), never be made unreadable.
TEST(WriteBackStaleFrame, DirtyFrameThatCannotBeWrittenBackIsNeverMadeUnreadable) {
    WbFixture x;
    set_write_backs(x.handle, *x.mem, *x.reg.region, true);  // refuse frames past the durable LSN
    DurableAt at(100);
    auto tp = x.write_back_tree();
    tree::BTree& t = *tp;
    std::set<EntryKey> model;
    for (int i = 0; i < 400; i++) {
        EntryKey k = K(i * 3, static_cast<uint32_t>(i), 1);
        ASSERT_TRUE(t.insert(k, 500));  // past the durable LSN: stays dirty
        model.insert(k);
    }
    const std::vector<uint32_t> dirty = x.dirty_frames();
    ASSERT_FALSE(dirty.empty());
    const uint32_t f = dirty.front();
    const GAddr g = x.reg.region->header(f).gaddr.load();
    const uint32_t tree_id = x.reg.region->node(f)->tree_id;
    tree::drop_cached_node(x.handle, g);
    EXPECT_EQ(x.reg.region->table().lookup(g), f) << "a dirty frame was dropped without its write-back";
    EXPECT_EQ(x.reg.region->node(f)->tree_id, tree_id) << "a dirty frame was made unreadable";
    EXPECT_TRUE(x.reg.region->header(f).dirty.load());
    expect_every_key_found(t, model);
}

}  // namespace
