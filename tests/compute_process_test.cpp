// A compute process's state and glue (src/cluster/compute_process.h) over
// in-process memory nodes: the shared cache block registered with every
// transport, incarnation purges for a tree's home and part nodes (a dead part
// node costs nothing), namespaces created / dropped with their frames,
// write-back mode end to end (owner word, lost-dirty detection by another
// instance, flushes, durable WAL first), the per-pid offload policy, tree
// options and statistics.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "cluster/compute_process.h"
#include "common/error.h"
#include "common/stats.h"
#include "compute_test_util.h"
#include "tree/btree.h"
#include "tree/journal.h"

using namespace dex;
using namespace dex::testing;
using dex::cluster::ComputeProcess;

namespace {

constexpr uint64_t kCacheBytes = 512 * kNodeSize;

// A memory node that does not answer (or whose wait is interrupted).
class DownTransport final : public Transport {
public:
    DownTransport(std::string url, ErrorCode code) : url_(std::move(url)), code_(code) {}
    uint64_t incarnation() override { fail(); }
    uint64_t client_id() override { fail(); }
    const std::string& address() const override { return url_; }
    void read(uint64_t, void*, uint32_t) override { fail(); }
    void write(uint64_t, const void*, uint32_t) override { fail(); }
    uint64_t cas(uint64_t, uint64_t, uint64_t) override { fail(); }
    uint64_t faa(uint64_t, uint64_t) override { fail(); }
    void batch(RemoteOp*, size_t) override { fail(); }
    std::vector<uint8_t> rpc(net::Op, const void*, uint32_t) override { fail(); }

private:
    [[noreturn]] void fail() { throw Error(code_, "memory node " + url_ + " is down"); }
    std::string url_;
    ErrorCode code_;
};

// In-process nodes, plus "tcp://down:N" (unreachable) and "tcp://intr:N"
// (every wait interrupted).
cluster::MemnodeClient::Factory factory(InprocNodes& nodes) {
    auto inproc = nodes.factory();
    return [inproc](const std::string& url, const TransportOptions& o) -> std::unique_ptr<Transport> {
        if (url.find("down") != std::string::npos) return std::make_unique<DownTransport>(url, ErrorCode::kUnreachable);
        if (url.find("intr") != std::string::npos) return std::make_unique<DownTransport>(url, ErrorCode::kInterrupted);
        return inproc(url, o);
    };
}

struct Block {
    std::vector<uint64_t> mem = std::vector<uint64_t>(cache::SharedCache::bytes_for(kCacheBytes) / 8 + 1);
    void* get() { return mem.data(); }
};

uint64_t frames_on(ComputeProcess& p, int node) {
    uint64_t n = 0;
    for (auto& r : p.cache().census())
        if (r.node == node) n += r.frames;
    return n;
}

EntryKey K(int64_t v) { return make_key(key_from_int64(v), 1, 1); }

// A process whose every leaf read is admitted.
std::unique_ptr<ComputeProcess> process(InprocNodes& nodes, const char* list, Block* block, bool initialize = true) {
    auto p = std::make_unique<ComputeProcess>(factory(nodes));
    p->client().configure(list, "", 1000, 5000);
    cache::AdmissionPolicy all;
    all.cache_leaves = true;
    all.leaf_admission = 1.0;
    p->cache().set_policy(all);
    if (block) p->attach_cache(block->get(), kCacheBytes, initialize);
    return p;
}

// A write-back tree of `p` in a new namespace of node 0, with its owner word
// ("idx"): even keys below n inserted first (written through), their leaves
// cached, then write-back mode on.
struct WbTree {
    uint64_t inc = 0;
    uint64_t ns = 0;
    GAddr word = 0;
    int slot = -1;
    std::unique_ptr<tree::BTree> t;
    WbTree(ComputeProcess& p, int n) {
        ns = p.create_namespace(0, nullptr, &inc);
        word = p.client().alloc_word(0, ns);
        p.check_owner_word(word, "idx");
        t = std::make_unique<tree::BTree>(p.mem(), 0, ns, p.tree_options());
        t->init_empty();
        for (int i = 0; i < n; i += 2) t->insert(K(i));
        for (int i = 0; i < n; i += 2) EXPECT_TRUE(t->contains(K(i)));  // leaves cached
        t->set_write_back(true, [this, &p] { return p.register_dirty(&slot, 0, ns, word, inc, "idx"); });
    }
};

std::atomic<uint64_t> g_durable{UINT64_MAX};
uint64_t durable() { return g_durable.load(); }

}  // namespace

