// The DEX 6.1 offloading decision model.
#include <gtest/gtest.h>

#include "tree/offload_policy.h"

namespace dex::tree {
namespace {

TEST(OffloadPolicy, MovingAverageKeepsTheLastWindow) {
    MovingAverage m(50);
    EXPECT_TRUE(m.empty());
    for (int i = 0; i < 50; i++) m.add(10);
    EXPECT_DOUBLE_EQ(m.value(), 10);
    for (int i = 0; i < 50; i++) m.add(30);
    EXPECT_DOUBLE_EQ(m.value(), 30);  // the old samples are gone
    m.add(80);
    EXPECT_DOUBLE_EQ(m.value(), (49 * 30 + 80) / 50.0);
}

TEST(OffloadPolicy, PicksTheCheaperActionWithOnePercentContrary) {
    OffloadPolicy p;
    for (int i = 0; i < 50; i++) p.record_remote_read(20);  // 3 levels one-sided: 3 x 20.3 x 1.2 = 73
    for (int i = 0; i < 50; i++) p.record_offload(40);
    EXPECT_NEAR(p.one_sided_estimate(3), 3 * 20.3 * 1.2, 1e-9);
    int off = 0;
    const int n = 100000;
    for (int i = 0; i < n; i++) off += p.should_offload(3);
    EXPECT_GT(off, n * 97 / 100);  // cheaper: offload, except ~1%
    EXPECT_LT(off, n * 995 / 1000);
    // one missing level: one-sided (24.4) beats offloading (40)
    int off1 = 0;
    for (int i = 0; i < n; i++) off1 += p.should_offload(1);
    EXPECT_GT(off1, n * 5 / 1000);
    EXPECT_LT(off1, n * 3 / 100);
}

TEST(OffloadPolicy, ShiftsBackWhenOffloadsGetSlower) {
    OffloadPolicy p;
    for (int i = 0; i < 50; i++) p.record_remote_read(20);
    for (int i = 0; i < 50; i++) p.record_offload(30);
    EXPECT_TRUE(p.offload_estimate() < p.one_sided_estimate(2));
    // the memory node's CPU saturates: offload latency rises
    for (int i = 0; i < 50; i++) p.record_offload(200);
    int off = 0;
    for (int i = 0; i < 10000; i++) off += p.should_offload(2);
    EXPECT_LT(off, 300);
}

// A write done one-sided adds a re-read, a lock CAS and a publish batch after
// its descent: the same miss is worth offloading for a write but not a read.
TEST(OffloadPolicy, WritesCountTheirLockAndPublishRoundTrips) {
    OffloadPolicy p;
    for (int i = 0; i < 50; i++) p.record_remote_read(20);
    for (int i = 0; i < 50; i++) p.record_offload(40);
    EXPECT_NEAR(p.one_sided_estimate(1, OffloadPolicy::kWriteRoundTrips), (20.3 + 3 * 20) * 1.2, 1e-9);
    int reads = 0, writes = 0;
    for (int i = 0; i < 10000; i++) reads += p.should_offload(1);
    for (int i = 0; i < 10000; i++) writes += p.should_offload(1, OffloadPolicy::kWriteRoundTrips);
    EXPECT_LT(reads, 300);
    EXPECT_GT(writes, 9700);
    EXPECT_EQ(p.decisions(), 20000u);
    EXPECT_EQ(p.offloads_chosen(), static_cast<uint64_t>(reads + writes));
}

TEST(OffloadPolicy, ExploresBeforeItHasSamplesAndHonoursOnOff) {
    OffloadPolicy p;
    EXPECT_TRUE(p.should_offload(2));  // no offload sample yet
    p.record_offload(10);
    EXPECT_FALSE(p.should_offload(2));  // no one-sided sample yet
    p.set_mode(OffloadMode::kOn);
    for (int i = 0; i < 100; i++) EXPECT_TRUE(p.should_offload(1));
    p.set_mode(OffloadMode::kOff);
    for (int i = 0; i < 100; i++) EXPECT_FALSE(p.should_offload(5));
}

}  // namespace
}  // namespace dex::tree
