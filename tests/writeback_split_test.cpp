// Splits of dirty leaves whose entries remote memory may not take yet
// (src/README.md "Write-back mode", W13; tree/writeback_split.cpp): with the
// durable position below the entries' LSN, inserts that split full dirty
// leaves do not wait (no NeedDurable), remote memory stays a valid tree that
// holds exactly the entries written back before (no stray), the cache holds
// all of them, and once the LSN is covered a flush makes remote memory equal
// the model. A lost answer to the split's publish is settled by what remote
// memory shows.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "cache/cache.h"
#include "cache/region.h"
#include "common/stats.h"
#include "tree/journal.h"
#include "tree_test_util.h"
#include "writeback_test_util.h"

using namespace dex;
using namespace dex::testing;

namespace {

std::atomic<uint64_t> g_durable{UINT64_MAX};
uint64_t durable() { return g_durable.load(); }

// Sets the durable position for one test, and takes the source away after.
struct DurableAt {
    explicit DurableAt(uint64_t lsn) {
        g_durable = lsn;
        tree::set_durable_lsn_source(durable);
    }
    ~DurableAt() { tree::set_durable_lsn_source(nullptr); }
};

std::vector<EntryKey> all_of(const std::set<EntryKey>& m) { return {m.begin(), m.end()}; }

TEST(WriteBackDirtySplit, UncoveredLeavesSplitWithoutWritingTheirEntries) {
    WbFixture x;
    std::unique_ptr<tree::BTree> tp = x.write_back_tree();
    tree::BTree& t = *tp;
    std::set<EntryKey> written, model;
    std::mt19937_64 rng(11);
    // Covered entries (no LSN): split and written as before.
    for (int i = 0; i < 3000; i++) {
        EntryKey k = K(static_cast<int64_t>(rng() % 200000), static_cast<uint32_t>(i), 1);
        ASSERT_EQ(t.insert(k), model.insert(k).second);
    }
    expect_flushed_remote_holds(x, model);
    written = model;

    // Entries whose heap WAL is not durable (LSN 500, durable 100): every
    // split of their leaves must keep them out of remote memory.
    DurableAt at(100);
    const uint64_t splits0 = stats().dirty_splits.load();
    tree::BTree remote_only(*x.mem, 0, x.ns);
    for (int i = 0; i < 6000; i++) {
        EntryKey k = K(static_cast<int64_t>(rng() % 200000), static_cast<uint32_t>(10000 + i), 2);
        bool r = false;
        ASSERT_NO_THROW(r = t.insert(k, 500)) << "insert " << i << " waited for WAL";
        ASSERT_EQ(r, model.insert(k).second);
        // The split of a clean (or covered) full leaf writes through, the new
        // entry journaled: remote memory has it from then on.
        if (remote_only.contains(k)) written.insert(k);
    }
    EXPECT_LT(written.size(), 3000u + 100u) << "most dirty splits wrote through";
    // and a few deletes in place
    int deleted = 0;
    for (auto it = model.begin(); it != model.end() && deleted < 300;) {
        if ((it->block % 13) == 0) {
            ASSERT_EQ(t.remove(&*it, 1), 1u);
            it = model.erase(it);
            deleted++;
        } else {
            ++it;
        }
    }
    EXPECT_GT(stats().dirty_splits.load() - splits0, 50u) << "6000 inserts into 3000 entries split few dirty leaves";
    EXPECT_EQ(scan_all(t, KMin(-(1 << 21)), KMax(1 << 30), false), all_of(model)) << "the cache lacks entries";
    EXPECT_EQ(scan_all(t, KMin(-(1 << 21)), KMax(1 << 30), true).size(), model.size());

    // Remote memory alone: a valid tree holding exactly what was written
    // back before, split into more leaves (the structure went through).
    tree::TreeInfo c = remote_only.check();
    EXPECT_EQ(c.entries, written.size());
    EXPECT_EQ(scan_all(remote_only, KMin(-(1 << 21)), KMax(1 << 30), false), all_of(written));

    // Covered now: a flush makes remote memory equal the model.
    g_durable = 500;
    expect_flushed_remote_holds(x, model);
    expect_cache_coherent(*x.reg.region, *x.mem);
}

// The publish runs but its answer is lost: remote memory shows the split, so
// the frame takes its half and the sibling its frame, both still dirty; the
// insert reports the error, and nothing is lost or written early.
TEST(WriteBackDirtySplit, LostPublishAnswerIsSettledByRemoteMemory) {
    WbFixture x;
    std::unique_ptr<tree::BTree> tp = x.write_back_tree();
    tree::BTree& t = *tp;
    std::set<EntryKey> model;
    for (int i = 0; i < 200; i++) {
        ASSERT_TRUE(t.insert(K(2 * i, 1, 1)));
        model.insert(K(2 * i, 1, 1));
    }
    expect_flushed_remote_holds(x, model);
    const std::set<EntryKey> written = model;
    DurableAt at(100);
    const uint64_t splits0 = stats().dirty_splits.load();
    bool lost = false;
    for (int i = 0; i < 400 && !lost; i++) {
        EntryKey k = K(2 * i + 1, 2, 2);
        if (stats().dirty_splits.load() > splits0) x.t->lose_publish = true;  // after one dirty split went fine
        try {
            ASSERT_TRUE(t.insert(k, 500));
        } catch (const Error& e) {
            ASSERT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
            lost = true;
        }
        model.insert(k);  // (in the frame either way: the split ran)
    }
    ASSERT_TRUE(lost) << "no split's publish was lost";
    EXPECT_EQ(scan_all(t, KMin(-1), KMax(1 << 20), false), all_of(model));
    tree::BTree remote_only(*x.mem, 0, x.ns);
    EXPECT_EQ(remote_only.check().entries, written.size());
    g_durable = 500;
    expect_flushed_remote_holds(x, model);
}

// Byte-string trees split their dirty leaves the same way.
TEST(WriteBackDirtySplit, ByteStringTree) {
    WbFixture x;
    tree::TreeOptions o;
    o.cache = &x.handle;
    tree::SlottedTree t(*x.mem, 0, x.ns, o);
    t.init_empty();
    t.set_write_back(true, [] { return true; });
    std::set<std::string> written, model;
    auto key = [](int i) { return "customer-" + std::to_string(i * 7919 % 100003) + std::string(i % 17, 'x'); };
    for (int i = 0; i < 1500; i++) ASSERT_EQ(t.insert(key(i)), model.insert(key(i)).second);
    x.handle.flush_frames(x.dirty_frames());
    written = model;
    DurableAt at(100);
    const uint64_t splits0 = stats().dirty_splits.load();
    tree::SlottedTree remote_only(*x.mem, 0, x.ns);
    for (int i = 1500; i < 5000; i++) {
        bool r = false;
        ASSERT_NO_THROW(r = t.insert(key(i), 500)) << "insert " << i << " waited for WAL";
        ASSERT_EQ(r, model.insert(key(i)).second);
        // The split of a clean (or covered) full leaf writes through, the new
        // entry journaled: remote memory has it from then on.
        if (remote_only.contains(key(i))) written.insert(key(i));
    }
    EXPECT_GT(stats().dirty_splits.load(), splits0);
    for (const std::string& k : model) ASSERT_TRUE(t.contains(k)) << k;
    EXPECT_EQ(remote_only.check().entries, written.size());
    for (const std::string& k : model)
        if (!written.count(k)) EXPECT_FALSE(remote_only.contains(k)) << k << " reached remote memory";
    g_durable = 500;
    x.handle.flush_frames(x.dirty_frames());
    EXPECT_TRUE(x.dirty_frames().empty());
    EXPECT_EQ(remote_only.check().entries, model.size());
    for (const std::string& k : model) ASSERT_TRUE(remote_only.contains(k)) << k;
}

}  // namespace
