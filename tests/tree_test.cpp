// B-link tree over remote memory: single-threaded behaviour against a
// std::set model. TreeModelTest runs every model scenario once per tree
// configuration -- without a cache, and through caches of several sizes and
// admission policies (src/README.md "Node cache"): a large one, a tiny one
// that evicts all the time, DEX's default leaf admission, inner nodes only.
// TreeTest holds the scenarios that need no cache variants (empty trees,
// check() on corrupted nodes, compact()).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <random>
#include <set>

#include "cache/cache.h"
#include "cache/region.h"
#include "common/stats.h"
#include "tree_test_util.h"

using namespace dex;
using namespace dex::testing;
using dex::tree::BTree;

namespace {

// One in-process memory node, one namespace, one tree (with or without a cache).
class TreeFixture {
protected:
    void make_tree(uint64_t pool_bytes, cache::Cache* cache) {
        engine = make_engine(pool_bytes);
        mem = make_mem(*engine);
        ns = ns_create(mem->node(0));
        tree::TreeOptions o;
        o.cache = cache;
        tree = std::make_unique<BTree>(*mem, 0, ns, o);
    }
    // Forward and backward scans and check() agree with the model.
    void expect_same(const std::set<EntryKey>& model) {
        auto all = scan_all(*tree, neg_inf_key(), pos_inf_key(), false);
        ASSERT_EQ(all.size(), model.size());
        EXPECT_TRUE(std::equal(all.begin(), all.end(), model.begin()));
        auto back = scan_all(*tree, neg_inf_key(), pos_inf_key(), true);
        ASSERT_EQ(back.size(), model.size());
        EXPECT_TRUE(std::equal(back.begin(), back.end(), model.rbegin()));
        EXPECT_EQ(tree->check().entries, model.size());
    }
    // The leaf holding `k`, read raw.
    GAddr leaf_for(const EntryKey& k) { return dex::testing::leaf_for(*mem, tree->root(), k); }

    std::unique_ptr<memnode::Engine> engine;
    std::unique_ptr<RemoteMemory> mem;
    uint64_t ns = 0;
    std::unique_ptr<BTree> tree;
};

// ---- model scenarios, once per tree configuration --------------------------------

struct TreeConfig {
    const char* name;
    uint32_t frames;  // 0: no cache
    bool cache_leaves;
    double leaf_admission;
};

void PrintTo(const TreeConfig& c, std::ostream* os) { *os << c.name; }

class TreeModelTest : public TreeFixture, public ::testing::TestWithParam<TreeConfig> {
protected:
    void SetUp() override {
        const TreeConfig& c = GetParam();
        if (c.frames) {
            reg = std::make_unique<Region>(c.frames, cache::AdmissionPolicy{c.cache_leaves, c.leaf_admission});
            handle = std::make_unique<cache::Cache>(*reg->region, 12345);
        }
        make_tree(256ull << 20, handle.get());
        stats().reset();
    }
    void TearDown() override {
        const TreeConfig& c = GetParam();
        if (!c.frames) return;
        if (tree) expect_cache_coherent(*reg->region, *mem);
        // Every scenario must actually have used the cache.
        EXPECT_GT(stats().cache_hits.load(), 0u);
        if (c.frames <= 64) {
            EXPECT_GT(stats().evictions.load(), 0u) << "tiny cache never evicted";
        }
        std::printf("[ info     ] %s: hits %llu misses %llu admissions %llu evictions %llu restarts %llu\n", c.name,
                    (unsigned long long)stats().cache_hits.load(), (unsigned long long)stats().cache_misses.load(),
                    (unsigned long long)stats().admissions.load(), (unsigned long long)stats().evictions.load(),
                    (unsigned long long)stats().restarts.load());
    }

