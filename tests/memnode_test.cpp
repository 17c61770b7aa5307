// dex-memnode engine, exercised through InProcTransport (same frames as TCP)
// and through Engine::handle directly for malformed input.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <random>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/stats.h"
#include "engine/engine.h"
#include "net/protocol.h"
#include "wire_test_util.h"
#include "test_util.h"
#include "transport/inproc_transport.h"

using namespace dex;
using dex::testing::append;
using dex::testing::as;
using namespace dex::testing::rpc;
using dex::memnode::Engine;
using dex::memnode::EngineOptions;

namespace {

constexpr uint64_t kPool = 8ull << 20;

using dex::testing::code_of;
using dex::testing::small_pool;  // default pool: kPool
static_assert(kPool == 8ull << 20, "small_pool()'s default pool size");

class EngineTest : public ::testing::Test {
protected:
    EngineTest() : engine(small_pool()), t(engine) {}
    Engine engine;
    InProcTransport t;
};

}  // namespace

TEST_F(EngineTest, HelloAssignsUniqueClientIdsAndIncarnation) {
    InProcTransport t2(engine);
    uint32_t a = t.client_id(), b = t2.client_id();
    EXPECT_NE(a, 0u);
    EXPECT_NE(b, 0u);
    EXPECT_NE(a, b);
    EXPECT_NE(engine.incarnation(), 0u);
    EXPECT_EQ(t.incarnation(), engine.incarnation());
    EXPECT_EQ(t.client_id(), a);  // stable while the session lives
    EXPECT_FALSE(engine.hugepages() && false);
    EXPECT_EQ(engine.pool_bytes(), kPool);
}

TEST_F(EngineTest, ReadWriteRoundTrip) {
    uint64_t ns = ns_create(t);
    uint64_t off = alloc(t, ns, 4096);
    EXPECT_GE(off, net::kPoolReservedBytes);
    EXPECT_EQ(off % 1024, 0u);
    std::vector<uint8_t> data(4096), back(4096);
    for (size_t i = 0; i < data.size(); i++) data[i] = static_cast<uint8_t>(i * 7 + 3);
    t.write(off, data.data(), 4096);
    t.read(off, back.data(), 4096);
    EXPECT_EQ(data, back);
    uint8_t part[10];
    t.read(off + 100, part, 10);
    EXPECT_EQ(0, std::memcmp(part, data.data() + 100, 10));
    uint64_t w = 0x1122334455667788ull, r = 0;
    t.write(off + 8, &w, 8);
    t.read(off + 8, &r, 8);
    EXPECT_EQ(w, r);
    t.read(off, nullptr, 0);  // zero-length is fine
}

TEST_F(EngineTest, CasHitAndMiss) {
    uint64_t ns = ns_create(t);
    uint64_t off = alloc(t, ns, 1024);
    uint64_t v = 5;
    t.write(off, &v, 8);
    EXPECT_EQ(t.cas(off, 5, 9), 5u);  // hit
    EXPECT_EQ(t.cas(off, 5, 11), 9u);  // miss: returns current, no change
    uint64_t now = 0;
    t.read(off, &now, 8);
    EXPECT_EQ(now, 9u);
}

TEST_F(EngineTest, FetchAndAdd) {
    uint64_t ns = ns_create(t);
    uint64_t off = alloc(t, ns, 1024);
    uint64_t zero = 0;
    t.write(off + 16, &zero, 8);
    EXPECT_EQ(t.faa(off + 16, 3), 0u);
    EXPECT_EQ(t.faa(off + 16, 4), 3u);
    EXPECT_EQ(t.faa(off + 16, ~0ull), 7u);  // wraps: adds -1
    uint64_t now = 0;
    t.read(off + 16, &now, 8);
    EXPECT_EQ(now, 6u);
}