TEST(ComputeProcess, CacheBlockIsRegisteredAndShared) {
    InprocNodes nodes;
    Block block;
    auto p = process(nodes, "tcp://inproc:1", nullptr);
    ASSERT_EQ(nodes.made.size(), 1u);
    EXPECT_EQ(p->tree_options().cache, nullptr);
    EXPECT_EQ(p->tree_options().offload, nullptr);  // offloading decides on cache misses only
    p->attach_cache(block.get(), kCacheBytes, true);
    ASSERT_TRUE(p->cache().enabled());
    EXPECT_NE(p->cache().generation(), 0u);
    EXPECT_EQ(nodes.made[0]->region_base, block.get());  // existing transports get the block
    EXPECT_EQ(nodes.made[0]->region_len, cache::SharedCache::bytes_for(kCacheBytes));
    p->client().configure("tcp://inproc:1,tcp://inproc:2", "", 1000, 5000);
    EXPECT_EQ(nodes.made[1]->region_base, block.get());  // and new ones
    tree::TreeOptions o = p->tree_options();
    EXPECT_EQ(o.cache, p->cache().process_cache());
    EXPECT_NE(o.offload, nullptr);

    // A second process of the same compute server sees the same block.
    auto q = process(nodes, "tcp://inproc:1", &block, false);
    EXPECT_EQ(q->cache().generation(), p->cache().generation());
    EXPECT_EQ(q->cache().region(), p->cache().region());
    EXPECT_THROW(q->attach_cache(block.get(), 2 * kCacheBytes, false), Error);
    EXPECT_FALSE(q->cache().enabled());

    // No cache: transports made from now on register nothing.
    p->attach_cache(nullptr, 0, false);
    EXPECT_FALSE(p->cache().enabled());
    p->client().configure("tcp://inproc:1,tcp://inproc:3", "", 1000, 5000);
    EXPECT_EQ(nodes.made.back()->region_base, nullptr);
    EXPECT_EQ(p->cache().generation(), 0u);
}

// A restarted memory node: namespaces are numbered from 1 again and the same
// addresses come back; creating one purges every frame of the old life.
TEST(ComputeProcess, RestartedNodeIsPurgedBeforeItsNamespacesAreReused) {
    InprocNodes nodes;
    Block block;
    auto p = process(nodes, "tcp://inproc:1", &block);
    uint64_t inc1 = 0;
    uint64_t ns1 = p->create_namespace(0, nullptr, &inc1);
    EXPECT_EQ(p->cache().header()->incarnations.recorded(0), inc1);
    tree::BTree t(p->mem(), 0, ns1, p->tree_options());
    t.init_empty();
    for (int i = 0; i < 2000; i++) t.insert(K(i));
    for (int i = 0; i < 2000; i += 50) EXPECT_TRUE(t.contains(K(i)));
    EXPECT_GT(frames_on(*p, 0), 10u);
    EXPECT_TRUE(p->admit_check(make_gaddr(0, kNodeSize)));

    nodes.restart("tcp://inproc:1");
    p->client().configure("tcp://inproc:1", "", 1000, 6000);  // new transport: the new engine
    EXPECT_FALSE(p->admit_check(make_gaddr(0, kNodeSize)));   // connected to another incarnation now
    uint64_t inc2 = 0;
    uint64_t ns2 = p->create_namespace(0, nullptr, &inc2);
    EXPECT_NE(inc2, inc1);
    EXPECT_EQ(ns2, ns1);  // the same id again
    EXPECT_EQ(frames_on(*p, 0), 0u) << "frames of the previous incarnation survived";
    EXPECT_EQ(p->cache().header()->incarnations.recorded(0), inc2);
    EXPECT_TRUE(p->admit_check(make_gaddr(0, kNodeSize)));

    // Dropping the namespace drops its frames.
    tree::BTree t2(p->mem(), 0, ns2, p->tree_options());
    t2.init_empty();
    for (int i = 0; i < 500; i++) t2.insert(K(i));
    EXPECT_GT(frames_on(*p, 0), 0u);
    EXPECT_GT(p->drop_namespace(0, ns2), 0u);
    EXPECT_EQ(frames_on(*p, 0), 0u);
}

