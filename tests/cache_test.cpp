// Node cache data structures (src/cache): mapping table, cooling map,
// admission, path-aware cooling, eviction under pressure across processes, OLC.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <algorithm>
#include <set>
#include <thread>
#include <vector>

#include "cache/admission.h"
#include "cache/cache.h"
#include "cache/cooling_map.h"
#include "cache/mapping_table.h"
#include "cache/region.h"
#include "common/error.h"
#include "common/stats.h"

#include "test_util.h"

using namespace dex;
using namespace dex::cache;

using dex::testing::SharedMem;

namespace {

GAddr G(uint64_t i) { return make_gaddr(static_cast<uint32_t>(i % 3), (i + 1) * kNodeSize); }

// Runs fn(child_index) in n forked children; returns the children's exit codes.
template <class Fn>
std::vector<int> run_children(int n, Fn fn) {
    std::vector<pid_t> pids;
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            int rc = 99;
            try {
                rc = fn(i);
            } catch (...) {
                rc = 98;
            }
            _exit(rc);
        }
        pids.push_back(pid);
    }
    std::vector<int> codes;
    for (pid_t pid : pids) {
        int st = 0;
        waitpid(pid, &st, 0);
        codes.push_back(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
    return codes;
}

// A node image that encodes its GAddr everywhere, so a frame holding the wrong
// node (or a torn copy) is recognizable.
void fill_leaf(Node& n, GAddr g, uint32_t tree_id) {
    std::memset(&n, 0, sizeof n);
    n.tree_id = tree_id;
    n.level = 0;
    auto* w = reinterpret_cast<uint64_t*>(n.raw);
    for (size_t i = 0; i < sizeof n.raw / 8; i++) w[i] = g;
}
bool leaf_encodes(const Node& n, GAddr g) {
    auto* w = reinterpret_cast<const uint64_t*>(n.raw);
    for (size_t i = 0; i < sizeof n.raw / 8; i++)
        if (w[i] != g) return false;
    return true;
}
// Optimistic copy of a frame's node; false if the read did not validate.
bool read_frame(CacheRegion& r, uint32_t f, GAddr g, Node& out) {
    uint64_t v = r.begin_read(f, g);
    if (v == FrameHeader::kRestart) return false;
    const uint64_t* src = reinterpret_cast<const uint64_t*>(r.node(f));
    uint64_t* dst = reinterpret_cast<uint64_t*>(&out);
    for (size_t i = 0; i < kNodeSize / 8; i++) dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
    return r.validate(f, v);
}

struct RegionFixture {
    explicit RegionFixture(uint32_t frames, AdmissionPolicy p = {})
        : mem(CacheRegion::bytes_for(size_t(frames) * kNodeSize)),
          region(CacheRegion::init(mem.get(), CacheRegion::bytes_for(size_t(frames) * kNodeSize), p)) {}
    SharedMem mem;
    CacheRegion* region;
};

}  // namespace

// ---- region ------------------------------------------------------------------

TEST(CacheRegion, SizingInitAttach) {
    size_t bytes = CacheRegion::bytes_for(100 * kNodeSize);
    SharedMem mem(bytes + 64);
    // Deliberately misaligned base: init and attach align the same way.
    void* base = static_cast<char*>(mem.get()) + 8;
    CacheRegion* r = CacheRegion::init(base, bytes);
    EXPECT_EQ(r->frame_count(), 100u);
    EXPECT_EQ(CacheRegion::attach(base), r);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(r) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(r->node(0)) % 64, 0u);
    EXPECT_LE(reinterpret_cast<char*>(r->node(99)) + kNodeSize, static_cast<char*>(base) + bytes);
    EXPECT_THROW(CacheRegion::init(mem.get(), 1000), dex::Error);
    SharedMem other(4096);
    EXPECT_THROW(CacheRegion::attach(other.get()), dex::Error);
}

// ---- mapping table -----------------------------------------------------------

namespace {
struct TableFixture {
    explicit TableFixture(uint32_t frames) {
        MappingTable::size_for(frames, &buckets, &entries);
        mem = std::make_unique<SharedMem>(MappingTable::bytes_for(buckets, entries));
        t = MappingTable::init(mem->get(), buckets, entries);
    }
    uint32_t buckets, entries;
    std::unique_ptr<SharedMem> mem;
    MappingTable* t;
};
}  // namespace

