// Bottom-up deletion (src/README.md "Dead-entry hints"): BTree::insert with a
// LeafFull gives up exactly where it would split the entry's leaf -- and
// then changes nothing: not the leaf (bytes, body_version), not the tree's
// shape, not the insert journal -- reporting the leaf and the version it
// locked; read_leaf returns that leaf's entries at that version only;
// remove_if_unchanged(bottom_up) counts apart from the kills; and the insert
// after the removal goes in without a split.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <vector>

#include "cache/cache.h"
#include "cache/region.h"
#include "common/stats.h"
#include "tree/journal.h"
#include "tree/node_layout.h"
#include "tree_test_util.h"

using namespace dex;
using namespace dex::testing;
using dex::tree::BTree;

namespace {

constexpr size_t kCap = dex::kLeafCapacity;

class BottomUpTest : public ModelTreeTest {
protected:
    void SetUp() override {
        ModelTreeTest::SetUp();
        jroot = tree::journal_create(*mem, 0, {ns}, 5);
        journal = std::make_unique<tree::JournalWriter>(*mem, jroot, 2, std::vector<uint64_t>{ns});
        t->set_journal(journal.get());
        stats().reset();
    }
    // n entries of value 7 (TIDs 1..n), journaled (lsn > durable).
    void fill(size_t n) {
        for (size_t i = 1; i <= n; i++) {
            EntryKey k = K(7, 1, static_cast<uint16_t>(i));
            ASSERT_TRUE(t->insert(k, 100 + i, 10));
            model.insert(k);
        }
    }
    std::vector<uint8_t> node_bytes(GAddr a) {
        std::vector<uint8_t> b(dex::kNodeSize);
        mem->read(a, b.data(), static_cast<uint32_t>(b.size()));
        return b;
    }
    std::vector<tree::JournalRecord> records() { return tree::journal_read(*mem, jroot).records; }

    GAddr jroot = 0;
    std::unique_ptr<tree::JournalWriter> journal;
};

bool same_records(const std::vector<tree::JournalRecord>& a, const std::vector<tree::JournalRecord>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); i++)
        if (!(a[i].key == b[i].key) || a[i].lsn != b[i].lsn) return false;
    return true;
}

TEST_P(BottomUpTest, LeafFullChangesNothingAndReportsTheLockedVersion) {
    fill(kCap);  // one full root leaf
    ASSERT_EQ(t->check().leaves, 1u);
    GAddr leaf = t->root();
    auto s = t->scan(KMin(7), KMax(7));
    std::vector<EntryKey> b;
    ASSERT_TRUE(s->next(b));
    ASSERT_EQ(s->leaf(), leaf);
    const uint64_t version = s->leaf_version();
    const auto bytes = node_bytes(leaf);
    const auto recs = records();
    const uint64_t writes = stats().remote_writes.load();

    EntryKey k = K(7, 2, 1);
    BTree::LeafFull full;
    EXPECT_FALSE(t->insert(k, 500, 10, &full));  // would be journaled: lsn > durable
    EXPECT_EQ(full.leaf, leaf);
    EXPECT_EQ(full.version, version);
    EXPECT_EQ(stats().bottomup_passes.load(), 1u);
    // Nothing changed: the leaf's bytes (lock word included: released), the
    // shape, the journal (no record for k), no remote write at all.
    EXPECT_EQ(node_bytes(leaf), bytes);
    EXPECT_TRUE(same_records(records(), recs));
    EXPECT_EQ(stats().remote_writes.load(), writes);
    EXPECT_EQ(t->check().leaves, 1u);
    EXPECT_FALSE(t->contains(k));

    // The pass: the leaf's entries at that version; remove some; insert.
    std::vector<EntryKey> entries;
    ASSERT_TRUE(t->read_leaf(full.leaf, full.version, entries));
    EXPECT_EQ(entries, b);
    std::vector<EntryKey> dead(entries.begin(), entries.begin() + 5);
    EXPECT_EQ(t->remove_if_unchanged(full.leaf, full.version, dead.data(), dead.size(), true), 5u);
    for (auto& d : dead) model.erase(d);
    EXPECT_EQ(stats().bottomup_removed.load(), 5u);
    EXPECT_EQ(stats().kills.load(), 0u);
    // The leaf moved on: the old version reads nothing.
    EXPECT_FALSE(t->read_leaf(full.leaf, full.version, entries));
    EXPECT_TRUE(entries.empty());

    EXPECT_TRUE(t->insert(k, 500, 10, &full));
    EXPECT_EQ(full.leaf, 0u);
    model.insert(k);
    EXPECT_EQ(t->check().leaves, 1u) << "room was made: no split";
    bool listed = false;
    for (auto& r : records()) listed |= r.key == k && r.lsn == 500;
    EXPECT_TRUE(listed) << "the insert that went in is journaled";
}

TEST_P(BottomUpTest, OnlyWhereASplitWouldHappen) {
    fill(kCap - 1);
    BTree::LeafFull full;
    // Room for one: inserted, no status.
    EntryKey k = K(8, 1, 1);
    EXPECT_TRUE(t->insert(k, 600, 10, &full));
    model.insert(k);
    EXPECT_EQ(full.leaf, 0u);
    // Full now; an entry that is already there is no split either.
    EXPECT_FALSE(t->insert(K(7, 1, 3), 601, 10, &full));
    EXPECT_EQ(full.leaf, 0u);
    // Not journaled (lsn <= durable), still gives up, still writes nothing.
    const uint64_t writes = stats().remote_writes.load();
    EXPECT_FALSE(t->insert(K(9, 1, 1), 5, 10, &full));
    EXPECT_NE(full.leaf, 0u);
    EXPECT_EQ(stats().remote_writes.load(), writes);
    EXPECT_EQ(stats().bottomup_passes.load(), 1u);
    // Without `full` the same insert splits, as always.
    EXPECT_TRUE(t->insert(K(9, 1, 1), 5, 10));
    model.insert(K(9, 1, 1));
    EXPECT_EQ(t->check().leaves, 2u);
    EXPECT_EQ(stats().bottomup_passes.load(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Cache, BottomUpTest,
                         ::testing::Values(CacheConfig{"uncached", 0}, CacheConfig{"cached", 256}),
                         cache_config_name);

}  // namespace