    std::unique_ptr<Region> reg;
    std::unique_ptr<cache::Cache> handle;
};

TEST_P(TreeModelTest, RandomInsertsDuplicatesAndNulls) {
    tree->init_empty();
    std::mt19937_64 rng(42);
    std::set<EntryKey> model;
    for (int i = 0; i < 20000; i++) {
        EntryKey k = (rng() % 50 == 0) ? make_null_key(static_cast<uint32_t>(i), 1)
                                       : K(static_cast<int64_t>(rng() % 600) - 300, static_cast<uint32_t>(rng() % 1000),
                                           static_cast<uint16_t>(1 + rng() % 50));
        bool fresh = model.insert(k).second;
        ASSERT_EQ(tree->insert(k), fresh) << i;
    }
    // Re-inserting an exact entry is a no-op.
    EXPECT_FALSE(tree->insert(*model.begin()));
    EXPECT_FALSE(tree->insert(*model.rbegin()));
    expect_same(model);
    auto info = tree->check();
    EXPECT_GE(info.height, 2u);
    EXPECT_EQ(info.missing_downlinks, 0u);
    for (int i = 0; i < 4000; i++) {
        EntryKey k = K(static_cast<int64_t>(rng() % 600) - 300, static_cast<uint32_t>(rng() % 1000),
                       static_cast<uint16_t>(1 + rng() % 50));
        ASSERT_EQ(tree->contains(k), model.count(k) == 1) << tree::key_str(k);
    }
    for (auto& k : model) ASSERT_TRUE(tree->contains(k)) << tree::key_str(k);
    // NULLs sort last.
    auto all = scan_all(*tree, neg_inf_key(), pos_inf_key(), false);
    EXPECT_EQ(all.back().cls, kNull);
    EXPECT_EQ(all.front().cls, kValue);
}

TEST_P(TreeModelTest, RangeScansForwardBackward) {
    tree->init_empty();
    std::mt19937_64 rng(7);
    std::set<EntryKey> model;
    for (int i = 0; i < 8000; i++) {
        EntryKey k = (i % 97 == 0) ? make_null_key(static_cast<uint32_t>(i), 2)
                                   : K(static_cast<int64_t>(rng() % 1000), static_cast<uint32_t>(i), 1);
        model.insert(k);
        tree->insert(k);
    }
    auto check_range = [&](const EntryKey& lo, const EntryKey& hi) {
        for (bool bw : {false, true}) {
            auto got = scan_all(*tree, lo, hi, bw);
            auto want = model_range(model, lo, hi, bw);
            ASSERT_EQ(got.size(), want.size()) << tree::key_str(lo) << ".." << tree::key_str(hi) << " backward=" << bw;
            EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin()));
        }
    };
    for (int i = 0; i < 150; i++) {
        int64_t a = static_cast<int64_t>(rng() % 1100) - 50, b = a + static_cast<int64_t>(rng() % 300);
        check_range(KMin(a), KMax(b));        // a <= v <= b
        check_range(KMax(a), KMin(b));        // a < v < b
        check_range(KMin(a), KMax(a));        // v = a
    }
    check_range(neg_inf_key(), pos_inf_key());
    check_range(neg_inf_key(), KMax(10));
    check_range(KMin(990), pos_inf_key());
    check_range(make_null_key(0, 0), pos_inf_key());         // IS NULL
    check_range(neg_inf_key(), KMax(std::numeric_limits<int64_t>::max()));  // IS NOT NULL
    check_range(KMin(500), KMax(400));                         // empty: lo > hi
    // Batches come a leaf at a time, never more than a leaf holds.
    auto s = tree->scan(neg_inf_key(), pos_inf_key());
    std::vector<EntryKey> batch;
    size_t batches = 0;
    while (s->next(batch)) {
        EXPECT_LE(batch.size(), kLeafCapacity);
        EXPECT_FALSE(batch.empty());
        batches++;
    }
    EXPECT_GT(batches, 100u);
}

TEST_P(TreeModelTest, AscendingAndDescendingToHeightThree) {
    tree->init_empty();
    std::set<EntryKey> model;
    for (int i = 0; i < 50000; i++) {
        EntryKey k = K(i / 3, static_cast<uint32_t>(i), 1);  // duplicates of values, distinct TIDs
        model.insert(k);
        ASSERT_TRUE(tree->insert(k));
    }
    for (int i = 0; i < 15000; i++) {
        EntryKey k = K(-1 - i, 7, 7);
        model.insert(k);
        ASSERT_TRUE(tree->insert(k));
    }
    auto info = tree->check();
    EXPECT_GE(info.height, 3u);
    EXPECT_EQ(info.entries, model.size());
    expect_same(model);
}