TEST(CacheMapping, InsertLookupErase) {
    TableFixture tf(64);
    MappingTable& t = *tf.t;
    EXPECT_GE(t.bucket_count(), 128u);
    EXPECT_EQ(t.lookup(G(1)), MappingTable::kNotFound);
    EXPECT_TRUE(t.insert(G(1), 7));
    EXPECT_FALSE(t.insert(G(1), 8));
    EXPECT_EQ(t.lookup(G(1)), 7u);
    EXPECT_FALSE(t.erase(G(1), 8));  // wrong expected value
    EXPECT_TRUE(t.erase(G(1), 7));
    EXPECT_EQ(t.lookup(G(1)), MappingTable::kNotFound);
    EXPECT_EQ(t.size(), 0u);
}

TEST(CacheMapping, IoMarker) {
    TableFixture tf(64);
    MappingTable& t = *tf.t;
    uint32_t f = 0;
    EXPECT_EQ(t.try_begin_io(G(5), &f), MappingTable::Begin::kOwner);
    EXPECT_EQ(t.lookup(G(5)), MappingTable::kIoInProgress);
    EXPECT_EQ(t.try_begin_io(G(5), &f), MappingTable::Begin::kIoInProgress);
    EXPECT_TRUE(t.publish(G(5), 3));
    EXPECT_FALSE(t.publish(G(5), 4));  // no marker any more
    EXPECT_EQ(t.try_begin_io(G(5), &f), MappingTable::Begin::kCached);
    EXPECT_EQ(f, 3u);
    EXPECT_FALSE(t.abort_io(G(5)));  // mapped, not a marker
    EXPECT_EQ(t.try_begin_io(G(6)), MappingTable::Begin::kOwner);
    EXPECT_TRUE(t.abort_io(G(6)));
    EXPECT_EQ(t.lookup(G(6)), MappingTable::kNotFound);
    EXPECT_FALSE(t.publish(G(7), 1));  // never began
}

TEST(CacheMapping, ManyKeysAndExhaustion) {
    TableFixture tf(1000);
    MappingTable& t = *tf.t;
    uint32_t cap = t.capacity();
    for (uint32_t i = 0; i < cap; i++) ASSERT_TRUE(t.insert(G(i), i)) << i;
    EXPECT_FALSE(t.insert(G(cap), 0));
    EXPECT_EQ(t.try_begin_io(G(cap)), MappingTable::Begin::kFull);
    for (uint32_t i = 0; i < cap; i++) ASSERT_EQ(t.lookup(G(i)), i);
    for (uint32_t i = 0; i < cap; i += 2) ASSERT_TRUE(t.erase(G(i), i));
    for (uint32_t i = 0; i < cap; i++) ASSERT_EQ(t.lookup(G(i)), i % 2 ? i : MappingTable::kNotFound);
    size_t seen = 0;
    t.for_each([&](GAddr, uint32_t v) {
        EXPECT_EQ(v % 2, 1u);
        seen++;
    });
    EXPECT_EQ(seen, t.size());
    // Freed entries are reusable.
    for (uint32_t i = 0; i < cap; i += 2) ASSERT_TRUE(t.insert(G(cap + i), i));
}

namespace {
// Hammer: private keys (insert / lookup / erase) and shared keys (exactly one
// owner of an I/O marker at a time, tracked in `owners`). Returns 0 if consistent.
int hammer_table(MappingTable& t, std::atomic<uint32_t>* owners, uint32_t nshared, uint32_t who, int iters) {
    Rng rng(who + 1);
    for (int i = 0; i < iters; i++) {
        GAddr mine = G(1000000 + who * 100000 + static_cast<uint64_t>(i % 500));
        if (!t.insert(mine, who)) return 1;
        if (t.lookup(mine) != who) return 2;
        if (!t.erase(mine, who)) return 3;
        uint32_t k = rng.below(nshared);
        uint32_t f = 0;
        auto b = t.try_begin_io(G(k), &f);
        if (b == MappingTable::Begin::kOwner) {
            if (owners[k].fetch_add(1) != 0) return 4;  // two owners at once
            if (t.lookup(G(k)) != MappingTable::kIoInProgress) return 5;
            if (rng.below(2)) {
                if (!t.publish(G(k), k)) return 6;
                if (t.lookup(G(k)) != k) return 7;
                owners[k].fetch_sub(1);
                if (!t.erase(G(k), k)) return 11;  // only the publisher erases
            } else {
                owners[k].fetch_sub(1);
                if (!t.abort_io(G(k))) return 8;
            }
        } else if (b == MappingTable::Begin::kCached) {
            if (f != k) return 9;
        } else if (b == MappingTable::Begin::kFull) {
            return 10;
        }
    }
    return 0;
}
}  // namespace

TEST(CacheMapping, ConcurrentThreads) {
    TableFixture tf(256);
    std::vector<std::atomic<uint32_t>> owners(16);
    std::vector<int> rc(4, -1);
    std::vector<std::thread> th;
    for (uint32_t w = 0; w < 4; w++)
        th.emplace_back([&, w] { rc[w] = hammer_table(*tf.t, owners.data(), 16, w, 20000); });
    for (auto& t : th) t.join();
    for (int c : rc) EXPECT_EQ(c, 0);
    EXPECT_EQ(tf.t->size(), 0u);
}

