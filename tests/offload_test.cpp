// Offloaded operations (OFFLOAD RPC executed by the memory node on its pool)
// against the in-process engine, alone and concurrently with one-sided ones.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "tree_test_util.h"

namespace dex::testing {
namespace {

struct Fixture {
    Fixture() : Fixture(make_engine(64 << 20)) {}
    explicit Fixture(std::unique_ptr<memnode::Engine> e) : engine(std::move(e)) {}
    std::unique_ptr<memnode::Engine> engine;
    std::unique_ptr<RemoteMemory> mem = make_mem(*engine);
    uint64_t ns = ns_create(mem->node(0));
    std::unique_ptr<tree::BTree> t = std::make_unique<tree::BTree>(*mem, 0, ns);
    void load(int64_t n, int64_t step = 2) {
        tree::BTree::BulkLoader bl(*t, 0.7);
        for (int64_t i = 0; i < n; i += step) bl.add(K(i, 1, 1));
        bl.finish();
    }
    // a node at level <= placement level covering k: the root if the tree is low
    GAddr start(int& level) {
        tree::TreeInfo i = t->info();
        level = static_cast<int>(i.height) - 1;
        EXPECT_LE(level, t->placement_level());
        return i.root;
    }
};

TEST(Offload, LeafReadFindsTheCoveringLeaf) {
    Fixture f;
    f.load(20000);
    int level;
    GAddr s = f.start(level);
    for (int64_t k : {0, 2, 1000, 19998, 5001}) {
        Node leaf;
        ASSERT_EQ(f.t->offload(net::kOffloadLeaf, s, level, K(k, 1, 1), &leaf), net::kOffloadDone);
        EXPECT_EQ(leaf.level, 0);
        EXPECT_LE(compare_keys(leaf.low, K(k, 1, 1)), 0);
        EXPECT_TRUE(tree::key_below_high(K(k, 1, 1), leaf));
        bool found = std::binary_search(leaf.leaf, leaf.leaf + leaf.count, K(k, 1, 1));
        EXPECT_EQ(found, k % 2 == 0) << k;
    }
    EXPECT_GE(f.engine->stats().offloads, 5u);
}

TEST(Offload, InsertAndDeleteWithoutStructureChanges) {
    Fixture f;
    f.load(20000);
    int level;
    GAddr s = f.start(level);
    EXPECT_EQ(f.t->offload(net::kOffloadInsert, s, level, K(101, 1, 1)), net::kOffloadDone);
    EXPECT_EQ(f.t->offload(net::kOffloadInsert, s, level, K(101, 1, 1)), net::kOffloadNoop);
    EXPECT_TRUE(f.t->contains(K(101, 1, 1)));
    EXPECT_EQ(f.t->offload(net::kOffloadDelete, s, level, K(100, 1, 1)), net::kOffloadDone);
    EXPECT_EQ(f.t->offload(net::kOffloadDelete, s, level, K(100, 1, 1)), net::kOffloadNoop);
    EXPECT_FALSE(f.t->contains(K(100, 1, 1)));
    // fill one leaf: the insert that would split it is refused and changes nothing
    int64_t k = 1;
    uint8_t st;
    while ((st = f.t->offload(net::kOffloadInsert, s, level, K(k, 1, 1))) != net::kOffloadNeedsSmo) {
        ASSERT_TRUE(st == net::kOffloadDone || st == net::kOffloadNoop);
        k += 2;
        ASSERT_LT(k, 1000);
    }
    EXPECT_FALSE(f.t->contains(K(k, 1, 1)));
    EXPECT_TRUE(f.t->insert(K(k, 1, 1)));  // the compute side's normal path splits
    tree::TreeInfo info = f.t->check();
    EXPECT_EQ(info.entries, 10000u + (k - 1) / 2 + 1);
}

TEST(Offload, DeleteThatWouldEmptyALeafIsRefused) {
    Fixture f;
    f.t->init_empty();
    ASSERT_TRUE(f.t->insert(K(5, 1, 1)));
    EXPECT_EQ(f.t->offload(net::kOffloadDelete, f.t->refresh_root(), 0, K(5, 1, 1)), net::kOffloadNeedsSmo);
    EXPECT_TRUE(f.t->contains(K(5, 1, 1)));
}

TEST(Offload, PathLeavingTheMemoryNodeRestarts) {
    std::vector<std::unique_ptr<memnode::Engine>> engines;
    std::vector<std::unique_ptr<Transport>> v;
    for (int i = 0; i < 2; i++) {
        engines.push_back(make_engine(64 << 20));
        v.push_back(std::make_unique<InProcTransport>(*engines.back()));
    }
    RemoteMemory mem(std::move(v));
    std::vector<uint64_t> ns{ns_create(mem.node(0)), ns_create(mem.node(1))};
    tree::BTree t(mem, 0, ns[0]);
    t.set_placement(ns, 1);
    tree::BTree::BulkLoader bl(t, 0.9);
    for (int64_t i = 0; i < 40000; i++) bl.add(K(i, 1, 1));
    bl.finish();
    tree::TreeInfo info = t.check();
    ASSERT_GT(info.height, 2u);  // root above the placement level, subtrees on both nodes
    ASSERT_GT(info.subtrees_on[1], 0u);
    // the root is not a subtree root: offloading from it would cross nodes
    EXPECT_THROW(t.offload(net::kOffloadLeaf, info.root, static_cast<int>(info.height) - 1, K(1, 1, 1)), Error);
    // from a level-1 node on node 0, a key that lives on node 1 leaves the node
    tree::NodeIO io(mem, 0, {});
    tree::Deadline dl(5000);
    Node root, sub;
    ASSERT_EQ(io.read(info.root, root, dl), tree::NodeIO::Read::kOk);
    GAddr a = root.inner[0].child;
    while (true) {
        ASSERT_EQ(io.read(a, sub, dl), tree::NodeIO::Read::kOk);
        if (sub.level == 1) break;
        a = sub.inner[0].child;
    }
    Node leaf;
    EXPECT_EQ(t.offload(net::kOffloadLeaf, a, 1, K(0, 1, 1), &leaf), net::kOffloadDone);
    EXPECT_EQ(t.offload(net::kOffloadLeaf, a, 1, K(39999, 1, 1), &leaf), net::kOffloadRestart);
}

// Offloaded and one-sided inserts/deletes on the same leaves at once: the
// memory node takes the same lock words, so nothing is lost.
TEST(Offload, ConcurrentWithOneSidedWriters) {
    Fixture f;
    f.load(40000, 4);  // keys 0, 4, 8, ...
    const int kThreads = 4;
    std::atomic<int> errors{0};
    std::vector<std::thread> th;
    for (int c = 0; c < kThreads; c++) {
        th.emplace_back([&, c] {
            auto mem = make_mem(*f.engine);
            tree::BTree t(*mem, 0, f.ns);
            bool offloaded = c % 2 == 0;
            try {
                for (int64_t i = c + 1; i < 40000; i += 4) {
                    if (i % 4 == 0) continue;
                    EntryKey k = K(i, 1, 1);
                    bool done = false;
                    if (offloaded) {
                        tree::TreeInfo inf;
                        GAddr root = t.refresh_root();
                        Node rn;
                        tree::NodeIO io(*mem, 0, {});
                        if (io.read(root, rn, tree::Deadline(5000)) == tree::NodeIO::Read::kOk &&
                            rn.level <= t.placement_level()) {
                            uint8_t st = t.offload(net::kOffloadInsert, root, rn.level, k);
                            if (st == net::kOffloadNoop) errors++;
                            done = st == net::kOffloadDone;
                        }
                    }
                    if (!done && !t.insert(k)) errors++;
                }
            } catch (const std::exception& e) {
                ADD_FAILURE() << e.what();
                errors++;
            }
        });
    }
    for (auto& x : th) x.join();
    EXPECT_EQ(errors.load(), 0);
    tree::TreeInfo info = f.t->check();
    std::set<EntryKey> model;
    for (int64_t i = 0; i < 40000; i++) model.insert(K(i, 1, 1));
    EXPECT_EQ(info.entries, model.size());
    EXPECT_EQ(scan_all(*f.t, neg_inf_key(), pos_inf_key(), false),
              model_range(model, neg_inf_key(), pos_inf_key(), false));
    EXPECT_GT(f.engine->stats().offloads, 1000u);
}

}  // namespace
}  // namespace dex::testing

