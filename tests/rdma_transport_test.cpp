// RdmaTransport's own behaviour against a real dex-memnode process with an
// RDMA listener: counts like TCP, long batches, zero-copy registered regions,
// cache frames as read targets, local rejection of bad addresses, and
// misbehaving raw verbs clients cut off while others are served. Every case
// reports SKIPPED without an RDMA device (DEX_RDMA_IP, or RXE_IP inside the
// rxe-vm guest that `make check-rdma` boots). The scheme-independent cases
// are in transport_test.cpp.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache.h"
#include "cache/region.h"
#include "common/error.h"
#include "common/stats.h"
#include "net/protocol.h"
#include "net/rdma_wire.h"
#include "memnode_process.h"
#include "raw_client_util.h"
#include "wire_test_util.h"
#include "test_util.h"
#include "rdma_test_util.h"
#include "transport/rdma_transport.h"
#include "transport/tcp_transport.h"
#include "transport/remote_memory.h"
#include "transport/transport_factory.h"
#include "tree/btree.h"

using namespace dex;
using dex::testing::append;
using dex::testing::as;
using namespace dex::testing::rpc;
using Clock = std::chrono::steady_clock;
using namespace dex::testing::raw;

namespace {

constexpr uint64_t kPool = 64ull << 20;

using dex::testing::MemnodeOptions;
using dex::testing::MemnodeProcess;
using dex::testing::code_of;
using dex::testing::ms_since;
using dex::testing::opts;

}  // namespace


namespace {

class RdmaOnly : public ::testing::Test {
protected:
    void SetUp() override {
        std::string why = dex::testing::rdma_unavailable();
        if (!why.empty()) GTEST_SKIP() << "rdma:// not tested: " << why;
        server = std::make_unique<MemnodeProcess>(MemnodeOptions{.rdma = true});
        ASSERT_NE(server->port(), 0) << server->log();
    }
    TransportOptions topts() const { return opts(2000, 5000, dex::testing::kTestToken); }
    std::unique_ptr<MemnodeProcess> server;
};

struct StatsDelta {
    uint64_t r, w, a, rpc, rt, br, bw;
    static StatsDelta now() {
        Stats& s = stats();
        return {s.remote_reads, s.remote_writes, s.remote_atomics, s.remote_rpcs, s.round_trips, s.bytes_read,
                s.bytes_written};
    }
    StatsDelta since(const StatsDelta& o) const { return {r - o.r, w - o.w, a - o.a, rpc - o.rpc, rt - o.rt, br - o.br, bw - o.bw}; }
    bool operator==(const StatsDelta& o) const {
        return r == o.r && w == o.w && a == o.a && rpc == o.rpc && rt == o.rt && br == o.br && bw == o.bw;
    }
};

// The same little workload, returning the dex::stats() it caused.
StatsDelta workload(Transport& t, uint64_t off) {
    t.incarnation();
    auto s0 = StatsDelta::now();
    std::vector<uint8_t> node(1024, 0x5a), back(1024);
    uint64_t lock = 7, word = 0;
    // Sherman's combination: write back a node and release its lock in one chain.
    RemoteOp ops[2] = {};
    ops[0] = {RemoteOp::kWrite, off + 8, node.data() + 8, 1016};
    ops[1] = {RemoteOp::kWrite, off, &lock, 8};
    t.batch(ops, 2);
    t.read(off, back.data(), 1024);
    std::memcpy(&word, back.data(), 8);
    EXPECT_EQ(word, 7u);
    EXPECT_TRUE(std::equal(node.begin() + 8, node.end(), back.begin() + 8));
    EXPECT_EQ(t.cas(off, 7, 9), 7u);
    EXPECT_EQ(t.faa(off, 1), 9u);
    dex::testing::rpc::node_stats(t);
    return StatsDelta::now().since(s0);
}

}  // namespace

TEST_F(RdmaOnly, StatsCountLikeTcp) {
    // A node with an RDMA listener on an IBV_ATOMIC_HCA device (Soft-RoCE)
    // refuses CAS/FAA over TCP (tests/rdma_safety_test.cpp): the TCP half
    // runs against a node without one.
    MemnodeProcess tcp_node;
    ASSERT_NE(tcp_node.port(), 0) << tcp_node.log();
    auto tcp = make_transport(tcp_node.address("tcp"), topts());
    auto rd = make_transport(server->address("rdma"), topts());
    uint64_t off = alloc(*tcp, ns_create(*tcp), 4096);
    uint64_t roff = alloc(*rd, ns_create(*rd), 4096);
    StatsDelta a = workload(*tcp, off), b = workload(*rd, roff + 1024);
    EXPECT_TRUE(a == b) << "tcp r/w/a/rpc/rt " << a.r << "/" << a.w << "/" << a.a << "/" << a.rpc << "/" << a.rt
                        << " rdma " << b.r << "/" << b.w << "/" << b.a << "/" << b.rpc << "/" << b.rt;
    EXPECT_EQ(b.rt, 5u);  // batch, read, cas, faa, rpc: one round trip each
    EXPECT_EQ(b.w, 2u);
}

