// Placement over several memory nodes (src/README.md "Placement over several
// memory nodes"): three in-process memory nodes, one tree.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "common/stats.h"
#include "tree_test_util.h"

namespace dex::testing {
namespace {

struct ThreeNodes {
    std::vector<std::unique_ptr<memnode::Engine>> engines;
    std::unique_ptr<RemoteMemory> mem;
    std::vector<uint64_t> ns;
    explicit ThreeNodes(uint64_t pool_bytes, std::vector<uint64_t> pools = {}) {
        std::vector<std::unique_ptr<Transport>> v;
        for (int i = 0; i < 3; i++) {
            engines.push_back(make_engine(pools.empty() ? pool_bytes : pools[i]));
            v.push_back(std::make_unique<InProcTransport>(*engines.back()));
        }
        mem = std::make_unique<RemoteMemory>(std::move(v));
        for (uint32_t i = 0; i < 3; i++) ns.push_back(ns_create(mem->node(i)));
    }
    std::unique_ptr<tree::BTree> tree(int level) {
        auto t = std::make_unique<tree::BTree>(*mem, 0, ns[0]);
        t->set_placement(ns, level);
        return t;
    }
};

TEST(Placement, BulkLoadSpreadsSubtreesRoundRobin) {
    ThreeNodes n(64 << 20);
    auto t = n.tree(1);
    tree::BTree::BulkLoader bl(*t, 0.9);
    for (int64_t i = 0; i < 40000; i++) bl.add(K(i, 1, 1));
    bl.finish();
    tree::TreeInfo info = t->check();
    EXPECT_EQ(info.entries, 40000u);
    ASSERT_EQ(info.subtrees_on.size(), 3u);
    uint64_t mn = UINT64_MAX, mx = 0, sum = 0;
    for (uint64_t s : info.subtrees_on) {
        mn = std::min(mn, s);
        mx = std::max(mx, s);
        sum += s;
    }
    EXPECT_GE(mn, 1u);
    EXPECT_LE(mx - mn, 1u) << info.subtrees_on[0] << " " << info.subtrees_on[1] << " " << info.subtrees_on[2];
    EXPECT_EQ(info.nodes_on[0] + info.nodes_on[1] + info.nodes_on[2], info.leaves + info.inner_nodes);
    (void)sum;
}

TEST(Placement, SplitsAndMergesKeepSubtreesOnOneNode) {
    for (int level : {1, 2}) {
        ThreeNodes n(64 << 20);
        auto t = n.tree(level);
        tree::BTree::BulkLoader bl(*t, 0.9);
        std::set<EntryKey> model;
        for (int64_t i = 0; i < 60000; i += 2) {
            bl.add(K(i, 1, 1));
            model.insert(K(i, 1, 1));
        }
        bl.finish();
        for (int64_t i = 1; i < 60000; i += 2) {
            ASSERT_TRUE(t->insert(K(i, 1, 1)));
            model.insert(K(i, 1, 1));
        }
        std::vector<EntryKey> del;
        for (int64_t i = 0; i < 60000; i += 3) del.push_back(K(i, 1, 1));
        for (auto& k : del) model.erase(k);
        EXPECT_EQ(t->remove(del.data(), del.size()), del.size());
        t->compact();
        tree::TreeInfo info = t->check();  // throws on a placement violation
        EXPECT_EQ(info.entries, model.size());
        int holding = 0;
        for (uint64_t s : info.subtrees_on) holding += s > 0;
        // level 1: ~10 subtrees of ~35 leaves; level 2: one subtree holds 1225 leaves
        EXPECT_GE(holding, level == 1 ? 3 : 1) << "level " << level;
        EXPECT_EQ(scan_all(*t, neg_inf_key(), pos_inf_key(), false),
                  model_range(model, neg_inf_key(), pos_inf_key(), false));
    }
}

TEST(Placement, CheckDetectsASubtreeSpanningTwoNodes) {
    ThreeNodes n(64 << 20);
    auto t = n.tree(1);
    tree::BTree::BulkLoader bl(*t, 0.9);
    for (int64_t i = 0; i < 10000; i++) bl.add(K(i, 1, 1));
    bl.finish();
    tree::TreeInfo info = t->check();
    ASSERT_GT(info.height, 2u);
    // Move one leaf to another memory node and relink its parent to the copy.
    tree::NodeIO io(*n.mem, 0, {});
    tree::Deadline dl(5000);
    Node root, parent, leaf;
    ASSERT_EQ(io.read(info.root, root, dl), tree::NodeIO::Read::kOk);
    GAddr pa = root.inner[0].child;
    while (true) {
        ASSERT_EQ(io.read(pa, parent, dl), tree::NodeIO::Read::kOk);
        if (parent.level == 1) break;
        pa = parent.inner[0].child;
    }
    GAddr la = parent.inner[1].child;
    ASSERT_EQ(io.read(la, leaf, dl), tree::NodeIO::Read::kOk);
    uint32_t other = (gaddr_node(la) + 1) % 3;
    uint64_t req[2] = {n.ns[other], kNodeSize};
    auto r = n.mem->node(other).rpc(net::kOpAlloc, req, sizeof req);
    uint64_t off;
    std::memcpy(&off, r.data(), 8);
    GAddr copy = make_gaddr(other, off);
    n.mem->write(copy, &leaf, kNodeSize);
    // left neighbour's right link and the parent's downlink now name the copy
    Node left;
    ASSERT_EQ(io.read(parent.inner[0].child, left, dl), tree::NodeIO::Read::kOk);
    left.right = copy;
    tree::seal_node(left, lock_version(left.lock) + 1);
    n.mem->write(parent.inner[0].child, &left, kNodeSize);
    parent.inner[1].child = copy;
    tree::seal_node(parent, lock_version(parent.lock) + 1);
    n.mem->write(pa, &parent, kNodeSize);
    try {
        t->check();
        FAIL() << "check() accepted a level-1 subtree on two memory nodes";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kCorrupt);
        EXPECT_NE(std::string(e.what()).find("placement"), std::string::npos) << e.what();
    }
}

TEST(Placement, OutOfSpaceNamesSizesAndLeavesTheTreeConsistent) {
    ThreeNodes n(0, {1 << 20, 1 << 20, 1 << 20});
    auto t = n.tree(1);
    t->init_empty();
    std::set<EntryKey> model;
    bool hit = false;
    for (int64_t i = 0; i < 200000 && !hit; i++) {
        try {
            t->insert(K(i, 1, 1));
            model.insert(K(i, 1, 1));
        } catch (const Error& e) {
            ASSERT_EQ(e.code(), ErrorCode::kOutOfSpace) << e.what();
            EXPECT_NE(std::string(e.what()).find("memory nodes out of space"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("bytes used"), std::string::npos) << e.what();
            hit = true;
        }
    }
    ASSERT_TRUE(hit);
    tree::TreeInfo info = t->check();
    EXPECT_EQ(info.entries, model.size());
    EXPECT_EQ(scan_all(*t, neg_inf_key(), pos_inf_key(), false),
              model_range(model, neg_inf_key(), pos_inf_key(), false));
}

TEST(Placement, BulkLoadSkipsAFullNode) {
    // node 1 is tiny: every segment goes to nodes 0 and 2
    ThreeNodes n(0, {64 << 20, 24 << 10, 64 << 20});
    auto t = n.tree(1);
    tree::BTree::BulkLoader bl(*t, 0.9);
    for (int64_t i = 0; i < 40000; i++) bl.add(K(i, 1, 1));
    bl.finish();
    tree::TreeInfo info = t->check();
    EXPECT_EQ(info.entries, 40000u);
    EXPECT_EQ(info.subtrees_on[1], 0u);
    EXPECT_GT(info.subtrees_on[0], 0u);
    EXPECT_GT(info.subtrees_on[2], 0u);
}

}  // namespace
}  // namespace dex::testing

