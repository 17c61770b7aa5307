// Memory-node splits of full parents (kHelloSplitParent; src/README.md
// "Offloading", memory-node splits, full parents): an offloaded insert whose
// leaf split finds the level-1 parent full has the memory node split that
// parent too and link its new sibling into the grandparent, in the insert's
// one round trip, where the compute side's split_inner + insert_parent took
// five or more. Against in-process memory nodes: fixed and slotted trees,
// the root as the parent (the compute side grows the tree), a grandparent
// that does not take the downlink, older memory nodes, concurrent writers of
// both kinds, and what standbys are told.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
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

std::mutex g_log_mu;
std::set<GAddr> g_logged;
void record_changes(const GAddr* nodes, size_t n) {
    std::lock_guard<std::mutex> g(g_log_mu);
    g_logged.insert(nodes, nodes + n);
}

// What a memory node without kHelloSplitParent announces (splits leaves,
// takes spares).
class NoParentSplit : public InProcForwarder {
public:
    explicit NoParentSplit(memnode::Engine& e) : InProcForwarder(e) {}
    bool offload_writes_allowed() override { return in_.offload_writes_allowed(); }
    bool offload_batch_allowed() override { return in_.offload_batch_allowed(); }
    bool offload_bytes_allowed() override { return in_.offload_bytes_allowed(); }
    bool offload_split_allowed() override { return in_.offload_split_allowed(); }
    bool offload_bytes_split_allowed() override { return in_.offload_bytes_split_allowed(); }
    bool split_spare_allowed() override { return in_.split_spare_allowed(); }
};

// A memory node with the capability, whose OFFLOAD_SPLIT requests arrive
// naming the parent itself as the grandparent: no level-2 node there, so no
// split parent's sibling is linked by the memory node.
class WrongGrandparent final : public NoParentSplit {
public:
    explicit WrongGrandparent(memnode::Engine& e) : NoParentSplit(e) {}
    bool split_parent_allowed() override { return in_.split_parent_allowed(); }
    std::vector<uint8_t> rpc(net::Op op, const void* p, uint32_t l) override {
        constexpr size_t kWithParentExt = sizeof(net::OffloadRequest) + sizeof(net::OffloadSplitExt) +
                                          sizeof(net::OffloadSpareExt) + sizeof(net::OffloadParentSplitExt);
        if (op != net::kOpOffloadSplit || l != kWithParentExt) return in_.rpc(op, p, l);
        std::vector<uint8_t> req(static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + l);
        net::OffloadSplitExt ext;
        std::memcpy(&ext, req.data() + sizeof(net::OffloadRequest), sizeof ext);
        net::OffloadParentSplitExt pe{ext.parent};
        std::memcpy(req.data() + l - sizeof pe, &pe, sizeof pe);
        rewritten++;
        return in_.rpc(op, req.data(), l);
    }
    int rewritten = 0;
};

enum class Node0 { kCurrent, kNoParentSplit, kWrongGrandparent };

std::unique_ptr<Transport> transport(memnode::Engine& e, Node0 kind) {
    switch (kind) {
        case Node0::kNoParentSplit: return std::make_unique<NoParentSplit>(e);
        case Node0::kWrongGrandparent: return std::make_unique<WrongGrandparent>(e);
        default: return std::make_unique<InProcTransport>(e);
    }
}

// The level-`level` nodes of a tree, left to right (first children down,
// then right links).
template <class L>
std::vector<GAddr> nodes_at(RemoteMemory& mem, GAddr root, int level) {
    Node n;
    GAddr a = root;
    mem.read(a, &n, kNodeSize);
    while (n.level > level) {
        a = L::child(n, 0);
        mem.read(a, &n, kNodeSize);
    }
    std::vector<GAddr> out;
    for (;;) {
        if (!n.is_deleted()) out.push_back(a);
        if (!n.right) return out;
        a = n.right;
        mem.read(a, &n, kNodeSize);
    }
}