TEST_F(RdmaOnly, LongBatchesKeepOrderAcrossChains) {
    RdmaTransport t(server->address("rdma"), topts());
    uint64_t ns = ns_create(t);
    uint64_t off = alloc(t, ns, 64 * 1024);
    // 300 ops: write i, faa +1, read back -- every read must see its own write and add.
    constexpr int kN = 100;
    std::vector<uint64_t> vals(kN), reads(kN, 0);
    std::vector<RemoteOp> ops;
    for (int i = 0; i < kN; i++) {
        vals[i] = 1000 + i;
        ops.push_back({RemoteOp::kWrite, off + 8 * uint64_t(i), &vals[i], 8});
        RemoteOp f{RemoteOp::kFaa, off + 8 * uint64_t(i)};
        f.swap_or_add = 1;
        ops.push_back(f);
        ops.push_back({RemoteOp::kRead, off + 8 * uint64_t(i), &reads[i], 8});
    }
    t.batch(ops.data(), ops.size());
    for (int i = 0; i < kN; i++) {
        EXPECT_EQ(ops[3 * i + 1].result, 1000u + i);
        EXPECT_EQ(reads[i], 1001u + i);
    }
}

TEST_F(RdmaOnly, RegisteredRegionIsZeroCopy) {
    RdmaTransport t(server->address("rdma"), topts());
    uint64_t ns = ns_create(t);
    uint64_t off = alloc(t, ns, 8192);
    std::vector<uint8_t> region(1 << 20);
    t.register_region(region.data(), region.size());
    EXPECT_TRUE(t.region_registered());
    uint64_t z0 = t.zero_copy_transfers();
    for (size_t i = 0; i < 4096; i++) region[4096 + i] = static_cast<uint8_t>(i * 13);
    t.write(off, region.data() + 4096, 4096);            // from the region
    t.read(off, region.data() + 65536, 4096);            // into the region
    EXPECT_EQ(t.zero_copy_transfers() - z0, 2u);
    EXPECT_EQ(0, std::memcmp(region.data() + 4096, region.data() + 65536, 4096));
    std::vector<uint8_t> outside(4096);
    t.read(off, outside.data(), 4096);                   // elsewhere: bounce buffer
    EXPECT_EQ(t.zero_copy_transfers() - z0, 2u);
    EXPECT_EQ(0, std::memcmp(outside.data(), region.data() + 4096, 4096));
    // Registered again on a new connection.
    t.disconnect();
    t.read(off, region.data(), 8);
    EXPECT_TRUE(t.region_registered());
    EXPECT_EQ(t.zero_copy_transfers() - z0, 3u);
}

// The tree with a node cache whose region is registered (as capi does for the
// PostgreSQL shared block): a node admitted on a miss is read by RDMA straight
// into its cache frame, not through the bounce buffer.
TEST_F(RdmaOnly, CachedTreeReadsLandInCacheFrames) {
    auto owned = std::make_unique<RdmaTransport>(server->address("rdma"), topts());
    RdmaTransport* rt = owned.get();
    uint64_t ns = ns_create(*rt);
    std::vector<std::unique_ptr<Transport>> nodes;
    nodes.push_back(std::move(owned));
    RemoteMemory mem(std::move(nodes));
    const size_t bytes = cache::CacheRegion::bytes_for(size_t(4096) * kNodeSize);
    std::unique_ptr<char[]> block(new char[bytes]);
    cache::CacheRegion* region = cache::CacheRegion::init(block.get(), bytes, cache::AdmissionPolicy{true, 1.0});
    ASSERT_NE(region, nullptr);
    rt->register_region(block.get(), bytes);
    cache::Cache c(*region, 7);
    tree::TreeOptions o;
    o.cache = &c;
    tree::BTree t(mem, 0, ns, o);
    auto key = [](int64_t i) { return make_key(key_from_int64(i), 1, 1); };
    {
        tree::BTree::BulkLoader bl(t, 0.9);
        for (int64_t i = 0; i < 20000; i++) bl.add(key(i));
        bl.finish();
    }
    const uint64_t z0 = rt->zero_copy_transfers(), a0 = stats().admissions.load();
    for (int64_t i = 0; i < 20000; i += 40) ASSERT_TRUE(t.contains(key(i))) << i;
    const uint64_t admitted = stats().admissions.load() - a0;
    EXPECT_GT(admitted, 100u);
    EXPECT_GE(rt->zero_copy_transfers() - z0, admitted) << "admitted nodes must be read into their frames";
    const uint64_t r0 = stats().remote_reads.load();
    for (int64_t i = 0; i < 20000; i += 40) ASSERT_TRUE(t.contains(key(i))) << i;
    EXPECT_EQ(stats().remote_reads.load(), r0) << "the frames hold the right images";
}

