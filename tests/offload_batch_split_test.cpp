// Memory-node splits inside batched inserts (OFFLOAD_BATCH_SPLIT; src/README.md
// "Offloading", batched offloaded inserts): a batch whose leaves fill up is
// split by the memory node in the same round trip instead of coming back
// entry by entry. Against in-process memory nodes: ascending and random
// batches (round trips against the old OFFLOAD_BATCH), the cached parent, a
// full parent, out of space, an older memory node, concurrent one-sided
// writers, three memory nodes with placement.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "cache/cache.h"
#include "cache/region.h"
#include "common/stats.h"
#include "tree/offload_policy.h"
#include "tree_test_util.h"

namespace dex::testing {
namespace {

using tree::BTree;

std::mutex g_log_mu;
std::vector<GAddr> g_logged;
void record_changes(const GAddr* nodes, size_t n) {
    std::lock_guard<std::mutex> g(g_log_mu);
    g_logged.insert(g_logged.end(), nodes, nodes + n);
}

// A memory node as an older one looks (no kHelloOffloadBatchSplit; with
// `single_split` false no kHelloOffloadSplit either); counts the
// OFFLOAD_BATCH_SPLIT frames it is sent.
class Older final : public InProcForwarder {
public:
    Older(memnode::Engine& e, bool single_split) : InProcForwarder(e), single_split_(single_split) {}
    std::vector<uint8_t> rpc(net::Op op, const void* p, uint32_t l) override {
        if (op == net::kOpOffloadBatchSplit) batch_splits_sent++;
        return in_.rpc(op, p, l);
    }
    bool offload_writes_allowed() override { return in_.offload_writes_allowed(); }
    bool offload_batch_allowed() override { return in_.offload_batch_allowed(); }
    bool offload_split_allowed() override { return single_split_ && in_.offload_split_allowed(); }
    std::atomic<int> batch_splits_sent{0};

private:
    bool single_split_;
};

// A memory node whose answer to the next OFFLOAD_BATCH_SPLIT is lost (after
// it ran: leaves split, parents changed), as a timeout would lose it.
class LoseAnswer final : public InProcForwarder {
public:
    explicit LoseAnswer(memnode::Engine& e) : InProcForwarder(e) {}
    std::vector<uint8_t> rpc(net::Op op, const void* p, uint32_t l) override {
        auto r = in_.rpc(op, p, l);
        if (op == net::kOpOffloadBatchSplit && lose.exchange(false))
            throw Error(ErrorCode::kTimeout, "test: the batch's answer is lost");
        return r;
    }
    bool offload_writes_allowed() override { return in_.offload_writes_allowed(); }
    bool offload_batch_allowed() override { return in_.offload_batch_allowed(); }
    bool offload_split_allowed() override { return in_.offload_split_allowed(); }
    bool offload_batch_split_allowed() override { return in_.offload_batch_split_allowed(); }
    std::atomic<bool> lose{false};
};

// `nodes` in-process memory nodes, one tree over them (placement level 1 if
// several), bulk-loaded with even keys 0 .. 2*(count-1) at `fill`.
struct Nodes {
    std::vector<std::unique_ptr<memnode::Engine>> engines;
    std::unique_ptr<RemoteMemory> mem;
    std::vector<uint64_t> ns;
    std::set<EntryKey> model;
    Nodes(int nodes, int64_t count, double fill, uint64_t pool_bytes = 64 << 20) {
        std::vector<std::unique_ptr<Transport>> v;
        for (int i = 0; i < nodes; i++) {
            engines.push_back(make_engine(pool_bytes));
            v.push_back(std::make_unique<InProcTransport>(*engines.back()));
        }
        mem = std::make_unique<RemoteMemory>(std::move(v));
        for (int i = 0; i < nodes; i++) ns.push_back(ns_create(mem->node(static_cast<uint32_t>(i))));
        auto t = plain();
        BTree::BulkLoader bl(*t, fill);
        for (int64_t i = 0; i < count; i++) {
            bl.add(K(2 * i, 1, 1));
            model.insert(K(2 * i, 1, 1));
        }
        bl.finish();
    }
    std::unique_ptr<BTree> plain(RemoteMemory* m = nullptr) {
        auto t = std::make_unique<BTree>(m ? *m : *mem, 0, ns[0]);
        if (ns.size() > 1) t->set_placement(ns, 1);
        return t;
    }
    void expect_tree_is_model() {
        auto t = plain();
        tree::TreeInfo info = t->check();
        EXPECT_EQ(info.entries, model.size());
        EXPECT_EQ(info.missing_downlinks, 0u);
        EXPECT_EQ(scan_all(*t, neg_inf_key(), pos_inf_key(), false),
                  model_range(model, neg_inf_key(), pos_inf_key(), false));
    }
};

// A compute server: node cache admitting every leaf, offloading on; `newer`:
// its memory nodes announce OFFLOAD_BATCH_SPLIT (else they look older).
struct Client {
    std::unique_ptr<char[]> rmem;
    std::unique_ptr<cache::Cache> c;
    tree::OffloadPolicy pol;
    std::unique_ptr<RemoteMemory> mem;
    std::unique_ptr<BTree> t;
    std::vector<Older*> older;
    LoseAnswer* losing = nullptr;
    Client(Nodes& n, bool newer, bool single_split = true, size_t frames = 8192, bool lossy = false) {
        size_t bytes = cache::CacheRegion::bytes_for(frames * kNodeSize);
        rmem.reset(new char[bytes]);
        cache::AdmissionPolicy ap;
        ap.leaf_admission = 1.0;
        c = std::make_unique<cache::Cache>(*cache::CacheRegion::init(rmem.get(), bytes, ap), 21);
        pol.set_mode(tree::OffloadMode::kOn);
        tree::TreeOptions o;
        o.cache = c.get();
        o.offload = &pol;
        o.log_changes = record_changes;
        std::vector<std::unique_ptr<Transport>> v;
        for (auto& e : n.engines) {
            if (lossy) {
                auto l = std::make_unique<LoseAnswer>(*e);
                losing = l.get();
                v.push_back(std::move(l));
            } else if (newer) {
                v.push_back(std::make_unique<InProcTransport>(*e));
            } else {
                auto o2 = std::make_unique<Older>(*e, single_split);
                older.push_back(o2.get());
                v.push_back(std::move(o2));
            }
        }
        mem = std::make_unique<RemoteMemory>(std::move(v));
        t = std::make_unique<BTree>(*mem, 0, n.ns[0], o);
        if (n.ns.size() > 1) t->set_placement(n.ns, 1);
    }
    // Every node into the cache (lookups with offloading off admit the path).
    void warm(const std::set<EntryKey>& model) {
        pol.set_mode(tree::OffloadMode::kOff);
        for (const EntryKey& k : model) ASSERT_TRUE(t->contains(k));
        pol.set_mode(tree::OffloadMode::kOn);
    }
    // One insert_batch() of `keys` (sorted here, as the glue hands them over).
    void batch(std::vector<EntryKey> keys) {
        std::sort(keys.begin(), keys.end());
        std::vector<uint64_t> lsns(keys.size(), 0);
        size_t done = 0;
        t->insert_batch(keys.data(), lsns.data(), keys.size(), UINT64_MAX, &done);
        EXPECT_EQ(done, keys.size());
    }
};

uint64_t splits() { return stats().memnode_splits.load(); }
uint64_t trips() { return stats().round_trips.load(); }

// `n` distinct odd (new) keys in [lo, hi).
std::vector<EntryKey> odd_keys(std::mt19937_64& rng, size_t n, int64_t lo, int64_t hi) {
    std::set<EntryKey> s;
    while (s.size() < n) {
        int64_t v = lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo));
        s.insert(K(v | 1, 1, 1));
    }
    return {s.begin(), s.end()};
}

