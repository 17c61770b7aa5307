// dex-memnode TCP server. See server.h.
#include "server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace dex::memnode {

using namespace dex::net;

namespace {

std::mutex g_log_mu;

constexpr size_t kReadChunk = 64 * 1024;
constexpr size_t kOutHighWater = 8u << 20;  // stop reading requests while this much output is queued

std::string peer_name(const sockaddr* sa, socklen_t len) {
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (getnameinfo(sa, len, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        return "?";
    if (sa->sa_family == AF_INET6) return std::string("[") + host + "]:" + serv;
    return std::string(host) + ":" + serv;
}

struct Conn {
    int fd = -1;
    std::string peer;
    ClientSession session;
    std::vector<uint8_t> in;  // [in_start, in_end) unconsumed
    size_t in_start = 0, in_end = 0;
    std::vector<uint8_t> out;  // [out_pos, out.size()) unsent
    size_t out_pos = 0;
    bool closing = false;      // no more requests: flush, then close
    uint32_t interest = 0;     // registered epoll events
    size_t pending_out() const { return out.size() - out_pos; }
};

class Worker {
public:
    Worker(Engine& e, const ServerOptions& o, ConnectionLimit& l, int idx)
        : engine_(e), opts_(o), limit_(l), idx_(idx) {
        epfd_ = epoll_create1(EPOLL_CLOEXEC);
        evfd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (epfd_ < 0 || evfd_ < 0) throw std::runtime_error(std::string("epoll/eventfd: ") + strerror(errno));
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.ptr = nullptr;
        epoll_ctl(epfd_, EPOLL_CTL_ADD, evfd_, &ev);
    }
    ~Worker() {
        if (thread_.joinable()) thread_.join();
        ::close(epfd_);
        ::close(evfd_);
    }
    void start() { thread_ = std::thread([this] { loop(); }); }
    void add(int fd, std::string peer) {
        {
            std::lock_guard<std::mutex> g(mu_);
            pending_.emplace_back(fd, std::move(peer));
        }
        wake();
    }
    void stop() {
        stop_.store(true);
        wake();
    }
    void join() {
        if (thread_.joinable()) thread_.join();
    }

private:
    void wake() {
        uint64_t one = 1;
        ssize_t r = ::write(evfd_, &one, sizeof one);
        (void)r;
    }

    void loop() {
        epoll_event evs[64];
        while (!stop_.load()) {
            int n = epoll_wait(epfd_, evs, 64, -1);
            if (n < 0) {
                if (errno == EINTR) continue;
                log_line("worker %d: epoll_wait: %s", idx_, strerror(errno));
                break;
            }
            for (int i = 0; i < n; i++) {
                if (evs[i].data.ptr == nullptr) {
                    uint64_t v;
                    ssize_t r = ::read(evfd_, &v, sizeof v);
                    (void)r;
                    take_pending();
                    continue;
                }
                Conn* c = static_cast<Conn*>(evs[i].data.ptr);
                if (conns_.find(c->fd) == conns_.end() || conns_[c->fd].get() != c) continue;  // closed this round
                on_event(c, evs[i].events);
            }
        }
        // Shutdown: close everything (queued connections too).
        take_pending();
        std::vector<Conn*> all;
        for (auto& [fd, c] : conns_) all.push_back(c.get());
        for (Conn* c : all) close_conn(c);
    }

    void take_pending() {
        std::vector<std::pair<int, std::string>> p;
        {
            std::lock_guard<std::mutex> g(mu_);
            p.swap(pending_);
        }
        for (auto& [fd, peer] : p) {
            auto c = std::make_unique<Conn>();
            c->fd = fd;
            c->peer = std::move(peer);
            c->in.resize(kReadChunk);
            epoll_event ev{};
            ev.events = EPOLLIN;
            ev.data.ptr = c.get();
            if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) < 0) {
                log_line("epoll_ctl: %s", strerror(errno));
                ::close(fd);
                limit_.release();
                continue;
            }
            c->interest = EPOLLIN;
            if (opts_.verbose) log_line("connection from %s opened (worker %d)", c->peer.c_str(), idx_);
            conns_.emplace(fd, std::move(c));
        }
    }

    void close_conn(Conn* c) {
        epoll_ctl(epfd_, EPOLL_CTL_DEL, c->fd, nullptr);
        ::close(c->fd);
        if (opts_.verbose)
            log_line("connection from %s closed (client %llu)", c->peer.c_str(), (unsigned long long)c->session.client_id);
        engine_.session_closed(c->session);
        conns_.erase(c->fd);  // destroys c
        limit_.release();
    }

    void on_event(Conn* c, uint32_t events) {
        if (events & EPOLLERR) {
            close_conn(c);
            return;
        }
        if (events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) {
            if (!on_readable(c)) return;
        }
        if (c->pending_out() && !flush(c)) return;
        // Output drained below the high-water mark: run requests that waited in the buffer.
        if (!c->closing && c->pending_out() < kOutHighWater) {
            process(c);
            if (c->pending_out() && !flush(c)) return;
        }
        if (c->closing && c->pending_out() == 0) {
            close_conn(c);
            return;
        }
        update_interest(c);
    }

    void update_interest(Conn* c) {
        uint32_t want = 0;
        if (!c->closing && c->pending_out() < kOutHighWater) want |= EPOLLIN;
        if (c->pending_out()) want |= EPOLLOUT;
        if (want != c->interest) {
            epoll_event ev{};
            ev.events = want;
            ev.data.ptr = c;
            epoll_ctl(epfd_, EPOLL_CTL_MOD, c->fd, &ev);
            c->interest = want;
        }
    }

    // Reads what is available and runs complete frames. False if the connection was closed.
    bool on_readable(Conn* c) {
        for (int rounds = 0; rounds < 16 && !c->closing && c->pending_out() < kOutHighWater; rounds++) {
            if (c->in.size() - c->in_end < kReadChunk / 4) {
                // Compact, then grow if still short.
                if (c->in_start > 0) {
                    std::memmove(c->in.data(), c->in.data() + c->in_start, c->in_end - c->in_start);
                    c->in_end -= c->in_start;
                    c->in_start = 0;
                }
                if (c->in.size() - c->in_end < kReadChunk / 4) c->in.resize(c->in.size() + kReadChunk);
            }
            ssize_t r = ::recv(c->fd, c->in.data() + c->in_end, c->in.size() - c->in_end, MSG_DONTWAIT);
            if (r > 0) {
                bool filled = c->in_end + static_cast<size_t>(r) == c->in.size();
                c->in_end += static_cast<size_t>(r);
                process(c);
                if (!filled) break;  // level-triggered epoll reports anything that arrives later
                continue;
            }
            if (r == 0) {
                if (c->in_end > c->in_start && !c->closing) {
                    // Peer half-closed in the middle of a frame: say so, then close.
                    FrameHeader h{};
                    if (c->in_end - c->in_start >= sizeof h) std::memcpy(&h, c->in.data() + c->in_start, sizeof h);
                    std::string msg = "connection closed in the middle of a frame (" +
                                      std::to_string(c->in_end - c->in_start) + " bytes received)";
                    log_line("client %llu (%s): %s", (unsigned long long)c->session.client_id, c->peer.c_str(), msg.c_str());
                    reply(c, h.seq, kStatusProtocol, reinterpret_cast<const uint8_t*>(msg.data()), msg.size());
                }
                c->closing = true;
                if (c->pending_out() == 0) {
                    close_conn(c);
                    return false;
                }
                return flush(c);  // closes once drained
            }
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            if (opts_.verbose) log_line("connection from %s: recv: %s", c->peer.c_str(), strerror(errno));
            close_conn(c);
            return false;
        }
        return true;
    }

    void reply(Conn* c, uint32_t seq, uint16_t status, const uint8_t* p, size_t n) {
        FrameHeader h{kResponseMagic, status, 0, static_cast<uint32_t>(n), seq};
        if (c->out_pos == c->out.size()) {
            c->out.clear();
            c->out_pos = 0;
        }
        size_t o = c->out.size();
        c->out.resize(o + sizeof h + n);
        std::memcpy(c->out.data() + o, &h, sizeof h);
        if (n) std::memcpy(c->out.data() + o + sizeof h, p, n);
    }

    // Runs every complete frame in the input buffer.
    void process(Conn* c) {
        while (!c->closing && c->pending_out() < kOutHighWater) {
            size_t avail = c->in_end - c->in_start;
            if (avail < sizeof(FrameHeader)) break;
            FrameHeader h;
            std::memcpy(&h, c->in.data() + c->in_start, sizeof h);
            const uint8_t* payload = nullptr;
            size_t consumed = sizeof h;
            // Until the HELLO is accepted no frame may be larger than a HELLO:
            // the payload is then neither waited for nor buffered.
            uint32_t max_len = c->session.client_id == 0 ? kMaxHelloPayload : kMaxPayload;
            bool bad_header = h.magic != kRequestMagic || h.payload_len > max_len;
            if (!bad_header) {
                if (avail < sizeof h + h.payload_len) {
                    size_t need = sizeof h + h.payload_len;
                    if (c->in.size() - c->in_start < need) {
                        std::memmove(c->in.data(), c->in.data() + c->in_start, avail);
                        c->in_start = 0;
                        c->in_end = avail;
                        if (c->in.size() < need + kReadChunk) c->in.resize(need + kReadChunk);
                    }
                    break;
                }
                payload = c->in.data() + c->in_start + sizeof h;
                consumed += h.payload_len;
            }
            // A bad header goes to the engine without payload: it rejects it before looking.
            uint16_t status = kStatusOk;
            engine_.handle(c->session, h, payload, status, resp_);
            c->in_start += consumed;
            if (status != kStatusOk) {
                std::string msg(resp_.begin(), resp_.end());
                log_line("client %llu (%s): %s -> error %u: %s%s", (unsigned long long)c->session.client_id, c->peer.c_str(),
                         Engine::op_name(h.op).c_str(), status, msg.c_str(),
                         c->session.close_after_reply ? " (closing connection)" : "");
            }
            reply(c, h.seq, status, resp_.data(), resp_.size());
            if (c->session.close_after_reply) c->closing = true;
        }
        if (c->in_start == c->in_end) c->in_start = c->in_end = 0;
        // Do not keep a huge buffer around after a large frame.
        if (c->in_end == 0 && c->in.size() > 4 * kReadChunk) {
            c->in.resize(kReadChunk);
            c->in.shrink_to_fit();
        }
    }

    // Sends queued output. False if the connection was closed.
    bool flush(Conn* c) {
        while (c->pending_out()) {
            ssize_t w = ::send(c->fd, c->out.data() + c->out_pos, c->pending_out(), MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0) {
                c->out_pos += static_cast<size_t>(w);
                continue;
            }
            if (w < 0 && errno == EINTR) continue;
            if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
            if (opts_.verbose) log_line("connection from %s: send: %s", c->peer.c_str(), strerror(errno));
            close_conn(c);
            return false;
        }
        if (c->out_pos == c->out.size()) {
            c->out.clear();
            c->out_pos = 0;
            if (c->out.capacity() > 4 * kReadChunk) c->out.shrink_to_fit();
        }
        if (c->closing && c->pending_out() == 0) {
            close_conn(c);
            return false;
        }
        return true;
    }

    Engine& engine_;
    const ServerOptions& opts_;
    ConnectionLimit& limit_;
    int idx_;
    int epfd_ = -1, evfd_ = -1;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    std::mutex mu_;
    std::vector<std::pair<int, std::string>> pending_;
    std::unordered_map<int, std::unique_ptr<Conn>> conns_;
    std::vector<uint8_t> resp_;
};

int listen_socket(const ServerOptions& opts, std::string& bound) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* res = nullptr;
    int g = getaddrinfo(opts.host.empty() ? nullptr : opts.host.c_str(), opts.port.c_str(), &hints, &res);
    if (g != 0) {
        log_line("cannot resolve listen address %s:%s: %s", opts.host.c_str(), opts.port.c_str(), gai_strerror(g));
        return -1;
    }
    int fd = -1;
    std::string err = "no usable address";
    for (addrinfo* ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            err = strerror(errno);
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 1024) == 0) break;
        err = strerror(errno);
        ::close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        log_line("cannot listen on %s:%s: %s", opts.host.c_str(), opts.port.c_str(), err.c_str());
        return -1;
    }
    sockaddr_storage ss{};
    socklen_t sl = sizeof ss;
    getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &sl);
    bound = peer_name(reinterpret_cast<sockaddr*>(&ss), sl);
    return fd;
}

