// B-link tree under concurrency: several clients (each with its own connection)
// on one memory node -- without a cache, or as backends of one compute server
// sharing a node cache (src/README.md "Node cache") -- and remote locks left
// behind by dead clients.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <set>
#include <cstdio>
#include <thread>

#include "cache/cache.h"
#include "cache/region.h"
#include "common/stats.h"
#include "tree_test_util.h"

using namespace dex;
using namespace dex::testing;
using dex::tree::BTree;

namespace {

struct Client {
    std::unique_ptr<RemoteMemory> mem;
    std::unique_ptr<BTree> tree;
    Client(memnode::Engine& e, uint64_t ns, tree::TreeOptions o = {}) : mem(make_mem(e)) {
        tree = std::make_unique<BTree>(*mem, 0, ns, o);
    }
};

// ---- writers, a deleter and readers at once, per cache configuration ---------------

struct ConcurrencyConfig {
    const char* name;
    uint32_t frames;  // 0: no cache (every backend reads remote memory)
};

void PrintTo(const ConcurrencyConfig& c, std::ostream* os) { *os << c.name; }

class ConcurrentTreeTest : public ::testing::TestWithParam<ConcurrencyConfig> {};

// One "backend": own transport, own Cache handle on the shared region (if
// there is one), own BTree.
struct Backend {
    std::unique_ptr<RemoteMemory> mem;
    std::unique_ptr<cache::Cache> cache;
    std::unique_ptr<BTree> tree;
    Backend(memnode::Engine& e, Region* r, uint64_t ns, uint64_t seed) : mem(make_mem(e)) {
        tree::TreeOptions o;
        if (r) {
            cache = std::make_unique<cache::Cache>(*r->region, seed);
            o.cache = cache.get();
        }
        tree = std::make_unique<BTree>(*mem, 0, ns, o);
    }
};

TEST_P(ConcurrentTreeTest, InsertsDeletesAndScans) {
    const ConcurrencyConfig& cfg = GetParam();
    auto engine = make_engine(256ull << 20);
    auto setup = make_mem(*engine);
    uint64_t ns = ns_create(setup->node(0));
    std::unique_ptr<Region> reg;
    if (cfg.frames) reg = std::make_unique<Region>(cfg.frames, cache::AdmissionPolicy{true, 0.5});
    stats().reset();

    // Pre-existing keys: block 0. Odd values are never deleted; even values in
    // [0, 6000) are deleted by one thread (making leaves empty -> merges).
    std::set<EntryKey> keep, doomed;
    {
        Backend base(*engine, reg.get(), ns, 7);
        base.tree->init_empty();
        for (int v = 0; v < 12000; v++) {
            EntryKey k = K(v * 10, 0, 1);
            base.tree->insert(k);
            (v % 2 == 1 || v >= 6000 ? keep : doomed).insert(k);
        }
    }
    // Make whole leaves empty: doom a contiguous stretch too.
    for (int v = 8000; v < 9000; v++) {
        EntryKey k = K(v * 10, 0, 1);
        keep.erase(k);
        doomed.insert(k);
    }

    const int kWriters = 4;
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> scans_done{0};
    std::atomic<int> failures{0};
    std::vector<std::set<EntryKey>> inserted(kWriters);
    std::vector<std::thread> th;
    for (int w = 0; w < kWriters; w++) {
        th.emplace_back([&, w] {
            Backend b(*engine, reg.get(), ns, 100 + w);
            std::mt19937_64 rng(100 + w);
            auto& mine = inserted[w];
            for (int i = 0; i < 6000; i++) {
                // Hot region overlaps the pre-existing keys and the other writers.
                EntryKey k = K(static_cast<int64_t>(rng() % 130000), static_cast<uint32_t>(w + 1),
                               static_cast<uint16_t>(1 + rng() % 1000));
                bool fresh = mine.insert(k).second;
                if (b.tree->insert(k) != fresh) failures++;
                if (i % 7 == 0 && !b.tree->contains(k)) failures++;  // own key, through the shared cache
                if (i % 500 == 499) {  // delete a sorted batch of our own keys
                    std::vector<EntryKey> del;
                    for (auto it = mine.begin(); it != mine.end() && del.size() < 100; ++it)
                        if (rng() % 3 == 0) del.push_back(*it);
                    if (b.tree->remove(del.data(), del.size()) != del.size()) failures++;
                    for (auto& d : del) {
                        mine.erase(d);
                        if (b.tree->contains(d)) failures++;
                    }
                }
            }
        });
    }
    th.emplace_back([&] {  // deleter of pre-existing keys, in sorted batches
        Backend b(*engine, reg.get(), ns, 55);
        std::vector<EntryKey> all(doomed.begin(), doomed.end());
        for (size_t i = 0; i < all.size(); i += 250) {
            size_t e = std::min(all.size(), i + 250);
            if (b.tree->remove(all.data() + i, e - i) != e - i) failures++;
        }
    });
    for (int s = 0; s < 2; s++) {  // readers: full scans (one forward, one backward) and point lookups
        th.emplace_back([&, s] {
            Backend b(*engine, reg.get(), ns, 77 + s);
            std::vector<EntryKey> kv(keep.begin(), keep.end());
            std::mt19937_64 rng(9 + s);
            while (!stop.load()) {
                bool backward = s == 1;
                auto got = scan_all(*b.tree, neg_inf_key(), pos_inf_key(), backward);
                if (backward) std::reverse(got.begin(), got.end());
                for (size_t i = 1; i < got.size(); i++)
                    if (!(got[i - 1] < got[i])) {
                        failures++;
                        ADD_FAILURE() << "scan not strictly ascending at " << i;
                        break;
                    }
                for (auto& k : keep)
                    if (!std::binary_search(got.begin(), got.end(), k)) {
                        failures++;
                        ADD_FAILURE() << "scan missed pre-existing " << tree::key_str(k);
                        break;
                    }
                for (int q = 0; q < 500; q++)
                    if (!b.tree->contains(kv[rng() % kv.size()])) {
                        failures++;
                        ADD_FAILURE() << "lookup missed a kept key";
                        break;
                    }
                scans_done++;
            }
        });
    }
    for (int i = 0; i < kWriters + 1; i++) th[i].join();
    stop = true;
    for (size_t i = kWriters + 1; i < th.size(); i++) th[i].join();

    EXPECT_EQ(failures.load(), 0);
    EXPECT_GT(scans_done.load(), 0u);
    std::set<EntryKey> model = keep;
    for (auto& m : inserted) model.insert(m.begin(), m.end());
    BTree plain(*setup, 0, ns);  // remote memory itself
    auto info = plain.check();
    EXPECT_EQ(info.entries, model.size());
    EXPECT_GE(info.height, 3u);
    auto all = scan_all(plain, neg_inf_key(), pos_inf_key(), false);
    ASSERT_EQ(all.size(), model.size());
    EXPECT_TRUE(std::equal(all.begin(), all.end(), model.begin()));
    if (reg) {  // and through the (shared) cache
        Backend b(*engine, reg.get(), ns, 8);
        auto got = scan_all(*b.tree, neg_inf_key(), pos_inf_key(), false);
        ASSERT_EQ(got.size(), model.size());
        EXPECT_TRUE(std::equal(got.begin(), got.end(), model.begin()));
        for (auto& k : model) ASSERT_TRUE(b.tree->contains(k));
        expect_cache_coherent(*reg->region, *setup);
        EXPECT_GT(stats().cache_hits.load(), 0u);
        if (cfg.frames <= 64) {
            EXPECT_GT(stats().evictions.load(), 0u);
        }
    }
    std::printf("[ info     ] %s: scans %llu, hits %llu misses %llu evictions %llu restarts %llu\n", cfg.name,
                (unsigned long long)scans_done.load(), (unsigned long long)stats().cache_hits.load(),
                (unsigned long long)stats().cache_misses.load(), (unsigned long long)stats().evictions.load(),
                (unsigned long long)stats().restarts.load());
}

INSTANTIATE_TEST_SUITE_P(Configs, ConcurrentTreeTest,
                         ::testing::Values(ConcurrencyConfig{"uncached", 0}, ConcurrencyConfig{"frames16", 16},
                                           ConcurrencyConfig{"frames256", 256},
                                           ConcurrencyConfig{"frames8192", 8192}),
                         [](const ::testing::TestParamInfo<ConcurrencyConfig>& i) { return std::string(i.param.name); });

// ---- root splits, dead lock holders ------------------------------------------------

TEST(TreeConcurrency, ConcurrentAscendingInsertsSplitRoot) {
    // Everyone hammers the right edge from an empty tree: root splits race.
    auto engine = make_engine(128ull << 20);
    auto setup = make_mem(*engine);
    uint64_t ns = ns_create(setup->node(0));
    BTree base(*setup, 0, ns);
    base.init_empty();
    const int kThreads = 6, kPer = 5000;
    std::vector<std::thread> th;
    for (int t = 0; t < kThreads; t++)
        th.emplace_back([&, t] {
            Client c(*engine, ns);
            for (int i = 0; i < kPer; i++) c.tree->insert(K(i, static_cast<uint32_t>(t), 1));
        });
    for (auto& t : th) t.join();
    auto info = base.check();
    EXPECT_EQ(info.entries, static_cast<uint64_t>(kThreads * kPer));
    EXPECT_GE(info.height, 3u);
}

TEST(TreeConcurrency, DeadLockHolderIsStolen) {
    auto engine = make_engine(64ull << 20);
    auto setup = make_mem(*engine);
    uint64_t ns = ns_create(setup->node(0));
    BTree base(*setup, 0, ns);
    base.init_empty();
    for (int i = 0; i < 2000; i++) base.insert(K(i * 2, 1, 1));

    // A client locks a leaf, writes a new body (but not the lock word) and dies,
    // like a crash between the two WRITEs of a publish.
    auto victim = make_mem(*engine);
    auto* vt = dynamic_cast<InProcTransport*>(&victim->node(0));
    ASSERT_NE(vt, nullptr);
    GAddr leaf = leaf_for(*victim, base.root(), K(1001, 1, 1));
    Node n;
    victim->read(leaf, &n, kNodeSize);
    uint64_t v = lock_version(n.lock);
    uint64_t locked = make_lock_word(v, vt->client_id(), true);
    ASSERT_EQ(vt->cas(gaddr_offset(leaf), make_lock_word(v, 0, false), locked), make_lock_word(v, 0, false));
    // New body: insert K(1001) by hand, body_version v+1.
    size_t pos = std::lower_bound(n.leaf, n.leaf + n.count, K(1001, 1, 1)) - n.leaf;
    ASSERT_LT(n.count, kLeafCapacity);
    std::memmove(&n.leaf[pos + 1], &n.leaf[pos], (n.count - pos) * sizeof(EntryKey));
    n.leaf[pos] = K(1001, 1, 1);
    n.count++;
    tree::seal_node(n, v + 1);
    vt->write(gaddr_offset(leaf) + 8, reinterpret_cast<uint8_t*>(&n) + 8, kNodeSize - 8);
    Node probe;
    victim->read(leaf, &probe, kNodeSize);
    EXPECT_TRUE(lock_held(probe.lock));

    // A live holder is waited for, bounded by the op timeout.
    {
        tree::TreeOptions o;
        o.op_timeout_ms = 300;
        Client c(*engine, ns, o);
        auto t0 = std::chrono::steady_clock::now();
        try {
            c.tree->insert(K(1003, 1, 1));
            FAIL() << "insert into a node locked by a live client succeeded";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
        }
        EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(250));
    }