TEST_P(TreeModelTest, BulkLoadThenInsertsAndDeletes) {
    tree->init_empty();
    // Cache the empty tree's root first (if there is a cache): the bulk load replaces it.
    EXPECT_FALSE(tree->contains(K(1, 1, 1)));
    const int n = 1000000;
    auto t0 = std::chrono::steady_clock::now();
    {
        BTree::BulkLoader bl(*tree, 0.9);
        for (int i = 0; i < n; i++) bl.add(K(2 * i, 1, 1));
        bl.finish();
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(secs, 20.0) << "bulk load of 1M keys took " << secs << " s";
    auto info = tree->check();
    EXPECT_EQ(info.entries, static_cast<uint64_t>(n));
    EXPECT_GE(info.height, 3u);
    // ~90% fill.
    EXPECT_LE(info.leaves, static_cast<uint64_t>(n / 50));
    EXPECT_TRUE(tree->contains(K(0, 1, 1)));
    EXPECT_TRUE(tree->contains(K(2 * (n - 1), 1, 1)));
    EXPECT_FALSE(tree->contains(K(1, 1, 1)));
    // Inserts into the bulk-loaded tree split its full-ish leaves; deletes of
    // existing keys and lookups in between.
    std::set<EntryKey> model;
    for (int i = 0; i < n; i++) model.insert(model.end(), K(2 * i, 1, 1));
    std::mt19937_64 rng(3);
    for (int i = 0; i < 20000; i++) {
        EntryKey k = K(2 * static_cast<int64_t>(rng() % n) + 1, 1, 1);
        ASSERT_EQ(tree->insert(k), model.insert(k).second);
        if (i % 4 == 0) {  // and delete a random existing key
            EntryKey d = K(2 * static_cast<int64_t>(rng() % n), 1, 1);
            ASSERT_EQ(tree->remove(&d, 1), model.erase(d));
        }
        if (i % 16 == 0) {
            EntryKey q = K(static_cast<int64_t>(rng() % (2 * n)), 1, 1);
            ASSERT_EQ(tree->contains(q), model.count(q) == 1) << tree::key_str(q);
        }
    }
    EXPECT_EQ(tree->check().entries, model.size());
    auto got = scan_all(*tree, KMin(1000), KMax(3000), false);
    auto want = model_range(model, KMin(1000), KMax(3000), false);
    EXPECT_EQ(got.size(), want.size());
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin()));
    expect_same(model);
    // Bulk keys must be strictly ascending.
    BTree::BulkLoader bad(*tree, 0.9);
    bad.add(K(5, 1, 1));
    EXPECT_THROW(bad.add(K(5, 1, 1)), Error);
}

TEST_P(TreeModelTest, DeleteToEmptyGivesMemoryBackAndRefills) {
    tree->init_empty();
    std::mt19937_64 rng(11);
    std::set<EntryKey> model;
    while (model.size() < 30000) {
        EntryKey k = K(static_cast<int64_t>(rng() % 100000), static_cast<uint32_t>(rng() % 100), 1);
        if (model.insert(k).second) {
            ASSERT_TRUE(tree->insert(k));
        }
    }
    auto full = tree->check();
    uint64_t bytes_full = ns_bytes(mem->node(0), ns);
    EXPECT_GT(bytes_full, 0u);

    // Deleting keys that do not exist counts nothing and changes nothing.
    std::vector<EntryKey> absent = {K(-5, 1, 1), K(100001, 1, 1)};
    EXPECT_EQ(tree->remove(absent.data(), absent.size()), 0u);

    // VACUUM-like: sorted batches, in random key regions, plus a few absent keys.
    std::vector<EntryKey> keys(model.begin(), model.end());
    std::vector<size_t> order;
    for (size_t b = 0; b < keys.size(); b += 700) order.push_back(b);
    std::shuffle(order.begin(), order.end(), rng);
    uint64_t removed = 0;
    int round = 0;
    for (size_t b : order) {
        std::vector<EntryKey> batch(keys.begin() + b, keys.begin() + std::min(keys.size(), b + 700));
        batch.push_back(K(100000 + static_cast<int64_t>(b), 9, 9));  // absent
        std::sort(batch.begin(), batch.end());
        uint64_t d = tree->remove(batch.data(), batch.size());
        ASSERT_EQ(d, batch.size() - 1);
        removed += d;
        for (auto& k : batch) model.erase(k);
        // Lookups between merges (freed leaves must not be found, also not
        // through the cache).
        for (int q = 0; q < 50; q++) {
            const EntryKey& k = keys[rng() % keys.size()];
            ASSERT_EQ(tree->contains(k), model.count(k) == 1) << tree::key_str(k);
        }
        if (++round % 10 == 0) expect_same(model);
    }
    EXPECT_EQ(removed, keys.size());
    auto empty = tree->check();
    EXPECT_EQ(empty.entries, 0u);
    // Empty leaves were merged away: at most one leaf per level-1 node remains.
    EXPECT_LT(empty.leaves, full.leaves / 10) << "leaves full " << full.leaves << " empty " << empty.leaves;
    EXPECT_LE(empty.leaves, full.inner_nodes);

    // The freed nodes are reused (cached copies of their old lives must not
    // matter): refilling does not grow the namespace much.
    std::shuffle(keys.begin(), keys.end(), rng);  // same kind of (random) order as the first fill
    for (auto& k : keys) {
        ASSERT_TRUE(tree->insert(k));
        model.insert(k);
    }
    expect_same(model);
    uint64_t bytes_refill = ns_bytes(mem->node(0), ns);
    EXPECT_LE(bytes_refill, bytes_full + 64 * kNodeSize)
        << "namespace grew from " << bytes_full << " to " << bytes_refill;
}

