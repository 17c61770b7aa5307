// The insert journal (src/tree/journal.h): records written with every
// write-through insert whose heap LSN is not yet durable, lane wrap-around,
// lanes of several writers and memory nodes, offloaded inserts, the frame LSN
// of write-back mode, recovery (read / clear / life CAS) and the C API.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <utility>

#include "cache/cache.h"
#include "cache/region.h"
#include "capi/dex_capi.h"
#include "memnode_process.h"
#include "tree/journal.h"
#include "tree/offload_policy.h"
#include "tree_test_util.h"

namespace dex::testing {
namespace {

using tree::BTree;
using tree::JournalWriter;
using tree::NeedDurable;
constexpr uint32_t kSlots = tree::kJournalLaneRecords;

// Leaf whose key range holds k, read raw (lock words ignored, as recovery
// would see the pool after a crash): downlinks, then right links.
GAddr raw_leaf(RemoteMemory& m, GAddr root, const EntryKey& k, Node& n) {
    GAddr a = root;
    for (int hops = 0; hops < 10000; hops++) {
        m.read(a, &n, kNodeSize);
        if (n.is_deleted() || !tree::key_below_high(k, n)) {
            a = n.right;
        } else if (n.is_leaf()) {
            return a;
        } else {
            size_t i = 0;
            while (i + 1 < n.count && n.inner[i + 1].sep <= k) i++;
            a = n.inner[i].child;
        }
    }
    ADD_FAILURE() << "raw_leaf: no leaf";
    return 0;
}
bool raw_contains(RemoteMemory& m, uint32_t home, uint64_t ns, const EntryKey& k) {
    BTree probe(m, home, ns);
    Node n;
    raw_leaf(m, probe.refresh_root(), k, n);
    return std::binary_search(n.leaf, n.leaf + n.count, k);
}
// The lsn journal_read lists for k (0: not listed).
uint64_t listed(const tree::JournalContents& c, const EntryKey& k) {
    for (auto& r : c.records)
        if (r.key == k) return r.lsn;
    return 0;
}
// Used slots of one lane, read raw.
std::vector<tree::JournalRecord> lane_records(RemoteMemory& m, GAddr lane) {
    std::vector<tree::JournalRecord> v(kSlots);
    m.read(lane + sizeof(tree::JournalLaneHeader), v.data(), kSlots * sizeof(tree::JournalRecord));
    v.erase(std::remove_if(v.begin(), v.end(), [](auto& r) { return r.lsn == 0; }), v.end());
    return v;
}

// The lsn of the NeedDurable that insert(key, lsn, durable) throws (0: none).
uint64_t need_of(BTree& t, const EntryKey& key, uint64_t lsn, uint64_t durable) {
    try {
        t.insert(key, lsn, durable);
    } catch (const NeedDurable& e) {
        EXPECT_EQ(e.code(), ErrorCode::kNeedDurable);
        return e.lsn();
    }
    return 0;
}

// One in-process memory node, a tree and its journal.
struct OneNode {
    std::unique_ptr<memnode::Engine> engine = make_engine(64 << 20);
    std::unique_ptr<RemoteMemory> mem = make_mem(*engine);
    uint64_t ns = ns_create(mem->node(0));
    std::unique_ptr<BTree> t = std::make_unique<BTree>(*mem, 0, ns);
    GAddr root = tree::journal_create(*mem, 0, {ns}, 77);
    void load(int64_t n, double fill, int64_t step = 2) {
        BTree::BulkLoader bl(*t, fill);
        for (int64_t i = 0; i < n; i += step) bl.add(K(i, 1, 1));
        bl.finish();
    }
    tree::JournalContents read() { return tree::journal_read(*mem, root); }
};

// Exactly the inserts with 0 < lsn and lsn > durable are recorded, each with
// its own lsn; journal_read returns them sorted and distinct with the life
// journal_create set; no lane exists before the first journaled insert.
TEST(JournalWriter, RecordsExactlyTheNonDurableInserts) {
    OneNode f;
    f.t->init_empty();
    JournalWriter w(*f.mem, f.root, 3, {f.ns});
    f.t->set_journal(&w);
    EXPECT_EQ(tree::journal_life(*f.mem, f.root), 77u);
    for (int i = 0; i < 5; i++) ASSERT_TRUE(f.t->insert(K(1000 + i, 1, 1), 5 + i, 10));  // lsn <= durable
    ASSERT_TRUE(f.t->insert(K(2000, 1, 1), 0, 0));                                     // no WAL
    auto c = f.read();
    EXPECT_TRUE(c.records.empty());
    EXPECT_TRUE(c.lanes.empty()) << "a lane was allocated without a journaled insert";
    std::vector<int64_t> vals;
    for (int i = 0; i < 120; i++) vals.push_back((i * 37) % 120);  // permuted; 120 keys split leaves
    for (int i = 0; i < 120; i++) ASSERT_TRUE(f.t->insert(K(vals[i], 2, 1), 100 + vals[i], 50));
    c = f.read();
    EXPECT_EQ(c.life, 77u);
    EXPECT_EQ(c.lanes.size(), 1u);
    ASSERT_EQ(c.records.size(), 120u);
    for (int i = 0; i < 120; i++) {
        EXPECT_EQ(c.records[i].key, K(i, 2, 1));
        EXPECT_EQ(c.records[i].lsn, 100u + i);
    }
    EXPECT_EQ(f.t->check().entries, 126u);
}

// Every insert's record is in remote memory when insert() returns: into a
// leaf with room, into a full leaf (split), and for an entry that already
// existed (insert returns false, the record is written all the same).
TEST(JournalWriter, RecordIsRemoteWhenInsertReturns) {
    OneNode f;
    f.t->init_empty();
    ASSERT_TRUE(f.t->insert(K(5, 5, 5)));  // no journal yet
    JournalWriter w(*f.mem, f.root, 3, {f.ns});
    f.t->set_journal(&w);
    uint64_t lsn = 1000;
    for (int64_t i = 0; i < 150; i++) {
        uint64_t leaves = f.t->info().leaves;
        ASSERT_TRUE(f.t->insert(K(i, 1, 1), ++lsn, 0));
        ASSERT_EQ(listed(f.read(), K(i, 1, 1)), lsn) << "key " << i << (f.t->info().leaves > leaves ? " (split)" : "");
    }
    EXPECT_GE(f.t->info().leaves, 3u);  // the loop did split leaves
    EXPECT_EQ(listed(f.read(), K(5, 5, 5)), 0u);
    EXPECT_FALSE(f.t->insert(K(5, 5, 5), 5000, 0));
    EXPECT_EQ(listed(f.read(), K(5, 5, 5)), 5000u) << "an existing entry was not journaled";
}

// A transport that "crashes" (throws, then does nothing more) after `left`
// primitive operations; a batch counts each of its ops, so a crash can fall
// between any two ops of an ordered batch.
struct CrashAfter final : Transport {
    CrashAfter(memnode::Engine& e, long& left) : in(e), left(left) {}
    uint64_t incarnation() override { return in.incarnation(); }
    auto client_id() -> decltype(std::declval<InProcTransport&>().client_id()) override { return in.client_id(); }
    const std::string& address() const override { return in.address(); }
    void read(uint64_t o, void* d, uint32_t l) override { step(), in.read(o, d, l); }
    void write(uint64_t o, const void* s, uint32_t l) override { step(), in.write(o, s, l); }
    uint64_t cas(uint64_t o, uint64_t e, uint64_t d) override { return step(), in.cas(o, e, d); }
    uint64_t faa(uint64_t o, uint64_t a) override { return step(), in.faa(o, a); }
    void batch(RemoteOp* ops, size_t n) override {
        for (size_t i = 0; i < n; i++) step(), in.batch(ops + i, 1);
    }
    std::vector<uint8_t> rpc(net::Op op, const void* p, uint32_t l) override { return step(), in.rpc(op, p, l); }
    void step() {
        if (left == 0) throw Error(ErrorCode::kLostMemory, "simulated crash");
        left--;
    }
    InProcTransport in;
    long& left;
};

// Crash after every possible number of remote operations of one journaled
// insert (into a leaf with room, with the lane still to be allocated; and into
// a full leaf, i.e. a split, with the lane in use): whenever the entry is in
// its leaf afterwards, the journal lists it.
TEST(JournalWriter, CrashAtAnyPointNeverLeavesAnUnlistedEntry) {
    for (bool split : {false, true}) {
        bool completed = false;
        int present_runs = 0;
        for (long k = 0; k < 400 && !completed; k++) {
            OneNode f;
            f.t->init_empty();
            JournalWriter w0(*f.mem, f.root, 3, {f.ns});
            f.t->set_journal(&w0);
            for (int i = 0; i < (split ? int(kLeafCapacity) : 10); i++)
                ASSERT_TRUE(f.t->insert(K(2 * i, 1, 1), split ? 10 + i : 0, 0));
            long left = -1;
            std::vector<std::unique_ptr<Transport>> v;
            v.push_back(std::make_unique<CrashAfter>(*f.engine, left));
            RemoteMemory cm(std::move(v));
            BTree ct(cm, 0, f.ns);
            JournalWriter w(cm, f.root, 3, {f.ns});
            ct.set_journal(&w);
            const EntryKey key = K(7, 1, 1);
            left = k;
            try {
                completed = ct.insert(key, 500, 0);
            } catch (const Error& e) {
                ASSERT_EQ(e.code(), ErrorCode::kLostMemory) << e.what();
            }
            if (!raw_contains(*f.mem, 0, f.ns, key)) continue;
            present_runs++;
            ASSERT_EQ(listed(f.read(), key), 500u) << "crash after " << k << " ops" << (split ? " (split)" : "")
                                                   << " left the entry in its leaf but not in the journal";
        }
        EXPECT_TRUE(completed) << "the insert never completed";
        EXPECT_GE(present_runs, 1);
    }
}

// A full lane whose oldest record is not durable refuses the next journaled
// insert with NeedDurable(newest lsn: one flush frees the whole lane) and
// changes nothing; once the oldest lsn is durable the insert reuses the
// oldest slot. Inserts that need no record
// (lsn <= durable, lsn 0) are never refused.
TEST(JournalWriter, FullLaneNeedsDurableThenReusesTheOldestSlot) {
    OneNode f;
    f.load(2000, 0.5);
    JournalWriter w(*f.mem, f.root, 3, {f.ns});
    f.t->set_journal(&w);
    for (uint32_t i = 0; i < kSlots; i++) ASSERT_TRUE(f.t->insert(K(2 * i + 1, 1, 1), 100 + i, 0));
    ASSERT_EQ(f.read().records.size(), kSlots);
    const EntryKey z = K(5001, 1, 1);
    for (uint64_t durable : {0u, 99u})
        EXPECT_EQ(need_of(*f.t, z, 999, durable), 100u + kSlots - 1) << "durable " << durable;
    EXPECT_FALSE(f.t->contains(z));
    EXPECT_FALSE(raw_contains(*f.mem, 0, f.ns, z));
    EXPECT_EQ(f.read().records.size(), kSlots);
    EXPECT_EQ(f.t->check().entries, 1000u + kSlots);
    ASSERT_TRUE(f.t->insert(K(5003, 1, 1), 60, 60));  // needs no record
    ASSERT_TRUE(f.t->insert(K(5005, 1, 1), 0, 0));
    ASSERT_TRUE(f.t->insert(z, 999, 100));
    auto c = f.read();
    ASSERT_EQ(c.records.size(), kSlots);
    EXPECT_EQ(listed(c, K(1, 1, 1)), 0u) << "the oldest slot was not the one reused";
    EXPECT_EQ(listed(c, z), 999u);
    EXPECT_EQ(listed(c, K(3, 1, 1)), 101u);
    // the next slot holds lsn 101: refused until 101 is durable
    EXPECT_THROW(f.t->insert(K(5007, 1, 1), 1000, 100), NeedDurable);
    EXPECT_TRUE(f.t->insert(K(5007, 1, 1), 1000, 101));
}

// Lanes of different writers are independent (a full lane 1 does not stop
// lane 2); a new writer on an existing lane continues at the previous owner's
// oldest record, never overwriting a newer one first.
TEST(JournalLanes, WritersAreIndependentAndANewOwnerContinuesAtTheOldest) {
    OneNode f;
    f.load(4000, 0.5);
    BTree t2(*f.mem, 0, f.ns);
    JournalWriter w1(*f.mem, f.root, 1, {f.ns}), w2(*f.mem, f.root, 2, {f.ns});
    f.t->set_journal(&w1);
    t2.set_journal(&w2);
    for (uint32_t i = 0; i < kSlots; i++) ASSERT_TRUE(f.t->insert(K(2 * i + 1, 1, 1), 1 + i, 0));
    EXPECT_THROW(f.t->insert(K(3001, 1, 1), 5000, 0), NeedDurable);
    for (int i = 0; i < 10; i++) ASSERT_TRUE(t2.insert(K(2 * i + 1, 2, 1), 9000 + i, 0));  // lane 2 has room
    auto c = f.read();
    EXPECT_EQ(c.lanes.size(), 2u);
    EXPECT_EQ(c.records.size(), kSlots + 10u);
    // w1 overwrites its slots 0..4 (lsn 1..5): lane 1 = 1000..1004, then 6..170
    for (int i = 0; i < 5; i++) ASSERT_TRUE(f.t->insert(K(4001 + 2 * i, 1, 1), 1000 + i, 5));
    // a new owner of lane 1 (e.g. the next backend in that PGPROC slot)
    BTree t3(*f.mem, 0, f.ns);
    JournalWriter w3(*f.mem, f.root, 1, {f.ns});
    t3.set_journal(&w3);
    ASSERT_NO_THROW(t3.insert(K(6001, 1, 1), 2000, 6)) << "did not start at the oldest slot (lsn 6)";
    c = f.read();
    EXPECT_EQ(listed(c, K(11, 1, 1)), 0u);  // lsn 6 was replaced
    for (int i = 0; i < 5; i++) EXPECT_EQ(listed(c, K(4001 + 2 * i, 1, 1)), 1000u + i);
    EXPECT_EQ(listed(c, K(6001, 1, 1)), 2000u);
    EXPECT_EQ(need_of(t3, K(6003, 1, 1), 2001, 6), 2000u) << "overwrote a record that is not durable";
    // a writer with no lane number (>= kJournalLanes) waits for its own insert
    JournalWriter none(*f.mem, f.root, tree::kJournalLanes, {f.ns});
    t2.set_journal(&none);
    EXPECT_EQ(need_of(t2, K(6005, 1, 1), 3000, 10), 3000u);
    EXPECT_TRUE(t2.insert(K(6005, 1, 1), 3000, 3000));
}

// A lane that filled up and is then wholly obsolete (WAL durable past its
// newest record, as after the flush its NeedDurable asked for) is replaced by
// one twice as large -- a bulk load then flushes WAL once per 340, 680, ...
// rows instead of once per 170 -- up to kJournalLaneRecordsMax; recovery
// reads the grown lane whole; an old fixed-size lane (kJournalMagic, no
// record count) is still read as kJournalLaneRecords slots.
TEST(JournalLanes, AFilledLaneGrowsOnceObsoleteAndRecoveryReadsIt) {
    OneNode f;
    f.load(20000, 0.5);
    JournalWriter w(*f.mem, f.root, 4, {f.ns});
    f.t->set_journal(&w);
    int64_t k = 1;
    uint64_t lsn = 1, durable = 0;
    std::vector<uint32_t> sizes;
    for (int fill = 0; fill < 6; fill++) {
        uint32_t n = 0;
        for (;; n++) {  // journaled inserts until the lane is full
            uint64_t need = need_of(*f.t, K(k, 1, 1), lsn, durable);
            if (need) {
                EXPECT_EQ(need, lsn - 1) << "the newest record";
                durable = need;  // the flush
                break;
            }
            k += 2;
            lsn++;
        }
        sizes.push_back(n);
        auto c = f.read();
        ASSERT_EQ(c.lane_slots.size(), 1u);
        EXPECT_EQ(c.lane_slots[0], n);
        EXPECT_EQ(c.records.size(), n) << "recovery must list every record of the grown lane";
    }
    // 170 after the first fill's flush: the lane grows on the next insert
    const uint32_t max = tree::kJournalLaneRecordsMax;
    EXPECT_EQ(sizes, (std::vector<uint32_t>{kSlots, 2 * kSlots, 4 * kSlots, 8 * kSlots, 16 * kSlots, max}));
    // Not obsolete yet (durable below the newest): no growth, the oldest slot is reused.
    JournalWriter w2(*f.mem, f.root, 5, {f.ns});
    f.t->set_journal(&w2);
    for (uint32_t i = 0; i < kSlots; i++) ASSERT_TRUE(f.t->insert(K(100001 + 2 * i, 1, 1), 100 + i, 0));
    ASSERT_TRUE(f.t->insert(K(200001, 1, 1), 999, 100));
    ASSERT_TRUE(f.t->insert(K(200003, 1, 1), 999, 101));
    auto c = f.read();
    EXPECT_EQ(c.lane_slots, (std::vector<uint32_t>{max, kSlots}));
    // An old fixed-size lane: header {kJournalMagic, lane 6, 0}.
    tree::JournalLaneHeader old{tree::kJournalMagic, 6, 0};
    EXPECT_EQ(tree::lane_records(old, 6), kSlots);
    EXPECT_EQ(tree::lane_records(old, 7), 0u);
    tree::JournalLaneHeader bad{tree::kJournalLaneMagic, 6, tree::kJournalLaneRecordsMax + 1};
    EXPECT_EQ(tree::lane_records(bad, 6), 0u);
    tree::journal_clear(*f.mem, c);
    EXPECT_EQ(f.read().records.size(), 0u);
}

// A tree over three memory nodes: each record lies in the writer's lane on the
// memory node of the entry's leaf, journal_read lists them all, journal_clear
// empties every lane on every node, and journal_cas_life only moves from the
// expected life.
TEST(JournalNodes, RecordsGoToTheLeafsNodeClearAndLife) {
    std::vector<std::unique_ptr<memnode::Engine>> engines;
    std::vector<std::unique_ptr<Transport>> v;
    for (int i = 0; i < 3; i++) {
        engines.push_back(make_engine(64 << 20));
        v.push_back(std::make_unique<InProcTransport>(*engines.back()));
    }
    RemoteMemory mem(std::move(v));
    std::vector<uint64_t> ns;
    for (uint32_t i = 0; i < 3; i++) ns.push_back(ns_create(mem.node(i)));
    BTree t(mem, 0, ns[0]);
    t.set_placement(ns, 1);
    BTree::BulkLoader bl(t, 0.7);
    for (int64_t i = 0; i < 40000; i += 2) bl.add(K(i, 1, 1));
    bl.finish();
    GAddr root = tree::journal_create(mem, 0, ns, 5);
    JournalWriter w(mem, root, 7, ns);
    t.set_journal(&w);
    std::vector<EntryKey> keys;
    std::vector<int> per_node(3, 0);
    for (int64_t k = 1; k < 40000; k += 400) {
        ASSERT_TRUE(t.insert(K(k, 1, 1), 100 + k, 0));
        keys.push_back(K(k, 1, 1));
    }
    auto c = tree::journal_read(mem, root);
    ASSERT_EQ(c.lanes.size(), 3u);
    ASSERT_EQ(c.records.size(), keys.size());
    for (auto& k : keys) {
        Node n;
        uint32_t node = gaddr_node(raw_leaf(mem, t.refresh_root(), k, n));
        ASSERT_TRUE(std::binary_search(n.leaf, n.leaf + n.count, k));
        per_node[node]++;
        for (GAddr lane : c.lanes) {
            auto recs = lane_records(mem, lane);
            bool here = std::any_of(recs.begin(), recs.end(), [&](auto& r) { return r.key == k; });
            EXPECT_EQ(here, gaddr_node(lane) == node) << "record of a leaf on node " << node << " found on node "
                                                      << gaddr_node(lane) << " (or missing there)";
        }
    }
    for (int i = 0; i < 3; i++) EXPECT_GT(per_node[i], 0) << "no insert landed on node " << i;
    tree::journal_clear(mem, c);
    auto cleared = tree::journal_read(mem, root);
    EXPECT_TRUE(cleared.records.empty());
    EXPECT_EQ(cleared.lanes.size(), 3u);
    for (GAddr lane : cleared.lanes) EXPECT_TRUE(lane_records(mem, lane).empty());
    EXPECT_EQ(tree::journal_cas_life(mem, root, 4, 9), 5u);  // wrong expectation: unchanged
    EXPECT_EQ(tree::journal_life(mem, root), 5u);
    EXPECT_EQ(tree::journal_cas_life(mem, root, 5, 9), 5u);
    EXPECT_EQ(tree::journal_life(mem, root), 9u);
    EXPECT_EQ(tree::journal_read(mem, root).life, 9u);
}

struct Offloading {
    OneNode f;
    std::unique_ptr<char[]> rmem;
    std::unique_ptr<cache::Cache> c;
    tree::OffloadPolicy pol;
    std::unique_ptr<RemoteMemory> mem;
    std::unique_ptr<BTree> t;
    explicit Offloading(double fill) {
        f.load(40000, fill);
        size_t bytes = cache::CacheRegion::bytes_for(size_t(64) * kNodeSize);
        rmem.reset(new char[bytes]);
        c = std::make_unique<cache::Cache>(*cache::CacheRegion::init(rmem.get(), bytes, {}), 11);
        pol.set_mode(tree::OffloadMode::kOn);
        tree::TreeOptions o;
        o.cache = c.get();
        o.offload = &pol;
        mem = make_mem(*f.engine);
        t = std::make_unique<BTree>(*mem, 0, f.ns, o);
    }
};

// Inserts the memory node executes (OFFLOAD) are journaled too: the memory
// node writes the record the request carries.
TEST(JournalOffload, OffloadedInsertsAreJournaled) {
    Offloading o(0.7);
    JournalWriter w(*o.mem, o.f.root, 4, {o.f.ns});
    o.t->set_journal(&w);
    const uint64_t off0 = o.f.engine->stats().offloads;
    std::vector<EntryKey> keys;
    for (int64_t k = 1; k < 40000; k += 400) {
        ASSERT_TRUE(o.t->insert(K(k, 1, 1), 10 + k, 0));
        keys.push_back(K(k, 1, 1));
    }
    EXPECT_GE(o.f.engine->stats().offloads - off0, keys.size()) << "inserts were not offloaded";
    auto c = o.f.read();
    ASSERT_EQ(c.records.size(), keys.size());
    for (auto& k : keys) {
        EXPECT_EQ(listed(c, k), 10u + static_cast<uint64_t>(key_to_int64(k.value)));
        EXPECT_TRUE(raw_contains(*o.f.mem, 0, o.f.ns, k));
    }
}

// An offloaded insert the memory node answers "needs a split" (it has already
// written the record) continues one-sided and splits: it must not use a
// second slot whose record is not durable (the lane was checked for one free
// slot only). Every record with lsn > durable must survive any insert.
TEST(JournalOffload, OffloadNeedingASplitKeepsPendingRecords) {
    Offloading o(1.0);  // every leaf full
    JournalWriter w(*o.mem, o.f.root, 4, {o.f.ns});
    o.f.t->set_journal(&w);  // one-sided, uncached: one slot per insert
    for (uint32_t i = 0; i < kSlots; i++) ASSERT_TRUE(o.f.t->insert(K(2 * i + 1, 1, 1), 1 + i, 0));
    o.t->set_journal(&w);
    const uint64_t off0 = o.f.engine->stats().offloads;
    const EntryKey z = K(30001, 1, 1);
    uint64_t need = need_of(*o.t, z, 1000, 1);  // slot 0 (lsn 1) may be reused, slot 1 (lsn 2) not
    bool refused = need != 0;
    EXPECT_TRUE(!refused || need >= 2u);
    EXPECT_GT(o.f.engine->stats().offloads - off0, 0u);
    auto c = o.f.read();
    for (uint32_t i = 1; i < kSlots; i++)
        EXPECT_EQ(listed(c, K(2 * i + 1, 1, 1)), 1u + i) << "record of lsn " << 1 + i << " (> durable 1) was overwritten";
    if (!refused) {
        EXPECT_EQ(listed(c, z), 1000u);
    }
}

std::atomic<uint64_t> g_durable{0};
uint64_t test_durable() { return g_durable.load(); }
struct DurableSource {  // resets the process-wide source even if the test fails
    explicit DurableSource(uint64_t v) {
        g_durable = v;
        tree::set_durable_lsn_source(test_durable);
    }
    ~DurableSource() { tree::set_durable_lsn_source(nullptr); }
};

// An in-place insert keeps its lsn (the highest) in the dirty frame instead of
// journaling; the split of the full frame while durable_lsn() is lower
// writes none of its entries (W13, tests/writeback_split_test.cpp), and once
// it is not, the next split writes the frame back and proceeds.
TEST(JournalWriteBack, DirtyFrameWaitsForItsLsn) {
    OneNode f;
    f.load(400, 0.5);
    size_t bytes = cache::CacheRegion::bytes_for(size_t(1024) * kNodeSize);
    std::unique_ptr<char[]> rmem(new char[bytes]);
    cache::CacheRegion* R = cache::CacheRegion::init(rmem.get(), bytes, cache::AdmissionPolicy{true, 1.0});
    cache::Cache c(*R, 5);
    tree::TreeOptions o;
    o.cache = &c;
    o.write_back = true;
    o.register_dirty = [] { return true; };
    BTree t(*f.mem, 0, f.ns, o);
    JournalWriter w(*f.mem, f.root, 3, {f.ns});
    t.set_journal(&w);
    DurableSource src(100);
    ASSERT_TRUE(t.insert(K(1, 1, 1), 500, 0));
    Node n;
    GAddr leaf = raw_leaf(*f.mem, t.refresh_root(), K(1, 1, 1), n);
    uint32_t fr = R->table().lookup(leaf);
    ASSERT_LT(fr, R->frame_count()) << "leaf not cached in write-back mode";
    EXPECT_EQ(R->header(fr).dirty.load(), 1u);
    EXPECT_EQ(R->header(fr).lsn.load(), 500u);
    EXPECT_FALSE(std::binary_search(n.leaf, n.leaf + n.count, K(1, 1, 1))) << "in-place insert reached remote memory";
    ASSERT_TRUE(t.insert(K(1, 2, 1), 300, 0));  // lower lsn, then none: the frame keeps 500
    ASSERT_TRUE(t.insert(K(1, 3, 1), 0, 0));
    EXPECT_EQ(R->header(fr).lsn.load(), 500u);
    EXPECT_TRUE(f.read().records.empty()) << "an in-place change was journaled";
    for (uint32_t b = 4; R->node(fr)->count < kLeafCapacity; b++) ASSERT_TRUE(t.insert(K(1, b, 1), 0, 0));
    // Its split (W13): remote memory gets the split of what it held, none of
    // the frame's entries; both halves stay dirty; nothing is journaled.
    const EntryKey z = K(1, 999, 1);
    const uint64_t splits0 = stats().dirty_splits.load();
    ASSERT_TRUE(t.insert(z, 600, 0));
    EXPECT_EQ(stats().dirty_splits.load(), splits0 + 1);
    EXPECT_TRUE(t.contains(z));
    EXPECT_FALSE(raw_contains(*f.mem, 0, f.ns, K(1, 1, 1))) << "a dirty frame with lsn 500 was written at durable 100";
    EXPECT_FALSE(raw_contains(*f.mem, 0, f.ns, z));
    EXPECT_EQ(R->header(fr).dirty.load(), 1u);
    EXPECT_EQ(R->header(fr).lsn.load(), 600u);
    EXPECT_TRUE(f.read().records.empty()) << "the dirty split journaled";
    // Covered: the next split of the lower half writes it back, then splits
    // through (journaled).
    g_durable = 600;
    for (uint16_t o = 2; R->node(fr)->count < kLeafCapacity; o++) ASSERT_TRUE(t.insert(K(1, 1, o), 0, 0));
    const EntryKey y = K(1, 1, 9999);
    ASSERT_TRUE(t.insert(y, 700, 0));
    EXPECT_TRUE(raw_contains(*f.mem, 0, f.ns, K(1, 1, 1)));
    EXPECT_TRUE(raw_contains(*f.mem, 0, f.ns, y));
    auto r = f.read();
    ASSERT_EQ(r.records.size(), 1u);
    EXPECT_EQ(r.records[0].key, y);
    EXPECT_EQ(R->header(fr).lsn.load(), 0u);
}

// A dex-memnode process on a free port, as in capi_test.cpp (stdout
// inherited, no PR_SET_PDEATHSIG).
MemnodeOptions capi_node_opts() { return {.die_with_parent = false, .quiet_stdout = false}; }

DexKey dkey(int64_t v) {
    DexKey k{};
    k.value = key_from_int64(v);
    k.block = k.offnum = 1;
    k.cls = DEX_KEY_VALUE;
    return k;
}
uint64_t entries(DexTree* t) {
    DexTreeInfo info{};
    DexError err;
    EXPECT_EQ(dex_tree_check(t, &info, &err), DEX_OK) << err.message;
    return info.entries;
}
bool has(DexTree* t, int64_t v) {
    DexKey k = dkey(v);
    DexScan* s = nullptr;
    DexError err;
    EXPECT_EQ(dex_scan_begin(t, &k, &k, 0, &s, &err), DEX_OK) << err.message;
    const DexKey* e = nullptr;
    int n = 0;
    EXPECT_EQ(dex_scan_next(s, &e, &n, &err), DEX_OK) << err.message;
    dex_scan_end(s);
    return n > 0;
}
// A connected process with a fresh tree holding `n` even keys.
struct CApiTree {
    MemnodeProcess node{capi_node_opts()};
    DexTree* t = nullptr;
    uint64_t ns = 0;
    DexError err{};
    explicit CApiTree(int n, uint64_t cache_bytes = 0) {
        EXPECT_GT(node.port(), 0);
        EXPECT_EQ(dex_configure(node.address().c_str(), "", 2000, 5000, &err), DEX_OK) << err.message;
        if (cache_bytes) {
            cmem.resize(dex_cache_shmem_size(cache_bytes) / 8 + 1);
            EXPECT_EQ(dex_cache_attach(cmem.data(), cache_bytes, 1, &err), DEX_OK) << err.message;
            dex_cache_set_policy(1.0, 1);
        }
        uint8_t tag[DEX_NS_TAG_LEN] = {};
        uint64_t inc = 0;
        EXPECT_EQ(dex_ns_create(0, tag, &ns, &inc, &err), DEX_OK) << err.message;
        EXPECT_EQ(dex_tree_open(0, ns, inc, "jidx", &t, &err), DEX_OK) << err.message;
        EXPECT_EQ(dex_tree_init_empty(t, &err), DEX_OK) << err.message;
        DexBulk* b = nullptr;
        EXPECT_EQ(dex_bulk_begin(t, 0.5, &b, &err), DEX_OK) << err.message;
        for (int i = 0; i < n; i++) {
            DexKey k = dkey(2 * i);
            EXPECT_EQ(dex_bulk_add(b, &k, &err), DEX_OK) << err.message;
        }
        EXPECT_EQ(dex_bulk_finish(b, &err), DEX_OK) << err.message;
    }
    ~CApiTree() {
        dex_tree_close(t);
        dex_set_durable_lsn_fn(nullptr);
        if (!cmem.empty()) {
            dex_cache_detach();
            dex_cache_attach(nullptr, 0, 0, &err);
        }
        dex_disconnect_all();
        dex_configure("", "", 0, 0, &err);
    }
    std::vector<uint64_t> cmem;
};

// dex_tree_insert answers DEX_ERR_NEED_WAL_FLUSH with need_lsn (and changes
// nothing) while the lane is full of non-durable records, DEX_OK on retry
// with that lsn durable; recovery: dex_journal_read lists the records,
// dex_journal_finish refuses a wrong old life, else deletes the given strays,
// clears the lanes and moves the life; a process without a lane must wait.
TEST(JournalCApi, NeedWalFlushReadAndFinish) {
    CApiTree x(200);
    DexError& err = x.err;
    uint64_t root = 0, life = 0, removed = 0;
    ASSERT_EQ(dex_journal_create(x.t, 111, &root, &err), DEX_OK) << err.message;
    ASSERT_NE(root, 0u);
    ASSERT_EQ(dex_tree_set_journal(x.t, root, 5, &err), DEX_OK) << err.message;
    for (uint32_t i = 0; i < kSlots; i++) {
        DexKey k = dkey(2 * i + 1);
        ASSERT_EQ(dex_tree_insert(x.t, &k, 1 + i, 0, &err), DEX_OK) << err.message;
    }
    DexKey z = dkey(5001);
    ASSERT_EQ(dex_tree_insert(x.t, &z, 500, 0, &err), DEX_ERR_NEED_WAL_FLUSH);
    EXPECT_EQ(err.code, DEX_ERR_NEED_WAL_FLUSH);
    EXPECT_EQ(err.need_lsn, uint64_t(kSlots));  // the newest: frees the whole lane
    EXPECT_FALSE(has(x.t, 5001));
    ASSERT_EQ(dex_tree_insert(x.t, &z, 500, 1, &err), DEX_OK) << err.message;
    EXPECT_EQ(err.need_lsn, 0u);
    DexKey* keys = nullptr;
    int n = 0;
    ASSERT_EQ(dex_journal_read(x.t, &keys, &n, &life, &err), DEX_OK) << err.message;
    EXPECT_EQ(life, 111u);
    ASSERT_EQ(n, int(kSlots));
    bool z_listed = false, first_listed = false;
    for (int i = 0; i < n; i++) {
        z_listed |= key_to_int64(keys[i].value) == 5001;
        first_listed |= key_to_int64(keys[i].value) == 1;
        if (i) {
            EXPECT_LT(key_to_int64(keys[i - 1].value), key_to_int64(keys[i].value));
        }
    }
    dex_free(keys);
    EXPECT_TRUE(z_listed);
    EXPECT_FALSE(first_listed);  // its slot was reused
    DexKey seven = dkey(7);  // wrong old life: nothing deleted, cleared or moved
    EXPECT_EQ(dex_journal_finish(x.t, 999, 222, &seven, 1, &removed, &err), DEX_ERR_INVALID);
    EXPECT_TRUE(has(x.t, 7));
    ASSERT_EQ(dex_journal_read(x.t, &keys, &n, &life, &err), DEX_OK) << err.message;
    dex_free(keys);
    EXPECT_EQ(n, int(kSlots));
    EXPECT_EQ(life, 111u);
    DexKey strays[3] = {dkey(3), dkey(5), dkey(7777)};  // sorted; the last is not in the tree
    ASSERT_EQ(dex_journal_finish(x.t, 111, 222, strays, 3, &removed, &err), DEX_OK) << err.message;
    EXPECT_EQ(removed, 2u);
    EXPECT_FALSE(has(x.t, 3));
    EXPECT_FALSE(has(x.t, 5));
    EXPECT_TRUE(has(x.t, 7));
    ASSERT_EQ(dex_journal_read(x.t, &keys, &n, &life, &err), DEX_OK) << err.message;
    dex_free(keys);
    EXPECT_EQ(n, 0);
    EXPECT_EQ(life, 222u);
    EXPECT_EQ(dex_journal_finish(x.t, 111, 333, nullptr, 0, &removed, &err), DEX_ERR_INVALID);
    // the new life's writer (attached afresh) finds every slot of the lane free
    ASSERT_EQ(dex_tree_set_journal(x.t, 0, 5, &err), DEX_OK) << err.message;
    ASSERT_EQ(dex_tree_set_journal(x.t, root, 5, &err), DEX_OK) << err.message;
    DexKey y = dkey(6001);
    ASSERT_EQ(dex_tree_insert(x.t, &y, 10000, 0, &err), DEX_OK) << err.message;
    ASSERT_EQ(dex_tree_set_journal(x.t, root, 5000, &err), DEX_OK) << err.message;  // no lane
    DexKey v = dkey(6003);
    ASSERT_EQ(dex_tree_insert(x.t, &v, 20000, 0, &err), DEX_ERR_NEED_WAL_FLUSH);
    EXPECT_EQ(err.need_lsn, 20000u);
    ASSERT_EQ(dex_tree_insert(x.t, &v, 20000, 20000, &err), DEX_OK) << err.message;
    EXPECT_EQ(entries(x.t), 200u + kSlots + 3u - 2u);  // + z, y, v; - 2 strays
}

std::atomic<uint64_t> g_capi_durable{0};
uint64_t capi_durable() { return g_capi_durable.load(); }

// Write-back through the C API: a dirty leaf whose entry has lsn L is not
// written back by dex_cache_flush (nor by dex_tree_check's flush, nor when
// leaving write-back mode: NEED_WAL_FLUSH) while the durable source says < L,
// and is once it says >= L.
TEST(JournalCApi, CacheFlushWaitsForDurableLsn) {
    CApiTree x(200, 4 << 20);
    DexError& err = x.err;
    uint64_t word = 0, written = 0;
    ASSERT_EQ(dex_ns_alloc_word(0, x.ns, &word, &err), DEX_OK) << err.message;
    ASSERT_EQ(dex_tree_set_write_back(x.t, 1, word, &err), DEX_OK) << err.message;
    g_capi_durable = 100;
    dex_set_durable_lsn_fn(capi_durable);
    // The leaf cached first: the insert goes in place (an uncached leaf's
    // would be offloaded and journaled, W17).
    EXPECT_TRUE(has(x.t, 2));
    DexKey k = dkey(1);
    ASSERT_EQ(dex_tree_insert(x.t, &k, 1000, 100, &err), DEX_OK) << err.message;
    EXPECT_EQ(dex_cache_dirty_lsn(), 1000u);
    ASSERT_EQ(dex_cache_flush(&written, &err), DEX_OK) << err.message;
    EXPECT_EQ(written, 0u);
    EXPECT_EQ(dex_cache_dirty_lsn(), 1000u);
    EXPECT_EQ(entries(x.t), 200u) << "the entry reached remote memory before its WAL was durable";
    EXPECT_TRUE(has(x.t, 1));  // still served from the dirty frame
    ASSERT_EQ(dex_tree_set_write_back(x.t, 0, word, &err), DEX_ERR_NEED_WAL_FLUSH);
    EXPECT_EQ(err.need_lsn, 1000u);
    g_capi_durable = 1000;
    ASSERT_EQ(dex_cache_flush(&written, &err), DEX_OK) << err.message;
    EXPECT_EQ(written, 1u);
    EXPECT_EQ(dex_cache_dirty_lsn(), 0u);
    EXPECT_EQ(entries(x.t), 201u);
    ASSERT_EQ(dex_tree_set_write_back(x.t, 0, word, &err), DEX_OK) << err.message;
}

}  // namespace
}  // namespace dex::testing
