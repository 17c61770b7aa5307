// Dead entries removed by their memory node (OFFLOAD_KILL; src/README.md
// "Dead-entry hints"): a write-through tree's remove_if_unchanged in one
// round trip where its own way takes two or three -- only at the version the
// scan judged (an insert since, a reuse of the same entry: nothing goes), or
// at any version for a present-only kill; a locked leaf answers "restart"
// and changes nothing; a malformed request is refused whole; a node without
// the capability gets none. Fixed and slotted trees.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "cache/cache.h"
#include "cache/region.h"
#include "common/stats.h"
#include "tree/offload_policy.h"
#include "tree_test_util.h"

namespace dex::testing {
namespace {

// A memory node as an older one looks: offloaded writes, no OFFLOAD_KILL.
class NoKill final : public InProcForwarder {
public:
    explicit NoKill(memnode::Engine& e) : InProcForwarder(e) {}
    bool offload_writes_allowed() override { return in_.offload_writes_allowed(); }
    bool offload_bytes_allowed() override { return in_.offload_bytes_allowed(); }
};

// One memory node, a write-through tree of layout Tree with a node cache
// (every leaf admitted) and offloading on; `kill`: the node announces
// OFFLOAD_KILL.
template <class Tree>
struct KillSetup {
    std::unique_ptr<memnode::Engine> engine = make_engine(64 << 20);
    std::unique_ptr<RemoteMemory> mem;
    uint64_t ns = 0;
    Region reg{1024};  // every leaf admitted
    std::unique_ptr<cache::Cache> c;
    tree::OffloadPolicy pol;
    std::unique_ptr<Tree> t;

