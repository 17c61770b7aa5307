// The shared cache block and a process's view of it (src/cache/shared_cache.h):
// layout and sizing, build / attach across processes, the generation, the
// per-pid handle with this process's policy and hooks, the census.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <set>

#include "cache/shared_cache.h"
#include "common/error.h"

#include "test_util.h"

using namespace dex;
using namespace dex::cache;

using dex::testing::SharedMem;

namespace {

constexpr uint64_t kCacheBytes = 256 * kNodeSize;

// Exit status of fn() run in a forked child.
template <class Fn>
int in_child(Fn fn) {
    pid_t pid = fork();
    if (pid == 0) _exit(fn());
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void admit(Cache& c, GAddr g, uint32_t tree_id, uint8_t level) {
    Node n;
    std::memset(&n, 0, sizeof n);
    n.tree_id = tree_id;
    n.level = level;
    ASSERT_EQ(c.try_begin_io(g), MappingTable::Begin::kOwner);
    ASSERT_NE(c.admit(g, n), kNoFrame);
}

}  // namespace

TEST(SharedCache, Sizing) {
    EXPECT_EQ(SharedCache::header_bytes() % 64, 0u);
    EXPECT_GE(SharedCache::header_bytes(), sizeof(SharedCacheHeader));
    EXPECT_EQ(SharedCache::bytes_for(kCacheBytes), SharedCache::header_bytes() + CacheRegion::bytes_for(kCacheBytes));
    std::set<uint64_t> gens;
    for (int i = 0; i < 8; i++) gens.insert(SharedCache::random_generation());
    EXPECT_EQ(gens.size(), 8u);
    EXPECT_FALSE(gens.count(0));
}

TEST(SharedCache, CreateAttachReset) {
    SharedMem mem(SharedCache::bytes_for(kCacheBytes));
    SharedCache a;
    EXPECT_FALSE(a.enabled());
    EXPECT_EQ(a.generation(), 0u);
    EXPECT_EQ(a.process_cache(), nullptr);
    EXPECT_THROW(a.create(mem.get(), kCacheBytes, 0), Error);
    a.create(mem.get(), kCacheBytes, 4242);
    ASSERT_TRUE(a.enabled());
    EXPECT_EQ(a.generation(), 4242u);
    EXPECT_EQ(a.block(), mem.get());
    EXPECT_EQ(a.block_bytes(), SharedCache::bytes_for(kCacheBytes));
    EXPECT_EQ(a.region()->frame_count(), 256u);
    EXPECT_EQ(a.header()->writeback.used(), 0u);
    EXPECT_EQ(a.header()->incarnations.recorded(0), 0u);
    // Another process's view of the same block.
    SharedCache b;
    b.attach(mem.get(), kCacheBytes);
    EXPECT_EQ(b.region(), a.region());
    EXPECT_EQ(b.generation(), 4242u);
    EXPECT_EQ(b.block_bytes(), a.block_bytes());
    // Wrong size, or nothing there: refused, and the view is empty.
    try {
        b.attach(mem.get(), 2 * kCacheBytes);
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalid);
    }
    EXPECT_FALSE(b.enabled());
    SharedMem zero(SharedCache::bytes_for(kCacheBytes));
    EXPECT_THROW(b.attach(zero.get(), kCacheBytes), Error);
    a.reset();
    EXPECT_FALSE(a.enabled());
    EXPECT_EQ(a.generation(), 0u);
    EXPECT_EQ(a.block(), nullptr);
    // Without a block every operation is a no-op.
    a.sync_node(0, 1);
    a.drop_tree(1);
    EXPECT_EQ(a.dirty_lsn_max(0, true), 0u);
    EXPECT_TRUE(a.census().empty());
}