TEST_F(EngineTest, BatchRunsInOrder) {
    uint64_t ns = ns_create(t);
    uint64_t off = alloc(t, ns, 2048);
    uint64_t a = 100, readback1 = 0, readback2 = 0;
    uint8_t node[1024], node_back[1024];
    for (int i = 0; i < 1024; i++) node[i] = static_cast<uint8_t>(i);
    RemoteOp ops[6] = {};
    ops[0] = {RemoteOp::kWrite, off, &a, 8};
    ops[1] = {RemoteOp::kRead, off, &readback1, 8};
    ops[2] = {RemoteOp::kCas, off, nullptr, 0, 100, 200};
    ops[3] = {RemoteOp::kFaa, off, nullptr, 0, 0, 5};
    ops[4] = {RemoteOp::kWrite, off + 1024, node, 1024};
    ops[5] = {RemoteOp::kRead, off, &readback2, 8};
    t.batch(ops, 6);
    EXPECT_EQ(readback1, 100u);
    EXPECT_EQ(ops[2].result, 100u);
    EXPECT_EQ(ops[3].result, 200u);
    EXPECT_EQ(readback2, 205u);
    RemoteOp r{RemoteOp::kRead, off + 1024, node_back, 1024};
    t.batch(&r, 1);
    EXPECT_EQ(0, std::memcmp(node, node_back, 1024));
    t.batch(nullptr, 0);  // empty batch: no-op
}

TEST_F(EngineTest, BatchLargerThanOneFrameKeepsOrder) {
    uint64_t ns = ns_create(t);
    uint64_t off = alloc(t, ns, 1024);
    uint64_t zero = 0;
    t.write(off, &zero, 8);
    std::vector<RemoteOp> ops(3 * net::kMaxBatch + 7);
    for (auto& op : ops) op = {RemoteOp::kFaa, off, nullptr, 0, 0, 1};
    uint64_t rt0 = stats().round_trips.load();
    uint64_t at0 = stats().remote_atomics.load();
    t.batch(ops.data(), ops.size());
    for (size_t i = 0; i < ops.size(); i++) ASSERT_EQ(ops[i].result, i);
    EXPECT_EQ(stats().round_trips.load() - rt0, 4u);
    EXPECT_EQ(stats().remote_atomics.load() - at0, ops.size());
}

TEST_F(EngineTest, StatsCountEveryVerb) {
    uint64_t ns = ns_create(t);
    uint64_t off = alloc(t, ns, 1024);
    Stats& s = stats();
    uint64_t r0 = s.remote_reads, w0 = s.remote_writes, a0 = s.remote_atomics, rpc0 = s.remote_rpcs,
             rt0 = s.round_trips, br0 = s.bytes_read, bw0 = s.bytes_written;
    uint8_t buf[100] = {};
    t.write(off, buf, 100);
    t.read(off, buf, 60);
    t.cas(off, 0, 0);
    t.faa(off, 0);
    uint64_t x;
    RemoteOp ops[3] = {{RemoteOp::kRead, off, &x, 8}, {RemoteOp::kWrite, off, buf, 16}, {RemoteOp::kFaa, off, nullptr, 0, 0, 0}};
    t.batch(ops, 3);
    node_stats(t);
    EXPECT_EQ(s.remote_reads - r0, 2u);
    EXPECT_EQ(s.remote_writes - w0, 2u);
    EXPECT_EQ(s.remote_atomics - a0, 3u);
    EXPECT_EQ(s.remote_rpcs - rpc0, 1u);
    EXPECT_EQ(s.round_trips - rt0, 6u);
    EXPECT_EQ(s.bytes_read - br0, 68u);
    EXPECT_EQ(s.bytes_written - bw0, 116u);
}

TEST_F(EngineTest, AllocFreeReuseWithinNamespace) {
    uint64_t ns = ns_create(t);
    uint64_t a = alloc(t, ns, 1024), b = alloc(t, ns, 1000);  // rounds up to 1 KiB
    EXPECT_NE(a, b);
    EXPECT_EQ(b % 1024, 0u);
    EXPECT_EQ(engine.used_bytes(), 2048u);
    free_(t, ns, a, 1024);
    EXPECT_EQ(alloc(t, ns, 1024), a);  // reused by its own namespace
    // A large extent (bulk load) whose single nodes are freed one by one.
    uint64_t big = alloc(t, ns, 64 * 1024);
    EXPECT_EQ(engine.used_bytes(), 2048u + 65536u);
    free_(t, ns, big + 5 * 1024, 1024);
    free_(t, ns, big + 9 * 1024, 1024);
    std::set<uint64_t> got = {alloc(t, ns, 1024), alloc(t, ns, 1024)};
    EXPECT_EQ(got, (std::set<uint64_t>{big + 5 * 1024, big + 9 * 1024}));
    // Another namespace does not get this namespace's free blocks.
    uint64_t ns2 = ns_create(t, "other");
    free_(t, ns, a, 1024);
    EXPECT_NE(alloc(t, ns2, 1024), a);
    // Freeing a whole large extent returns it to the pool.
    uint64_t used = engine.used_bytes();
    free_(t, ns, big, 64 * 1024);
    EXPECT_EQ(engine.used_bytes(), used - 65536);
}