TEST(CacheMapping, ConcurrentProcesses) {
    TableFixture tf(256);
    SharedMem owners_mem(16 * sizeof(std::atomic<uint32_t>));
    auto* owners = static_cast<std::atomic<uint32_t>*>(owners_mem.get());
    for (int i = 0; i < 16; i++) new (&owners[i]) std::atomic<uint32_t>(0);
    auto codes = run_children(4, [&](int w) { return hammer_table(*tf.t, owners, 16, w, 20000); });
    for (int c : codes) EXPECT_EQ(c, 0);
    EXPECT_EQ(tf.t->size(), 0u);
    size_t left = 0;
    tf.t->for_each([&](GAddr, uint32_t) { left++; });
    EXPECT_EQ(left, 0u);
    // Every entry went back to the pool.
    for (uint32_t i = 0; i < tf.t->capacity(); i++) ASSERT_TRUE(tf.t->insert(G(i), i));
}

// ---- cooling map ---------------------------------------------------------------

TEST(CacheCooling, BucketFifo) {
    SharedMem mem(CoolingMap::bytes_for(1));
    CoolingMap* m = CoolingMap::init(mem.get(), 1);
    EXPECT_EQ(m->bucket_of(G(1)), 0u);
    CoolingMap::Locked b(*m, 0);
    EXPECT_EQ(b.pop_front(), kNoFrame);
    for (uint32_t f = 1; f <= CoolingMap::kSlots; f++) EXPECT_EQ(b.push_back(f), kNoFrame);
    EXPECT_TRUE(b.full());
    for (uint32_t i = 0; i < CoolingMap::kSlots; i++) EXPECT_EQ(b.at(i), i + 1);
    EXPECT_EQ(b.push_back(100), 1u);  // full: the oldest is pushed out
    EXPECT_EQ(b.at(CoolingMap::kSlots - 1), 100u);
    EXPECT_TRUE(b.remove(5));  // second chance
    EXPECT_FALSE(b.contains(5));
    EXPECT_FALSE(b.remove(5));
    EXPECT_EQ(b.size(), CoolingMap::kSlots - 1);
    std::vector<uint32_t> order;
    for (uint32_t f; (f = b.pop_front()) != kNoFrame;) order.push_back(f);
    std::vector<uint32_t> want = {2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 100};
    EXPECT_EQ(order, want);
}

TEST(CacheCooling, BucketsSpread) {
    uint32_t nb = CoolingMap::buckets_for(100000);
    EXPECT_GE(nb * CoolingMap::kSlots, 10000u);
    SharedMem mem(CoolingMap::bytes_for(nb));
    CoolingMap* m = CoolingMap::init(mem.get(), nb);
    std::vector<int> hits(nb);
    for (uint64_t i = 0; i < 100000; i++) hits[m->bucket_of(make_gaddr(0, (i + 1) * kNodeSize))]++;
    for (int h : hits) EXPECT_LT(h, 3 * 100000 / static_cast<int>(nb));
}

namespace {
uint32_t admit_leaf(Cache& c, GAddr g, uint32_t tree_id = 1) {
    Node n;
    fill_leaf(n, g, tree_id);
    if (c.try_begin_io(g) != MappingTable::Begin::kOwner) return kNoFrame;
    return c.admit(g, n);
}
}  // namespace

TEST(CacheCooling, SecondChanceAndEviction) {
    RegionFixture rf(64);
    CacheRegion& r = *rf.region;
    Cache c(r, 42);
    uint32_t f = admit_leaf(c, G(1));
    ASSERT_NE(f, kNoFrame);
    EXPECT_EQ(r.lookup(G(1)), f);
    EXPECT_EQ(r.header(f).get_state(), FrameState::kHot);
    EXPECT_EQ(c.cool_from(f), f);
    EXPECT_EQ(r.header(f).get_state(), FrameState::kCooling);
    uint32_t b = r.cooling().bucket_of(G(1));
    {
        CoolingMap::Locked lb(r.cooling(), b);
        EXPECT_TRUE(lb.contains(f));
    }
    EXPECT_TRUE(r.touch(f, G(1)));  // touched again: back to hot, out of the bucket
    EXPECT_EQ(r.header(f).get_state(), FrameState::kHot);
    {
        CoolingMap::Locked lb(r.cooling(), b);
        EXPECT_FALSE(lb.contains(f));
    }
    EXPECT_FALSE(r.touch(f, G(2)));
    // Cool again and evict: unmapped, obsolete, reusable.
    EXPECT_EQ(c.cool_from(f), f);
    uint64_t ev = stats().evictions.load();
    EXPECT_EQ(c.evict_oldest(b), f);
    EXPECT_EQ(stats().evictions.load(), ev + 1);
    EXPECT_EQ(r.lookup(G(1)), kNoFrame);
    EXPECT_TRUE(r.header(f).is_obsolete());
    EXPECT_FALSE(r.touch(f, G(1)));
    EXPECT_EQ(r.begin_read(f, G(1)), FrameHeader::kRestart);
    EXPECT_EQ(c.allocate_frame(), f);  // from the local free set
}