TEST(SharedCache, ProcessHandleIsPerPidWithPolicyAndHooks) {
    SharedMem mem(SharedCache::bytes_for(kCacheBytes));
    SharedCache s;
    AdmissionPolicy p;
    p.cache_leaves = false;
    p.leaf_admission = 0.5;
    s.set_policy(p);
    s.create(mem.get(), kCacheBytes, 1);
    EXPECT_FALSE(s.region()->admission_policy().cache_leaves);  // the region is built with it
    int checks = 0;
    s.set_hooks(
        [&](GAddr) {
            checks++;
            return true;
        },
        {});
    Cache* c = s.process_cache();
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(s.process_cache(), c);
    EXPECT_FALSE(c->policy().cache_leaves);
    EXPECT_EQ(c->policy().leaf_admission, 0.5);
    admit(*c, make_gaddr(0, kNodeSize), 1, 1);
    EXPECT_EQ(checks, 1);
    p.cache_leaves = true;
    s.set_policy(p);
    EXPECT_TRUE(c->policy().cache_leaves);  // applied to the live handle too
    // A forked child never uses its parent's handle.
    EXPECT_EQ(in_child([&] { return s.process_cache() != c && s.process_cache() == s.process_cache() ? 0 : 1; }), 0);
    // Exit: the handle goes, a new one is made on the next use.
    s.detach_process();
    Cache* c2 = s.process_cache();
    ASSERT_NE(c2, nullptr);
    EXPECT_TRUE(c2->policy().cache_leaves);
    // Hooks reach handles made later: an admission check that refuses.
    s.set_hooks([](GAddr) { return false; }, {});
    s.detach_process();
    Node n;
    std::memset(&n, 0, sizeof n);
    GAddr g = make_gaddr(0, 2 * kNodeSize);
    ASSERT_EQ(s.process_cache()->try_begin_io(g), MappingTable::Begin::kOwner);
    EXPECT_EQ(s.process_cache()->admit(g, n), kNoFrame);
}

TEST(SharedCache, CensusAndDropTree) {
    SharedMem mem(SharedCache::bytes_for(kCacheBytes));
    SharedCache s;
    s.create(mem.get(), kCacheBytes, 1);
    Cache& c = *s.process_cache();
    admit(c, make_gaddr(0, 1 * kNodeSize), 7, 1);
    admit(c, make_gaddr(0, 2 * kNodeSize), 7, 0);
    admit(c, make_gaddr(0, 3 * kNodeSize), 7, 0);
    admit(c, make_gaddr(1, 4 * kNodeSize), 7, 0);
    admit(c, make_gaddr(1, 5 * kNodeSize), 9, 0);
    s.region()->mark_dirty(s.region()->table().lookup(make_gaddr(0, 3 * kNodeSize)));
    auto rows = s.census();
    ASSERT_EQ(rows.size(), 4u);
    // Ascending by (node, tree id, level).
    EXPECT_EQ(std::make_tuple(rows[0].node, rows[0].tree_id, rows[0].level, rows[0].frames, rows[0].dirty),
              std::make_tuple(0, 7u, 0, uint64_t(2), uint64_t(1)));
    EXPECT_EQ(std::make_tuple(rows[1].node, rows[1].tree_id, rows[1].level, rows[1].frames),
              std::make_tuple(0, 7u, 1, uint64_t(1)));
    EXPECT_EQ(std::make_tuple(rows[2].node, rows[2].tree_id, rows[2].frames), std::make_tuple(1, 7u, uint64_t(1)));
    EXPECT_EQ(std::make_tuple(rows[3].node, rows[3].tree_id, rows[3].frames), std::make_tuple(1, 9u, uint64_t(1)));
    // Dropping a tree drops its frames on every memory node (dirty ones are
    // discarded: the namespace is gone).
    s.drop_tree(7);
    rows = s.census();
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].tree_id, 9u);
}

// The incarnation purge through the process handle: only when the record differs.
TEST(SharedCache, SyncNodePurgesThroughTheProcessHandle) {
    SharedMem mem(SharedCache::bytes_for(kCacheBytes));
    SharedCache s;
    s.create(mem.get(), kCacheBytes, 1);
    s.sync_node(0, 5);
    admit(*s.process_cache(), make_gaddr(0, kNodeSize), 3, 0);
    s.sync_node(0, 5);
    EXPECT_EQ(s.census().size(), 1u);
    s.sync_node(0, 6);
    EXPECT_TRUE(s.census().empty());
    EXPECT_EQ(s.header()->incarnations.recorded(0), 6u);
    EXPECT_THROW(s.sync_node(IncarnationTable::kMaxNodes, 1), Error);
}
