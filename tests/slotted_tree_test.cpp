// The B-link tree over the slotted layout (tree/layout.h, src/README.md
// "Tree over a layout"): byte-string entries of 1..152 bytes, compared as
// memcmp with a proper prefix first -- exactly std::string's order, so a
// std::set<std::string> is the model. Every scenario runs once per cache
// configuration, as the fixed tree's TreeModelTest does; the rest (placement
// over three memory nodes, concurrent writers, layout mismatch, key limits)
// once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "cache/cache.h"
#include "cache/region.h"
#include "common/stats.h"
#include "tree/journal.h"
#include "tree/slotted_node.h"
#include "tree/write_back_nodes.h"
#include "tree_test_util.h"

using namespace dex;
using namespace dex::testing;
using dex::tree::SlottedTree;
using Key = std::string;

namespace {

constexpr size_t kMaxEntry = tree::slotted::kMaxEntryBytes;

// An e-mail-like key (shared prefixes and suffixes: suffix truncation has
// work to do) followed by a 6-byte big-endian "heap TID", as the glue builds them.
Key email_key(uint32_t user, uint32_t tid) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "user%07u@example.com", user);
    Key k(buf);
    for (int i = 5; i >= 0; i--) k.push_back(static_cast<char>(i >= 4 ? 0 : (tid >> (8 * i)) & 0xff));
    return k;
}

// Random bytes (0x00 and 0xFF included) of 1..max_len bytes.
Key random_key(std::mt19937_64& rng, size_t max_len) {
    size_t len = 1 + rng() % max_len;
    Key k(len, '\0');
    for (auto& c : k) c = static_cast<char>(rng() & 0xff);
    return k;
}

std::vector<Key> scan_all(SlottedTree& t, const Key& lo, const Key& hi, bool backward) {
    std::vector<Key> all, batch;
    auto s = t.scan(lo, hi, backward);
    while (s->next(batch)) all.insert(all.end(), batch.begin(), batch.end());
    return all;
}

std::vector<Key> model_range(const std::set<Key>& m, const Key& lo, const Key& hi, bool backward) {
    std::vector<Key> r;
    if (hi < lo) return r;
    for (auto it = m.lower_bound(lo); it != m.end() && *it <= hi; ++it) r.push_back(*it);
    if (backward) std::reverse(r.begin(), r.end());
    return r;
}

const Key kNegInf = tree::SlottedLayout::neg_inf();
const Key kPosInf = tree::SlottedLayout::pos_inf();

struct SlottedConfig {
    const char* name;
    uint32_t frames;  // 0: no cache
    bool cache_leaves;
    double leaf_admission;
};
void PrintTo(const SlottedConfig& c, std::ostream* os) { *os << c.name; }

class SlottedTreeTest : public ::testing::TestWithParam<SlottedConfig> {
protected:
    void SetUp() override {
        const SlottedConfig& c = GetParam();
        engine = make_engine(256ull << 20);
        mem = make_mem(*engine);
        ns = ns_create(mem->node(0));
        tree::TreeOptions o;
        if (c.frames) {
            reg = std::make_unique<Region>(c.frames, cache::AdmissionPolicy{c.cache_leaves, c.leaf_admission});
            handle = std::make_unique<cache::Cache>(*reg->region, 4242);
            o.cache = handle.get();
        }
        t = std::make_unique<SlottedTree>(*mem, 0, ns, o);
        stats().reset();
    }
    void TearDown() override {
        if (reg && t) expect_cache_coherent(*reg->region, *mem);
        if (GetParam().frames) {
            EXPECT_GT(stats().cache_hits.load(), 0u) << "the scenario never used the cache";
        }
    }
    // Scans both ways and check() agree with the model.
    void expect_same() {
        auto all = scan_all(*t, kNegInf, kPosInf, false);
        ASSERT_EQ(all.size(), model.size());
        EXPECT_TRUE(std::equal(all.begin(), all.end(), model.begin()));
        auto back = scan_all(*t, kNegInf, kPosInf, true);
        ASSERT_EQ(back.size(), model.size());
        EXPECT_TRUE(std::equal(back.begin(), back.end(), model.rbegin()));
        EXPECT_EQ(t->check().entries, model.size());
    }
    void remove_sorted(std::vector<Key> keys, uint64_t expect_removed) {
        std::sort(keys.begin(), keys.end());
        keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
        EXPECT_EQ(t->remove(keys.data(), keys.size()), expect_removed);
    }

