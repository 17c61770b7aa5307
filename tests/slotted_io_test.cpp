// Slotted nodes below the tree (src/README.md "Slotted nodes"): the format
// dispatch of tree/node_format.h, remote node I/O (read, lock, publish, take
// over a dead holder's lock) and the cache's child pointers (swizzle,
// unswizzle, copy_unswizzled) handle a slotted node as they handle a fixed one.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/stats.h"
#include "tree/node_format.h"
#include "tree/node_io.h"
#include "tree/slotted_node.h"
#include "tree_test_util.h"

namespace dex::testing {
namespace {

namespace sl = tree::slotted;

GAddr CG(uint64_t i) { return make_gaddr(0, (i + 1) * kNodeSize); }
Node& as_node(sl::SNode& n) { return reinterpret_cast<Node&>(n); }

// A slotted leaf or inner node with `count` entries. Entry bytes are 0x80 and
// up, so read as a 64-bit word they carry the cache's swizzle bit: a cache
// that took entry bytes for a child reference would be seen changing them.
// Inner entry i's child is CG(first_child + i).
sl::SNode make_slotted(uint8_t level, int count, uint64_t first_child = 0) {
    sl::SNode n;
    sl::init(n, 77, level);
    for (int i = 0; i < count; i++) {
        std::string k(level == 0 ? 12 : 4, static_cast<char>(0x80 + i));
        bool ok = level == 0 ? sl::insert_leaf(n, n.count, k) : sl::insert_inner(n, n.count, k, CG(first_child + i));
        EXPECT_TRUE(ok);
    }
    return n;
}

TEST(SlottedFormat, ValidationAndSealingDispatchOnTheLayoutFlag) {
    sl::SNode s = make_slotted(0, 20);
    tree::seal_node(as_node(s), 5);
    EXPECT_TRUE(tree::is_slotted(as_node(s)));
    EXPECT_TRUE(tree::snapshot_valid(as_node(s)));
    EXPECT_TRUE(sl::snapshot_valid(s)) << "seal_node must seal a slotted node by its own checksum";
    EXPECT_EQ(tree::used_bytes(as_node(s)), kNodeSize) << "the entry heap ends at the node's end";
    // A byte of the heap (not covered by the fixed layout's checksum range).
    sl::SNode t = s;
    reinterpret_cast<uint8_t*>(&t)[kNodeSize - 3] ^= 1;
    EXPECT_FALSE(tree::snapshot_valid(as_node(t)));
    // A fixed node whose memory is reused as slotted (or the flag torn in)
    // validates as slotted and fails: never read with the wrong layout.
    Node f;
    std::memset(&f, 0, sizeof f);
    f.low = neg_inf_key();
    f.high = pos_inf_key();
    f.count = 3;
    tree::seal_node(f, 9);
    ASSERT_TRUE(tree::snapshot_valid(f));
    EXPECT_LT(tree::used_bytes(f), kNodeSize);
    Node g = f;
    g.flags |= kNodeSlotted;
    EXPECT_FALSE(tree::snapshot_valid(g));
    EXPECT_FALSE(tree::body_intact(g));
}

struct RemoteSlot {
    std::unique_ptr<memnode::Engine> engine = make_engine(64ull << 20);
    std::unique_ptr<RemoteMemory> mem = make_mem(*engine);
    GAddr addr = 0;
    RemoteSlot() {
        // A node-sized allocation of a tree's namespace: the root of an empty tree.
        uint64_t ns = ns_create(mem->node(0));
        tree::BTree t(*mem, 0, ns);
        t.init_empty();
        addr = t.root();
    }
};

TEST(SlottedNodeIO, ReadLockPublishRoundTrip) {
    RemoteSlot r;
    sl::SNode s = make_slotted(0, 30);
    tree::seal_node(as_node(s), 1);
    r.mem->write(r.addr, &s, kNodeSize);

    tree::TreeOptions o;
    tree::NodeIO io(*r.mem, 0, o);
    Node snap;
    ASSERT_EQ(io.read(r.addr, snap, tree::Deadline(1000)), tree::NodeIO::Read::kOk);
    EXPECT_EQ(std::memcmp(&snap, &s, kNodeSize), 0);
    {
        tree::Locks locks(io);
        tree::LockedNode* ln = locks.try_lock(r.addr, snap);
        ASSERT_NE(ln, nullptr);
        auto& img = reinterpret_cast<sl::SNode&>(ln->node);
        // Entries at both ends of the heap change: the publish must carry all
        // of it (a fixed-layout length would cut off the heap's bottom).
        sl::erase(img, 0);
        std::string k(40, '\x01');
        ASSERT_TRUE(sl::insert_leaf(img, 0, k));
        locks.publish({ln});
    }
    Node after;
    ASSERT_EQ(io.read(r.addr, after, tree::Deadline(1000)), tree::NodeIO::Read::kOk);
    auto& a = reinterpret_cast<sl::SNode&>(after);
    EXPECT_EQ(a.count, 30u);
    EXPECT_EQ(sl::key(a, 0), std::string(40, '\x01'));
    EXPECT_EQ(sl::key(a, 1), std::string(12, static_cast<char>(0x81)));
    EXPECT_EQ(a.body_version, 2u);
}

TEST(SlottedNodeIO, ADeadHoldersLockIsTakenOverAndTheNodeStaysIntact) {
    RemoteSlot r;
    sl::SNode s = make_slotted(0, 25);
    tree::seal_node(as_node(s), 1);
    r.mem->write(r.addr, &s, kNodeSize);
    // Another connection locks the node and dies.
    auto holder = make_mem(*r.engine);
    auto& ht = dynamic_cast<InProcTransport&>(holder->node(0));
    Node n;
    holder->read(r.addr, &n, kNodeSize);
    uint64_t locked = make_lock_word(n.body_version, ht.client_id(), true);
    ASSERT_EQ(ht.cas(gaddr_offset(r.addr), n.lock, locked), n.lock);
    ht.kill_session();

    uint64_t steals = stats().lock_steals.load();
    tree::TreeOptions o;
    o.lock_grace_ms = 5;
    tree::NodeIO io(*r.mem, 0, o);
    Node snap;
    ASSERT_EQ(io.read(r.addr, snap, tree::Deadline(5000)), tree::NodeIO::Read::kOk)
        << "the take-over must accept a slotted body as intact";
    EXPECT_GT(stats().lock_steals.load(), steals);
    auto& got = reinterpret_cast<sl::SNode&>(snap);
    EXPECT_EQ(got.count, 25u);
    EXPECT_EQ(got.body_version, 2u);
    for (size_t i = 0; i < got.count; i++) EXPECT_EQ(sl::key(got, i), sl::key(s, i));
}

// ---- cache frames ------------------------------------------------------------

TEST(SlottedCache, ChildPointersAreSwizzledInSlotsAndNeverInEntryBytes) {
    Region region_mem(32);
    cache::CacheRegion& r = *region_mem.region;
    cache::Cache c(r, 5);
    const int kChildren = 45;  // more than a fixed inner node can have (39)
    static_assert(45 > kInnerCapacity);
    sl::SNode parent = make_slotted(1, kChildren, 100);
    // Vacated slot: erase one and re-add, as a tree would.
    sl::erase(parent, 3);
    ASSERT_TRUE(sl::insert_inner(parent, 3, std::string(4, static_cast<char>(0x83)), CG(103)));
    tree::seal_node(as_node(parent), 1);

    ASSERT_EQ(c.try_begin_io(CG(1)), cache::MappingTable::Begin::kOwner);
    uint32_t pf = c.admit(CG(1), as_node(parent));
    ASSERT_NE(pf, cache::kNoFrame);
    EXPECT_EQ(cache::CacheRegion::entries_in_use(r.node(pf)), uint32_t(kChildren));
    EXPECT_EQ(cache::CacheRegion::child_slots(r.node(pf)), uint32_t(kChildren));
    for (int i = 0; i < kChildren; i++) EXPECT_EQ(cache::CacheRegion::load_child(r.node(pf), i), CG(100 + i));

    // Swizzle three children, among them the last slot (past a fixed node's capacity).
    std::vector<int> slots = {0, 3, kChildren - 1};
    for (int s : slots) {
        sl::SNode leaf = make_slotted(0, 2);
        tree::seal_node(as_node(leaf), 1);
        ASSERT_EQ(c.try_begin_io(CG(100 + s)), cache::MappingTable::Begin::kOwner);
        uint32_t lf = c.admit(CG(100 + s), as_node(leaf));
        ASSERT_NE(lf, cache::kNoFrame);
        r.header(pf).lock();
        EXPECT_TRUE(r.swizzle(pf, static_cast<uint16_t>(s), lf)) << "slot " << s;
        r.header(pf).unlock();
        EXPECT_TRUE(gaddr_is_swizzled(cache::CacheRegion::load_child(r.node(pf), s)));
    }
    // Remote memory never sees swizzled values, and the entry heap (bytes
    // with the swizzle bit set) comes out exactly as it went in.
    Node img;
    r.copy_unswizzled(pf, img);
    EXPECT_EQ(std::memcmp(&img, &parent, kNodeSize), 0) << "copy_unswizzled changed more than child pointers";
    EXPECT_TRUE(tree::snapshot_valid(img));
    // Unswizzle all: exactly the three, the frame then equals the image.
    r.header(pf).lock();
    EXPECT_EQ(r.unswizzle_all(pf), 3u);
    r.header(pf).unlock();
    EXPECT_EQ(r.header(pf).swizzled_children.load(), 0u);
    EXPECT_EQ(std::memcmp(r.node(pf), &parent, kNodeSize), 0);
    // A slot past count is refused, not written into free space or the heap.
    r.header(pf).lock();
    EXPECT_FALSE(r.swizzle(pf, static_cast<uint16_t>(kChildren), pf + 1));
    r.header(pf).unlock();
}

TEST(SlottedCache, EntryBytesThatLookLikeSwizzledFramesAreLeftAlone) {
    // Every entry is the 8-byte image of a swizzled reference to a frame that
    // exists, 8-aligned in the heap, where a slot index past count lands:
    // only slots [0, count) may be taken for child pointers.
    Region region_mem(32);
    cache::CacheRegion& r = *region_mem.region;
    cache::Cache c(r, 5);
    sl::SNode parent;
    sl::init(parent, 77, 1);
    const int kEntries = 30;
    for (int i = 0; i < kEntries; i++) {
        uint64_t w = cache::swizzled_ref(static_cast<uint32_t>(i));
        std::string k(reinterpret_cast<const char*>(&w), 8);
        ASSERT_TRUE(sl::insert_inner(parent, sl::lower_bound(parent, k), k, CG(200 + i)));
    }
    ASSERT_EQ(parent.heap_top % 8, 0u);
    ASSERT_GT(tree::child_offset(true, tree::max_inner_slots(true) - 1), size_t(parent.heap_top))
        << "slot indexes past count must reach into the heap for this test to mean anything";
    tree::seal_node(as_node(parent), 1);
    ASSERT_EQ(c.try_begin_io(CG(1)), cache::MappingTable::Begin::kOwner);
    uint32_t pf = c.admit(CG(1), as_node(parent));
    ASSERT_NE(pf, cache::kNoFrame);
    // Fill the other frames so the references in the heap name mapped frames.
    for (uint64_t g = 2; g < 20; g++) {
        sl::SNode leaf = make_slotted(0, 1);
        tree::seal_node(as_node(leaf), 1);
        ASSERT_EQ(c.try_begin_io(CG(g)), cache::MappingTable::Begin::kOwner);
        ASSERT_NE(c.admit(CG(g), as_node(leaf)), cache::kNoFrame);
    }
    sl::SNode leaf = make_slotted(0, 1);
    tree::seal_node(as_node(leaf), 1);
    GAddr child0 = cache::CacheRegion::load_child(r.node(pf), 0);
    ASSERT_EQ(c.try_begin_io(child0), cache::MappingTable::Begin::kOwner);
    uint32_t lf = c.admit(child0, as_node(leaf));
    r.header(pf).lock();
    ASSERT_TRUE(r.swizzle(pf, 0, lf));
    r.header(pf).unlock();
    Node img;
    r.copy_unswizzled(pf, img);
    EXPECT_EQ(std::memcmp(&img, &parent, kNodeSize), 0) << "entry bytes were rewritten as child pointers";
    r.header(pf).lock();
    EXPECT_EQ(r.unswizzle_all(pf), 1u);
    r.header(pf).unlock();
    EXPECT_EQ(std::memcmp(r.node(pf), &parent, kNodeSize), 0);
}

}  // namespace
}  // namespace dex::testing