TEST(ComputeProcess, PartNodesAreSynchronizedOnlyWhenTheyAnswerAsExpected) {
    InprocNodes nodes;
    Block block;
    auto p = process(nodes, "tcp://inproc:1,tcp://inproc:2,tcp://down:3,tcp://intr:4", &block);
    uint64_t inc0 = p->mem().node(0).incarnation(), inc1 = p->mem().node(1).incarnation();
    p->sync_node(1, inc1);
    cache::Cache& c = *p->cache().process_cache();
    Node n;
    std::memset(&n, 0, sizeof n);
    n.tree_id = (1u << 24) | 5;  // a tree homed on node 1
    GAddr g = make_gaddr(1, 10 * kNodeSize);
    ASSERT_EQ(c.try_begin_io(g), cache::MappingTable::Begin::kOwner);
    ASSERT_NE(c.admit(g, n), cache::kNoFrame);
    ASSERT_EQ(frames_on(*p, 1), 1u);

    // A tree built on node 1's current incarnation: nothing to purge.
    p->sync_tree_nodes(0, inc0, {1, 1, 0, 0}, {inc0, inc1, 0, 0});
    EXPECT_EQ(frames_on(*p, 1), 1u);
    EXPECT_EQ(p->cache().header()->incarnations.recorded(0), inc0);
    // Built in another incarnation of node 1 than the one it answers with:
    // not purged here (the lazy node check reports the tree lost).
    p->sync_tree_nodes(0, inc0, {1, 1}, {inc0, inc1 + 1});
    EXPECT_EQ(frames_on(*p, 1), 1u);
    EXPECT_EQ(p->cache().header()->incarnations.recorded(1), inc1);

    // Node 1 restarts; a tree built on its new life purges the old frames.
    nodes.restart("tcp://inproc:2");
    p->client().configure("tcp://inproc:1,tcp://inproc:2,tcp://down:3,tcp://intr:4", "", 1000, 6000);
    uint64_t inc1b = p->mem().node(1).incarnation();
    ASSERT_NE(inc1b, inc1);
    p->sync_tree_nodes(0, inc0, {1, 1}, {inc0, inc1b});
    EXPECT_EQ(frames_on(*p, 1), 0u);
    EXPECT_EQ(p->cache().header()->incarnations.recorded(1), inc1b);

    // An unreachable part node costs nothing; an interrupted wait is not swallowed.
    p->sync_tree_nodes(0, inc0, {1, 0, 1}, {inc0, 0, 77});
    EXPECT_EQ(p->cache().header()->incarnations.recorded(2), 0u);
    try {
        p->sync_tree_nodes(0, inc0, {1, 0, 0, 1}, {inc0, 0, 0, 77});
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInterrupted);
    }
    // The home node is always synchronized (it was checked by the caller).
    p->sync_node(-1, 1);  // no such node: nothing
}

TEST(ComputeProcess, WriteBackOwnerWordAndFlushes) {
    InprocNodes nodes;
    Block block, other_block;
    auto p = process(nodes, "tcp://inproc:1", &block);
    WbTree w0(*p, 300);
    const uint64_t ns = w0.ns;
    const GAddr word = w0.word;
    const int& slot = w0.slot;
    tree::BTree& t = *w0.t;
    uint64_t dirty0 = stats().dirty_updates.load();
    EXPECT_TRUE(t.insert(K(101)));
    EXPECT_EQ(stats().dirty_updates.load(), dirty0 + 1);
    ASSERT_GE(slot, 0);
    uint64_t w = 0;
    p->mem().read(word, &w, 8);
    EXPECT_EQ(w, p->cache().generation());

    // Another instance (its own cache generation) must not use the index now.
    auto q = process(nodes, "tcp://inproc:1", &other_block);
    try {
        q->check_owner_word(word, "idx");
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kLostMemory);
        EXPECT_EQ(e.hint(), "REINDEX INDEX idx");
    }
    tree::BTree remote(q->mem(), 0, ns, {});  // uncached reader of remote memory
    EXPECT_FALSE(remote.contains(K(101)));

    // Leaving write-back mode waits for the heap WAL of the dirty entries.
    uint32_t f = p->cache().region()->table().lookup(
        [&] {
            GAddr leaf = 0;
            p->cache().region()->for_each_frame([&](const cache::FrameInfo& i) {
                if (i.dirty) leaf = i.gaddr;
            });
            return leaf;
        }());
    ASSERT_NE(f, cache::kNoFrame);
    p->cache().region()->header(f).lsn.store(500);
    EXPECT_EQ(p->cache().dirty_lsn_max(0, true), 500u);
    g_durable = 100;
    tree::set_durable_lsn_source(durable);
    try {
        p->flush_tree_for_write_through(0, ns, word, true);
        ADD_FAILURE() << "no error";
    } catch (const tree::NeedDurable& e) {
        EXPECT_EQ(e.lsn(), 500u);
    }
    EXPECT_EQ(p->flush_all(), 0u);  // not durable: stays dirty, the word stays
    p->mem().read(word, &w, 8);
    EXPECT_EQ(w, p->cache().generation());
    g_durable = 500;
    p->flush_tree_for_write_through(0, ns, word, true);
    tree::set_durable_lsn_source(nullptr);
    p->mem().read(word, &w, 8);
    EXPECT_EQ(w, 0u);
    EXPECT_TRUE(remote.contains(K(101)));
    q->check_owner_word(word, "idx");  // free again
    EXPECT_EQ(p->flush_all(), 0u);

    // flush_tree: dirty again, written before a check reads remote memory.
    EXPECT_TRUE(t.insert(K(103)));
    p->mem().read(word, &w, 8);
    EXPECT_EQ(w, p->cache().generation());
    p->flush_tree(0, ns, word);
    EXPECT_TRUE(remote.contains(K(103)));
    p->mem().read(word, &w, 8);
    EXPECT_EQ(w, 0u);

    // Dropping the namespace forgets the tree's registry entry.
    p->drop_namespace(0, ns);
    EXPECT_EQ(p->cache().header()->writeback.entry(slot).word, 0u);
}

