// TcpTransport and RdmaTransport against a real dex-memnode process, plus
// raw-socket abuse of the server, timeouts, interrupts and shutdown.
//
// The TransportTest/TransportFailures suites run once per scheme: tcp always,
// rdma when an RDMA device and its address are known (DEX_RDMA_IP, or RXE_IP
// inside the rxe-vm guest that `make check-rdma` boots); otherwise the rdma
// cases report SKIPPED. RDMA-only behaviour: rdma_transport_test.cpp.
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

using dex::testing::ms_since;

using dex::testing::MemnodeOptions;
using dex::testing::MemnodeProcess;

using dex::testing::code_of;
using dex::testing::opts;

// ---- raw socket client: raw_client_util.h ------------------------------------

int unused_port() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t l = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &l);
    close(fd);
    return ntohs(a.sin_port);
}

// A socket that listens but never accepts or answers: connects succeed via the backlog.
struct SilentServer {
    int fd = -1, port = 0;
    SilentServer() {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
        listen(fd, 16);
        socklen_t l = sizeof a;
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &l);
        port = ntohs(a.sin_port);
    }
    ~SilentServer() { close(fd); }
    std::string address() const { return "127.0.0.1:" + std::to_string(port); }
};

class TcpTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() { server = new MemnodeProcess(); }
    static void TearDownTestSuite() {
        delete server;
        server = nullptr;
    }
    void SetUp() override { ASSERT_NE(server->port(), 0) << server->log(); }
    static MemnodeProcess* server;
};
MemnodeProcess* TcpTest::server = nullptr;

// Runs once per scheme (tcp, rdma) with its own memory node.
class TransportTest : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        DEX_SKIP_UNLESS_SCHEME_USABLE(GetParam());
        server = std::make_unique<MemnodeProcess>(MemnodeOptions{.rdma = rdma()});
        ASSERT_NE(server->port(), 0) << server->log();
    }
    bool rdma() const { return GetParam() == "rdma"; }
    std::string addr() const { return server->address(GetParam()); }
    TransportOptions topts(int connect_ms = 2000, int op_ms = 5000) const {
        return opts(connect_ms, op_ms, rdma() ? dex::testing::kTestToken : "");
    }
    std::unique_ptr<Transport> make() const { return make_transport(addr(), topts()); }
    std::unique_ptr<MemnodeProcess> server;
};

std::string scheme_name(const ::testing::TestParamInfo<std::string>& i) { return i.param; }

}  // namespace

INSTANTIATE_TEST_SUITE_P(Schemes, TransportTest, ::testing::Values("tcp", "rdma"), scheme_name);

TEST_F(TcpTest, AddressParsing) {
    EXPECT_EQ(TcpTransport("127.0.0.1:7400", opts()).address(), "tcp://127.0.0.1:7400");
    EXPECT_EQ(TcpTransport("tcp://localhost:9", opts()).address(), "tcp://localhost:9");
    EXPECT_EQ(TcpTransport("tcp://[::1]:7400", opts()).address(), "tcp://[::1]:7400");
    for (const char* bad : {"", "tcp://", "host", "host:", "host:abc", "host:70000", ":7400", "a:b:c"})
        EXPECT_EQ(code_of([&] { TcpTransport t(bad, opts()); }), ErrorCode::kInvalid) << bad;
    TcpTransport lazy("127.0.0.1:1", opts());  // constructing never connects
    EXPECT_FALSE(lazy.connected());
}