// A small tree of full leaves under one root with room (11 leaves of 59,
// root capacity 39): one batch of 256 random new keys splits most leaves,
// some twice, in ONE round trip; every downlink goes into the cached root on
// the memory node, the cache keeps no stale copy, every node changed is
// logged. The old OFFLOAD_BATCH took a round trip or more per split.
TEST(BatchSplit, RandomBatchOneRoundTripAndTheCachedParentGetsTheDownlinks) {
    for (bool newer : {true, false}) {
        Nodes n(1, 600, 1.0);
        Client cl(n, newer);
        cl.warm(n.model);
        const GAddr root = cl.t->info().root;
        Node r0;
        n.mem->read(root, &r0, kNodeSize);
        ASSERT_EQ(r0.level, 1);
        ASSERT_LE(r0.count, 12u);
        std::mt19937_64 rng(3);
        std::vector<EntryKey> keys = odd_keys(rng, 256, 0, 1200);
        n.model.insert(keys.begin(), keys.end());
        g_logged.clear();
        const uint64_t t0 = trips(), s0 = splits();
        cl.batch(keys);
        const uint64_t used = trips() - t0, made = splits() - s0;
        std::printf("[ batch split ] %s: 256 random keys, %llu round trips, %llu memory-node splits\n",
                    newer ? "OFFLOAD_BATCH_SPLIT" : "OFFLOAD_BATCH", static_cast<unsigned long long>(used),
                    static_cast<unsigned long long>(made));
        Node r1;
        n.mem->read(root, &r1, kNodeSize);
        if (newer) {
            EXPECT_EQ(used, 1u) << "one OFFLOAD_BATCH_SPLIT, nothing else";
            EXPECT_GE(made, 10u);
            EXPECT_EQ(r1.count, r0.count + made) << "the root took every downlink on the memory node";
            cache::CacheRegion& R = cl.c->region();
            const uint32_t pf = R.table().lookup(root);
            ASSERT_TRUE(pf != cache::kNoFrame && pf != cache::MappingTable::kIoInProgress) << "the root stays cached";
            Node cached;
            R.copy_unswizzled(pf, cached);
            EXPECT_EQ(cached.body_version, r1.body_version) << "the cached root shows the new downlinks";
            // The next batch into the same leaves: still one round trip (its plan
            // reaches the leaves through the refreshed root).
            std::vector<EntryKey> more;
            for (const EntryKey& k : odd_keys(rng, 400, 0, 1200))
                if (!n.model.count(k) && more.size() < 100) more.push_back(k);
            n.model.insert(more.begin(), more.end());
            const uint64_t t1 = trips();
            cl.batch(more);
            EXPECT_EQ(trips() - t1, 1u);
            // Logged: the root and every leaf of the tree now (old and new).
            std::set<GAddr> logged(g_logged.begin(), g_logged.end());
            EXPECT_TRUE(logged.count(root));
            for (size_t i = 0; i < r1.count; i++) EXPECT_TRUE(logged.count(r1.inner[i].child)) << i;
        } else {
            EXPECT_GT(used, 10u) << "the old batch: a split each, one-sided";
            EXPECT_EQ(made, 0u);
        }
        n.expect_tree_is_model();
        for (const EntryKey& k : n.model) ASSERT_TRUE(cl.t->contains(k));
        expect_cache_coherent(cl.c->region(), *cl.mem);
    }
}

