// Memory-node splits (OFFLOAD_SPLIT; src/README.md "Offloading", memory-node
// splits): an offloaded insert that finds its leaf full splits it on the
// memory node, links the sibling into the parent when it can, and the compute
// side installs the images. Against in-process memory nodes: sequential and
// random inserts, concurrent one-sided writers and offloaders, the cached
// parent, a full parent, out of space, old memory nodes, round trips.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
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

// Nodes reported to TreeOptions::log_changes (clients of several threads).
std::mutex g_log_mu;
std::vector<GAddr> g_logged;
void record_changes(const GAddr* nodes, size_t n) {
    std::lock_guard<std::mutex> g(g_log_mu);
    g_logged.insert(g_logged.end(), nodes, nodes + n);
}

// A memory node as an older one looks: no kHelloOffloadSplit.
class NoSplit final : public InProcForwarder {
public:
    explicit NoSplit(memnode::Engine& e) : InProcForwarder(e) {}
    bool offload_writes_allowed() override { return in_.offload_writes_allowed(); }
    bool offload_batch_allowed() override { return in_.offload_batch_allowed(); }
};

struct Fixture {
    explicit Fixture(uint64_t pool_bytes = 64 << 20) : engine(make_engine(pool_bytes)) {}
    std::unique_ptr<memnode::Engine> engine;
    std::unique_ptr<RemoteMemory> mem = make_mem(*engine);
    uint64_t ns = ns_create(mem->node(0));
    std::unique_ptr<tree::BTree> t = std::make_unique<tree::BTree>(*mem, 0, ns);
    std::set<EntryKey> model;
    // keys 0, step, 2*step, ... below n at `fill`
    void load(int64_t n, int64_t step, double fill) {
        tree::BTree::BulkLoader bl(*t, fill);
        for (int64_t i = 0; i < n; i += step) {
            bl.add(K(i, 1, 1));
            model.insert(K(i, 1, 1));
        }
        bl.finish();
    }
    void expect_tree_is_model() {
        tree::TreeInfo info = t->check();
        EXPECT_EQ(info.entries, model.size());
        EXPECT_EQ(scan_all(*t, neg_inf_key(), pos_inf_key(), false),
                  model_range(model, neg_inf_key(), pos_inf_key(), false));
    }
};

// A compute server: node cache admitting every leaf (as large as `frames`),
// offloading on (`split`: its memory node announces OFFLOAD_SPLIT).
struct Client {
    std::unique_ptr<char[]> rmem;
    std::unique_ptr<cache::Cache> c;
    tree::OffloadPolicy pol;
    std::unique_ptr<RemoteMemory> mem;
    std::unique_ptr<tree::BTree> t;
    // `shared`: another backend of the same compute server (its cache region).
    Client(Fixture& f, size_t frames, bool split = true, tree::OffloadMode mode = tree::OffloadMode::kOn,
           Client* shared = nullptr) {
        if (shared) {
            c = std::make_unique<cache::Cache>(shared->c->region(), 17);
        } else {
            size_t bytes = cache::CacheRegion::bytes_for(frames * kNodeSize);
            rmem.reset(new char[bytes]);
            cache::AdmissionPolicy ap;
            ap.leaf_admission = 1.0;
            c = std::make_unique<cache::Cache>(*cache::CacheRegion::init(rmem.get(), bytes, ap), 13);
        }
        pol.set_mode(mode);
        tree::TreeOptions o;
        o.cache = c.get();
        o.offload = &pol;
        o.log_changes = record_changes;
        std::vector<std::unique_ptr<Transport>> v;
        if (split)
            v.push_back(std::make_unique<InProcTransport>(*f.engine));
        else
            v.push_back(std::make_unique<NoSplit>(*f.engine));
        mem = std::make_unique<RemoteMemory>(std::move(v));
        t = std::make_unique<tree::BTree>(*mem, 0, f.ns, o);
    }
    // Every node into the cache: lookups with offloading off fetch and
    // admit the whole path (offloaded ones would not admit the leaves), so
    // that inserts then find their leaves cached (offload_cached_write).
    void warm(const std::set<EntryKey>& model) {
        const tree::OffloadMode m = pol.mode();
        pol.set_mode(tree::OffloadMode::kOff);
        for (const EntryKey& k : model) ASSERT_TRUE(t->contains(k));
        pol.set_mode(m);
    }
};

uint64_t memnode_splits() { return stats().memnode_splits.load(); }