TEST_P(TransportTest, VerbsAndRpcsRoundTrip) {
    auto tp = make();
    Transport& t = *tp;
    uint64_t inc = t.incarnation();
    EXPECT_NE(inc, 0u);
    EXPECT_NE(t.client_id(), 0u);
    auto st = as<net::NodeStats>(t.rpc(net::kOpStats, nullptr, 0));
    EXPECT_EQ(+st.incarnation, inc);
    EXPECT_EQ(+st.pool_bytes, kPool);

    uint64_t ns = ns_create(t);
    uint64_t off = alloc(t, ns, 8192);
    std::vector<uint8_t> data(8192), back(8192);
    for (size_t i = 0; i < data.size(); i++) data[i] = static_cast<uint8_t>(i ^ (i >> 8));
    t.write(off, data.data(), 8192);
    t.read(off, back.data(), 8192);
    EXPECT_EQ(data, back);

    uint64_t v = 10;
    t.write(off, &v, 8);
    EXPECT_EQ(t.cas(off, 10, 20), 10u);
    EXPECT_EQ(t.cas(off, 10, 30), 20u);
    EXPECT_EQ(t.faa(off, 5), 20u);

    uint64_t r1 = 0, r2 = 0;
    RemoteOp ops[4] = {};
    ops[0] = {RemoteOp::kRead, off, &r1, 8};
    ops[1] = {RemoteOp::kCas, off, nullptr, 0, 25, 40};
    ops[2] = {RemoteOp::kFaa, off, nullptr, 0, 0, 2};
    ops[3] = {RemoteOp::kRead, off, &r2, 8};
    t.batch(ops, 4);
    EXPECT_EQ(r1, 25u);
    EXPECT_EQ(ops[1].result, 25u);
    EXPECT_EQ(ops[2].result, 40u);
    EXPECT_EQ(r2, 42u);

    std::vector<uint8_t> p;
    append(p, ns);
    append(p, uint64_t{0});
    append(p, uint64_t{off});
    EXPECT_EQ(as<uint64_t>(t.rpc(net::kOpSetRoot, p.data(), p.size())), 0u);
    EXPECT_EQ(as<uint64_t>(t.rpc(net::kOpGetRoot, &ns, 8)), off);

    std::string msg;
    EXPECT_EQ(code_of([&] { alloc(t, ns, kPool * 2); }, &msg), ErrorCode::kOutOfSpace);
    EXPECT_NE(msg.find("out of space"), std::string::npos);
    EXPECT_EQ(code_of([&] { alloc(t, 9999, 1024); }), ErrorCode::kNotFound);
    EXPECT_EQ(code_of([&] { t.rpc(net::kOpRead, nullptr, 0); }), ErrorCode::kInvalid);
    EXPECT_EQ(as<uint64_t>(t.rpc(net::kOpNsDrop, &ns, 8)), 8192u);
}

TEST_P(TransportTest, LargeTransfersAreChunkedAndCounted) {
    auto tp = make();
    Transport& t = *tp;
    uint64_t ns = ns_create(t);
    const uint32_t len = net::kMaxPayload + (1 << 20);  // needs two frames each way
    uint64_t off = alloc(t, ns, len);
    std::vector<uint8_t> data(len), back(len);
    std::mt19937 rng(7);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    Stats& s = stats();
    uint64_t w0 = s.remote_writes, r0 = s.remote_reads, bw0 = s.bytes_written, br0 = s.bytes_read,
             rt0 = s.round_trips;
    t.write(off, data.data(), len);
    t.read(off, back.data(), len);
    EXPECT_TRUE(data == back);
    EXPECT_EQ(s.remote_writes - w0, 2u);
    EXPECT_EQ(s.remote_reads - r0, 2u);
    EXPECT_EQ(s.bytes_written - bw0, len);
    EXPECT_EQ(s.bytes_read - br0, len);
    EXPECT_EQ(s.round_trips - rt0, 4u);
    t.rpc(net::kOpNsDrop, &ns, 8);
}