INSTANTIATE_TEST_SUITE_P(Configs, TreeModelTest,
                         ::testing::Values(TreeConfig{"uncached", 0, false, 0.0},
                                           TreeConfig{"large", 1u << 16, true, 1.0},
                                           TreeConfig{"tiny16", 16, true, 1.0},
                                           TreeConfig{"dex", 512, true, 0.1},
                                           TreeConfig{"inner_only", 512, false, 0.1}),
                         [](const ::testing::TestParamInfo<TreeConfig>& i) { return std::string(i.param.name); });

// ---- scenarios without cache variants -----------------------------------------------

class TreeTest : public TreeFixture, public ::testing::Test {
protected:
    void SetUp() override { make_tree(128ull << 20, nullptr); }
};

TEST_F(TreeTest, EmptyTree) {
    tree->init_empty();
    auto info = tree->check();
    EXPECT_EQ(info.entries, 0u);
    EXPECT_EQ(info.height, 1u);
    EXPECT_EQ(info.leaves, 1u);
    EXPECT_NE(info.root, 0u);
    EXPECT_TRUE(scan_all(*tree, neg_inf_key(), pos_inf_key(), false).empty());
    EXPECT_TRUE(scan_all(*tree, neg_inf_key(), pos_inf_key(), true).empty());
    EXPECT_FALSE(tree->contains(K(1, 1, 1)));
    EntryKey k = K(1, 1, 1);
    EXPECT_EQ(tree->remove(&k, 1), 0u);
}

TEST_F(TreeTest, BulkLoadEmptyAndSmall) {
    {
        BTree::BulkLoader bl(*tree, 0.5);
        bl.finish();
    }
    EXPECT_EQ(tree->check().entries, 0u);
    std::set<EntryKey> model;
    for (int i = 0; i < 100; i++) {
        EntryKey k = K(i, 0, 1);
        model.insert(k);
        tree->insert(k);
    }
    expect_same(model);
}

TEST_F(TreeTest, CheckDetectsUnsortedEntries) {
    tree->init_empty();
    for (int i = 0; i < 5000; i++) tree->insert(K(i, 1, 1));
    ASSERT_NO_THROW(tree->check());
    GAddr leaf = leaf_for(K(2500, 1, 1));
    Node n;
    mem->read(leaf, &n, kNodeSize);
    ASSERT_GE(n.count, 3);
    std::swap(n.leaf[0], n.leaf[1]);
    tree::seal_node(n, lock_version(n.lock) + 1);  // a well-formed image with bad content
    mem->write(leaf, &n, kNodeSize);
    try {
        tree->check();
        FAIL() << "check() accepted unsorted entries";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kCorrupt);
        EXPECT_NE(std::string(e.what()).find("not sorted"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(tree::hex_addr(leaf)), std::string::npos) << e.what();
    }
}