    explicit KillSetup(bool kill) {
        std::vector<std::unique_ptr<Transport>> v;
        if (kill)
            v.push_back(std::make_unique<InProcTransport>(*engine));
        else
            v.push_back(std::make_unique<NoKill>(*engine));
        mem = std::make_unique<RemoteMemory>(std::move(v));
        ns = ns_create(mem->node(0));
        c = std::make_unique<cache::Cache>(*reg.region, 9);
        pol.set_mode(tree::OffloadMode::kOn);
        tree::TreeOptions o;
        o.cache = c.get();
        o.offload = &pol;
        t = std::make_unique<Tree>(*mem, 0, ns, o);
        t->init_empty();
    }
    // The first scan batch at or above `lo`, with its leaf and version.
    template <class Key>
    std::vector<Key> first_batch(const Key& lo, const Key& hi, GAddr* leaf, uint64_t* version) {
        std::vector<Key> b;
        auto s = t->scan(lo, hi, false);
        EXPECT_TRUE(s->next(b));
        *leaf = s->leaf();
        *version = s->leaf_version();
        return b;
    }
};

uint64_t trips() { return stats().round_trips.load(); }

// Fixed layout: 15 of 20 entries at the scanned version go in one round trip
// (the cached leaf refreshed from the reply); a node without the capability
// takes two or more. After an insert into the leaf nothing goes (one round
// trip, counted as skipped); a present-only kill then removes what is there.
TEST(OffloadKill, FixedLeafAtTheScannedVersion) {
    for (bool kill : {true, false}) {
        KillSetup<tree::BTree> s(kill);
        std::set<EntryKey> model;
        for (uint16_t i = 1; i <= 20; i++) {
            ASSERT_TRUE(s.t->insert(K(7, 1, i)));
            model.insert(K(7, 1, i));
        }
        GAddr leaf = 0;
        uint64_t ver = 0;
        std::vector<EntryKey> b = s.first_batch(KMin(7), KMax(7), &leaf, &ver);
        ASSERT_EQ(b.size(), 20u);
        std::vector<EntryKey> dead(b.begin(), b.begin() + 15);
        const uint64_t t0 = trips(), o0 = stats().offloads.load();
        EXPECT_EQ(s.t->remove_if_unchanged(leaf, ver, dead.data(), dead.size()), 15u);
        const uint64_t used = trips() - t0;
        for (const EntryKey& k : dead) model.erase(k);
        if (kill) {
            EXPECT_EQ(used, 1u) << "one OFFLOAD_KILL";
            EXPECT_EQ(stats().offloads.load() - o0, 1u);
        } else {
            EXPECT_GE(used, 2u) << "lock (with the read), publish";
        }
        expect_cache_coherent(s.c->region(), *s.mem);
        EXPECT_EQ(scan_all(*s.t, neg_inf_key(), pos_inf_key(), false), std::vector<EntryKey>(model.begin(), model.end()));
        // A stamp that an insert made stale: nothing goes.
        b = s.first_batch(KMin(7), KMax(7), &leaf, &ver);
        ASSERT_TRUE(s.t->insert(K(7, 2, 1)));
        model.insert(K(7, 2, 1));
        const uint64_t sk0 = stats().kills_skipped.load(), t1 = trips();
        EXPECT_EQ(s.t->remove_if_unchanged(leaf, ver, b.data(), 2), 0u);
        EXPECT_EQ(stats().kills_skipped.load() - sk0, 2u);
        if (kill) EXPECT_EQ(trips() - t1, 1u);
        // Present-only (a deferred kill): whatever version the leaf has now.
        EXPECT_EQ(s.t->remove_if_unchanged(leaf, ver, b.data(), 2, false, {}, 0xFFFFFFFFu, 0, 0, true), 2u);
        model.erase(b[0]);
        model.erase(b[1]);
        expect_cache_coherent(s.c->region(), *s.mem);
        EXPECT_EQ(s.t->check().entries, model.size());
        EXPECT_EQ(scan_all(*s.t, neg_inf_key(), pos_inf_key(), false), std::vector<EntryKey>(model.begin(), model.end()));
    }
}

// Slotted layout: the same with byte-string entries.
TEST(OffloadKill, SlottedLeafAtTheScannedVersion) {
    for (bool kill : {true, false}) {
        KillSetup<tree::SlottedTree> s(kill);
        std::set<std::string> model;
        for (uint32_t i = 0; i < 20; i++) {
            ASSERT_TRUE(s.t->insert(email_entry(i)));
            model.insert(email_entry(i));
        }
        GAddr leaf = 0;
        uint64_t ver = 0;
        std::vector<std::string> b = s.first_batch(tree::SlottedLayout::neg_inf(), tree::SlottedLayout::pos_inf(), &leaf, &ver);
        ASSERT_EQ(b.size(), 20u);
        std::vector<std::string> dead(b.begin() + 2, b.begin() + 12);
        const uint64_t t0 = trips();
        EXPECT_EQ(s.t->remove_if_unchanged(leaf, ver, dead.data(), dead.size()), 10u);
        for (const std::string& k : dead) model.erase(k);
        if (kill)
            EXPECT_EQ(trips() - t0, 1u);
        else
            EXPECT_GE(trips() - t0, 2u);
        ASSERT_TRUE(s.t->insert(email_entry(100)));  // the stamp is stale now
        model.insert(email_entry(100));
        EXPECT_EQ(s.t->remove_if_unchanged(leaf, ver, b.data(), 2), 0u);
        expect_slotted_tree_is(*s.t, model, s.c->region(), *s.mem);
    }
}

// The raw request: a locked leaf answers "restart" and changes nothing; a
// malformed request (no entry, a fixed entry that is not 16 bytes, bytes
// after the last entry, a leaf outside the pool) is refused whole; a
// request for the other layout or another tree removes nothing.
TEST(OffloadKill, LockedLeafAndMalformedRequestsChangeNothing) {
    KillSetup<tree::BTree> s(true);
    for (uint16_t i = 1; i <= 10; i++) ASSERT_TRUE(s.t->insert(K(7, 1, i)));
    GAddr leaf = 0;
    uint64_t ver = 0;
    std::vector<EntryKey> b = s.first_batch(KMin(7), KMax(7), &leaf, &ver);
    auto request = [&](uint64_t version, uint32_t tree_id, uint8_t slotted, uint16_t count, size_t per) {
        net::OffloadKillHeader h{};
        h.leaf = gaddr_offset(leaf);
        h.version = version;
        h.tree_id = tree_id;
        h.slotted = slotted;
        h.count = count;
        std::vector<uint8_t> p(sizeof h);
        std::memcpy(p.data(), &h, sizeof h);
        for (uint16_t i = 0; i < count; i++) net::append_offload_kill_entry(p, &b[i], static_cast<uint16_t>(per));
        return p;
    };
    InProcTransport tr(*s.engine);
    ASSERT_TRUE(tr.offload_kill_allowed());
    auto status = [&](const std::vector<uint8_t>& p) {
        std::vector<uint8_t> r = tr.rpc(net::kOpOffloadKill, p.data(), static_cast<uint32_t>(p.size()));
        EXPECT_GE(r.size(), sizeof(net::OffloadReply) + sizeof(net::OffloadKillTail));
        return r.empty() ? 0xff : r[0];
    };
    auto refused = [&](const std::vector<uint8_t>& p) {
        return code_of([&] { tr.rpc(net::kOpOffloadKill, p.data(), static_cast<uint32_t>(p.size())); });
    };
    EXPECT_EQ(refused(request(ver, s.t->tree_id(), 0, 0, 16)), ErrorCode::kProtocol) << "no entry";
    EXPECT_EQ(refused(request(ver, s.t->tree_id(), 0, 2, 15)), ErrorCode::kProtocol) << "a 15-byte fixed entry";
    std::vector<uint8_t> extra = request(ver, s.t->tree_id(), 0, 2, 16);
    extra.push_back(0);
    EXPECT_EQ(refused(extra), ErrorCode::kProtocol) << "a byte after the last entry";
    std::vector<uint8_t> outside = request(ver, s.t->tree_id(), 0, 2, 16);
    const uint64_t far = s.engine->pool_bytes() + 4096;
    std::memcpy(outside.data(), &far, sizeof far);
    EXPECT_EQ(refused(outside), ErrorCode::kProtocol) << "a leaf outside the pool";
    EXPECT_EQ(status(request(ver, s.t->tree_id() + 1, 0, 2, 16)), net::kOffloadNoop) << "another tree's";
    EXPECT_EQ(status(request(ver, s.t->tree_id(), 1, 2, 16)), net::kOffloadNoop) << "the other layout";
    // Locked by someone else: restart, nothing removed.
    const uint64_t off = gaddr_offset(leaf);
    const uint64_t free_word = make_lock_word(ver, 0, false);
    ASSERT_EQ(tr.cas(off, free_word, make_lock_word(ver, 4242, true)), free_word);
    EXPECT_EQ(status(request(ver, s.t->tree_id(), 0, 2, 16)), net::kOffloadRestart);
    ASSERT_EQ(tr.cas(off, make_lock_word(ver, 4242, true), free_word), make_lock_word(ver, 4242, true));
    tree::BTree probe(*s.mem, 0, s.ns);  // uncached: remote memory
    EXPECT_EQ(probe.check().entries, 10u);
    // Well formed and unlocked: both go, the image comes back.
    std::vector<uint8_t> ok = request(ver, s.t->tree_id(), 0, 2, 16);
    std::vector<uint8_t> r = tr.rpc(net::kOpOffloadKill, ok.data(), static_cast<uint32_t>(ok.size()));
    ASSERT_EQ(r.size(), sizeof(net::OffloadReply) + sizeof(net::OffloadKillTail) + kNodeSize);
    EXPECT_EQ(r[0], net::kOffloadDone);
    net::OffloadKillTail tail;
    std::memcpy(&tail, r.data() + sizeof(net::OffloadReply), sizeof tail);
    EXPECT_EQ(tail.removed, 2u);
    EXPECT_EQ(probe.check().entries, 8u);
    EXPECT_FALSE(probe.contains(b[0]));
}

}  // namespace
}  // namespace dex::testing