TEST_F(TcpTest, MalformedInputGetsErrorAndCloseServerSurvives) {
    TcpTransport setup(server->address(), opts());
    uint64_t ns = ns_create(setup);
    uint64_t node = alloc(setup, ns, 1024);
    std::vector<uint8_t> pattern(1024, 0x5A);
    setup.write(node, pattern.data(), 1024);

    struct Case {
        const char* name;
        bool hello;                 // authenticate first
        std::vector<uint8_t> bytes; // what to send
        uint16_t want;              // status of the error reply
        bool half_close = false;    // shutdown(SHUT_WR) after sending
    };
    std::vector<uint8_t> wpay = rw_req(node, 512);
    wpay.resize(wpay.size() + 512, 0xEE);
    std::vector<uint8_t> trunc = frame(net::kOpWrite, wpay);
    trunc.resize(trunc.size() - 100);  // header promises more than is sent
    std::vector<uint8_t> huge = frame(net::kOpRead, {});
    net::FrameHeader hh{net::kRequestMagic, net::kOpRead, 0, 0x7fffffff, 1};
    std::memcpy(huge.data(), &hh, sizeof hh);
    std::vector<uint8_t> cas;
    append(cas, node + 4);
    append(cas, uint64_t{0});
    append(cas, uint64_t{1});
    std::vector<uint8_t> bad_sub;
    append(bad_sub, net::SubOpHeader{net::kOpAlloc, 0, 16});
    append(bad_sub, ns);
    append(bad_sub, uint64_t{1024});

    std::vector<Case> cases = {
        {"wrong magic", true, frame(net::kOpStats, {}, 0, 0xdeadbeef), net::kStatusProtocol},
        {"wrong magic as first frame", false, frame(net::kOpHello, hello_payload(), 0, 0x1), net::kStatusProtocol},
        {"huge payload_len", true, huge, net::kStatusProtocol},
        {"truncated payload then close", true, trunc, net::kStatusProtocol, true},
        {"unknown op", true, frame(4242, {}), net::kStatusProtocol},
        {"op before HELLO", false, frame(net::kOpRead, rw_req(node, 8)), net::kStatusAuth},
        {"READ outside pool", true, frame(net::kOpRead, rw_req(kPool - 4, 8)), net::kStatusBounds},
        {"misaligned CAS", true, frame(net::kOpCas, cas), net::kStatusAlign},
        {"batch with bad sub-op", true, frame(net::kOpBatch, bad_sub, 1), net::kStatusProtocol},
    };
    for (auto& tc : cases) {
        SCOPED_TRACE(tc.name);
        int fd = raw_connect(server->port());
        ASSERT_GE(fd, 0);
        if (tc.hello) {
            ASSERT_TRUE(send_all(fd, frame(net::kOpHello, hello_payload())));
            Reply h = read_reply(fd);
            ASSERT_TRUE(h.ok);
            ASSERT_EQ(+h.h.op, net::kStatusOk);
        }
        ASSERT_TRUE(send_all(fd, tc.bytes));
        if (tc.half_close) shutdown(fd, SHUT_WR);
        Reply r = read_reply(fd);
        EXPECT_TRUE(r.ok);
        EXPECT_EQ(+r.h.op, tc.want) << r.msg();
        EXPECT_FALSE(r.payload.empty());
        EXPECT_TRUE(closed_by_peer(fd)) << "server must close after a fatal error";
        close(fd);
        // Still alive and serving a fresh client.
        ASSERT_EQ(kill(server->pid(), 0), 0);
        ASSERT_TRUE(server->alive());
        TcpTransport fresh(server->address(), opts());
        uint8_t back[1024];
        fresh.read(node, back, 1024);
        EXPECT_EQ(0, std::memcmp(back, pattern.data(), 1024));
    }
    // Random garbage and abrupt disconnects.
    std::mt19937 rng(99);
    for (int i = 0; i < 50; i++) {
        int fd = raw_connect(server->port());
        ASSERT_GE(fd, 0);
        std::vector<uint8_t> junk(rng() % 200);
        for (auto& b : junk) b = static_cast<uint8_t>(rng());
        if (i % 2) {
            auto f = frame(static_cast<uint16_t>(rng() % 30), junk, static_cast<uint16_t>(rng() % 3));
            junk.swap(f);
        }
        send_all(fd, junk);
        close(fd);
    }
    EXPECT_TRUE(server->alive());
    EXPECT_TRUE(server->log_has("error")) << server->log();  // errors are logged
    uint8_t back[1024];
    setup.read(node, back, 1024);
    EXPECT_EQ(0, std::memcmp(back, pattern.data(), 1024));
    setup.rpc(net::kOpNsDrop, &ns, 8);
}

TEST_F(TcpTest, PipelinedFramesAnsweredInOrder) {
    int fd = raw_connect(server->port());
    ASSERT_GE(fd, 0);
    std::vector<uint8_t> all = frame(net::kOpHello, hello_payload(), 0, net::kRequestMagic, 1);
    for (uint32_t s = 2; s < 50; s++) {
        auto f = frame(net::kOpStats, {}, 0, net::kRequestMagic, s);
        all.insert(all.end(), f.begin(), f.end());
    }
    ASSERT_TRUE(send_all(fd, all));
    for (uint32_t s = 1; s < 50; s++) {
        Reply r = read_reply(fd);
        ASSERT_TRUE(r.ok);
        EXPECT_EQ(+r.h.seq, s);
        EXPECT_EQ(+r.h.op, net::kStatusOk);
    }
    close(fd);
}