namespace dex::testing {
namespace {

// An index grown from empty by inserts: level-L splits move the right half's
// subtree to the emptier node, so all three nodes fill up together.
TEST(Placement, InsertGrownTreeSpreadsByMigratingSplits) {
    for (int level : {1, 2}) {
        ThreeNodes n(64 << 20);
        auto t = n.tree(level);
        t->init_empty();
        std::set<EntryKey> model;
        const int64_t keys = level == 1 ? 60000 : 400000;
        for (int64_t i = 0; i < keys; i++) {
            int64_t k = (i * 7919) % keys;
            ASSERT_TRUE(t->insert(K(k, 1, 1)));
            model.insert(K(k, 1, 1));
        }
        tree::TreeInfo info = t->check();
        EXPECT_EQ(info.entries, model.size());
        int holding = 0;
        for (uint64_t s : info.nodes_on) holding += s > 0;
        EXPECT_EQ(holding, 3) << "level " << level;
        EXPECT_EQ(scan_all(*t, neg_inf_key(), pos_inf_key(), false),
                  model_range(model, neg_inf_key(), pos_inf_key(), false));
        for (int64_t k = 0; k < keys; k += 997) EXPECT_TRUE(t->contains(K(k, 1, 1)));
    }
}

TEST(Placement, AppendOnlyFillsAllNodesBeforeOutOfSpace) {
    ThreeNodes n(0, {4 << 20, 4 << 20, 4 << 20});
    auto t = n.tree(1);
    t->init_empty();
    int64_t i = 0;
    try {
        for (; i < 2000000; i++) t->insert(K(i, 1, 1));
        FAIL() << "no out-of-space error";
    } catch (const Error& e) {
        ASSERT_EQ(e.code(), ErrorCode::kOutOfSpace) << e.what();
    }
    tree::TreeInfo info = t->check();
    EXPECT_EQ(info.entries, static_cast<uint64_t>(i));
    for (uint32_t j = 0; j < 3; j++)
        EXPECT_GT(n.engines[j]->used_bytes(), (3u << 20)) << "node " << j << " not used before running out";
}

}  // namespace
}  // namespace dex::testing