TEST(CacheCooling, PinnedFramesStay) {
    RegionFixture rf(64);
    CacheRegion& r = *rf.region;
    Cache c(r, 7);
    uint32_t f = admit_leaf(c, G(1));
    ASSERT_TRUE(r.pin(f, G(1)));
    EXPECT_FALSE(r.pin(f, G(2)));
    EXPECT_EQ(c.cool_from(f), kNoFrame);  // pinned: not cooled
    r.unpin(f);
    EXPECT_EQ(c.cool_from(f), f);
    ASSERT_TRUE(r.pin(f, G(1)));  // pinning a cooling frame gives it a second chance
    EXPECT_EQ(r.header(f).get_state(), FrameState::kHot);
    r.unpin(f);
    EXPECT_EQ(c.cool_from(f), f);
    uint32_t b = r.cooling().bucket_of(G(1));
    // A pin that arrives while the frame sits in its bucket (pin_locked skips
    // the second chance): the evicter sees it and the frame stays cached.
    r.pin_locked(f);
    EXPECT_EQ(c.evict_oldest(b), kNoFrame);
    EXPECT_EQ(r.header(f).get_state(), FrameState::kHot);
    EXPECT_EQ(r.lookup(G(1)), f);
    r.unpin(f);
    EXPECT_TRUE(c.invalidate(G(1)));
    EXPECT_EQ(r.lookup(G(1)), kNoFrame);
}

// ---- admission -----------------------------------------------------------------

TEST(CacheAdmission, Probability) {
    Admission a({true, 0.1}, 12345);
    const int n = 200000;
    int admitted = 0;
    for (int i = 0; i < n; i++) admitted += a.should_admit(0);
    double p = double(admitted) / n;
    // sd = sqrt(0.1 * 0.9 / n) ~ 0.00067; 0.004 is 6 sd.
    EXPECT_NEAR(p, 0.1, 0.004);
    for (int i = 0; i < 1000; i++) ASSERT_TRUE(a.should_admit(1 + i % 5));
    Admission inner_only({false, 1.0}, 1);
    for (int i = 0; i < 1000; i++) {
        ASSERT_FALSE(inner_only.should_admit(0));
        ASSERT_TRUE(inner_only.should_admit(1));
    }
    Admission all({true, 1.0}, 1);
    for (int i = 0; i < 1000; i++) ASSERT_TRUE(all.should_admit(0));
    Admission none({true, 0.0}, 1);
    for (int i = 0; i < 1000; i++) ASSERT_FALSE(none.should_admit(0));
    // The region's policy reaches every process's Cache.
    RegionFixture rf(16, {false, 0.5});
    Cache c(*rf.region, 3);
    EXPECT_FALSE(c.should_admit(0));
    EXPECT_TRUE(c.should_admit(2));
}

TEST(CacheAdmission, LeavesFillUnusedFrames) {
    // Leaf admission probability 0: leaves still go into frames nobody uses.
    RegionFixture rf(16, {true, 0.0});
    Cache c(*rf.region, 3);
    std::vector<uint32_t> owned;
    for (int i = 0; i < 16; i++) {
        ASSERT_TRUE(c.should_admit(0)) << "frame " << i << " of 16 is unused";
        uint32_t f = c.allocate_frame();
        ASSERT_NE(f, kNoFrame);
        owned.push_back(f);
    }
    for (int i = 0; i < 1000; i++) ASSERT_FALSE(c.should_admit(0)) << "cache full: the draw decides";
    EXPECT_TRUE(c.should_admit(1));
    c.release_frame(owned.back());  // a free frame again
    EXPECT_TRUE(c.should_admit(0));
    // Inner-only policy: never a leaf, free frames or not.
    RegionFixture inner(16, {false, 1.0});
    Cache ci(*inner.region, 4);
    EXPECT_FALSE(ci.should_admit(0));
}

// ---- path-aware cooling ----------------------------------------------------------

namespace {
// root (level 2) -> 3 inner (level 1) -> 3 leaves each, all cached and swizzled.
struct FakeTree {
    CacheRegion& r;
    Cache& c;
    uint32_t root;
    std::vector<uint32_t> inner;
    std::vector<std::vector<uint32_t>> leaves;
    std::map<uint32_t, GAddr> gaddr;

