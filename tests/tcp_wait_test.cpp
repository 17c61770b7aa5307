// TcpTransport's waits for a reply (recv_some: a blocking recv() bounded by
// SO_RCVTIMEO per slice) against a real dex-memnode behind a proxy that
// delivers replies in pieces, across wait slices, or stalls them: every
// reply split anywhere must be reassembled, and a stalled reply must still
// end by cancel, signal or op timeout.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "common/error.h"
#include "memnode_process.h"
#include "net/protocol.h"
#include "test_util.h"
#include "transport/tcp_transport.h"
#include "wire_test_util.h"

using namespace dex;
using namespace dex::testing::rpc;
using dex::testing::code_of;
using dex::testing::ms_since;
using dex::testing::MemnodeProcess;
using dex::testing::opts;
using Clock = std::chrono::steady_clock;

namespace {

// Accepts one connection and relays it to the memory node. Requests pass at
// once; replies (node -> client) pass in pieces of the sizes in kPieces with a
// pause after each (every third pause longer than the transport's 10 ms wait
// slice), or not at all beyond `budget` bytes (-1: unlimited).
class SlowProxy {
public:
    SlowProxy(int upstream_port, bool dribble) : upstream_port_(upstream_port), dribble_(dribble) {
        lfd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
        listen(lfd_, 4);
        socklen_t l = sizeof a;
        getsockname(lfd_, reinterpret_cast<sockaddr*>(&a), &l);
        port_ = ntohs(a.sin_port);
        thread_ = std::thread([this] { run(); });
    }
    ~SlowProxy() {
        stop_ = true;
        thread_.join();
        close(lfd_);
    }
    std::string address() const { return "tcp://127.0.0.1:" + std::to_string(port_); }
    std::atomic<long> budget{-1};
    std::atomic<long> pieces_sent{0};

private:
    static constexpr size_t kPieces[] = {1, 2, 5, 11, 17, 300, 5000, 70000};