namespace dex::testing {
namespace {

// Concurrent inserts, deletes and lookups from four clients (own connections)
// while level-1 splits migrate subtrees between three memory nodes.
TEST(Placement, ConcurrentWritersWhileSubtreesMigrate) {
    ThreeNodes n(64 << 20);
    auto setup = n.tree(1);
    setup->init_empty();
    const int kThreads = 4;
    const int64_t kPer = 15000;
    const uint64_t migrations0 = stats().migrations.load();
    std::vector<std::thread> th;
    std::atomic<int> errors{0};
    for (int c = 0; c < kThreads; c++) {
        th.emplace_back([&, c] {
            std::vector<std::unique_ptr<Transport>> v;
            for (auto& e : n.engines) v.push_back(std::make_unique<InProcTransport>(*e));
            RemoteMemory mem(std::move(v));
            tree::BTree t(mem, 0, n.ns[0]);
            t.set_placement(n.ns, 1);
            try {
                for (int64_t i = 0; i < kPer; i++) {
                    int64_t k = i * kThreads + c;
                    if (!t.insert(K(k, 1, 1))) errors++;
                    if (i % 3 == 2) {
                        EntryKey d = K((i - 2) * kThreads + c, 1, 1);
                        if (t.remove(&d, 1) != 1) errors++;
                    }
                    if (i % 7 == 0 && !t.contains(K(k, 1, 1))) errors++;
                }
            } catch (const std::exception& e) {
                ADD_FAILURE() << e.what();
                errors++;
            }
        });
    }
    for (auto& x : th) x.join();
    EXPECT_EQ(errors.load(), 0);
    tree::TreeInfo info = setup->check();
    std::set<EntryKey> model;
    for (int c = 0; c < kThreads; c++)
        for (int64_t i = 0; i < kPer; i++)
            if (i % 3 != 0 || i + 2 >= kPer) model.insert(K(i * kThreads + c, 1, 1));
    EXPECT_EQ(info.entries, model.size());
    EXPECT_EQ(scan_all(*setup, neg_inf_key(), pos_inf_key(), false),
              model_range(model, neg_inf_key(), pos_inf_key(), false));
    // Which nodes end up holding subtrees depends on how the four writers
    // interleave (each migration picks the emptiest node at that moment; 2 of
    // 12 runs on a loaded machine left the third one empty): the outcome that
    // holds in every interleaving is that subtrees did migrate and more than
    // one node holds them. InsertGrownTreeSpreadsByMigratingSplits checks
    // the spread over all three nodes single-threaded.
    int holding = 0;
    for (uint64_t s : info.nodes_on) holding += s > 0;
    EXPECT_GE(holding, 2);
    EXPECT_GT(stats().migrations.load(), migrations0);
}

}  // namespace
}  // namespace dex::testing