// A node cache admitting every leaf and offloading on, over one memory node.
struct CachedClient {
    std::unique_ptr<char[]> rmem;
    std::unique_ptr<cache::Cache> c;
    tree::OffloadPolicy pol;
    std::unique_ptr<RemoteMemory> mem;

    CachedClient(memnode::Engine& e, Node0 kind) {
        const size_t bytes = cache::CacheRegion::bytes_for(8192 * kNodeSize);
        rmem.reset(new char[bytes]);
        cache::AdmissionPolicy ap;
        ap.leaf_admission = 1.0;
        c = std::make_unique<cache::Cache>(*cache::CacheRegion::init(rmem.get(), bytes, ap), 7);
        pol.set_mode(tree::OffloadMode::kOn);
        std::vector<std::unique_ptr<Transport>> v;
        v.push_back(transport(e, kind));
        mem = std::make_unique<RemoteMemory>(std::move(v));
    }
    tree::TreeOptions options() {
        tree::TreeOptions o;
        o.cache = c.get();
        o.offload = &pol;
        o.log_changes = record_changes;
        return o;
    }
};

// A fixed-layout tree bulk-loaded full (leaves and inner nodes) with keys
// 0, 2, 4, ... below 2 * count, and one compute server over it whose cache
// holds every node (warmed one-sided, so every insert finds its leaf cached).
struct FixedSetup {
    std::unique_ptr<memnode::Engine> engine = make_engine(64 << 20);
    std::unique_ptr<RemoteMemory> mem = make_mem(*engine);
    uint64_t ns = ns_create(mem->node(0));
    std::set<EntryKey> model;
    CachedClient cl;
    std::unique_ptr<tree::BTree> t;

    FixedSetup(int64_t count, Node0 kind) : cl(*engine, kind) {
        tree::BTree loader(*mem, 0, ns);
        {
            tree::BTree::BulkLoader bl(loader, 1.0);
            for (int64_t i = 0; i < count; i++) {
                bl.add(K(2 * i, 1, 1));
                model.insert(K(2 * i, 1, 1));
            }
            bl.finish();
        }
        t = std::make_unique<tree::BTree>(*cl.mem, 0, ns, cl.options());
        cl.pol.set_mode(tree::OffloadMode::kOff);
        for (const EntryKey& k : model) EXPECT_TRUE(t->contains(k));
        cl.pol.set_mode(tree::OffloadMode::kOn);
    }
    GAddr root() { return t->info().root; }
    // `n` random fresh odd keys below 2 * range; the round trips they took.
    uint64_t insert_random(int n, int64_t range, uint64_t seed) {
        std::mt19937_64 rng(seed);
        const uint64_t rt0 = stats().round_trips.load();
        for (int i = 0; i < n; i++) {
            const EntryKey k = K(2 * static_cast<int64_t>(rng() % range) + 1, 1, 1);
            EXPECT_EQ(t->insert(k), model.insert(k).second);
        }
        return stats().round_trips.load() - rt0;
    }
    void expect_exact() {
        tree::TreeInfo info = t->check();
        EXPECT_EQ(info.entries, model.size());
        EXPECT_EQ(info.missing_downlinks, 0u);
        EXPECT_EQ(scan_all(*t, neg_inf_key(), pos_inf_key(), false),
                  model_range(model, neg_inf_key(), pos_inf_key(), false));
        expect_cache_coherent(cl.c->region(), *cl.mem);
    }
};

