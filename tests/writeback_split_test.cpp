// Splits of dirty leaves whose entries remote memory may not take yet
// (src/README.md "Write-back mode", W13; tree/writeback_split.cpp): with the
// durable position below the entries' LSN, inserts that split full dirty
// leaves do not wait (no NeedDurable), remote memory stays a valid tree that
// holds exactly the entries written back before (no stray), the cache holds
// all of them, and once the LSN is covered a flush makes remote memory equal
// the model. A lost answer to the split's publish is settled by what remote
// memory shows.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <thread>

#include "cache/cache.h"
#include "cache/region.h"
#include "common/stats.h"
#include "tree/journal.h"
#include "tree_test_util.h"
#include "writeback_test_util.h"

using namespace dex;
using namespace dex::testing;

namespace {


// After a full flush every frame holds what remote memory holds. Unlike
// expect_cache_coherent, a frame's version may trail the remote one by the
// single write-backs (cooling, a busy frame) that do not copy it back (W2).
void expect_flushed_frames_match(cache::CacheRegion& r, RemoteMemory& mem) {
    size_t bad = 0;
    r.table().for_each([&](GAddr g, uint32_t f) {
        if (f == cache::MappingTable::kIoInProgress) return;
        Node cached, remote;
        r.copy_unswizzled(f, cached);
        mem.read(g, &remote, kNodeSize);
        const size_t body = offsetof(Node, tree_id);  // past lock, checksum and version
        if (r.header(f).dirty.load() || cached.body_version > remote.body_version ||
            std::memcmp(reinterpret_cast<char*>(&cached) + body, reinterpret_cast<char*>(&remote) + body,
                        tree::used_bytes(remote) - body) != 0)
            if (bad++ < 5) ADD_FAILURE() << "frame " << f << " differs from remote node " << tree::hex_addr(g);
    });
}

TEST(WriteBackDirtySplit, UncoveredLeavesSplitWithoutWritingTheirEntries) {
    WbFixture x;
    std::unique_ptr<tree::BTree> tp = x.write_back_tree();
    tree::BTree& t = *tp;
    std::set<EntryKey> written, model;
    std::mt19937_64 rng(11);
    // Covered entries (no LSN): split and written as before.
    for (int i = 0; i < 3000; i++) {
        EntryKey k = K(static_cast<int64_t>(rng() % 200000), static_cast<uint32_t>(i), 1);
        ASSERT_EQ(t.insert(k), model.insert(k).second);
    }
    expect_flushed_remote_holds(x, model);
    written = model;

    // Entries whose heap WAL is not durable (LSN 500, durable 100): every
    // split of their leaves must keep them out of remote memory.
    DurableAt at(100);
    const uint64_t splits0 = stats().dirty_splits.load();
    tree::BTree remote_only(*x.mem, 0, x.ns);
    uint64_t insert_trips = 0, split_inserts = 0, last_ds = stats().dirty_splits.load();
    for (int i = 0; i < 6000; i++) {
        EntryKey k = K(static_cast<int64_t>(rng() % 200000), static_cast<uint32_t>(10000 + i), 2);
        bool r = false;
        const uint64_t before = x.t->trips;
        ASSERT_NO_THROW(r = t.insert(k, 500)) << "insert " << i << " waited for WAL";
        const uint64_t ds = stats().dirty_splits.load();
        if (ds != last_ds) insert_trips += x.t->trips - before, split_inserts++;
        last_ds = ds;
        ASSERT_EQ(r, model.insert(k).second);
        // The split of a clean (or covered) full leaf writes through, the new
        // entry journaled: remote memory has it from then on.
        if (remote_only.contains(k)) written.insert(k);
    }
    EXPECT_LT(written.size(), 3000u + 100u) << "most dirty splits wrote through";
    // and a few deletes in place
    int deleted = 0;
    for (auto it = model.begin(); it != model.end() && deleted < 300;) {
        if ((it->block % 13) == 0) {
            ASSERT_EQ(t.remove(&*it, 1), 1u);
            it = model.erase(it);
            deleted++;
        } else {
            ++it;
        }
    }
    const uint64_t dirty_splits = stats().dirty_splits.load() - splits0;
    EXPECT_GT(dirty_splits, 50u) << "6000 inserts into 3000 entries split few dirty leaves";
    // Round trips of such a split: the sibling's allocation, the lock with
    // the reads, the publish with the parent's read, the parent's lock and
    // publish -- five, a few more where a parent splits too.
    EXPECT_EQ(split_inserts, dirty_splits);
    EXPECT_LE(insert_trips, 11 * split_inserts / 2) << split_inserts << " inserts that split a dirty leaf";
    EXPECT_EQ(scan_all(t, KMin(-(1 << 21)), KMax(1 << 30), false), all_of(model)) << "the cache lacks entries";
    EXPECT_EQ(scan_all(t, KMin(-(1 << 21)), KMax(1 << 30), true).size(), model.size());

    // Remote memory alone: a valid tree holding exactly what was written
    // back before, split into more leaves (the structure went through).
    tree::TreeInfo c = remote_only.check();
    EXPECT_EQ(c.entries, written.size());
    EXPECT_EQ(scan_all(remote_only, KMin(-(1 << 21)), KMax(1 << 30), false), all_of(written));

    // Covered now: a flush makes remote memory equal the model.
    g_durable = 500;
    expect_flushed_remote_holds(x, model);
    expect_cache_coherent(*x.reg.region, *x.mem);
}

// The publish runs but its answer is lost: remote memory shows the split, so
// the frame takes its half and the sibling its frame, both still dirty; the
// insert reports the error, and nothing is lost or written early.
TEST(WriteBackDirtySplit, LostPublishAnswerIsSettledByRemoteMemory) {
    WbFixture x;
    std::unique_ptr<tree::BTree> tp = x.write_back_tree();
    tree::BTree& t = *tp;
    std::set<EntryKey> model;
    for (int i = 0; i < 200; i++) {
        ASSERT_TRUE(t.insert(K(2 * i, 1, 1)));
        model.insert(K(2 * i, 1, 1));
    }
    expect_flushed_remote_holds(x, model);
    const std::set<EntryKey> written = model;
    DurableAt at(100);
    const uint64_t splits0 = stats().dirty_splits.load();
    bool lost = false;
    for (int i = 0; i < 400 && !lost; i++) {
        EntryKey k = K(2 * i + 1, 2, 2);
        if (stats().dirty_splits.load() > splits0) x.t->lose_publish = true;  // after one dirty split went fine
        try {
            ASSERT_TRUE(t.insert(k, 500));
        } catch (const Error& e) {
            ASSERT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
            lost = true;
        }
        model.insert(k);  // (in the frame either way: the split ran)
    }
    ASSERT_TRUE(lost) << "no split's publish was lost";
    EXPECT_EQ(scan_all(t, KMin(-1), KMax(1 << 20), false), all_of(model));
    tree::BTree remote_only(*x.mem, 0, x.ns);
    EXPECT_EQ(remote_only.check().entries, written.size());
    g_durable = 500;
    expect_flushed_remote_holds(x, model);
}

// Byte-string trees split their dirty leaves the same way.
TEST(WriteBackDirtySplit, ByteStringTree) {
    WbFixture x;
    auto tp = x.write_back_tree<tree::SlottedTree>();
    tree::SlottedTree& t = *tp;
    std::set<std::string> written, model;
    auto key = [](int i) { return "customer-" + std::to_string(i * 7919 % 100003) + std::string(i % 17, 'x'); };
    for (int i = 0; i < 1500; i++) ASSERT_EQ(t.insert(key(i)), model.insert(key(i)).second);
    x.handle.flush_frames(x.dirty_frames());
    written = model;
    DurableAt at(100);
    const uint64_t splits0 = stats().dirty_splits.load();
    tree::SlottedTree remote_only(*x.mem, 0, x.ns);
    for (int i = 1500; i < 5000; i++) {
        bool r = false;
        ASSERT_NO_THROW(r = t.insert(key(i), 500)) << "insert " << i << " waited for WAL";
        ASSERT_EQ(r, model.insert(key(i)).second);
        // The split of a clean (or covered) full leaf writes through, the new
        // entry journaled: remote memory has it from then on.
        if (remote_only.contains(key(i))) written.insert(key(i));
    }
    EXPECT_GT(stats().dirty_splits.load(), splits0);
    for (const std::string& k : model) ASSERT_TRUE(t.contains(k)) << k;
    EXPECT_EQ(remote_only.check().entries, written.size());
    for (const std::string& k : model)
        if (!written.count(k)) EXPECT_FALSE(remote_only.contains(k)) << k << " reached remote memory";
    g_durable = 500;
    x.handle.flush_frames(x.dirty_frames());
    EXPECT_TRUE(x.dirty_frames().empty());
    EXPECT_EQ(remote_only.check().entries, model.size());
    for (const std::string& k : model) ASSERT_TRUE(remote_only.contains(k)) << k;
}

// One backend of a write-back compute server: its own connection and Cache
// handle on the shared region, whose write-back callbacks refuse frames whose
// lsn is not durable yet (as ComputeProcess's do, W6).
struct WbBackend {
    std::unique_ptr<RemoteMemory> mem;
    cache::Cache handle;
    std::unique_ptr<tree::BTree> tree;
    WbBackend(memnode::Engine& e, Region& r, uint64_t ns, uint64_t seed) : mem(make_mem(e)), handle(*r.region, seed) {
        set_write_backs(handle, *mem, *r.region, true);
        tree::TreeOptions o;
        o.cache = &handle;
        tree = std::make_unique<tree::BTree>(*mem, 0, ns, o);
        tree->set_write_back(true, [] { return true; });
    }
};

// Backends of one compute server insert (row LSNs from a shared counter)
// while a "worker" raises the durable position behind them and writes back
// what it covers, and readers scan: dirty splits, covered splits, write-backs
// and evictions interleave. No reader misses a key that was there before,
// every writer finds its own keys, and in the end remote memory equals the
// model.
TEST(WriteBackDirtySplit, ConcurrentWritersWorkerAndReaders) {
    auto engine = make_engine(256ull << 20);
    auto setup = make_mem(*engine);
    const uint64_t ns = ns_create(setup->node(0));
    Region reg(1024);
    std::atomic<uint64_t> next_lsn{1000};
    DurableAt at(1000);
    std::set<EntryKey> keep;
    {
        WbBackend base(*engine, reg, ns, 3);
        base.tree->init_empty();
        for (int v = 0; v < 8000; v++) {
            EntryKey k = K(v * 16, 0, 1);
            ASSERT_TRUE(base.tree->insert(k));
            keep.insert(k);
        }
    }
    const uint64_t splits0 = stats().dirty_splits.load();
    constexpr int kWriters = 3;
    std::atomic<bool> stop{false};
    std::atomic<int> failures{0};
    std::atomic<uint64_t> waits{0}, scans{0};
    std::vector<std::set<EntryKey>> mine(kWriters);
    std::vector<std::thread> th;
    for (int w = 0; w < kWriters; w++)
        th.emplace_back([&, w] {
            WbBackend b(*engine, reg, ns, 100 + w);
            std::mt19937_64 rng(40 + w);
            for (int i = 0; i < 20000; i++) {
                EntryKey k = K(static_cast<int64_t>(rng() % 128000), static_cast<uint32_t>(w + 1),
                               static_cast<uint16_t>(1 + i % 60000));
                const bool fresh = mine[w].insert(k).second;
                for (;;) {
                    try {
                        if (b.tree->insert(k, next_lsn.fetch_add(1)) != fresh) failures++;
                        break;
                    } catch (const tree::NeedDurable&) {  // no frame for a sibling: the old wait
                        waits++;
                        std::this_thread::sleep_for(std::chrono::microseconds(200));
                    }
                }
                if (i % 5 == 0 && !b.tree->contains(k)) failures++;
            }
        });
    th.emplace_back([&] {  // the worker: durable trails the newest LSN; writes back what that covers
        WbBackend b(*engine, reg, ns, 77);
        while (!stop.load()) {
            const uint64_t n = next_lsn.load();
            g_durable = n > 300 ? n - 300 : 0;
            std::vector<uint32_t> dirty;
            reg.region->for_each_frame([&](const cache::FrameInfo& i) {
                if (i.dirty && i.gaddr != kNullGAddr) dirty.push_back(i.frame);
            });
            b.handle.flush_frames(dirty);
            std::this_thread::sleep_for(std::chrono::microseconds(500));
        }
    });
    for (int s = 0; s < 2; s++)
        th.emplace_back([&, s] {
            WbBackend b(*engine, reg, ns, 90 + s);
            while (!stop.load()) {
                auto got = scan_all(*b.tree, neg_inf_key(), pos_inf_key(), s == 1);
                if (s == 1) std::reverse(got.begin(), got.end());
                if (!std::is_sorted(got.begin(), got.end()) ||
                    std::adjacent_find(got.begin(), got.end()) != got.end()) {
                    failures++;
                    ADD_FAILURE() << "scan out of order or with a duplicate";
                }
                for (const EntryKey& k : keep)
                    if (!std::binary_search(got.begin(), got.end(), k)) {
                        failures++;
                        ADD_FAILURE() << "scan missed " << tree::key_str(k);
                        break;
                    }
                scans++;
            }
        });
    for (int w = 0; w < kWriters; w++) th[w].join();
    stop = true;
    for (size_t i = kWriters; i < th.size(); i++) th[i].join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_GT(scans.load(), 0u);
    EXPECT_GT(stats().dirty_splits.load() - splits0, 100u) << "waits " << waits.load();
    std::printf("[ info     ] dirty splits %llu, waits for a frame %llu, scans %llu, write-backs %llu\n",
                (unsigned long long)(stats().dirty_splits.load() - splits0), (unsigned long long)waits.load(),
                (unsigned long long)scans.load(), (unsigned long long)stats().write_backs.load());

    std::set<EntryKey> model = keep;
    for (auto& m : mine) model.insert(m.begin(), m.end());
    g_durable = UINT64_MAX;
    WbBackend last(*engine, reg, ns, 5);
    std::vector<uint32_t> dirty;
    reg.region->for_each_frame([&](const cache::FrameInfo& i) {
        if (i.dirty && i.gaddr != kNullGAddr) dirty.push_back(i.frame);
    });
    last.handle.flush_frames(dirty);
    EXPECT_EQ(scan_all(*last.tree, neg_inf_key(), pos_inf_key(), false), all_of(model));
    tree::BTree remote_only(*setup, 0, ns);
    EXPECT_EQ(remote_only.check().entries, model.size());
    EXPECT_EQ(scan_all(remote_only, neg_inf_key(), pos_inf_key(), false), all_of(model));
    expect_flushed_frames_match(*reg.region, *setup);
}

// W14: a dirty leaf that became dirty before the drain position takes no
// more in-place inserts: uncovered, the insert waits (NeedDurable) instead of
// keeping it dirty; covered, it writes the leaf through, clean. A leaf that
// became dirty after the position is changed in place as before.
TEST(WriteBackDirtySplit, DrainingLeafIsWrittenNotKeptDirty) {
    WbFixture x;
    std::unique_ptr<tree::BTree> tp = x.write_back_tree();
    tree::BTree& t = *tp;
    // (TreeOptions::LogPosition is a plain function: the position lives in a static)
    static std::atomic<uint64_t> log_pos;
    log_pos = 10;
    t.set_log_position([] { return log_pos.load(); });
    DurableAt at(100);
    std::set<EntryKey> model;
    for (int i = 0; i < 400; i++) {
        ASSERT_TRUE(t.insert(K(i, 1, 1), 500));
        model.insert(K(i, 1, 1));
    }
    ASSERT_FALSE(x.dirty_frames().empty());
    x.reg.region->raise_drain_before(20);  // every leaf dirty so far (dirty since 10)
    const EntryKey k = K(200, 2, 2);
    try {
        t.insert(k, 600);
        ADD_FAILURE() << "an uncovered draining leaf took an insert in place";
    } catch (const tree::NeedDurable& e) {
        EXPECT_EQ(e.lsn(), 500u);
    }
    tree::BTree remote_only(*x.mem, 0, x.ns);
    EXPECT_EQ(remote_only.check().entries, 0u) << "an uncovered entry reached remote memory";
    g_durable = 600;
    ASSERT_TRUE(t.insert(k, 600));  // covered: written through with the leaf, which turns clean
    model.insert(k);
    EXPECT_TRUE(remote_only.contains(k));
    EXPECT_TRUE(remote_only.contains(K(200, 1, 1)));
    size_t dirty_now = x.dirty_frames().size();
    // A leaf dirtied after the drain position: in place again.
    log_pos = 30;
    const EntryKey m = K(201, 3, 3);
    const uint64_t dirty0 = stats().dirty_updates.load();
    ASSERT_TRUE(t.insert(m, 700));
    model.insert(m);
    EXPECT_EQ(stats().dirty_updates.load(), dirty0 + 1);
    EXPECT_FALSE(remote_only.contains(m));
    EXPECT_EQ(x.dirty_frames().size(), dirty_now + 1);
    g_durable = 700;
    expect_flushed_remote_holds(x, model);
}

}  // namespace