    std::unique_ptr<memnode::Engine> engine;
    std::unique_ptr<RemoteMemory> mem;
    uint64_t ns = 0;
    std::unique_ptr<Region> reg;
    std::unique_ptr<cache::Cache> handle;
    std::unique_ptr<SlottedTree> t;
    std::set<Key> model;
};

TEST_P(SlottedTreeTest, RandomInsertsDeletesAndLookups) {
    t->init_empty();
    std::mt19937_64 rng(7);
    std::vector<Key> pool;
    for (int i = 0; i < 6000; i++) {
        uint64_t op = rng() % 10;
        if (op < 6 || model.empty()) {
            // Mostly fresh keys, sometimes one that is already there.
            Key k = !pool.empty() && rng() % 8 == 0 ? pool[rng() % pool.size()]
                    : rng() % 2                    ? email_key(static_cast<uint32_t>(rng() % 5000), i)
                                                   : random_key(rng, kMaxEntry);
            bool fresh = model.insert(k).second;
            ASSERT_EQ(t->insert(k), fresh) << "insert " << tree::SlottedLayout::str(k);
            pool.push_back(k);
        } else if (op < 8) {
            std::vector<Key> batch;
            uint64_t present = 0;
            for (int j = 0; j < 1 + static_cast<int>(rng() % 6); j++) {
                Key k = pool[rng() % pool.size()];
                if (std::find(batch.begin(), batch.end(), k) != batch.end()) continue;
                batch.push_back(k);
                present += model.erase(k);
            }
            remove_sorted(batch, present);
        } else {
            Key k = pool[rng() % pool.size()];
            ASSERT_EQ(t->contains(k), model.count(k) == 1);
            // A proper prefix of an entry is another key: absent unless inserted.
            Key p = k.substr(0, k.size() / 2);
            if (!p.empty()) {
                ASSERT_EQ(t->contains(p), model.count(p) == 1);
            }
        }
        if (i % 1500 == 1499) expect_same();
    }
    expect_same();
    EXPECT_GE(t->check().height, 3u) << "too few entries to exercise inner splits";
}

TEST_P(SlottedTreeTest, RangeScansWithBoundsBetweenEntries) {
    t->init_empty();
    std::mt19937_64 rng(11);
    for (uint32_t u = 0; u < 3000; u++) {
        Key k = email_key(u * 7 % 3000, u);
        model.insert(k);
        ASSERT_TRUE(t->insert(k));
    }
    for (int i = 0; i < 300; i++) {
        // Bounds: entries, their prefixes (between entries), random bytes, infinities.
        auto bound = [&]() -> Key {
            switch (rng() % 5) {
                case 0:
                    return kNegInf;
                case 1:
                    return kPosInf;
                case 2:
                    return random_key(rng, 20);
                default: {
                    auto it = model.begin();
                    std::advance(it, rng() % model.size());
                    return it->substr(0, 1 + rng() % it->size());
                }
            }
        };
        Key lo = bound(), hi = bound();
        bool backward = rng() % 2;
        ASSERT_EQ(scan_all(*t, lo, hi, backward), model_range(model, lo, hi, backward))
            << "lo " << tree::SlottedLayout::str(lo) << " hi " << tree::SlottedLayout::str(hi);
    }
    expect_same();
}

TEST_P(SlottedTreeTest, BulkLoadThenInsertsAndDeletes) {
    std::vector<Key> sorted;
    for (uint32_t u = 0; u < 8000; u++) sorted.push_back(email_key(u, u % 97));
    std::sort(sorted.begin(), sorted.end());
    {
        SlottedTree::BulkLoader bl(*t, 0.9);
        for (const Key& k : sorted) bl.add(k);
        bl.finish();
    }
    model.insert(sorted.begin(), sorted.end());
    expect_same();
    tree::TreeInfo info = t->check();
    // Suffix truncation: inner nodes hold short separators, so fan-out stays
    // high for 27-byte entries (8000 entries in ~250 leaves: height 3).
    EXPECT_LE(info.height, 3u);
    std::mt19937_64 rng(3);
    std::vector<Key> del;
    for (int i = 0; i < 2000; i++) {
        Key k = email_key(static_cast<uint32_t>(rng() % 9000), 1000 + i);
        ASSERT_EQ(t->insert(k), model.insert(k).second);
        if (i % 3 == 0) del.push_back(sorted[rng() % sorted.size()]);
    }
    uint64_t present = 0;
    std::sort(del.begin(), del.end());
    del.erase(std::unique(del.begin(), del.end()), del.end());
    for (const Key& k : del) present += model.erase(k);
    EXPECT_EQ(t->remove(del.data(), del.size()), present);
    expect_same();
    // Ascending keys out of order for bulk loading are refused, naming them.
    SlottedTree::BulkLoader bad(*t, 0.9);
    bad.add("b");
    EXPECT_THROW(bad.add("a"), Error);
}