// Full leaves under full parents under a root with room: the memory node
// splits the parents in the inserts' own round trips, links their new
// siblings into the root, and the new siblings are admitted from the reply
// (the handle's parent spare, its marker held across the round trip): one
// round trip per insert, where a memory node without the capability -- the
// compute side splits the parents -- takes ten more per parent split. Both
// trees are exact, the caches coherent, and every new level-1 node and the
// root were named to standbys (log_changes).
TEST(MemnodeParentSplit, FullParentsSplitInTheInsertsRoundTrip) {
    const int n = 400;
    uint64_t trips[2];
    size_t psplits[2];
    for (Node0 kind : {Node0::kCurrent, Node0::kNoParentSplit}) {
        const int i = kind == Node0::kCurrent ? 0 : 1;
        FixedSetup s(30000, kind);  // 509 full leaves, 14 full level-1 nodes, root at level 2
        ASSERT_EQ(s.t->info().height, 3u);
        const std::vector<GAddr> before = nodes_at<tree::FixedLayout>(*s.mem, s.root(), 1);
        g_logged.clear();
        trips[i] = s.insert_random(n, 30000, 7);
        const std::vector<GAddr> after = nodes_at<tree::FixedLayout>(*s.mem, s.root(), 1);
        psplits[i] = after.size() - before.size();
        EXPECT_EQ(s.t->info().height, 3u);
        for (GAddr a : after) {
            if (std::find(before.begin(), before.end(), a) == before.end())
                EXPECT_TRUE(g_logged.count(a)) << "new level-1 node " << tree::hex_addr(a) << " not logged";
        }
        EXPECT_TRUE(g_logged.count(s.root())) << "the root took downlinks: logged";
        s.expect_exact();
    }
    std::printf("[ parent split ] %d inserts, %zu parent splits: %lu round trips on the memory node, %lu without\n", n,
                psplits[0], static_cast<unsigned long>(trips[0]), static_cast<unsigned long>(trips[1]));
    EXPECT_GE(psplits[0], 10u) << "full parents did not split";
    EXPECT_EQ(psplits[0], psplits[1]) << "the same inserts split as many parents either way";
    // (+2: the handle's first parent split may come before it holds a
    // parent spare; its new sibling is then fetched once, as before)
    EXPECT_LE(trips[0], static_cast<uint64_t>(n) + 2) << "one round trip per insert, parent splits included";
    EXPECT_GT(trips[1], trips[0] + 2 * psplits[1]) << "the compute side's parent splits cost more round trips";
}

// The root is the full parent (height 2): the memory node splits it, and the
// compute side grows the tree by a level (insert_parent at level 2 finds no
// such level).
TEST(MemnodeParentSplit, FullRootParentGrowsTheTree) {
    FixedSetup s(static_cast<int64_t>(kLeafCapacity * kInnerCapacity), Node0::kCurrent);
    ASSERT_EQ(s.t->info().height, 2u);
    s.insert_random(200, static_cast<int64_t>(kLeafCapacity * kInnerCapacity), 9);
    EXPECT_EQ(s.t->info().height, 3u);
    EXPECT_GE(nodes_at<tree::FixedLayout>(*s.mem, s.root(), 1).size(), 2u);
    s.expect_exact();
}

// A grandparent that does not take the downlink (here: the request names
// the parent itself): the memory node still splits the parent, the compute
// side inserts the new sibling's downlink at level 2.
TEST(MemnodeParentSplit, GrandparentThatRefusesLeavesTheDownlinkToTheComputeSide) {
    FixedSetup s(30000, Node0::kWrongGrandparent);
    auto* fwd = dynamic_cast<WrongGrandparent*>(&s.cl.mem->node(0));
    ASSERT_NE(fwd, nullptr);
    const size_t l1 = nodes_at<tree::FixedLayout>(*s.mem, s.root(), 1).size();
    const uint64_t trips = s.insert_random(400, 30000, 7);
    EXPECT_GT(fwd->rewritten, 100);
    EXPECT_GE(nodes_at<tree::FixedLayout>(*s.mem, s.root(), 1).size(), l1 + 10);
    EXPECT_GT(trips, 400u) << "level-2 downlinks inserted one-sided";
    s.expect_exact();
}