    uint32_t admit_node(GAddr g, uint8_t level, const std::vector<GAddr>& children) {
        Node n;
        if (level == 0) {
            fill_leaf(n, g, 9);
        } else {
            std::memset(&n, 0, sizeof n);
            n.tree_id = 9;
            n.level = level;
            n.count = static_cast<uint16_t>(children.size());
            for (size_t i = 0; i < children.size(); i++) {
                n.inner[i].sep = make_key(i, 0, 0);
                n.inner[i].child = children[i];
            }
        }
        EXPECT_EQ(c.try_begin_io(g), MappingTable::Begin::kOwner);
        uint32_t f = c.admit(g, n);
        EXPECT_NE(f, kNoFrame);
        gaddr[f] = g;
        return f;
    }
    void swizzle(uint32_t parent, uint16_t slot, uint32_t child) {
        r.header(parent).lock();
        EXPECT_TRUE(r.swizzle(parent, slot, child));
        r.header(parent).unlock();
    }

    FakeTree(CacheRegion& region, Cache& cache) : r(region), c(cache) {
        uint64_t next = 1;
        std::vector<GAddr> inner_g;
        std::vector<std::vector<GAddr>> leaf_g(3);
        for (int i = 0; i < 3; i++) {
            inner_g.push_back(G(next++));
            for (int j = 0; j < 3; j++) leaf_g[i].push_back(G(next++));
        }
        root = admit_node(G(0), 2, inner_g);
        leaves.resize(3);
        for (int i = 0; i < 3; i++) {
            inner.push_back(admit_node(inner_g[i], 1, leaf_g[i]));
            for (int j = 0; j < 3; j++) leaves[i].push_back(admit_node(leaf_g[i][j], 0, {}));
        }
        for (int i = 0; i < 3; i++) {
            swizzle(root, static_cast<uint16_t>(i), inner[i]);
            for (int j = 0; j < 3; j++) swizzle(inner[i], static_cast<uint16_t>(j), leaves[i][j]);
        }
    }
};
}  // namespace

TEST(CachePathAware, DelegatesToLeafMostDescendant) {
    RegionFixture rf(64);
    CacheRegion& r = *rf.region;
    Cache c(r, 99);
    FakeTree t(r, c);
    EXPECT_EQ(r.header(t.root).swizzled_children.load(), 3u);
    for (uint32_t f : t.inner) EXPECT_EQ(r.header(f).swizzled_children.load(), 3u);
    EXPECT_TRUE(gaddr_is_swizzled(CacheRegion::load_child(r.node(t.root), 0)));
    EXPECT_EQ(r.resolve(CacheRegion::load_child(r.node(t.root), 1)), t.gaddr[t.inner[1]]);

    // Remote memory never sees swizzled values.
    Node img;
    r.copy_unswizzled(t.root, img);
    for (int i = 0; i < 3; i++) EXPECT_EQ(img.inner[i].child, t.gaddr[t.inner[i]]);
    EXPECT_TRUE(gaddr_is_swizzled(CacheRegion::load_child(r.node(t.root), 0)));  // frame unchanged

    // Sampling the root or an inner node cools a leaf; parents go only after
    // all their children. Track the order in which frames are cooled.
    std::vector<uint32_t> cooled;
    std::set<uint32_t> cooled_set;
    for (int step = 0; step < 13; step++) {
        uint32_t start = step % 2 ? t.root : t.inner[step % 3];
        if (cooled_set.count(start)) start = t.root;
        uint32_t f = c.cool_from(start);
        ASSERT_NE(f, kNoFrame) << "step " << step;
        EXPECT_FALSE(cooled_set.count(f));
        cooled.push_back(f);
        cooled_set.insert(f);
        EXPECT_EQ(r.header(f).get_state(), FrameState::kCooling);
        EXPECT_EQ(r.header(f).swizzled_children.load(), 0u);
        EXPECT_EQ(r.header(f).parent.load(), kNoFrame);
        if (r.header(f).level.load() == 1) {  // an inner node: all its leaves went first
            int i = static_cast<int>(std::find(t.inner.begin(), t.inner.end(), f) - t.inner.begin());
            for (uint32_t l : t.leaves[i]) EXPECT_TRUE(cooled_set.count(l));
        }
        if (f == t.root) {
            for (uint32_t in : t.inner) EXPECT_TRUE(cooled_set.count(in));
        }
    }
    EXPECT_EQ(cooled.size(), 13u);
    EXPECT_EQ(cooled.back(), t.root);
    // The first cooling from the root reached a leaf, not the root or an inner node.
    EXPECT_EQ(r.header(cooled[1]).level.load(), 0);
    // Every parent pointer was unswizzled back to the child's GAddr.
    for (int i = 0; i < 3; i++) {
        EXPECT_EQ(CacheRegion::load_child(r.node(t.root), i), t.gaddr[t.inner[i]]);
        for (int j = 0; j < 3; j++) EXPECT_EQ(CacheRegion::load_child(r.node(t.inner[i]), j), t.gaddr[t.leaves[i][j]]);
    }
    EXPECT_EQ(r.header(t.root).swizzled_children.load(), 0u);
}

