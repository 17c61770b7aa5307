// TCP transport: every wait is a slice of at most 10 ms that checks
// interrupt_requested() and the deadline. Connecting and sending use a
// nonblocking socket and poll(); receiving a reply is a blocking recv() bounded
// by SO_RCVTIMEO (one system call per wait slice instead of poll() + recv():
// a write round trip is send + recv, see recv_some()).
#include "transport/tcp_transport.h"

#include "transport/address.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/error.h"
#include "transport/frame_client.h"

namespace dex {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kSliceMs = 10;
constexpr size_t kReadAhead = 64 * 1024;

std::string errstr(int e) { return std::strerror(e); }

}  // namespace

struct TcpTransport::Impl final : net::FrameClient {
    std::string host, port, addr;  // addr = "tcp://host:port"
    TransportOptions opts;
    int fd = -1;
    bool ready = false;
    uint64_t incarnation = 0, first_incarnation = 0;
    uint64_t client_id = 0;
    uint32_t hello_flags = 0;  // of the current connection's HELLO reply
    // Read-ahead buffer: [rpos, rend) holds received, unconsumed bytes.
    std::vector<uint8_t> rbuf = std::vector<uint8_t>(kReadAhead);
    size_t rpos = 0, rend = 0;

    ~Impl() override { close_fd(); }

    void close_fd() {
        if (fd >= 0) ::close(fd);
        fd = -1;
        ready = false;
        client_id = 0;
        rpos = rend = 0;
    }

    [[noreturn]] void fail(ErrorCode code, const std::string& msg, const std::string& hint = {}) {
        close_fd();
        throw Error(code, msg, hint);
    }

    std::string start_hint() const { return "Start one with: dex-memnode --listen " + host_port() + " --memory 2GB"; }
    std::string host_port() const {
        return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + port;
    }