// Ascending keys past the end and random keys in between, through a warm
// cache: almost every full leaf is split by the memory node; the tree is
// exact and check() clean, and the cache equals remote memory.
TEST(MemnodeSplit, SequentialAndRandomInsertsSplitOnTheMemoryNode) {
    Fixture f;
    f.load(20000, 2, 0.9);
    Client cl(f, 4096);
    cl.warm(f.model);
    const uint64_t s0 = memnode_splits(), off0 = f.engine->stats().offloads;
    for (int64_t k = 20000; k < 30000; k++) {
        ASSERT_TRUE(cl.t->insert(K(k, 1, 1))) << k;
        f.model.insert(K(k, 1, 1));
    }
    const uint64_t seq_splits = memnode_splits() - s0;
    std::mt19937_64 rng(7);
    for (int i = 0; i < 8000; i++) {
        const int64_t k = 2 * static_cast<int64_t>(rng() % 10000) + 1;  // odd: new or a duplicate
        const bool fresh = f.model.insert(K(k, 1, 1)).second;
        EXPECT_EQ(cl.t->insert(K(k, 1, 1)), fresh) << k;
    }
    const uint64_t splits = memnode_splits() - s0;
    // 10,000 ascending keys fill ~10000 / (kLeafCapacity / 2) leaves
    EXPECT_GE(seq_splits, 10000 / kLeafCapacity) << "ascending inserts split on the memory node";
    EXPECT_GT(splits, seq_splits + 20) << "random inserts too";
    EXPECT_GT(f.engine->stats().offloads - off0, 15000u);
    f.expect_tree_is_model();
    for (const EntryKey& k : f.model) ASSERT_TRUE(cl.t->contains(k));
    EXPECT_EQ(f.t->check().missing_downlinks, 0u);
    expect_cache_coherent(cl.c->region(), *cl.mem);
}

// A cached full leaf under a parent with room: one round trip for the whole
// insert, split and downlink included; the cached parent shows the new
// downlink, the leaf frame the lower half, the log names all three nodes.
TEST(MemnodeSplit, OneRoundTripAndTheCachedParentShowsTheDownlink) {
    Fixture f;
    f.load(1000, 2, 0.6);  // ~15 leaves under one root
    Client cl(f, 1024);
    cl.warm(f.model);
    // Fill the leaf of key 501 (odd keys are new) until the next insert splits it.
    GAddr leaf = leaf_for(*f.mem, f.t->info().root, K(501, 1, 1));
    Node n;
    f.mem->read(leaf, &n, kNodeSize);
    std::vector<int64_t> added;
    // odd keys from the leaf's first entry on: new, and inside its fences
    for (int64_t v = key_to_int64(n.leaf[0].value) + 1; n.count < kLeafCapacity; v += 2) {
        ASSERT_TRUE(cl.t->insert(K(v, 1, 1)));
        f.model.insert(K(v, 1, 1));
        added.push_back(v);
        f.mem->read(leaf, &n, kNodeSize);
        ASSERT_TRUE(tree::key_below_high(K(v + 2, 1, 1), n)) << "stays in the leaf";
    }
    const int64_t last = added.back() + 2;
    g_logged.clear();
    const Snapshot a = Snapshot::take();
    const uint64_t s0 = memnode_splits();
    ASSERT_TRUE(cl.t->insert(K(last, 1, 1)));
    const Snapshot b = Snapshot::take();
    f.model.insert(K(last, 1, 1));
    EXPECT_EQ(memnode_splits() - s0, 1u);
    EXPECT_EQ(b.trips - a.trips, 1u) << "one OFFLOAD_SPLIT, nothing else";
    // The leaf now ends at the separator and links to the sibling; the parent
    // (root here) has the sibling's downlink, remotely and in the cache.
    f.mem->read(leaf, &n, kNodeSize);
    ASSERT_NE(n.right, 0u);
    Node sib, root;
    f.mem->read(n.right, &sib, kNodeSize);
    EXPECT_EQ(compare_keys(sib.low, n.high), 0);
    const GAddr root_addr = f.t->info().root;
    f.mem->read(root_addr, &root, kNodeSize);
    ASSERT_EQ(root.level, 1);
    bool linked = false;
    for (size_t i = 0; i < root.count; i++)
        if (compare_keys(root.inner[i].sep, sib.low) == 0 && root.inner[i].child == n.right) linked = true;
    EXPECT_TRUE(linked);
    cache::CacheRegion& R = cl.c->region();
    const uint32_t pf = R.table().lookup(root_addr);
    ASSERT_TRUE(pf != cache::kNoFrame && pf != cache::MappingTable::kIoInProgress) << "the parent stays cached";
    Node cached;
    R.copy_unswizzled(pf, cached);
    EXPECT_EQ(cached.body_version, root.body_version) << "cached parent shows the new downlink";
    EXPECT_EQ(std::set<GAddr>(g_logged.begin(), g_logged.end()), (std::set<GAddr>{leaf, n.right, root_addr}));
    f.expect_tree_is_model();
    EXPECT_EQ(f.t->check().missing_downlinks, 0u);
    expect_cache_coherent(R, *cl.mem);
    // The next insert into either half: one round trip (a plain offload).
    const Snapshot c0 = Snapshot::take();
    ASSERT_TRUE(cl.t->insert(K(last + 2, 1, 1)));
    f.model.insert(K(last + 2, 1, 1));
    EXPECT_LE(Snapshot::take().trips - c0.trips, 2u);  // the sibling may be fetched once
}