#include "cache/cache.h"
#include "cache/region.h"
#include "common/stats.h"
#include "tree/offload_policy.h"

namespace dex::testing {
namespace {

// Lookups and forward scans through a tiny node cache with offloading forced
// on: misses below the placement level are answered by the memory node, and
// every answer is still exact while other clients write.
TEST(Offload, CachedDescentOffloadsMissesAndStaysExact) {
    Fixture f;
    f.load(60000);
    size_t bytes = cache::CacheRegion::bytes_for(size_t(64) * kNodeSize);
    std::unique_ptr<char[]> rmem(new char[bytes]);
    cache::AdmissionPolicy ap;
    ap.leaf_admission = 0.1;
    cache::CacheRegion* region = cache::CacheRegion::init(rmem.get(), bytes, ap);
    cache::Cache c(*region, 7);
    tree::OffloadPolicy pol;
    pol.set_mode(tree::OffloadMode::kOn);
    tree::TreeOptions o;
    o.cache = &c;
    o.offload = &pol;
    auto mem = make_mem(*f.engine);
    tree::BTree t(*mem, 0, f.ns, o);
    const uint64_t off0 = stats().offloads.load();
    std::atomic<bool> stop{false};
    std::thread writer([&] {  // odd keys come and go meanwhile (one-sided, uncached client)
        auto wm = make_mem(*f.engine);
        tree::BTree w(*wm, 0, f.ns);
        for (int round = 0; !stop; round++)
            for (int64_t k = 1; k < 60000 && !stop; k += 50) {
                EntryKey key = K(k, 1, 1);
                if (round % 2 == 0) w.insert(key); else w.remove(&key, 1);
            }
    });
    for (int64_t k = 0; k < 60000; k += 14) EXPECT_EQ(t.contains(K(k, 1, 1)), true) << k;
    auto s = t.scan(K(1000, 0, 0), K(3000, 0, 0), false);
    std::vector<EntryKey> batch, got;
    while (s->next(batch))
        for (auto& e : batch)
            if (e.value % 2 == 0) got.push_back(e);  // even keys never change
    stop = true;
    writer.join();
    EXPECT_EQ(got.size(), 1000u);
    EXPECT_GT(stats().offloads.load() - off0, 100u);
    // auto mode with offloads much slower than reads: no more offloads
    pol.set_mode(tree::OffloadMode::kAuto);
    for (int i = 0; i < 50; i++) pol.record_offload(1e6), pol.record_remote_read(1);
    const uint64_t off1 = stats().offloads.load();
    for (int64_t k = 0; k < 60000; k += 14) EXPECT_TRUE(t.contains(K(k, 1, 1)));
    EXPECT_LT(stats().offloads.load() - off1, 100u);  // only the ~1% contrary actions
    f.t->check();
}

// Offloading always looks cheaper than one-sided reads (a million times),
// and no contrary draw: which way a timed policy goes depends on the machine.
tree::OffloadPolicy::Params offload_pinned() {
    tree::OffloadPolicy::Params p;
    p.cache_factor = 1e6;
    p.contrary = 0;
    return p;
}

// A node cache of `frames` frames with every leaf admitted, for the tests below.
struct CachedClient {
    std::unique_ptr<char[]> rmem;
    std::unique_ptr<cache::Cache> c;
    tree::OffloadPolicy pol;
    std::unique_ptr<RemoteMemory> mem;
    std::unique_ptr<tree::BTree> t;
    CachedClient(Fixture& f, size_t frames, double leaf_admission, tree::OffloadMode mode,
                 const tree::OffloadPolicy::Params& pp = {})
        : pol(pp) {
        size_t bytes = cache::CacheRegion::bytes_for(frames * kNodeSize);
        rmem.reset(new char[bytes]);
        cache::AdmissionPolicy ap;
        ap.leaf_admission = leaf_admission;
        c = std::make_unique<cache::Cache>(*cache::CacheRegion::init(rmem.get(), bytes, ap), 11);
        open(f, mode);
    }
    // Another session of the same compute server: its own handle on
    // `other`'s cache region, with admission policy `ap`.
    CachedClient(Fixture& f, CachedClient& other, const cache::AdmissionPolicy& ap, tree::OffloadMode mode,
                 const tree::OffloadPolicy::Params& pp = {})
        : pol(pp) {
        c = std::make_unique<cache::Cache>(other.c->region(), 12);
        c->set_policy(ap);
        open(f, mode);
    }
    // A measured history in which offloads took 1 us and remote reads 1 s.
    void favour_offloads() {
        for (int i = 0; i < 50; i++) pol.record_offload(1), pol.record_remote_read(1e6);
    }