    // Throws if the wait must end (interrupt, deadline passed); else the length of
    // the next wait slice in ms (at most kSliceMs). `connecting` selects kUnreachable for timeouts.
    int next_slice(Clock::time_point deadline, bool connecting) {
        if (interrupt_requested()) fail(ErrorCode::kInterrupted, "canceled while waiting for memory node " + addr);
        auto now = Clock::now();
        if (now >= deadline) {
            if (connecting)
                fail(ErrorCode::kUnreachable,
                     "could not connect to memory node " + addr + ": timed out after " +
                         std::to_string(opts.connect_timeout_ms) + " ms",
                     start_hint());
            fail(ErrorCode::kTimeout,
                 "memory node " + addr + " did not answer within " + std::to_string(opts.op_timeout_ms) + " ms",
                 "Check that dex-memnode is running and reachable; dex.op_timeout bounds every remote operation.");
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
        return left < kSliceMs ? static_cast<int>(left) : kSliceMs;
    }

    // Waits for `events` on fd until the deadline; checks the interrupt hook every slice.
    void wait_fd(short events, Clock::time_point deadline, bool connecting) {
        for (;;) {
            int slice = next_slice(deadline, connecting);
            pollfd p{fd, events, 0};
            int r = ::poll(&p, 1, slice);
            if (r > 0) return;  // ready, or error/hangup: the next syscall reports it
            if (r < 0 && errno != EINTR)
                fail(ErrorCode::kUnreachable, "connection to memory node " + addr + " lost: poll: " + errstr(errno));
        }
    }

    void connect_sock() {
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* res = nullptr;
        int g = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
        if (g != 0)
            throw Error(ErrorCode::kUnreachable,
                        "could not connect to memory node " + addr + ": cannot resolve host \"" + host +
                            "\": " + gai_strerror(g),
                        start_hint());
        auto deadline = Clock::now() + std::chrono::milliseconds(opts.connect_timeout_ms);
        std::string last_err = "no usable address";
        try {
            for (addrinfo* ai = res; ai; ai = ai->ai_next) {
                fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
                if (fd < 0) {
                    last_err = errstr(errno);
                    continue;
                }
                int one = 1;
                ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                int r = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
                if (r < 0 && errno == EINPROGRESS) {
                    wait_fd(POLLOUT, deadline, true);
                    int err = 0;
                    socklen_t el = sizeof err;
                    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
                    r = err ? -1 : 0;
                    errno = err;
                }
                if (r == 0) break;
                last_err = errstr(errno);
                close_fd();
            }
        } catch (...) {
            ::freeaddrinfo(res);
            throw;
        }
        ::freeaddrinfo(res);
        if (fd < 0) fail(ErrorCode::kUnreachable, "could not connect to memory node " + addr + ": " + last_err, start_hint());
        // Receives block, at most one slice each (recv_some); sends stay nonblocking (MSG_DONTWAIT).
        timeval tv{0, kSliceMs * 1000};
        int fl = ::fcntl(fd, F_GETFL);
        if (fl < 0 || ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0 ||
            ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0)
            fail(ErrorCode::kUnreachable, "could not set up the connection to memory node " + addr + ": " + errstr(errno));
    }

    void ensure_ready() override {
        if (ready) return;
        close_fd();
        connect_sock();
        ready = true;
        net::HelloReply r;
        try {
            r = hello(opts.token);
        } catch (...) {
            close_fd();
            throw;
        }
        client_id = r.client_id;
        hello_flags = r.flags;
        incarnation = r.incarnation;
        if (first_incarnation == 0) first_incarnation = r.incarnation;
        note_incarnation(r.incarnation);
    }

    void send_all(const uint8_t* p, size_t n, Clock::time_point deadline) {
        while (n > 0) {
            ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0) {
                p += w;
                n -= static_cast<size_t>(w);
                continue;
            }
            if (w < 0 && errno == EINTR) continue;
            if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                wait_fd(POLLOUT, deadline, false);
                continue;
            }
            fail(ErrorCode::kUnreachable, "connection to memory node " + addr + " lost: " + errstr(errno));
        }
    }

    // Receives what has arrived (at least one byte) into [into, into + cap). A slice
    // of at least kSliceMs is one blocking recv() that SO_RCVTIMEO ends after
    // kSliceMs (EAGAIN) and a signal ends early (EINTR: SO_RCVTIMEO makes the
    // kernel not restart it, so query cancel is seen at once); a shorter last
    // slice before the deadline is a poll(). Either way the interrupt hook and
    // the deadline are checked between slices, as for every other wait.
    size_t recv_some(uint8_t* into, size_t cap, Clock::time_point deadline) {
        for (;;) {
            int slice = next_slice(deadline, false);
            int flags = 0;
            if (slice < kSliceMs) {
                pollfd p{fd, POLLIN, 0};
                int pr = ::poll(&p, 1, slice);
                if (pr == 0 || (pr < 0 && errno == EINTR)) continue;
                if (pr < 0) fail(ErrorCode::kUnreachable, "connection to memory node " + addr + " lost: poll: " + errstr(errno));
                flags = MSG_DONTWAIT;
            }
            ssize_t r = ::recv(fd, into, cap, flags);
            if (r > 0) return static_cast<size_t>(r);
            if (r == 0) fail(ErrorCode::kUnreachable, "connection to memory node " + addr + " lost: server closed the connection");
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
            fail(ErrorCode::kUnreachable, "connection to memory node " + addr + " lost: " + errstr(errno));
        }
    }

    // Receives exactly n bytes into dst (read-ahead buffered).
    void recv_exact(uint8_t* dst, size_t n, Clock::time_point deadline) {
        for (;;) {
            size_t have = rend - rpos;
            size_t take = have < n ? have : n;
            if (take) {
                std::memcpy(dst, rbuf.data() + rpos, take);
                rpos += take;
                dst += take;
                n -= take;
            }
            if (n == 0) return;
            rpos = rend = 0;
            // Large remainders go straight to the destination; small ones via the buffer
            // (a whole reply, header and payload, usually arrives in one recv).
            if (n >= rbuf.size()) {
                size_t r = recv_some(dst, n, deadline);
                dst += r;
                n -= r;
                if (n == 0) return;
            } else {
                rend = recv_some(rbuf.data(), rbuf.size(), deadline);
            }
        }
    }

    uint16_t exchange(const std::vector<uint8_t>& req, std::vector<uint8_t>& resp) override {
        auto deadline = Clock::now() + std::chrono::milliseconds(opts.op_timeout_ms);
        rpos = rend = 0;  // one request in flight: nothing stale may remain
        send_all(req.data(), req.size(), deadline);
        net::FrameHeader rq, h;
        std::memcpy(&rq, req.data(), sizeof rq);
        recv_exact(reinterpret_cast<uint8_t*>(&h), sizeof h, deadline);
        // A node at --max-connections answers the new connection with seq 0 before reading anything.
        bool refusal = h.seq == 0 && h.op == net::kStatusRefused;
        if (h.magic != net::kResponseMagic || (h.seq != rq.seq && !refusal) || h.payload_len > net::kMaxPayload)
            fail(ErrorCode::kProtocol, "memory node " + addr + " sent a malformed response frame");
        resp.resize(h.payload_len);
        recv_exact(resp.data(), h.payload_len, deadline);
        return h.op;
    }

    void drop_session() override { close_fd(); }
    const std::string& peer() const override { return addr; }
};

