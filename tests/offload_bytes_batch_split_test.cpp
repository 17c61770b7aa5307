// Memory-node splits inside a slotted tree's batched inserts
// (OFFLOAD_BYTES_BATCH_SPLIT; src/README.md "Offloading", batched offloaded
// inserts): a batch of byte-string entries whose leaves fill up is split by
// the memory node in the same round trip -- the separators come back whole,
// so the compute side can insert a downlink the memory node could not --
// instead of each full leaf's first entry going alone (OFFLOAD_BYTES_SPLIT,
// one round trip more per split). Against in-process memory nodes: random and
// ascending batches (round trips against a node without the capability),
// full parents, a malformed request, a lost answer, three memory nodes.
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
#include "tree/offload_policy.h"
#include "tree_test_util.h"

namespace dex::testing {
namespace {

using tree::SlottedTree;
using Key = std::string;

Key entry(uint32_t user, uint32_t tid = 1) { return email_entry(user, tid); }

std::set<GAddr> g_logged;
void record_changes(const GAddr* nodes, size_t n) { g_logged.insert(nodes, nodes + n); }

// How a memory node looks to the compute side: kNewer announces
// OFFLOAD_BYTES_BATCH_SPLIT; kOlder only OFFLOAD_BYTES_BATCH and
// OFFLOAD_BYTES_SPLIT (the node before this change). kLossy: newer, and the
// answer to the next OFFLOAD_BYTES_BATCH_SPLIT is lost after it ran.
enum class Kind { kNewer, kOlder, kLossy };

class Node0 final : public InProcForwarder {
public:
    Node0(memnode::Engine& e, Kind k) : InProcForwarder(e), kind_(k) {}
    std::vector<uint8_t> rpc(net::Op op, const void* p, uint32_t l) override {
        if (op == net::kOpOffloadBytesBatchSplit) batch_splits_sent++;
        auto r = in_.rpc(op, p, l);
        if (op == net::kOpOffloadBytesBatchSplit && lose) {
            lose = false;
            throw Error(ErrorCode::kTimeout, "test: the batch's answer is lost");
        }
        return r;
    }
    bool offload_writes_allowed() override { return in_.offload_writes_allowed(); }
    bool offload_bytes_allowed() override { return in_.offload_bytes_allowed(); }
    bool offload_bytes_batch_allowed() override { return in_.offload_bytes_batch_allowed(); }
    bool offload_bytes_split_allowed() override { return in_.offload_bytes_split_allowed(); }
    bool split_spare_allowed() override { return in_.split_spare_allowed(); }
    bool offload_bytes_batch_split_allowed() override {
        return kind_ != Kind::kOlder && in_.offload_bytes_batch_split_allowed();
    }
    int batch_splits_sent = 0;
    bool lose = false;

private:
    Kind kind_;
};

// `nodes` memory nodes, a slotted tree over them (placement level 1) bulk-
// loaded with entry(2 i), i < count, at `fill`, a compute server with a cache
// admitting every leaf, the whole tree warmed into it, offloading on.
struct Nodes {
    std::vector<std::unique_ptr<memnode::Engine>> engines;
    std::vector<Node0*> fronts;
    std::unique_ptr<RemoteMemory> mem;
    std::vector<uint64_t> ns;
    Region reg{16384};  // every leaf admitted
    std::unique_ptr<cache::Cache> c;
    tree::OffloadPolicy pol;
    std::unique_ptr<SlottedTree> t;
    std::set<Key> model;

