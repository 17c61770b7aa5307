// Dead-entry hints on write-back trees (src/README.md "Dead-entry hints", K5;
// BTree::wb_kill): an in-place change does not advance a leaf's body_version,
// so the kill's identity of the image a scan judged is the cache frame it
// was copied from at that frame's version word. The entries then go out of
// the frame in place (no round trip), logged like any delete; any change of
// the frame since -- an in-place insert, a delete and re-insert of the same
// (key, TID), a write-back and eviction -- makes the kill a no-op.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <vector>

#include "cache/cache.h"
#include "cache/region.h"
#include "common/stats.h"
#include "tree_test_util.h"
#include "writeback_test_util.h"

using namespace dex;
using namespace dex::testing;

namespace {

struct Stamp {
    std::vector<EntryKey> batch;
    GAddr leaf = 0;
    uint64_t version = 0;
    uint32_t frame = cache::kNoFrame;
    uint64_t frame_version = 0;
};

class WbKillTest : public ::testing::Test {
protected:
    void SetUp() override {
        t = x.write_back_tree();
        t->set_write_back(true, [] { return true; },
                          [this](bool insert, bool through, const uint8_t* const* e, const uint32_t* lens,
                                 size_t n) {
                              logged_through.push_back(through);
                              for (size_t i = 0; i < n; i++) {
                                  ASSERT_EQ(lens[i], sizeof(EntryKey));
                                  EntryKey k;
                                  std::memcpy(&k, e[i], sizeof k);
                                  (insert ? logged_inserts : logged_deletes).push_back(k);
                              }
                          });
        for (uint16_t i = 1; i <= 20; i++) ASSERT_TRUE(t->insert(K(7, 1, i)));
        stats().reset();
        logged_deletes.clear();
    }
    Stamp first_batch() {
        Stamp s;
        auto sc = t->scan(KMin(7), KMax(7));
        EXPECT_TRUE(sc->next(s.batch));
        s.leaf = sc->leaf();
        s.version = sc->leaf_version();
        s.frame = sc->leaf_frame();
        s.frame_version = sc->leaf_frame_version();
        return s;
    }
    uint64_t kill(const Stamp& s, const EntryKey* k, size_t n) {
        return t->remove_if_unchanged(s.leaf, s.version, k, n, false, {}, s.frame, s.frame_version);
    }
    size_t count7() { return scan_all(*t, KMin(7), KMax(7), false).size(); }