TEST_F(RdmaOnly, OutOfPoolAndMisalignedAreRejectedLocally) {
    RdmaTransport t(server->address("rdma"), topts());
    uint64_t ns = ns_create(t);
    uint64_t off = alloc(t, ns, 1024);
    uint64_t v = 0;
    std::string msg;
    EXPECT_EQ(code_of([&] { t.read(0, &v, 8); }, &msg), ErrorCode::kRemote);
    EXPECT_NE(msg.find("outside the pool"), std::string::npos) << msg;
    EXPECT_EQ(code_of([&] { t.write(kPool - 4, &v, 8); }), ErrorCode::kRemote);
    EXPECT_EQ(code_of([&] { t.cas(off + 4, 0, 1); }, &msg), ErrorCode::kRemote);
    EXPECT_NE(msg.find("not 8-byte aligned"), std::string::npos) << msg;
    RemoteOp bad[2] = {{RemoteOp::kWrite, off, &v, 8}, {RemoteOp::kRead, kPool, &v, 8}};
    v = 5;
    EXPECT_EQ(code_of([&] { t.batch(bad, 2); }), ErrorCode::kRemote);
    uint64_t w = 1;
    t.read(off, &w, 8);
    EXPECT_EQ(w, 0u);  // nothing of the rejected batch ran
    EXPECT_TRUE(t.connected());
}

namespace {

// A hand-driven librdmacm client, to misbehave on purpose.
struct RawRdma {
    rdma_event_channel* ec = nullptr;
    rdma_cm_id* id = nullptr;
    ibv_pd* pd = nullptr;
    ibv_cq* cq = nullptr;
    ibv_mr* mr = nullptr;
    std::vector<uint8_t> buf = std::vector<uint8_t>(1 << 20);

    rdma_cm_event_type next_event(int timeout_ms) {
        pollfd p{ec->fd, POLLIN, 0};
        if (poll(&p, 1, timeout_ms) <= 0) return RDMA_CM_EVENT_TIMEWAIT_EXIT;  // "nothing"
        rdma_cm_event* ev;
        if (rdma_get_cm_event(ec, &ev) != 0) return RDMA_CM_EVENT_TIMEWAIT_EXIT;
        auto t = ev->event;
        rdma_ack_cm_event(ev);
        return t;
    }
    bool connect(const std::string& ip, int port) {
        ec = rdma_create_event_channel();
        if (!ec || rdma_create_id(ec, &id, nullptr, RDMA_PS_TCP)) return false;
        addrinfo* ai = nullptr;
        if (getaddrinfo(ip.c_str(), std::to_string(port).c_str(), nullptr, &ai)) return false;
        int r = rdma_resolve_addr(id, nullptr, ai->ai_addr, 2000);
        freeaddrinfo(ai);
        if (r || next_event(3000) != RDMA_CM_EVENT_ADDR_RESOLVED) return false;
        if (rdma_resolve_route(id, 2000) || next_event(3000) != RDMA_CM_EVENT_ROUTE_RESOLVED) return false;
        pd = ibv_alloc_pd(id->verbs);
        cq = ibv_create_cq(id->verbs, 64, nullptr, nullptr, 0);
        mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
        ibv_qp_init_attr qa{};
        qa.send_cq = qa.recv_cq = cq;
        qa.qp_type = IBV_QPT_RC;
        qa.cap.max_send_wr = qa.cap.max_recv_wr = 32;
        qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
        if (!pd || !cq || !mr || rdma_create_qp(id, pd, &qa)) return false;
        rdma_conn_param cp{};
        cp.initiator_depth = cp.responder_resources = 1;
        cp.retry_count = 3;
        cp.rnr_retry_count = 7;
        return rdma_connect(id, &cp) == 0 && next_event(3000) == RDMA_CM_EVENT_ESTABLISHED;
    }
    void post_recv(size_t at) {
        ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data() + at), 256 * 1024, mr->lkey};
        ibv_recv_wr wr{}, *bad;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ASSERT_EQ(ibv_post_recv(id->qp, &wr, &bad), 0);
    }
    void send(const std::vector<uint8_t>& m, size_t at = 512 * 1024) {
        std::memcpy(buf.data() + at, m.data(), m.size());
        ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data() + at), static_cast<uint32_t>(m.size()), mr->lkey};
        ibv_send_wr wr{}, *bad;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND;
        ASSERT_EQ(ibv_post_send(id->qp, &wr, &bad), 0);
    }
    // The next RECV completion's frame header (ok=false on timeout/error).
    Reply recv_reply(size_t at, int timeout_ms = 5000) {
        Reply r;
        auto t0 = Clock::now();
        ibv_wc wc;
        while (ms_since(t0) < timeout_ms) {
            int n = ibv_poll_cq(cq, 1, &wc);
            if (n == 0) continue;
            if (wc.status != IBV_WC_SUCCESS) return r;
            if (wc.opcode != IBV_WC_RECV) continue;
            std::memcpy(&r.h, buf.data() + at, sizeof r.h);
            r.payload.assign(buf.data() + at + sizeof r.h, buf.data() + at + wc.byte_len);
            r.ok = true;
            return r;
        }
        return r;
    }
    bool disconnected_within(int timeout_ms) {
        auto t0 = Clock::now();
        while (ms_since(t0) < timeout_ms)
            if (next_event(100) == RDMA_CM_EVENT_DISCONNECTED) return true;
        return false;
    }
    ~RawRdma() {
        if (id && id->qp) rdma_destroy_qp(id);
        if (mr) ibv_dereg_mr(mr);
        if (cq) ibv_destroy_cq(cq);
        if (pd) ibv_dealloc_pd(pd);
        if (id) rdma_destroy_id(id);
        if (ec) rdma_destroy_event_channel(ec);
    }
};

}  // namespace