// Ascending batches (serial keys): everything lands in the rightmost leaf,
// which the memory node splits again and again inside the batch (later items
// move right to the new sibling). One batch: one round trip; eight batches
// with the parent filling and splitting on the compute side: far fewer round
// trips than the old batch's rounds.
TEST(BatchSplit, AscendingBatchesSplitTheRightmostLeafInPlace) {
    uint64_t per_kind[2] = {0, 0};
    for (bool newer : {true, false}) {
        Nodes n(1, 600, 1.0);
        Client cl(n, newer);
        cl.warm(n.model);
        int64_t next = 2000;
        auto batch = [&] {
            std::vector<EntryKey> keys;
            for (int i = 0; i < 256; i++) keys.push_back(K(next++, 1, 1));
            n.model.insert(keys.begin(), keys.end());
            cl.batch(keys);
        };
        const uint64_t t0 = trips(), s0 = splits();
        batch();
        if (newer) {
            EXPECT_EQ(trips() - t0, 1u);
            EXPECT_GE(splits() - s0, 256u / kLeafCapacity);
        }
        for (int b = 0; b < 7; b++) batch();
        per_kind[newer] = trips() - t0;
        std::printf("[ batch split ] %s: 2048 ascending keys, %llu round trips, %llu memory-node splits\n",
                    newer ? "OFFLOAD_BATCH_SPLIT" : "OFFLOAD_BATCH", static_cast<unsigned long long>(trips() - t0),
                    static_cast<unsigned long long>(splits() - s0));
        n.expect_tree_is_model();
        for (const EntryKey& k : n.model) ASSERT_TRUE(cl.t->contains(k));
        expect_cache_coherent(cl.c->region(), *cl.mem);
    }
    EXPECT_LT(per_kind[1] * 3, per_kind[0]);
}

