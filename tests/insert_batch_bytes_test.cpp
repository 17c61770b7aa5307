// Batched inserts into slotted trees (SlottedTree::insert_batch,
// OFFLOAD_BYTES_BATCH; src/README.md "Offloading", batched offloaded inserts)
// against in-process memory nodes: what a batch costs in round trips on one
// and three memory nodes, ascending keys in rounds of "needs a split", set
// semantics with journal records, a malformed batch that changes nothing,
// and a lost answer that drops the cached leaves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>

#include "cache/cache.h"
#include "cache/region.h"
#include "common/stats.h"
#include "tree/journal.h"
#include "tree/offload_policy.h"
#include "tree_test_util.h"

namespace dex::testing {
namespace {

using tree::SlottedTree;
using Key = std::string;

// A text-like key and a 6-byte big-endian "heap TID", as the glue builds them.
Key entry(uint32_t user, uint32_t tid = 1) { return email_entry(user, tid); }

std::vector<GAddr> g_logged;
size_t g_log_calls = 0;
void record_changes(const GAddr* nodes, size_t n) {
    g_logged.insert(g_logged.end(), nodes, nodes + n);
    g_log_calls++;
}

// A memory node whose OFFLOAD_BYTES_BATCH answer gets lost after the node
// applied it (a timeout, a dropped connection): everything else goes through.
class LosesBatchAnswers final : public InProcForwarder {
public:
    explicit LosesBatchAnswers(memnode::Engine& e) : InProcForwarder(e) {}
    std::vector<uint8_t> rpc(net::Op op, const void* p, uint32_t l) override {
        std::vector<uint8_t> r = in_.rpc(op, p, l);
        if (op == net::kOpOffloadBytesBatch && lose) throw Error(ErrorCode::kTimeout, "test: answer lost");
        return r;
    }
    bool offload_writes_allowed() override { return in_.offload_writes_allowed(); }
    bool offload_bytes_allowed() override { return in_.offload_bytes_allowed(); }
    bool offload_bytes_batch_allowed() override { return in_.offload_bytes_batch_allowed(); }
    bool lose = false;
};

// `nodes` in-process memory nodes and a slotted tree over them (placement
// level `level`), bulk-loaded with entry(2 * i) for i < count at `fill`;
// a compute-server client with a node cache and offloading on.
struct BatchSetup {
    std::vector<std::unique_ptr<memnode::Engine>> engines;
    std::unique_ptr<RemoteMemory> mem;
    std::vector<uint64_t> ns;
    std::unique_ptr<char[]> rmem;
    std::unique_ptr<cache::Cache> c;
    tree::OffloadPolicy pol;
    std::unique_ptr<SlottedTree> t;
    std::set<Key> model;
    LosesBatchAnswers* lossy = nullptr;

