// OFFLOAD_BYTES: offloaded lookups, inserts and deletes on a tree of slotted
// nodes (byte-string keys), executed by the memory node on its pool
// (memnode/engine/offload.cpp), over the in-process engine and a real
// dex-memnode over TCP. The trees are built by hand with the slotted node
// primitives and remote writes, so these tests need no slotted tree code on
// the compute side.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "memnode_process.h"
#include "transport/offload_bytes.h"
#include "transport/tcp_transport.h"
#include "tree/node_format.h"
#include "tree/slotted_node.h"
#include "tree_test_util.h"

namespace dex::testing {
namespace {

namespace sl = tree::slotted;

constexpr uint32_t kTree = 0x51077;

// Leaf entry i: "key" + 4 digits, then a 6-byte big-endian heap TID.
std::string entry(int i, uint32_t tid = 1) {
    char b[16];
    std::snprintf(b, sizeof b, "key%04d", i);
    std::string s(b);
    for (int k = 5; k >= 0; k--) s.push_back(static_cast<char>(k < 4 ? (tid >> (8 * k)) & 0xFF : 0));
    return s;
}
std::string sep(int i) {
    char b[16];
    std::snprintf(b, sizeof b, "key%04d", i);
    return b;
}

Node& as_node(sl::SNode& n) { return reinterpret_cast<Node&>(n); }
const sl::SNode& as_slotted(const Node& n) { return reinterpret_cast<const sl::SNode&>(n); }

bool holds(const Node& n, const std::string& e) {
    const sl::SNode& s = as_slotted(n);
    size_t p = sl::lower_bound(s, e);
    return p < s.count && sl::key(s, p) == e;
}

// A memory node reached in-process or over TCP (a real dex-memnode).
struct Backend {
    std::unique_ptr<memnode::Engine> engine;
    std::unique_ptr<MemnodeProcess> proc;
    std::unique_ptr<Transport> t;
    uint64_t ns = 0;
    explicit Backend(const std::string& kind) {
        if (kind == "tcp") {
            proc = std::make_unique<MemnodeProcess>();
            if (!proc->up()) return;
            t = std::make_unique<TcpTransport>(proc->address(), opts());
        } else {
            engine = make_engine(16 << 20);
            t = std::make_unique<InProcTransport>(*engine);
        }
        ns = rpc::ns_create(*t, "offload-bytes");
    }
    GAddr alloc() { return make_gaddr(0, rpc::alloc(*t, ns, kNodeSize)); }
    void put(GAddr a, sl::SNode& n, uint64_t version = 1) {
        tree::seal_node(as_node(n), version);
        t->write(gaddr_offset(a), &n, kNodeSize);
    }
    std::vector<uint8_t> raw(GAddr a, size_t len = kNodeSize) {
        std::vector<uint8_t> v(len);
        t->read(gaddr_offset(a), v.data(), static_cast<uint32_t>(len));
        return v;
    }
    ByteOffloadReply offload(uint8_t kind, GAddr start, int level, const std::string& key, uint64_t journal = 0,
                             const std::string& record = {}) {
        ByteOffload r;
        r.kind = kind;
        r.start = start;
        r.start_level = static_cast<uint8_t>(level);
        r.tree_id = kTree;
        r.key = key;
        r.journal = journal;
        r.record = record;
        return offload_bytes(*t, r);
    }
};

// A leaf [lo, hi) (hi_inf: +inf) with entries i = from, from + step, ... < to.
sl::SNode leaf(const std::string& lo, const std::string& hi, bool hi_inf, int from, int to, int step) {
    sl::SNode n;
    sl::init(n, kTree, 0);
    EXPECT_TRUE(sl::set_fences(n, lo, hi, hi_inf));
    for (int i = from; i < to; i += step) EXPECT_TRUE(sl::insert_leaf(n, n.count, entry(i)));
    return n;
}

// Two levels: a root over three leaves [-inf, key0100), [key0100, key0200),
// [key0200, +inf) linked left to right, each holding every fourth i < 300.
struct SmallTree {
    Backend& b;
    GAddr root, leaves[3];
    explicit SmallTree(Backend& be) : b(be) {
        root = b.alloc();
        for (GAddr& l : leaves) l = b.alloc();
        const char* fences[4] = {"", "key0100", "key0200", nullptr};
        for (int j = 0; j < 3; j++) {
            sl::SNode n = leaf(fences[j], fences[j + 1] ? fences[j + 1] : "", j == 2, j * 100, j * 100 + 100, 4);
            n.right = j < 2 ? leaves[j + 1] : 0;
            b.put(leaves[j], n);
        }
        sl::SNode r;
        sl::init(r, kTree, 1);
        for (int j = 0; j < 3; j++) EXPECT_TRUE(sl::insert_inner(r, j, fences[j], leaves[j]));
        b.put(root, r);
    }
};

class OffloadSlotted : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        b = std::make_unique<Backend>(GetParam());
        if (!b->t) GTEST_SKIP() << "dex-memnode did not start";
    }
    std::unique_ptr<Backend> b;
};