TEST_P(SlottedTreeTest, DeleteToEmptyMergesAndRefills) {
    t->init_empty();
    std::vector<Key> keys;
    for (uint32_t u = 0; u < 2500; u++) keys.push_back(email_key(u, u));
    for (const Key& k : keys) ASSERT_TRUE(t->insert(k));
    tree::TreeInfo full = t->check();
    uint64_t bytes_full = ns_bytes(mem->node(0), ns);
    std::sort(keys.begin(), keys.end());
    for (size_t i = 0; i < keys.size(); i += 100) {
        size_t e = std::min(keys.size(), i + 100);
        EXPECT_EQ(t->remove(keys.data() + i, e - i), e - i);
    }
    t->compact();
    expect_same();  // empty
    // Empty leaves were merged away: at most one leaf per level-1 node remains.
    tree::TreeInfo empty = t->check();
    EXPECT_LT(empty.leaves, full.leaves / 5) << "leaves full " << full.leaves << " empty " << empty.leaves;
    EXPECT_LE(empty.leaves, full.inner_nodes);
    for (const Key& k : keys) ASSERT_TRUE(t->insert(k));
    model.insert(keys.begin(), keys.end());
    expect_same();
    EXPECT_LE(ns_bytes(mem->node(0), ns), bytes_full + 64 * kNodeSize) << "freed leaves were not reused";
}

// Entries of the longest length with long common prefixes: the longest
// separators, the fewest entries per node (a leaf holds 6), so splits of
// every kind happen within a few hundred inserts.
TEST_P(SlottedTreeTest, LongestEntriesSplitEveryLevel) {
    t->init_empty();
    std::mt19937_64 rng(5);
    const Key prefix(kMaxEntry - 12, 'p');
    for (int i = 0; i < 1500; i++) {
        Key k = prefix;
        for (int j = 0; j < 12; j++) k.push_back(static_cast<char>(rng() % 3 == 0 ? 0xff : rng() & 0xff));
        ASSERT_EQ(k.size(), kMaxEntry);
        ASSERT_EQ(t->insert(k), model.insert(k).second);
    }
    expect_same();
    EXPECT_GE(t->check().height, 4u);
}

INSTANTIATE_TEST_SUITE_P(Configs, SlottedTreeTest,
                         ::testing::Values(SlottedConfig{"uncached", 0, false, 0.0},
                                           SlottedConfig{"large", 1u << 16, true, 1.0},
                                           SlottedConfig{"tiny16", 16, true, 1.0},
                                           SlottedConfig{"dex", 512, true, 0.1},
                                           SlottedConfig{"inner_only", 512, false, 0.1}),
                         [](const ::testing::TestParamInfo<SlottedConfig>& i) { return std::string(i.param.name); });

// ---- once ------------------------------------------------------------------------

TEST(SlottedTree, KeysThatCannotBeStoredAreRefused) {
    auto engine = make_engine(16ull << 20);
    auto mem = make_mem(*engine);
    SlottedTree t(*mem, 0, ns_create(mem->node(0)));
    t.init_empty();
    EXPECT_THROW(t.insert(Key()), Error);                 // empty: that is -inf
    EXPECT_THROW(t.insert(Key(kMaxEntry + 1, 'x')), Error);  // one byte over the limit
    EXPECT_TRUE(t.insert(Key(kMaxEntry, 'x')));
    EXPECT_EQ(t.check().entries, 1u);
}