// A connection beyond --max-connections: tell it why (a response frame with
// seq 0, before it has sent anything: the reply fits the empty socket buffer,
// so the acceptor never waits) and close it. Nothing is allocated for it.
void refuse(int fd, const std::string& peer, ConnectionLimit& limit) {
    std::string why = limit.refusal_reason();
    std::vector<uint8_t> f(sizeof(FrameHeader) + why.size());
    FrameHeader h{kResponseMagic, kStatusRefused, 0, static_cast<uint32_t>(why.size()), 0};
    std::memcpy(f.data(), &h, sizeof h);
    std::memcpy(f.data() + sizeof h, why.data(), why.size());
    ssize_t w = ::send(fd, f.data(), f.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w;
    // Discard what the client sent already (its HELLO), so that the close is a
    // FIN after our frame, not a reset that could overtake it. Bounded: a
    // client that keeps sending gets the reset.
    char sink[4096];
    for (int i = 0; i < 4 && ::recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++) {
    }
    ::close(fd);
    limit.log_refusal("tcp", peer);
}

}  // namespace

void log_line(const char* fmt, ...) {
    char buf[4096];
    timeval tv;
    gettimeofday(&tv, nullptr);
    tm t;
    localtime_r(&tv.tv_sec, &t);
    int n = static_cast<int>(strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &t));
    n += snprintf(buf + n, sizeof buf - n, ".%03d dex-memnode: ", static_cast<int>(tv.tv_usec / 1000));
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
    va_end(ap);
    n = m < 0 ? n : (n + m < static_cast<int>(sizeof buf) - 1 ? n + m : static_cast<int>(sizeof buf) - 2);
    buf[n++] = '\n';
    std::lock_guard<std::mutex> g(g_log_mu);
    fwrite(buf, 1, n, stderr);
    fflush(stderr);
}