TcpTransport::TcpTransport(std::string address, TransportOptions opts) : impl_(std::make_unique<Impl>()) {
    HostPort hp = parse_host_port(address, "tcp", "tcp://127.0.0.1:7400");
    impl_->host = hp.host;
    impl_->port = hp.port;
    impl_->opts = std::move(opts);
    if (impl_->opts.connect_timeout_ms <= 0) impl_->opts.connect_timeout_ms = 1;
    if (impl_->opts.op_timeout_ms <= 0) impl_->opts.op_timeout_ms = 1;
    address_ = "tcp://" + impl_->host_port();
    impl_->addr = address_;
}

TcpTransport::~TcpTransport() = default;

uint64_t TcpTransport::incarnation() {
    impl_->ensure_ready();
    impl_->acknowledge_incarnation();
    return impl_->incarnation;
}

uint64_t TcpTransport::client_id() {
    impl_->ensure_ready();
    return impl_->client_id;
}

bool TcpTransport::offload_writes_allowed() {
    impl_->ensure_ready();
    return (impl_->hello_flags & net::kHelloCpuAtomics) != 0;
}

bool TcpTransport::offload_batch_allowed() {
    impl_->ensure_ready();
    return net::offload_batch_usable(impl_->hello_flags);
}

bool TcpTransport::offload_bytes_allowed() {
    impl_->ensure_ready();
    return (impl_->hello_flags & net::kHelloOffloadBytes) != 0;
}

bool TcpTransport::offload_bytes_batch_allowed() {
    impl_->ensure_ready();
    return net::offload_bytes_batch_usable(impl_->hello_flags);
}

bool TcpTransport::offload_split_allowed() {
    impl_->ensure_ready();
    return net::offload_split_usable(impl_->hello_flags);
}

bool TcpTransport::offload_split_image_allowed() {
    impl_->ensure_ready();
    return net::offload_split_image_usable(impl_->hello_flags);
}

bool TcpTransport::offload_bytes_split_allowed() {
    impl_->ensure_ready();
    return net::offload_bytes_split_usable(impl_->hello_flags);
}

bool TcpTransport::offload_bytes_batch_split_allowed() {
    impl_->ensure_ready();
    return net::offload_bytes_batch_split_usable(impl_->hello_flags);
}

bool TcpTransport::offload_bytes_dirty_split_allowed() {
    impl_->ensure_ready();
    return net::offload_bytes_dirty_split_usable(impl_->hello_flags);
}

bool TcpTransport::offload_bytes_split_image_allowed() {
    impl_->ensure_ready();
    return net::offload_bytes_split_image_usable(impl_->hello_flags);
}

bool TcpTransport::offload_kill_allowed() {
    impl_->ensure_ready();
    return net::offload_kill_usable(impl_->hello_flags);
}

bool TcpTransport::offload_dirty_split_allowed() {
    impl_->ensure_ready();
    return net::offload_dirty_split_usable(impl_->hello_flags);
}

bool TcpTransport::split_spare_allowed() {
    impl_->ensure_ready();
    return net::split_spare_usable(impl_->hello_flags);
}

bool TcpTransport::split_parent_allowed() {
    impl_->ensure_ready();
    return net::split_parent_usable(impl_->hello_flags);
}

bool TcpTransport::offload_batch_split_allowed() {
    impl_->ensure_ready();
    return net::offload_batch_split_usable(impl_->hello_flags);
}

uint64_t TcpTransport::connected_client_id() { return impl_->ready && impl_->fd >= 0 ? impl_->client_id : 0; }

void TcpTransport::read(uint64_t offset, void* dst, uint32_t len) { impl_->read(offset, dst, len); }
void TcpTransport::write(uint64_t offset, const void* src, uint32_t len) { impl_->write(offset, src, len); }
uint64_t TcpTransport::cas(uint64_t offset, uint64_t expected, uint64_t desired) {
    return impl_->cas(offset, expected, desired);
}
uint64_t TcpTransport::faa(uint64_t offset, uint64_t add) { return impl_->faa(offset, add); }
void TcpTransport::batch(RemoteOp* ops, size_t n) { impl_->batch(ops, n); }
std::vector<uint8_t> TcpTransport::rpc(net::Op op, const void* payload, uint32_t len) {
    return impl_->rpc(op, payload, len);
}

void TcpTransport::disconnect() { impl_->close_fd(); }
bool TcpTransport::connected() const { return impl_->ready && impl_->fd >= 0; }

}  // namespace dex
