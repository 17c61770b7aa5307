// Batched inserts (BTree::insert_batch, OFFLOAD_BATCH; src/README.md
// "Offloading", batched offloaded inserts) against in-process memory nodes:
// set semantics under splits, duplicates and concurrent writers and readers,
// placement over three nodes, cached leaves, a node that refuses offloaded
// writes, the journal's prefix rule, and what a batch costs in round trips.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <set>
#include <thread>

#include "cache/cache.h"
#include "cache/region.h"
#include "common/stats.h"
#include "tree/journal.h"
#include "tree/offload_policy.h"
#include "tree_test_util.h"

namespace dex::testing {
namespace {

using tree::BTree;

// Nodes reported to TreeOptions::log_changes (a plain function pointer).
std::vector<GAddr> g_logged;
size_t g_log_calls = 0;
void record_changes(const GAddr* nodes, size_t n) {
    g_logged.insert(g_logged.end(), nodes, nodes + n);
    g_log_calls++;
}

// `nodes` in-process memory nodes and a tree over all of them (placement
// level `level`), bulk-loaded with even keys 0..2*(count-1) at `fill`.
struct Nodes {
    std::vector<std::unique_ptr<memnode::Engine>> engines;
    std::unique_ptr<RemoteMemory> mem;
    std::vector<uint64_t> ns;
    Nodes(int nodes, int level, int64_t count, double fill) {
        std::vector<std::unique_ptr<Transport>> v;
        for (int i = 0; i < nodes; i++) {
            engines.push_back(make_engine(64 << 20));
            v.push_back(std::make_unique<InProcTransport>(*engines.back()));
        }
        mem = std::make_unique<RemoteMemory>(std::move(v));
        for (int i = 0; i < nodes; i++) ns.push_back(ns_create(mem->node(static_cast<uint32_t>(i))));
        auto t = plain();
        t->set_placement(ns, level);
        BTree::BulkLoader bl(*t, fill);
        for (int64_t i = 0; i < count; i++) bl.add(K(2 * i, 1, 1));
        bl.finish();
        level_ = level;
    }
    // An uncached client of its own (its own connections).
    std::unique_ptr<BTree> plain(std::unique_ptr<RemoteMemory>* own = nullptr) {
        RemoteMemory* m = mem.get();
        if (own) {
            std::vector<std::unique_ptr<Transport>> v;
            for (auto& e : engines) v.push_back(std::make_unique<InProcTransport>(*e));
            *own = std::make_unique<RemoteMemory>(std::move(v));
            m = own->get();
        }
        auto t = std::make_unique<BTree>(*m, 0, ns[0]);
        if (level_) t->set_placement(ns, level_);
        return t;
    }
    uint64_t offloads() const {
        uint64_t s = 0;
        for (auto& e : engines) s += e->stats().offloads;
        return s;
    }
    int level_ = 0;
};

// What the compute side sees of a memory node that refuses offloaded writes
// (an RDMA listener on an IBV_ATOMIC_HCA device: its one-sided CAS goes
// through the NIC, which an in-process node cannot emulate) or of an older
// node without OFFLOAD_BATCH: the HELLO flags; everything else goes through.
class Flags final : public InProcForwarder {
public:
    Flags(memnode::Engine& e, bool writes, bool batch) : InProcForwarder(e), writes_(writes), batch_(batch) {}
    bool offload_writes_allowed() override { return writes_; }
    bool offload_batch_allowed() override { return writes_ && batch_; }

private:
    bool writes_, batch_;
};

// A compute-server client: node cache, offload policy (mode on), change log;
// `writes` / `batch`: what its memory nodes' HELLOs allow.
struct Client {
    std::unique_ptr<char[]> rmem;
    std::unique_ptr<cache::Cache> c;
    tree::OffloadPolicy pol;
    std::unique_ptr<RemoteMemory> mem;
    std::unique_ptr<BTree> t;
    Client(Nodes& n, size_t frames, double leaf_admission, tree::OffloadMode mode = tree::OffloadMode::kOn,
           bool writes = true, bool batch = true) {
        size_t bytes = cache::CacheRegion::bytes_for(frames * kNodeSize);
        rmem.reset(new char[bytes]);
        cache::AdmissionPolicy ap;
        ap.leaf_admission = leaf_admission;
        c = std::make_unique<cache::Cache>(*cache::CacheRegion::init(rmem.get(), bytes, ap), 5);
        pol.set_mode(mode);
        tree::TreeOptions o;
        o.cache = c.get();
        o.offload = &pol;
        o.log_changes = record_changes;
        std::vector<std::unique_ptr<Transport>> v;
        for (auto& e : n.engines) {
            if (writes && batch)
                v.push_back(std::make_unique<InProcTransport>(*e));
            else
                v.push_back(std::make_unique<Flags>(*e, writes, batch));
        }
        mem = std::make_unique<RemoteMemory>(std::move(v));
        t = std::make_unique<BTree>(*mem, 0, n.ns[0], o);
        if (n.level_) t->set_placement(n.ns, n.level_);
    }
    // Every node of a tree loaded with `count` keys into the cache: lookups
    // with offloading off (an offloaded one would not admit the leaf), then
    // offloading on.
    void warm(int64_t count) {
        pol.set_mode(tree::OffloadMode::kOff);
        for (int64_t k = 0; k < 2 * count; k += 2) ASSERT_TRUE(t->contains(K(k, 1, 1)));
        pol.set_mode(tree::OffloadMode::kOn);
    }
    // Inserts `keys` (sorted here) in one call; every one must be done.
    size_t batch(std::vector<EntryKey> keys, uint64_t lsn = 0, uint64_t durable = UINT64_MAX) {
        std::sort(keys.begin(), keys.end());
        std::vector<uint64_t> lsns(keys.size(), lsn);
        size_t done = 0;
        t->insert_batch(keys.data(), lsns.data(), keys.size(), durable, &done);
        EXPECT_EQ(done, keys.size());
        return done;
    }
};

std::set<EntryKey> loaded(int64_t count) {
    std::set<EntryKey> m;
    for (int64_t i = 0; i < count; i++) m.insert(K(2 * i, 1, 1));
    return m;
}

// `n` distinct random keys in [0, range): odd (new) and even (some already there).
std::vector<EntryKey> random_keys(std::mt19937_64& rng, size_t n, int64_t range) {
    std::set<EntryKey> s;
    while (s.size() < n) s.insert(K(static_cast<int64_t>(rng() % static_cast<uint64_t>(range)), 1, 1));
    return {s.begin(), s.end()};
}

void expect_tree_is(BTree& t, const std::set<EntryKey>& model) {
    tree::TreeInfo info = t.check();
    EXPECT_EQ(info.entries, model.size());
    EXPECT_EQ(scan_all(t, neg_inf_key(), pos_inf_key(), false),
              model_range(model, neg_inf_key(), pos_inf_key(), false));
}

// Random batches into a tree whose leaves start 85% full: many entries land
// in leaves that fill up (the memory node answers "needs a split" and the
// compute side splits), some are there already (even keys). Exactly the set
// union results, and most entries went through the batches.
TEST(InsertBatch, RandomBatchesGiveSetSemantics) {
    Nodes n(1, 2, 20000, 0.85);
    Client cl(n, 256, 0.1);
    std::set<EntryKey> model = loaded(20000);
    std::mt19937_64 rng(42);
    const uint64_t b0 = stats().batched_inserts.load(), off0 = n.offloads();
    size_t sent = 0;
    for (int round = 0; round < 60; round++) {
        auto keys = random_keys(rng, 1 + rng() % 256, 40000);
        model.insert(keys.begin(), keys.end());
        sent += cl.batch(keys);
    }
    expect_tree_is(*cl.t, model);
    const uint64_t batched = stats().batched_inserts.load() - b0;
    EXPECT_GT(batched, sent / 4);
    EXPECT_GE(n.offloads() - off0, sent);  // every entry was asked once at least
    // Splits happened (the bulk load made 20000 / 50 leaves).
    EXPECT_GT(cl.t->info().leaves, 20000u / 50 + 20);
}

// A one-sided writer (other keys) and a reader (keys that never change) run
// while batches go in: no entry lost, every read exact.
TEST(InsertBatch, ConcurrentWithOneSidedWriterAndReader) {
    Nodes n(1, 2, 20000, 0.7);
    // Another compute server writes too: this one caches inner nodes only
    // (src/README.md, C9); a stale inner node is harmless by construction.
    Client cl(n, 512, 0.0);
    std::set<EntryKey> model = loaded(20000);
    std::atomic<bool> stop{false};
    std::atomic<int> bad{0};
    std::thread writer([&] {  // keys with block 2: inserted one-sided, uncached
        std::unique_ptr<RemoteMemory> own;
        auto w = n.plain(&own);
        for (int64_t k = 1; k < 40000; k += 16)
            if (!w->insert(K(k, 2, 1))) bad++;
    });
    std::thread reader([&] {
        std::unique_ptr<RemoteMemory> own;
        auto r = n.plain(&own);
        while (!stop)
            for (int64_t k = 0; k < 40000 && !stop; k += 202)
                if (!r->contains(K(k, 1, 1))) bad++;
    });
    std::mt19937_64 rng(7);
    for (int round = 0; round < 40; round++) {
        std::vector<EntryKey> keys;
        for (const EntryKey& k : random_keys(rng, 256, 40000))
            if (key_to_int64(k.value) % 2 == 1) keys.push_back(k);  // new keys only
        model.insert(keys.begin(), keys.end());
        cl.batch(keys);
    }
    writer.join();
    stop = true;
    reader.join();
    EXPECT_EQ(bad.load(), 0);
    for (int64_t k = 1; k < 40000; k += 16) model.insert(K(k, 2, 1));
    expect_tree_is(*cl.t, model);
}

// Three memory nodes, subtrees placed over all of them: one OFFLOAD_BATCH per
// node, the set is exact, and no subtree leaves its node.
TEST(InsertBatch, ThreeMemoryNodesWithPlacement) {
    for (int level : {1, 2}) {
        // level 1: full leaves (splits, and migrations of level-1 subtrees);
        // level 2: half-full nodes, so that the 60000 keys make 6 subtrees.
        Nodes n(3, level, 60000, level == 1 ? 0.9 : 0.5);
        Client cl(n, 1024, 0.1);
        std::set<EntryKey> model = loaded(60000);
        std::mt19937_64 rng(level);
        for (int round = 0; round < 30; round++) {
            auto keys = random_keys(rng, 256, 120000);
            model.insert(keys.begin(), keys.end());
            cl.batch(keys);
        }
        tree::TreeInfo info = cl.t->check();  // throws on a placement violation
        int holding = 0;
        for (uint64_t s : info.subtrees_on) holding += s > 0;
        EXPECT_EQ(holding, 3);
        for (auto& e : n.engines) EXPECT_GT(e->stats().offloads, 100u);
        expect_tree_is(*cl.t, model);
    }
}

// Every leaf cached, then a batch changes many of them: the batch drops
// their cached copies (the reply carries no image), and the statement's end
// (rewarm_batched) reads them back in one more round trip, so cached lookups
// see the new entries without a miss, and what is cached equals remote
// memory. The change log hears of every changed leaf, in one call.
TEST(InsertBatch, CachedLeavesChangedByABatchAreNotServedStale) {
    Nodes n(1, 2, 10000, 0.5);
    Client cl(n, 4096, 1.0);
    cl.warm(10000);
    std::vector<EntryKey> keys;
    for (int64_t k = 1; k < 20000; k += 80) keys.push_back(K(k, 1, 1));  // 250 leaves' worth, no split
    g_logged.clear();
    g_log_calls = 0;
    const uint64_t b0 = stats().batched_inserts.load(), rt0 = stats().round_trips.load();
    cl.batch(keys);
    EXPECT_EQ(stats().round_trips.load() - rt0, 1u) << "the batch";
    const uint64_t w0 = stats().batch_rewarms.load();
    cl.t->rewarm_batched();
    EXPECT_EQ(stats().batched_inserts.load() - b0, keys.size());
    EXPECT_EQ(stats().round_trips.load() - rt0, 2u) << "the batch, then one READ of the leaves it changed";
    EXPECT_GE(stats().batch_rewarms.load() - w0, keys.size() / 2);
    EXPECT_EQ(g_log_calls, 1u);
    EXPECT_GE(g_logged.size(), keys.size() / 2);  // distinct leaves (a leaf holds ~29 of 59 keys)
    const uint64_t miss0 = stats().cache_misses.load(), reads0 = stats().remote_reads.load();
    for (const EntryKey& k : keys) EXPECT_TRUE(cl.t->contains(k)) << key_to_int64(k.value);
    EXPECT_EQ(stats().cache_misses.load() - miss0, 0u) << "the changed leaves are cached again";
    EXPECT_EQ(stats().remote_reads.load() - reads0, 0u);
    for (int64_t k = 3; k < 20000; k += 80) EXPECT_FALSE(cl.t->contains(K(k, 1, 1)));
    expect_cache_coherent(cl.c->region(), *cl.mem);
    std::set<EntryKey> model = loaded(10000);
    model.insert(keys.begin(), keys.end());
    expect_tree_is(*cl.t, model);
}

// A statement of several batches into the same cached leaves (a bulk load
// into a cached index): nothing is read back between its batches, and at
// its end each dropped leaf is read back once, in one READ per 256 leaves.
TEST(InsertBatch, AStatementReadsEachDroppedLeafBackOnceAtItsEnd) {
    Nodes n(1, 2, 10000, 0.3);
    Client cl(n, 4096, 1.0);
    cl.warm(10000);
    const uint64_t rt0 = stats().round_trips.load(), w0 = stats().batch_rewarms.load();
    std::set<EntryKey> model = loaded(10000);
    for (int b = 0; b < 4; b++) {  // 4 x 200 entries into the same 200 leaves' worth of keys
        std::vector<EntryKey> keys;
        for (int64_t k = 1 + 2 * b; k < 20000; k += 100) keys.push_back(K(k, 1, 1));
        model.insert(keys.begin(), keys.end());
        cl.batch(keys);
    }
    EXPECT_EQ(stats().round_trips.load() - rt0, 4u) << "one round trip per batch, nothing read back yet";
    EXPECT_EQ(stats().batch_rewarms.load(), w0);
    const uint64_t rt1 = stats().round_trips.load();
    cl.t->rewarm_batched();
    const uint64_t back = stats().batch_rewarms.load() - w0;
    // 800 entries, four per ~200 leaves (a few straddle two): each leaf read once
    EXPECT_GE(back, 150u);
    EXPECT_LT(back, 400u) << "each leaf once, not once per batch";
    EXPECT_EQ(stats().round_trips.load() - rt1, (back + 255) / 256);
    EXPECT_LE(back, cl.t->info().leaves);
    const uint64_t miss0 = stats().cache_misses.load();
    for (const EntryKey& k : model) ASSERT_TRUE(cl.t->contains(k));
    EXPECT_EQ(stats().cache_misses.load() - miss0, 0u);
    expect_cache_coherent(cl.c->region(), *cl.mem);
    expect_tree_is(*cl.t, model);
}

// A batch that changes only a few cached leaves (a small multi-row VALUES)
// does not pay a round trip to read them back: they are dropped, and the
// next read of one fetches it.
TEST(InsertBatch, AFewChangedLeavesAreNotReadBack) {
    Nodes n(1, 2, 10000, 0.5);
    Client cl(n, 4096, 1.0);
    cl.warm(10000);
    std::vector<EntryKey> keys{K(1001, 1, 1), K(9001, 1, 1), K(15001, 1, 1)};  // three leaves
    const uint64_t rt0 = stats().round_trips.load();
    cl.batch(keys);
    cl.t->rewarm_batched();
    EXPECT_EQ(stats().round_trips.load() - rt0, 1u);
    const uint64_t miss0 = stats().cache_misses.load();
    for (const EntryKey& k : keys) EXPECT_TRUE(cl.t->contains(k));
    EXPECT_GE(stats().cache_misses.load() - miss0, 3u);
    expect_cache_coherent(cl.c->region(), *cl.mem);
}

// The read-back races with another backend of the same compute server
// (one cache region) inserting into the same leaves one at a time (its
// offloaded inserts refresh cached frames, or admit uncached leaves): an
// image read before such a change must never be admitted (the marker goes
// stale). Afterwards the cache equals remote memory and the set is exact.
TEST(InsertBatch, ReadBackRacesWithAnotherBackendsInserts) {
    Nodes n(1, 2, 10000, 0.4);
    Client cl(n, 4096, 1.0);
    cl.warm(10000);
    cache::Cache second(cl.c->region(), 17);
    tree::OffloadPolicy pol2;
    pol2.set_mode(tree::OffloadMode::kOn);
    tree::TreeOptions o;
    o.cache = &second;
    o.offload = &pol2;  // (no change log: record_changes is the first backend's)
    std::unique_ptr<RemoteMemory> own;
    auto plain = n.plain(&own);  // (only for its connections)
    tree::BTree t2(*own, 0, n.ns[0], o);
    t2.set_placement(n.ns, 2);
    std::set<EntryKey> model = loaded(10000);
    std::thread other([&] {  // keys 4 mod 8 + 1 ... one at a time
        for (int64_t k = 5; k < 20000; k += 8) EXPECT_TRUE(t2.insert(K(k, 2, 1)));
    });
    std::mt19937_64 rng(11);
    for (int round = 0; round < 30; round++) {
        std::vector<EntryKey> keys;
        for (const EntryKey& k : random_keys(rng, 400, 20000))
            if (key_to_int64(k.value) % 2 == 1 && keys.size() < 200) keys.push_back(k);
        model.insert(keys.begin(), keys.end());
        cl.batch(keys);
        if (round % 3 == 2) cl.t->rewarm_batched();  // a statement of three batches ends
    }
    other.join();
    for (int64_t k = 5; k < 20000; k += 8) model.insert(K(k, 2, 1));
    expect_cache_coherent(cl.c->region(), *cl.mem);
    expect_tree_is(*cl.t, model);
}

// Where batching is not allowed the entries go one at a time, exactly:
// a memory node that refuses offloaded writes (one-sided inserts, nothing
// offloaded), offload mode off (the same), an older memory node without
// OFFLOAD_BATCH (one OFFLOAD per entry, as single inserts).
TEST(InsertBatch, WithoutBatchingEntriesGoOneByOne) {
    for (int variant : {0, 1, 2}) {
        Nodes n(1, 2, 10000, 0.85);
        Client cl(n, 256, 0.1, variant == 1 ? tree::OffloadMode::kOff : tree::OffloadMode::kOn,
                  /*writes=*/variant != 0, /*batch=*/variant != 2);
        std::set<EntryKey> model = loaded(10000);
        std::mt19937_64 rng(3);
        const uint64_t b0 = stats().batched_inserts.load(), off0 = n.offloads();
        for (int round = 0; round < 10; round++) {
            auto keys = random_keys(rng, 200, 20000);
            model.insert(keys.begin(), keys.end());
            cl.batch(keys);
        }
        EXPECT_EQ(stats().batched_inserts.load() - b0, 0u) << variant;
        if (variant == 2)
            EXPECT_GT(n.offloads() - off0, 1000u) << "single offloaded inserts";
        else
            EXPECT_EQ(n.offloads() - off0, 0u) << variant;
        expect_tree_is(*cl.t, model);
    }
}

// The memory node's side: OFFLOAD_BATCH is refused whole where CPU atomics
// are unsafe, and a malformed batch (a read among the writes, no requests,
// too many) is a protocol error that changes nothing.
TEST(InsertBatch, MemoryNodeRefusesWhatItMustNot) {
    Nodes n(1, 2, 1000, 0.5);
    std::unique_ptr<RemoteMemory> own;
    auto t = n.plain(&own);
    tree::TreeInfo info = t->info();
    const int level = static_cast<int>(info.height) - 1;
    ASSERT_LE(level, t->placement_level());
    auto req = [&](int64_t k, uint8_t kind) {
        net::OffloadRequest r{};
        r.start = gaddr_offset(info.root);
        r.tree_id = t->tree_id();
        r.kind = kind;
        r.start_level = static_cast<uint8_t>(level);
        EntryKey key = K(k, 1, 1);
        std::memcpy(r.key, &key, sizeof key);
        return r;
    };
    std::vector<net::OffloadRequest> reqs = {req(1, net::kOffloadInsert), req(3, net::kOffloadLeaf)};
    auto send = [&](Transport& tr, size_t count) {
        return code_of([&] {
            tr.rpc(net::kOpOffloadBatch, reqs.data(), static_cast<uint32_t>(count * sizeof(net::OffloadRequest)));
        });
    };
    {
        InProcTransport tr(*n.engines[0]);
        EXPECT_TRUE(tr.offload_batch_allowed());
        EXPECT_EQ(send(tr, 2), ErrorCode::kProtocol);
    }
    {
        InProcTransport tr(*n.engines[0]);
        EXPECT_EQ(send(tr, 0), ErrorCode::kProtocol);
    }
    {
        InProcTransport tr(*n.engines[0]);
        reqs.assign(net::kMaxOffloadBatch + 1, req(5, net::kOffloadInsert));
        EXPECT_EQ(send(tr, reqs.size()), ErrorCode::kProtocol);
    }
    EXPECT_FALSE(t->contains(K(1, 1, 1)));
    EXPECT_FALSE(t->contains(K(5, 1, 1)));
    n.engines[0]->refuse_cpu_atomics("test: IBV_ATOMIC_HCA");
    InProcTransport tr(*n.engines[0]);
    EXPECT_FALSE(tr.offload_batch_allowed());
    reqs.assign(1, req(1, net::kOffloadInsert));
    EXPECT_EQ(send(tr, 1), ErrorCode::kInvalid);
    EXPECT_FALSE(t->contains(K(1, 1, 1)));
}

// The journal: a lane holds 170 records. 256 entries whose WAL is not durable
// fit only 170 at a time: the first call inserts a prefix of 170 (each with
// its record, written by the memory node before the leaf changed), then
// answers NeedDurable with nothing of the rest changed; after the "flush" the
// rest goes in without records. Inserts that fall back (splits) keep their slot.
TEST(InsertBatch, JournalPrefixAndNeedDurable) {
    Nodes n(1, 2, 10000, 0.97);  // 2 free slots per leaf: some entries split (on the compute side)
    GAddr root = tree::journal_create(*n.mem, 0, {n.ns[0]}, 5);
    Client cl(n, 256, 0.1);
    tree::JournalWriter w(*cl.mem, root, 9, {n.ns[0]});
    cl.t->set_journal(&w);
    std::mt19937_64 rng(11);
    std::vector<EntryKey> keys;
    for (const EntryKey& k : random_keys(rng, 600, 20000))
        if (key_to_int64(k.value) % 2 == 1 && keys.size() < 256) keys.push_back(k);
    ASSERT_EQ(keys.size(), 256u);
    std::vector<uint64_t> lsns(keys.size());
    for (size_t i = 0; i < keys.size(); i++) lsns[i] = 1000 + i;
    size_t done = 0;
    uint64_t need = 0;
    const uint64_t b0 = stats().batched_inserts.load();
    try {
        cl.t->insert_batch(keys.data(), lsns.data(), keys.size(), 10, &done);
        ADD_FAILURE() << "no NeedDurable";
    } catch (const tree::NeedDurable& e) {
        need = e.lsn();
    }
    EXPECT_EQ(done, tree::kJournalLaneRecords);
    EXPECT_GE(need, lsns.back());
    const uint64_t batched = stats().batched_inserts.load() - b0;
    EXPECT_GT(batched, 0u);
    EXPECT_LT(batched, done) << "no entry of the prefix fell back to a split";
    std::unique_ptr<RemoteMemory> own;
    auto probe = n.plain(&own);
    for (size_t i = 0; i < keys.size(); i++) EXPECT_EQ(probe->contains(keys[i]), i < done) << i;
    tree::JournalContents c = tree::journal_read(*n.mem, root);
    ASSERT_EQ(c.records.size(), done);
    for (size_t i = 0; i < done; i++) {
        auto it = std::find_if(c.records.begin(), c.records.end(), [&](auto& r) { return r.key == keys[i]; });
        ASSERT_NE(it, c.records.end()) << i;
        EXPECT_EQ(it->lsn, lsns[i]);
    }
    // Still not durable: nothing more fits, nothing changes.
    size_t again = 0;
    EXPECT_THROW(cl.t->insert_batch(keys.data() + done, lsns.data() + done, keys.size() - done, 10, &again),
                 tree::NeedDurable);
    EXPECT_EQ(again, 0u);
    for (size_t i = done; i < keys.size(); i++) EXPECT_FALSE(probe->contains(keys[i]));
    // Flushed up to `need`: the rest goes in, unjournaled.
    cl.t->insert_batch(keys.data() + done, lsns.data() + done, keys.size() - done, need, &again);
    EXPECT_EQ(again, keys.size() - done);
    std::set<EntryKey> model = loaded(10000);
    model.insert(keys.begin(), keys.end());
    expect_tree_is(*cl.t, model);
    EXPECT_EQ(tree::journal_read(*n.mem, root).records.size(), done);
}

// What a batch costs: 256 new keys into a warm tree (inner nodes cached,
// leaves half full: no split) is one OFFLOAD_BATCH round trip on one memory
// node, at most one per node on three; one at a time it is ~1 per entry.
TEST(InsertBatch, A256BatchCostsAFewRoundTrips) {
    for (int nodes : {1, 3}) {
        Nodes n(nodes, 1, 30000, 0.5);
        Client cl(n, 4096, 0.0, tree::OffloadMode::kOff);
        for (int64_t k = 0; k < 60000; k += 40) ASSERT_TRUE(cl.t->contains(K(k, 1, 1)));  // inner nodes cached
        cl.pol.set_mode(tree::OffloadMode::kOn);
        std::mt19937_64 rng(5);
        std::vector<EntryKey> keys;
        for (const EntryKey& k : random_keys(rng, 600, 60000))
            if (key_to_int64(k.value) % 2 == 1 && keys.size() < 256) keys.push_back(k);
        ASSERT_EQ(keys.size(), 256u);
        const uint64_t rt0 = stats().round_trips.load(), b0 = stats().batched_inserts.load();
        cl.batch(keys);
        const uint64_t trips = stats().round_trips.load() - rt0;
        EXPECT_EQ(stats().batched_inserts.load() - b0, 256u);
        EXPECT_LE(trips, static_cast<uint64_t>(nodes)) << "round trips for 256 entries on " << nodes << " node(s)";
        std::printf("[ batch ] 256 entries, %d memory node(s): %llu round trips\n", nodes,
                    static_cast<unsigned long long>(trips));
        // The same 256 entries' neighbours one at a time, for comparison.
        const uint64_t rt1 = stats().round_trips.load();
        for (const EntryKey& k : keys) ASSERT_TRUE(cl.t->insert(K(key_to_int64(k.value), 3, 1)));
        std::printf("[ batch ] the same 256 one at a time: %llu round trips\n",
                    static_cast<unsigned long long>(stats().round_trips.load() - rt1));
    }
}

// An ascending load (serial keys, timestamps): every entry of a batch lands
// in the rightmost leaf, which fills after a few dozen. The leaf's first
// waiting entry is inserted alone (it splits the leaf) and the rest go into
// the next round's batch: the tree stays exact, and the round trips stay far
// below one per entry (one at a time, each would split-or-insert one-sided).
TEST(InsertBatch, AscendingKeysSplitAndContinueInRounds) {
    Nodes n(1, 1, 5000, 0.7);
    Client cl(n, 4096, 1.0);
    std::set<EntryKey> model = loaded(5000);
    for (int64_t k = 0; k < 10000; k += 20) ASSERT_TRUE(cl.t->contains(K(k, 1, 1)));
    const uint64_t rt0 = stats().round_trips.load(), b0 = stats().batched_inserts.load();
    int64_t next = 20000;
    for (int b = 0; b < 8; b++) {
        std::vector<EntryKey> keys;
        for (int i = 0; i < 256; i++) keys.push_back(K(next++, 1, 1));
        model.insert(keys.begin(), keys.end());
        cl.batch(keys);
    }
    const uint64_t trips = stats().round_trips.load() - rt0, batched = stats().batched_inserts.load() - b0;
    // The next 2048 ascending keys one at a time, for comparison.
    const uint64_t rt1 = stats().round_trips.load();
    for (int i = 0; i < 2048; i++) {
        model.insert(K(next, 1, 1));
        ASSERT_TRUE(cl.t->insert(K(next++, 1, 1)));
    }
    const uint64_t single = stats().round_trips.load() - rt1;
    std::printf("[ batch ] 2048 ascending entries: %llu round trips (%llu batched); one at a time: %llu\n",
                static_cast<unsigned long long>(trips), static_cast<unsigned long long>(batched),
                static_cast<unsigned long long>(single));
    EXPECT_GT(batched, 2048u / 2) << "most entries must travel in batches, not one by one";
    EXPECT_LT(trips * 2, single);
    expect_tree_is(*cl.t, model);
}

}  // namespace
}  // namespace dex::testing
