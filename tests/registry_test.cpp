// The cluster registry (src/cluster/registry.h): creation (once, with its
// floor), the writer CAS and high-water mark, standby slots (claim, renew,
// expiry by the primary -- exactly one of renewal and expiry wins), standbys'
// flush requests (CAS max).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "cluster/registry.h"
#include "tree_test_util.h"
#include "writeback_test_util.h"

namespace dex::testing {
namespace {

using cluster::kExpired;
using cluster::kDetached;
using cluster::kMaxStandbys;
using cluster::Registry;

struct RegistryTest : ::testing::Test {
    std::unique_ptr<memnode::Engine> engine = make_engine(64ull << 20);
    std::unique_ptr<RemoteMemory> mem = make_mem(*engine);
    uint64_t ns = ns_create(mem->node(0));
};

TEST_F(RegistryTest, ReadersDoNotCreateAndCreationHappensOnce) {
    EXPECT_EQ(Registry::open(*mem, 0, ns, false), 0u);
    GAddr a = Registry::open(*mem, 0, ns, true, 0x5000);
    ASSERT_NE(a, 0u);
    EXPECT_EQ(Registry::open(*mem, 0, ns, false), a);
    EXPECT_EQ(Registry::open(*mem, 0, ns, true, 0x9000), a);  // already there: not made again
    cluster::RegistryHeader h = Registry(*mem, a).read();
    EXPECT_EQ(h.writer_life, 0u);
    EXPECT_EQ(h.writer_hwm, 0x5000u);  // the creator's floor, not the second caller's
    EXPECT_EQ(h.removal_lsn, 0x5000u);
    for (uint32_t i = 0; i < kMaxStandbys; i++) EXPECT_EQ(h.slots[i].owner, 0u);
}

TEST_F(RegistryTest, DamagedBlockIsAnError) {
    GAddr a = Registry::open(*mem, 0, ns, true);
    uint64_t zero = 0;
    mem->write(a, &zero, sizeof zero);
    EXPECT_THROW(Registry(*mem, a).read(), Error);
}

TEST_F(RegistryTest, WriterCasAndMonotonicMarks) {
    Registry r(*mem, Registry::open(*mem, 0, ns, true));
    EXPECT_EQ(r.cas_writer(0, 111), 0u);
    EXPECT_EQ(r.cas_writer(0, 222), 111u);  // someone else's: refused, value reported
    r.writer_beat(1, 0x100, 3);
    EXPECT_EQ(r.raise_hwm(0x80), 0x100u);  // never lowered
    EXPECT_EQ(r.raise_hwm(0x200), 0x200u);
    r.set_removal_lsn(0x300);
    r.set_removal_lsn(0x250);
    cluster::RegistryHeader h = r.read();
    EXPECT_EQ(h.writer_life, 111u);
    EXPECT_EQ(h.writer_beat, 1u);
    EXPECT_EQ(h.writer_tli, 3u);
    EXPECT_EQ(h.writer_hwm, 0x200u);
    EXPECT_EQ(h.removal_lsn, 0x300u);
}

// The writer's later beats (Registry::beat_and_read): hwm, beat, removal
// raise and the read in one round trip; a stale beat does not take, marks
// never go down, and a wrong guess of a mark costs nothing but that beat's
// raise of it.
TEST(RegistryBeat, ALaterBeatIsOneRoundTrip) {
    auto engine = make_engine(64ull << 20);
    auto owned = std::make_unique<CountingTransport>(*engine);
    CountingTransport* t = owned.get();
    std::vector<std::unique_ptr<Transport>> v;
    v.push_back(std::move(owned));
    RemoteMemory mem(std::move(v));
    Registry r(mem, Registry::open(mem, 0, ns_create(mem.node(0)), true, 0x40));
    ASSERT_EQ(r.cas_writer(0, 7), 0u);
    r.writer_beat(1, 0x80, 2);               // the claim's first beat: the long way
    (void)r.raise_removal_and_read(0x40);    // (this process's guesses now hold the block's values)

    bool done = false;
    uint64_t t0 = t->trips;
    cluster::RegistryHeader h = r.beat_and_read(1, 0x90, 0x100, &done);
    EXPECT_EQ(t->trips - t0, 1u);
    EXPECT_TRUE(done);
    EXPECT_EQ(h.writer_beat, 2u);
    EXPECT_EQ(h.writer_hwm, 0x90u);
    EXPECT_EQ(h.removal_lsn, 0x100u);
    EXPECT_EQ(h.writer_tli, 2u);             // left as the first beat wrote it

    h = r.beat_and_read(1, 0x50, 0x60, &done);  // a stale beat, lower marks
    EXPECT_FALSE(done);
    EXPECT_EQ(h.writer_beat, 2u);
    EXPECT_EQ(h.writer_hwm, 0x90u);
    EXPECT_EQ(h.removal_lsn, 0x100u);

    // a backend raised removal_lsn meanwhile: this beat's guess is wrong, the
    // read reports the word as it is, the next beat raises it
    uint64_t w = 0x500;
    mem.write(r.address() + offsetof(cluster::RegistryHeader, removal_lsn), &w, sizeof w);
    t0 = t->trips;
    h = r.beat_and_read(2, 0x90, 0x600, &done);
    EXPECT_EQ(t->trips - t0, 1u);
    EXPECT_TRUE(done);
    EXPECT_EQ(h.removal_lsn, 0x500u);
    h = r.beat_and_read(3, 0xa0, 0x600, &done);
    EXPECT_TRUE(done);
    EXPECT_EQ(h.removal_lsn, 0x600u);
    EXPECT_EQ(h.writer_hwm, 0xa0u);
    EXPECT_EQ(h.writer_beat, 4u);
}

TEST_F(RegistryTest, HwmRaisedConcurrentlyEndsAtTheMaximum) {
    Registry r(*mem, Registry::open(*mem, 0, ns, true));
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; t++)
        ts.emplace_back([&, t] {
            for (uint64_t i = 1; i <= 500; i++) r.raise_hwm(i * 4 + t);
        });
    for (auto& t : ts) t.join();
    EXPECT_EQ(r.read().writer_hwm, 500u * 4 + 3);
}

TEST_F(RegistryTest, FlushRequestsOnlyRiseAndTouchNothingElse) {
    Registry r(*mem, Registry::open(*mem, 0, ns, true, 0x40));
    EXPECT_EQ(r.read().flush_request_lsn, 0u);  // a new block: nobody asked
    std::vector<std::thread> ts;
    for (int t = 0; t < 3; t++)  // standbys' scans asking at once
        ts.emplace_back([&, t] {
            for (uint64_t i = 1; i <= 300; i++) r.request_flush(i * 3 + t);
        });
    for (auto& t : ts) t.join();
    r.request_flush(5);  // an older position never lowers it
    cluster::RegistryHeader h = r.read();
    EXPECT_EQ(h.flush_request_lsn, 300u * 3 + 2);
    EXPECT_EQ(h.writer_hwm, 0x40u);
    EXPECT_EQ(h.removal_lsn, 0x40u);
    EXPECT_EQ(h.reserved, 0u);
}

TEST_F(RegistryTest, SlotsClaimRenewExpireAndReclaim) {
    Registry r(*mem, Registry::open(*mem, 0, ns, true));
    uint64_t b1 = 0, b2 = 0;
    int s1 = r.claim_slot(1001, 0x10, 1, &b1);
    int s2 = r.claim_slot(1002, 0x20, 1, &b2);
    ASSERT_GE(s1, 0);
    ASSERT_GE(s2, 0);
    EXPECT_NE(s1, s2);
    uint64_t again = 0;
    EXPECT_EQ(r.claim_slot(1001, 0x11, 1, &again), s1);  // its own slot, not a second one
    b1 = again;
    EXPECT_TRUE(r.standby_beat(s1, 1001, b1, 0x40));
    EXPECT_EQ(r.read().slots[s1].replay_lsn, 0x40u);
    EXPECT_FALSE(r.standby_beat(s1, 1002, b2, 0x50));  // not the owner

    // The primary expires s1 at the beat it saw; the standby's next renewal
    // from that beat fails, and it must claim again.
    EXPECT_TRUE(r.expire_slot(s1, b1));
    EXPECT_FALSE(r.expire_slot(s1, b1));  // already expired
    EXPECT_FALSE(r.standby_beat(s1, 1001, b1, 0x60));
    EXPECT_TRUE(r.read().slots[s1].beat & kExpired);
    // An expiry based on an old beat loses against a renewal.
    EXPECT_TRUE(r.standby_beat(s2, 1002, b2, 0x70));
    EXPECT_FALSE(r.expire_slot(s2, b2 - 1));
    // The expired slot is free for anyone, the live one is not.
    uint64_t b3 = 0;
    int s3 = r.claim_slot(1003, 0x80, 1, &b3);
    EXPECT_NE(s3, s2);
    EXPECT_FALSE(r.read().slots[s3].beat & kExpired);
}

// A lagging standby is detached: its renewal fails, the slot stays live (not
// expired, not claimable, not even by its owner) until the primary expires it.
TEST_F(RegistryTest, DetachedSlotStaysLiveUntilExpired) {
    Registry r(*mem, Registry::open(*mem, 0, ns, true));
    uint64_t b1 = 0;
    int s1 = r.claim_slot(2001, 0x10, 1, &b1);
    ASSERT_GE(s1, 0);
    EXPECT_FALSE(r.detach_slot(s1, b1 + 1));  // a renewal it did not see wins
    EXPECT_TRUE(r.detach_slot(s1, b1));
    EXPECT_FALSE(r.detach_slot(s1, b1 | kDetached));  // detached once
    const uint64_t detached = r.read().slots[s1].beat;
    EXPECT_EQ(detached, b1 | kDetached);
    EXPECT_FALSE(detached & kExpired);
    EXPECT_FALSE(r.standby_beat(s1, 2001, b1, 0x20));  // its renewal fails
    EXPECT_FALSE(r.kill_allowed(0, 0x30));             // (no writer anyway)
    uint64_t b2 = 0;
    int s2 = r.claim_slot(2001, 0x20, 1, &b2);  // its owner claims again: another slot
    ASSERT_GE(s2, 0);
    EXPECT_NE(s2, s1);
    EXPECT_EQ(r.read().slots[s1].beat, detached);
    // The silence rule expires it; then it is free again.
    EXPECT_TRUE(r.expire_slot(s1, detached));
    uint64_t b3 = 0;
    EXPECT_EQ(r.claim_slot(2002, 0x40, 1, &b3), s1);
    EXPECT_FALSE(b3 & (kExpired | kDetached));
}

TEST_F(RegistryTest, AllSlotsLiveMeansNoSlot) {
    Registry r(*mem, Registry::open(*mem, 0, ns, true));
    uint64_t b = 0;
    for (uint32_t i = 0; i < kMaxStandbys; i++) ASSERT_GE(r.claim_slot(5000 + i, 0, 1, &b), 0);
    EXPECT_EQ(r.claim_slot(9999, 0, 1, &b), -1);
}

TEST_F(RegistryTest, RenewalAndExpiryRaceHasExactlyOneWinner) {
    Registry r(*mem, Registry::open(*mem, 0, ns, true));
    for (int round = 0; round < 200; round++) {
        uint64_t beat = 0;
        int s = r.claim_slot(7000 + round, 0, 1, &beat);
        ASSERT_GE(s, 0);
        std::atomic<bool> renewed{false}, expired{false};
        uint64_t seen = beat;
        std::thread a([&] { renewed = r.standby_beat(s, 7000 + round, beat, 1); });
        std::thread b([&] { expired = r.expire_slot(s, seen); });
        a.join();
        b.join();
        EXPECT_NE(renewed.load(), expired.load()) << "round " << round;
        // free the slot for the next round
        cluster::RegistryHeader h = r.read();
        if (!(h.slots[s].beat & kExpired)) {
            EXPECT_TRUE(r.expire_slot(s, h.slots[s].beat));
        }
    }
}

TEST_F(RegistryTest, FenceMovedOnlyFromTheExpectedWriterAndOnlyOnce) {
    Registry r(*mem, Registry::open(*mem, 0, ns, true));
    EXPECT_EQ(r.cas_writer(0, 42), 0u);
    EXPECT_FALSE(r.fence_moved(0, 777));  // the writer is 42, not 0: not moved
    EXPECT_EQ(r.read().writer_life, 42u);
    EXPECT_TRUE(r.fence_moved(42, 777));
    cluster::RegistryHeader h = r.read();
    EXPECT_EQ(h.writer_life, cluster::kWriterMoved);
    EXPECT_EQ(h.moved_to, 777u);
    EXPECT_TRUE(r.fence_moved(42, 777));   // again, same adopter: still true
    EXPECT_FALSE(r.fence_moved(42, 888));  // another adopter: refused
    EXPECT_FALSE(r.fence_moved(cluster::kWriterMoved, 888));
    EXPECT_EQ(r.read().moved_to, 777u);
    // a writer of the old cluster can no longer claim it
    EXPECT_EQ(r.cas_writer(0, 43), cluster::kWriterMoved);
}

TEST_F(RegistryTest, OfTwoAdoptersFencingAtOnceExactlyOneWins) {
    for (int round = 0; round < 50; round++) {
        Registry r(*mem, Registry::open(*mem, 0, ns_create(mem->node(0)), true));
        std::atomic<int> go{0};
        bool won[2] = {false, false};
        std::vector<std::thread> ts;
        for (int t = 0; t < 2; t++)
            ts.emplace_back([&, t] {
                go.fetch_add(1);
                while (go.load() < 2) {
                }
                won[t] = r.fence_moved(0, 500 + t);
            });
        for (auto& t : ts) t.join();
        ASSERT_NE(won[0], won[1]) << "round " << round;
        cluster::RegistryHeader h = r.read();
        EXPECT_EQ(h.writer_life, cluster::kWriterMoved);
        EXPECT_EQ(h.moved_to, won[0] ? 500u : 501u);
    }
}

TEST_F(RegistryTest, AClaimWhoseWriterCasFailedStillBarsOthers) {
    GAddr a = Registry::open(*mem, 0, ns, true);
    Registry r(*mem, a);
    EXPECT_EQ(r.cas_writer(0, 42), 0u);
    // 777 claimed moved_to, then lost its writer CAS (the old writer changed in between)
    EXPECT_EQ(mem->cas(a + offsetof(cluster::RegistryHeader, moved_to), 0, 777), 0u);
    EXPECT_FALSE(r.fence_moved(42, 888));  // 777 claimed the trees
    EXPECT_EQ(r.read().writer_life, 42u);
    EXPECT_TRUE(r.fence_moved(42, 777));   // the claimant finishes
    EXPECT_EQ(r.read().writer_life, cluster::kWriterMoved);
}

TEST_F(RegistryTest, AdoptedListIsASetAndBounded) {
    Registry r(*mem, Registry::open(*mem, 0, ns, true));
    EXPECT_TRUE(r.add_adopted(11));
    EXPECT_TRUE(r.add_adopted(12));
    EXPECT_TRUE(r.add_adopted(11));
    cluster::RegistryHeader h = r.read();
    EXPECT_EQ(h.adopted[0], 11u);
    EXPECT_EQ(h.adopted[1], 12u);
    EXPECT_EQ(h.adopted[2], 0u);
    for (uint64_t i = 0; i < cluster::kMaxAdopted - 2; i++) EXPECT_TRUE(r.add_adopted(100 + i));
    EXPECT_FALSE(r.add_adopted(99999));
    EXPECT_TRUE(r.add_adopted(12));  // already there
}

TEST_F(RegistryTest, ConcurrentAdoptersLoseNoEntry) {
    Registry r(*mem, Registry::open(*mem, 0, ns, true));
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; t++)
        ts.emplace_back([&, t] {
            for (uint64_t i = 0; i < 6; i++) EXPECT_TRUE(r.add_adopted(1000 + t * 10 + i));
        });
    for (auto& t : ts) t.join();
    cluster::RegistryHeader h = r.read();
    std::vector<uint64_t> got(h.adopted, h.adopted + cluster::kMaxAdopted);
    for (int t = 0; t < 4; t++)
        for (uint64_t i = 0; i < 6; i++)
            EXPECT_EQ(std::count(got.begin(), got.end(), 1000 + t * 10 + i), 1) << t << "/" << i;
}

}  // namespace
}  // namespace dex::testing