    Nodes(int nodes, uint32_t count, double fill, Kind kind) {
        std::vector<std::unique_ptr<Transport>> v;
        for (int i = 0; i < nodes; i++) {
            engines.push_back(make_engine(64 << 20));
            auto f = std::make_unique<Node0>(*engines.back(), kind);
            fronts.push_back(f.get());
            v.push_back(std::move(f));
        }
        mem = std::make_unique<RemoteMemory>(std::move(v));
        for (int i = 0; i < nodes; i++) ns.push_back(ns_create(mem->node(static_cast<uint32_t>(i))));
        c = std::make_unique<cache::Cache>(*reg.region, 7);
        pol.set_mode(tree::OffloadMode::kOff);  // the warm-up reads one-sided (and admits)
        tree::TreeOptions o;
        o.cache = c.get();
        o.offload = &pol;
        o.log_changes = record_changes;
        t = std::make_unique<SlottedTree>(*mem, 0, ns[0], o);
        t->set_placement(ns, 1);
        SlottedTree::BulkLoader bl(*t, fill);
        for (uint32_t i = 0; i < count; i++) {
            bl.add(entry(2 * i));
            model.insert(entry(2 * i));
        }
        bl.finish();
        for (const Key& k : model) EXPECT_TRUE(t->contains(k));
        pol.set_mode(tree::OffloadMode::kOn);
    }
    // One insert_batch() of `keys` (sorted, as the glue hands them over).
    void batch(std::vector<Key> keys) {
        std::sort(keys.begin(), keys.end());
        std::vector<uint64_t> lsns(keys.size(), 0);
        size_t done = 0;
        t->insert_batch(keys.data(), lsns.data(), keys.size(), UINT64_MAX, &done);
        EXPECT_EQ(done, keys.size());
        model.insert(keys.begin(), keys.end());
    }
    // `n` new (odd) entries below entry(range), distinct (there must be as many).
    std::vector<Key> fresh(std::mt19937_64& rng, size_t n, uint32_t range) {
        std::set<Key> s;
        while (s.size() < n) {
            Key k = entry(static_cast<uint32_t>(rng() % range) | 1u);
            if (!model.count(k)) s.insert(k);
        }
        return {s.begin(), s.end()};
    }
    void expect_exact() { expect_slotted_tree_is(*t, model, c->region(), *mem); }
};

uint64_t trips() { return stats().round_trips.load(); }
uint64_t splits() { return stats().memnode_splits.load(); }

// Leaves 95% full: a batch of 128 random new entries splits most of the leaves
// it meets. The newer node does all of it in one round trip while the parents
// take the downlinks, and their images come back (the next batch starts at
// the leaves again and splits too); a node without the capability sends each
// full leaf's first entry alone (a round trip more per split). Exact and
// coherent.
TEST(BytesBatchSplit, RandomBatchesSplitInsideTheBatch) {
    uint64_t per_kind[2] = {0, 0};
    for (Kind kind : {Kind::kNewer, Kind::kOlder}) {
        const bool newer = kind == Kind::kNewer;
        Nodes s(1, 300, 0.95, kind);  // parents with room for the downlinks
        std::mt19937_64 rng(3);
        g_logged.clear();
        const uint64_t t0 = trips(), s0 = splits();
        s.batch(s.fresh(rng, 128, 600));
        const uint64_t first = trips() - t0, made = splits() - s0;
        EXPECT_GE(g_logged.size(), 2 * made) << "each split's leaf and sibling logged for standbys";
        const uint64_t t1 = trips();
        s.batch(s.fresh(rng, 32, 600));
        const uint64_t second = trips() - t1;
        for (int b = 0; b < 3; b++) s.batch(s.fresh(rng, 32, 600));
        per_kind[newer] = trips() - t0;
        std::printf("[ bytes batch split ] %s: 128 + 4 x 32 random entries, %llu round trips (first batch %llu, "
                    "%llu memory-node splits in it)\n",
                    newer ? "OFFLOAD_BYTES_BATCH_SPLIT" : "OFFLOAD_BYTES_BATCH + OFFLOAD_BYTES_SPLIT",
                    static_cast<unsigned long long>(per_kind[newer]), static_cast<unsigned long long>(first),
                    static_cast<unsigned long long>(made));
        EXPECT_GE(made, 10u) << "the first batch fills and splits many leaves";
        if (newer) {
            EXPECT_EQ(first, 1u) << "one OFFLOAD_BYTES_BATCH_SPLIT, nothing else";
            EXPECT_GT(s.fronts[0]->batch_splits_sent, 0);
            EXPECT_EQ(second, 1u) << "the parents came back with their downlinks: the next batch splits too";
        } else {
            EXPECT_EQ(s.fronts[0]->batch_splits_sent, 0) << "never sent to a node without the capability";
            EXPECT_GT(first, made) << "a round trip more per split";
        }
        s.expect_exact();
    }
    EXPECT_LT(per_kind[1] * 2, per_kind[0] + per_kind[1]) << "the newer node saves a round trip per split";
}

// Ascending entries (a serial text key) land in the rightmost leaf, which the
// memory node splits again and again inside one batch (later items move right
// to the siblings the earlier ones made): the first batch, whose leaf and
// parent are cached, takes one round trip. Later batches whose parent filled
// (its split is the compute side's, and the new parent is not cached) go as
// before; in all, fewer round trips than a node without the capability.
TEST(BytesBatchSplit, AscendingBatchesSplitTheRightmostLeafInPlace) {
    uint64_t per_kind[2] = {0, 0};
    for (Kind kind : {Kind::kNewer, Kind::kOlder}) {
        const bool newer = kind == Kind::kNewer;
        Nodes s(1, 300, 1.0, kind);
        uint32_t next = 100000;
        const uint64_t t0 = trips(), s0 = splits();
        for (int b = 0; b < 21; b++) {
            std::vector<Key> keys;
            for (int i = 0; i < 256; i++) keys.push_back(entry(next++));
            s.batch(keys);
            if (b == 0 && newer) {
                EXPECT_EQ(trips() - t0, 1u);
                EXPECT_GE(splits() - s0, 256u / 40) << "a 1 KiB leaf holds fewer than 40 such entries";
            }
        }
        per_kind[newer] = trips() - t0;
        std::printf("[ bytes batch split ] %s: 21 x 256 ascending entries: %llu round trips, %llu memory-node "
                    "splits\n",
                    newer ? "OFFLOAD_BYTES_BATCH_SPLIT" : "OFFLOAD_BYTES_BATCH + OFFLOAD_BYTES_SPLIT",
                    static_cast<unsigned long long>(per_kind[newer]), static_cast<unsigned long long>(splits() - s0));
        s.expect_exact();
    }
    EXPECT_LT(per_kind[1], per_kind[0]);
}

// Full leaves under full parents, three memory nodes: the memory nodes split
// leaves they cannot link, the compute side inserts those downlinks with the
// separators' bytes from the tails (splitting parents); the tree is exact,
// no downlink missing, placement holds.
TEST(BytesBatchSplit, FullParentsAreFinishedByTheComputeSide) {
    Nodes s(3, 20000, 1.0, Kind::kNewer);
    const uint32_t h0 = s.t->info().height;
    std::mt19937_64 rng(23);
    const uint64_t s0 = splits();
    for (int b = 0; b < 12; b++) s.batch(s.fresh(rng, 256, 40000));
    EXPECT_GT(splits() - s0, 150u);
    EXPECT_GE(s.t->info().height, h0);
    EXPECT_EQ(s.t->check().missing_downlinks, 0u);
    s.expect_exact();  // check(): placement too
}

// The memory node refuses a malformed request whole -- a lookup among the
// inserts, bad flags, bytes after the last item, a count that does not match
// -- and nothing changes; a well-formed one splits the full leaf.
TEST(BytesBatchSplit, MalformedRequestChangesNothing) {
    Nodes s(1, 600, 1.0, Kind::kNewer);
    tree::TreeInfo info = s.t->info();
    auto item = [&](std::vector<uint8_t>& p, const Key& k, uint8_t kind, uint8_t split) {
        net::OffloadBytesBatchSplitItem it{};
        it.split = split;
        p.insert(p.end(), reinterpret_cast<const uint8_t*>(&it), reinterpret_cast<const uint8_t*>(&it) + sizeof it);
        net::OffloadBytesHeader h{};
        h.start = gaddr_offset(info.root);
        h.tree_id = s.t->tree_id();
        h.kind = kind;
        h.start_level = static_cast<uint8_t>(info.height - 1);
        net::append_offload_bytes(p, h, k.data(), k.size(), nullptr, 0);
    };
    auto request = [&](uint32_t count, const std::vector<uint8_t>& items) {
        const net::OffloadBatchSplitHeader h{s.ns[0], count, 0};
        std::vector<uint8_t> p(reinterpret_cast<const uint8_t*>(&h), reinterpret_cast<const uint8_t*>(&h) + sizeof h);
        p.insert(p.end(), items.begin(), items.end());
        return p;
    };
    auto send = [&](const std::vector<uint8_t>& p) {
        InProcTransport tr(*s.engines[0]);
        EXPECT_TRUE(tr.offload_bytes_batch_split_allowed());
        return code_of([&] { tr.rpc(net::kOpOffloadBytesBatchSplit, p.data(), static_cast<uint32_t>(p.size())); });
    };
    const uint64_t used0 = s.engines[0]->used_bytes();
    std::vector<uint8_t> items;
    item(items, entry(1), net::kOffloadInsert, 1);
    item(items, entry(3), net::kOffloadLeaf, 1);
    EXPECT_EQ(send(request(2, items)), ErrorCode::kProtocol) << "a lookup in the batch";
    items.clear();
    item(items, entry(1), net::kOffloadInsert, 2);
    EXPECT_EQ(send(request(1, items)), ErrorCode::kProtocol) << "flags";
    items.clear();
    item(items, entry(1), net::kOffloadInsert, 1);
    item(items, entry(3), net::kOffloadInsert, 1);
    EXPECT_EQ(send(request(1, items)), ErrorCode::kProtocol) << "an item after the count";
    EXPECT_EQ(send(request(3, items)), ErrorCode::kProtocol) << "fewer items than the count";
    std::vector<uint8_t> cut = request(2, items);
    cut.resize(cut.size() - 2);
    EXPECT_EQ(send(cut), ErrorCode::kProtocol) << "truncated";
    EXPECT_EQ(send(request(0, {})), ErrorCode::kProtocol) << "no item";
    SlottedTree probe(*s.mem, 0, s.ns[0]);  // uncached: the raw RPCs bypass s.t's cache
    probe.set_placement(s.ns, 1);
    EXPECT_FALSE(probe.contains(entry(1)));
    EXPECT_FALSE(probe.contains(entry(3)));
    EXPECT_EQ(s.engines[0]->used_bytes(), used0) << "no sibling allocated";
    // Well formed: both go in, the full leaf split by the memory node.
    InProcTransport tr(*s.engines[0]);
    const std::vector<uint8_t> ok = request(2, items);
    std::vector<uint8_t> r = tr.rpc(net::kOpOffloadBytesBatchSplit, ok.data(), static_cast<uint32_t>(ok.size()));
    ASSERT_GE(r.size(), 2 * sizeof(net::OffloadReply));
    for (int j = 0; j < 2; j++) {
        const uint8_t st = r[j * sizeof(net::OffloadReply)];
        EXPECT_TRUE(st == net::kOffloadDone || st == net::kOffloadSplit) << j << ": " << int(st);
    }
    EXPECT_TRUE(probe.contains(entry(1)));
    EXPECT_TRUE(probe.contains(entry(3)));
    EXPECT_EQ(probe.check().entries, 602u);
}

// The answer is lost after the memory node split leaves: the error reaches
// the caller, no stale pre-split leaf stays cached, the same batch again
// (all present now) and every lookup work, the tree is exact.
TEST(BytesBatchSplit, LostAnswerLeavesNoStaleLeafCached) {
    Nodes s(1, 600, 1.0, Kind::kLossy);
    std::mt19937_64 rng(29);
    std::vector<Key> keys = s.fresh(rng, 256, 1200);
    std::sort(keys.begin(), keys.end());
    std::vector<uint64_t> lsns(keys.size(), 0);
    size_t done = 0;
    s.fronts[0]->lose = true;
    const uint64_t s0 = splits();
    EXPECT_THROW(s.t->insert_batch(keys.data(), lsns.data(), keys.size(), UINT64_MAX, &done), Error);
    EXPECT_EQ(splits(), s0) << "an unknown answer is not counted";
    expect_cache_coherent(s.c->region(), *s.mem);
    s.batch(keys);  // the memory node did them: no-ops now
    for (const Key& k : s.model) ASSERT_TRUE(s.t->contains(k));
    s.expect_exact();
}

}  // namespace
}  // namespace dex::testing