// A single write-back (an eviction, a frame a flush found busy): the remote
// lock CASed at the frame's version, then one publish batch -- two round
// trips, where reading the leaf first took three. Its frame keeps its
// version; the next single write-back learns the newer one from its failed
// CAS. Remote memory holds the entries each time.
TEST(ComputeProcess, SingleWriteBackIsTwoRoundTrips) {
    InprocNodes nodes;
    Block block;
    auto p = process(nodes, "tcp://inproc:1", &block);
    WbTree w0(*p, 40);
    tree::BTree& t = *w0.t;
    auto q = process(nodes, "tcp://inproc:1", nullptr);
    tree::BTree remote(q->mem(), 0, w0.ns, {});  // uncached reader of remote memory
    auto trips = [&] {
        uint64_t n = 0;
        for (RecordingTransport* r : nodes.made) n += r->trips;
        return n;
    };
    auto dirty_frame = [&] {
        GAddr leaf = 0;
        p->cache().region()->for_each_frame([&](const cache::FrameInfo& i) {
            if (i.dirty) leaf = i.gaddr;
        });
        return leaf == 0 ? cache::kNoFrame : p->cache().region()->table().lookup(leaf);
    };
    for (int k : {5, 7, 9}) {
        EXPECT_TRUE(t.insert(K(k)));
        const uint32_t f = dirty_frame();
        ASSERT_NE(f, cache::kNoFrame);
        EXPECT_FALSE(remote.contains(K(k)));
        const uint64_t t0 = trips();
        EXPECT_TRUE(p->cache().process_cache()->flush_frame(f));
        if (k == 5) {
            EXPECT_EQ(trips() - t0, 2u);
        }
        EXPECT_LE(trips() - t0, 3u);
        EXPECT_EQ(dirty_frame(), cache::kNoFrame);
        EXPECT_TRUE(remote.contains(K(k)));
    }
    for (int i = 0; i < 40; i += 2) EXPECT_TRUE(remote.contains(K(i)));
}

TEST(ComputeProcess, ForgetNodes) {
    InprocNodes nodes;
    Block block;
    auto p = process(nodes, "tcp://inproc:1", &block);
    uint64_t ns = p->create_namespace(0, nullptr, nullptr);
    tree::BTree t(p->mem(), 0, ns, p->tree_options());
    t.init_empty();
    for (int i = 0; i < 1000; i++) t.insert(K(i));
    std::vector<uint64_t> cached;
    p->cache().region()->for_each_frame([&](const cache::FrameInfo& i) {
        if (i.gaddr != kNullGAddr && i.level == 0) cached.push_back(i.gaddr);
    });
    ASSERT_GT(cached.size(), 2u);
    uint64_t before = frames_on(*p, 0);
    p->forget_nodes(cached.data(), 2);
    EXPECT_EQ(frames_on(*p, 0), before - 2);
    p->forget_nodes(nullptr, 5);
    EXPECT_EQ(p->cache().process_cache()->local_free(), 0u);  // given back to everyone
}