TEST_F(EngineTest, FreeOfForeignOrBadRangeFailsAndKeepsNodeIntact) {
    uint64_t ns1 = ns_create(t, "one"), ns2 = ns_create(t, "two");
    uint64_t a = alloc(t, ns1, 1024);
    uint64_t v = 42;
    t.write(a, &v, 8);
    EXPECT_EQ(code_of([&] { free_(t, ns2, a, 1024); }), ErrorCode::kRemote);  // not ns2's
    EXPECT_EQ(code_of([&] { free_(t, ns1, a + 512, 1024); }), ErrorCode::kRemote);  // misaligned / beyond extent
    EXPECT_EQ(code_of([&] { free_(t, ns1, 123456 * 1024ull, 1024); }), ErrorCode::kRemote);
    free_(t, ns1, a, 1024);
    std::string msg;
    EXPECT_EQ(code_of([&] { free_(t, ns1, a, 1024); }, &msg), ErrorCode::kRemote);  // double free
    EXPECT_NE(msg.find("already free"), std::string::npos) << msg;
    // The transport reconnected transparently after each fatal error; the data is intact.
    uint64_t back = 0;
    t.read(a, &back, 8);
    EXPECT_EQ(back, 42u);
    EXPECT_EQ(alloc(t, ns1, 1024), a);
}

TEST_F(EngineTest, NamespacesListAndDropFreeEverything) {
    uint64_t ns1 = ns_create(t, "index-one"), ns2 = ns_create(t, "index-two");
    EXPECT_EQ(ns1, 1u);
    EXPECT_EQ(ns2, 2u);
    for (int i = 0; i < 10; i++) alloc(t, ns1, 1024);
    uint64_t big = alloc(t, ns1, 100 * 1024);
    free_(t, ns1, big + 1024, 1024);  // partly freed extents are returned on drop too
    alloc(t, ns2, 3 * 1024);
    uint64_t from_start = 0;
    auto r = t.rpc(net::kOpNsList, &from_start, 8);
    ASSERT_EQ(r.size(), 4 + 2 * sizeof(net::NsInfo) + 8);
    EXPECT_EQ(as<uint32_t>(r), 2u);
    EXPECT_EQ(as<uint64_t>(r, r.size() - 8), 0u);  // no next page
    EXPECT_EQ(t.rpc(net::kOpNsList, nullptr, 0), r);  // no payload: from the start too
    auto i1 = as<net::NsInfo>(r, 4), i2 = as<net::NsInfo>(r, 4 + sizeof(net::NsInfo));
    EXPECT_EQ(+i1.ns, ns1);
    EXPECT_EQ(+i1.bytes_allocated, 110u * 1024);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(i1.tag)), "index-one");
    EXPECT_EQ(+i2.ns, ns2);
    EXPECT_EQ(+i2.bytes_allocated, 3u * 1024);
    EXPECT_EQ(+node_stats(t).namespaces, 2u);
    EXPECT_EQ(+node_stats(t).used_bytes, 113u * 1024);

    EXPECT_EQ(ns_drop(t, ns1), 110u * 1024);
    EXPECT_EQ(ns_drop(t, ns2), 3u * 1024);
    EXPECT_EQ(engine.used_bytes(), 0u);
    net::NodeStats st = node_stats(t);
    EXPECT_EQ(+st.used_bytes, 0u);
    EXPECT_EQ(+st.namespaces, 0u);
    EXPECT_EQ(as<uint32_t>(t.rpc(net::kOpNsList, nullptr, 0)), 0u);
    EXPECT_EQ(ns_create(t), 3u);  // ids are never reused
    // The whole pool (minus the reserved page) is allocatable again in one piece.
    uint64_t ns4 = ns_create(t);
    uint64_t whole = alloc(t, ns4, kPool - net::kPoolReservedBytes);
    EXPECT_EQ(whole, net::kPoolReservedBytes);
}