TEST_P(TransportTest, ClientAliveTracksConnections) {
    auto ap = make(), bp = make();
    Transport &a = *ap, &b = *bp;
    uint32_t id = a.client_id();
    EXPECT_NE(id, b.client_id());
    EXPECT_TRUE(client_alive(b, id));
    a.disconnect();
    if (auto* tcp = dynamic_cast<TcpTransport*>(&a)) {
        EXPECT_FALSE(tcp->connected());
    }
    if (auto* rd = dynamic_cast<RdmaTransport*>(&a)) {
        EXPECT_FALSE(rd->connected());
    }
    bool gone = false;
    for (int i = 0; i < 200 && !gone; i++) {
        gone = !client_alive(b, id);
        if (!gone) usleep(5000);
    }
    EXPECT_TRUE(gone);
    EXPECT_NE(a.client_id(), id);  // reconnects with a new id
}

TEST_P(TransportTest, ConcurrentFetchAndAddIsExact) {
    auto sp = make();
    Transport& setup = *sp;
    uint64_t ns = ns_create(setup);
    uint64_t off = alloc(setup, ns, 1024);
    uint64_t zero = 0;
    setup.write(off, &zero, 8);
    constexpr int kThreads = 6, kIters = 1500;
    std::atomic<int> failures{0};
    std::vector<std::thread> th;
    for (int i = 0; i < kThreads; i++)
        th.emplace_back([&] {
            try {
                auto t = make();
                for (int k = 0; k < kIters; k++) t->faa(off, 1);
            } catch (...) {
                failures++;
            }
        });
    for (auto& x : th) x.join();
    EXPECT_EQ(failures.load(), 0);
    uint64_t v = 0;
    setup.read(off, &v, 8);
    EXPECT_EQ(v, uint64_t(kThreads) * kIters);
    setup.rpc(net::kOpNsDrop, &ns, 8);
}

TEST_P(TransportTest, ManyConnectionsAtOnce) {
    std::vector<std::unique_ptr<Transport>> ts;
    for (int i = 0; i < 64; i++) ts.push_back(make());
    std::set<uint32_t> ids;
    for (auto& t : ts) ids.insert(t->client_id());
    EXPECT_EQ(ids.size(), 64u);
    auto st = as<net::NodeStats>(ts[0]->rpc(net::kOpStats, nullptr, 0));
    EXPECT_GE(+st.connections, 64u);
}

TEST(TcpFailures, UnreachableFailsWithinConnectTimeout) {
    int port = unused_port();
    TcpTransport t("127.0.0.1:" + std::to_string(port), opts(500, 500));
    auto t0 = Clock::now();
    std::string msg;
    try {
        t.incarnation();
        FAIL() << "connected to a closed port";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kUnreachable);
        EXPECT_NE(std::string(e.what()).find("could not connect to memory node tcp://127.0.0.1:" + std::to_string(port)),
                  std::string::npos)
            << e.what();
        EXPECT_NE(e.hint().find("dex-memnode --listen 127.0.0.1:" + std::to_string(port)), std::string::npos)
            << e.hint();
    }
    EXPECT_LT(ms_since(t0), 1000);
    EXPECT_FALSE(t.connected());
    EXPECT_EQ(code_of([&] { TcpTransport("no-such-host.invalid:7400", opts(300, 300)).incarnation(); }),
              ErrorCode::kUnreachable);
}

// Scheme-parameterized tests that start their own memory node(s).
class SchemeTest : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override { DEX_SKIP_UNLESS_SCHEME_USABLE(GetParam()); }
    bool rdma() const { return GetParam() == "rdma"; }
    TransportOptions topts(int connect_ms = 2000, int op_ms = 5000) const {
        return opts(connect_ms, op_ms, rdma() ? dex::testing::kTestToken : "");
    }
};
INSTANTIATE_TEST_SUITE_P(Schemes, SchemeTest, ::testing::Values("tcp", "rdma"), scheme_name);

TEST_P(SchemeTest, NoListenerFailsWithinConnectTimeout) {
    int port = unused_port();
    std::string a = rdma() ? "rdma://" + dex::testing::rdma_ip() + ":" + std::to_string(port)
                           : "tcp://127.0.0.1:" + std::to_string(port);
    auto t = make_transport(a, topts(500, 500));
    auto t0 = Clock::now();
    std::string msg;
    EXPECT_EQ(code_of([&] { t->incarnation(); }, &msg), ErrorCode::kUnreachable);
    EXPECT_NE(msg.find("could not connect to memory node " + a), std::string::npos) << msg;
    EXPECT_LT(ms_since(t0), 1000);
    EXPECT_EQ(code_of([&] { t->rpc(net::kOpStats, nullptr, 0); }), ErrorCode::kUnreachable);  // still down, tries again
}