// Many leaves and parents, random batches, three memory nodes with placement:
// at most one round trip per memory node per batch where no parent filled,
// far fewer in all than the old batch, the tree exact.
TEST(BatchSplit, RandomBatchesOnThreeMemoryNodes) {
    uint64_t per_kind[2] = {0, 0};
    for (bool newer : {true, false}) {
        Nodes n(3, 30000, 0.9);
        Client cl(n, newer);
        cl.warm(n.model);
        std::mt19937_64 rng(17);
        const uint64_t t0 = trips(), s0 = splits();
        for (int b = 0; b < 40; b++) {
            std::vector<EntryKey> keys = odd_keys(rng, 256, 0, 60000);
            std::vector<EntryKey> fresh;
            for (const EntryKey& k : keys)
                if (n.model.insert(k).second) fresh.push_back(k);
            cl.batch(fresh);
        }
        per_kind[newer] = trips() - t0;
        std::printf("[ batch split ] %s: 40 random batches on 3 nodes, %llu round trips, %llu memory-node splits\n",
                    newer ? "OFFLOAD_BATCH_SPLIT" : "OFFLOAD_BATCH",
                    static_cast<unsigned long long>(per_kind[newer]), static_cast<unsigned long long>(splits() - s0));
        if (newer) {
            EXPECT_GT(splits() - s0, 100u);
        }
        n.expect_tree_is_model();
        for (const EntryKey& k : n.model) ASSERT_TRUE(cl.t->contains(k));
        expect_cache_coherent(cl.c->region(), *cl.mem);
    }
    EXPECT_LT(per_kind[1] * 2, per_kind[0]);
}

// Full leaves under full parents: the memory node splits the leaves, cannot
// link the siblings, and the compute side inserts those downlinks
// (insert_parent, splitting parents); meanwhile later items reach the
// siblings through the right links. No downlink missing at the end.
TEST(BatchSplit, FullParentIsFinishedByTheComputeSide) {
    Nodes n(1, 30000, 1.0);
    Client cl(n, true);
    cl.warm(n.model);
    const uint32_t h0 = cl.t->info().height;
    std::mt19937_64 rng(23);
    const uint64_t s0 = splits();
    for (int b = 0; b < 6; b++) {
        std::vector<EntryKey> keys = odd_keys(rng, 256, 0, 60000);
        std::vector<EntryKey> fresh;
        for (const EntryKey& k : keys)
            if (n.model.insert(k).second) fresh.push_back(k);
        cl.batch(fresh);
    }
    EXPECT_GT(splits() - s0, 300u);
    EXPECT_GE(cl.t->info().height, h0);
    n.expect_tree_is_model();
    expect_cache_coherent(cl.c->region(), *cl.mem);
}

