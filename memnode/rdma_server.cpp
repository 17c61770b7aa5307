// dex-memnode RDMA listener. See rdma_server.h and net/rdma_wire.h.
#include "rdma_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include "net/protocol.h"
#include "net/rdma_wire.h"
#include "server.h"

namespace dex::memnode {

using namespace dex::net;

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kSendBit = 1ull << 32;   // wr_id: slot | kSendBit for SENDs
constexpr uint64_t kProbeBit = 1ull << 33;  // wr_id of a liveness probe

// Liveness of RDMA clients (src/README.md "RDMA transport"). A client whose
// host vanished sends no disconnect; only its NIC's silence tells. This
// side's queue pairs retransmit an unacknowledged request (a reply, or a
// probe: a zero-length RDMA WRITE, which the client's NIC acknowledges
// without its CPU and without an rkey, IBTA C9-88) every 4.096 us x
// 2^kAckTimeout = 268 ms and fail it after kRetryCount retries: ~1.9 s for
// the 7 attempts (a NIC may stretch its timer up to 4x: at most ~7.5 s).
// kRetryCount is 6, not 7: Soft-RoCE treats 7 as "retry forever". The
// attributes are set here, on the node's own queue pair, whatever the client
// asks for.
constexpr uint8_t kAckTimeout = 16;
constexpr uint8_t kRetryCount = 6;
// A connection silent this long is probed even if nobody asks about it, so a
// vanished client's place (--max-connections) and buffers are given back
// (the TCP listener's keepalive uses the same idle time).
constexpr auto kKeepaliveIdle = std::chrono::seconds(15);

std::string addr_str(const sockaddr* sa) {
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    socklen_t len = sa->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    if (getnameinfo(sa, len, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        return "?";
    if (sa->sa_family == AF_INET6) return std::string("[") + host + "]:" + serv;
    return std::string(host) + ":" + serv;
}

void set_nonblock(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

struct Worker;

// One client connection. Owned by its worker thread; the CM thread only reads
// `w` and sets `close_queued`.
struct Conn {
    rdma_cm_id* id = nullptr;
    Worker* w = nullptr;
    // Created and driven through its states here, not by librdmacm (id->qp
    // stays null), so that its timeout and retry count are ours.
    ibv_qp* qp = nullptr;
    ibv_cq* cq = nullptr;
    ibv_mr* mr = nullptr;
    uint8_t* buf = nullptr;  // kRdmaDepth receive slots, then kRdmaDepth send slots
    std::string peer;
    ClientSession session;
    std::vector<uint32_t> free_send;
    uint32_t sends_in_flight = 0;
    bool closing = false;          // last reply queued: disconnect once sends drained
    bool dead = false;             // ignore further requests
    bool disconnect_sent = false;
    bool close_queued = false;     // CM thread: close command given to the worker
    bool probe_in_flight = false;  // a liveness probe is posted
    Clock::time_point last_heard = Clock::now();  // last request received or probe answered
    // A disconnect asked for before the CM saw the connection established
    // (the client may send its HELLO before our side has processed the RTU)
    // would be lost: whichever of the two threads comes second issues it.
    std::atomic<bool> established{false};
    std::atomic<bool> want_disconnect{false};
    uint8_t* recv_slot(uint32_t i) { return buf + size_t(i) * kRdmaMsgBytes; }
    uint8_t* send_slot(uint32_t i) { return buf + size_t(kRdmaDepth + i) * kRdmaMsgBytes; }
};

}  // namespace

struct RdmaServer::Impl {
    Engine& engine;
    RdmaServerOptions opts;
    ConnectionLimit& limit;
    rdma_event_channel* ec = nullptr;
    rdma_cm_id* listen_id = nullptr;
    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    ibv_mr* pool_mr = nullptr;
    ibv_device_attr dev_attr{};
    int stop_fd = -1;
    std::thread cm_thread;
    std::vector<std::unique_ptr<Worker>> workers;
    size_t next_worker = 0;
    bool started = false;

    Impl(Engine& e, RdmaServerOptions o, ConnectionLimit& l) : engine(e), opts(std::move(o)), limit(l) {}

    // Authenticated clients -> the worker that serves them (for probes asked
    // for by CLIENT_ALIVE on any thread).
    std::mutex ids_mu;
    std::unordered_map<uint64_t, Worker*> ids;

    void cm_loop();
    void on_connect_request(rdma_cm_id* id, const rdma_conn_param& req);
    bool setup_qp(Conn* c, rdma_conn_param& p, std::string& err);
    void destroy_conn(Conn* c);
    void request_probe(uint64_t client_id);
};

namespace {

struct Worker {
    RdmaServer::Impl& srv;
    int idx;
    ibv_comp_channel* ch = nullptr;
    int evfd = -1;
    std::thread th;
    std::atomic<bool> stop{false};
    std::mutex mu;
    std::deque<std::pair<bool, Conn*>> cmds;  // (close?, conn)
    std::vector<uint64_t> probes;             // client ids to probe
    std::set<Conn*> conns;
    std::unordered_map<uint64_t, Conn*> by_id;  // authenticated conns by client id
    std::vector<uint8_t> resp;
    Clock::time_point last_tick = Clock::now();

    Worker(RdmaServer::Impl& s, int i) : srv(s), idx(i) {}

    void wake() {
        uint64_t one = 1;
        ssize_t r = ::write(evfd, &one, sizeof one);
        (void)r;
    }
    void push(bool close, Conn* c) {
        {
            std::lock_guard<std::mutex> g(mu);
            cmds.emplace_back(close, c);
        }
        wake();
    }
    void push_probe(uint64_t client_id) {
        {
            std::lock_guard<std::mutex> g(mu);
            probes.push_back(client_id);
        }
        wake();
    }

    void loop();
    void take_cmds();
    void keepalive();
    void drain(Conn* c);
    void on_recv(Conn* c, const ibv_wc& wc);
    void on_send(Conn* c, const ibv_wc& wc);
    void on_probe(Conn* c, const ibv_wc& wc);
    void probe(Conn* c);
    void kill(Conn* c, const std::string& why);
    void retire(Conn* c);
    void disconnect(Conn* c);
    bool post_recv(Conn* c, uint32_t slot);
};

// The queue pair stops: the NIC executes nothing more that arrives for it
// (one-sided requests bypass this CPU) and flushes what is posted.
void qp_error(Conn* c) {
    if (!c->qp) return;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    ibv_modify_qp(c->qp, &a, IBV_QP_STATE);
}

// Forgets an authenticated client's place in the probe maps (its worker's thread).
void forget_client(RdmaServer::Impl& srv, Conn* c) {
    uint64_t id = c->session.client_id;
    if (id == 0) return;
    c->w->by_id.erase(id);
    std::lock_guard<std::mutex> g(srv.ids_mu);
    srv.ids.erase(id);
}

void Worker::loop() {
    while (!stop.load()) {
        pollfd p[2] = {{evfd, POLLIN, 0}, {ch->fd, POLLIN, 0}};
        int n = ::poll(p, 2, 1000);  // wakes at least once a second for keepalive()
        if (n < 0) {
            if (errno == EINTR) continue;
            log_line("rdma worker %d: poll: %s", idx, strerror(errno));
            break;
        }
        if (p[0].revents) {
            uint64_t v;
            ssize_t r = ::read(evfd, &v, sizeof v);
            (void)r;
        }
        // Commands first: a connection is added before its first completion can arrive.
        take_cmds();
        if (p[1].revents) {
            ibv_cq* cq;
            void* cq_ctx;
            while (ibv_get_cq_event(ch, &cq, &cq_ctx) == 0) {
                ibv_ack_cq_events(cq, 1);
                Conn* c = static_cast<Conn*>(cq_ctx);
                if (!conns.count(c)) continue;
                ibv_req_notify_cq(c->cq, 0);
                drain(c);
            }
        }
        keepalive();
    }
    take_cmds();
    for (Conn* c : std::vector<Conn*>(conns.begin(), conns.end())) {
        conns.erase(c);
        srv.destroy_conn(c);
    }
}

void Worker::take_cmds() {
    std::deque<std::pair<bool, Conn*>> q;
    std::vector<uint64_t> want;
    {
        std::lock_guard<std::mutex> g(mu);
        q.swap(cmds);
        want.swap(probes);
    }
    for (auto& [close, c] : q) {
        if (!close) {
            conns.insert(c);
            drain(c);  // anything that completed before the add
            continue;
        }
        conns.erase(c);
        srv.destroy_conn(c);
    }
    for (uint64_t id : want) {
        auto it = by_id.find(id);
        if (it != by_id.end()) probe(it->second);
    }
}

// A zero-length RDMA WRITE to the client: its NIC acknowledges it whatever
// its CPU does (busy, stopped), and no acknowledgement within the retry
// budget (kAckTimeout, kRetryCount) fails it -- the host is gone. At most one
// per connection at a time.
void Worker::probe(Conn* c) {
    if (c->dead || c->closing || c->probe_in_flight || !c->qp) return;
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = kProbeBit;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.num_sge = 0;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = 0;
    wr.wr.rdma.rkey = 0;
    if (ibv_post_send(c->qp, &wr, &bad) != 0) {
        if (srv.opts.verbose)
            log_line("rdma client %llu (%s): liveness probe not posted: %s", (unsigned long long)c->session.client_id,
                     c->peer.c_str(), strerror(errno));
        return;
    }
    c->probe_in_flight = true;
}

void Worker::on_probe(Conn* c, const ibv_wc& wc) {
    c->probe_in_flight = false;
    if (wc.status == IBV_WC_SUCCESS) {
        c->last_heard = Clock::now();
        return;
    }
    if (c->dead) return;
    if (wc.status == IBV_WC_WR_FLUSH_ERR) {
        retire(c);
        disconnect(c);
        return;
    }
    // Any failure leaves the queue pair in error: the connection is over.
    kill(c, std::string("liveness probe failed: ") + ibv_wc_status_str(wc.status) +
                (wc.status == IBV_WC_RETRY_EXC_ERR ? " (its host does not answer: the client is gone)" : ""));
}

void Worker::keepalive() {
    auto now = Clock::now();
    if (now - last_tick < std::chrono::seconds(1)) return;
    last_tick = now;
    for (Conn* c : conns)
        if (now - c->last_heard >= kKeepaliveIdle) probe(c);
}

void Worker::drain(Conn* c) {
    ibv_wc wcs[16];
    for (;;) {
        int n = ibv_poll_cq(c->cq, 16, wcs);
        if (n <= 0) {
            if (n < 0) kill(c, "ibv_poll_cq failed");
            return;
        }
        for (int i = 0; i < n; i++) {
            if (wcs[i].wr_id & kProbeBit)
                on_probe(c, wcs[i]);
            else if (wcs[i].wr_id & kSendBit)
                on_send(c, wcs[i]);
            else
                on_recv(c, wcs[i]);
        }
    }
}

bool Worker::post_recv(Conn* c, uint32_t slot) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(c->recv_slot(slot)), kRdmaMsgBytes, c->mr->lkey};
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return ibv_post_recv(c->qp, &wr, &bad) == 0;
}

void Worker::disconnect(Conn* c) {
    if (c->disconnect_sent) return;
    c->disconnect_sent = true;
    qp_error(c);  // (librdmacm does not know our queue pair)
    c->want_disconnect.store(true);
    // The CM thread then sees DISCONNECTED and hands the close back to us.
    if (c->established.load()) rdma_disconnect(c->id);
}

// The client can never act again: nothing it sent is executed any more
// (dead), its queue pair stops, and only then does it count as gone
// (CLIENT_ALIVE; waiters may take its locks over). The connection itself is
// torn down later (destroy_conn), when the CM is done with it -- for a peer
// that vanished, only once our disconnect request times out.
void Worker::retire(Conn* c) {
    c->dead = true;
    qp_error(c);
    forget_client(srv, c);
    srv.engine.session_closed(c->session);
}

void Worker::kill(Conn* c, const std::string& why) {
    if (!c->dead || !c->disconnect_sent)
        log_line("rdma client %llu (%s): %s (closing connection)", (unsigned long long)c->session.client_id, c->peer.c_str(), why.c_str());
    retire(c);
    disconnect(c);
}

void Worker::on_recv(Conn* c, const ibv_wc& wc) {
    if (c->dead) return;
    if (wc.status != IBV_WC_SUCCESS) {
        if (wc.status == IBV_WC_WR_FLUSH_ERR) {
            retire(c);
            disconnect(c);
        } else {
            kill(c, std::string("receive failed: ") + ibv_wc_status_str(wc.status));
        }
        return;
    }
    // Bounded outstanding requests: replies not yet acknowledged by the client
    // occupy send slots. A client that keeps sending without taking its replies
    // would make us queue without bound; it is cut off instead.
    if (c->free_send.empty()) {
        kill(c, "more than " + std::to_string(kRdmaDepth) + " requests outstanding");
        return;
    }
    // The message landed in a fixed, pre-registered slot of kRdmaMsgBytes: a
    // client cannot make us buffer more than that, authenticated or not (the
    // HELLO-size limit before authentication is the engine's, as on TCP).
    c->last_heard = Clock::now();
    uint32_t slot = static_cast<uint32_t>(wc.wr_id);
    const uint8_t* m = c->recv_slot(slot);
    uint32_t len = wc.byte_len;
    FrameHeader h{};
    uint16_t status = kStatusOk;
    bool was_anonymous = c->session.client_id == 0;
    if (len < sizeof h) {
        status = kStatusProtocol;
        std::string msg = "message of " + std::to_string(len) + " bytes is shorter than a frame header";
        resp.assign(msg.begin(), msg.end());
        c->session.close_after_reply = true;
    } else {
        std::memcpy(&h, m, sizeof h);
        if (h.magic == kRequestMagic && h.payload_len != len - sizeof h) {
            status = kStatusProtocol;
            std::string msg = "frame announces " + std::to_string(h.payload_len) + " payload bytes, the message carried " +
                              std::to_string(len - sizeof h);
            resp.assign(msg.begin(), msg.end());
            c->session.close_after_reply = true;
        } else {
            srv.engine.handle(c->session, h, len > sizeof h ? m + sizeof h : nullptr, status, resp);
        }
    }
    if (status == kStatusOk && was_anonymous && c->session.client_id != 0) {
        // HELLO accepted: now, and only now, the client learns where the pool is.
        RdmaHelloExt ext{};
        ext.pool_addr = reinterpret_cast<uintptr_t>(srv.engine.pool_base());
        ext.pool_bytes = srv.engine.pool_bytes();
        ext.rkey = srv.pool_mr->rkey;
        ext.msg_bytes = kRdmaMsgBytes;
        ext.depth = kRdmaDepth;
        size_t o = resp.size();
        resp.resize(o + sizeof ext);
        std::memcpy(resp.data() + o, &ext, sizeof ext);
        by_id[c->session.client_id] = c;
        {
            std::lock_guard<std::mutex> g(srv.ids_mu);
            srv.ids[c->session.client_id] = this;
        }
        if (srv.opts.verbose) log_line("rdma client %llu (%s): authenticated", (unsigned long long)c->session.client_id, c->peer.c_str());
    }
    if (status == kStatusOk && sizeof h + resp.size() > kRdmaMsgBytes) {
        status = kStatusInternal;
        std::string msg = "response of " + std::to_string(resp.size()) + " bytes exceeds the RDMA message size of " +
                          std::to_string(kRdmaMsgBytes) + " bytes";
        resp.assign(msg.begin(), msg.end());
    }
    if (status != kStatusOk)
        log_line("rdma client %llu (%s): %s -> error %u: %s%s", (unsigned long long)c->session.client_id, c->peer.c_str(),
                 Engine::op_name(h.op).c_str(), status, std::string(resp.begin(), resp.end()).c_str(),
                 c->session.close_after_reply ? " (closing connection)" : "");
    uint32_t s = c->free_send.back();
    c->free_send.pop_back();
    FrameHeader rh{kResponseMagic, status, 0, static_cast<uint32_t>(resp.size()), h.seq};
    uint8_t* out = c->send_slot(s);
    std::memcpy(out, &rh, sizeof rh);
    if (!resp.empty()) std::memcpy(out + sizeof rh, resp.data(), resp.size());
    ibv_sge sge{reinterpret_cast<uintptr_t>(out), static_cast<uint32_t>(sizeof rh + resp.size()), c->mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = kSendBit | s;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (ibv_post_send(c->qp, &wr, &bad) != 0) {
        c->free_send.push_back(s);
        kill(c, std::string("ibv_post_send: ") + strerror(errno));
        return;
    }
    c->sends_in_flight++;
    if (c->session.close_after_reply) {
        c->dead = true;
        c->closing = true;
        return;
    }
    if (!post_recv(c, slot)) kill(c, std::string("ibv_post_recv: ") + strerror(errno));
}

void Worker::on_send(Conn* c, const ibv_wc& wc) {
    c->sends_in_flight--;
    c->free_send.push_back(static_cast<uint32_t>(wc.wr_id & 0xffffffffu));
    if (wc.status != IBV_WC_SUCCESS) {
        if (c->dead && c->disconnect_sent) return;
        if (wc.status == IBV_WC_WR_FLUSH_ERR) {
            retire(c);
            disconnect(c);
        } else {
            kill(c, std::string("reply failed: ") + ibv_wc_status_str(wc.status));
        }
        return;
    }
    if (c->closing && c->sends_in_flight == 0) disconnect(c);
}

}  // namespace

void RdmaServer::Impl::destroy_conn(Conn* c) {
    if (opts.verbose)
        log_line("rdma connection from %s closed (client %llu)", c->peer.c_str(), (unsigned long long)c->session.client_id);
    // Nothing this client sent may be executed once it counts as gone
    // (CLIENT_ALIVE lets waiters take its locks over): one-sided requests
    // bypass this CPU, so stop the queue pair before forgetting the client.
    qp_error(c);
    forget_client(*this, c);
    engine.session_closed(c->session);
    if (c->qp) ibv_destroy_qp(c->qp);
    if (c->cq) ibv_destroy_cq(c->cq);
    if (c->mr) ibv_dereg_mr(c->mr);
    std::free(c->buf);
    rdma_destroy_id(c->id);
    delete c;
    limit.release();
}

void RdmaServer::Impl::on_connect_request(rdma_cm_id* id, const rdma_conn_param& req) {
    std::string peer = addr_str(rdma_get_peer_addr(id));
    auto refuse = [&](const std::string& why) {
        log_line("rdma connection from %s refused: %s", peer.c_str(), why.c_str());
        rdma_reject(id, nullptr, 0);
        rdma_destroy_id(id);
    };
    if (id->verbs != ctx) return refuse("it arrived on another RDMA device than the listener's");
    if (!limit.try_acquire()) {
        // Checked before anything is allocated or registered for it.
        RdmaRefusal why{kResponseMagic, kStatusRefused, 0, limit.max()};
        rdma_reject(id, &why, sizeof why);
        rdma_destroy_id(id);
        limit.log_refusal("rdma", peer);
        return;
    }
    auto* c = new Conn();
    c->id = id;
    c->peer = peer;
    Worker* w = workers[next_worker++ % workers.size()].get();
    c->w = w;
    id->context = c;
    auto undo = [&](const std::string& why) {
        if (c->qp) ibv_destroy_qp(c->qp);
        if (c->cq) ibv_destroy_cq(c->cq);
        if (c->mr) ibv_dereg_mr(c->mr);
        std::free(c->buf);
        delete c;
        id->context = nullptr;
        limit.release();
        refuse(why);
    };
    size_t bytes = size_t(2) * kRdmaDepth * kRdmaMsgBytes;
    if (posix_memalign(reinterpret_cast<void**>(&c->buf), 4096, bytes) != 0) {
        c->buf = nullptr;
        return undo("out of memory");
    }
    c->mr = ibv_reg_mr(pd, c->buf, bytes, IBV_ACCESS_LOCAL_WRITE);
    if (!c->mr) return undo(std::string("ibv_reg_mr of the message buffers: ") + strerror(errno));
    c->cq = ibv_create_cq(ctx, 2 * kRdmaDepth + 4, c, w->ch, 0);
    if (!c->cq) return undo(std::string("ibv_create_cq: ") + strerror(errno));
    ibv_req_notify_cq(c->cq, 0);
    ibv_qp_init_attr qa{};
    qa.send_cq = c->cq;
    qa.recv_cq = c->cq;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = kRdmaDepth + 1;  // the replies' send slots and one liveness probe
    qa.cap.max_recv_wr = kRdmaDepth;
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_sge = 1;
    c->qp = ibv_create_qp(pd, &qa);
    if (!c->qp) return undo(std::string("ibv_create_qp: ") + strerror(errno));
    rdma_conn_param p{};
    // Remote READs and atomics the client may have outstanding at our side,
    // and (unused) our own: bounded by what the device supports.
    p.responder_resources = static_cast<uint8_t>(std::min<int>(req.initiator_depth, dev_attr.max_qp_rd_atom));
    p.initiator_depth = static_cast<uint8_t>(std::min<int>(req.responder_resources, dev_attr.max_qp_init_rd_atom));
    p.rnr_retry_count = 7;
    std::string err;
    if (!setup_qp(c, p, err)) return undo(err);
    p.qp_num = c->qp->qp_num;
    w->push(false, c);
    if (rdma_accept(id, &p) != 0) {
        log_line("rdma connection from %s: rdma_accept: %s", peer.c_str(), strerror(errno));
        c->close_queued = true;
        w->push(true, c);
        return;
    }
    if (opts.verbose) log_line("rdma connection from %s accepted (worker %d)", peer.c_str(), w->idx);
}

// What rdma_accept() does for a queue pair librdmacm owns (INIT, RTR, RTS
// with the attributes the CM computed), plus the receive buffers, and our own
// ack timeout and retry count (kAckTimeout, kRetryCount): a vanished client
// must fail our requests within seconds, whatever it asked for.
bool RdmaServer::Impl::setup_qp(Conn* c, rdma_conn_param& p, std::string& err) {
    auto step = [&](ibv_qp_state st, const char* name, const std::function<void(ibv_qp_attr&, int&)>& adjust) {
        ibv_qp_attr a{};
        int mask = 0;
        a.qp_state = st;
        if (rdma_init_qp_attr(c->id, &a, &mask) != 0) {
            err = std::string("rdma_init_qp_attr (") + name + "): " + strerror(errno);
            return false;
        }
        adjust(a, mask);
        if (int e = ibv_modify_qp(c->qp, &a, mask)) {
            err = std::string("ibv_modify_qp (") + name + "): " + strerror(e);
            return false;
        }
        return true;
    };
    if (!step(IBV_QPS_INIT, "INIT", [](ibv_qp_attr&, int&) {})) return false;
    for (uint32_t i = 0; i < kRdmaDepth; i++) {
        c->free_send.push_back(i);
        ibv_sge sge{reinterpret_cast<uintptr_t>(c->recv_slot(i)), kRdmaMsgBytes, c->mr->lkey};
        ibv_recv_wr wr{}, *bad = nullptr;
        wr.wr_id = i;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        if (ibv_post_recv(c->qp, &wr, &bad) != 0) {
            err = std::string("ibv_post_recv: ") + strerror(errno);
            return false;
        }
    }
    ibv_port_attr pa{};
    bool ib = ibv_query_port(ctx, c->id->port_num, &pa) == 0 && pa.link_layer == IBV_LINK_LAYER_INFINIBAND;
    if (!step(IBV_QPS_RTR, "RTR", [&](ibv_qp_attr& a, int& mask) {
            if (ib) mask &= ~0xe00000;  // as librdmacm: bits 21-24 are RoCE-only (rdma_ucm quirk)
            a.max_dest_rd_atomic = p.responder_resources;
        }))
        return false;
    return step(IBV_QPS_RTS, "RTS", [&](ibv_qp_attr& a, int& mask) {
        a.max_rd_atomic = p.initiator_depth;
        a.timeout = kAckTimeout;
        a.retry_cnt = kRetryCount;
        mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT;
    });
}

void RdmaServer::Impl::request_probe(uint64_t client_id) {
    std::lock_guard<std::mutex> g(ids_mu);
    auto it = ids.find(client_id);
    if (it != ids.end()) it->second->push_probe(client_id);  // else: not an RDMA client, or already gone
}

void RdmaServer::Impl::cm_loop() {
    for (;;) {
        pollfd p[2] = {{stop_fd, POLLIN, 0}, {ec->fd, POLLIN, 0}};
        int n = ::poll(p, 2, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            log_line("rdma: poll: %s", strerror(errno));
            return;
        }
        if (p[0].revents) return;
        rdma_cm_event* ev;
        while (rdma_get_cm_event(ec, &ev) == 0) {
            rdma_cm_event_type type = ev->event;
            rdma_cm_id* id = ev->id;
            if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
                rdma_conn_param req = ev->param.conn;
                rdma_ack_cm_event(ev);
                on_connect_request(id, req);
                continue;
            }
            auto* c = id == listen_id ? nullptr : static_cast<Conn*>(id->context);
            rdma_ack_cm_event(ev);
            switch (type) {
                case RDMA_CM_EVENT_ESTABLISHED:
                    if (c) {
                        c->established.store(true);
                        if (c->want_disconnect.load()) rdma_disconnect(id);
                    }
                    break;
                case RDMA_CM_EVENT_DISCONNECTED:
                case RDMA_CM_EVENT_CONNECT_ERROR:
                case RDMA_CM_EVENT_UNREACHABLE:
                case RDMA_CM_EVENT_REJECTED:
                case RDMA_CM_EVENT_DEVICE_REMOVAL:
                    if (c && !c->close_queued) {
                        c->close_queued = true;
                        c->w->push(true, c);
                    } else if (!c && type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
                        log_line("rdma: the RDMA device was removed; the RDMA listener stops");
                        return;
                    }
                    break;
                default: break;
            }
        }
    }
}

RdmaServer::RdmaServer(Engine& engine, RdmaServerOptions opts, ConnectionLimit& limit)
    : impl_(std::make_unique<Impl>(engine, std::move(opts), limit)) {}

RdmaServer::~RdmaServer() { stop(); }

bool RdmaServer::start(std::string& err, std::string& bound) {
    Impl& s = *impl_;
    auto fail = [&](const std::string& m) {
        err = m;
        return false;
    };
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    if (s.opts.host.empty()) return fail("--rdma-listen needs an address of the RDMA device's network interface");
    int g = getaddrinfo(s.opts.host.c_str(), s.opts.port.c_str(), &hints, &res);
    if (g != 0) return fail("cannot resolve " + s.opts.host + ": " + gai_strerror(g));
    s.ec = rdma_create_event_channel();
    if (!s.ec) {
        freeaddrinfo(res);
        return fail(std::string("rdma_create_event_channel: ") + strerror(errno) +
                    " (is an RDMA device present? rdma_ucm loaded?)");
    }
    set_nonblock(s.ec->fd);
    int r = rdma_create_id(s.ec, &s.listen_id, nullptr, RDMA_PS_TCP);
    if (r == 0) r = rdma_bind_addr(s.listen_id, res->ai_addr);
    freeaddrinfo(res);
    if (r != 0) return fail("cannot bind " + s.opts.host + ":" + s.opts.port + ": " + strerror(errno));
    if (!s.listen_id->verbs)
        return fail("no RDMA device has the address " + s.opts.host + " (see ibv_devices and rdma link)");
    s.ctx = s.listen_id->verbs;
    if (ibv_query_device(s.ctx, &s.dev_attr) != 0) return fail(std::string("ibv_query_device: ") + strerror(errno));
    // Lock words are taken with the NIC's atomics by compute servers, and with
    // this CPU's by the engine (CAS/FAA frames, offloaded writes). Both may
    // act on the same word only if the NIC's atomics are atomic with respect
    // to the CPU's (IBV_ATOMIC_GLOB). With IBV_ATOMIC_HCA (most NICs, and
    // Soft-RoCE) they are atomic only among themselves: the engine then
    // executes none (src/README.md "Offloading").
    std::string dev = ibv_get_device_name(s.ctx->device);
    switch (s.dev_attr.atomic_cap) {
        case IBV_ATOMIC_GLOB:
            log_line("RDMA device %s has IBV_ATOMIC_GLOB atomics: CPU atomics (offloaded writes, CAS/FAA over TCP) "
                     "stay enabled",
                     dev.c_str());
            break;
        case IBV_ATOMIC_HCA:
            s.engine.refuse_cpu_atomics("RDMA device " + dev +
                                        " has IBV_ATOMIC_HCA atomics, which are not atomic with respect to "
                                        "this CPU's");
            log_line("RDMA device %s has IBV_ATOMIC_HCA atomics (not atomic with respect to this CPU's): no CPU "
                     "atomics here -- offloaded writes and CAS/FAA over TCP are refused; compute servers must "
                     "connect over rdma://",
                     dev.c_str());
            break;
        default:
            return fail("RDMA device " + dev + " has no remote atomics (atomic_cap IBV_ATOMIC_NONE); the remote "
                        "locks of dex need them");
    }
    s.pd = ibv_alloc_pd(s.ctx);
    if (!s.pd) return fail(std::string("ibv_alloc_pd: ") + strerror(errno));
    // The whole pool, once: every client reaches it with one rkey.
    s.pool_mr = ibv_reg_mr(s.pd, s.engine.pool_base(), s.engine.pool_map_bytes(),
                           IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
                               IBV_ACCESS_REMOTE_ATOMIC);
    if (!s.pool_mr)
        return fail("cannot register the pool (" + std::to_string(s.engine.pool_map_bytes()) +
                    " bytes) with the RDMA device: " + strerror(errno) +
                    (errno == ENOMEM || errno == EPERM ? " (raise the locked-memory limit: ulimit -l unlimited)" : ""));
    // CLIENT_ALIVE about an RDMA client probes its NIC (Worker::probe).
    s.engine.set_liveness_check([&s](uint64_t id) { s.request_probe(id); });
    if (rdma_listen(s.listen_id, 1024) != 0) return fail(std::string("rdma_listen: ") + strerror(errno));
    bound = addr_str(rdma_get_local_addr(s.listen_id));
    s.stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int nw = std::max(1, s.opts.threads);
    for (int i = 0; i < nw; i++) {
        auto w = std::make_unique<Worker>(s, i);
        w->ch = ibv_create_comp_channel(s.ctx);
        w->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (!w->ch || w->evfd < 0) return fail(std::string("ibv_create_comp_channel: ") + strerror(errno));
        set_nonblock(w->ch->fd);
        s.workers.push_back(std::move(w));
    }
    for (auto& w : s.workers) {
        Worker* wp = w.get();
        wp->th = std::thread([wp] { wp->loop(); });
    }
    s.cm_thread = std::thread([&s] { s.cm_loop(); });
    s.started = true;
    return true;
}

void RdmaServer::stop() {
    Impl& s = *impl_;
    s.engine.set_liveness_check(nullptr);  // waits for calls in progress; none push to the workers after this
    if (s.stop_fd >= 0) {
        uint64_t one = 1;
        ssize_t r = ::write(s.stop_fd, &one, sizeof one);
        (void)r;
    }
    if (s.cm_thread.joinable()) s.cm_thread.join();
    for (auto& w : s.workers) {
        w->stop = true;
        uint64_t one = 1;
        ssize_t r = ::write(w->evfd, &one, sizeof one);
        (void)r;
    }
    for (auto& w : s.workers)
        if (w->th.joinable()) w->th.join();
    for (auto& w : s.workers) {
        if (w->ch) ibv_destroy_comp_channel(w->ch);
        if (w->evfd >= 0) ::close(w->evfd);
    }
    s.workers.clear();
    if (s.listen_id) rdma_destroy_id(s.listen_id);
    s.listen_id = nullptr;
    if (s.pool_mr) ibv_dereg_mr(s.pool_mr);
    s.pool_mr = nullptr;
    if (s.pd) ibv_dealloc_pd(s.pd);
    s.pd = nullptr;
    if (s.ec) rdma_destroy_event_channel(s.ec);
    s.ec = nullptr;
    if (s.stop_fd >= 0) ::close(s.stop_fd);
    s.stop_fd = -1;
}

}  // namespace dex::memnode