TEST(TcpFailures, SilentServerTimesOut) {
    SilentServer s;
    TcpTransport t(s.address(), opts(1000, 300));
    auto t0 = Clock::now();
    std::string msg;
    EXPECT_EQ(code_of([&] { t.incarnation(); }, &msg), ErrorCode::kTimeout);
    long el = ms_since(t0);
    EXPECT_GE(el, 290);
    EXPECT_LT(el, 1500);
    EXPECT_NE(msg.find(s.address()), std::string::npos) << msg;
    EXPECT_NE(msg.find("300 ms"), std::string::npos) << msg;
    EXPECT_FALSE(t.connected());
}

namespace {
std::atomic<bool> g_cancel{false};
bool cancel_hook() { return g_cancel.load(); }
struct HookGuard {
    HookGuard() { set_interrupt_check(cancel_hook); }
    ~HookGuard() {
        set_interrupt_check(nullptr);
        g_cancel = false;
    }
};
}  // namespace

TEST(TcpFailures, InterruptAbandonsWaitQuickly) {
    SilentServer s;
    HookGuard hook;
    TcpTransport t(s.address(), opts(5000, 5000));
    g_cancel = false;
    std::thread canceler([] {
        usleep(100 * 1000);
        g_cancel = true;
    });
    auto t0 = Clock::now();
    std::string msg;
    EXPECT_EQ(code_of([&] { t.incarnation(); }, &msg), ErrorCode::kInterrupted);
    canceler.join();
    long el = ms_since(t0);
    EXPECT_GE(el, 90);
    EXPECT_LT(el, 400);
    EXPECT_NE(msg.find("canceled while waiting for memory node"), std::string::npos) << msg;
    EXPECT_FALSE(t.connected());
    // With interrupts held only the op timeout ends the wait.
    {
        InterruptHold hold;
        EXPECT_FALSE(interrupt_requested());
        TcpTransport t2(s.address(), opts(5000, 200));
        EXPECT_EQ(code_of([&] { t2.incarnation(); }), ErrorCode::kTimeout);
    }
    EXPECT_TRUE(interrupt_requested());
}

TEST_P(SchemeTest, InterruptDuringOperationOnRealServer) {
    MemnodeProcess server({.rdma = rdma()});
    ASSERT_NE(server.port(), 0) << server.log();
    HookGuard hook;
    auto tp = make_transport(server.address(GetParam()), topts());
    Transport& t = *tp;
    t.incarnation();
    g_cancel = true;  // a pending cancel only matters when the transport has to wait
    uint64_t ns = 0;
    auto t0 = Clock::now();
    ErrorCode c = code_of([&] { ns = ns_create(t); });
    EXPECT_TRUE(c == ErrorCode::kOk || c == ErrorCode::kInterrupted);
    EXPECT_LT(ms_since(t0), 500);
    g_cancel = false;
    EXPECT_NE(ns_create(t), 0u);  // reconnects if it had to
}

TEST_P(SchemeTest, TokenRequiredAndChecked) {
    char path[] = "/tmp/dex-token-XXXXXX";
    int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    const char content[] = "correct horse\n\n";
    ASSERT_EQ(write(fd, content, sizeof content - 1), static_cast<ssize_t>(sizeof content - 1));
    close(fd);
    MemnodeProcess server({.extra = {"--token-file", path}, .rdma = rdma()});
    unlink(path);
    ASSERT_NE(server.port(), 0) << server.log();

    std::string msg;
    std::string hint;
    try {
        make_transport(server.address(GetParam()), opts(1000, 1000, "wrong"))->incarnation();
        ADD_FAILURE() << "wrong token accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kAuth);
        msg = e.what();
        hint = e.hint();
    }
    EXPECT_NE(msg.find("rejected the token"), std::string::npos) << msg;
    EXPECT_NE(hint.find("token_file"), std::string::npos) << hint;
    EXPECT_EQ(code_of([&] { make_transport(server.address(GetParam()), opts())->incarnation(); }), ErrorCode::kAuth);
    auto goodp = make_transport(server.address(GetParam()), opts(1000, 1000, "correct horse"));
    Transport& good = *goodp;
    EXPECT_NE(good.incarnation(), 0u);

    // Raw: bad token gets kStatusAuth and a close.
    int s = raw_connect(server.port());
    ASSERT_TRUE(send_all(s, frame(net::kOpHello, hello_payload("correct horsf"))));
    Reply r = read_reply(s);
    EXPECT_TRUE(r.ok);
    EXPECT_EQ(+r.h.op, net::kStatusAuth);
    EXPECT_TRUE(closed_by_peer(s));
    close(s);
    EXPECT_TRUE(server.alive());
    EXPECT_NE(good.client_id(), 0u);
}

