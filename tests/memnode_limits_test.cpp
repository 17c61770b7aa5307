// What a client can make dex-memnode hold (src/README.md "Memory nodes",
// issue 12 item 6): before its HELLO is accepted a connection can send no
// frame larger than a HELLO; the node serves at most --max-connections
// connections (the rest are refused with a message the C API passes on); and
// NS_LIST answers in pages, each small enough for one RDMA message, so any
// number of namespaces can be listed over any transport.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "capi/dex_capi.h"
#include "common/error.h"
#include "engine/engine.h"
#include "net/protocol.h"
#include "net/rdma_wire.h"
#include "transport/inproc_transport.h"
#include "transport/tcp_transport.h"
#include "memnode_process.h"
#include "wire_test_util.h"
#include "test_util.h"

using namespace dex;
using dex::testing::append;
using dex::testing::as;
using namespace dex::testing::rpc;
using Clock = std::chrono::steady_clock;

namespace {

using dex::testing::ms_since;

using dex::testing::MemnodeOptions;
using dex::testing::MemnodeProcess;

// A dex-memnode child process on a free loopback port with a 16 MB pool
// (stdout inherited, stderr kept for log()).
MemnodeOptions node_opts(std::vector<std::string> extra = {}) {
    return {.extra = std::move(extra), .memory = "16MB", .quiet_stdout = false};
}

using dex::testing::opts;

// Resident set of a process in KiB (VmRSS in /proc/<pid>/status), -1 if unknown.
long vm_rss_kib(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
    return -1;
}

// ---- raw sockets -------------------------------------------------------------

using dex::testing::raw_connect;

bool recv_exact(int fd, void* dst, size_t n, int timeout_ms) {
    auto* p = static_cast<uint8_t*>(dst);
    auto t0 = Clock::now();
    while (n > 0) {
        pollfd pf{fd, POLLIN, 0};
        if (poll(&pf, 1, 20) <= 0) {
            if (ms_since(t0) > timeout_ms) return false;
            continue;
        }
        ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (r <= 0) return false;
        p += r;
        n -= static_cast<size_t>(r);
    }
    return true;
}

struct Reply {
    bool ok = false;  // a whole response frame arrived
    net::FrameHeader h{};
    std::vector<uint8_t> payload;
    std::string msg() const { return std::string(payload.begin(), payload.end()); }
};

Reply read_reply(int fd, int timeout_ms = 2000) {
    Reply r;
    if (!recv_exact(fd, &r.h, sizeof r.h, timeout_ms)) return r;
    if (r.h.magic != net::kResponseMagic || r.h.payload_len > 4096) return r;
    r.payload.resize(r.h.payload_len);
    r.ok = recv_exact(fd, r.payload.data(), r.payload.size(), timeout_ms);
    return r;
}

// True if the peer closes the connection (EOF or reset) within the timeout;
// whatever it still sends before that is discarded.
bool closed_by_peer(int fd, int timeout_ms = 2000) {
    auto t0 = Clock::now();
    while (ms_since(t0) < timeout_ms) {
        pollfd pf{fd, POLLIN, 0};
        if (poll(&pf, 1, 20) <= 0) continue;
        char buf[4096];
        ssize_t r = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) return true;
    }
    return false;
}

// Sends up to `n` junk bytes without blocking for longer than `timeout_ms`;
// stops early when the peer resets the connection. Returns the bytes sent.
size_t send_junk(int fd, size_t n, int timeout_ms) {
    std::vector<uint8_t> chunk(64 * 1024, 0x5A);
    size_t sent = 0;
    auto t0 = Clock::now();
    while (sent < n && ms_since(t0) < timeout_ms) {
        ssize_t w = send(fd, chunk.data(), std::min(chunk.size(), n - sent), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            sent += static_cast<size_t>(w);
            continue;
        }
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            pollfd pf{fd, POLLOUT, 0};
            poll(&pf, 1, 20);
            continue;
        }
        break;  // EPIPE / ECONNRESET: the server closed it
    }
    return sent;
}

bool send_header(int fd, uint16_t op, uint32_t payload_len) {
    net::FrameHeader h{net::kRequestMagic, op, 0, payload_len, 1};
    return send(fd, &h, sizeof h, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof h);
}

std::string write_token_file(const std::string& token) {
    std::string p = "/tmp/dex-limits-token-" + std::to_string(getpid());
    std::ofstream(p) << token;
    return p;
}

}  // namespace

// ---- 1. frames before HELLO --------------------------------------------------