// Full leaves under full parents (bulk-loaded at 100%): the memory node splits
// the leaf and the parent too (kHelloSplitParent; what it leaves -- a parent
// it cannot split, the grandparent's downlink -- the compute side finishes
// with insert_parent; tests/offload_split_parent_test.cpp compares).
TEST(MemnodeSplit, FullParentIsFinishedByTheComputeSide) {
    Fixture f;
    f.load(60000, 2, 1.0);
    Client cl(f, 4096);
    cl.warm(f.model);
    const uint32_t h0 = f.t->info().height;
    const uint64_t s0 = memnode_splits();
    std::mt19937_64 rng(11);
    for (int i = 0; i < 300; i++) {
        const int64_t k = 2 * static_cast<int64_t>(rng() % 30000) + 1;
        const bool fresh = f.model.insert(K(k, 1, 1)).second;
        EXPECT_EQ(cl.t->insert(K(k, 1, 1)), fresh);
    }
    EXPECT_GT(memnode_splits() - s0, 50u);
    EXPECT_GE(f.t->info().height, h0);
    f.expect_tree_is_model();
    EXPECT_EQ(f.t->check().missing_downlinks, 0u);
    expect_cache_coherent(cl.c->region(), *cl.mem);
}

// The memory node cannot allocate the sibling (here: the namespace is not
// its; a full pool answers the same): kOffloadNeedsSmo, nothing changed --
// the leaf byte for byte, the namespace's bytes, the pool's use.
TEST(MemnodeSplit, NoSpaceAnswersNeedsSmoAndChangesNothing) {
    Fixture f;
    f.load(2000, 1, 1.0);  // every leaf full
    const GAddr leaf = leaf_for(*f.mem, f.t->info().root, K(500, 1, 1));
    Node before, after;
    f.mem->read(leaf, &before, kNodeSize);
    ASSERT_EQ(before.count, kLeafCapacity);
    const uint64_t used0 = f.engine->used_bytes(), ns0 = ns_bytes(f.mem->node(0), f.ns);
    for (uint64_t ns : {f.ns + 1000, uint64_t{0}}) {
        uint8_t req[sizeof(net::OffloadRequest) + sizeof(net::OffloadSplitExt)] = {};
        net::OffloadRequest r{};
        r.start = gaddr_offset(leaf);
        r.tree_id = f.t->tree_id();
        r.node = 0;
        r.kind = net::kOffloadInsert;
        r.start_level = 0;
        const EntryKey k = K(500, 2, 2);
        std::memcpy(r.key, &k, sizeof k);
        const net::OffloadSplitExt ext{ns, 0};
        std::memcpy(req, &r, sizeof r);
        std::memcpy(req + sizeof r, &ext, sizeof ext);
        auto resp = f.mem->node(0).rpc(net::kOpOffloadSplit, req, sizeof req);
        ASSERT_GE(resp.size(), sizeof(net::OffloadReply));
        net::OffloadReply rep;
        std::memcpy(&rep, resp.data(), sizeof rep);
        EXPECT_EQ(rep.status, net::kOffloadNeedsSmo);
        EXPECT_EQ(resp.size(), sizeof rep);
    }
    f.mem->read(leaf, &after, kNodeSize);
    EXPECT_EQ(std::memcmp(&before, &after, kNodeSize), 0);
    EXPECT_EQ(f.engine->used_bytes(), used0);
    EXPECT_EQ(ns_bytes(f.mem->node(0), f.ns), ns0);
    f.expect_tree_is_model();
}