int run_server(Engine& engine, const ServerOptions& opts, ConnectionLimit& limit, const std::string& startup_info) {
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    pthread_sigmask(SIG_BLOCK, &mask, nullptr);  // inherited by the workers
    signal(SIGPIPE, SIG_IGN);
    int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sfd < 0) {
        log_line("signalfd: %s", strerror(errno));
        return 1;
    }

    std::string bound;
    int lfd = listen_socket(opts, bound);
    if (lfd < 0) {
        ::close(sfd);
        return 1;
    }

    std::vector<std::unique_ptr<Worker>> workers;
    for (int i = 0; i < opts.threads; i++) workers.push_back(std::make_unique<Worker>(engine, opts, limit, i));
    for (auto& w : workers) w->start();

    int ep = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = lfd;
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    ev.data.fd = sfd;
    epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);

    log_line("listening on %s (%s)", bound.c_str(), startup_info.c_str());

    size_t next = 0;
    bool running = true;
    while (running) {
        epoll_event evs[8];
        int n = epoll_wait(ep, evs, 8, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            log_line("epoll_wait: %s", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            if (evs[i].data.fd == sfd) {
                signalfd_siginfo si;
                if (::read(sfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
                    log_line("received %s, shutting down", si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
                    running = false;
                }
                continue;
            }
            for (int k = 0; k < 64; k++) {
                sockaddr_storage ss;
                socklen_t sl = sizeof ss;
                int fd = accept4(lfd, reinterpret_cast<sockaddr*>(&ss), &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0) {
                    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) break;
                    log_line("accept: %s", strerror(errno));
                    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) usleep(10000);
                    break;
                }
                std::string peer = peer_name(reinterpret_cast<sockaddr*>(&ss), sl);
                if (!limit.try_acquire()) {
                    refuse(fd, peer, limit);
                    continue;
                }
                int one = 1;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                // A client that vanishes without FIN (host crash, partition) is noticed within
                // ~30 s, so CLIENT_ALIVE reports it gone and its remote locks can be taken over.
                int idle = 15, intvl = 5, cnt = 3;
                setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
                setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
                setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
                setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
                // Keepalive probes only an idle connection: a client that vanished while a
                // reply to it was unacknowledged would hold its locks for TCP's retransmission
                // timeout (~15 min). Bound that too. A live client's kernel acknowledges even
                // when its process is stopped (it has at most a reply or two in flight).
                unsigned int user_timeout_ms = 30000;
                setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms);
                workers[next++ % workers.size()]->add(fd, std::move(peer));
            }
        }
    }

    ::close(lfd);
    for (auto& w : workers) w->stop();
    for (auto& w : workers) w->join();
    workers.clear();
    ::close(ep);
    ::close(sfd);
    net::NodeStats st = engine.stats();
    log_line("stopped (%llu requests served)", static_cast<unsigned long long>(st.requests));
    return 0;
}

}  // namespace dex::memnode