    BatchSetup(int nodes, int level, uint32_t count, double fill, size_t frames, double leaf_admission,
          bool lossy_node0 = false) {
        std::vector<std::unique_ptr<Transport>> v;
        for (int i = 0; i < nodes; i++) {
            engines.push_back(make_engine(64 << 20));
            if (i == 0 && lossy_node0) {
                auto l = std::make_unique<LosesBatchAnswers>(*engines.back());
                lossy = l.get();
                v.push_back(std::move(l));
            } else {
                v.push_back(std::make_unique<InProcTransport>(*engines.back()));
            }
        }
        mem = std::make_unique<RemoteMemory>(std::move(v));
        for (int i = 0; i < nodes; i++) ns.push_back(ns_create(mem->node(static_cast<uint32_t>(i))));
        size_t bytes = cache::CacheRegion::bytes_for(frames * kNodeSize);
        rmem.reset(new char[bytes]);
        cache::AdmissionPolicy ap;
        ap.leaf_admission = leaf_admission;
        c = std::make_unique<cache::Cache>(*cache::CacheRegion::init(rmem.get(), bytes, ap), 5);
        pol.set_mode(tree::OffloadMode::kOff);  // warming up reads one-sided
        tree::TreeOptions o;
        o.cache = c.get();
        o.offload = &pol;
        o.log_changes = record_changes;
        t = std::make_unique<SlottedTree>(*mem, 0, ns[0], o);
        t->set_placement(ns, level);
        SlottedTree::BulkLoader bl(*t, fill);
        for (uint32_t i = 0; i < count; i++) {
            bl.add(entry(2 * i));
            model.insert(entry(2 * i));
        }
        bl.finish();
    }
    // Inserts `keys` (sorted here) in one call; every one must be done.
    void batch(std::vector<Key> keys, uint64_t lsn = 0, uint64_t durable = UINT64_MAX) {
        std::sort(keys.begin(), keys.end());
        std::vector<uint64_t> lsns(keys.size(), lsn);
        size_t done = 0;
        t->insert_batch(keys.data(), lsns.data(), keys.size(), durable, &done);
        EXPECT_EQ(done, keys.size());
        model.insert(keys.begin(), keys.end());
    }
    uint64_t offloads() const {
        uint64_t s = 0;
        for (auto& e : engines) s += e->stats().offloads;
        return s;
    }
    void expect_exact() {
        expect_slotted_tree_is(*t, model, c->region(), *mem);
    }
};

// `n` distinct new (odd) entries below 2 * range.
std::vector<Key> new_keys(std::mt19937_64& rng, size_t n, uint32_t range) {
    std::set<uint32_t> s;
    while (s.size() < n) s.insert(static_cast<uint32_t>(rng() % range) | 1u);
    std::vector<Key> v;
    for (uint32_t u : s) v.push_back(entry(u));
    return v;
}

// 256 new entries into a warm tree (inner nodes cached, leaves half full: no
// split) cost one OFFLOAD_BYTES_BATCH on one memory node and at most one per
// node on three; every entry was a batched insert; one at a time it is ~1+
// round trip per entry.
TEST(InsertBatchBytes, A256BatchCostsOneRoundTripPerMemoryNode) {
    for (int nodes : {1, 3}) {
        BatchSetup s(nodes, 1, 20000, 0.5, 4096, 0.0);
        for (uint32_t u = 0; u < 40000; u += 40) ASSERT_TRUE(s.t->contains(entry(u)));  // inner nodes cached
        s.pol.set_mode(tree::OffloadMode::kOn);
        std::mt19937_64 rng(5);
        std::vector<Key> keys = new_keys(rng, 256, 40000);
        const uint64_t rt0 = stats().round_trips.load(), b0 = stats().batched_inserts.load(), o0 = s.offloads();
        s.batch(keys);
        const uint64_t trips = stats().round_trips.load() - rt0;
        EXPECT_EQ(stats().batched_inserts.load() - b0, 256u);
        EXPECT_EQ(s.offloads() - o0, 256u) << "one offload per sub-request";
        if (nodes == 1)
            EXPECT_EQ(trips, 1u);
        else
            EXPECT_LE(trips, 3u);
        if (nodes == 3) {
            for (auto& e : s.engines) EXPECT_GT(e->stats().offloads, 0u) << "a node got no batch";
        }
        std::printf("[ batch ] 256 byte entries, %d memory node(s): %llu round trips\n", nodes,
                    static_cast<unsigned long long>(trips));
        const uint64_t rt1 = stats().round_trips.load();
        for (const Key& k : keys) {  // their neighbours one at a time, for comparison
            Key k2 = k;
            k2.back() = 7;
            ASSERT_TRUE(s.t->insert(k2));
            s.model.insert(k2);
        }
        const uint64_t single = stats().round_trips.load() - rt1;
        std::printf("[ batch ] the same 256 one at a time: %llu round trips\n", static_cast<unsigned long long>(single));
        EXPECT_GT(single, 10 * trips);
        s.expect_exact();
    }
}

// Ascending keys all land in the rightmost leaf: the memory node answers
// "needs a split" once it is full; the smallest waiting entry splits it on
// the compute side and the rest go into the next round's batch. Exact, most
// entries batched, far fewer round trips than one at a time.
TEST(InsertBatchBytes, AscendingKeysSplitAndContinueInRounds) {
    BatchSetup s(1, 1, 3000, 0.7, 4096, 1.0);
    for (uint32_t u = 0; u < 6000; u += 10) ASSERT_TRUE(s.t->contains(entry(u)));
    s.pol.set_mode(tree::OffloadMode::kOn);
    const uint64_t rt0 = stats().round_trips.load(), b0 = stats().batched_inserts.load();
    uint32_t next = 100000;
    for (int b = 0; b < 8; b++) {
        std::vector<Key> keys;
        for (int i = 0; i < 256; i++) keys.push_back(entry(next++));
        s.batch(keys);
    }
    const uint64_t trips = stats().round_trips.load() - rt0, batched = stats().batched_inserts.load() - b0;
    const uint64_t rt1 = stats().round_trips.load();
    for (int i = 0; i < 2048; i++) {
        ASSERT_TRUE(s.t->insert(entry(next)));
        s.model.insert(entry(next++));
    }
    const uint64_t single = stats().round_trips.load() - rt1;
    std::printf("[ batch ] 2048 ascending byte entries: %llu round trips (%llu batched); one at a time: %llu\n",
                static_cast<unsigned long long>(trips), static_cast<unsigned long long>(batched),
                static_cast<unsigned long long>(single));
    EXPECT_GT(batched, 2048u / 2) << "most entries must travel in batches";
    EXPECT_LT(trips * 2, single);
    s.expect_exact();
}

// Random batches (new entries and ones already there) into leaves 85% full
// over three memory nodes, every entry journaled: exactly the set union,
// the byte-form journal lists what it must, placement holds.
TEST(InsertBatchBytes, RandomBatchesWithJournalOverThreeNodes) {
    BatchSetup s(3, 1, 30000, 0.85, 1024, 0.1);
    GAddr root = tree::journal_create(*s.mem, 0, s.ns, 5, tree::JournalForm::kBytes);
    tree::JournalWriter w(*s.mem, root, 9, s.ns);
    s.t->set_journal(&w);
    s.pol.set_mode(tree::OffloadMode::kOn);
    std::mt19937_64 rng(42);
    const uint64_t b0 = stats().batched_inserts.load();
    uint64_t lsn = 1000, sent = 0;
    for (int round = 0; round < 30; round++) {
        std::set<uint32_t> us;
        const size_t n = 1 + rng() % 150;  // a lane starts with 24 slots: durable moves on below
        while (us.size() < n) us.insert(static_cast<uint32_t>(rng() % 60000));
        std::vector<Key> keys;
        for (uint32_t u : us) keys.push_back(entry(u));
        std::vector<uint64_t> lsns(keys.size());
        for (auto& l : lsns) l = ++lsn;
        size_t done = 0, total = 0;
        uint64_t durable = lsn - keys.size() - 1;
        while (total < keys.size()) {
            try {
                s.t->insert_batch(keys.data() + total, lsns.data() + total, keys.size() - total, durable, &done);
                total += done;
            } catch (const tree::NeedDurable& e) {
                total += done;
                durable = e.lsn();  // "flush WAL"
            }
        }
        s.model.insert(keys.begin(), keys.end());
        sent += keys.size();
    }
    EXPECT_GT(stats().batched_inserts.load() - b0, sent / 4);
    tree::JournalContents jc = tree::journal_read(*s.mem, root);
    EXPECT_FALSE(jc.byte_records.empty());
    for (const auto& r : jc.byte_records) EXPECT_TRUE(s.model.count(r.entry)) << "a record names no entry";
    s.expect_exact();  // check(): placement too
}

// The memory node refuses a malformed batch whole (a lookup among the
// inserts, a truncated request, bytes after the last one, a journal slot
// outside the pool, none, 257 of them): nothing changes, its first valid
// insert included. Without CPU atomics the op is refused and the HELLO says so.
TEST(InsertBatchBytes, MalformedBatchChangesNothing) {
    BatchSetup s(1, 2, 2000, 0.5, 256, 0.0);
    tree::TreeInfo info = s.t->info();
    const int level = static_cast<int>(info.height) - 1;
    ASSERT_LE(level, s.t->placement_level());
    auto sub = [&](std::vector<uint8_t>& p, const Key& k, uint8_t kind, uint64_t journal = 0) {
        net::OffloadBytesHeader h{};
        h.start = gaddr_offset(info.root);
        h.tree_id = s.t->tree_id();
        h.kind = kind;
        h.start_level = static_cast<uint8_t>(level);
        h.journal = journal;
        const std::string rec = journal ? std::string(16, 'r') : std::string();
        net::append_offload_bytes(p, h, k.data(), k.size(), rec.data(), rec.size());
    };
    auto send = [&](const std::vector<uint8_t>& p) {
        InProcTransport tr(*s.engines[0]);
        EXPECT_TRUE(tr.offload_bytes_batch_allowed());
        return code_of([&] { tr.rpc(net::kOpOffloadBytesBatch, p.data(), static_cast<uint32_t>(p.size())); });
    };
    std::vector<uint8_t> p;
    sub(p, entry(1), net::kOffloadInsert);
    sub(p, entry(3), net::kOffloadLeaf);
    EXPECT_EQ(send(p), ErrorCode::kProtocol) << "a lookup in a batch";
    p.clear();
    sub(p, entry(1), net::kOffloadInsert);
    sub(p, entry(3), net::kOffloadInsert);
    std::vector<uint8_t> cut(p.begin(), p.end() - 3);
    EXPECT_EQ(send(cut), ErrorCode::kProtocol) << "truncated";
    std::vector<uint8_t> extra = p;
    extra.push_back(0);
    EXPECT_EQ(send(extra), ErrorCode::kProtocol) << "a byte after the last request";
    p.clear();
    sub(p, entry(1), net::kOffloadInsert);
    sub(p, entry(3), net::kOffloadInsert, s.engines[0]->pool_bytes() + 4096);
    EXPECT_EQ(send(p), ErrorCode::kProtocol) << "journal slot outside the pool";
    EXPECT_EQ(send({}), ErrorCode::kProtocol) << "no request";
    p.clear();
    for (int i = 0; i < 257; i++) sub(p, entry(2 * i + 1), net::kOffloadInsert);
    EXPECT_EQ(send(p), ErrorCode::kProtocol) << "257 requests";
    // (an uncached reader: the raw RPCs bypass s.t's cache)
    SlottedTree probe(*s.mem, 0, s.ns[0]);
    probe.set_placement(s.ns, 2);
    EXPECT_FALSE(probe.contains(entry(1)));
    EXPECT_FALSE(probe.contains(entry(3)));
    EXPECT_EQ(probe.check().entries, 2000u);
    // a well-formed one goes through
    p.clear();
    sub(p, entry(1), net::kOffloadInsert);
    sub(p, entry(3), net::kOffloadInsert);
    {
        InProcTransport tr(*s.engines[0]);
        std::vector<uint8_t> r = tr.rpc(net::kOpOffloadBytesBatch, p.data(), static_cast<uint32_t>(p.size()));
        ASSERT_EQ(r.size(), 2 * sizeof(net::OffloadReply));
        for (int j = 0; j < 2; j++) EXPECT_EQ(r[j * sizeof(net::OffloadReply)], net::kOffloadDone) << j;
    }
    EXPECT_TRUE(probe.contains(entry(1)));
    EXPECT_TRUE(probe.contains(entry(3)));
    s.engines[0]->refuse_cpu_atomics("test: IBV_ATOMIC_HCA");
    InProcTransport tr(*s.engines[0]);
    EXPECT_FALSE(tr.offload_bytes_batch_allowed());
    p.clear();
    sub(p, entry(5), net::kOffloadInsert);
    EXPECT_EQ(code_of([&] { tr.rpc(net::kOpOffloadBytesBatch, p.data(), static_cast<uint32_t>(p.size())); }),
              ErrorCode::kInvalid);
    EXPECT_FALSE(probe.contains(entry(5)));
    EXPECT_EQ(probe.check().entries, 2002u);
}

// Every leaf cached; a batch whose answer is lost after the memory node
// applied it: the error reaches the caller, and no cached leaf without the
// new entries survives (the batch started at cached leaves: those are
// dropped), so lookups see every entry and the cache equals remote memory.
// A batch that is answered drops its changed leaves too and logs them once.
TEST(InsertBatchBytes, LostAnswerDropsCachedLeaves) {
    BatchSetup s(1, 2, 5000, 0.5, 4096, 1.0, /*lossy_node0=*/true);
    for (uint32_t u = 0; u < 10000; u += 2) ASSERT_TRUE(s.t->contains(entry(u)));  // caches every leaf
    s.pol.set_mode(tree::OffloadMode::kOn);
    std::vector<Key> keys;
    for (uint32_t u = 1; u < 10000; u += 40) keys.push_back(entry(u));
    std::vector<uint64_t> lsns(keys.size(), 0);
    size_t done = 0;
    s.lossy->lose = true;
    EXPECT_THROW(s.t->insert_batch(keys.data(), lsns.data(), keys.size(), UINT64_MAX, &done), Error);
    s.lossy->lose = false;
    s.model.insert(keys.begin(), keys.end());  // the node applied them
    for (const Key& k : keys) EXPECT_TRUE(s.t->contains(k)) << tree::SlottedLayout::str(k);
    expect_cache_coherent(s.c->region(), *s.mem);
    // Answered: changed leaves dropped, one change-log call.
    for (uint32_t u = 0; u < 10000; u += 2) ASSERT_TRUE(s.t->contains(entry(u)));
    keys.clear();
    for (uint32_t u = 21; u < 10000; u += 40) keys.push_back(entry(u));
    g_logged.clear();
    g_log_calls = 0;
    s.batch(keys);
    EXPECT_EQ(g_log_calls, 1u);
    EXPECT_GE(g_logged.size(), keys.size() / 4);
    for (const Key& k : keys) EXPECT_TRUE(s.t->contains(k));
    s.expect_exact();
}

}  // namespace
}  // namespace dex::testing