TEST(ComputeProcess, OffloadPolicyIsPerProcess) {
    InprocNodes nodes;
    ComputeProcess p(factory(nodes));
    tree::OffloadPolicy* o = p.offload_policy();
    EXPECT_EQ(p.offload_policy(), o);
    EXPECT_EQ(o->mode(), tree::OffloadMode::kAuto);
    p.set_offload_mode(tree::OffloadMode::kOff);
    EXPECT_EQ(o->mode(), tree::OffloadMode::kOff);
    pid_t pid = fork();
    if (pid == 0) {
        tree::OffloadPolicy* mine = p.offload_policy();  // a child gets its own, same mode
        _exit(mine != o && mine->mode() == tree::OffloadMode::kOff ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

namespace {
size_t g_logged = 0;
void log_changes(const GAddr*, size_t n) { g_logged += n; }
}  // namespace

TEST(ComputeProcess, ChangeLogReachesNewTrees) {
    InprocNodes nodes;
    auto p = process(nodes, "tcp://inproc:1", nullptr);
    p->set_change_log(log_changes);
    EXPECT_EQ(p->tree_options().log_changes, &log_changes);
    uint64_t ns = p->create_namespace(0, nullptr, nullptr);
    tree::BTree t(p->mem(), 0, ns, p->tree_options());
    t.init_empty();
    g_logged = 0;
    t.insert(K(1));
    EXPECT_GT(g_logged, 0u);
    p->set_change_log(nullptr);
    EXPECT_EQ(p->tree_options().log_changes, nullptr);
}

TEST(ComputeProcess, SharedAndPrivateStats) {
    InprocNodes nodes;
    ComputeProcess p(factory(nodes));
    std::vector<uint64_t> shm(sizeof(Stats) / 8 + 1);
    shm[0] = 99;
    p.attach_stats(shm.data(), true);
    EXPECT_EQ(static_cast<void*>(&stats()), static_cast<void*>(shm.data()));
    EXPECT_EQ(stats().index_ops.load(), 0u);  // initialized
    Stats::add(stats().index_ops);
    p.stats_private(true);
    EXPECT_NE(static_cast<void*>(&stats()), static_cast<void*>(shm.data()));
    p.stats_private(false);
    EXPECT_EQ(stats().index_ops.load(), 1u);
    p.attach_stats(nullptr, false);
    EXPECT_NE(static_cast<void*>(&stats()), static_cast<void*>(shm.data()));
    p.stats_private(false);  // the shared one is still remembered
    EXPECT_EQ(static_cast<void*>(&stats()), static_cast<void*>(shm.data()));
    set_stats(nullptr);
}

// A write-back under a frame's latch (eviction, invalidation, a busy frame a
// flush retries alone) waits for the leaf's remote lock only briefly
// (tree::kLatchedWriteBackMs), not dex.op_timeout: readers of the leaf
// restart while it waits, and a cycle through the latch is ended by a
// timeout only (t_crash_wb_offload: a scan timed out behind such a wait). A
// live holder's lock leaves the frame dirty. Here the holder lets go on its
// own after 4 s, within the 8 s op timeout: a write-back that waited for it
// would succeed, clean the frame, and fail the test.
TEST(ComputeProcess, LatchedWriteBackGivesUpOnALiveHoldersLock) {
    InprocNodes nodes;
    Block block;
    auto p = process(nodes, "tcp://inproc:1", &block);
    p->client().configure("tcp://inproc:1", "", 1000, 8000);
    WbTree w0(*p, 40);
    tree::BTree& t = *w0.t;
    ASSERT_TRUE(t.insert(K(5)));
    GAddr leaf = 0;
    p->cache().region()->for_each_frame([&](const cache::FrameInfo& i) {
        if (i.dirty) leaf = i.gaddr;
    });
    ASSERT_NE(leaf, 0u);
    const uint32_t f = p->cache().region()->table().lookup(leaf);
    ASSERT_LT(f, p->cache().region()->frame_count());
    // Another live client holds the leaf's remote lock.
    auto q = process(nodes, "tcp://inproc:1", nullptr);
    Transport& qt = q->mem().node(0);
    Node n;
    q->mem().read(leaf, &n, kNodeSize);
    const uint64_t locked = make_lock_word(n.body_version, qt.client_id(), true);
    ASSERT_EQ(qt.cas(gaddr_offset(leaf), n.lock, locked), n.lock);
    std::atomic<bool> release{false}, let_go{false};
    std::thread holder([&] {
        for (int i = 0; i < 400 && !release.load(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        qt.cas(gaddr_offset(leaf), locked, n.lock);
        let_go = true;
    });
    const bool wrote = p->cache().process_cache()->flush_frame(f);
    const bool still_dirty = p->cache().region()->header(f).dirty.load() != 0;
    const bool still_held = !let_go.load();
    release = true;
    holder.join();
    EXPECT_FALSE(wrote) << "the write-back waited for the live holder's lock";
    EXPECT_TRUE(still_dirty);
    EXPECT_TRUE(still_held);
    // Once the holder let go, the next write-back goes through.
    EXPECT_TRUE(p->cache().process_cache()->flush_frame(f));
    EXPECT_EQ(p->cache().region()->header(f).dirty.load(), 0);
}