TEST_P(OffloadSlotted, LookupFindsEveryLeafAndFollowsRightLinks) {
    SmallTree tr(*b);
    for (int i = 0; i < 300; i++) {
        ByteOffloadReply r = b->offload(net::kOffloadLeaf, tr.root, 1, entry(i));
        ASSERT_EQ(r.status, net::kOffloadDone) << i;
        ASSERT_TRUE(r.has_image);
        EXPECT_EQ(r.leaf, tr.leaves[i / 100]) << i;
        EXPECT_TRUE(tree::snapshot_valid(r.image));
        EXPECT_TRUE(sl::covers(as_slotted(r.image), entry(i))) << i;
        EXPECT_EQ(holds(r.image, entry(i)), i % 4 == 0) << i;
    }
    // The empty search string is -inf: the leftmost leaf.
    EXPECT_EQ(b->offload(net::kOffloadLeaf, tr.root, 1, "").leaf, tr.leaves[0]);
    // A split the parent does not know yet: leaf 1 keeps [key0100, key0150),
    // a new leaf takes [key0150, key0200) and is reachable only by the right link.
    GAddr nl = b->alloc();
    sl::SNode hi = leaf("key0150", "key0200", false, 152, 200, 4);
    hi.right = tr.leaves[2];
    b->put(nl, hi);
    sl::SNode lo = leaf("key0100", "key0150", false, 100, 150, 4);
    lo.right = nl;
    b->put(tr.leaves[1], lo, 2);
    for (int i = 100; i < 200; i++) {
        ByteOffloadReply r = b->offload(net::kOffloadLeaf, tr.root, 1, entry(i));
        ASSERT_EQ(r.status, net::kOffloadDone) << i;
        EXPECT_EQ(r.leaf, i < 150 ? tr.leaves[1] : nl) << i;
        EXPECT_EQ(holds(r.image, entry(i)), i % 4 == 0) << i;
    }
    EXPECT_GE(rpc::node_stats(*b->t).offloads, 401u);
}