// A real out-of-space pool: the tree's inserts fail the same way with and
// without memory-node splits (the compute side's ALLOC reports it), and every
// insert that succeeded is there.
TEST(MemnodeSplit, FullPoolFallsBackToTheComputeSide) {
    Fixture f(2 << 20);  // ~2,000 nodes
    f.load(2000, 1, 1.0);
    Client cl(f, 4096);
    cl.warm(f.model);
    const uint64_t s0 = memnode_splits();
    int64_t k = 2000;
    bool out_of_space = false;
    try {
        for (; k < 400000; k++) {
            ASSERT_TRUE(cl.t->insert(K(k, 1, 1)));
            f.model.insert(K(k, 1, 1));
        }
    } catch (const Error& e) {
        out_of_space = e.code() == ErrorCode::kOutOfSpace;
        if (!out_of_space) ADD_FAILURE() << e.what();
    }
    EXPECT_TRUE(out_of_space);
    EXPECT_GT(memnode_splits() - s0, 100u);
    f.expect_tree_is_model();
}

// Two backends of one compute server (one node cache) offloading with
// memory-node splits next to one-sided writers of other servers (no cache,
// their own connections): thread 0 (offloads) and thread 3 (one-sided)
// insert the same keys from opposite ends, so they meet in the same leaves;
// every key is inserted exactly once (one insert answers true), nothing
// lost, check() clean. (The one-sided writers make the shared cache stale:
// an insert whose cached leaf is not full goes as a plain OFFLOAD, and the
// full leaf it meets remotely is split one-sided, so fewer splits than in
// the tests above happen on the memory node.)
TEST(MemnodeSplit, ConcurrentWithOneSidedWritersAndOffloaders) {
    Fixture f;
    f.load(40000, 4, 0.9);  // keys 0, 4, 8, ...
    const int kThreads = 4;
    std::atomic<int> errors{0};
    std::atomic<uint64_t> inserted{0};
    std::unique_ptr<Client> backends[2];
    backends[0] = std::make_unique<Client>(f, 8192);
    backends[0]->warm(f.model);
    backends[1] = std::make_unique<Client>(f, 8192, true, tree::OffloadMode::kOn, backends[0].get());
    const uint64_t s0 = memnode_splits();
    std::vector<std::thread> th;
    for (int c = 0; c < kThreads; c++) {
        th.emplace_back([&, c] {
            try {
                std::unique_ptr<RemoteMemory> own;
                std::unique_ptr<tree::BTree> plain;
                tree::BTree* t;
                if (c < 2) {  // the compute server's backends
                    t = backends[c]->t.get();
                } else {  // one-sided writers
                    own = make_mem(*f.engine);
                    plain = std::make_unique<tree::BTree>(*own, 0, f.ns);
                    t = plain.get();
                }
                uint64_t mine = 0;
                if (c < 3) {
                    for (int64_t i = c + 1; i < 40000; i += 4) mine += t->insert(K(i, 1, 1));
                } else {
                    for (int64_t i = 39997; i > 0; i -= 4) mine += t->insert(K(i, 1, 1));  // thread 0's keys
                }
                // and the newest keys at the right end, all at once
                for (int64_t i = 40000 + c; i < 48000; i += kThreads) mine += t->insert(K(i, 1, 1));
                inserted += mine;
            } catch (const std::exception& e) {
                ADD_FAILURE() << e.what();
                errors++;
            }
        });
    }
    for (auto& x : th) x.join();
    EXPECT_EQ(errors.load(), 0);
    const size_t before = f.model.size();
    for (int64_t i = 0; i < 48000; i++) f.model.insert(K(i, 1, 1));
    EXPECT_EQ(inserted.load(), f.model.size() - before) << "each new key inserted exactly once";
    f.expect_tree_is_model();
    EXPECT_GT(memnode_splits() - s0, 20u);
    // (No cache coherence check: the other servers' writes never reach this cache.)
}

// A memory node without kHelloOffloadSplit (an older one) is never sent
// OFFLOAD_SPLIT: full leaves are split on the compute side as before.
TEST(MemnodeSplit, OlderMemoryNodeGetsNoSplitRequests) {
    Fixture f;
    f.load(20000, 2, 0.9);
    Client cl(f, 4096, /*split=*/false);
    cl.warm(f.model);
    const uint64_t s0 = memnode_splits();
    for (int64_t k = 1; k < 20000; k += 2) {
        ASSERT_TRUE(cl.t->insert(K(k, 1, 1)));
        f.model.insert(K(k, 1, 1));
    }
    EXPECT_EQ(memnode_splits() - s0, 0u);
    f.expect_tree_is_model();
}

