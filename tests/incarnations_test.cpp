// The node cache's memory-node incarnation table (src/cache/incarnations.h,
// src/README.md "Invalidation: memory-node incarnations"): purges drop the
// frames of the restarted node and of trees homed there, and nothing else;
// a purge happens once per incarnation; the admission check refuses images
// while a purge runs or from another incarnation.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "cache/cache.h"
#include "cache/incarnations.h"
#include "cache/region.h"
#include "common/error.h"

using namespace dex;
using namespace dex::cache;

namespace {

struct Fixture {
    std::unique_ptr<char[]> mem;
    CacheRegion* region;
    std::unique_ptr<Cache> cache;
    std::unique_ptr<IncarnationTable> table = std::make_unique<IncarnationTable>();
    explicit Fixture(uint32_t frames = 64) {
        size_t bytes = CacheRegion::bytes_for(size_t(frames) * kNodeSize);
        mem.reset(new char[bytes]);
        region = CacheRegion::init(mem.get(), bytes);
        cache = std::make_unique<Cache>(*region, 42);
        table->init();
    }
    // Admit a leaf of tree `tree_id` at g.
    void admit(GAddr g, uint32_t tree_id) {
        Node n;
        std::memset(&n, 0, sizeof n);
        n.tree_id = tree_id;
        n.level = 0;
        ASSERT_EQ(cache->try_begin_io(g), MappingTable::Begin::kOwner);
        ASSERT_NE(cache->admit(g, n), kNoFrame);
    }
    bool cached(GAddr g) {
        uint32_t f = region->table().lookup(g);
        return f != kNoFrame && f != MappingTable::kIoInProgress;
    }
};

GAddr on(uint32_t node, uint64_t i) { return make_gaddr(node, (i + 1) * kNodeSize); }

}  // namespace

TEST(Incarnations, PurgeDropsTheNodesFramesAndTreesHomedThere) {
    Fixture x;
    const uint32_t homed0 = 5, homed1 = (1u << 24) | 7;  // tree::tree_id_for(0, 5), tree_id_for(1, 7)
    x.admit(on(0, 1), homed0);  // node 0, tree homed on 0
    x.admit(on(1, 2), homed0);  // node 1, tree homed on 0: its tree id comes back after 0 restarts
    x.admit(on(1, 3), homed1);  // node 1, tree homed on 1
    x.admit(on(2, 4), homed1);  // node 2, tree homed on 1
    EXPECT_EQ(x.table->recorded(0), 0u);
    EXPECT_FALSE(x.table->current(0, 111));

    x.table->sync(*x.cache, 0, 111);
    EXPECT_EQ(x.table->recorded(0), 111u);
    EXPECT_FALSE(x.cached(on(0, 1)));
    EXPECT_FALSE(x.cached(on(1, 2)));
    EXPECT_TRUE(x.cached(on(1, 3)));
    EXPECT_TRUE(x.cached(on(2, 4)));

    // Same incarnation again: nothing is purged.
    x.admit(on(0, 5), homed0);
    x.table->sync(*x.cache, 0, 111);
    EXPECT_TRUE(x.cached(on(0, 5)));
    EXPECT_TRUE(x.table->current(0, 111));

    // Node 1 restarts: its frames and those of trees homed on it go.
    x.table->sync(*x.cache, 1, 222);
    EXPECT_FALSE(x.cached(on(1, 3)));
    EXPECT_FALSE(x.cached(on(2, 4)));
    EXPECT_TRUE(x.cached(on(0, 5)));
    EXPECT_EQ(x.table->recorded(1), 222u);
    EXPECT_EQ(x.table->recorded(0), 111u);

    // Node 0 restarts again.
    x.table->sync(*x.cache, 0, 333);
    EXPECT_FALSE(x.cached(on(0, 5)));
    EXPECT_EQ(x.table->recorded(0), 333u);
}

TEST(Incarnations, BelongsToNode) {
    FrameInfo i{};
    i.gaddr = on(3, 1);
    i.tree_id = (5u << 24) | 9;
    EXPECT_TRUE(IncarnationTable::belongs_to_node(i, 3));
    EXPECT_TRUE(IncarnationTable::belongs_to_node(i, 5));
    EXPECT_FALSE(IncarnationTable::belongs_to_node(i, 4));
    // Home node numbers are folded into one byte.
    EXPECT_TRUE(IncarnationTable::belongs_to_node(i, 256 + 5));
}

