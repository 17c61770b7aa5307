// See rdma_endpoint.h.
#include "transport/rdma_endpoint.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "net/rdma_wire.h"
#include "transport/frame_client.h"
#include "transport/transport.h"

namespace dex::rdma {

namespace {

constexpr int kSliceMs = 10;
constexpr auto kSpin = std::chrono::microseconds(200);  // busy-poll this long before sleeping on the channel
constexpr uint32_t kSendDepth = kMaxChain + 4;

std::string errstr(int e) { return std::strerror(e); }

const char* cm_event_name(rdma_cm_event_type t) { return rdma_event_str(t); }

// The RdmaRefusal a node at --max-connections rejects us with, if that is what
// this REJECTED event carries (IB pads the private data: only a prefix counts).
bool refusal_of(const rdma_cm_event& ev, net::RdmaRefusal& r) {
    const rdma_conn_param& p = ev.param.conn;
    if (ev.event != RDMA_CM_EVENT_REJECTED || !p.private_data || p.private_data_len < sizeof r) return false;
    std::memcpy(&r, p.private_data, sizeof r);
    return r.magic == net::kResponseMagic && r.status == net::kStatusRefused;
}

}  // namespace

uint8_t* RdmaEndpoint::recv_buf(uint32_t slot) const { return msg_ + size_t(1 + slot) * net::kRdmaMsgBytes; }

bool RdmaEndpoint::post_recv(uint32_t slot) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(recv_buf(slot)), net::kRdmaMsgBytes, msg_mr_->lkey};
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return ibv_post_recv(id_->qp, &wr, &bad) == 0;
}

uint32_t RdmaEndpoint::ext_lkey(const void* p, size_t len) const {
    if (!ext_mr_) return 0;
    auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(ext_mr_->addr);
    if (a < b || a - b > ext_mr_->length || len > ext_mr_->length - (a - b)) return 0;
    return ext_mr_->lkey;
}

void RdmaEndpoint::register_ext(void* base, size_t len) {
    if (!pd_) return;
    if (ext_mr_) ibv_dereg_mr(ext_mr_);
    ext_mr_ = nullptr;
    // Local access only: the memory node never touches our memory.
    if (base && len) ext_mr_ = ibv_reg_mr(pd_, base, len, IBV_ACCESS_LOCAL_WRITE);
}