// Fills the leaf holding key `probe` with new odd keys (from its first
// entry on, all inside its fences) until it is full. Returns the leaf; *next
// is the next new key of its range, whose insert splits it.
GAddr fill_leaf(Fixture& f, Client& cl, int64_t probe, int64_t* next) {
    const GAddr leaf = leaf_for(*f.mem, f.t->info().root, K(probe, 1, 1));
    Node n;
    f.mem->read(leaf, &n, kNodeSize);
    int64_t v = key_to_int64(n.leaf[0].value) + 1;
    for (; n.count < kLeafCapacity; v += 2) {
        EXPECT_TRUE(cl.t->insert(K(v, 1, 1)));
        f.model.insert(K(v, 1, 1));
        f.mem->read(leaf, &n, kNodeSize);
        EXPECT_TRUE(tree::key_below_high(K(v + 2, 1, 1), n)) << "stays in the leaf";
    }
    *next = v;
    return leaf;
}

bool cached(cache::CacheRegion& R, GAddr a) {
    const uint32_t fr = R.table().lookup(a);
    return fr != cache::kNoFrame && fr != cache::MappingTable::kIoInProgress;
}

// kHelloSplitSpare: a split's reply hands out a spare block, the next split
// names it as its sibling with the sibling's cache marker held from before
// the RPC, and the reply's sibling image is admitted: the next insert into
// the upper half finds its leaf cached (one round trip, the offloaded insert).
// The first split, with no spare yet, leaves its sibling uncached, as every
// memory-node split did before.
TEST(MemnodeSplit, SpareSiblingIsAdmittedFromTheReply) {
    Fixture f;
    f.load(1000, 2, 0.6);  // ~15 leaves under one root
    Client cl(f, 1024);
    cl.warm(f.model);
    cache::CacheRegion& R = cl.c->region();
    EXPECT_EQ(cl.t->held_spare(0), 0u);
    int64_t k1 = 0, k2 = 0;
    const GAddr leaf1 = fill_leaf(f, cl, 101, &k1);
    ASSERT_TRUE(cl.t->insert(K(k1, 1, 1)));
    f.model.insert(K(k1, 1, 1));
    Node n;
    f.mem->read(leaf1, &n, kNodeSize);
    ASSERT_NE(n.right, 0u);
    EXPECT_FALSE(cached(R, n.right)) << "no spare yet: the first sibling is not admitted";
    const GAddr spare = cl.t->held_spare(0);
    ASSERT_NE(spare, 0u) << "the split's reply hands out a spare";

    const GAddr leaf2 = fill_leaf(f, cl, 701, &k2);
    const uint64_t s0 = memnode_splits();
    const Snapshot a = Snapshot::take();
    ASSERT_TRUE(cl.t->insert(K(k2, 1, 1)));
    f.model.insert(K(k2, 1, 1));
    EXPECT_EQ(memnode_splits() - s0, 1u);
    EXPECT_EQ(Snapshot::take().trips - a.trips, 1u) << "one OFFLOAD_SPLIT, nothing else";
    f.mem->read(leaf2, &n, kNodeSize);
    EXPECT_EQ(n.right, spare) << "the spare became the sibling";
    ASSERT_TRUE(cached(R, spare)) << "the sibling is admitted from the reply";
    Node remote, frame;
    f.mem->read(spare, &remote, kNodeSize);
    R.copy_unswizzled(R.table().lookup(spare), frame);
    EXPECT_EQ(frame.body_version, remote.body_version);
    EXPECT_NE(cl.t->held_spare(0), 0u) << "a new spare for the next split";
    EXPECT_NE(cl.t->held_spare(0), spare);

    const Snapshot b = Snapshot::take();
    ASSERT_TRUE(cl.t->insert(K(k2, 2, 1)));  // next to the key that split: the upper half
    f.model.insert(K(k2, 2, 1));
    EXPECT_EQ(Snapshot::take().trips - b.trips, 1u) << "the sibling was read again";
    f.expect_tree_is_model();
    EXPECT_EQ(f.t->check().missing_downlinks, 0u);
    expect_cache_coherent(R, *cl.mem);
    cl.t->release_spares();
    EXPECT_EQ(cl.t->held_spare(0), 0u);
}