// No namespace of the tree's on the node (the same answer as a full pool):
// every item into a full leaf answers kOffloadNeedsSmo and nothing changes --
// the leaves byte for byte, the pool's use, the journal aside.
TEST(BatchSplit, NoSpaceAnswersNeedsSmoAndChangesNothing) {
    Nodes n(1, 2000, 1.0);
    auto t = n.plain();
    const GAddr root = t->info().root;
    std::vector<GAddr> leaves;
    std::vector<Node> before;
    std::vector<uint8_t> payload;
    for (uint64_t ns : {n.ns[0] + 1000, uint64_t{0}}) {
        payload.clear();
        leaves.clear();
        before.clear();
        const net::OffloadBatchSplitHeader h{ns, 3, 0};
        payload.insert(payload.end(), reinterpret_cast<const uint8_t*>(&h),
                       reinterpret_cast<const uint8_t*>(&h) + sizeof h);
        for (int64_t v : {101, 1001, 3001}) {
            const GAddr leaf = leaf_for(*n.mem, root, K(v, 1, 1));
            Node img;
            n.mem->read(leaf, &img, kNodeSize);
            ASSERT_EQ(img.count, kLeafCapacity);
            leaves.push_back(leaf);
            before.push_back(img);
            net::OffloadBatchSplitItem it{};
            it.req.start = gaddr_offset(leaf);
            it.req.tree_id = t->tree_id();
            it.req.kind = net::kOffloadInsert;
            it.split = 1;
            const EntryKey k = K(v, 1, 1);
            std::memcpy(it.req.key, &k, sizeof k);
            payload.insert(payload.end(), reinterpret_cast<const uint8_t*>(&it),
                           reinterpret_cast<const uint8_t*>(&it) + sizeof it);
        }
        const uint64_t used0 = n.engines[0]->used_bytes();
        auto resp = n.mem->node(0).rpc(net::kOpOffloadBatchSplit, payload.data(),
                                       static_cast<uint32_t>(payload.size()));
        ASSERT_EQ(resp.size(), 3 * sizeof(net::OffloadReply) + sizeof(net::OffloadBatchSplitImages))
            << "no tails, no parent images";
        for (int j = 0; j < 3; j++) {
            net::OffloadReply rep;
            std::memcpy(&rep, resp.data() + j * sizeof rep, sizeof rep);
            EXPECT_EQ(rep.status, net::kOffloadNeedsSmo);
            Node after;
            n.mem->read(leaves[j], &after, kNodeSize);
            EXPECT_EQ(std::memcmp(&before[j], &after, kNodeSize), 0);
        }
        EXPECT_EQ(n.engines[0]->used_bytes(), used0);
    }
    // A malformed batch (an item that is not an insert) changes nothing either.
    net::OffloadBatchSplitItem bad;
    std::memcpy(&bad, payload.data() + sizeof(net::OffloadBatchSplitHeader), sizeof bad);
    bad.req.kind = net::kOffloadDelete;
    std::memcpy(payload.data() + sizeof(net::OffloadBatchSplitHeader) + sizeof bad, &bad, sizeof bad);
    EXPECT_THROW(n.mem->node(0).rpc(net::kOpOffloadBatchSplit, payload.data(), static_cast<uint32_t>(payload.size())),
                 Error);
    n.expect_tree_is_model();
}

// A pool that really runs out: batches go on until ALLOC fails on the compute
// side (the memory node answered kOffloadNeedsSmo before); every entry of a
// completed batch is there, the tree is consistent.
TEST(BatchSplit, FullPoolFallsBackToTheComputeSide) {
    Nodes n(1, 2000, 1.0, 2 << 20);
    Client cl(n, true);
    cl.warm(n.model);
    const uint64_t s0 = splits();
    int64_t next = 4000;
    bool out_of_space = false;
    try {
        for (int b = 0; b < 400; b++) {
            std::vector<EntryKey> keys;
            for (int i = 0; i < 256; i++) keys.push_back(K(next + i, 1, 1));
            cl.batch(keys);
            n.model.insert(keys.begin(), keys.end());
            next += 256;
        }
    } catch (const Error& e) {
        out_of_space = e.code() == ErrorCode::kOutOfSpace;
        if (!out_of_space) ADD_FAILURE() << e.what();
    }
    EXPECT_TRUE(out_of_space);
    EXPECT_GT(splits() - s0, 100u);
    auto t = n.plain();
    t->check();  // consistent (a sibling whose downlink could not be allocated is reached by its right link)
    for (const EntryKey& k : n.model) ASSERT_TRUE(t->contains(k));
}

// Older memory nodes (no kHelloOffloadBatchSplit): never sent the op; with
// OFFLOAD_SPLIT a full leaf's first waiting entry splits it there alone, as
// before this change; without it, one-sided.
TEST(BatchSplit, OlderMemoryNodeGetsNoBatchSplitRequests) {
    for (bool single : {true, false}) {
        Nodes n(1, 5000, 0.9);
        Client cl(n, false, single);
        cl.warm(n.model);
        std::mt19937_64 rng(5);
        for (int b = 0; b < 10; b++) {
            std::vector<EntryKey> keys = odd_keys(rng, 256, 0, 10000);
            std::vector<EntryKey> fresh;
            for (const EntryKey& k : keys)
                if (n.model.insert(k).second) fresh.push_back(k);
            cl.batch(fresh);
        }
        EXPECT_EQ(cl.older[0]->batch_splits_sent.load(), 0);
        n.expect_tree_is_model();
    }
}