TEST(PreAuthFrames, EngineRejectsAFrameLargerThanAHelloBeforeHello) {
    memnode::EngineOptions o;
    o.pool_bytes = 1 << 20;
    o.try_hugepages = false;
    memnode::Engine e(o);
    // Larger than any HELLO (version, token length, kMaxTokenLen bytes of token):
    // refused by its header alone, before any payload exists.
    uint32_t hello_max = 8 + net::kMaxTokenLen;
    for (uint16_t op : {uint16_t(net::kOpHello), uint16_t(net::kOpWrite)}) {
        net::ClientSession s;
        net::FrameHeader h{net::kRequestMagic, op, 0, hello_max + 1, 1};
        uint16_t status = 0;
        std::vector<uint8_t> resp;
        e.handle(s, h, nullptr, status, resp);
        std::string msg(resp.begin(), resp.end());
        EXPECT_EQ(status, net::kStatusProtocol) << msg;
        EXPECT_TRUE(s.close_after_reply);
        EXPECT_NE(msg.find("before HELLO"), std::string::npos) << msg;
    }
    // The same size after HELLO is an ordinary frame (here: a WRITE whose payload is short).
    InProcTransport t(e);
    uint64_t ns = ns_create(t);
    uint64_t off = alloc(t, ns, 8192);
    std::vector<uint8_t> data(hello_max + 1 - 16, 0x42), back(data.size());
    t.write(off, data.data(), static_cast<uint32_t>(data.size()));
    t.read(off, back.data(), static_cast<uint32_t>(back.size()));
    EXPECT_EQ(data, back);
}

TEST(PreAuthFrames, LargestHelloIsStillAccepted) {
    std::string token(net::kMaxTokenLen, 'k');
    std::string path = write_token_file(token);
    MemnodeProcess node(node_opts({"--token-file", path}));
    unlink(path.c_str());
    ASSERT_GT(node.port(), 0) << node.log();
    TcpTransport t(node.address(), opts(token));
    EXPECT_NE(t.incarnation(), 0u);
    EXPECT_GT(ns_create(t), 0u);
}

TEST(PreAuthFrames, OversizedFrameBeforeHelloClosesTheConnectionAtOnce) {
    MemnodeProcess node(node_opts());
    ASSERT_GT(node.port(), 0) << node.log();
    int fd = raw_connect(node.port());
    ASSERT_GE(fd, 0);
    auto t0 = Clock::now();
    ASSERT_TRUE(send_header(fd, net::kOpHello, 8u << 20));
    // Answered and closed without the server waiting for (or buffering) the 8 MiB.
    Reply r = read_reply(fd);
    ASSERT_TRUE(r.ok) << "no reply within 2 s; log:\n" << node.log();
    EXPECT_EQ(+r.h.op, net::kStatusProtocol) << r.msg();
    EXPECT_NE(r.msg().find("before HELLO"), std::string::npos) << r.msg();
    EXPECT_TRUE(closed_by_peer(fd));
    EXPECT_LT(ms_since(t0), 1000);
    close(fd);
    // A well-behaved client is served as before.
    ASSERT_TRUE(node.alive());
    TcpTransport good(node.address(), opts());
    EXPECT_GT(ns_create(good), 0u);
}

TEST(PreAuthFrames, ClientsAnnouncingHugeFramesDoNotGrowTheServer) {
    MemnodeProcess node(node_opts());
    ASSERT_GT(node.port(), 0) << node.log();
    {
        TcpTransport warm(node.address(), opts());  // both workers' first allocations happen here
        TcpTransport warm2(node.address(), opts());
        ns_create(warm);
        ns_create(warm2);
    }
    usleep(100 * 1000);
    long rss0 = vm_rss_kib(node.pid());
    ASSERT_GT(rss0, 0);

    constexpr int kClients = 8;
    std::vector<int> fds;
    for (int i = 0; i < kClients; i++) {
        int fd = raw_connect(node.port());
        ASSERT_GE(fd, 0);
        fds.push_back(fd);
        ASSERT_TRUE(send_header(fd, net::kOpHello, 16u << 20));
        send_junk(fd, 1u << 20, 1000);  // 1 MiB of the announced 16, or less if cut off
    }
    int closed = 0;
    for (int fd : fds) closed += closed_by_peer(fd, 1000) ? 1 : 0;
    long rss1 = vm_rss_kib(node.pid());  // measured while the clients still hold their sockets
    for (int fd : fds) close(fd);
    EXPECT_EQ(closed, kClients) << "connections left open after announcing a 16 MiB frame before HELLO";
    EXPECT_LT(rss1 - rss0, 4 * 1024) << "VmRSS grew from " << rss0 << " to " << rss1 << " KiB";
    ASSERT_TRUE(node.alive());
    TcpTransport good(node.address(), opts());
    EXPECT_GT(ns_create(good), 0u);
}