TEST_P(OffloadSlotted, InsertPublishesOrAnswersNoopAndWritesTheJournalRecord) {
    SmallTree tr(*b);
    const uint64_t slot = rpc::alloc(*b->t, b->ns, kNodeSize);
    std::string rec(168, '\0');
    for (size_t i = 0; i < rec.size(); i++) rec[i] = static_cast<char>(i * 7 + 1);
    Node before;
    std::memcpy(&before, b->raw(tr.leaves[1]).data(), kNodeSize);
    ByteOffloadReply r = b->offload(net::kOffloadInsert, tr.root, 1, entry(101), slot, rec);
    ASSERT_EQ(r.status, net::kOffloadDone);
    EXPECT_EQ(r.leaf, tr.leaves[1]);
    ASSERT_TRUE(r.has_image);
    EXPECT_TRUE(holds(r.image, entry(101)));
    EXPECT_EQ(r.image.count, before.count + 1);
    EXPECT_EQ(r.image.body_version, before.body_version + 1);
    // The published node is the returned image, valid and unlocked.
    std::vector<uint8_t> now = b->raw(tr.leaves[1]);
    EXPECT_EQ(std::memcmp(now.data(), &r.image, kNodeSize), 0);
    Node pub;
    std::memcpy(&pub, now.data(), kNodeSize);
    EXPECT_TRUE(tree::snapshot_valid(pub));
    std::vector<uint8_t> j = b->raw(make_gaddr(0, slot), rec.size());
    EXPECT_EQ(std::string(j.begin(), j.end()), rec);
    // Present already: Noop, the leaf unchanged, the record still written.
    std::string rec2(168, 'x');
    r = b->offload(net::kOffloadInsert, tr.root, 1, entry(101), slot, rec2);
    EXPECT_EQ(r.status, net::kOffloadNoop);
    EXPECT_FALSE(r.has_image);
    EXPECT_EQ(b->raw(tr.leaves[1]), now);
    j = b->raw(make_gaddr(0, slot), rec2.size());
    EXPECT_EQ(std::string(j.begin(), j.end()), rec2);
    // Equal key bytes, another heap TID: another entry.
    EXPECT_EQ(b->offload(net::kOffloadInsert, tr.root, 1, entry(101, 2)).status, net::kOffloadDone);
    r = b->offload(net::kOffloadLeaf, tr.root, 1, entry(101));
    EXPECT_TRUE(holds(r.image, entry(101)) && holds(r.image, entry(101, 2)));
    // Starting at the leaf itself (a cached leaf's write).
    EXPECT_EQ(b->offload(net::kOffloadInsert, tr.leaves[2], 0, entry(299)).status, net::kOffloadDone);
    EXPECT_EQ(b->offload(net::kOffloadInsert, tr.leaves[2], 0, entry(99)).status, net::kOffloadRestart)
        << "left of the start node: not reachable from there";
}

TEST_P(OffloadSlotted, FullLeafNeedsASplitAndStaysByteIdentical) {
    GAddr a = b->alloc();
    sl::SNode n;
    sl::init(n, kTree, 0);
    std::string big(sl::kMaxEntryBytes, 'a');
    int i = 0;
    for (;; i++) {
        big[100] = static_cast<char>('a' + i);
        if (!sl::insert_leaf(n, n.count, big)) break;
    }
    ASSERT_GT(i, 3);
    b->put(a, n);
    const uint64_t slot = rpc::alloc(*b->t, b->ns, kNodeSize);
    std::vector<uint8_t> before = b->raw(a);
    big[100] = 'a' - 1;  // first in order: the slot array would move too
    ByteOffloadReply r = b->offload(net::kOffloadInsert, a, 0, big, slot, std::string(168, 'j'));
    EXPECT_EQ(r.status, net::kOffloadNeedsSmo);
    EXPECT_EQ(r.leaf, a);
    EXPECT_EQ(b->raw(a), before) << "a refused insert changes no byte of the leaf";
    EXPECT_EQ(b->raw(make_gaddr(0, slot), 168), std::vector<uint8_t>(168, 'j')) << "journal record first";
    // A short entry still fits in the free bytes.
    r = b->offload(net::kOffloadInsert, a, 0, "b");
    EXPECT_EQ(r.status, net::kOffloadDone);
    EXPECT_TRUE(holds(r.image, "b"));
}

