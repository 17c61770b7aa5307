// The write-back registry and the dirty-owner-word protocol
// (src/cache/writeback_registry.h, src/README.md "Write-back mode"), against
// an in-process memory node: registering sets the word once, another
// generation in it means lost dirty nodes, a flush writes dirty frames back and
// clears the words of trees left clean -- but not of trees dirtied again
// meanwhile, with frames that failed to write, or whose node restarted.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "cache/cache.h"
#include "cache/region.h"
#include "cache/writeback_registry.h"
#include "tree_test_util.h"

using namespace dex;
using namespace dex::cache;
using namespace dex::testing;

namespace {

struct Fixture {
    std::unique_ptr<memnode::Engine> engine = make_engine(16 << 20);
    std::unique_ptr<RemoteMemory> mem = make_mem(*engine);
    uint64_t ns = ns_create(mem->node(0));
    std::unique_ptr<char[]> cmem;
    CacheRegion* region;
    std::unique_ptr<Cache> cache;
    std::unique_ptr<WritebackRegistry> reg = std::make_unique<WritebackRegistry>();
    std::set<GAddr> written;  // by the WriteBack callback
    bool fail_writes = false;
    std::function<void()> on_write;

    Fixture() {
        size_t bytes = CacheRegion::bytes_for(64 * kNodeSize);
        cmem.reset(new char[bytes]);
        region = CacheRegion::init(cmem.get(), bytes);
        cache = std::make_unique<Cache>(*region, 7);
        cache->set_write_back([this](uint32_t f, const Node&) {
            if (on_write) on_write();
            if (fail_writes) return false;
            written.insert(region->header(f).gaddr.load());
            return true;
        });
        reg->init();
    }
    uint64_t inc() { return mem->node(0).incarnation(); }
    GAddr word() { return make_gaddr(0, rpc::alloc(mem->node(0), ns, 8)); }
    uint64_t read_word(GAddr w) {
        uint64_t v = 0;
        mem->read(w, &v, 8);
        return v;
    }
    // A dirty cached leaf of tree `tid` carrying heap-WAL position lsn.
    GAddr dirty_leaf(uint32_t tid, uint64_t i, uint64_t lsn = 0) {
        GAddr g = make_gaddr(0, (1000 + i) * kNodeSize);
        Node n;
        std::memset(&n, 0, sizeof n);
        n.tree_id = tid;
        EXPECT_EQ(cache->try_begin_io(g), MappingTable::Begin::kOwner);
        uint32_t f = cache->admit(g, n);
        EXPECT_NE(f, kNoFrame);
        region->mark_dirty(f);
        region->header(f).lsn.store(lsn);
        return g;
    }
    size_t dirty_frames() {
        size_t n = 0;
        region->for_each_frame([&](const FrameInfo& i) { n += i.dirty && i.gaddr != kNullGAddr; });
        return n;
    }
};

constexpr uint64_t kGen = 0xabcdef12345ull;

}  // namespace

TEST(WritebackRegistry, FindOrAddUntilFull) {
    Fixture x;
    EXPECT_EQ(x.reg->used(), 0u);
    EXPECT_EQ(x.reg->find(0, 1, 100), -1);
    EXPECT_EQ(x.reg->find_or_add(0, 1, 0, 1, 1), -1);  // no owner word: never write-back
    EXPECT_EQ(x.reg->find_or_add(0, 1, 100, 9, 1), 0);
    EXPECT_EQ(x.reg->find_or_add(0, 1, 100, 9, 1), 0);
    EXPECT_EQ(x.reg->find(0, 1, 100), 0);
    EXPECT_EQ(x.reg->find(0, 1, 101), -1);  // another word: another tree (REINDEX)
    EXPECT_EQ(x.reg->find(1, 1, 100), -1);
    EXPECT_EQ(x.reg->entry(0).incarnation, 9u);
    EXPECT_EQ(x.reg->entry(0).tree_id, 1u);
    EXPECT_FALSE(x.reg->registered(0));
    for (uint32_t i = 1; i < WritebackRegistry::kMaxTrees; i++)
        ASSERT_EQ(x.reg->find_or_add(0, 1 + i, 100 + i, 9, 1 + i), static_cast<int>(i));
    EXPECT_EQ(x.reg->used(), WritebackRegistry::kMaxTrees);
    EXPECT_EQ(x.reg->find_or_add(0, 5000, 5000, 9, 5000), -1);  // full: that tree writes through
    EXPECT_EQ(x.reg->find_or_add(0, 7, 106, 9, 7), 6);         // known ones are still found
}