    uint64_t steals = stats().lock_steals.load();
    vt->kill_session();
    std::atomic<bool> done{false};
    std::thread other([&] {
        Client c(*engine, ns);
        EXPECT_TRUE(c.tree->insert(K(1003, 1, 1)));
        done = true;
    });
    other.join();
    EXPECT_TRUE(done.load());
    EXPECT_GT(stats().lock_steals.load(), steals);
    // The dead client's body survived (it was fully written), and the tree is sound.
    EXPECT_TRUE(base.contains(K(1001, 1, 1)));
    EXPECT_TRUE(base.contains(K(1003, 1, 1)));
    auto info = base.check();
    EXPECT_EQ(info.entries, 2002u);
    victim->read(leaf, &probe, kNodeSize);
    EXPECT_FALSE(lock_held(probe.lock));
    EXPECT_GT(lock_version(probe.lock), v + 1);
}

TEST(TreeConcurrency, DeadLockHolderWithOldBodyIsStolenByReader) {
    auto engine = make_engine(64ull << 20);
    auto setup = make_mem(*engine);
    uint64_t ns = ns_create(setup->node(0));
    BTree base(*setup, 0, ns);
    base.init_empty();
    for (int i = 0; i < 500; i++) base.insert(K(i, 1, 1));
    auto victim = make_mem(*engine);
    auto* vt = dynamic_cast<InProcTransport*>(&victim->node(0));
    GAddr leaf = leaf_for(*victim, base.root(), K(10, 1, 1));
    Node n;
    victim->read(leaf, &n, kNodeSize);
    uint64_t v = lock_version(n.lock);
    ASSERT_EQ(vt->cas(gaddr_offset(leaf), n.lock, make_lock_word(v, vt->client_id(), true)), n.lock);
    vt->kill_session();
    // A plain reader (scan) gets through after the grace period.
    Client c(*engine, ns);
    auto got = scan_all(*c.tree, neg_inf_key(), pos_inf_key(), false);
    EXPECT_EQ(got.size(), 500u);
    EXPECT_NO_THROW(base.check());
}

}  // namespace