// Concurrent writers on full parents: two backends of one compute server
// (one cache region, offloading) and two one-sided writers without a cache
// (other compute servers), disjoint keys; then every key is there exactly
// once and the tree checks clean. (No cache coherence check: the other
// servers' writes never reach this cache.)
TEST(MemnodeParentSplit, ConcurrentWritersOfBothKinds) {
    FixedSetup s(30000, Node0::kCurrent);
    cache::Cache second(s.cl.c->region(), 17);
    tree::TreeOptions o = s.cl.options();
    o.cache = &second;
    std::unique_ptr<RemoteMemory> mem2 = make_mem(*s.engine);
    tree::BTree t2(*mem2, 0, s.ns, o);
    std::vector<std::thread> th;
    for (int w = 0; w < 4; w++)
        th.emplace_back([&, w] {
            std::unique_ptr<RemoteMemory> own;
            std::unique_ptr<tree::BTree> plain;
            tree::BTree* t = w == 0 ? s.t.get() : &t2;
            if (w >= 2) {
                own = make_mem(*s.engine);
                plain = std::make_unique<tree::BTree>(*own, 0, s.ns);
                t = plain.get();
            }
            for (int64_t i = 0; i < 1500; i++) EXPECT_TRUE(t->insert(K(2 * ((4 * i + w) * 5) + 1, 1, 1)));
        });
    for (auto& x : th) x.join();
    for (int64_t i = 0; i < 6000; i++) s.model.insert(K(2 * (i * 5) + 1, 1, 1));
    tree::BTree check(*s.mem, 0, s.ns);
    tree::TreeInfo info = check.check();
    EXPECT_EQ(info.entries, s.model.size());
    EXPECT_EQ(info.missing_downlinks, 0u);
    EXPECT_EQ(scan_all(check, neg_inf_key(), pos_inf_key(), false),
              model_range(s.model, neg_inf_key(), pos_inf_key(), false));
}

// A slotted tree (byte-string entries, OFFLOAD_BYTES_SPLIT): the same.
TEST(MemnodeParentSplit, SlottedFullParentsSplitInTheInsertsRoundTrip) {
    std::unique_ptr<memnode::Engine> engine = make_engine(64 << 20);
    CachedClient cl(*engine, Node0::kCurrent);
    const uint64_t ns = ns_create(cl.mem->node(0));
    tree::SlottedTree t(*cl.mem, 0, ns, cl.options());
    t.set_placement({ns}, 1);
    std::set<std::string> model;
    {
        tree::SlottedTree::BulkLoader bl(t, 1.0);
        for (uint32_t i = 0; i < 6000; i++) {
            bl.add(email_entry(2 * i));
            model.insert(email_entry(2 * i));
        }
        bl.finish();
    }
    ASSERT_GE(t.info().height, 3u);
    cl.pol.set_mode(tree::OffloadMode::kOff);
    for (const std::string& k : model) ASSERT_TRUE(t.contains(k));
    cl.pol.set_mode(tree::OffloadMode::kOn);
    const size_t l1 = nodes_at<tree::SlottedLayout>(*cl.mem, t.info().root, 1).size();
    std::mt19937_64 rng(5);
    const uint64_t rt0 = stats().round_trips.load();
    const int n = 4000;
    for (int i = 0; i < n; i++) {
        const std::string k = email_entry(static_cast<uint32_t>(rng() % 12000) | 1u, 3);  // (odd: fresh but for repeats)
        EXPECT_EQ(t.insert(k), model.insert(k).second);
    }
    const uint64_t trips = stats().round_trips.load() - rt0;
    const size_t psplits = nodes_at<tree::SlottedLayout>(*cl.mem, t.info().root, 1).size() - l1;
    EXPECT_GE(psplits, 2u) << "full parents did not split";
    EXPECT_LE(trips, static_cast<uint64_t>(n) + 2);
    std::printf("[ parent split ] slotted: %d inserts, %zu parent splits, %lu round trips\n", n, psplits,
                static_cast<unsigned long>(trips));
    expect_slotted_tree_is(t, model, cl.c->region(), *cl.mem);
    EXPECT_EQ(t.check().missing_downlinks, 0u);
}

}  // namespace
}  // namespace dex::testing
