// Dirty splits on the memory node (OFFLOAD_DIRTY_SPLIT, src/README.md
// "Splitting a dirty leaf"): a full dirty write-back leaf whose entries
// remote memory may not take yet (their heap WAL is not durable) is split by
// its memory node in one round trip -- what remote memory holds, at the
// separator of the frame's own split, into the block the compute server
// named -- and the frame's halves stay dirty. No uncovered entry reaches
// remote memory; a lost answer is settled by what remote memory shows; a
// request that does not describe the leaf changes nothing.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>

#include "cache/cache.h"
#include "cache/region.h"
#include "common/stats.h"
#include "net/protocol.h"
#include "tree/journal.h"
#include "tree_test_util.h"
#include "writeback_test_util.h"

using namespace dex;
using namespace dex::testing;

namespace {

// A write-back tree of `n` covered entries, written back; its memory node
// splits dirty leaves.
struct DirtyTree {
    WbFixture x;
    std::unique_ptr<tree::BTree> tp = x.write_back_tree();
    std::set<EntryKey> model;
    explicit DirtyTree(int n, uint64_t seed = 5) {
        x.t->dirty_split = true;
        std::mt19937_64 rng(seed);
        for (int i = 0; i < n; i++) {
            EntryKey k = K(static_cast<int64_t>(rng() % 200000) * 2, static_cast<uint32_t>(i), 1);
            EXPECT_EQ(tp->insert(k), model.insert(k).second);
        }
        expect_flushed_remote_holds(x, model);
    }
};

TEST(WriteBackDirtySplitOffload, OneRoundTripAndNoUncoveredEntryReachesRemoteMemory) {
    DirtyTree d(3000);
    tree::BTree& t = *d.tp;
    const std::set<EntryKey> written = d.model;
    DurableAt at(100);  // the new entries' LSN (500) is not durable
    const uint64_t splits0 = stats().dirty_splits.load(), memnode0 = stats().offloads.load();
    uint64_t insert_trips = 0, split_inserts = 0, last = splits0;
    std::mt19937_64 rng(17);
    for (int i = 0; i < 6000; i++) {
        EntryKey k = K(static_cast<int64_t>(rng() % 200000) * 2 + 1, static_cast<uint32_t>(10000 + i), 2);
        const uint64_t before = d.x.t->trips;
        bool r = false;
        ASSERT_NO_THROW(r = t.insert(k, 500)) << "insert " << i << " waited for WAL";
        ASSERT_EQ(r, d.model.insert(k).second);
        const uint64_t now = stats().dirty_splits.load();
        if (now != last) insert_trips += d.x.t->trips - before, split_inserts++;
        last = now;
    }
    const uint64_t splits = stats().dirty_splits.load() - splits0;
    ASSERT_GT(splits, 50u) << "6000 inserts into 3000 entries split few dirty leaves";
    EXPECT_EQ(split_inserts, splits);
    EXPECT_GE(stats().offloads.load() - memnode0, splits) << "dirty splits were not sent to the memory node";
    // One round trip each, a few more where the parent was full (its split
    // is the compute side's) or the first spare block had to be allocated:
    // the one-sided way took five (WriteBackDirtySplit.Uncovered...).
    EXPECT_LE(insert_trips, 3 * split_inserts / 2) << split_inserts << " inserts that split a dirty leaf";
    EXPECT_EQ(scan_all(t, KMin(-1), KMax(1 << 30), false), all_of(d.model)) << "the cache lacks entries";
    // Remote memory alone: a valid tree of more leaves holding exactly what
    // was written back before -- none of the uncovered entries.
    tree::BTree remote_only(*d.x.mem, 0, d.x.ns);
    EXPECT_EQ(remote_only.check().entries, written.size());
    EXPECT_EQ(scan_all(remote_only, KMin(-1), KMax(1 << 30), false), all_of(written));
    EXPECT_GT(remote_only.check().leaves, written.size() / kLeafCapacity + splits / 2);
    g_durable = 500;  // covered: a flush makes remote memory equal the model
    expect_flushed_remote_holds(d.x, d.model);
    expect_cache_coherent(*d.x.reg.region, *d.x.mem);
}

// Byte-string (slotted) trees: OFFLOAD_BYTES_DIRTY_SPLIT, the same split with
// the separator and fences as bytes. One round trip per split (a few more
// where a parent filled) where the one-sided way takes five; no uncovered
// entry in remote memory; a flush makes remote memory the model. Then a lost
// answer: remote memory tells that it ran, nothing is lost.
TEST(WriteBackDirtySplitOffload, ByteStringTreeOneRoundTrip) {
    for (bool offloaded : {true, false}) {
        WbFixture x;
        x.t->dirty_split = offloaded;
        auto tp = x.write_back_tree<tree::SlottedTree>();
        tree::SlottedTree& t = *tp;
        std::set<std::string> written, model;
        auto key = [](int i) { return "customer-" + std::to_string(i * 7919 % 100003) + std::string(i % 17, 'x'); };
        for (int i = 0; i < 1500; i++) ASSERT_EQ(t.insert(key(i)), model.insert(key(i)).second);
        x.handle.flush_frames(x.dirty_frames());
        written = model;
        DurableAt at(100);
        const uint64_t splits0 = stats().dirty_splits.load();
        uint64_t split_trips = 0, split_inserts = 0;
        tree::SlottedTree remote_only(*x.mem, 0, x.ns);  // (its reads go through x.t: counted after the insert)
        for (int i = 1500; i < 5000; i++) {
            const uint64_t before = x.t->trips, s0 = stats().dirty_splits.load();
            bool r = false;
            ASSERT_NO_THROW(r = t.insert(key(i), 500)) << "insert " << i << " waited for WAL";
            ASSERT_EQ(r, model.insert(key(i)).second);
            if (stats().dirty_splits.load() != s0) split_trips += x.t->trips - before, split_inserts++;
            // The split of a clean (or covered) full leaf writes through, the
            // new entry journaled: remote memory has it from then on.
            if (remote_only.contains(key(i))) written.insert(key(i));
        }
        const uint64_t splits = stats().dirty_splits.load() - splits0;
        std::printf("[ dirty split ] byte-string tree, %s: %llu dirty splits, %llu round trips in their inserts\n",
                    offloaded ? "OFFLOAD_BYTES_DIRTY_SPLIT" : "one-sided", static_cast<unsigned long long>(splits),
                    static_cast<unsigned long long>(split_trips));
        ASSERT_GT(splits, 30u);
        if (offloaded)
            EXPECT_LE(split_trips, 3 * split_inserts / 2) << split_inserts << " inserts that split a dirty leaf";
        else
            EXPECT_GE(split_trips, 4 * split_inserts) << "the one-sided way";
        for (const std::string& k : model) ASSERT_TRUE(t.contains(k)) << k;
        EXPECT_EQ(remote_only.check().entries, written.size()) << "only what was written back or through";
        for (const std::string& k : model)
            if (!written.count(k)) EXPECT_FALSE(remote_only.contains(k)) << k << " reached remote memory";
        g_durable = 500;
        x.handle.flush_frames(x.dirty_frames());
        EXPECT_TRUE(x.dirty_frames().empty());
        EXPECT_EQ(remote_only.check().entries, model.size());
        for (const std::string& k : model) ASSERT_TRUE(remote_only.contains(k)) << k;
        expect_cache_coherent(*x.reg.region, *x.mem);
    }
}

TEST(WriteBackDirtySplitOffload, ByteStringLostAnswerIsSettledByRemoteMemory) {
    WbFixture x;
    x.t->dirty_split = true;
    auto tp = x.write_back_tree<tree::SlottedTree>();
    tree::SlottedTree& t = *tp;
    std::set<std::string> model;
    auto key = [](int i) { return "order-" + std::to_string(i * 104729 % 1000003); };
    for (int i = 0; i < 1000; i++) ASSERT_EQ(t.insert(key(i)), model.insert(key(i)).second);
    x.handle.flush_frames(x.dirty_frames());
    DurableAt at(100);
    int lost = 0;
    for (int i = 1000; i < 4000; i++) {
        const uint64_t s0 = stats().dirty_splits.load();
        if (i % 7 == 0) x.t->lose_dirty_split = 1 + (i / 7) % 2;  // its answer lost, or the request
        bool threw = false;
        try {
            t.insert(key(i), 500);
        } catch (const Error&) {
            threw = true;
            lost++;
        }
        x.t->lose_dirty_split = 0;
        if (threw) ASSERT_NO_THROW(t.insert(key(i), 500)) << "the retry";  // (the caller's retry)
        model.insert(key(i));
        (void)s0;
    }
    EXPECT_GT(lost, 0) << "no dirty split was lost";
    for (const std::string& k : model) ASSERT_TRUE(t.contains(k)) << k;
    g_durable = 500;
    x.handle.flush_frames(x.dirty_frames());
    tree::SlottedTree remote_only(*x.mem, 0, x.ns);
    EXPECT_EQ(remote_only.check().entries, model.size());
    for (const std::string& k : model) ASSERT_TRUE(remote_only.contains(k)) << k;
    expect_cache_coherent(*x.reg.region, *x.mem);
}

// Fills the leaf of `around` with uncovered entries until the next insert
// splits it: returns that next key (not inserted).
EntryKey fill_leaf(DirtyTree& d, int64_t around) {
    tree::BTree& t = *d.tp;
    const uint64_t splits0 = stats().dirty_splits.load();
    for (int i = 1; i < 4 * static_cast<int>(kLeafCapacity); i++) {
        EntryKey k = K(around, static_cast<uint32_t>(i), 3);
        if (i > 1 && stats().dirty_splits.load() > splits0) {
            ADD_FAILURE() << "filled past a split";
            return k;
        }
        Node img;
        size_t in_leaf = 0;
        // the cached frame of the key's leaf decides: full means the next insert splits
        d.x.reg.region->table().for_each([&](GAddr, uint32_t f) {
            if (f == cache::MappingTable::kIoInProgress) return;
            d.x.reg.region->copy_unswizzled(f, img);
            if (img.level == 0 && !img.is_deleted() && compare_keys(img.low, k) <= 0 &&
                (img.high.cls == kPosInf || compare_keys(k, img.high) < 0))
                in_leaf = img.count;
        });
        if (in_leaf == kLeafCapacity) return k;
        EXPECT_TRUE(t.insert(k, 500));
        d.model.insert(k);
    }
    ADD_FAILURE() << "the leaf never filled";
    return K(around, 0, 3);
}

// The split runs but its answer is lost: remote memory shows it, so the
// frame takes its half and the sibling its frame, both dirty; the insert
// reports the error. Lost before it runs: the frame stays as it was.
TEST(WriteBackDirtySplitOffload, LostAnswerIsSettledByRemoteMemory) {
    for (int lose : {1, 2}) {
        SCOPED_TRACE(lose == 1 ? "answer lost" : "request lost");
        DirtyTree d(600, 7 + lose);
        const std::set<EntryKey> written = d.model;
        DurableAt at(100);
        const EntryKey k = fill_leaf(d, 200001);
        const uint64_t splits0 = stats().dirty_splits.load();
        d.x.t->lose_dirty_split = lose;
        try {
            d.tp->insert(k, 500);
            ADD_FAILURE() << "the lost split did not fail the insert";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
        }
        EXPECT_EQ(d.x.t->lose_dirty_split.load(), 0) << "the split did not go to the memory node";
        EXPECT_EQ(stats().dirty_splits.load(), splits0);
        if (lose == 1) d.model.insert(k);  // in the frame's halves
        EXPECT_EQ(scan_all(*d.tp, KMin(-1), KMax(1 << 30), false), all_of(d.model));
        tree::BTree remote_only(*d.x.mem, 0, d.x.ns);
        EXPECT_EQ(remote_only.check().entries, written.size()) << "an uncovered entry reached remote memory";
        EXPECT_EQ(d.tp->insert(k, 500), lose == 2);  // again: now it goes in (or is there)
        d.model.insert(k);
        g_durable = 500;
        expect_flushed_remote_holds(d.x, d.model);
    }
}

// The memory node's side: a request whose sibling block is not the tree's,
// or whose description of the leaf is not what remote memory holds, answers
// "restart" and changes nothing; a separator outside the leaf's fences is a
// protocol error that changes nothing.
TEST(WriteBackDirtySplitOffload, RequestNotDescribingTheLeafChangesNothing) {
    DirtyTree d(2000);
    const GAddr leaf = leaf_for(*d.x.mem, d.tp->root(), K(100000, 0, 0));
    Node before;
    d.x.mem->read(leaf, &before, kNodeSize);
    ASSERT_GT(before.count, 2u);
    const EntryKey mid = before.leaf[before.count / 2];
    auto request = [&](const EntryKey& sep, uint64_t version, uint64_t sibling, const EntryKey& low) {
        std::vector<uint8_t> req(net::kOffloadDirtySplitRequest);
        net::OffloadRequest r = leaf_insert_request(leaf, before.tree_id, sep);
        const net::OffloadSplitExt ext{d.x.ns, 0};
        net::OffloadDirtySplitExt dx{};
        dx.version = version;
        dx.right = before.right;
        dx.sibling = sibling;
        std::memcpy(dx.low, &low, sizeof dx.low);
        std::memcpy(dx.high, &before.high, sizeof dx.high);
        std::memcpy(req.data(), &r, sizeof r);
        std::memcpy(req.data() + sizeof r, &ext, sizeof ext);
        std::memcpy(req.data() + sizeof r + sizeof ext, &dx, sizeof dx);
        return d.x.mem->node(0).rpc(net::kOpOffloadDirtySplit, req.data(), static_cast<uint32_t>(req.size()));
    };
    auto unchanged = [&] {
        Node after;
        d.x.mem->read(leaf, &after, kNodeSize);
        EXPECT_EQ(std::memcmp(&after, &before, kNodeSize), 0) << "the leaf changed";
    };
    auto alloc = [&](uint64_t ns) {
        const uint64_t q[2] = {ns, kNodeSize};
        std::vector<uint8_t> r = d.x.mem->node(0).rpc(net::kOpAlloc, q, sizeof q);
        uint64_t off = 0;
        EXPECT_EQ(r.size(), sizeof off);
        std::memcpy(&off, r.data(), sizeof off);
        return off;
    };
    const uint64_t spare = alloc(d.x.ns);                              // the tree's block
    const uint64_t elsewhere = alloc(ns_create(d.x.mem->node(0)));     // another namespace's
    std::vector<uint8_t> resp = request(mid, before.body_version, elsewhere, before.low);
    ASSERT_GE(resp.size(), sizeof(net::OffloadReply) + sizeof(net::OffloadSpareTail));
    EXPECT_EQ(resp[0], net::kOffloadRestart);
    unchanged();
    EntryKey other_low = before.low;
    other_low.value ^= 1;
    resp = request(mid, before.body_version, spare, other_low);
    EXPECT_EQ(resp[0], net::kOffloadRestart);
    unchanged();
    resp = request(mid, before.body_version + 1, spare, before.low);  // the frame ahead of remote memory
    EXPECT_EQ(resp[0], net::kOffloadRestart);
    unchanged();
    EXPECT_THROW(request(before.low, before.body_version, spare, before.low), Error);
    unchanged();
    // The same request, describing the leaf: split at `mid` into the spare.
    resp = request(mid, before.body_version, spare, before.low);
    ASSERT_EQ(resp[0], net::kOffloadSplit);
    Node lo, hi;
    d.x.mem->read(leaf, &lo, kNodeSize);
    d.x.mem->read(make_gaddr(0, spare), &hi, kNodeSize);
    EXPECT_EQ(lo.right, make_gaddr(0, spare));
    EXPECT_EQ(compare_keys(lo.high, mid), 0);
    EXPECT_EQ(compare_keys(hi.low, mid), 0);
    EXPECT_EQ(lo.count + hi.count, before.count);
    EXPECT_EQ(lo.body_version, before.body_version + 1);
    EXPECT_EQ(d.tp->check().entries, d.model.size());
}

}  // namespace