// ---- 2. --max-connections -----------------------------------------------------

namespace {

ErrorCode connect_error(Transport& t, std::string* msg, std::string* hint) {
    try {
        t.incarnation();
    } catch (const Error& e) {
        *msg = e.what();
        *hint = e.hint();
        return e.code();
    }
    return ErrorCode::kOk;
}

// Retries `f` for up to `timeout_ms` (the server notices a close asynchronously).
bool eventually(const std::function<bool()>& f, int timeout_ms = 3000) {
    auto t0 = Clock::now();
    while (ms_since(t0) < timeout_ms) {
        if (f()) return true;
        usleep(10 * 1000);
    }
    return false;
}

}  // namespace

TEST(ConnectionCap, FourthConnectionIsRefusedWithAClearErrorUntilOneCloses) {
    MemnodeProcess node(node_opts({"--max-connections", "3"}));
    ASSERT_GT(node.port(), 0) << node.log();
    std::vector<std::unique_ptr<TcpTransport>> held;
    for (int i = 0; i < 3; i++) {
        held.push_back(std::make_unique<TcpTransport>(node.address(), opts()));
        ASSERT_NE(held.back()->incarnation(), 0u);
    }

    TcpTransport fourth(node.address(), opts());
    std::string msg, hint;
    EXPECT_EQ(connect_error(fourth, &msg, &hint), ErrorCode::kUnreachable) << msg;
    EXPECT_NE(msg.find("memory node " + node.address() + " refused the connection: too many connections (3)"),
              std::string::npos)
        << msg;
    EXPECT_NE(hint.find("--max-connections"), std::string::npos) << hint;

    // The same through the C API.
    DexError err{};
    ASSERT_EQ(dex_configure(node.address().c_str(), "", 2000, 5000, &err), DEX_OK) << err.message;
    uint64_t inc = 0;
    EXPECT_EQ(dex_memnode_incarnation(0, &inc, &err), DEX_ERR_UNREACHABLE) << err.message;
    EXPECT_NE(std::string(err.message).find("refused the connection: too many connections (3)"), std::string::npos)
        << err.message;
    EXPECT_NE(std::string(err.hint).find("--max-connections"), std::string::npos) << err.hint;

    // Closing one lets a new one in; the cap holds again after that.
    held[0]->disconnect();
    EXPECT_TRUE(eventually([&] { return connect_error(fourth, &msg, &hint) == ErrorCode::kOk; })) << msg;
    EXPECT_EQ(dex_memnode_incarnation(0, &inc, &err), DEX_ERR_UNREACHABLE) << err.message;
    held[1]->disconnect();
    EXPECT_TRUE(eventually([&] { return dex_memnode_incarnation(0, &inc, &err) == DEX_OK; })) << err.message;
    EXPECT_EQ(inc, fourth.incarnation());
    EXPECT_GT(ns_create(fourth), 0u);
    dex_configure("", "", 1000, 1000, &err);
}

TEST(ConnectionCap, UnauthenticatedConnectionsCountAndRefusalsAreLoggedOncePerSecond) {
    MemnodeProcess node(node_opts({"--max-connections", "2"}));
    ASSERT_GT(node.port(), 0) << node.log();
    // Two connections that never say HELLO occupy the node's two places.
    int a = raw_connect(node.port()), b = raw_connect(node.port());
    ASSERT_GE(a, 0);
    ASSERT_GE(b, 0);
    TcpTransport probe(node.address(), opts());
    std::string msg, hint;
    EXPECT_TRUE(eventually([&] { return connect_error(probe, &msg, &hint) == ErrorCode::kUnreachable; })) << msg;

    // A refused raw connection gets one fatal error frame saying why, then EOF,
    // without having sent anything.
    int c = raw_connect(node.port());
    ASSERT_GE(c, 0);
    Reply r = read_reply(c);
    ASSERT_TRUE(r.ok);
    EXPECT_TRUE(net::is_fatal_status(r.h.op)) << r.h.op;
    EXPECT_NE(r.msg().find("too many connections (2)"), std::string::npos) << r.msg();
    EXPECT_TRUE(closed_by_peer(c));
    close(c);

    // A burst of refusals: at most one log line per second.
    auto t0 = Clock::now();
    for (int i = 0; i < 200; i++) {
        int fd = raw_connect(node.port());
        if (fd >= 0) close(fd);
    }
    long elapsed_s = ms_since(t0) / 1000;
    usleep(200 * 1000);
    std::string log = node.log();
    size_t lines = 0;
    for (size_t at = log.find("refused"); at != std::string::npos; at = log.find("refused", at + 1)) lines++;
    EXPECT_GE(lines, 1u) << log;
    EXPECT_LE(lines, static_cast<size_t>(2 + elapsed_s + 1)) << log;

    close(a);
    EXPECT_TRUE(eventually([&] { return connect_error(probe, &msg, &hint) == ErrorCode::kOk; })) << msg;
    close(b);
    ASSERT_TRUE(node.alive());
}