TEST_F(EngineTest, OutOfSpace) {
    uint64_t ns = ns_create(t);
    std::string msg;
    EXPECT_EQ(code_of([&] { alloc(t, ns, 2 * kPool); }, &msg), ErrorCode::kOutOfSpace);
    EXPECT_NE(msg.find("out of space"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(2 * kPool)), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(kPool)), std::string::npos) << msg;
    // Fill it with 1 MiB extents, then 1 KiB nodes, until full.
    int n = 0;
    while (code_of([&] { alloc(t, ns, 1 << 20); }) == ErrorCode::kOk) n++;
    EXPECT_EQ(n, 7);
    while (code_of([&] { alloc(t, ns, 1024); }) == ErrorCode::kOk) n++;
    EXPECT_EQ(engine.used_bytes(), kPool - net::kPoolReservedBytes);
    EXPECT_EQ(code_of([&] { alloc(t, ns, 1024); }), ErrorCode::kOutOfSpace);
    // Not fatal for the session: same client id afterwards.
    uint32_t id = t.client_id();
    EXPECT_EQ(code_of([&] { alloc(t, ns, 1024); }), ErrorCode::kOutOfSpace);
    EXPECT_EQ(t.client_id(), id);
    ns_drop(t, ns);
    EXPECT_EQ(engine.used_bytes(), 0u);
}

TEST_F(EngineTest, UnknownNamespace) {
    EXPECT_EQ(code_of([&] { alloc(t, 77, 1024); }), ErrorCode::kNotFound);
    EXPECT_EQ(code_of([&] { free_(t, 77, 8192, 1024); }), ErrorCode::kNotFound);
    EXPECT_EQ(code_of([&] { get_root(t, 77); }), ErrorCode::kNotFound);
    EXPECT_EQ(code_of([&] { set_root(t, 77, 0, 1); }), ErrorCode::kNotFound);
    EXPECT_EQ(code_of([&] { ns_drop(t, 77); }), ErrorCode::kNotFound);
    uint64_t ns = ns_create(t);
    ns_drop(t, ns);
    EXPECT_EQ(code_of([&] { alloc(t, ns, 1024); }), ErrorCode::kNotFound);
}

TEST_F(EngineTest, SetRootHasCasSemantics) {
    uint64_t ns = ns_create(t);
    EXPECT_EQ(get_root(t, ns), 0u);
    EXPECT_EQ(set_root(t, ns, 0, 0x5000), 0u);       // hit
    EXPECT_EQ(get_root(t, ns), 0x5000u);
    EXPECT_EQ(set_root(t, ns, 0, 0x6000), 0x5000u);  // miss: unchanged
    EXPECT_EQ(get_root(t, ns), 0x5000u);
    EXPECT_EQ(set_root(t, ns, 0x5000, 0x7000), 0x5000u);
    EXPECT_EQ(get_root(t, ns), 0x7000u);
}

TEST_F(EngineTest, ClientAliveAfterKillSession) {
    InProcTransport other(engine);
    uint32_t id = t.client_id();
    EXPECT_TRUE(client_alive(other, id));
    EXPECT_FALSE(client_alive(other, 0));
    EXPECT_FALSE(client_alive(other, 999999));
    EXPECT_EQ(+node_stats(other).connections, 2u);
    t.kill_session();
    EXPECT_FALSE(client_alive(other, id));
    EXPECT_EQ(+node_stats(other).connections, 1u);
    uint32_t id2 = t.client_id();  // fresh session on next use
    EXPECT_NE(id2, id);
    EXPECT_TRUE(client_alive(other, id2));
}