    WbFixture x;
    std::unique_ptr<tree::BTree> t;
    std::vector<EntryKey> logged_inserts, logged_deletes;
    std::vector<bool> logged_through;  // each log_entries call's `through`
};

TEST_F(WbKillTest, RemovesInPlaceWithoutARoundTrip) {
    Stamp s = first_batch();
    ASSERT_EQ(s.batch.size(), 20u);
    ASSERT_NE(s.frame, cache::kNoFrame);
    ASSERT_NE(s.frame_version, 0u);
    const uint64_t trips = x.t->trips;
    EXPECT_EQ(kill(s, s.batch.data(), 15), 15u);
    EXPECT_EQ(x.t->trips, trips);  // the frame is the newest copy: nothing remote
    EXPECT_EQ(stats().kills.load(), 15u);
    EXPECT_EQ(count7(), 5u);
    // Logged for redo after a crash, like VACUUM's in-place deletes.
    EXPECT_EQ(logged_deletes, std::vector<EntryKey>(s.batch.begin(), s.batch.begin() + 15));
    // The same stamp again: our own change moved the frame on.
    EXPECT_EQ(kill(s, s.batch.data() + 15, 1), 0u);
    EXPECT_EQ(count7(), 5u);
    // Written back, remote memory agrees (a handle without the cache reads it).
    const std::vector<uint32_t> dirty = x.dirty_frames();
    ASSERT_FALSE(dirty.empty());
    ASSERT_EQ(x.handle.flush_frames(dirty), dirty.size());
    ASSERT_TRUE(x.dirty_frames().empty());
    tree::TreeOptions o;
    tree::BTree remote(*x.mem, 0, x.ns, o);
    EXPECT_EQ(scan_all(remote, KMin(7), KMax(7), false).size(), 5u);
}

// K7: a kill that logged its conflict horizon at hold_lsn raises its frame's
// lsn to it: every write-back (ComputeProcess::write_back_frame(s),
// wb_acquire) keeps a frame dirty while its lsn is above the durable position
// the tree sees -- durable WAL and what every live standby has replayed -- so
// remote memory, where standbys read, loses the entries only after the
// standbys cancelled the queries that could still see their rows.
TEST_F(WbKillTest, RaisesTheFrameLsnToTheHorizonRecord) {
    Stamp s = first_batch();
    ASSERT_EQ(s.batch.size(), 20u);
    cache::FrameHeader& h = x.reg.region->header(s.frame);
    const uint64_t before = h.lsn.load();
    ASSERT_LT(before, 0x5000u);
    EXPECT_EQ(t->remove_if_unchanged(s.leaf, s.version, s.batch.data(), 10, false, {}, s.frame, s.frame_version,
                                     0x5000),
              10u);
    EXPECT_EQ(h.lsn.load(), 0x5000u);
    EXPECT_EQ(count7(), 10u);  // this server's own scans see the removal at once
    // A later kill with a lower (or no) record position never lowers it.
    Stamp s2 = first_batch();
    EXPECT_EQ(t->remove_if_unchanged(s2.leaf, s2.version, s2.batch.data(), 5, false, {}, s2.frame,
                                     s2.frame_version, 0x4000),
              5u);
    EXPECT_EQ(h.lsn.load(), 0x5000u);
    // A kill that removes nothing leaves the frame alone.
    Stamp s3 = first_batch();
    EntryKey absent = K(7, 9, 9);
    EXPECT_EQ(t->remove_if_unchanged(s3.leaf, s3.version, &absent, 1, false, {}, s3.frame, s3.frame_version,
                                      0x9000),
              0u);
    EXPECT_EQ(h.lsn.load(), 0x5000u);
}

TEST_F(WbKillTest, SkippedAfterAnInPlaceInsert) {
    Stamp s = first_batch();
    EXPECT_TRUE(t->stamp_current(s.leaf, s.frame, s.frame_version, s.version));
    ASSERT_TRUE(t->insert(K(7, 2, 1)));  // in place: body_version unchanged
    EXPECT_FALSE(t->stamp_current(s.leaf, s.frame, s.frame_version, s.version));  // (a kill's gate is spared)
    EXPECT_EQ(kill(s, s.batch.data(), s.batch.size()), 0u);
    EXPECT_EQ(stats().kills_skipped.load(), s.batch.size());
    EXPECT_EQ(count7(), 21u);
    EXPECT_TRUE(logged_deletes.empty());
}

// K8: with present_only the frame may have changed since the batch (here an
// in-place insert into the leaf, as an UPDATE's own new version does): the
// entries still in it go, absent ones count as skipped. (The caller vouches
// that no VACUUM could have recycled a TID meanwhile; the exact mode below
// keeps a reused TID's new entry.)
TEST_F(WbKillTest, PresentOnlyRemovesDespiteAnInPlaceInsert) {
    Stamp s = first_batch();
    ASSERT_TRUE(t->insert(K(7, 2, 1)));
    EXPECT_FALSE(t->stamp_current(s.leaf, s.frame, s.frame_version, s.version));
    EntryKey gone = s.batch[0];
    ASSERT_EQ(t->remove(&gone, 1), 1u);  // removed by someone else meanwhile
    stats().reset();
    const uint64_t trips = x.t->trips;
    EXPECT_EQ(t->remove_if_unchanged(s.leaf, s.version, s.batch.data(), 10, false, {}, s.frame, s.frame_version, 0,
                                     true),
              9u);
    EXPECT_EQ(x.t->trips, trips);
    EXPECT_EQ(stats().kills.load(), 9u);
    EXPECT_EQ(stats().kills_skipped.load(), 1u);
    EXPECT_EQ(count7(), 11u);  // 20 + 1 inserted - 1 removed - 9 killed
    EXPECT_TRUE(t->contains(K(7, 2, 1)));
}

// VACUUM removed (k, tid), the TID was reused by a new row with the same key:
// the frame's image is byte for byte the one the scan read, body_version
// included, and the live entry must stay.
TEST_F(WbKillTest, ReusedTidIsNotRemoved) {
    Stamp s = first_batch();
    EntryKey e = s.batch[3];
    ASSERT_EQ(t->remove(&e, 1), 1u);
    ASSERT_TRUE(t->insert(e));
    EXPECT_EQ(kill(s, &e, 1), 0u);
    EXPECT_TRUE(t->contains(e));
}

TEST_F(WbKillTest, SkippedAfterWriteBackAndEviction) {
    Stamp s = first_batch();
    ASSERT_TRUE(x.handle.invalidate(s.leaf));  // written back, then dropped
    EXPECT_EQ(count7(), 20u);                 // re-admitted into some frame
    EXPECT_EQ(kill(s, s.batch.data(), s.batch.size()), 0u);
    EXPECT_EQ(count7(), 20u);
}

TEST_F(WbKillTest, WithoutAFrameStampNothingGoes) {
    Stamp s = first_batch();
    EXPECT_EQ(t->remove_if_unchanged(s.leaf, s.version, s.batch.data(), s.batch.size()), 0u);
    EXPECT_EQ(count7(), 20u);
}

// Bottom-up deletion (src/README.md "Bottom-up deletion"): an insert that
// would split a full cached leaf gives up with the frame's stamp, changing
// nothing; the pass reads the leaf from the frame and removes in place; the
// insert then goes in without a split. No round trip in any of it.
TEST_F(WbKillTest, FullCachedLeafGivesUpWithAFrameStamp) {
    for (uint16_t i = 21; i <= kLeafCapacity; i++) ASSERT_TRUE(t->insert(K(7, 1, i)));
    ASSERT_EQ(count7(), kLeafCapacity);
    const uint64_t trips = x.t->trips;
    tree::BTree::LeafFull full;
    EXPECT_FALSE(t->insert(K(7, 9, 1), 0, UINT64_MAX, &full));
    ASSERT_NE(full.leaf, 0u);
    ASSERT_NE(full.frame, cache::kNoFrame);
    ASSERT_NE(full.frame_version, 0u);
    EXPECT_EQ(count7(), kLeafCapacity);  // nothing changed, nothing logged
    EXPECT_TRUE(logged_inserts.empty() || logged_inserts.back() != K(7, 9, 1));
    std::vector<EntryKey> leaf;
    ASSERT_TRUE(t->read_leaf(full.leaf, full.version, leaf, full.frame, full.frame_version));
    ASSERT_EQ(leaf.size(), kLeafCapacity);
    std::vector<EntryKey> dead(leaf.begin(), leaf.begin() + 10);
    EXPECT_EQ(t->remove_if_unchanged(full.leaf, full.version, dead.data(), dead.size(), true, {}, full.frame,
                                      full.frame_version),
              10u);
    EXPECT_EQ(stats().bottomup_removed.load(), 10u);
    EXPECT_TRUE(t->insert(K(7, 9, 1), 0, UINT64_MAX, &full));
    EXPECT_EQ(full.leaf, 0u);
    EXPECT_EQ(x.t->trips, trips);
    EXPECT_EQ(count7(), kLeafCapacity - 10 + 1);
    // A stale stamp reads nothing.
    tree::BTree::LeafFull again;
    for (uint16_t i = 1; i <= 9; i++) ASSERT_TRUE(t->insert(K(7, 8, i)));
    EXPECT_FALSE(t->insert(K(7, 9, 2), 0, UINT64_MAX, &again));
    ASSERT_NE(again.leaf, 0u);
    ASSERT_TRUE(t->insert(K(7, 9, 3)));  // splits (no `full`): the frame changes
    EXPECT_FALSE(t->read_leaf(again.leaf, again.version, leaf, again.frame, again.frame_version));
    EXPECT_TRUE(leaf.empty());
}

// A write-through tree caches leaves too, but its removal is remote at once:
// its scans' stamps carry no frame version (the extension routes its kills
// through the registry gate, never a frame's hold), and a removal that must
// wait for a logged horizon record (hold_lsn) is refused outright -- remote
// memory, where standbys read, would lose the entries before they replayed
// it. (K7 as first landed routed a cached write-through leaf's kill to the
// frame path, which removed remotely at once, standbys attached or not.)
TEST(WriteThroughKill, CachedLeafGivesNoFrameStampAndRefusesAHold) {
    WbFixture x;
    tree::TreeOptions o;
    o.cache = &x.handle;
    tree::BTree t(*x.mem, 0, x.ns, o);
    t.init_empty();
    for (uint16_t i = 1; i <= 20; i++) ASSERT_TRUE(t.insert(K(7, 1, i)));
    std::vector<EntryKey> batch;
    std::unique_ptr<tree::BTree::Scan> sc;
    for (int i = 0; i < 20; i++) {  // (leaf admission may turn the first fetches away)
        batch.clear();
        sc = t.scan(KMin(7), KMax(7));
        ASSERT_TRUE(sc->next(batch));
        if (sc->leaf_frame() != cache::kNoFrame) break;
    }
    ASSERT_EQ(batch.size(), 20u);
    ASSERT_NE(sc->leaf_frame(), cache::kNoFrame);  // the leaf is cached ...
    EXPECT_EQ(sc->leaf_frame_version(), 0u);        // ... but gives no frame stamp
    // Even with a frame version (a caller's mistake), a hold keeps the entries.
    const uint64_t fv = x.reg.region->header(sc->leaf_frame()).version.load() & ~cache::kVerLocked;
    stats().reset();
    EXPECT_EQ(t.remove_if_unchanged(sc->leaf(), sc->leaf_version(), batch.data(), 5, false, {}, sc->leaf_frame(), fv,
                                    0x5000),
              0u);
    EXPECT_EQ(stats().kills_skipped.load(), 5u);
    EXPECT_EQ(scan_all(t, KMin(7), KMax(7), false).size(), 20u);
    // Without a hold (the registry gate passed) the removal goes remote.
    EXPECT_EQ(t.remove_if_unchanged(sc->leaf(), sc->leaf_version(), batch.data(), 5, false, {}, sc->leaf_frame(), 0),
              5u);
    EXPECT_EQ(scan_all(t, KMin(7), KMax(7), false).size(), 15u);
    // A deferred present-only kill of the same entries (K9: another backend
    // queued it too): the cached copy already lacks them, no round trip.
    const uint64_t trips = x.t->trips;
    stats().reset();
    EXPECT_EQ(t.remove_if_unchanged(sc->leaf(), 0, batch.data(), 5, false, {}, cache::kNoFrame, 0, 0, true), 0u);
    EXPECT_EQ(x.t->trips, trips);
    EXPECT_EQ(stats().kills_skipped.load(), 5u);
    // One still there: remote (and removed).
    EXPECT_EQ(t.remove_if_unchanged(sc->leaf(), 0, batch.data() + 4, 2, false, {}, cache::kNoFrame, 0, 0, true), 1u);
    EXPECT_GT(x.t->trips, trips);
    EXPECT_EQ(scan_all(t, KMin(7), KMax(7), false).size(), 14u);
}

// Paused (W18: a standby attached, dex.write_back_with_standbys off) a full
// cached leaf still gives up with its frame's stamp when asked (`full`):
// the extension's bottom-up pass then defers its removal (K9) while the
// insert splits. Nothing changes, nothing remote, no paused write counted;
// without `full` the insert writes through and splits as before.
TEST_F(WbKillTest, PausedFullCachedLeafStillGivesUp) {
    for (uint16_t i = 21; i <= kLeafCapacity; i++) ASSERT_TRUE(t->insert(K(7, 1, i)));
    ASSERT_EQ(count7(), kLeafCapacity);
    x.reg.region->pause_write_back(cache::CacheRegion::kPauseStandby);
    stats().reset();
    const uint64_t trips = x.t->trips;
    tree::BTree::LeafFull full;
    EXPECT_FALSE(t->insert(K(7, 2, 1), 0, UINT64_MAX, &full));
    EXPECT_NE(full.leaf, 0u);
    EXPECT_NE(full.frame_version, 0u);
    EXPECT_EQ(x.t->trips, trips);
    EXPECT_EQ(stats().wb_paused_writes.load(), 0u);
    EXPECT_EQ(count7(), kLeafCapacity);
    std::vector<EntryKey> leaf;  // the pass reads the leaf at the stamp, from the frame
    ASSERT_TRUE(t->read_leaf(full.leaf, full.version, leaf, full.frame, full.frame_version));
    EXPECT_EQ(leaf.size(), kLeafCapacity);
    EXPECT_EQ(x.t->trips, trips);
    EXPECT_TRUE(t->insert(K(7, 2, 1)));  // then as before: written through, split
    EXPECT_GT(x.t->trips, trips);
    EXPECT_EQ(stats().wb_paused_writes.load(), 1u);
    EXPECT_EQ(count7(), kLeafCapacity + 1);
}

// K9 for a write-back tree whose write-back is paused for a standby (W18,
// dex.write_back_with_standbys off): its frame takes no kill, so the
// extension defers the kill until every standby replayed its record and
// then passes it present-only, without a frame stamp or hold. The entries
// the leaf's frame still holds go as VACUUM's deletes go: written through
// with the frame's image while paused (remote memory, where standbys read,
// loses them at once; no frame is left dirty), in place once resumed; logged
// for redo either way. Entries the frame lacks cost no round trip.
TEST_F(WbKillTest, DeferredKillWhilePausedGoesThroughThenInPlace) {
    Stamp s = first_batch();
    ASSERT_EQ(s.batch.size(), 20u);
    x.reg.region->pause_write_back(cache::CacheRegion::kPauseStandby);
    // The frame kill is skipped while paused (what made the deferral necessary).
    EXPECT_EQ(kill(s, s.batch.data(), 4), 0u);
    EXPECT_EQ(count7(), 20u);
    stats().reset();
    logged_deletes.clear();
    auto deferred = [&](const EntryKey* k, size_t n) {
        return t->remove_if_unchanged(s.leaf, 0, k, n, false, {}, cache::kNoFrame, 0, 0, true);
    };
    EntryKey gone[11];
    std::copy(s.batch.begin(), s.batch.begin() + 10, gone);
    gone[10] = K(7, 9, 9);  // (absent)
    EXPECT_EQ(deferred(gone, 11), 10u);
    EXPECT_EQ(stats().kills.load(), 10u);
    EXPECT_EQ(stats().kills_skipped.load(), 1u);
    EXPECT_EQ(count7(), 10u);
    EXPECT_EQ(logged_deletes, std::vector<EntryKey>(s.batch.begin(), s.batch.begin() + 10));
    EXPECT_TRUE(x.dirty_frames().empty()) << "a paused deferred kill left a dirty frame";
    {  // remote memory lost them already (a handle without the cache reads it)
        tree::TreeOptions o;
        tree::BTree remote(*x.mem, 0, x.ns, o);
        EXPECT_EQ(scan_all(remote, KMin(7), KMax(7), false).size(), 10u);
    }
    // The same again: the frame lacks them, nothing remote.
    uint64_t trips = x.t->trips;
    EXPECT_EQ(deferred(gone, 10), 0u);
    EXPECT_EQ(x.t->trips, trips);
    EXPECT_EQ(stats().kills_skipped.load(), 11u);
    // Resumed: in place, no round trip, the frame dirty until written back.
    x.reg.region->resume_write_back(cache::CacheRegion::kPauseStandby);
    trips = x.t->trips;
    EXPECT_EQ(deferred(s.batch.data() + 10, 5), 5u);
    EXPECT_EQ(x.t->trips, trips);
    EXPECT_EQ(count7(), 5u);
    EXPECT_FALSE(x.dirty_frames().empty());
    std::set<EntryKey> model(s.batch.begin() + 15, s.batch.end());
    expect_flushed_remote_holds(x, model);
}

// The same deferred kill after the leaf split while paused (the insert that
// ran a bottom-up pass always splits it meanwhile): the entries the split
// moved right of the frame's high fence are looked up by key and go too.
TEST_F(WbKillTest, DeferredKillWhilePausedFollowsASplit) {
    Stamp s = first_batch();
    ASSERT_EQ(s.batch.size(), 20u);
    x.reg.region->pause_write_back(cache::CacheRegion::kPauseStandby);
    for (uint16_t i = 1; i <= kLeafCapacity; i++) ASSERT_TRUE(t->insert(K(7, 0, i)));  // below the batch
    stats().reset();
    logged_deletes.clear();
    logged_through.clear();
    std::vector<EntryKey> dead = s.batch;
    dead.push_back(K(7, 9, 9));  // (absent: right of the leaf too)
    EXPECT_EQ(t->remove_if_unchanged(s.leaf, 0, dead.data(), dead.size(), false, {}, cache::kNoFrame, 0, 0, true),
              20u);
    EXPECT_EQ(stats().kills.load(), 20u);
    EXPECT_EQ(stats().kills_skipped.load(), 1u);
    EXPECT_GT(stats().kills_moved.load(), 0u);
    EXPECT_EQ(count7(), kLeafCapacity);
    EXPECT_EQ(logged_deletes, s.batch);
    // Written through while paused, and logged so (a standby's scan waits for
    // nothing): the absent entry was not passed on to the logged delete.
    ASSERT_FALSE(logged_through.empty());
    for (bool through : logged_through) EXPECT_TRUE(through);
    EXPECT_TRUE(x.dirty_frames().empty()) << "a paused deferred kill left a dirty frame";
    x.reg.region->resume_write_back(cache::CacheRegion::kPauseStandby);
    std::set<EntryKey> model;
    for (uint16_t i = 1; i <= kLeafCapacity; i++) model.insert(K(7, 0, i));
    expect_flushed_remote_holds(x, model);
}

// K9: a write-through kill deferred until the standbys replayed its record
// finds its leaf changed (here: an insert into it). present_only removes the
// entries still there at the leaf's current version; without it the kill is
// skipped as before.
TEST(WriteThroughKill, PresentOnlyRemovesFromAChangedLeaf) {
    WbFixture x;
    tree::TreeOptions o;
    tree::BTree t(*x.mem, 0, x.ns, o);
    t.init_empty();
    for (uint16_t i = 1; i <= 20; i++) ASSERT_TRUE(t.insert(K(7, 1, i)));
    std::vector<EntryKey> batch;
    auto sc = t.scan(KMin(7), KMax(7));
    ASSERT_TRUE(sc->next(batch));
    ASSERT_EQ(batch.size(), 20u);
    ASSERT_TRUE(t.insert(K(7, 2, 1)));  // the leaf moves on
    stats().reset();
    EXPECT_EQ(t.remove_if_unchanged(sc->leaf(), sc->leaf_version(), batch.data(), 5), 0u);
    EXPECT_EQ(stats().kills_skipped.load(), 5u);
    EntryKey gone[6] = {batch[0], batch[1], batch[2], batch[3], batch[4], K(7, 9, 9)};  // (the last: absent)
    EXPECT_EQ(t.remove_if_unchanged(sc->leaf(), sc->leaf_version(), gone, 6, false, {}, cache::kNoFrame, 0, 0, true),
              5u);
    EXPECT_EQ(stats().kills.load(), 5u);
    EXPECT_EQ(stats().kills_skipped.load(), 6u);
    EXPECT_EQ(scan_all(t, KMin(7), KMax(7), false).size(), 16u);  // 20 + 1 - 5
    // A hold is still refused, present_only or not.
    EXPECT_EQ(t.remove_if_unchanged(sc->leaf(), 0, batch.data() + 5, 5, false, {}, cache::kNoFrame, 0, 0x10, true),
              0u);
    EXPECT_EQ(scan_all(t, KMin(7), KMax(7), false).size(), 16u);
}

}  // namespace