  private:
    void open(Fixture& f, tree::OffloadMode mode) {
        pol.set_mode(mode);
        tree::TreeOptions o;
        o.cache = c.get();
        o.offload = &pol;
        mem = make_mem(*f.engine);
        t = std::make_unique<tree::BTree>(*mem, 0, f.ns, o);
    }
};

// Inserts and deletes through a tiny cache with offloading forced on: the
// memory node does those that need no structure modification, the compute
// side the splits (full leaves) and merges (emptied leaves) it answers "needs
// a split/merge" for -- while a one-sided client writes next to it. Return
// values (inserted / already there, deleted / absent) and the final contents
// must be exact.
TEST(Offload, CachedWritesAreOffloadedAndStayExact) {
    Fixture f;
    f.load(40000);  // even keys, leaves 70% full: odd inserts split them
    CachedClient cc(f, 64, 0.1, tree::OffloadMode::kOn);
    tree::BTree& t = *cc.t;
    const uint64_t off0 = f.engine->stats().offloads;
    std::atomic<bool> failed{false};
    std::thread other([&] {  // one-sided, uncached: odd keys of the upper half
        auto wm = make_mem(*f.engine);
        tree::BTree w(*wm, 0, f.ns);
        for (int64_t k = 20001; k < 40000; k += 2)
            if (!w.insert(K(k, 1, 1))) failed = true;
        for (int64_t k = 20001; k < 40000; k += 4) {
            EntryKey key = K(k, 1, 1);
            if (w.remove(&key, 1) != 1) failed = true;
        }
    });
    for (int64_t k = 1; k < 20000; k += 2) ASSERT_TRUE(t.insert(K(k, 1, 1))) << k;
    for (int64_t k = 1; k < 20000; k += 2) ASSERT_FALSE(t.insert(K(k, 1, 1))) << k;  // already there
    for (int64_t k = 0; k < 6000; k++) {  // empties leaves: merges on the compute side
        EntryKey key = K(k, 1, 1);
        ASSERT_EQ(t.remove(&key, 1), 1u) << k;
    }
    for (int64_t k = 0; k < 6000; k += 7) {
        EntryKey key = K(k, 1, 1);
        ASSERT_EQ(t.remove(&key, 1), 0u) << k;  // absent
    }
    other.join();
    EXPECT_FALSE(failed.load());
    std::set<EntryKey> model;
    for (int64_t k = 6000; k < 20000; k++) model.insert(K(k, 1, 1));
    for (int64_t k = 20000; k < 40000; k++)
        if (k % 2 == 0 || (k - 20001) % 4 != 0) model.insert(K(k, 1, 1));
    tree::TreeInfo info = f.t->check();
    EXPECT_EQ(info.entries, model.size());
    EXPECT_EQ(scan_all(*f.t, neg_inf_key(), pos_inf_key(), false),
              model_range(model, neg_inf_key(), pos_inf_key(), false));
    for (int64_t k = 0; k < 40000; k += 13) EXPECT_EQ(t.contains(K(k, 1, 1)), model.count(K(k, 1, 1)) == 1) << k;
    // most writes missed the 64-frame cache and went to the memory node
    EXPECT_GT(f.engine->stats().offloads - off0, 10000u);
    EXPECT_GT(cc.pol.offloads_chosen(), 10000u);
}

// DEX 6.2: a leaf the memory node changed is not served from the cache
// afterwards (without the invalidation, the cached leaf would still miss the
// new entry and still hold the deleted one).
TEST(Offload, OffloadedWriteInvalidatesTheCachedLeaf) {
    Fixture f;
    f.load(20000);
    CachedClient cc(f, 4096, 1.0, tree::OffloadMode::kOff);
    tree::BTree& t = *cc.t;
    for (int64_t k = 0; k < 20000; k += 2) ASSERT_TRUE(t.contains(K(k, 1, 1)));  // every leaf cached
    ASSERT_FALSE(t.contains(K(777, 1, 1)));
    tree::TreeInfo i = t.info();
    ASSERT_LE(static_cast<int>(i.height) - 1, t.placement_level());
    EXPECT_EQ(t.offload(net::kOffloadInsert, i.root, static_cast<int>(i.height) - 1, K(777, 1, 1)),
              net::kOffloadDone);
    EXPECT_EQ(t.offload(net::kOffloadDelete, i.root, static_cast<int>(i.height) - 1, K(778, 1, 1)),
              net::kOffloadDone);
    EXPECT_TRUE(t.contains(K(777, 1, 1)));
    EXPECT_FALSE(t.contains(K(778, 1, 1)));
}

// auto, closed loop: a memory node whose CPU is busy (each offload costs
// 2 ms of its time) makes the measured offload latency rise above one-sided
// reads, and writes that miss the cache go one-sided again -- only the ~1%
// contrary decisions still offload. The same run against an idle memory node
// offloads a large share of them (over 20%; in-process, offloads and one-sided
// reads cost about the same, so the exact share is timing).
TEST(Offload, AutoShiftsBackWhenTheMemoryNodeIsSlow) {
    for (uint32_t work_us : {2000u, 0u}) {
        memnode::EngineOptions eo;
        eo.pool_bytes = 64 << 20;
        eo.try_hugepages = false;
        eo.touch_pool = false;
        eo.offload_work_us = work_us;
        Fixture f(std::make_unique<memnode::Engine>(eo));
        f.load(40000);
        CachedClient cc(f, 64, 0.1, tree::OffloadMode::kAuto);
        const uint64_t off0 = f.engine->stats().offloads;
        const int64_t n = work_us ? 6000 : 20000;
        for (int64_t k = 1; k < n; k += 2) ASSERT_TRUE(cc.t->insert(K(k, 1, 1)));
        const uint64_t offloads = f.engine->stats().offloads - off0;
        const uint64_t decisions = cc.pol.decisions();
        ASSERT_GT(decisions, 1000u);
        if (work_us)
            EXPECT_LT(offloads, decisions * 4 / 100) << offloads << " of " << decisions << " decisions offloaded";
        else
            EXPECT_GT(offloads, decisions / 5) << offloads << " of " << decisions << " decisions offloaded";
        f.t->check();
    }
}

// auto: a cache with frames to spare fetches what it misses (no eviction, and
// the node serves later hits) even when offloading looks cheaper; once it is
// full, the same misses are offloaded.
TEST(Offload, AutoFetchesWhileTheCacheHasRoom) {
    Fixture f;
    f.load(40000);
    CachedClient cc(f, 4096, 1.0, tree::OffloadMode::kAuto);
    cc.favour_offloads();
    const uint64_t off0 = f.engine->stats().offloads;
    for (int64_t k = 0; k < 40000; k += 10) ASSERT_TRUE(cc.t->contains(K(k, 1, 1)));
    EXPECT_EQ(f.engine->stats().offloads - off0, 0u);
    EXPECT_EQ(cc.pol.decisions(), 0u);  // while it has room the policy is not even asked
    // Fewer frames than level-1 nodes. Its policy is fixed on offloading
    // (one-sided reads look a million times dearer, never a contrary choice):
    // which way a timed policy goes depends on the machine, and a miss it
    // answers by fetching would cache the node for the neighbouring keys.
    CachedClient small(f, 8, 1.0, tree::OffloadMode::kAuto, offload_pinned());
    for (int64_t k = 0; k < 40000; k += 100) ASSERT_TRUE(small.t->contains(K(k, 1, 1)));  // fills it
    ASSERT_FALSE(small.c->has_room());
    const uint64_t off1 = f.engine->stats().offloads, dec1 = small.pol.decisions();
    for (int64_t k = 0; k < 40000; k += 10) ASSERT_TRUE(small.t->contains(K(k, 1, 1)));
    // Full: misses go to the policy, and each one it offloads reaches the
    // memory node (nothing is fetched, so the same nodes keep missing).
    const uint64_t asked = small.pol.decisions() - dec1, offloaded = f.engine->stats().offloads - off1;
    EXPECT_GT(asked, 1000u);
    EXPECT_EQ(offloaded, asked);
}

// A write that misses its leaf while offloading is chosen: the memory node
// does it (one round trip, no one-sided lock), and the leaf image it returns
// is admitted, so that the next write there finds the leaf cached and is one
// offload again, and reading it back needs no remote read. Without the
// admission the first insert fetched the leaf and wrote one-sided (read, CAS,
// publish: three round trips).
TEST(Offload, WriteThatMissesItsLeafIsOffloadedAndAdmitsIt) {
    Fixture f;
    f.load(40000);  // even keys, leaves 70% full: two more entries never split one
    CachedClient cc(f, 4096, 1.0, tree::OffloadMode::kAuto, offload_pinned());
    cc.favour_offloads();
    ASSERT_TRUE(cc.c->has_room());
    const uint64_t off0 = stats().offloads.load(), cas0 = stats().remote_atomics.load();
    const uint64_t adm0 = stats().admissions.load();
    int inserts = 0;
    for (int64_t k = 1; k < 40000; k += 400) {
        ASSERT_TRUE(cc.t->insert(K(k, 1, 1))) << k;  // a miss at the leaf
        ASSERT_TRUE(cc.t->insert(K(k + 2, 1, 1))) << k;  // the same leaf, now cached
        inserts += 2;
    }
    EXPECT_EQ(stats().offloads.load() - off0, static_cast<uint64_t>(inserts));
    EXPECT_EQ(stats().remote_atomics.load() - cas0, 0u) << "a write went one-sided";
    EXPECT_GE(stats().admissions.load() - adm0, static_cast<uint64_t>(inserts / 2));  // every missed leaf
    const uint64_t reads0 = stats().remote_reads.load();
    for (int64_t k = 1; k < 40000; k += 400) {
        EXPECT_TRUE(cc.t->contains(K(k, 1, 1))) << k;
        EXPECT_TRUE(cc.t->contains(K(k + 2, 1, 1))) << k;
    }
    EXPECT_EQ(stats().remote_reads.load() - reads0, 0u) << "a written leaf was not cached";
    EXPECT_EQ(f.t->check().entries, 20000u + inserts);
}

// Two sessions over one node cache: one caches leaves, the other runs the
// inner-only policy (dex.cache_leaves = off), which reads every leaf
// remotely even where a frame of it exists. The inner-only session's writes
// at those leaves are offloaded at the "miss" and must finish: before, the
// offload saw the other session's frame, restarted the descent to use it,
// the descent ignored it again, and the write looped until the operation's
// timeout. The leaf-caching session then sees each write in its frames
// (refreshed from the memory node's image), with no remote read.
TEST(Offload, InnerOnlyWriteAtALeafAnotherSessionCaches) {
    Fixture f;
    f.load(40000);  // even keys, leaves 70% full: the odd inserts below never split one
    CachedClient cc(f, 4096, 1.0, tree::OffloadMode::kAuto, offload_pinned());
    for (int64_t k = 0; k < 40000; k += 2) ASSERT_TRUE(cc.t->contains(K(k, 1, 1)));  // every leaf cached
    cache::AdmissionPolicy inner_only;
    inner_only.cache_leaves = false;
    CachedClient s2(f, cc, inner_only, tree::OffloadMode::kAuto, offload_pinned());
    s2.favour_offloads();
    tree::BTree& t2 = *s2.t;
    t2.set_op_timeout(2000);  // a looping write fails in 2 s, not 30
    const uint64_t off0 = stats().offloads.load();
    int writes = 0;
    for (int64_t k = 1; k < 40000; k += 400) {
        ASSERT_TRUE(t2.insert(K(k, 1, 1))) << k;
        EntryKey old = K(k - 1, 1, 1);
        ASSERT_EQ(t2.remove(&old, 1), 1u) << k;  // an update's old version
        writes += 2;
    }
    EXPECT_GE(stats().offloads.load() - off0, static_cast<uint64_t>(writes)) << "the writes went one-sided";
    const uint64_t reads0 = stats().remote_reads.load();
    for (int64_t k = 1; k < 40000; k += 400) {
        EXPECT_TRUE(cc.t->contains(K(k, 1, 1))) << k;
        EXPECT_FALSE(cc.t->contains(K(k - 1, 1, 1))) << k;
    }
    EXPECT_EQ(stats().remote_reads.load() - reads0, 0u) << "a frame was dropped instead of refreshed";
    EXPECT_EQ(f.t->check().entries, 20000u);
}

}  // namespace
}  // namespace dex::testing