TEST_P(OffloadSlotted, DeleteIsExactAndNeverEmptiesALeaf) {
    SmallTree tr(*b);
    ByteOffloadReply r = b->offload(net::kOffloadDelete, tr.root, 1, entry(204));
    ASSERT_EQ(r.status, net::kOffloadDone);
    EXPECT_EQ(r.leaf, tr.leaves[2]);
    EXPECT_FALSE(holds(r.image, entry(204)));
    EXPECT_TRUE(holds(r.image, entry(208)));
    EXPECT_EQ(b->raw(tr.leaves[2]), std::vector<uint8_t>(reinterpret_cast<uint8_t*>(&r.image),
                                                         reinterpret_cast<uint8_t*>(&r.image) + kNodeSize));
    std::vector<uint8_t> now = b->raw(tr.leaves[2]);
    EXPECT_EQ(b->offload(net::kOffloadDelete, tr.root, 1, entry(204)).status, net::kOffloadNoop);
    // Exactly the entry: a prefix of it, or the same key with another TID, is absent.
    EXPECT_EQ(b->offload(net::kOffloadDelete, tr.root, 1, sep(208)).status, net::kOffloadNoop);
    EXPECT_EQ(b->offload(net::kOffloadDelete, tr.root, 1, entry(208, 9)).status, net::kOffloadNoop);
    EXPECT_EQ(b->raw(tr.leaves[2]), now);
    // The last entry of a leaf: the merge is the compute side's.
    GAddr one = b->alloc();
    sl::SNode n = leaf("", "", true, 5, 6, 1);
    b->put(one, n);
    std::vector<uint8_t> before = b->raw(one);
    r = b->offload(net::kOffloadDelete, one, 0, entry(5));
    EXPECT_EQ(r.status, net::kOffloadNeedsSmo);
    EXPECT_EQ(b->raw(one), before);
}

TEST_P(OffloadSlotted, LayoutMismatchRestartsAndNeverMisparses) {
    SmallTree tr(*b);
    // A fixed-layout node at the start of a byte-string offload.
    GAddr f = b->alloc();
    Node fixed;
    std::memset(&fixed, 0, sizeof fixed);
    fixed.tree_id = kTree;
    fixed.level = 0;
    fixed.low = neg_inf_key();
    fixed.high = pos_inf_key();
    fixed.count = 1;
    fixed.leaf[0] = K(7, 1, 1);
    tree::seal_node(fixed, 1);
    b->t->write(gaddr_offset(f), &fixed, kNodeSize);
    std::vector<uint8_t> fb = b->raw(f);
    for (uint8_t kind : {net::kOffloadLeaf, net::kOffloadInsert, net::kOffloadDelete})
        EXPECT_EQ(b->offload(kind, f, 0, entry(7)).status, net::kOffloadRestart) << int(kind);
    EXPECT_EQ(b->raw(f), fb);
    // And a fixed OFFLOAD at the slotted root / leaf.
    std::vector<uint8_t> lb = b->raw(tr.leaves[0]);
    for (auto [start, level] : {std::pair{tr.root, 1}, std::pair{tr.leaves[0], 0}}) {
        for (uint8_t kind : {net::kOffloadLeaf, net::kOffloadInsert, net::kOffloadDelete}) {
            net::OffloadRequest q{};
            q.start = gaddr_offset(start);
            q.tree_id = kTree;
            q.kind = kind;
            q.start_level = static_cast<uint8_t>(level);
            EntryKey k = K(7, 1, 1);
            std::memcpy(q.key, &k, sizeof q.key);
            auto resp = b->t->rpc(net::kOpOffload, &q, sizeof q);
            EXPECT_EQ(as<net::OffloadReply>(resp).status, net::kOffloadRestart) << int(kind);
        }
    }
    EXPECT_EQ(b->raw(tr.leaves[0]), lb);
    // Wrong level or tree id at the start.
    EXPECT_EQ(b->offload(net::kOffloadLeaf, tr.root, 0, entry(7)).status, net::kOffloadRestart);
    ByteOffload q;
    q.start = tr.root;
    q.start_level = 1;
    q.tree_id = kTree + 1;
    q.key = entry(7);
    EXPECT_EQ(offload_bytes(*b->t, q).status, net::kOffloadRestart);
}