#include "cache/cache.h"
#include "cache/region.h"
#include "tree/write_back_nodes.h"

namespace dex::testing {
namespace {

// A write-back tree over three memory nodes (W16): a split at the placement
// level moves a subtree while every leaf frame it changes can be taken at
// once and is clean or covered (WAL durable); a dirty leaf's entries go out
// with the copy (or the published left neighbour) and its frame turns clean.
// Inserts go in place; with `flush_every` a "worker" writes every dirty
// frame back that often (0: never, every leaf stays dirty). The tree
// spreads, the cache answers exactly, and after a last write-back remote
// memory alone holds exactly the model.
TEST(Placement, WriteBackTreeMigratesWithItsDirtyLeaves) {
    for (int flush_every : {300, 0}) {
        ThreeNodes n(64 << 20);
        Region reg(16384);
        cache::Cache handle(*reg.region, 5);
        handle.set_write_back([&](uint32_t f, const Node& img) {
            const GAddr a = reg.region->header(f).gaddr.load();
            tree::TreeOptions o;
            tree::NodeIO io(*n.mem, gaddr_node(a), o);
            tree::write_back_node(io, a, img, tree::Deadline(10000));
            return true;
        });
        auto dirty = [&] {
            std::vector<uint32_t> v;
            reg.region->for_each_frame([&](const cache::FrameInfo& i) {
                if (i.dirty && i.gaddr != kNullGAddr) v.push_back(i.frame);
            });
            return v;
        };
        tree::TreeOptions o;
        o.cache = &handle;
        tree::BTree t(*n.mem, 0, n.ns[0], o);
        t.set_placement(n.ns, 1);
        t.init_empty();
        t.set_write_back(true, [] { return true; });
        const uint64_t m0 = stats().migrations.load(), d0 = stats().dirty_updates.load();
        std::set<EntryKey> model;
        const int64_t keys = 60000;
        for (int64_t i = 0; i < keys; i++) {
            const int64_t k = (i * 7919) % keys;
            ASSERT_TRUE(t.insert(K(k, 1, 1)));
            model.insert(K(k, 1, 1));
            if (flush_every && i % flush_every == flush_every - 1) handle.flush_frames(dirty());
        }
        EXPECT_GT(stats().migrations.load(), m0) << flush_every;
        EXPECT_GT(stats().dirty_updates.load() - d0, static_cast<uint64_t>(keys / 2));  // mostly in place
        std::vector<EntryKey> all = scan_all(t, neg_inf_key(), pos_inf_key(), false);
        EXPECT_EQ(all.size(), model.size()) << flush_every;
        EXPECT_TRUE(all == model_range(model, neg_inf_key(), pos_inf_key(), false)) << flush_every;
        handle.flush_frames(dirty());
        ASSERT_TRUE(dirty().empty());
        tree::BTree remote_only(*n.mem, 0, n.ns[0]);
        remote_only.set_placement(n.ns, 1);
        tree::TreeInfo info = remote_only.check();
        EXPECT_EQ(info.entries, model.size()) << flush_every;
        int holding = 0;
        for (uint64_t sz : info.nodes_on) holding += sz > 0;
        EXPECT_GE(holding, 2) << flush_every;
        EXPECT_TRUE(scan_all(remote_only, neg_inf_key(), pos_inf_key(), false) ==
                    model_range(model, neg_inf_key(), pos_inf_key(), false))
            << flush_every;
    }
}

}  // namespace
}  // namespace dex::testing
