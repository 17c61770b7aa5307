// Dead-entry hints (src/README.md "Dead-entry hints"): BTree::remove_if_unchanged
// removes entries a scan judged dead only while their leaf is still at the
// version the scan read it at -- never after an insert, a split, a delete or a
// reuse of the same (key, TID) -- through the remote lock protocol, keeping
// cached copies exact; and the registry's gate (Registry::kill_allowed) that
// refuses kills while a standby holds a slot and raises removal_lsn first.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <vector>

#include "cache/cache.h"
#include "cache/region.h"
#include "cluster/registry.h"
#include "common/stats.h"
#include "tree_test_util.h"

using namespace dex;
using namespace dex::testing;
using dex::tree::BTree;

namespace {

// One memory node, one tree; a second BTree object over the same tree plays
// another backend (another compute server when uncached).
class KillTest : public ModelTreeTest {
protected:
    void SetUp() override {
        ModelTreeTest::SetUp();
        other = std::make_unique<BTree>(*mem, 0, ns, opts);
        stats().reset();
    }
    void add(const EntryKey& k) {
        ASSERT_TRUE(t->insert(k));
        model.insert(k);
    }
    // First batch of a scan over value v, with its stamp.
    std::vector<EntryKey> first_batch(int64_t v, GAddr* leaf, uint64_t* version,
                                      std::chrono::steady_clock::time_point* seen_at = nullptr) {
        std::vector<EntryKey> b;
        auto s = t->scan(KMin(v), KMax(v));
        EXPECT_TRUE(s->next(b));
        *leaf = s->leaf();
        *version = s->leaf_version();
        if (seen_at) *seen_at = s->leaf_seen_at();
        return b;
    }

    // add() entries (7, 1, 1..count), then the first batch over 7 with its
    // full stamp (seen_at included).
    struct Stamped {
        std::vector<EntryKey> b;
        GAddr leaf = 0;
        uint64_t ver = 0;
        std::chrono::steady_clock::time_point seen{};
    };
    Stamped fill_and_scan(uint16_t count) {
        for (uint16_t i = 1; i <= count; i++) add(K(7, 1, i));
        Stamped st;
        st.b = first_batch(7, &st.leaf, &st.ver, &st.seen);
        EXPECT_NE(st.seen, std::chrono::steady_clock::time_point{});
        return st;
    }