// A batch whose answer is lost after the memory node split its leaves: the
// error reaches the caller, the held leaf frames are made unreadable and
// dropped (no stale pre-split image stays cached, no frame stays locked), and
// the next batch -- the same entries again, now present -- and every lookup
// work; the tree is exact.
TEST(BatchSplit, LostAnswerLeavesNoStaleLeafCached) {
    Nodes n(1, 600, 1.0);
    Client cl(n, true, true, 8192, /*lossy=*/true);
    cl.warm(n.model);
    std::mt19937_64 rng(29);
    std::vector<EntryKey> keys = odd_keys(rng, 256, 0, 1200);
    const uint64_t s0 = stats().memnode_splits.load();
    cl.losing->lose = true;
    std::vector<uint64_t> lsns(keys.size(), 0);
    size_t done = 0;
    EXPECT_THROW(cl.t->insert_batch(keys.data(), lsns.data(), keys.size(), UINT64_MAX, &done), Error);
    EXPECT_EQ(stats().memnode_splits.load(), s0) << "an unknown answer is not counted";
    expect_cache_coherent(cl.c->region(), *cl.mem);
    cl.batch(keys);  // all there already (the memory node did them): no-ops
    n.model.insert(keys.begin(), keys.end());
    for (const EntryKey& k : n.model) ASSERT_TRUE(cl.t->contains(k));
    n.expect_tree_is_model();
    expect_cache_coherent(cl.c->region(), *cl.mem);
}

// Batches of one compute server next to one-sided writers of others (own
// connections, no cache) inserting into the same leaves: every key inserted
// once, nothing lost, check() clean.
TEST(BatchSplit, ConcurrentWithOneSidedWriters) {
    Nodes n(1, 20000, 0.9);
    Client cl(n, true);
    cl.warm(n.model);
    std::atomic<int> errors{0};
    std::vector<std::thread> th;
    const uint64_t s0 = splits();
    // The writers start once the first batch is done: its splits are then
    // the batch's own (a count, not a race), and the rest runs concurrently.
    std::atomic<bool> first_done{false};
    std::atomic<uint64_t> first_splits{0};
    th.emplace_back([&] {
        try {
            // keys = 1 mod 4 in batches of 256, ascending in each
            for (int64_t base = 1; base < 40000; base += 4 * 256) {
                std::vector<EntryKey> keys;
                for (int64_t v = base; v < std::min<int64_t>(base + 4 * 256, 40000); v += 4) keys.push_back(K(v, 1, 1));
                cl.batch(keys);
                if (!first_done) {
                    first_splits = splits() - s0;
                    first_done = true;
                }
            }
        } catch (const std::exception& e) {
            ADD_FAILURE() << e.what();
            errors++;
            first_done = true;
        }
    });
    for (int c = 0; c < 2; c++) {
        th.emplace_back([&, c] {
            while (!first_done) std::this_thread::yield();
            try {
                std::unique_ptr<RemoteMemory> own = make_mem(*n.engines[0]);
                auto t = n.plain(own.get());
                // keys = 3 mod 4, from both ends
                if (c == 0)
                    for (int64_t v = 3; v < 40000; v += 8) EXPECT_TRUE(t->insert(K(v, 1, 1)));
                else
                    for (int64_t v = 39999; v > 0; v -= 8) EXPECT_TRUE(t->insert(K(v, 1, 1)));
            } catch (const std::exception& e) {
                ADD_FAILURE() << e.what();
                errors++;
            }
        });
    }
    for (auto& x : th) x.join();
    EXPECT_EQ(errors.load(), 0);
    for (int64_t v = 1; v < 40000; v += 2) n.model.insert(K(v, 1, 1));
    // 256 entries into ~10 leaves 90% full: each splits (a count: nobody else
    // wrote yet). Later batches split fewer when the writers got there first.
    EXPECT_GE(first_splits.load(), 5u);
    n.expect_tree_is_model();
}

}  // namespace
}  // namespace dex::testing