// A tree knows its layout from its metapage, never from a node's flag: a
// slotted tree opened over a fixed tree's nodes (or the other way round)
// finds nothing it accepts.
TEST(SlottedTree, NodesOfTheOtherLayoutAreNotAccepted) {
    auto engine = make_engine(16ull << 20);
    auto mem = make_mem(*engine);
    uint64_t ns = ns_create(mem->node(0));
    tree::BTree fixed(*mem, 0, ns);
    fixed.init_empty();
    for (int64_t i = 0; i < 200; i++) fixed.insert(K(i, 1, 1));
    SlottedTree slotted(*mem, 0, ns);
    try {
        slotted.check();
        ADD_FAILURE() << "check() accepted fixed nodes";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kCorrupt);
        EXPECT_NE(std::string(e.what()).find("layout"), std::string::npos) << e.what();
    }
    uint64_t ns2 = ns_create(mem->node(0));
    SlottedTree s2(*mem, 0, ns2);
    s2.init_empty();
    s2.insert("abc");
    tree::BTree f2(*mem, 0, ns2);
    EXPECT_THROW(f2.check(), Error);
}

TEST(SlottedTree, PlacementOverThreeMemoryNodes) {
    std::vector<std::unique_ptr<memnode::Engine>> engines;
    std::vector<std::unique_ptr<Transport>> v;
    for (int i = 0; i < 3; i++) {
        engines.push_back(make_engine(64ull << 20));
        v.push_back(std::make_unique<InProcTransport>(*engines.back()));
    }
    RemoteMemory mem(std::move(v));
    std::vector<uint64_t> ns;
    for (uint32_t i = 0; i < 3; i++) ns.push_back(ns_create(mem.node(i)));
    SlottedTree t(mem, 0, ns[0]);
    t.set_placement(ns, 1);
    std::vector<Key> keys;
    for (uint32_t u = 0; u < 6000; u++) keys.push_back(email_key(u, 1));
    {
        SlottedTree::BulkLoader bl(t, 0.9);
        for (const Key& k : keys) bl.add(k);
        bl.finish();
    }
    std::set<Key> model(keys.begin(), keys.end());
    for (uint32_t u = 0; u < 3000; u++) {
        Key k = email_key(u * 13 % 7000, 2);
        ASSERT_EQ(t.insert(k), model.insert(k).second);
    }
    tree::TreeInfo info = t.check();  // placement: every subtree at level 1 on one memory node
    EXPECT_EQ(info.entries, model.size());
    for (uint32_t i = 0; i < 3; i++) EXPECT_GT(info.nodes_on[i], 0u) << "memory node " << i << " holds nothing";
    EXPECT_EQ(scan_all(t, kNegInf, kPosInf, false), std::vector<Key>(model.begin(), model.end()));
}

// Write-back mode (one compute server writes the index): in-place changes
// of slotted leaves stay in dirty frames, written back on eviction (a small
// cache) and by a final flush; scans read the frames meanwhile. Afterwards
// remote memory alone (check(), an uncached tree) holds exactly the model.
TEST(SlottedTree, WriteBackModeKeepsChangesInFramesUntilWrittenBack) {
    auto engine = make_engine(64ull << 20);
    auto mem = make_mem(*engine);
    uint64_t ns = ns_create(mem->node(0));
    Region reg(96);  // small: evictions write dirty leaves back
    cache::Cache handle(*reg.region, 9);
    uint64_t written_back = 0;
    handle.set_write_back([&](uint32_t f, const Node& img) {
        GAddr g = reg.region->header(f).gaddr.load();
        tree::TreeOptions io_opts;
        tree::NodeIO io(*mem, gaddr_node(g), io_opts);
        tree::write_back_node(io, g, img, tree::Deadline(10000));
        written_back++;
        return true;
    });
    tree::TreeOptions o;
    o.cache = &handle;
    o.write_back = true;
    o.register_dirty = [] { return true; };
    SlottedTree t(*mem, 0, ns, o);
    t.init_empty();
    std::set<Key> model;
    std::mt19937_64 rng(21);
    for (int i = 0; i < 5000; i++) {
        Key k = email_key(static_cast<uint32_t>(rng() % 4000), static_cast<uint32_t>(i % 7));
        if (rng() % 4 == 0 && !model.empty()) {
            auto it = model.lower_bound(k.substr(0, 8));
            Key d = it == model.end() ? *model.begin() : *it;
            if (model.count(d)) {
                ASSERT_EQ(t.remove(&d, 1), 1u);
                model.erase(d);
            }
        } else {
            ASSERT_EQ(t.insert(k), model.insert(k).second);
        }
    }
    EXPECT_GT(stats().dirty_updates.load(), 0u) << "no change stayed in a frame";
    EXPECT_EQ(scan_all(t, kNegInf, kPosInf, false), std::vector<Key>(model.begin(), model.end()));
    for (uint32_t f = 0; f < reg.region->frame_count(); f++) handle.flush_frame(f);
    EXPECT_GT(written_back, 0u);
    SlottedTree remote_only(*mem, 0, ns);
    EXPECT_EQ(remote_only.check().entries, model.size());
    EXPECT_EQ(scan_all(remote_only, kNegInf, kPosInf, false), std::vector<Key>(model.begin(), model.end()));
}