TEST_F(RdmaOnly, MisbehavingClientsAreCutOffOthersServed) {
    RdmaTransport good(server->address("rdma"), topts());
    uint64_t ns = ns_create(good);
    std::string ip = dex::testing::rdma_ip();
    {
        SCOPED_TRACE("garbage instead of a frame");
        RawRdma c;
        ASSERT_TRUE(c.connect(ip, server->rdma_port()));
        c.post_recv(0);
        c.send({1, 2, 3, 4, 5});
        Reply r = c.recv_reply(0);
        ASSERT_TRUE(r.ok);
        EXPECT_EQ(+r.h.op, net::kStatusProtocol);
        EXPECT_TRUE(c.disconnected_within(5000));
    }
    {
        SCOPED_TRACE("RPC before HELLO");
        RawRdma c;
        ASSERT_TRUE(c.connect(ip, server->rdma_port()));
        c.post_recv(0);
        c.send(frame(net::kOpStats, {}));
        Reply r = c.recv_reply(0);
        ASSERT_TRUE(r.ok);
        EXPECT_EQ(+r.h.op, net::kStatusAuth);
        EXPECT_TRUE(c.disconnected_within(5000));
    }
    {
        SCOPED_TRACE("wrong token: refused, no pool address disclosed");
        RawRdma c;
        ASSERT_TRUE(c.connect(ip, server->rdma_port()));
        c.post_recv(0);
        c.send(frame(net::kOpHello, hello_payload("nope")));
        Reply r = c.recv_reply(0);
        ASSERT_TRUE(r.ok);
        EXPECT_EQ(+r.h.op, net::kStatusAuth);
        EXPECT_NE(r.msg().find("wrong token"), std::string::npos) << r.msg();
        EXPECT_TRUE(c.disconnected_within(5000));
    }
    {
        SCOPED_TRACE("too many requests outstanding");
        RawRdma c;
        ASSERT_TRUE(c.connect(ip, server->rdma_port()));
        c.post_recv(0);
        c.send(frame(net::kOpHello, hello_payload(dex::testing::kTestToken)));
        Reply r = c.recv_reply(0);
        ASSERT_TRUE(r.ok);
        ASSERT_EQ(+r.h.op, net::kStatusOk);
        EXPECT_EQ(r.payload.size(), sizeof(net::HelloReply) + sizeof(net::RdmaHelloExt));
        // Requests without receive buffers for the replies: they pile up at the node.
        for (uint32_t i = 0; i < 2 * net::kRdmaDepth + 2; i++) c.send(frame(net::kOpStats, {}, 0, net::kRequestMagic, 100 + i));
        EXPECT_TRUE(c.disconnected_within(10000));
        auto t0 = Clock::now();  // the log line reaches us through a pipe: give it a moment
        while (server->log().find("requests outstanding") == std::string::npos && ms_since(t0) < 5000) usleep(10000);
        EXPECT_NE(server->log().find("requests outstanding"), std::string::npos) << server->log();
    }
    // The node kept serving the well-behaved client throughout.
    EXPECT_NE(alloc(good, ns, 1024), 0u);
    EXPECT_TRUE(server->alive());
}