// ---- 3. NS_LIST paging ----------------------------------------------------------

namespace {

constexpr int kManyNamespaces = 5000;

std::string tag_of(int i) { return "ns-" + std::to_string(i); }

// One NS_LIST page from `start`: the entries, and the start of the next page (0: none).
struct Page {
    std::vector<net::NsInfo> entries;
    uint64_t next = 0;
    size_t reply_bytes = 0;
};

Page ns_list_page(Transport& t, uint64_t start) {
    auto r = t.rpc(net::kOpNsList, &start, 8);
    Page p;
    p.reply_bytes = sizeof(net::FrameHeader) + r.size();
    uint32_t n = as<uint32_t>(r);
    EXPECT_EQ(r.size(), 4 + size_t(n) * sizeof(net::NsInfo) + 8) << "u32 n, n x NsInfo, u64 next";
    if (r.size() != 4 + size_t(n) * sizeof(net::NsInfo) + 8) return p;
    for (uint32_t i = 0; i < n; i++) p.entries.push_back(as<net::NsInfo>(r, 4 + i * sizeof(net::NsInfo)));
    p.next = as<uint64_t>(r, r.size() - 8);
    return p;
}

}  // namespace

TEST(NsListPaging, FiveThousandNamespacesInBoundedPages) {
    memnode::EngineOptions o;
    o.pool_bytes = 1 << 20;
    o.try_hugepages = false;
    memnode::Engine e(o);
    InProcTransport t(e);
    std::vector<uint64_t> ids;
    for (int i = 0; i < kManyNamespaces; i++) ids.push_back(ns_create(t, tag_of(i)));

    std::vector<net::NsInfo> all;
    uint64_t start = 0;
    int pages = 0;
    do {
        Page p = ns_list_page(t, start);
        ASSERT_FALSE(p.entries.empty() && p.next != 0) << "an empty page must be the last";
        // Every reply fits one RDMA message, and with room to spare.
        EXPECT_LT(p.reply_bytes, 64u * 1024);
        EXPECT_LE(p.reply_bytes, net::kRdmaMsgBytes);
        if (!p.entries.empty() && p.next != 0) {
            EXPECT_GT(p.next, p.entries.back().ns);
        }
        all.insert(all.end(), p.entries.begin(), p.entries.end());
        start = p.next;
        ASSERT_LT(++pages, 1000);
    } while (start != 0);
    EXPECT_GT(pages, 1);
    ASSERT_EQ(all.size(), ids.size());
    for (size_t i = 0; i < all.size(); i++) {
        EXPECT_EQ(+all[i].ns, ids[i]);
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(all[i].tag)), tag_of(static_cast<int>(i)));
    }

    // A page may start anywhere, also at an id that was dropped.
    ns_drop(t, ids[100]);
    Page p = ns_list_page(t, ids[100]);
    ASSERT_FALSE(p.entries.empty());
    EXPECT_EQ(+p.entries.front().ns, ids[101]);
    // Past the last id: empty and final.
    p = ns_list_page(t, ids.back() + 1);
    EXPECT_TRUE(p.entries.empty());
    EXPECT_EQ(p.next, 0u);
}

TEST(NsListPaging, CApiListsEveryNamespaceOfARealNode) {
    MemnodeProcess node(node_opts());
    ASSERT_GT(node.port(), 0) << node.log();
    TcpTransport t(node.address(), opts());
    std::vector<uint64_t> ids;
    for (int i = 0; i < kManyNamespaces; i++) ids.push_back(ns_create(t, tag_of(i)));

    DexError err{};
    ASSERT_EQ(dex_configure(node.address().c_str(), "", 2000, 5000, &err), DEX_OK) << err.message;
    DexNsInfo* list = nullptr;
    int n = 0;
    ASSERT_EQ(dex_ns_list(0, &list, &n, &err), DEX_OK) << err.message;
    ASSERT_EQ(n, kManyNamespaces);
    std::set<uint64_t> seen;
    for (int i = 0; i < n; i++) {
        EXPECT_EQ(list[i].ns, ids[i]);
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(list[i].tag)), tag_of(i));
        seen.insert(list[i].ns);
    }
    EXPECT_EQ(seen.size(), ids.size());
    dex_free(list);
    dex_configure("", "", 1000, 1000, &err);
}