TEST_F(TreeTest, CheckDetectsGarbageAndBadFences) {
    tree->init_empty();
    for (int i = 0; i < 5000; i++) tree->insert(K(i, 1, 1));
    GAddr leaf = leaf_for(K(100, 1, 1));
    Node n, saved;
    mem->read(leaf, &saved, kNodeSize);

    // Wrong high fence (well-formed image).
    n = saved;
    n.high = K(std::numeric_limits<int64_t>::max() / 2, 0, 0);
    tree::seal_node(n, lock_version(n.lock) + 1);
    mem->write(leaf, &n, kNodeSize);
    try {
        tree->check();
        FAIL() << "check() accepted a broken fence";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kCorrupt);
        EXPECT_NE(std::string(e.what()).find("fence"), std::string::npos) << e.what();
    }

    // Garbage body: the checksum no longer matches.
    n = saved;
    std::vector<uint8_t> junk(300);
    for (size_t i = 0; i < junk.size(); i++) junk[i] = static_cast<uint8_t>(i * 37 + 11);
    std::memcpy(reinterpret_cast<uint8_t*>(&n) + 100, junk.data(), junk.size());
    mem->write(leaf, &n, kNodeSize);
    try {
        tree->check();
        FAIL() << "check() accepted a garbage node";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kCorrupt);
        EXPECT_NE(std::string(e.what()).find(tree::hex_addr(leaf)), std::string::npos) << e.what();
    }
}

TEST(NodeIoTest, ChecksumCoversUsedBytesOnly) {
    Node n;
    std::memset(static_cast<void*>(&n), 0, sizeof n);
    n.level = 0;
    n.count = 2;
    n.leaf[0] = K(1, 1, 1);
    n.leaf[1] = K(2, 1, 1);
    tree::seal_node(n, 5);
    EXPECT_TRUE(tree::snapshot_valid(n));
    n.leaf[5] = K(9, 9, 9);  // beyond count: not covered
    EXPECT_TRUE(tree::snapshot_valid(n));
    n.leaf[1].block ^= 1;
    EXPECT_FALSE(tree::snapshot_valid(n));
    n.leaf[1].block ^= 1;
    n.body_version = 6;  // version mismatch
    EXPECT_FALSE(tree::snapshot_valid(n));
    n.body_version = 5;
    n.lock |= kLockBit;
    EXPECT_FALSE(tree::snapshot_valid(n));
    n.lock &= ~kLockBit;
    EXPECT_TRUE(tree::snapshot_valid(n));
    std::swap(n.leaf[0], n.leaf[1]);  // order matters
    EXPECT_FALSE(tree::snapshot_valid(n));
}

}  // namespace

namespace {

// A merge skipped because a neighbour was locked leaves an empty leaf behind;
// compact() (what VACUUM calls) merges it later and gives the node back.
TEST_F(TreeTest, CompactMergesLeavesLeftEmptyByASkippedMerge) {
    tree->init_empty();
    std::set<EntryKey> model;
    for (int64_t v = 0; v < 3000; v++) {
        model.insert(K(v, 1, 1));
        ASSERT_TRUE(tree->insert(K(v, 1, 1)));
    }
    // The leaf holding 1000 and its right sibling.
    GAddr victim = leaf_for(K(1000, 1, 1));
    Node vn, rn;
    mem->read(victim, &vn, kNodeSize);
    ASSERT_NE(vn.right, 0u);
    const GAddr rn_addr = vn.right;
    mem->read(rn_addr, &rn, kNodeSize);

    // Another client holds the sibling's lock while the victim is emptied.
    InProcTransport other(*engine);
    uint64_t v = lock_version(rn.lock);
    uint64_t locked = make_lock_word(v, other.client_id(), true);
    ASSERT_EQ(other.cas(gaddr_offset(rn_addr), make_lock_word(v, 0, false), locked), make_lock_word(v, 0, false));
    std::vector<EntryKey> doomed(vn.leaf, vn.leaf + vn.count);
    EXPECT_EQ(tree->remove(doomed.data(), doomed.size()), doomed.size());
    for (auto& k : doomed) model.erase(k);
    mem->read(victim, &vn, kNodeSize);
    EXPECT_EQ(vn.count, 0u) << "the emptied leaf must still be there (its merge was skipped)";
    EXPECT_FALSE(vn.is_deleted());

    // Released: compact() merges it away.
    ASSERT_EQ(other.cas(gaddr_offset(rn_addr), locked, make_lock_word(v, 0, false)), locked);
    auto before = tree->check();
    EXPECT_GE(tree->compact(), 1u);
    auto after = tree->check();
    EXPECT_EQ(after.leaves, before.leaves - 1);
    expect_same(model);
    EXPECT_EQ(tree->compact(), 0u) << "nothing left to merge";
}

}  // namespace