// The memory node writes a named spare only if the tree's namespace owns it
// (else it allocates as without one), and the reply's tail is the spare the
// compute server holds next: the one it sent while no split took it.
TEST(MemnodeSplit, SpareTheNamespaceDoesNotOwnIsNotWritten) {
    Fixture f;
    f.load(2000, 1, 1.0);  // full leaves: every new key splits one
    const uint64_t other_ns = ns_create(f.mem->node(0));
    uint64_t req2[2] = {other_ns, kNodeSize};
    std::vector<uint8_t> r2 = f.mem->node(0).rpc(net::kOpAlloc, req2, sizeof req2);
    uint64_t foreign = 0;
    std::memcpy(&foreign, r2.data(), sizeof foreign);
    Node before_foreign;
    f.mem->read(make_gaddr(0, foreign), &before_foreign, kNodeSize);
    const GAddr leaf = leaf_for(*f.mem, f.t->info().root, K(500, 1, 1));
    Node n;
    f.mem->read(leaf, &n, kNodeSize);
    auto split_request = [&](const EntryKey& k, uint64_t spare, uint64_t* tail) {
        uint8_t req[sizeof(net::OffloadRequest) + sizeof(net::OffloadSplitExt) + sizeof(net::OffloadSpareExt)];
        const net::OffloadRequest r = leaf_insert_request(leaf, n.tree_id, k);
        const net::OffloadSplitExt ext{f.ns, 0};
        const net::OffloadSpareExt se{spare};
        std::memcpy(req, &r, sizeof r);
        std::memcpy(req + sizeof r, &ext, sizeof ext);
        std::memcpy(req + sizeof r + sizeof ext, &se, sizeof se);
        std::vector<uint8_t> resp = f.mem->node(0).rpc(net::kOpOffloadSplit, req, sizeof req);
        EXPECT_GE(resp.size(), sizeof(net::OffloadReply) + sizeof(net::OffloadSpareTail));
        std::memcpy(tail, resp.data() + resp.size() - sizeof *tail, sizeof *tail);
        return resp;
    };
    uint64_t tail = 0;
    std::vector<uint8_t> resp = split_request(K(500, 2, 1), foreign, &tail);
    ASSERT_EQ(resp[0], net::kOffloadSplit);
    net::OffloadSplitTail st;
    std::memcpy(&st, resp.data() + sizeof(net::OffloadReply) + kNodeSize, sizeof st);
    EXPECT_NE(gaddr_offset(st.sibling), foreign) << "a block of another namespace became the sibling";
    Node after_foreign;
    f.mem->read(make_gaddr(0, foreign), &after_foreign, kNodeSize);
    EXPECT_EQ(std::memcmp(&after_foreign, &before_foreign, kNodeSize), 0);
    ASSERT_NE(tail, 0u);
    EXPECT_NE(tail, foreign);
    f.model.insert(K(500, 2, 1));
    // The same leaf has room now (its upper half left): no split, the spare comes back.
    const uint64_t spare = tail;
    const int64_t first = key_to_int64(n.leaf[0].value);
    resp = split_request(K(first, 3, 1), spare, &tail);
    ASSERT_EQ(resp[0], net::kOffloadDone);
    f.model.insert(K(first, 3, 1));
    EXPECT_EQ(tail, spare) << "an unused spare stays the compute server's";
    f.expect_tree_is_model();
}

}  // namespace
}  // namespace dex::testing

namespace dex::testing {
namespace {

// dex.offload = off: no OFFLOAD_SPLIT either (full leaves split here).
TEST(MemnodeSplit, OffloadOffMeansNoMemnodeSplits) {
    Fixture f;
    f.load(20000, 2, 0.9);
    Client cl(f, 4096, /*split=*/true, tree::OffloadMode::kOff);
    cl.warm(f.model);
    const uint64_t s0 = memnode_splits(), off0 = f.engine->stats().offloads;
    for (int64_t k = 1; k < 20000; k += 2) {
        ASSERT_TRUE(cl.t->insert(K(k, 1, 1)));
        f.model.insert(K(k, 1, 1));
    }
    EXPECT_EQ(memnode_splits() - s0, 0u);
    EXPECT_EQ(f.engine->stats().offloads - off0, 0u);
    f.expect_tree_is_model();
}

}  // namespace
}  // namespace dex::testing