TEST_F(EngineTest, OutOfPoolAndMisalignedAccessAreRejected) {
    uint64_t ns = ns_create(t);
    uint64_t a = alloc(t, ns, 1024);
    uint8_t buf[16];
    uint32_t id = t.client_id();
    EXPECT_EQ(code_of([&] { t.read(kPool - 8, buf, 16); }), ErrorCode::kRemote);
    EXPECT_NE(t.client_id(), id);  // fatal: session was closed, transport reconnected
    EXPECT_EQ(code_of([&] { t.read(~0ull - 4, buf, 16); }), ErrorCode::kRemote);  // overflow
    EXPECT_EQ(code_of([&] { t.read(0, buf, 8); }), ErrorCode::kRemote);           // null / reserved page
    EXPECT_EQ(code_of([&] { t.write(kPool, buf, 1); }), ErrorCode::kRemote);
    std::string msg;
    EXPECT_EQ(code_of([&] { t.cas(a + 4, 0, 1); }, &msg), ErrorCode::kRemote);
    EXPECT_NE(msg.find("aligned"), std::string::npos) << msg;
    EXPECT_EQ(code_of([&] { t.faa(a + 1, 1); }), ErrorCode::kRemote);
    t.read(kPool - 16, buf, 16);  // last bytes are fine
}

TEST(EngineAuth, TokenIsChecked) {
    Engine e(small_pool(kPool, "s3cret"));
    InProcTransport bad(e, "wrong"), none(e), good(e, "s3cret");
    std::string msg;
    EXPECT_EQ(code_of([&] { bad.incarnation(); }, &msg), ErrorCode::kAuth);
    EXPECT_NE(msg.find("rejected the token"), std::string::npos) << msg;
    EXPECT_EQ(code_of([&] { none.incarnation(); }), ErrorCode::kAuth);
    EXPECT_EQ(good.incarnation(), e.incarnation());
    EXPECT_EQ(+e.stats().connections, 1u);
}

TEST(EngineConcurrency, FetchAndAddFromManyThreadsIsExact) {
    Engine e(small_pool());
    InProcTransport setup(e);
    uint64_t ns = ns_create(setup);
    uint64_t off = alloc(setup, ns, 1024);
    constexpr int kThreads = 4, kIters = 5000;
    std::vector<std::thread> th;
    for (int i = 0; i < kThreads; i++)
        th.emplace_back([&] {
            InProcTransport t(e);
            for (int k = 0; k < kIters; k++) t.faa(off, 1);
        });
    for (auto& x : th) x.join();
    uint64_t v = 0;
    setup.read(off, &v, 8);
    EXPECT_EQ(v, uint64_t(kThreads) * kIters);
}

// ---- malformed frames straight into Engine::handle ---------------------

namespace {

struct RawClient {
    explicit RawClient(Engine& eng) : e(eng) {}
    Engine& e;
    net::ClientSession s;
    uint16_t status = 0;
    std::vector<uint8_t> resp;
    uint32_t seq = 0;

    // Sends op + payload with the given header overrides.
    uint16_t send(uint16_t op, const std::vector<uint8_t>& payload, uint16_t count = 0,
                  uint32_t magic = net::kRequestMagic) {
        net::FrameHeader h{magic, op, count, static_cast<uint32_t>(payload.size()), ++seq};
        e.handle(s, h, payload.data(), status, resp);
        return status;
    }
    void hello(const std::string& tok = {}) {
        std::vector<uint8_t> p;
        append(p, net::kProtocolVersion);
        append(p, static_cast<uint32_t>(tok.size()));
        p.insert(p.end(), tok.begin(), tok.end());
        ASSERT_EQ(send(net::kOpHello, p), net::kStatusOk);
        ASSERT_EQ(resp.size(), sizeof(net::HelloReply));
        ASSERT_NE(s.client_id, 0u);
    }
    std::string msg() const { return std::string(resp.begin(), resp.end()); }
};

std::vector<uint8_t> read_req(uint64_t off, uint32_t len) {
    std::vector<uint8_t> p;
    append(p, off);
    append(p, len);
    append(p, uint32_t{0});
    return p;
}

std::vector<uint8_t> sub(uint16_t op, const std::vector<uint8_t>& body, int32_t len_delta = 0) {
    std::vector<uint8_t> p;
    append(p, net::SubOpHeader{op, 0, static_cast<uint32_t>(static_cast<int32_t>(body.size()) + len_delta)});
    p.insert(p.end(), body.begin(), body.end());
    return p;
}

}  // namespace

