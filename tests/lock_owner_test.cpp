// Remote-lock ownership (src/README.md "Synchronization (remote)"):
// - the lock word holds the holder's whole client id, so a waiter asks the
//   memory node about exactly that connection (before: 23 bits of a 32-bit id,
//   so a waiter could steal a live holder's lock, or never steal a dead one's);
// - an operation whose connection was lost while it held locks stops before
//   writing, and never releases through a newer connection;
// - a memory node that restarted under an operation in progress fails the
//   operation instead of taking its writes into the new, unrelated pool.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "common/stats.h"
#include "tree/node_io.h"
#include "tree_test_util.h"

namespace dex::testing {
namespace {

using tree::BTree;

constexpr uint64_t kOld23BitLimit = 1ull << 23;

struct Client {
    std::unique_ptr<RemoteMemory> mem;
    std::unique_ptr<BTree> tree;
    Client(memnode::Engine& e, uint64_t ns, int timeout_ms = 30000) : mem(make_mem(e)) {
        tree::TreeOptions o;
        o.op_timeout_ms = timeout_ms;
        tree = std::make_unique<BTree>(*mem, 0, ns, o);
    }
    InProcTransport& transport() { return dynamic_cast<InProcTransport&>(mem->node(0)); }
};

// Lock the leaf covering k through `c`'s connection, by the protocol (CAS on a
// validated snapshot). Returns the leaf and its pre-lock word.
GAddr lock_leaf(Client& c, GAddr root, const EntryKey& k, uint64_t* word) {
    GAddr leaf = leaf_for(*c.mem, root, k);
    Node n;
    c.mem->read(leaf, &n, kNodeSize);
    uint64_t locked = make_lock_word(n.body_version, c.transport().client_id(), true);
    EXPECT_EQ(c.transport().cas(gaddr_offset(leaf), n.lock, locked), n.lock);
    if (word) *word = n.lock;
    return leaf;
}

struct Tree {
    std::unique_ptr<memnode::Engine> engine;
    std::unique_ptr<RemoteMemory> mem;
    uint64_t ns = 0;
    std::unique_ptr<BTree> base;
    explicit Tree(int keys) {
        engine = make_engine(64ull << 20);
        mem = make_mem(*engine);
        ns = ns_create(mem->node(0));
        base = std::make_unique<BTree>(*mem, 0, ns);
        base->init_empty();
        for (int i = 0; i < keys; i++) base->insert(K(i * 2, 1, 1));
    }
};

TEST(ExactLockOwner, LiveHolderWhoseIdNeedsMoreThan23BitsIsWaitedFor) {
    Tree t(500);
    // No client 5 exists; the holder is client 2^23 + 5 (5 in the old 23-bit field).
    t.engine->set_next_client_id(kOld23BitLimit + 5);
    Client holder(*t.engine, t.ns);
    ASSERT_EQ(holder.transport().client_id(), kOld23BitLimit + 5);
    uint64_t steals = stats().lock_steals.load();
    lock_leaf(holder, t.base->root(), K(101, 1, 1), nullptr);
    Client waiter(*t.engine, t.ns, 300);
    try {
        waiter.tree->insert(K(101, 1, 1));
        FAIL() << "the waiter wrote a leaf whose lock a live client holds";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
        // The timeout names the node and its live holder (how a stuck
        // client is found from the error alone).
        const std::string msg = e.what();
        EXPECT_NE(msg.find(tree::hex_addr(leaf_for(*t.mem, t.base->root(), K(101, 1, 1)))), std::string::npos) << msg;
        EXPECT_NE(msg.find("client " + std::to_string(kOld23BitLimit + 5)), std::string::npos) << msg;
    }
    EXPECT_EQ(stats().lock_steals.load(), steals) << "a live holder's lock was taken over";
}

TEST(ExactLockOwner, DeadHolderIsTakenOverAlthoughALiveClientHasItsLow23Bits) {
    Tree t(500);
    t.engine->set_next_client_id(7);
    Client bystander(*t.engine, t.ns);  // live client 7
    ASSERT_EQ(bystander.transport().client_id(), 7u);
    t.engine->set_next_client_id(kOld23BitLimit + 7);
    Client holder(*t.engine, t.ns);
    ASSERT_EQ(holder.transport().client_id(), kOld23BitLimit + 7);
    lock_leaf(holder, t.base->root(), K(101, 1, 1), nullptr);
    holder.transport().kill_session();  // the holder dies with the lock
    uint64_t steals = stats().lock_steals.load();
    Client waiter(*t.engine, t.ns, 2000);
    EXPECT_TRUE(waiter.tree->insert(K(101, 1, 1))) << "a dead holder's lock was never taken over";
    EXPECT_GT(stats().lock_steals.load(), steals);
    EXPECT_EQ(t.base->check().entries, 501u);
}

TEST(LostConnection, PublishThroughANewConnectionIsRefused) {
    Tree t(500);
    Client a(*t.engine, t.ns);
    tree::TreeOptions o;
    tree::NodeIO io(*a.mem, 0, o);
    GAddr leaf = leaf_for(*a.mem, t.base->root(), K(101, 1, 1));
    Node snap;
    ASSERT_EQ(io.read(leaf, snap, tree::Deadline(1000)), tree::NodeIO::Read::kOk);
    tree::Locks locks(io);
    tree::LockedNode* ln = locks.try_lock(leaf, snap);
    ASSERT_NE(ln, nullptr);
    // The connection holding the lock dies; the next read reconnects (new id).
    a.transport().kill_session();
    Node other;
    a.mem->read(t.base->root(), &other, kNodeSize);
    ASSERT_NE(a.transport().client_id(), lock_owner(ln->held_word));
    // A waiter takes the dead holder's lock over and inserts 101.
    Client w(*t.engine, t.ns, 2000);
    ASSERT_TRUE(w.tree->insert(K(101, 1, 1)));
    // The first operation goes on: its publish must not be written.
    ln->node.count = 0;  // a change that would destroy the leaf's entries
    try {
        locks.publish({ln});
        FAIL() << "a publish went out through a newer connection than the one holding the lock";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kUnreachable) << e.what();
    }
    EXPECT_TRUE(t.base->contains(K(101, 1, 1)));
    EXPECT_EQ(t.base->check().entries, 501u);
}

TEST(LostConnection, ALockIsNotReleasedThroughANewConnection) {
    Tree t(500);
    Client a(*t.engine, t.ns);
    tree::TreeOptions o;
    tree::NodeIO io(*a.mem, 0, o);
    GAddr leaf = leaf_for(*a.mem, t.base->root(), K(101, 1, 1));
    Node snap;
    ASSERT_EQ(io.read(leaf, snap, tree::Deadline(1000)), tree::NodeIO::Read::kOk);
    uint64_t held = 0;
    {
        tree::Locks locks(io);
        tree::LockedNode* ln = locks.try_lock(leaf, snap);
        ASSERT_NE(ln, nullptr);
        held = ln->held_word;
        a.transport().kill_session();
        a.mem->read(t.base->root(), &snap, kNodeSize);  // reconnects
    }  // ~Locks: must leave the lock alone (the old connection may still have writes queued)
    Node now;
    t.mem->read(leaf, &now, kNodeSize);
    EXPECT_EQ(now.lock, held) << "the lock was released through a connection that does not hold it";
    Client w(*t.engine, t.ns, 2000);  // and the next writer takes it over
    EXPECT_TRUE(w.tree->insert(K(101, 1, 1)));
}

// A frame handler whose engine can be replaced: a memory node restart.
struct Restartable final : net::FrameHandler {
    memnode::Engine* cur;
    explicit Restartable(memnode::Engine* e) : cur(e) {}
    void handle(net::ClientSession& s, const net::FrameHeader& h, const uint8_t* p, uint16_t& st,
                std::vector<uint8_t>& resp) override {
        cur->handle(s, h, p, st, resp);
    }
    void session_closed(net::ClientSession& s) override { cur->session_closed(s); }
};

TEST(MemnodeRestart, WritesOfAnOperationInProgressDoNotReachTheNewPool) {
    auto e1 = make_engine(16ull << 20), e2 = make_engine(16ull << 20);
    Restartable h(e1.get());
    InProcTransport t(h);
    uint64_t inc1 = t.incarnation();
    uint64_t off = 64 * 1024, v = 0x1234;
    t.write(off, &v, 8);
    // restart: the node's memory and incarnation are new, the connection is gone
    h.cur = e2.get();
    t.kill_session();
    uint64_t w = 0xdead;
    try {
        t.write(off, &w, 8);
        FAIL() << "a write of an operation begun before the restart reached the new pool";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kLostMemory) << e.what();
    }
    InProcTransport probe(*e2);
    uint64_t got = 1;
    probe.read(off, &got, 8);
    EXPECT_EQ(got, 0u) << "the new pool was written";
    // The owner looks at the incarnation, sees the restart, and goes on knowingly.
    EXPECT_NE(t.incarnation(), inc1);
    EXPECT_NO_THROW(t.write(off, &w, 8));
}

}  // namespace
}  // namespace dex::testing