TEST(WritebackRegistry, RegisterSetsTheOwnerWordOnce) {
    Fixture x;
    GAddr w = x.word();
    EXPECT_EQ(x.read_word(w), 0u);
    WritebackRegistry::check_owner_word(*x.mem, w, kGen, "idx");  // free: fine
    int slot = x.reg->find_or_add(0, x.ns, w, x.inc(), 3);
    x.reg->register_dirty(slot, kGen, *x.mem, "idx");
    EXPECT_TRUE(x.reg->registered(slot));
    EXPECT_EQ(x.read_word(w), kGen);
    WritebackRegistry::check_owner_word(*x.mem, w, kGen, "idx");  // ours: fine
    // Registered: no remote operation until the next flush.
    uint64_t other = kGen + 1;
    x.mem->write(w, &other, 8);
    x.reg->register_dirty(slot, kGen, *x.mem, "idx");
    EXPECT_EQ(x.read_word(w), other);
}

TEST(WritebackRegistry, AnotherGenerationInTheWordMeansLostDirtyNodes) {
    Fixture x;
    GAddr w = x.word();
    uint64_t crashed = 777;  // an instance that died with dirty nodes
    x.mem->write(w, &crashed, 8);
    int slot = x.reg->find_or_add(0, x.ns, w, x.inc(), 3);
    try {
        x.reg->register_dirty(slot, kGen, *x.mem, "idx");
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kLostMemory);
        EXPECT_NE(std::string(e.what()).find("index \"idx\" lost its remote memory"), std::string::npos) << e.what();
        EXPECT_EQ(e.hint(), "REINDEX INDEX idx");
    }
    EXPECT_FALSE(x.reg->registered(slot));
    EXPECT_EQ(x.read_word(w), crashed);
    EXPECT_THROW(WritebackRegistry::check_owner_word(*x.mem, w, kGen, "idx"), Error);
    EXPECT_THROW(WritebackRegistry::check_owner_word(*x.mem, w, 0, "idx"), Error);  // no cache: any owner is lost
}

TEST(WritebackRegistry, FlushWritesBackAndClearsTheWords) {
    Fixture x;
    GAddr wa = x.word(), wb = x.word();
    int a = x.reg->find_or_add(0, x.ns, wa, x.inc(), 10);
    int b = x.reg->find_or_add(0, x.ns + 1, wb, x.inc(), 11);
    x.reg->register_dirty(a, kGen, *x.mem, "a");
    x.reg->register_dirty(b, kGen, *x.mem, "b");
    GAddr a1 = x.dirty_leaf(10, 1), a2 = x.dirty_leaf(10, 2), b1 = x.dirty_leaf(11, 3);
    x.dirty_leaf(12, 4);  // a tree that never registered here (no entry): written, no word

    // Only tree a.
    EXPECT_EQ(x.reg->flush(a, *x.cache, *x.mem), 2u);
    EXPECT_EQ(x.written, (std::set<GAddr>{a1, a2}));
    EXPECT_EQ(x.read_word(wa), 0u);
    EXPECT_FALSE(x.reg->registered(a));
    EXPECT_EQ(x.read_word(wb), kGen);
    EXPECT_TRUE(x.reg->registered(b));

    // Everything.
    EXPECT_EQ(x.reg->flush(-1, *x.cache, *x.mem), 2u);
    EXPECT_TRUE(x.written.count(b1));
    EXPECT_EQ(x.dirty_frames(), 0u);
    EXPECT_EQ(x.read_word(wb), 0u);
    EXPECT_EQ(x.reg->flush(-1, *x.cache, *x.mem), 0u);
}