// Crash consistency (src/README.md "Crash survival"): a slotted tree's
// insert whose heap WAL is not durable records its entry bytes in a
// byte-form journal, in the same batch as the leaf change (also when the
// insert splits); a durable one records nothing; a fixed-form journal
// refuses the entry and the tree is left unchanged.
TEST(SlottedTree, InsertsJournalTheirEntryBytes) {
    auto engine = make_engine(32ull << 20);
    auto mem = make_mem(*engine);
    uint64_t ns = ns_create(mem->node(0));
    SlottedTree t(*mem, 0, ns);
    t.init_empty();
    GAddr root = tree::journal_create(*mem, 0, {ns}, 1, tree::JournalForm::kBytes);
    tree::JournalWriter w(*mem, root, 2, {ns});
    t.set_journal(&w);
    std::set<Key> journaled;
    for (uint32_t u = 0; u < 400; u++) {  // enough for leaf splits
        Key k = email_key(u, u);
        // WAL durable up to a few inserts back (a lane slot is free again
        // once its record's WAL is durable), or up to this row's.
        bool durable = u % 3 == 0;
        ASSERT_TRUE(t.insert(k, 1000 + u, durable ? 1000 + u : 1000 + u - 4));
        if (!durable) journaled.insert(k);
    }
    tree::JournalContents c = tree::journal_read(*mem, root);
    EXPECT_EQ(c.form, tree::JournalForm::kBytes);
    std::set<Key> seen;
    for (const auto& r : c.byte_records) seen.insert(r.entry);
    // The lane holds the newest records: every one listed is an entry that needed it.
    EXPECT_FALSE(seen.empty());
    for (const Key& k : seen) EXPECT_TRUE(journaled.count(k)) << tree::SlottedLayout::str(k);
    EXPECT_TRUE(seen.count(email_key(398, 398))) << "the newest journaled insert is not listed";
    EXPECT_EQ(t.check().entries, 400u);

    uint64_t ns2 = ns_create(mem->node(0));
    SlottedTree t2(*mem, 0, ns2);
    t2.init_empty();
    GAddr fixed_root = tree::journal_create(*mem, 0, {ns2}, 1);
    tree::JournalWriter fw(*mem, fixed_root, 2, {ns2});
    t2.set_journal(&fw);
    EXPECT_THROW(t2.insert(email_key(1, 1), 1000, 10), Error);
    EXPECT_EQ(t2.check().entries, 0u);
    EXPECT_TRUE(t2.insert(email_key(1, 1), 1000, 2000));  // durable: no record needed
}

// Two backends of one compute server (one cache region, a tree handle
// each) insert and delete concurrently; afterwards the tree, the cache and
// the model agree.
TEST(SlottedTree, ConcurrentWritersThroughOneCache) {
    auto engine = make_engine(128ull << 20);
    auto mem = make_mem(*engine);
    uint64_t ns = ns_create(mem->node(0));
    Region reg(4096);
    {
        SlottedTree t(*mem, 0, ns);
        t.init_empty();
    }
    const int kThreads = 2, kPer = 3000;
    std::vector<std::thread> th;
    std::vector<std::set<Key>> kept(kThreads);
    for (int w = 0; w < kThreads; w++) {
        th.emplace_back([&, w] {
            std::vector<std::unique_ptr<Transport>> v;
            v.push_back(std::make_unique<InProcTransport>(*engine));
            RemoteMemory m(std::move(v));
            cache::Cache handle(*reg.region, 100 + w);
            tree::TreeOptions o;
            o.cache = &handle;
            SlottedTree t(m, 0, ns, o);
            std::mt19937_64 rng(w);
            for (int i = 0; i < kPer; i++) {
                // Interleaved key ranges: both writers hit the same leaves.
                Key k = email_key(static_cast<uint32_t>(rng() % 4000), static_cast<uint32_t>(w * kPer + i));
                if (t.insert(k)) kept[w].insert(k);
                if (i % 5 == 4 && !kept[w].empty()) {
                    Key d = *kept[w].begin();
                    if (t.remove(&d, 1) == 1) kept[w].erase(d);
                }
            }
        });
    }
    for (auto& x : th) x.join();
    std::set<Key> model;
    for (auto& s : kept) model.insert(s.begin(), s.end());
    SlottedTree t(*mem, 0, ns);
    EXPECT_EQ(t.check().entries, model.size());
    EXPECT_EQ(scan_all(t, kNegInf, kPosInf, false), std::vector<Key>(model.begin(), model.end()));
    expect_cache_coherent(*reg.region, *mem);
}