TEST_P(OffloadSlotted, MalformedLengthsAreRefusedAndTheServerStillServes) {
    SmallTree tr(*b);
    std::vector<uint8_t> leaf0 = b->raw(tr.leaves[0]);
    net::OffloadBytesHeader h{};
    h.start = gaddr_offset(tr.root);
    h.tree_id = kTree;
    h.kind = net::kOffloadInsert;
    h.start_level = 1;
    const std::string key = entry(1);
    // Builds a payload from h as given (no length fixing) plus `extra` bytes.
    auto payload = [&](net::OffloadBytesHeader x, size_t extra) {
        std::vector<uint8_t> p(sizeof x + extra, 0x41);
        std::memcpy(p.data(), &x, sizeof x);
        return p;
    };
    std::vector<std::pair<std::string, std::vector<uint8_t>>> bad;
    bad.push_back({"shorter than the header", std::vector<uint8_t>(sizeof h - 1, 0)});
    auto x = h;
    x.key_len = 20;
    bad.push_back({"key_len beyond the payload", payload(x, 10)});
    bad.push_back({"bytes after key", payload(x, 30)});
    x.key_len = net::kMaxOffloadKeyBytes + 1;
    bad.push_back({"key too long", payload(x, x.key_len)});
    x.key_len = 0;
    bad.push_back({"empty entry for an insert", payload(x, 0)});
    x = h;
    x.key_len = 13;
    x.journal = 8192;
    x.record_len = net::kMaxOffloadRecordBytes + 1;
    bad.push_back({"record too long", payload(x, 13 + x.record_len)});
    x.record_len = 0;
    bad.push_back({"journal without a record", payload(x, 13)});
    x.journal = 0;
    x.record_len = 8;
    bad.push_back({"record without a journal", payload(x, 21)});
    x.journal = ~0ull - 64;
    bad.push_back({"journal slot outside the pool", payload(x, 21)});
    x.journal = 8192 + 3;
    bad.push_back({"unaligned journal slot", payload(x, 21)});
    x = h;
    x.key_len = 13;
    x.kind = 9;
    bad.push_back({"unknown kind", payload(x, 13)});
    x.kind = net::kOffloadDelete;
    x.journal = 8192;
    x.record_len = 8;
    bad.push_back({"journal with a delete", payload(x, 21)});
    x = h;
    x.key_len = 13;
    x.pad = 1;
    bad.push_back({"pad", payload(x, 13)});
    for (auto& [what, p] : bad) {
        std::string msg;
        EXPECT_EQ(code_of([&] { b->t->rpc(net::kOpOffloadBytes, p.data(), static_cast<uint32_t>(p.size())); }, &msg),
                  ErrorCode::kProtocol)
            << what;
        // The same connection object reconnects; the node still answers.
        ByteOffloadReply r = b->offload(net::kOffloadLeaf, tr.root, 1, key);
        EXPECT_EQ(r.status, net::kOffloadDone) << "after: " << what;
    }
    EXPECT_EQ(b->raw(tr.leaves[0]), leaf0) << "no malformed request changed anything";
    // The client refuses what the wire cannot carry, before sending.
    const std::string too_long(net::kMaxOffloadKeyBytes + 1, 'k');
    EXPECT_EQ(code_of([&] { b->offload(net::kOffloadLeaf, tr.root, 1, too_long); }), ErrorCode::kInvalid);
    EXPECT_EQ(code_of([&] { b->offload(net::kOffloadInsert, tr.root, 1, key, 8192, std::string(300, 'r')); }),
              ErrorCode::kInvalid);
    EXPECT_TRUE(b->t->offload_bytes_allowed());
}