TEST(WritebackRegistry, FlushKeepsTheWordOfTreesStillDirty) {
    Fixture x;
    GAddr w = x.word();
    int s = x.reg->find_or_add(0, x.ns, w, x.inc(), 10);
    x.reg->register_dirty(s, kGen, *x.mem, "a");
    x.dirty_leaf(10, 1);
    x.fail_writes = true;  // unreachable memory node, say
    EXPECT_EQ(x.reg->flush(-1, *x.cache, *x.mem), 0u);
    EXPECT_EQ(x.dirty_frames(), 1u);
    EXPECT_EQ(x.read_word(w), kGen);
    EXPECT_TRUE(x.reg->registered(s));  // still "possibly dirty"
    x.fail_writes = false;
    EXPECT_EQ(x.reg->flush(-1, *x.cache, *x.mem), 1u);
    EXPECT_EQ(x.read_word(w), 0u);
}

// A writer that dirties a frame while the flush runs registers again; the
// flush must then leave the word set.
TEST(WritebackRegistry, FlushKeepsTheWordOfTreesDirtiedMeanwhile) {
    Fixture x;
    GAddr w = x.word();
    int s = x.reg->find_or_add(0, x.ns, w, x.inc(), 10);
    x.reg->register_dirty(s, kGen, *x.mem, "a");
    x.dirty_leaf(10, 1);
    x.on_write = [&] { x.reg->register_dirty(s, kGen, *x.mem, "a"); };
    EXPECT_EQ(x.reg->flush(-1, *x.cache, *x.mem), 1u);
    EXPECT_TRUE(x.reg->registered(s));
    EXPECT_EQ(x.read_word(w), kGen);
}

// The home node restarted since the entry was made: its word (if the address
// means anything now) is not written.
TEST(WritebackRegistry, FlushLeavesWordsOfARestartedNodeAlone) {
    Fixture x;
    GAddr w = x.word();
    int s = x.reg->find_or_add(0, x.ns, w, x.inc() + 1, 10);
    x.reg->register_dirty(s, kGen, *x.mem, "a");
    EXPECT_EQ(x.reg->flush(-1, *x.cache, *x.mem), 0u);
    EXPECT_EQ(x.read_word(w), kGen);
    EXPECT_FALSE(x.reg->registered(s));
}

TEST(WritebackRegistry, ForgetADroppedNamespace) {
    Fixture x;
    GAddr w = x.word();
    int s = x.reg->find_or_add(0, x.ns, w, x.inc(), 10);
    x.reg->register_dirty(s, kGen, *x.mem, "a");
    x.reg->forget(0, x.ns);
    EXPECT_FALSE(x.reg->registered(s));
    EXPECT_EQ(x.reg->find(0, x.ns, w), -1);
    EXPECT_EQ(x.reg->entry(s).word, 0u);
    EXPECT_EQ(x.reg->flush(-1, *x.cache, *x.mem), 0u);
    EXPECT_EQ(x.read_word(w), kGen);  // freed memory: never written again
    x.reg->register_dirty(s, kGen, *x.mem, "a");  // no word: nothing to do
    EXPECT_FALSE(x.reg->registered(s));
}

TEST(WritebackRegistry, DirtyLsnMax) {
    Fixture x;
    x.dirty_leaf(10, 1, 500);
    x.dirty_leaf(10, 2, 700);
    x.dirty_leaf(11, 3, 900);
    // No tree ever registered: no frame can be dirty (cheap answer).
    EXPECT_EQ(x.reg->dirty_lsn_max(*x.region, 10, false), 0u);
    x.reg->find_or_add(0, x.ns, x.word(), x.inc(), 10);
    EXPECT_EQ(x.reg->dirty_lsn_max(*x.region, 10, false), 700u);
    EXPECT_EQ(x.reg->dirty_lsn_max(*x.region, 11, false), 900u);
    EXPECT_EQ(x.reg->dirty_lsn_max(*x.region, 12, false), 0u);
    EXPECT_EQ(x.reg->dirty_lsn_max(*x.region, 0, true), 900u);
}
