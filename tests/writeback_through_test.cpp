// The `through` flag of a write-back tree's entry log (TreeOptions::log_entries,
// src/README.md "Write-back mode", W11): a change told as written through
// must be in remote memory when it is told -- a hot standby replaying its
// record does not wait for a write-back before it reads the key's leaf --
// and a change made in a frame that stays dirty (in place, a dirty split's
// halves) must not be told so. Checked at every call against a reader
// without a cache, over random inserts and deletes, with write-back running,
// paused (W18: everything goes through), and with the entries' WAL not
// durable (W13: full leaves split around their dirty entries).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
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

struct Told {
    uint64_t through = 0, kept = 0;  // calls told written through / not
    uint64_t wrong = 0;              // told through, but remote memory did not hold the change
};

class WbThroughTest : public ::testing::Test {
protected:
    WbFixture x{256};  // small: evictions, splits of dirty leaves
    std::unique_ptr<tree::BTree> t;
    tree::BTree remote_only{*x.mem, 0, x.ns};  // no cache: what a standby reads
    Told told;
    void SetUp() override {
        t = x.write_back_tree();
        t->set_write_back(true, [] { return true; },
                          [this](bool insert, bool through, const uint8_t* const* e, const uint32_t* lens, size_t n) {
                              (through ? told.through : told.kept)++;
                              if (!through) return;
                              for (size_t i = 0; i < n; i++) {
                                  EntryKey k;
                                  ASSERT_EQ(lens[i], sizeof k);
                                  std::memcpy(&k, e[i], sizeof k);
                                  const bool there = !scan_all(remote_only, k, k, false).empty();
                                  if (there != insert) told.wrong++;
                              }
                          });
    }
    // `ops` random inserts (and a third as many deletes) of keys in [0, range);
    // returns how many changed the tree (the others insert an entry already there).
    uint64_t run(std::set<EntryKey>& model, std::mt19937_64& rng, int ops, int range) {
        uint64_t changed = 0;
        for (int i = 0; i < ops; i++) {
            const EntryKey k = K(static_cast<int64_t>(rng() % range), 1, static_cast<uint16_t>(rng() % 4 + 1));
            if (rng() % 4 == 0 && !model.empty()) {
                auto it = model.lower_bound(k);
                const EntryKey d = it == model.end() ? *model.begin() : *it;
                EXPECT_EQ(t->remove(&d, 1), 1u);
                model.erase(d);
                changed++;
            } else {
                const bool added = model.insert(k).second;
                EXPECT_EQ(t->insert(k), added);
                changed += added;
            }
        }
        return changed;
    }
};

TEST_F(WbThroughTest, ToldThroughOnlyWhenRemoteMemoryHoldsIt) {
    std::set<EntryKey> model;
    std::mt19937_64 rng(17);
    // write-back running, entries covered: in place, full leaves split with their entries
    run(model, rng, 6000, 20000);
    EXPECT_GT(told.kept, 3000u) << "in-place changes were told as written through";
    EXPECT_GT(told.through, 0u) << "no split wrote its entries through";
    EXPECT_EQ(told.wrong, 0u);

    // paused (W18): every change goes through, a dirty frame with it
    x.reg.region->pause_write_back();
    told = Told{};
    const uint64_t changed = run(model, rng, 3000, 20000);
    // (an insert of an entry already there is told as not written through)
    EXPECT_EQ(told.through, changed) << "a change written through while paused was told as kept in a frame";
    EXPECT_EQ(told.kept, 3000u - changed);
    EXPECT_GT(changed, 2500u);
    EXPECT_EQ(told.wrong, 0u);
    x.reg.region->resume_write_back();

    // the entries' WAL not durable: full dirty leaves split around them (W13)
    told = Told{};
    const uint64_t splits0 = stats().dirty_splits.load();
    {
        DurableAt none(0);
        uint64_t lsn = 1;
        for (int i = 0; i < 4000; i++) {
            const EntryKey k = K(static_cast<int64_t>(rng() % 20000), 2, static_cast<uint16_t>(rng() % 4 + 1));
            ASSERT_EQ(t->insert(k, ++lsn), model.insert(k).second);
        }
    }
    EXPECT_GT(stats().dirty_splits.load(), splits0) << "no leaf split around dirty entries";
    EXPECT_GT(told.kept, 0u);
    EXPECT_EQ(told.wrong, 0u);
    expect_flushed_remote_holds(x, model);
}


// A batch (a multi-row statement's) is told in one call per run of equal
// `through` -- a bulk load's WAL record per row was 4% of its CPU -- and
// still every entry exactly once, and through only when remote memory holds
// it (checked by the fixture's callback, at the call).
TEST_F(WbThroughTest, ABatchIsToldOncePerRunOfItsFlag) {
    std::multiset<EntryKey> logged;
    uint64_t calls = 0, through_entries = 0;
    t->set_write_back(true, [] { return true; },
                      [&](bool insert, bool through, const uint8_t* const* e, const uint32_t* lens, size_t n) {
                          ASSERT_TRUE(insert);
                          calls++;
                          (through ? told.through : told.kept)++;
                          if (through) through_entries += n;
                          for (size_t i = 0; i < n; i++) {
                              EntryKey k;
                              ASSERT_EQ(lens[i], sizeof k);
                              std::memcpy(&k, e[i], sizeof k);
                              logged.insert(k);
                              if (through && scan_all(remote_only, k, k, false).empty()) told.wrong++;
                          }
                      });
    std::mt19937_64 rng(23);
    std::set<EntryKey> model;
    auto batches = [&](int nb, uint32_t block) {
        for (int b = 0; b < nb; b++) {
            std::set<EntryKey> batch;
            while (batch.size() < 256) batch.insert(K(static_cast<int64_t>(rng() % 1000000), block, static_cast<uint16_t>(b + 1)));
            std::vector<EntryKey> keys(batch.begin(), batch.end());
            std::vector<uint64_t> lsns(keys.size(), 0);
            size_t done = 0;
            t->insert_batch(keys.data(), lsns.data(), keys.size(), UINT64_MAX, &done);
            ASSERT_EQ(done, keys.size());
            model.insert(keys.begin(), keys.end());
        }
    };
    batches(40, 1);
    EXPECT_EQ(logged, std::multiset<EntryKey>(model.begin(), model.end())) << "an entry told twice or not at all";
    // runs: one per batch, and up to two more around each entry a split
    // wrote through (this small cache splits and evicts often)
    EXPECT_GE(calls, 40u);
    EXPECT_LE(calls, 40u + 2 * through_entries) << calls << " calls for 40 batches";
    EXPECT_LT(calls, model.size() / 5) << "not told in runs";
    EXPECT_GT(told.kept, 0u);
    EXPECT_EQ(told.wrong, 0u);

    // paused (W18): every change written through, one call per batch
    x.reg.region->pause_write_back();
    calls = 0;
    logged.clear();
    const std::set<EntryKey> before = model;
    batches(10, 2);
    x.reg.region->resume_write_back();
    EXPECT_EQ(calls, 10u);
    std::multiset<EntryKey> added;
    for (const EntryKey& k : model)
        if (!before.count(k)) added.insert(k);
    EXPECT_EQ(logged, added);
    EXPECT_EQ(told.wrong, 0u);
    expect_flushed_remote_holds(x, model);
}

}  // namespace