// Offloaded inserts and deletes from several connections on the same leaf
// at once: each takes the leaf's lock word, so none is lost. Each thread
// inserts and deletes its own entries (same key bytes as the others', its
// own TID) round after round; the leaf always has room, so every answer
// must be Done (after retrying Restarts) -- a lost update shows up as a Noop
// or a wrong final leaf.
TEST(OffloadSlottedConcurrency, ConcurrentWritersLoseNothing) {
    Backend b("inproc");
    SmallTree tr(b);
    const int kThreads = 4, kEntries = 6, kRounds = 300;
    std::atomic<int> wrong{0};
    std::vector<std::thread> th;
    for (int c = 0; c < kThreads; c++) {
        th.emplace_back([&, c] {
            InProcTransport t(*b.engine);
            ByteOffload q;
            q.start = tr.root;
            q.start_level = 1;
            q.tree_id = kTree;
            for (int round = 0; round < kRounds; round++)
                for (uint8_t kind : {net::kOffloadInsert, net::kOffloadDelete}) {
                    if (round == kRounds - 1 && kind == net::kOffloadDelete) break;  // the last round's stay
                    q.kind = kind;
                    for (int k = 0; k < kEntries; k++) {
                        if (wrong.load() > 10) return;  // broken already: fail fast, not slowly
                        std::string e = entry(101 + 4 * k, 100 + c);
                        q.key = e;
                        // Restart (the leaf stayed locked while its holder was
                        // descheduled) changes nothing: the compute side would
                        // take its own path; here the same request again.
                        uint8_t st;
                        for (int tries = 0; (st = offload_bytes(t, q).status) == net::kOffloadRestart && tries < 20;)
                            tries++;
                        if (st != net::kOffloadDone) wrong++;
                    }
                }
        });
    }
    for (auto& x : th) x.join();
    EXPECT_EQ(wrong.load(), 0);
    Node leaf;
    std::memcpy(&leaf, b.raw(tr.leaves[1]).data(), kNodeSize);
    ASSERT_TRUE(tree::snapshot_valid(leaf));
    EXPECT_EQ(leaf.count, 25 + kThreads * kEntries);
    for (int c = 0; c < kThreads; c++)
        for (int k = 0; k < kEntries; k++) EXPECT_TRUE(holds(leaf, entry(101 + 4 * k, 100 + c))) << c << " " << k;
    EXPECT_EQ(leaf.body_version, 1u + kThreads * kEntries * (2 * kRounds - 1));
}

// A node whose CPU atomics are unsafe (an RDMA NIC with IBV_ATOMIC_HCA)
// refuses offloaded writes of either form and still answers lookups.
TEST(OffloadSlottedAtomics, WritesRefusedWhereCpuAtomicsAreUnsafe) {
    Backend b("inproc");
    SmallTree tr(b);
    b.engine->refuse_cpu_atomics("test");
    InProcTransport t(*b.engine);  // a new HELLO: without kHelloCpuAtomics
    EXPECT_FALSE(t.offload_writes_allowed());
    EXPECT_TRUE(t.offload_bytes_allowed());
    std::vector<uint8_t> before = b.raw(tr.leaves[0]);
    for (uint8_t kind : {net::kOffloadInsert, net::kOffloadDelete}) {
        ByteOffload q;
        q.kind = kind;
        q.start = tr.root;
        q.start_level = 1;
        q.tree_id = kTree;
        q.key = entry(kind == net::kOffloadInsert ? 1 : 4);
        std::string msg;
        EXPECT_EQ(code_of([&] { offload_bytes(t, q); }, &msg), ErrorCode::kInvalid) << msg;  // kStatusUnsupported
        EXPECT_NE(msg.find("OFFLOAD_BYTES"), std::string::npos) << msg;
    }
    EXPECT_EQ(b.raw(tr.leaves[0]), before);
    ByteOffload q;
    q.start = tr.root;
    q.start_level = 1;
    q.tree_id = kTree;
    q.key = entry(4);
    ByteOffloadReply r = offload_bytes(t, q);
    EXPECT_EQ(r.status, net::kOffloadDone);
    EXPECT_TRUE(holds(r.image, entry(4)));
}

INSTANTIATE_TEST_SUITE_P(Transports, OffloadSlotted, ::testing::Values("inproc", "tcp"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace dex::testing