void RdmaEndpoint::wait_cm(rdma_cm_event_type want, Clock::time_point deadline, const char* step) {
    for (;;) {
        if (interrupt_requested())
            throw Error(ErrorCode::kInterrupted, "canceled while waiting for memory node " + addr_);
        auto now = Clock::now();
        if (now >= deadline)
            throw Error(ErrorCode::kUnreachable,
                        "could not connect to memory node " + addr_ + ": timed out during " + step,
                        "Check that dex-memnode runs with --rdma-listen on that address.");
        rdma_cm_event* ev = nullptr;
        if (rdma_get_cm_event(ec_, &ev) == 0) {
            rdma_cm_event_type got = ev->event;
            int status = ev->status;
            net::RdmaRefusal refusal{};
            bool refused = refusal_of(*ev, refusal);  // private data is gone after the ack
            rdma_ack_cm_event(ev);
            if (got == want) return;
            if (refused) net::throw_refused(addr_, net::refusal_reason(refusal.max_connections));
            std::string why = std::string(cm_event_name(got)) + (status ? " (status " + std::to_string(status) + ")" : "");
            if (got == RDMA_CM_EVENT_REJECTED) why = "connection refused (no dex-memnode --rdma-listen there?)";
            throw Error(ErrorCode::kUnreachable, "could not connect to memory node " + addr_ + ": " + step + ": " + why,
                        "Start one with: dex-memnode --rdma-listen HOST:PORT --token-file FILE");
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            throw Error(ErrorCode::kUnreachable, "could not connect to memory node " + addr_ + ": rdma_get_cm_event: " + errstr(errno));
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
        pollfd p{ec_->fd, POLLIN, 0};
        ::poll(&p, 1, left < kSliceMs ? static_cast<int>(left) : kSliceMs);
    }
}

void RdmaEndpoint::open(const std::string& host, const std::string& port, int connect_timeout_ms, void* ext_base,
                        size_t ext_len) {
    close();
    pid_ = getpid();
    auto deadline = Clock::now() + std::chrono::milliseconds(connect_timeout_ms);
    auto setup_fail = [&](const std::string& what) -> void {
        int e = errno;
        throw Error(ErrorCode::kUnreachable, "could not connect to memory node " + addr_ + ": " + what + ": " + errstr(e),
                    e == ENOMEM || e == EPERM ? "Raise the locked-memory limit (ulimit -l) of the server process."
                                              : "Is an RDMA device present (ibv_devices) and rdma_ucm loaded?");
    };
    try {
        addrinfo hints{}, *res = nullptr;
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        int g = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
        if (g != 0)
            throw Error(ErrorCode::kUnreachable, "could not connect to memory node " + addr_ + ": cannot resolve host \"" +
                                                     host + "\": " + gai_strerror(g));
        sockaddr_storage dst{};
        std::memcpy(&dst, res->ai_addr, res->ai_addrlen);
        freeaddrinfo(res);

        ec_ = rdma_create_event_channel();
        if (!ec_) setup_fail("rdma_create_event_channel");
        fcntl(ec_->fd, F_SETFL, fcntl(ec_->fd, F_GETFL) | O_NONBLOCK);
        if (rdma_create_id(ec_, &id_, nullptr, RDMA_PS_TCP) != 0) {
            id_ = nullptr;
            setup_fail("rdma_create_id");
        }
        int tmo = std::max(1, connect_timeout_ms);
        if (rdma_resolve_addr(id_, nullptr, reinterpret_cast<sockaddr*>(&dst), tmo) != 0) setup_fail("rdma_resolve_addr");
        wait_cm(RDMA_CM_EVENT_ADDR_RESOLVED, deadline, "address resolution");
        if (rdma_resolve_route(id_, tmo) != 0) setup_fail("rdma_resolve_route");
        wait_cm(RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, "route resolution");

        ibv_context* ctx = id_->verbs;
        pd_ = ibv_alloc_pd(ctx);
        if (!pd_) setup_fail("ibv_alloc_pd");
        cch_ = ibv_create_comp_channel(ctx);
        if (!cch_) setup_fail("ibv_create_comp_channel");
        fcntl(cch_->fd, F_SETFL, fcntl(cch_->fd, F_GETFL) | O_NONBLOCK);
        cq_ = ibv_create_cq(ctx, kSendDepth + kRecvSlots + 4, nullptr, cch_, 0);
        if (!cq_) setup_fail("ibv_create_cq");
        ibv_qp_init_attr qa{};
        qa.send_cq = cq_;
        qa.recv_cq = cq_;
        qa.qp_type = IBV_QPT_RC;
        qa.sq_sig_all = 0;  // only the last work request of a chain is signaled
        qa.cap.max_send_wr = kSendDepth;
        qa.cap.max_recv_wr = kRecvSlots;
        qa.cap.max_send_sge = 1;
        qa.cap.max_recv_sge = 1;
        if (rdma_create_qp(id_, pd_, &qa) != 0) setup_fail("rdma_create_qp");
        qp_created_ = true;

        if (posix_memalign(reinterpret_cast<void**>(&bounce_), 4096, kBounceBytes) != 0) {
            bounce_ = nullptr;
            errno = ENOMEM;
            setup_fail("bounce buffer");
        }
        bounce_mr_ = ibv_reg_mr(pd_, bounce_, kBounceBytes, IBV_ACCESS_LOCAL_WRITE);
        if (!bounce_mr_) setup_fail("ibv_reg_mr (bounce buffer)");
        size_t mbytes = size_t(1 + kRecvSlots) * net::kRdmaMsgBytes;
        if (posix_memalign(reinterpret_cast<void**>(&msg_), 4096, mbytes) != 0) {
            msg_ = nullptr;
            errno = ENOMEM;
            setup_fail("message buffers");
        }
        msg_mr_ = ibv_reg_mr(pd_, msg_, mbytes, IBV_ACCESS_LOCAL_WRITE);
        if (!msg_mr_) setup_fail("ibv_reg_mr (message buffers)");
        register_ext(ext_base, ext_len);
        for (uint32_t i = 0; i < kRecvSlots; i++)
            if (!post_recv(i)) setup_fail("ibv_post_recv");

        ibv_device_attr da{};
        ibv_query_device(ctx, &da);
        rdma_conn_param cp{};
        // READs and atomics this QP may have in flight (a chain can hold several).
        cp.initiator_depth = static_cast<uint8_t>(std::min(16, std::max(1, da.max_qp_init_rd_atom)));
        cp.responder_resources = static_cast<uint8_t>(std::min(16, std::max(1, da.max_qp_rd_atom)));
        cp.retry_count = 7;
        cp.rnr_retry_count = 7;
        if (rdma_connect(id_, &cp) != 0) setup_fail("rdma_connect");
        wait_cm(RDMA_CM_EVENT_ESTABLISHED, deadline, "connection setup");
        require_whole_node_writes();
    } catch (...) {
        close();
        throw;
    }
}

// A node is written by one WRITE of at most 1 KiB - 8 bytes. If it fits one
// packet, the responder checks the packet before placing it: the write lands
// whole or not at all, even if this process dies mid-send. Smaller packets
// could leave a torn node behind a dead lock holder (src/README.md "Torn writes").
void RdmaEndpoint::require_whole_node_writes() {
    ibv_qp_attr a{};
    ibv_qp_init_attr ia{};
    if (ibv_query_qp(id_->qp, &a, IBV_QP_PATH_MTU, &ia) != 0)
        throw Error(ErrorCode::kUnreachable, "could not connect to memory node " + addr_ + ": ibv_query_qp: " + errstr(errno));
    if (a.path_mtu < IBV_MTU_1024) {
        int bytes = 128 << static_cast<int>(a.path_mtu);
        throw Error(ErrorCode::kUnreachable,
                    "rdma path to memory node " + addr_ + " has an MTU of " + std::to_string(bytes) +
                        " bytes; dex needs at least 1024 (a node write must travel as one packet)",
                    "Raise the MTU of the RDMA interfaces (e.g. ip link set <dev> mtu 1500 for RoCE).");
    }
}

void RdmaEndpoint::close() {
    if (!ec_ && !id_) return;
    if (pid_ != getpid()) {
        // Forked child: these objects live in the parent's device context; destroying
        // them here would tear down the parent's connection. Forget them.
        ec_ = nullptr;
        id_ = nullptr;
        pd_ = nullptr;
        cch_ = nullptr;
        cq_ = nullptr;
        bounce_ = msg_ = nullptr;
        bounce_mr_ = msg_mr_ = ext_mr_ = nullptr;
        qp_created_ = false;
        return;
    }
    if (id_ && qp_created_) rdma_disconnect(id_);
    if (id_ && qp_created_) rdma_destroy_qp(id_);
    qp_created_ = false;
    if (ext_mr_) ibv_dereg_mr(ext_mr_);
    if (msg_mr_) ibv_dereg_mr(msg_mr_);
    if (bounce_mr_) ibv_dereg_mr(bounce_mr_);
    ext_mr_ = msg_mr_ = bounce_mr_ = nullptr;
    std::free(msg_);
    std::free(bounce_);
    msg_ = bounce_ = nullptr;
    if (cq_) ibv_destroy_cq(cq_);
    cq_ = nullptr;
    if (cch_) ibv_destroy_comp_channel(cch_);
    cch_ = nullptr;
    if (pd_) ibv_dealloc_pd(pd_);
    pd_ = nullptr;
    if (id_) rdma_destroy_id(id_);
    id_ = nullptr;
    if (ec_) rdma_destroy_event_channel(ec_);
    ec_ = nullptr;
}

void RdmaEndpoint::wait(ibv_wc& wc, Clock::time_point deadline, int op_timeout_ms) {
    auto start = Clock::now();
    bool armed = false;
    for (unsigned spins = 0;; spins++) {
        int n = ibv_poll_cq(cq_, 1, &wc);
        if (n > 0) return;
        if (n < 0) throw Error(ErrorCode::kProtocol, "connection to memory node " + addr_ + " failed: ibv_poll_cq");
        if ((spins & 63) != 0 && Clock::now() - start < kSpin) continue;
        if (interrupt_requested())
            throw Error(ErrorCode::kInterrupted, "canceled while waiting for memory node " + addr_);
        auto now = Clock::now();
        if (now >= deadline)
            throw Error(ErrorCode::kTimeout,
                        "memory node " + addr_ + " did not answer within " + std::to_string(op_timeout_ms) + " ms",
                        "Check that dex-memnode is running and reachable; dex.op_timeout bounds every remote operation.");
        // The memory node going away shows up here first (DISCONNECTED), long
        // before the queue pair's retries give up.
        rdma_cm_event* ev = nullptr;
        if (rdma_get_cm_event(ec_, &ev) == 0) {
            rdma_cm_event_type t = ev->event;
            rdma_ack_cm_event(ev);
            if (t == RDMA_CM_EVENT_DISCONNECTED || t == RDMA_CM_EVENT_DEVICE_REMOVAL || t == RDMA_CM_EVENT_TIMEWAIT_EXIT)
                throw Error(ErrorCode::kUnreachable, "connection to memory node " + addr_ + " lost: " +
                                                         (t == RDMA_CM_EVENT_DEVICE_REMOVAL
                                                              ? std::string("the RDMA device was removed")
                                                              : std::string("the memory node closed the connection")));
        }
        if (Clock::now() - start < kSpin) continue;
        // Sleep on the completion channel (and the CM channel) in short slices.
        if (!armed) {
            ibv_req_notify_cq(cq_, 0);
            armed = true;
            continue;  // poll once more: a completion may have arrived before arming
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
        pollfd p[2] = {{cch_->fd, POLLIN, 0}, {ec_->fd, POLLIN, 0}};
        ::poll(p, 2, left < kSliceMs ? static_cast<int>(left) : kSliceMs);
        if (p[0].revents) {
            ibv_cq* cq;
            void* ctx;
            while (ibv_get_cq_event(cch_, &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
            armed = false;
        }
    }
}

void RdmaEndpoint::fail_completion(const ibv_wc& wc, const std::string& what) {
    std::string st = ibv_wc_status_str(wc.status);
    switch (wc.status) {
        case IBV_WC_RETRY_EXC_ERR:
        case IBV_WC_RNR_RETRY_EXC_ERR:
        case IBV_WC_WR_FLUSH_ERR:
            throw Error(ErrorCode::kUnreachable,
                        "connection to memory node " + addr_ + " lost during " + what + ": " + st,
                        "Check that dex-memnode is running; the queue pair is re-created on the next use.");
        default:
            throw Error(ErrorCode::kProtocol,
                        "memory node " + addr_ + " failed " + what + ": queue pair error: " + st,
                        "The queue pair is re-created on the next use.");
    }
}

}  // namespace dex::rdma