// Write-back redo (src/README.md "Write-back mode", redo after a crash):
// every entry change of a write-back tree reaches TreeOptions::log_entries,
// in place or written through, and a frame becoming dirty takes the log
// position. A "crash" then drops the cache with its dirty frames; replaying
// the whole log in order over what eviction wrote back -- on a tree without
// a cache, written through -- gives exactly the model. Without the logged
// deletes or splits it would not.
TEST(SlottedTree, WriteBackLogReplaysOverWhatWasWrittenBack) {
    auto engine = make_engine(64ull << 20);
    auto mem = make_mem(*engine);
    uint64_t ns = ns_create(mem->node(0));
    Region reg(96);  // small: evictions write some dirty leaves back
    cache::Cache handle(*reg.region, 9);
    handle.set_write_back([&](uint32_t f, const Node& img) {
        GAddr g = reg.region->header(f).gaddr.load();
        tree::TreeOptions io_opts;
        tree::NodeIO io(*mem, gaddr_node(g), io_opts);
        tree::write_back_node(io, g, img, tree::Deadline(10000));
        return true;
    });
    static uint64_t position = 100;
    struct Op {
        bool insert;
        Key k;
        uint64_t at;
    };
    std::vector<Op> log;
    tree::TreeOptions o;
    o.cache = &handle;
    o.log_position = [] { return position; };
    SlottedTree t(*mem, 0, ns, o);
    t.init_empty();
    t.set_write_back(true, [] { return true; },
                     [&](bool ins, bool, const uint8_t* const* e, const uint32_t* lens, size_t n) {
                         for (size_t i = 0; i < n; i++)
                             log.push_back({ins, Key(reinterpret_cast<const char*>(e[i]), lens[i]), ++position});
                     });
    std::set<Key> model;
    std::mt19937_64 rng(33);
    for (int i = 0; i < 6000; i++) {
        Key k = email_key(static_cast<uint32_t>(rng() % 3000), static_cast<uint32_t>(i % 5));
        if (rng() % 3 == 0 && !model.empty()) {
            auto it = model.lower_bound(k.substr(0, 8));
            Key d = it == model.end() ? *model.begin() : *it;
            ASSERT_EQ(t.remove(&d, 1), 1u);
            model.erase(d);
        } else {
            ASSERT_EQ(t.insert(k), model.insert(k).second);
        }
    }
    size_t inserts = 0, deletes = 0, dirty = 0;
    for (const Op& op : log) (op.insert ? inserts : deletes)++;
    EXPECT_EQ(inserts + deletes, 6000u) << "one logged change per insert and per delete";
    for (uint32_t f = 0; f < reg.region->frame_count(); f++) {
        const cache::FrameHeader& h = reg.region->header(f);
        if (!h.dirty.load() || h.gaddr.load() == kNullGAddr) continue;
        dirty++;
        EXPECT_GE(h.dirty_since.load(), 100u) << "a dirty frame took no log position";
        EXPECT_LE(h.dirty_since.load(), position);
    }
    ASSERT_GT(dirty, 0u) << "nothing was left dirty: no crash to survive";
    // the crash: the frames are gone; remote memory lacks their changes
    SlottedTree after(*mem, 0, ns);
    EXPECT_NE(after.check().entries, model.size()) << "remote memory was complete without a replay";
    for (const Op& op : log) {
        if (op.insert)
            after.insert(op.k);
        else
            after.remove(&op.k, 1);
    }
    EXPECT_EQ(after.check().entries, model.size());
    EXPECT_EQ(scan_all(after, kNegInf, kPosInf, false), std::vector<Key>(model.begin(), model.end()));
}

}  // namespace
