// Memory-node splits of slotted leaves (OFFLOAD_BYTES_SPLIT; src/README.md
// "Offloading", memory-node splits): a byte-string entry inserted into a full
// slotted leaf -- cached, or missed at the leaf -- is sent with the split
// extension, and the memory node splits the leaf with the layout's own split
// (tree/layout.h), links the sibling into the parent when it can, and the
// compute side installs the images: one round trip where the one-sided split
// took six to nine. A memory node without the capability gets none.
#include <gtest/gtest.h>

#include <cstdio>
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

// An e-mail-like key and a 6-byte "heap TID", as the glue builds entries.
Key entry(uint32_t user, uint32_t tid = 1) { return email_entry(user, tid); }

size_t g_logged = 0;
void count_changes(const GAddr*, size_t n) { g_logged += n; }

// A memory node as an older one looks: offloaded byte-string writes, no split.
class NoBytesSplit final : public InProcForwarder {
public:
    explicit NoBytesSplit(memnode::Engine& e) : InProcForwarder(e) {}
    bool offload_writes_allowed() override { return in_.offload_writes_allowed(); }
    bool offload_bytes_allowed() override { return in_.offload_bytes_allowed(); }
    bool split_spare_allowed() override { return in_.split_spare_allowed(); }
};

// One memory node, a slotted tree bulk-loaded with entry(2 i), i < count, at
// `fill`, and a compute server with a node cache (`leaf_admission`) and
// offloading on; `split`: the memory node announces OFFLOAD_BYTES_SPLIT.
struct BytesSplitSetup {
    std::unique_ptr<memnode::Engine> engine = make_engine(64 << 20);
    std::unique_ptr<RemoteMemory> mem;
    uint64_t ns = 0;
    std::unique_ptr<char[]> rmem;
    std::unique_ptr<cache::Cache> c;
    tree::OffloadPolicy pol;
    std::unique_ptr<SlottedTree> t;
    std::set<Key> model;

    BytesSplitSetup(uint32_t count, double leaf_admission, bool split = true) {
        std::vector<std::unique_ptr<Transport>> v;
        if (split)
            v.push_back(std::make_unique<InProcTransport>(*engine));
        else
            v.push_back(std::make_unique<NoBytesSplit>(*engine));
        mem = std::make_unique<RemoteMemory>(std::move(v));
        ns = ns_create(mem->node(0));
        const size_t bytes = cache::CacheRegion::bytes_for(8192 * kNodeSize);
        rmem.reset(new char[bytes]);
        cache::AdmissionPolicy ap;
        ap.leaf_admission = leaf_admission;
        c = std::make_unique<cache::Cache>(*cache::CacheRegion::init(rmem.get(), bytes, ap), 5);
        pol.set_mode(tree::OffloadMode::kOff);  // the warm-up reads one-sided (and admits)
        tree::TreeOptions o;
        o.cache = c.get();
        o.offload = &pol;
        o.log_changes = count_changes;
        t = std::make_unique<SlottedTree>(*mem, 0, ns, o);
        t->set_placement({ns}, 1);
        SlottedTree::BulkLoader bl(*t, 0.95);
        for (uint32_t i = 0; i < count; i++) {
            bl.add(entry(2 * i));
            model.insert(entry(2 * i));
        }
        bl.finish();
        for (const Key& k : model) EXPECT_TRUE(t->contains(k));
        pol.set_mode(tree::OffloadMode::kOn);
    }
    void expect_exact() {
        expect_slotted_tree_is(*t, model, c->region(), *mem);
    }
    // Random new (odd) entries one at a time; returns the round trips of the
    // inserts during which a memory node split a leaf, and how many those were.
    std::pair<uint64_t, uint64_t> insert_random(int n, uint32_t range, uint64_t seed) {
        std::mt19937_64 rng(seed);
        uint64_t trips = 0, splitting = 0;
        for (int i = 0; i < n; i++) {
            const Key k = entry(static_cast<uint32_t>(rng() % range) | 1u, 3);
            const bool fresh = model.insert(k).second;
            const uint64_t s0 = stats().memnode_splits.load(), r0 = stats().round_trips.load();
            EXPECT_EQ(t->insert(k), fresh);
            if (stats().memnode_splits.load() != s0) trips += stats().round_trips.load() - r0, splitting++;
        }
        return {trips, splitting};
    }
};

// Cached full leaves: split by the memory node in one round trip (a few
// more where the parent is full), the tree exact, the cache coherent, every
// changed node logged for standbys.
TEST(MemnodeBytesSplit, CachedFullLeavesSplitOnTheMemoryNode) {
    BytesSplitSetup s(4000, 1.0);
    const uint64_t logged0 = g_logged;
    const auto [trips, splitting] = s.insert_random(6000, 8000, 3);
    EXPECT_GT(splitting, 100u) << "6000 entries into full leaves split few on the memory node";
    EXPECT_LE(trips, 3 * splitting / 2) << splitting << " inserts split a leaf on the memory node";
    EXPECT_GE(g_logged - logged0, 2 * splitting) << "the leaf and its sibling of each split are logged";
    s.expect_exact();
    EXPECT_EQ(s.t->check().missing_downlinks, 0u);
}

// Inserts that miss at the leaf (no leaf admitted): the memory node splits
// too, and the leaf it answers with is admitted under the insert's marker.
TEST(MemnodeBytesSplit, MissesAtTheLeafSplitOnTheMemoryNode) {
    BytesSplitSetup s(4000, 0.0);
    const uint64_t s0 = stats().memnode_splits.load();
    s.insert_random(3000, 8000, 4);
    EXPECT_GT(stats().memnode_splits.load() - s0, 50u);
    s.expect_exact();
}

// An older memory node (no kHelloOffloadBytesSplit): every split one-sided.
TEST(MemnodeBytesSplit, OlderMemoryNodeGetsNoSplitRequests) {
    BytesSplitSetup s(4000, 1.0, false);
    const uint64_t s0 = stats().memnode_splits.load(), off0 = s.engine->stats().offloads;
    s.insert_random(3000, 8000, 5);
    EXPECT_EQ(stats().memnode_splits.load(), s0);
    EXPECT_GT(s.engine->stats().offloads, off0) << "inserts into leaves with room were still offloaded";
    s.expect_exact();
}

}  // namespace
}  // namespace dex::testing