    void run() {
        int c = -1;
        while (!stop_ && c < 0) {
            pollfd p{lfd_, POLLIN, 0};
            if (poll(&p, 1, 10) > 0) c = accept(lfd_, nullptr, nullptr);
        }
        if (c < 0) return;
        int u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(static_cast<uint16_t>(upstream_port_));
        int one = 1;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // every piece its own segment
        if (connect(u, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) relay(c, u);
        close(u);
        close(c);
    }

    void relay(int c, int u) {
        std::vector<uint8_t> pending;  // reply bytes not yet passed on
        size_t next_piece = 0;
        uint8_t buf[65536];
        while (!stop_) {
            pollfd p[2] = {{c, POLLIN, 0}, {u, POLLIN, 0}};
            bool can_send = !pending.empty() && budget.load() != 0;
            if (poll(p, 2, can_send ? 0 : 10) < 0) return;
            if (p[0].revents) {
                ssize_t r = recv(c, buf, sizeof buf, 0);
                if (r <= 0 || send(u, buf, static_cast<size_t>(r), MSG_NOSIGNAL) != r) return;
            }
            if (p[1].revents) {
                ssize_t r = recv(u, buf, sizeof buf, 0);
                if (r <= 0) return;
                pending.insert(pending.end(), buf, buf + r);
            }
            long b = budget.load();
            size_t n = dribble_ ? std::min(pending.size(), kPieces[next_piece % std::size(kPieces)]) : pending.size();
            if (b >= 0) n = std::min(n, static_cast<size_t>(b));
            if (n == 0) continue;
            if (send(c, pending.data(), n, MSG_NOSIGNAL) != static_cast<ssize_t>(n)) return;
            pending.erase(pending.begin(), pending.begin() + static_cast<long>(n));
            if (b >= 0) budget -= static_cast<long>(n);
            pieces_sent++;
            if (dribble_) usleep(next_piece++ % 3 == 2 ? 15000 : 1000);
        }
    }

    int upstream_port_;
    bool dribble_;
    int lfd_ = -1, port_ = 0;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

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

TEST(TcpWait, RepliesSplitIntoPiecesAndAcrossSlicesAreReassembled) {
    MemnodeProcess server;
    ASSERT_NE(server.port(), 0) << server.log();
    SlowProxy proxy(server.port(), true);
    TcpTransport t(proxy.address(), opts(2000, 10000));
    EXPECT_NE(t.incarnation(), 0u);  // the HELLO reply: header and body in separate segments
    uint64_t ns = ns_create(t);
    uint64_t off = alloc(t, ns, 200000);
    // 200000 bytes: larger than the transport's 64 KiB read-ahead (received straight into place)
    std::vector<uint8_t> data(200000), back(200000);
    for (size_t i = 0; i < data.size(); i++) data[i] = static_cast<uint8_t>(i * 7 + (i >> 9));
    t.write(off, data.data(), static_cast<uint32_t>(data.size()));
    t.read(off, back.data(), static_cast<uint32_t>(back.size()));
    EXPECT_EQ(data, back);
    uint64_t v = 10;
    t.write(off, &v, 8);
    EXPECT_EQ(t.cas(off, 10, 20), 10u);
    EXPECT_EQ(t.faa(off, 5), 20u);
    uint64_t r = 0;
    t.read(off, &r, 8);
    EXPECT_EQ(r, 25u);
    EXPECT_GT(proxy.pieces_sent.load(), 20);  // the replies really came in pieces
    EXPECT_TRUE(t.connected());
}

// A reply whose header (and part of the body) arrived but whose rest never
// does: query cancel ends the wait within a few slices.
TEST(TcpWait, CancelDuringAHalfArrivedReplyIsQuick) {
    MemnodeProcess server;
    ASSERT_NE(server.port(), 0) << server.log();
    SlowProxy proxy(server.port(), false);
    HookGuard hook;
    TcpTransport t(proxy.address(), opts(2000, 5000));
    uint64_t ns = ns_create(t);
    uint64_t off = alloc(t, ns, 4096);
    proxy.budget = sizeof(net::FrameHeader) + 100;  // of the 4096-byte read's reply
    std::thread canceler([] {
        usleep(100 * 1000);
        g_cancel = true;
    });
    std::vector<uint8_t> back(4096);
    auto t0 = Clock::now();
    std::string msg;
    EXPECT_EQ(code_of([&] { t.read(off, back.data(), 4096); }, &msg), ErrorCode::kInterrupted);
    canceler.join();
    long el = ms_since(t0);
    EXPECT_GE(el, 90);
    EXPECT_LT(el, 400);
    EXPECT_NE(msg.find("canceled while waiting for memory node"), std::string::npos) << msg;
    EXPECT_FALSE(t.connected());  // the half-read reply is dropped with the connection
}

// The same stall without a cancel: the op timeout ends it, and with
// interrupts held a signal (EINTR out of the blocking recv) does not end it early.
TEST(TcpWait, StalledReplyTimesOutAndSignalsDoNotBreakTheWait) {
    MemnodeProcess server;
    ASSERT_NE(server.port(), 0) << server.log();
    SlowProxy proxy(server.port(), false);
    TcpTransport t(proxy.address(), opts(2000, 300));
    uint64_t ns = ns_create(t);
    uint64_t off = alloc(t, ns, 4096);
    struct sigaction sa {}, old{};
    sa.sa_handler = [](int) {};
    sa.sa_flags = SA_RESTART;  // as PostgreSQL installs its handlers
    sigaction(SIGUSR1, &sa, &old);
    proxy.budget = sizeof(net::FrameHeader);
    pthread_t self = pthread_self();
    std::atomic<bool> done{false};
    std::thread signaler([&] {
        while (!done) {
            pthread_kill(self, SIGUSR1);
            usleep(3000);
        }
    });
    std::vector<uint8_t> back(4096);
    auto t0 = Clock::now();
    std::string msg;
    EXPECT_EQ(code_of([&] { t.read(off, back.data(), 4096); }, &msg), ErrorCode::kTimeout);
    long el = ms_since(t0);
    done = true;
    signaler.join();
    sigaction(SIGUSR1, &old, nullptr);
    EXPECT_GE(el, 290);
    EXPECT_LT(el, 1500);
    EXPECT_NE(msg.find("300 ms"), std::string::npos) << msg;
}

// A signal whose handler requests the cancel (as PostgreSQL's SIGINT handler
// does) ends the wait: the blocking recv returns EINTR and the hook is asked.
TEST(TcpWait, SignalThatRequestsCancelEndsTheWait) {
    MemnodeProcess server;
    ASSERT_NE(server.port(), 0) << server.log();
    SlowProxy proxy(server.port(), false);
    HookGuard hook;
    TcpTransport t(proxy.address(), opts(2000, 5000));
    uint64_t ns = ns_create(t);
    uint64_t off = alloc(t, ns, 4096);
    struct sigaction sa {}, old{};
    sa.sa_handler = [](int) { g_cancel = true; };
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, &old);
    proxy.budget = 0;
    pthread_t self = pthread_self();
    std::thread signaler([self] {
        usleep(100 * 1000);
        pthread_kill(self, SIGUSR1);
    });
    std::vector<uint8_t> back(4096);
    auto t0 = Clock::now();
    EXPECT_EQ(code_of([&] { t.read(off, back.data(), 4096); }), ErrorCode::kInterrupted);
    long el = ms_since(t0);
    signaler.join();
    sigaction(SIGUSR1, &old, nullptr);
    EXPECT_GE(el, 90);
    EXPECT_LT(el, 400);
}