TEST(CachePathAware, EvictionAfterCoolingAndUnswizzle) {
    RegionFixture rf(64);
    CacheRegion& r = *rf.region;
    Cache c(r, 5);
    FakeTree t(r, c);
    // Explicit unswizzle restores the GAddr and the counters.
    r.header(t.inner[0]).lock();
    EXPECT_TRUE(r.unswizzle(t.inner[0], 1));
    EXPECT_FALSE(r.unswizzle(t.inner[0], 1));
    r.header(t.inner[0]).unlock();
    EXPECT_EQ(CacheRegion::load_child(r.node(t.inner[0]), 1), t.gaddr[t.leaves[0][1]]);
    EXPECT_EQ(r.header(t.inner[0]).swizzled_children.load(), 2u);
    EXPECT_EQ(r.header(t.leaves[0][1]).parent.load(), kNoFrame);
    // Re-swizzle through an optimistic parent version; a stale version fails.
    uint64_t pv = r.header(t.inner[0]).begin_read();
    EXPECT_TRUE(r.swizzle_optimistic(t.inner[0], pv, 1, t.leaves[0][1]));
    EXPECT_FALSE(r.swizzle_optimistic(t.inner[0], pv, 1, t.leaves[0][1]));
    EXPECT_EQ(r.header(t.inner[0]).swizzled_children.load(), 3u);
    // A wrong-level or wrong-address child is refused.
    r.header(t.root).lock();
    EXPECT_FALSE(r.swizzle(t.root, 0, t.leaves[0][0]));
    EXPECT_EQ(r.unswizzle_all(t.root), 3u);
    EXPECT_EQ(r.header(t.root).swizzled_children.load(), 0u);
    r.header(t.root).unlock();
    // Cool leaf 2 of inner 2 and evict it: the parent points at its GAddr, the
    // mapping is gone, and an invalidate of a parent with swizzled children fails.
    uint32_t leaf = t.leaves[2][2];
    EXPECT_EQ(c.cool_from(leaf), leaf);
    EXPECT_EQ(c.evict_oldest(r.cooling().bucket_of(t.gaddr[leaf])), leaf);
    EXPECT_EQ(CacheRegion::load_child(r.node(t.inner[2]), 2), t.gaddr[leaf]);
    EXPECT_EQ(r.lookup(t.gaddr[leaf]), kNoFrame);
    EXPECT_FALSE(c.invalidate(t.gaddr[t.inner[2]]));
    EXPECT_TRUE(c.invalidate(t.gaddr[t.leaves[2][0]]));  // swizzled in inner 2: unswizzles
    EXPECT_EQ(CacheRegion::load_child(r.node(t.inner[2]), 0), t.gaddr[t.leaves[2][0]]);
    EXPECT_EQ(r.header(t.inner[2]).swizzled_children.load(), 1u);
    // Census: per (tree, level) counts.
    std::map<int, int> per_level;
    r.for_each_frame([&](const FrameInfo& fi) {
        EXPECT_EQ(fi.tree_id, 9u);
        per_level[fi.level]++;
    });
    EXPECT_EQ(per_level[2], 1);
    EXPECT_EQ(per_level[1], 3);
    EXPECT_EQ(per_level[0], 7);
}