TEST(EngineMalformed, EveryBadFrameGetsAnErrorAndClose) {
    Engine e(small_pool(kPool, "tok"));
    // Something in the pool that must survive all of this.
    RawClient setup(e);
    setup.hello("tok");
    std::vector<uint8_t> tag(64, 'x');
    ASSERT_EQ(setup.send(net::kOpNsCreate, tag), 0);
    uint64_t ns = as<uint64_t>(setup.resp);
    std::vector<uint8_t> ap;
    append(ap, ns);
    append(ap, uint64_t{1024});
    ASSERT_EQ(setup.send(net::kOpAlloc, ap), 0);
    uint64_t node = as<uint64_t>(setup.resp);
    std::vector<uint8_t> wp = read_req(node, 1024);
    std::vector<uint8_t> pattern(1024, 0xAB);
    wp.insert(wp.end(), pattern.begin(), pattern.end());
    ASSERT_EQ(setup.send(net::kOpWrite, wp), 0);

    struct Case {
        const char* name;
        uint16_t want;
        std::function<uint16_t(RawClient&)> run;
        bool hello = true;
    };
    std::vector<Case> cases = {
        {"bad magic", net::kStatusProtocol, [](RawClient& c) { return c.send(net::kOpStats, {}, 0, 0x12345678); }},
        {"payload too large", net::kStatusProtocol,
         [](RawClient& c) {
             net::FrameHeader h{net::kRequestMagic, net::kOpRead, 0, net::kMaxPayload + 1, 1};
             c.e.handle(c.s, h, nullptr, c.status, c.resp);  // server passes no payload for a bad header
             return c.status;
         }},
        {"unknown op", net::kStatusProtocol, [](RawClient& c) { return c.send(999, {}); }},
        {"op before HELLO", net::kStatusAuth, [](RawClient& c) { return c.send(net::kOpStats, {}); }, false},
        {"bad token", net::kStatusAuth,
         [](RawClient& c) {
             std::vector<uint8_t> p;
             append(p, net::kProtocolVersion);
             append(p, uint32_t{3});
             p.insert(p.end(), {'b', 'a', 'd'});
             return c.send(net::kOpHello, p);
         },
         false},
        {"token longer than payload", net::kStatusProtocol,
         [](RawClient& c) {
             std::vector<uint8_t> p;
             append(p, net::kProtocolVersion);
             append(p, uint32_t{100});
             p.insert(p.end(), {'t', 'o', 'k'});
             return c.send(net::kOpHello, p);
         },
         false},
        {"wrong version", net::kStatusProtocol,
         [](RawClient& c) {
             std::vector<uint8_t> p;
             append(p, uint32_t{99});
             append(p, uint32_t{3});
             p.insert(p.end(), {'t', 'o', 'k'});
             return c.send(net::kOpHello, p);
         },
         false},
        {"duplicate HELLO", net::kStatusProtocol,
         [](RawClient& c) {
             std::vector<uint8_t> p;
             append(p, net::kProtocolVersion);
             append(p, uint32_t{3});
             p.insert(p.end(), {'t', 'o', 'k'});
             return c.send(net::kOpHello, p);
         }},
        {"short READ payload", net::kStatusProtocol, [](RawClient& c) { return c.send(net::kOpRead, {1, 2, 3}); }},
        {"WRITE length mismatch", net::kStatusProtocol,
         [&](RawClient& c) {
             auto p = read_req(node, 100);
             p.resize(p.size() + 99);
             return c.send(net::kOpWrite, p);
         }},
        {"READ outside pool", net::kStatusBounds, [](RawClient& c) { return c.send(net::kOpRead, read_req(kPool, 8)); }},
        {"READ too long", net::kStatusBounds,
         [](RawClient& c) { return c.send(net::kOpRead, read_req(8192, net::kMaxPayload + 1)); }},
        {"misaligned CAS", net::kStatusAlign,
         [&](RawClient& c) {
             std::vector<uint8_t> p;
             append(p, node + 3);
             append(p, uint64_t{0});
             append(p, uint64_t{1});
             return c.send(net::kOpCas, p);
         }},
        {"count on non-batch", net::kStatusProtocol, [](RawClient& c) { return c.send(net::kOpStats, {}, 2); }},
        {"batch with RPC sub-op", net::kStatusProtocol,
         [](RawClient& c) { return c.send(net::kOpBatch, sub(net::kOpStats, {}), 1); }},
        {"batch count larger than contents", net::kStatusProtocol,
         [&](RawClient& c) { return c.send(net::kOpBatch, sub(net::kOpRead, read_req(node, 8)), 2); }},
        {"batch trailing bytes", net::kStatusProtocol,
         [&](RawClient& c) {
             auto p = sub(net::kOpRead, read_req(node, 8));
             p.push_back(0);
             return c.send(net::kOpBatch, p, 1);
         }},
        {"batch sub-op length lies", net::kStatusProtocol,
         [&](RawClient& c) { return c.send(net::kOpBatch, sub(net::kOpRead, read_req(node, 8), 1000), 1); }},
        {"batch too many", net::kStatusProtocol,
         [&](RawClient& c) {
             std::vector<uint8_t> p;
             for (uint32_t i = 0; i <= net::kMaxBatch; i++) {
                 auto s = sub(net::kOpRead, read_req(node, 8));
                 p.insert(p.end(), s.begin(), s.end());
             }
             return c.send(net::kOpBatch, p, net::kMaxBatch + 1);
         }},
        {"batch: valid WRITE then out-of-pool READ (nothing executes)", net::kStatusBounds,
         [&](RawClient& c) {
             auto w = read_req(node, 8);
             w.resize(w.size() + 8, 0);  // would zero the first 8 bytes
             auto p = sub(net::kOpWrite, w);
             auto r = sub(net::kOpRead, read_req(kPool - 4, 8));
             p.insert(p.end(), r.begin(), r.end());
             return c.send(net::kOpBatch, p, 2);
         }},
        {"ALLOC short payload", net::kStatusProtocol,
         [](RawClient& c) { return c.send(net::kOpAlloc, std::vector<uint8_t>(8)); }},
        {"NS_CREATE short tag", net::kStatusProtocol,
         [](RawClient& c) { return c.send(net::kOpNsCreate, std::vector<uint8_t>(10)); }},
    };
    for (auto& tc : cases) {
        SCOPED_TRACE(tc.name);
        RawClient c(e);
        if (tc.hello) c.hello("tok");
        EXPECT_EQ(tc.run(c), tc.want) << c.msg();
        EXPECT_FALSE(c.resp.empty()) << "error replies carry a message";
        EXPECT_TRUE(c.s.close_after_reply);
        e.session_closed(c.s);
    }
    // The pool is intact and the engine still serves.
    ASSERT_EQ(setup.send(net::kOpRead, read_req(node, 1024)), 0);
    EXPECT_EQ(setup.resp, pattern);
    EXPECT_FALSE(setup.s.close_after_reply);
    EXPECT_EQ(+e.stats().connections, 1u);
}

TEST(EngineMalformed, RandomGarbageNeverCrashes) {
    Engine e(small_pool());
    std::mt19937_64 rng(12345);
    for (int i = 0; i < 3000; i++) {
        RawClient c(e);
        if (i % 2) c.hello();
        std::vector<uint8_t> p(rng() % 96);
        for (auto& b : p) b = static_cast<uint8_t>(rng());
        // Mostly valid magic and a plausible op so that decoding goes deep.
        uint16_t ops[] = {net::kOpRead, net::kOpWrite, net::kOpCas, net::kOpFaa, net::kOpBatch, net::kOpAlloc,
                          net::kOpFree, net::kOpNsDrop, net::kOpGetRoot, net::kOpSetRoot, net::kOpClientAlive};
        uint16_t op = ops[rng() % (sizeof ops / sizeof ops[0])];
        c.send(op, p, op == net::kOpBatch ? static_cast<uint16_t>(rng() % 4) : 0);
        e.session_closed(c.s);
    }
    InProcTransport t(e);
    EXPECT_EQ(t.incarnation(), e.incarnation());
}