TEST_P(SchemeTest, RestartChangesIncarnationAndTransportReconnects) {
    auto first = std::make_unique<MemnodeProcess>(MemnodeOptions{.rdma = rdma()});
    ASSERT_NE(first->port(), 0) << first->log();
    int port = first->port(), rport = first->rdma_port();
    auto tp = make_transport(first->address(GetParam()), topts(1000, 1000));
    Transport& t = *tp;
    uint64_t inc1 = t.incarnation();
    EXPECT_EQ(WEXITSTATUS(first->stop(SIGKILL)), 0);
    first.reset();
    MemnodeProcess second({.port = port, .rdma = rdma(), .rdma_port = rport});  // SO_REUSEADDR: same port right away
    ASSERT_EQ(second.port(), port) << second.log();
    ASSERT_EQ(second.rdma_port(), rport) << second.log();
    // The old connection is dead: the first call fails, the next one reconnects.
    std::string msg;
    ErrorCode c = code_of([&] { t.rpc(net::kOpStats, nullptr, 0); }, &msg);
    if (c != ErrorCode::kOk) {
        EXPECT_EQ(c, ErrorCode::kUnreachable) << msg;
        EXPECT_NE(msg.find(second.address(GetParam())), std::string::npos) << msg;
    }
    uint64_t inc2 = t.incarnation();
    EXPECT_NE(inc2, 0u);
    EXPECT_NE(inc2, inc1);
}

TEST_P(SchemeTest, SigtermExitsCleanly) {
    MemnodeProcess server({.extra = {"--threads", "3", "--verbose"}, .rdma = rdma()});
    ASSERT_NE(server.port(), 0) << server.log();
    auto tp = make_transport(server.address(GetParam()), topts());
    Transport& t = *tp;
    t.incarnation();
    // Generous bound: on a loaded 2-core machine the exit can take seconds.
    int st = server.stop(SIGTERM, 30000);
    ASSERT_NE(st, -1) << "did not exit after SIGTERM";
    EXPECT_TRUE(WIFEXITED(st));
    EXPECT_EQ(WEXITSTATUS(st), 0);
    EXPECT_TRUE(server.log_has("shutting down")) << server.log();
    EXPECT_TRUE(server.log_has("pool 64 MiB")) << server.log();
    EXPECT_TRUE(server.log_has("incarnation 0x")) << server.log();
    EXPECT_TRUE(server.log_has("connection from")) << server.log();  // --verbose
    // The transport sees the loss.
    EXPECT_NE(code_of([&] { t.rpc(net::kOpStats, nullptr, 0); }), ErrorCode::kOk);
}

TEST(TcpServer, CommandLineValidation) {
    auto run = [](std::vector<std::string> args) {
        pid_t pid = fork();
        if (pid == 0) {
            int devnull = open("/dev/null", O_WRONLY);
            dup2(devnull, 1);
            dup2(devnull, 2);
            std::vector<char*> argv = {const_cast<char*>(DEX_MEMNODE_BIN)};
            for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
            argv.push_back(nullptr);
            execv(argv[0], argv.data());
            _exit(127);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    };
    EXPECT_EQ(run({"--bogus"}), 2);
    EXPECT_EQ(run({"--help"}), 0);
    EXPECT_EQ(run({"--memory", "lots"}), 2);
    EXPECT_EQ(run({"--threads", "0"}), 2);
    EXPECT_EQ(run({"--listen", "nonsense"}), 2);
    EXPECT_EQ(run({"--listen", "0.0.0.0:0", "--memory", "1MB"}), 2);  // non-loopback needs a token
    EXPECT_NE(run({"--token-file", "/nonexistent/token", "--memory", "1MB"}), 0);
}