// Invalidating a dirty leaf writes it back under its own latch only: the
// write-back may wait for the remote lock up to dex.op_timeout, and its
// parent's latch held meanwhile made every descent through the parent
// restart (a reader timed out behind it in t_crash_wb_offload). A failed
// write-back keeps the frame; one that succeeds drops it and unswizzles.
TEST(CachePathAware, DirtyLeafIsWrittenBackWithoutItsParentsLatch) {
    RegionFixture rf(64);
    CacheRegion& r = *rf.region;
    Cache c(r, 5);
    FakeTree t(r, c);
    const uint32_t leaf = t.leaves[1][2], parent = t.inner[1];
    int calls = 0, parent_latched = 0, leaf_latched = 0;
    bool succeed = false;
    c.set_write_back([&](uint32_t f, const Node&) {
        calls++;
        EXPECT_EQ(f, leaf);
        if (r.header(parent).is_locked()) parent_latched++;
        if (r.header(leaf).is_locked()) leaf_latched++;
        return succeed;
    });
    r.mark_dirty(leaf);
    EXPECT_FALSE(c.invalidate(t.gaddr[leaf]));  // could not write it: kept, dirty, still swizzled
    EXPECT_EQ(r.lookup(t.gaddr[leaf]), leaf);
    EXPECT_TRUE(r.header(leaf).dirty.load());
    EXPECT_EQ(r.header(parent).swizzled_children.load(), 3u);
    succeed = true;
    EXPECT_TRUE(c.invalidate(t.gaddr[leaf]));
    EXPECT_EQ(r.lookup(t.gaddr[leaf]), kNoFrame);
    EXPECT_EQ(CacheRegion::load_child(r.node(parent), 2), t.gaddr[leaf]);
    EXPECT_EQ(r.header(parent).swizzled_children.load(), 2u);
    EXPECT_EQ(calls, 2);
    EXPECT_EQ(leaf_latched, 2);    // the frame's own latch: nobody changes it during the write
    EXPECT_EQ(parent_latched, 0);  // never the parent's
    EXPECT_FALSE(r.header(parent).is_locked());
}

// ---- eviction under pressure, across processes --------------------------------

TEST(CacheEviction, PressureAcrossProcesses) {
    RegionFixture rf(64);
    CacheRegion& r = *rf.region;
    const int kProcs = 4, kPerProc = 2500;  // 10,000 distinct nodes through 64 frames
    auto codes = run_children(kProcs, [&](int w) -> int {
        CacheRegion& rr = *CacheRegion::attach(rf.mem.get());
        Cache c(rr, 1000 + w);
        Rng rng(w + 77);
        uint32_t me = static_cast<uint32_t>(getpid());
        Node n;
        for (int i = 0; i < kPerProc; i++) {
            GAddr g = G(static_cast<uint64_t>(w) * kPerProc + i + 1);
            if (c.try_begin_io(g) != MappingTable::Begin::kOwner) return 1;
            uint32_t f = c.allocate_frame();
            if (f == kNoFrame) return 2;
            if (rr.header(f).get_state() != FrameState::kIo) return 3;
            // We own f: stamp it with our pid, let others run, check nobody else
            // was handed the same frame meanwhile.
            fill_leaf(n, g, me);
            std::memcpy(rr.node(f), &n, kNodeSize);
            if (i % 8 == 0) sched_yield();
            if (rr.node(f)->tree_id != me || !leaf_encodes(*rr.node(f), g)) return 4;
            if (!c.install(f, g)) return 5;
            // Look up random nodes (ours and the other processes'): a mapped frame
            // that validates must hold exactly that node.
            for (int k = 0; k < 4; k++) {
                GAddr q = G(1 + rng.below(kProcs * kPerProc));
                uint32_t qf = rr.lookup(q);
                if (qf == kNoFrame || qf == MappingTable::kIoInProgress) continue;
                if (qf >= rr.frame_count()) return 6;
                if (rr.header(qf).get_state() == FrameState::kCooling) rr.touch(qf, q);
                Node copy;
                if (read_frame(rr, qf, q, copy) && !leaf_encodes(copy, q)) return 7;
                // Pinned frames are not evicted: content stays put while pinned.
                if (k == 0 && rr.pin(qf, q)) {
                    for (int s = 0; s < 3; s++) {
                        sched_yield();
                        if (rr.header(qf).gaddr.load() != q || rr.header(qf).is_obsolete()) return 8;
                        if (read_frame(rr, qf, q, copy) && !leaf_encodes(copy, q)) return 9;
                    }
                    rr.unpin(qf);
                }
            }
        }
        return 0;
    });
    for (int i = 0; i < kProcs; i++) EXPECT_EQ(codes[i], 0) << "child " << i;
    // Final state: the mapping table only points at frames holding that node;
    // no frame is mapped twice; no marker is left behind.
    std::set<uint32_t> frames;
    size_t mapped = 0;
    r.table().for_each([&](GAddr g, uint32_t f) {
        ASSERT_NE(f, MappingTable::kIoInProgress);
        ASSERT_LT(f, r.frame_count());
        EXPECT_TRUE(frames.insert(f).second) << "frame " << f << " mapped twice";
        EXPECT_EQ(r.header(f).gaddr.load(), g);
        FrameState s = r.header(f).get_state();
        EXPECT_TRUE(s == FrameState::kHot || s == FrameState::kCooling);
        EXPECT_TRUE(leaf_encodes(*r.node(f), g));
        mapped++;
    });
    EXPECT_GT(mapped, 32u);
    EXPECT_LE(mapped, 64u);
    // Cooling buckets hold only cooling frames, each once.
    std::set<uint32_t> cooling;
    for (uint32_t b = 0; b < r.cooling().bucket_count(); b++) {
        CoolingMap::Locked lb(r.cooling(), b);
        for (uint32_t i = 0; i < lb.size(); i++) {
            EXPECT_TRUE(cooling.insert(lb.at(i)).second);
            EXPECT_EQ(r.header(lb.at(i)).get_state(), FrameState::kCooling);
        }
    }
    // Frames the children held in their free sets came back to the shared stack.
    Cache c(r, 1);
    std::set<uint32_t> got;
    for (uint32_t f; got.size() < 64 && (f = c.allocate_frame()) != kNoFrame;) {
        EXPECT_TRUE(got.insert(f).second) << "frame " << f << " handed out twice";
    }
    EXPECT_EQ(got.size(), 64u);  // everything reclaimable once no one pins it
}