TEST(Incarnations, NodeNumberTooLargeIsAnError) {
    Fixture x;
    const uint32_t big = IncarnationTable::kMaxNodes;
    try {
        x.table->sync(*x.cache, big, 1);
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalid);
        EXPECT_NE(std::string(e.what()).find("too large for the node cache"), std::string::npos) << e.what();
    }
    EXPECT_EQ(x.table->recorded(big), 0u);
    EXPECT_FALSE(x.table->admit_ok(on(big, 1), [](uint32_t) -> uint64_t { return 1; }));
}

TEST(Incarnations, AdmitCheck) {
    Fixture x;
    int asked = 0;
    auto connected = [&](uint64_t inc) {
        return [&asked, inc](uint32_t) {
            asked++;
            return inc;
        };
    };
    // No record (never synchronized, or a purge running): refused without
    // asking the connection (which might connect).
    EXPECT_FALSE(x.table->admit_ok(on(0, 1), connected(7)));
    EXPECT_EQ(asked, 0);
    x.table->sync(*x.cache, 0, 7);
    EXPECT_TRUE(x.table->admit_ok(on(0, 1), connected(7)));
    EXPECT_FALSE(x.table->admit_ok(on(0, 1), connected(8)));  // connected to another incarnation
    EXPECT_EQ(asked, 2);
    EXPECT_FALSE(x.table->admit_ok(on(1, 1), connected(7)));  // node 1 never synchronized
    // The connection failing means no.
    EXPECT_FALSE(x.table->admit_ok(on(0, 1), [](uint32_t) -> uint64_t { throw Error(ErrorCode::kUnreachable, "x"); }));
    EXPECT_FALSE(x.table->admit_ok(on(0, 1), [](uint32_t) -> uint64_t { throw std::runtime_error("x"); }));
}

// The cache's admission check wired to the table, as the compute process
// does: an image read from the old incarnation and admitted after the purge
// is dropped at once.
TEST(Incarnations, AdmissionAfterThePurgeIsDropped) {
    Fixture x;
    uint64_t connected = 1;  // what this "process" is connected to
    x.cache->set_admit_check(
        [&](GAddr g) { return x.table->admit_ok(g, [&](uint32_t) { return connected; }); });
    x.table->sync(*x.cache, 0, 1);
    x.admit(on(0, 1), 0);
    EXPECT_TRUE(x.cached(on(0, 1)));
    // Another process purged for incarnation 2 while we still talk to 1.
    x.table->sync(*x.cache, 0, 2);
    EXPECT_FALSE(x.cached(on(0, 1)));
    Node n;
    std::memset(&n, 0, sizeof n);
    ASSERT_EQ(x.cache->try_begin_io(on(0, 9)), MappingTable::Begin::kOwner);
    EXPECT_EQ(x.cache->admit(on(0, 9), n), kNoFrame);
    EXPECT_FALSE(x.cached(on(0, 9)));
    connected = 2;  // reconnected
    x.admit(on(0, 9), 0);
    EXPECT_TRUE(x.cached(on(0, 9)));
}

// Concurrent synchronizers of one new incarnation: all return with the record
// set and every old frame gone; each sees a consistent table.
TEST(Incarnations, ConcurrentSyncs) {
    Fixture x(256);
    for (int i = 0; i < 100; i++) x.admit(on(0, i), 3);
    x.table->sync(*x.cache, 0, 10);  // drops them: record 10
    for (int i = 0; i < 100; i++) x.admit(on(0, i), 3);
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; t++)
        ts.emplace_back([&x, t] {
            Cache c(*x.region, 100 + t);
            x.table->sync(c, 0, 11);
        });
    for (auto& t : ts) t.join();
    EXPECT_EQ(x.table->recorded(0), 11u);
    for (int i = 0; i < 100; i++) EXPECT_FALSE(x.cached(on(0, i))) << i;
}