    std::unique_ptr<BTree> other;
};

TEST_P(KillTest, RemovesAtTheScannedVersion) {
    for (uint16_t i = 1; i <= 20; i++) add(K(7, 1, i));
    GAddr leaf;
    uint64_t ver;
    auto b = first_batch(7, &leaf, &ver);
    ASSERT_EQ(b.size(), 20u);
    ASSERT_NE(leaf, 0u);
    ASSERT_NE(ver, 0u);
    std::vector<EntryKey> dead(b.begin(), b.begin() + 15);
    EXPECT_EQ(t->remove_if_unchanged(leaf, ver, dead.data(), dead.size()), 15u);
    for (auto& k : dead) model.erase(k);
    EXPECT_EQ(stats().kills.load(), 15u);
    // The same stamp again: the leaf moved on (our own publish), nothing more.
    EXPECT_EQ(t->remove_if_unchanged(leaf, ver, b.data() + 15, 1), 0u);
    EXPECT_EQ(stats().kills_skipped.load(), 1u);
    // The other handle sees the removals (remote and cached copies agree).
    EXPECT_EQ(scan_all(*other, KMin(7), KMax(7), false).size(), 5u);
}

TEST_P(KillTest, SkippedAfterAnInsertIntoTheLeaf) {
    for (uint16_t i = 1; i <= 10; i++) add(K(7, 1, i));
    GAddr leaf;
    uint64_t ver;
    auto b = first_batch(7, &leaf, &ver);
    ASSERT_TRUE(other->insert(K(7, 2, 1)));  // another backend changes the leaf
    model.insert(K(7, 2, 1));
    EXPECT_EQ(t->remove_if_unchanged(leaf, ver, b.data(), b.size()), 0u);
    EXPECT_EQ(stats().kills.load(), 0u);
    EXPECT_EQ(stats().kills_skipped.load(), b.size());
}

TEST_P(KillTest, SkippedAfterASplitMovedTheEntries) {
    for (uint16_t i = 1; i <= 40; i++) add(K(7, 1, i));
    GAddr leaf;
    uint64_t ver;
    auto b = first_batch(7, &leaf, &ver);
    ASSERT_EQ(b.size(), 40u);
    // Fill past the leaf's capacity: it splits, half of b moves right.
    for (uint16_t i = 1; i <= kLeafCapacity; i++) {
        ASSERT_TRUE(other->insert(K(7, 3, i)));
        model.insert(K(7, 3, i));
    }
    EXPECT_EQ(t->remove_if_unchanged(leaf, ver, b.data(), b.size()), 0u);
    EXPECT_EQ(stats().kills.load(), 0u);
}

// K9: a kill deferred until the standbys replayed its record comes back
// present-only and often meets its leaf split -- a deferred bottom-up
// removal always does (its insert split the leaf). With this server's copy
// of the leaf the entries right of its high fence are looked up by key and
// go too (kills_moved); without one, only those still in the leaf go.
TEST_P(KillTest, DeferredKillFollowsEntriesASplitMovedRight) {
    for (uint16_t i = 1; i <= 40; i++) add(K(7, 1, i));
    GAddr leaf;
    uint64_t ver;
    auto b = first_batch(7, &leaf, &ver);
    ASSERT_EQ(b.size(), 40u);
    for (uint16_t i = 1; i <= kLeafCapacity; i++) {  // the leaf splits: the upper part of b moves right
        ASSERT_TRUE(other->insert(K(7, 3, i)));
        model.insert(K(7, 3, i));
    }
    const uint64_t removed =
        t->remove_if_unchanged(leaf, 0, b.data(), b.size(), false, {}, cache::kNoFrame, 0, 0, true);
    uint64_t gone = 0;
    for (const EntryKey& k : b)
        if (!other->contains(k)) {
            model.erase(k);
            gone++;
        }
    EXPECT_EQ(removed, gone);
    EXPECT_EQ(stats().kills.load(), removed);
    EXPECT_EQ(stats().kills_skipped.load(), b.size() - removed);
    if (GetParam().frames != 0) {
        EXPECT_EQ(removed, b.size());
        EXPECT_GT(stats().kills_moved.load(), 0u);
        EXPECT_LT(stats().kills_moved.load(), b.size());
    } else {
        EXPECT_GT(removed, 0u);
        EXPECT_LT(removed, b.size());
        EXPECT_EQ(stats().kills_moved.load(), 0u);
    }
}

// The reason a present entry is not enough: VACUUM removed (k, tid), the TID
// was reused by a new row with the same key, and that live entry is
// byte-identical to the dead one the scan saw.
TEST_P(KillTest, ReusedTidIsNotRemoved) {
    for (uint16_t i = 1; i <= 10; i++) add(K(7, 1, i));
    GAddr leaf;
    uint64_t ver;
    auto b = first_batch(7, &leaf, &ver);
    EntryKey e = b[3];
    ASSERT_EQ(other->remove(&e, 1), 1u);  // VACUUM
    ASSERT_TRUE(other->insert(e));        // the same TID reused, same key
    EXPECT_EQ(t->remove_if_unchanged(leaf, ver, &e, 1), 0u);
    EXPECT_TRUE(t->contains(e));
}

TEST_P(KillTest, EmptiedLeafStaysUntilCompact) {
    for (int64_t v = 0; v < 200; v++) add(K(v, 1, 1));
    GAddr leaf;
    uint64_t ver;
    auto b = first_batch(100, &leaf, &ver);
    ASSERT_EQ(b.size(), 1u);
    // The whole leaf's entries, from one scan of it.
    std::vector<EntryKey> all;
    {
        Node n;
        mem->read(leaf, &n, kNodeSize);
        all.assign(n.leaf, n.leaf + n.count);
    }
    EXPECT_EQ(t->remove_if_unchanged(leaf, ver, all.data(), all.size()), all.size());
    for (auto& k : all) model.erase(k);
    EXPECT_GE(t->compact(), 1u);
}

// A stamp seen current within the last second: the lock is tried at its
// version straight away, the image read in the same batch -- two round trips
// (lock + read, publish), not three.
TEST_P(KillTest, FreshStampLocksWithoutReadingFirst) {
    Stamped st = fill_and_scan(20);
    const uint64_t rt0 = stats().round_trips.load();
    EXPECT_EQ(t->remove_if_unchanged(st.leaf, st.ver, st.b.data(), 5, false, st.seen), 5u);
    EXPECT_EQ(stats().round_trips.load() - rt0, 2u);
    for (size_t i = 0; i < 5; i++) model.erase(st.b[i]);
    // the same stamp again: the CAS fails (our own publish moved the version),
    // the read-first way finds the new version and removes nothing
    EXPECT_EQ(t->remove_if_unchanged(st.leaf, st.ver, st.b.data() + 5, 1, false, st.seen), 0u);
    EXPECT_EQ(scan_all(*other, KMin(7), KMax(7), false).size(), 15u);
    EXPECT_EQ(scan_all(*t, KMin(7), KMax(7), false).size(), 15u);
}

TEST_P(KillTest, FreshStampSkippedAfterAReuseOfTheSameEntry) {
    Stamped st = fill_and_scan(10);
    EntryKey e = st.b[3];
    ASSERT_EQ(other->remove(&e, 1), 1u);  // VACUUM
    ASSERT_TRUE(other->insert(e));        // the same TID reused, same key
    EXPECT_EQ(t->remove_if_unchanged(st.leaf, st.ver, &e, 1, false, st.seen), 0u);
    EXPECT_TRUE(t->contains(e));
    EXPECT_TRUE(other->contains(e));
}

// Older than a second: 2^24 publishes could have wrapped the lock word's
// version bits since; the leaf is read first, as without a time.
TEST_P(KillTest, OldStampReadsFirst) {
    for (uint16_t i = 1; i <= 20; i++) add(K(7, 1, i));
    GAddr leaf;
    uint64_t ver;
    auto b = first_batch(7, &leaf, &ver);
    const uint64_t rt0 = stats().round_trips.load();
    EXPECT_EQ(t->remove_if_unchanged(leaf, ver, b.data(), 3, false,
                                     std::chrono::steady_clock::now() - std::chrono::seconds(2)),
              3u);
    EXPECT_EQ(stats().round_trips.load() - rt0, 3u);
    for (size_t i = 0; i < 3; i++) model.erase(b[i]);
}

// Write-through: a kill whose leaf's cached frame is already past the
// scan's version is futile -- known from a local load, before the gate's
// round trip and the lock's. The frame is refreshed by this server's own
// publish (another backend's insert, a kill); an uncached tree cannot tell
// locally: the stamp stays "current" and the remote version check skips the
// kill.
TEST_P(KillTest, FrameBeyondTheStampMakesTheKillFutile) {
    Stamped st = fill_and_scan(10);
    EXPECT_TRUE(t->stamp_current(st.leaf, 0xFFFFFFFFu, 0, st.ver));
    ASSERT_TRUE(other->insert(K(7, 2, 1)));  // another backend of this server
    model.insert(K(7, 2, 1));
    const bool cached = GetParam().frames != 0;
    EXPECT_EQ(t->stamp_current(st.leaf, 0xFFFFFFFFu, 0, st.ver), !cached);
    Stamped st2;
    st2.b = first_batch(7, &st2.leaf, &st2.ver, &st2.seen);
    EXPECT_TRUE(t->stamp_current(st2.leaf, 0xFFFFFFFFu, 0, st2.ver));  // a fresh stamp is current
    EXPECT_EQ(t->remove_if_unchanged(st.leaf, st.ver, st.b.data(), st.b.size()), 0u);  // as the remote check says
    EXPECT_EQ(t->remove_if_unchanged(st2.leaf, st2.ver, st2.b.data(), 2), 2u);
    model.erase(st2.b[0]);
    model.erase(st2.b[1]);
    EXPECT_EQ(t->stamp_current(st2.leaf, 0xFFFFFFFFu, 0, st2.ver), !cached);  // our own kill moved it on
}

INSTANTIATE_TEST_SUITE_P(Configs, KillTest,
                         ::testing::Values(CacheConfig{"uncached", 0}, CacheConfig{"cached", 1u << 12}),
                         cache_config_name);

// A backward scan stamps its batches too.
TEST(KillScan, BackwardBatchesCarryTheirLeaf) {
    auto engine = make_engine(64ull << 20);
    auto mem = make_mem(*engine);
    BTree t(*mem, 0, ns_create(mem->node(0)));
    t.init_empty();
    for (int64_t v = 0; v < 300; v++) ASSERT_TRUE(t.insert(K(v, 1, 1)));
    auto s = t.scan(neg_inf_key(), pos_inf_key(), true);
    std::vector<EntryKey> b;
    ASSERT_TRUE(s->next(b));
    EXPECT_EQ(leaf_for(*mem, t.root(), b.front()), s->leaf());
    EXPECT_EQ(t.remove_if_unchanged(s->leaf(), s->leaf_version(), &b.back(), 1), 1u);
    EXPECT_FALSE(t.contains(b.back()));
}

// The gate: no kill while a live standby holds a slot; an expired slot lets
// kills through, and the standby that claims it again must replay past every
// removal made meanwhile; removal_lsn raised first.
TEST(KillRegistry, RefusedWhileALiveStandbyHoldsASlot) {
    auto engine = make_engine(64ull << 20);
    auto mem = make_mem(*engine);
    uint64_t ns = ns_create(mem->node(0));
    cluster::Registry r(*mem, cluster::Registry::open(*mem, 0, ns, true, 0x100));
    EXPECT_FALSE(r.kill_allowed(0, 0x200));  // no writer yet
    ASSERT_EQ(r.cas_writer(0, 42), 0u);
    EXPECT_FALSE(r.kill_allowed(43, 0x200));  // not the writer
    EXPECT_TRUE(r.kill_allowed(42, 0x300));
    EXPECT_EQ(r.read().removal_lsn, 0x300u);
    uint64_t beat = 0;
    int slot = r.claim_slot(777, 0x50, 1, &beat);
    ASSERT_GE(slot, 0);
    EXPECT_FALSE(r.kill_allowed(42, 0x400));  // a live standby
    EXPECT_EQ(r.read().removal_lsn, 0x400u);  // raised all the same (harmless)
    ASSERT_TRUE(r.expire_slot(static_cast<uint32_t>(slot), beat));
    EXPECT_TRUE(r.kill_allowed(42, 0x500));  // an expired one stopped answering
    r.set_removal_lsn(0x450);                // never lowered
    EXPECT_EQ(r.read().removal_lsn, 0x500u);
    // The standby comes back: it claims a slot, then reads removal_lsn (the
    // order of extension/dexcluster.c) and must replay past the kill's 0x500.
    uint64_t beat2 = 0;
    ASSERT_GE(r.claim_slot(777, 0x60, 1, &beat2), 0);
    EXPECT_GE(r.read().removal_lsn, 0x500u);
    EXPECT_FALSE(r.kill_allowed(42, 0x600)) << "a reclaimed slot is live again";
    // A promoted standby: its own slot (never renewed again) is not another
    // server's and does not block it.
    cluster::Registry p(*mem, cluster::Registry::open(*mem, 0, ns_create(mem->node(0)), true, 0x100));
    uint64_t own = 0;
    ASSERT_GE(p.claim_slot(99, 0x10, 1, &own), 0);
    ASSERT_EQ(p.cas_writer(0, 99), 0u);
    EXPECT_TRUE(p.kill_allowed(99, 0x200));
    EXPECT_FALSE(p.kill_allowed(42, 0x200)) << "not the writer";
}

// The gate is one round trip (the raise and the read in one batch) once this
// process knows removal_lsn's value, also when another writer raised it past
// the kill's position meanwhile; never lowers it.
TEST(KillRegistry, GateIsOneRoundTrip) {
    auto engine = make_engine(64ull << 20);
    auto mem = make_mem(*engine);
    cluster::Registry r(*mem, cluster::Registry::open(*mem, 0, ns_create(mem->node(0)), true, 0x100));
    ASSERT_EQ(r.cas_writer(0, 42), 0u);
    EXPECT_TRUE(r.kill_allowed(42, 0x1000));  // (the guess may be another registry's value)
    for (uint64_t lsn = 0x1100; lsn < 0x1600; lsn += 0x100) {
        const uint64_t rt0 = stats().round_trips.load();
        EXPECT_TRUE(r.kill_allowed(42, lsn));
        EXPECT_EQ(stats().round_trips.load() - rt0, 1u) << std::hex << lsn;
        EXPECT_EQ(r.read().removal_lsn, lsn);
    }
    r.set_removal_lsn(0x9000);  // a VACUUM raised it further
    const uint64_t rt0 = stats().round_trips.load();
    EXPECT_TRUE(r.kill_allowed(42, 0x1700));
    EXPECT_EQ(stats().round_trips.load() - rt0, 1u) << "a failed CAS that found it high enough";
    EXPECT_EQ(r.read().removal_lsn, 0x9000u);
}

// The writer's beat (K7): removal_lsn raised before the slots are read, in
// one batch, so a standby's claim either shows in the block it returns or
// comes after the raise (and then reads the raised value); never lowered.
TEST(KillRegistry, BeatRaisesRemovalBeforeItReadsTheSlots) {
    auto engine = make_engine(64ull << 20);
    auto mem = make_mem(*engine);
    cluster::Registry r(*mem, cluster::Registry::open(*mem, 0, ns_create(mem->node(0)), true, 0x100));
    ASSERT_EQ(r.cas_writer(0, 42), 0u);
    const uint64_t rt0 = stats().round_trips.load();
    cluster::RegistryHeader h = r.raise_removal_and_read(0x2000);
    EXPECT_LE(stats().round_trips.load() - rt0, 2u);
    EXPECT_EQ(h.removal_lsn, 0x2000u) << "the block read after the raise";
    EXPECT_EQ(h.writer_life, 42u);
    uint64_t beat = 0;
    const int slot = r.claim_slot(777, 0x50, 1, &beat);
    ASSERT_GE(slot, 0);
    EXPECT_GE(r.read().removal_lsn, 0x2000u) << "a claim after the beat reads the raised position";
    h = r.raise_removal_and_read(0x1000);  // an older position never lowers it
    EXPECT_EQ(h.removal_lsn, 0x2000u);
    EXPECT_EQ(h.slots[slot].owner, 777u) << "the claim shows in the next beat's read";
}

}  // namespace