TEST(CacheEviction, ThreadsWithStats) {
    RegionFixture rf(32);
    CacheRegion& r = *rf.region;
    stats().reset();
    std::atomic<int> bad{0};
    std::vector<std::thread> th;
    for (int w = 0; w < 3; w++)
        th.emplace_back([&, w] {
            Cache c(r, 500 + w);
            for (int i = 0; i < 2000; i++) {
                GAddr g = G(static_cast<uint64_t>(w) * 2000 + i + 1);
                if (admit_leaf(c, g) == kNoFrame) bad++;
                uint32_t f = r.lookup(g);
                Node copy;
                if (f != kNoFrame && f != MappingTable::kIoInProgress && read_frame(r, f, g, copy) &&
                    !leaf_encodes(copy, g))
                    bad++;
            }
        });
    for (auto& t : th) t.join();
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(stats().admissions.load(), 6000u);
    EXPECT_GE(stats().evictions.load(), 6000u - 32u);
    EXPECT_GE(stats().coolings.load(), stats().evictions.load());
    EXPECT_GT(stats().cache_hits.load(), 0u);
}

// ---- optimistic lock coupling --------------------------------------------------

TEST(CacheOlc, ReadersNeverAcceptTornFrames) {
    RegionFixture rf(8);
    CacheRegion& r = *rf.region;
    Cache c(r, 1);
    GAddr g = G(1);
    uint32_t f = admit_leaf(c, g);
    ASSERT_NE(f, kNoFrame);
    auto* words = reinterpret_cast<uint64_t*>(r.node(f));  // 128 u64s
    {
        r.header(f).lock();
        for (int i = 0; i < 128; i++) __atomic_store_n(&words[i], 0, __ATOMIC_RELAXED);
        r.header(f).unlock();
    }
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> accepted{0}, torn{0}, rejected{0};
    std::thread writer([&] {
        for (uint64_t k = 1; !stop.load(std::memory_order_relaxed); k++) {
            r.header(f).lock();
            for (int i = 0; i < 128; i++) {
                __atomic_store_n(&words[i], k, __ATOMIC_RELAXED);
                if (i == 64 && k % 16 == 0) sched_yield();  // widen the window
            }
            r.header(f).unlock();
            if (k % 4 == 0) sched_yield();  // let readers in even on a loaded 2-core box
        }
    });
    std::vector<std::thread> readers;
    for (int t = 0; t < 2; t++)
        readers.emplace_back([&] {
            uint64_t copy[128];
            while (!stop.load(std::memory_order_relaxed)) {
                uint64_t v = r.header(f).begin_read();
                if (v == FrameHeader::kRestart) {
                    rejected++;
                    continue;
                }
                for (int i = 0; i < 128; i++) copy[i] = __atomic_load_n(&words[i], __ATOMIC_RELAXED);
                if (!r.header(f).validate(v)) {
                    rejected++;
                    continue;
                }
                accepted++;
                for (int i = 1; i < 128; i++)
                    if (copy[i] != copy[0]) {
                        torn++;
                        break;
                    }
            }
        });
    // At least 300 ms, then until both outcomes were seen (bounded by 5 s).
    auto t0 = std::chrono::steady_clock::now();
    for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
        if ((ms >= 300 && accepted.load() >= 100 && rejected.load() >= 1) || ms >= 5000) break;
    }
    stop = true;
    writer.join();
    for (auto& t : readers) t.join();
    EXPECT_EQ(torn.load(), 0u);
    EXPECT_GT(accepted.load(), 0u);
    EXPECT_GT(rejected.load(), 0u);
    // try_upgrade succeeds only on the version that was read.
    uint64_t v = r.header(f).begin_read();
    EXPECT_TRUE(r.header(f).try_upgrade(v));
    EXPECT_FALSE(r.header(f).try_lock());
    r.header(f).unlock();
    EXPECT_FALSE(r.header(f).try_upgrade(v));
}
