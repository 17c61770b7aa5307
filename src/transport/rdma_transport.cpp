// rdma:// transport. Connection handling and waits are in rdma_endpoint.cpp;
// this file maps the Transport calls to work requests.
//
// One-sided verbs: a call (or a batch) becomes one chain of work requests
// posted with a single ibv_post_send, only the last one signaled. RC executes
// a QP's requests in order; a request that follows a READ or an atomic in the
// chain carries IBV_SEND_FENCE so that it also waits for that one's result
// (the TCP engine's "batch runs in order" semantics). Writing a node and then
// its lock word -- Sherman's combined write-back and unlock -- is two WRITEs
// in one chain: one doorbell, one completion. Local buffers: the registered
// external region (zero-copy) when the buffer lies in it, else the registered
// bounce buffer, else (larger than the bounce buffer) a temporary registration.
//
// RPCs: FrameClient encodes the same frames as TCP; exchange() carries a frame
// in one SEND and takes the reply from a pre-posted RECV.
#include "transport/rdma_transport.h"

#include "transport/address.h"

#include <unistd.h>

#include <cstring>

#include "common/error.h"
#include "common/stats.h"
#include "net/rdma_wire.h"
#include "transport/frame_client.h"
#include "transport/rdma_endpoint.h"

namespace dex {

namespace {

using rdma::Clock;
constexpr uint32_t kMaxChunk = net::kMaxPayload - 16;  // same READ/WRITE split as the frame transports
constexpr uint64_t kSendWrId = 1ull << 40;

std::string hex(uint64_t v) {
    char b[32];
    std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
    return b;
}

uint16_t wire_op(RemoteOp::Kind k) {
    switch (k) {
        case RemoteOp::kRead: return net::kOpRead;
        case RemoteOp::kWrite: return net::kOpWrite;
        case RemoteOp::kCas: return net::kOpCas;
        default: return net::kOpFaa;
    }
}

// Deregisters temporary memory regions when a chain is done (or failed).
struct TempMrs {
    ibv_mr* mrs[rdma::kMaxChain];
    size_t n = 0;
    ~TempMrs() {
        for (size_t i = 0; i < n; i++) ibv_dereg_mr(mrs[i]);
    }
};

}  // namespace

struct RdmaTransport::Impl final : net::FrameClient {
    std::string host, port, addr;
    TransportOptions opts;
    rdma::RdmaEndpoint ep;
    bool ready = false;
    pid_t pid = 0;
    uint64_t incarnation = 0;
    uint64_t client_id = 0;
    uint32_t hello_flags = 0;  // of the current connection's HELLO reply
    uint64_t pool_addr = 0, pool_bytes = 0;
    uint32_t rkey = 0;
    void* ext_base = nullptr;
    size_t ext_len = 0;
    uint64_t zero_copy = 0;
    uint32_t hello_seq = 0;

    explicit Impl(const std::string& a) : addr(a), ep(a) {}

    void close() {
        ep.close();
        ready = false;
        client_id = 0;
    }

    // ---- connection ------------------------------------------------------
    void ensure_ready() override {
        if (ready && pid == getpid()) return;
        close();  // in a forked child this forgets the parent's resources
        pid = getpid();
        ep.open(host, port, opts.connect_timeout_ms, ext_base, ext_len);
        try {
            hello();
        } catch (...) {
            close();
            throw;
        }
        ready = true;
        note_incarnation(incarnation);
    }

    void hello() {
        if (opts.token.size() > net::kMaxTokenLen)
            throw Error(ErrorCode::kInvalid, "the token is longer than " + std::to_string(net::kMaxTokenLen) + " bytes");
        std::vector<uint8_t> req(sizeof(net::FrameHeader) + 8 + opts.token.size()), resp;
        net::FrameHeader h{net::kRequestMagic, net::kOpHello, 0, static_cast<uint32_t>(req.size() - sizeof h),
                           ++hello_seq};
        uint32_t v = net::kProtocolVersion, tl = static_cast<uint32_t>(opts.token.size());
        std::memcpy(req.data(), &h, sizeof h);
        std::memcpy(req.data() + sizeof h, &v, 4);
        std::memcpy(req.data() + sizeof h + 4, &tl, 4);
        if (tl) std::memcpy(req.data() + sizeof h + 8, opts.token.data(), tl);
        Stats::add(stats().remote_rpcs);
        uint16_t status = exchange(req, resp);
        Stats::add(stats().round_trips);
        if (status != net::kStatusOk) net::throw_remote_error(status, resp, addr, net::kOpHello);
        net::HelloReply r;
        net::RdmaHelloExt x;
        if (resp.size() != sizeof r + sizeof x)
            throw Error(ErrorCode::kProtocol, "memory node " + addr + " sent a HELLO reply of " +
                                                  std::to_string(resp.size()) + " bytes, expected " +
                                                  std::to_string(sizeof r + sizeof x));
        std::memcpy(&r, resp.data(), sizeof r);
        std::memcpy(&x, resp.data() + sizeof r, sizeof x);
        if (r.client_id == 0 || r.version != net::kProtocolVersion || x.pool_addr == 0)
            throw Error(ErrorCode::kProtocol, "memory node " + addr + " sent an invalid HELLO reply");
        client_id = r.client_id;
        hello_flags = r.flags;
        incarnation = r.incarnation;
        pool_addr = x.pool_addr;
        pool_bytes = x.pool_bytes;
        rkey = x.rkey;
    }

    // One frame out in a SEND, its reply from a RECV. Closes on any failure.
    uint16_t exchange(const std::vector<uint8_t>& req, std::vector<uint8_t>& resp) override {
        if (req.size() > net::kRdmaMsgBytes)
            throw Error(ErrorCode::kInvalid, "request of " + std::to_string(req.size()) +
                                                 " bytes exceeds the RDMA message size of " +
                                                 std::to_string(net::kRdmaMsgBytes) + " bytes");
        net::FrameHeader rq;
        std::memcpy(&rq, req.data(), sizeof rq);
        auto deadline = Clock::now() + std::chrono::milliseconds(opts.op_timeout_ms);
        try {
            std::memcpy(ep.send_buf(), req.data(), req.size());
            ibv_sge sge{reinterpret_cast<uintptr_t>(ep.send_buf()), static_cast<uint32_t>(req.size()), ep.msg_lkey()};
            ibv_send_wr wr{}, *bad = nullptr;
            wr.wr_id = kSendWrId;
            wr.sg_list = &sge;
            wr.num_sge = 1;
            wr.opcode = IBV_WR_SEND;
            wr.send_flags = IBV_SEND_SIGNALED;
            if (ibv_post_send(ep.qp(), &wr, &bad) != 0)
                throw Error(ErrorCode::kProtocol, "connection to memory node " + addr + " failed: ibv_post_send: " +
                                                      std::strerror(errno));
            bool sent = false, got = false;
            uint32_t slot = 0, blen = 0;
            while (!sent || !got) {
                ibv_wc wc;
                ep.wait(wc, deadline, opts.op_timeout_ms);
                if (wc.status != IBV_WC_SUCCESS) ep.fail_completion(wc, net::op_label(rq.op));
                if (wc.opcode == IBV_WC_RECV) {
                    got = true;
                    slot = static_cast<uint32_t>(wc.wr_id);
                    blen = wc.byte_len;
                } else {
                    sent = true;
                }
            }
            const uint8_t* m = ep.recv_buf(slot);
            net::FrameHeader h{};
            if (blen >= sizeof h) std::memcpy(&h, m, sizeof h);
            if (blen < sizeof h || h.magic != net::kResponseMagic || h.seq != rq.seq || h.payload_len != blen - sizeof h)
                throw Error(ErrorCode::kProtocol, "memory node " + addr + " sent a malformed response frame");
            resp.assign(m + sizeof h, m + blen);
            if (!ep.post_recv(slot))
                throw Error(ErrorCode::kProtocol, "connection to memory node " + addr + " failed: ibv_post_recv");
            if (net::is_fatal_status(h.op)) close();  // the node closes after these
            return h.op;
        } catch (...) {
            close();
            throw;
        }
    }

    void drop_session() override { close(); }
    const std::string& peer() const override { return addr; }

    // ---- one-sided verbs ----------------------------------------------------
    // Same checks and messages as the memory node's engine: one-sided verbs
    // never reach its code, so the bounds are enforced here.
    void check(uint16_t op, uint64_t off, uint64_t len) const {
        std::string msg;
        uint16_t st = net::kStatusBounds;
        if (off < net::kPoolReservedBytes || off > pool_bytes || len > pool_bytes - off)
            msg = net::op_label(op) + " of [" + hex(off) + ", +" + std::to_string(len) +
                  ") is outside the pool (valid offsets " + hex(net::kPoolReservedBytes) + ".." + hex(pool_bytes) + ")";
        else if ((op == net::kOpCas || op == net::kOpFaa) && off % 8 != 0) {
            msg = net::op_label(op) + " at " + hex(off) + " is not 8-byte aligned";
            st = net::kStatusAlign;
        }
        if (!msg.empty()) net::throw_remote_error(st, std::vector<uint8_t>(msg.begin(), msg.end()), addr, op);
    }

    // Bounce-buffer bytes op needs (0: zero-copy or a temporary registration).
    size_t bounce_need(const RemoteOp& op) const {
        if (op.kind == RemoteOp::kCas || op.kind == RemoteOp::kFaa) return 8;
        if (op.len == 0 || ep.ext_lkey(op.buf, op.len) || op.len > rdma::kBounceBytes) return 0;
        return (op.len + 7) & ~size_t(7);
    }

    // Posts ops[0..n) as one chain and waits for it. Stats as FrameClient::batch_chunk.
    void run_chain(RemoteOp* ops, size_t n) {
        auto& st = stats();
        ibv_sge sges[rdma::kMaxChain];
        ibv_send_wr wrs[rdma::kMaxChain];
        size_t bounce_off[rdma::kMaxChain];
        bool bounced[rdma::kMaxChain];
        TempMrs temps;
        size_t boff = 0;
        bool fence = false;
        uint8_t* bounce = ep.bounce();
        for (size_t i = 0; i < n; i++) {
            RemoteOp& op = ops[i];
            ibv_send_wr& wr = wrs[i];
            ibv_sge& sge = sges[i];
            wr = ibv_send_wr{};
            wr.wr_id = i;
            wr.sg_list = &sge;
            wr.num_sge = 1;
            wr.next = i + 1 < n ? &wrs[i + 1] : nullptr;
            bounced[i] = false;
            uint64_t raddr = pool_addr + op.offset;
            if (op.kind == RemoteOp::kRead || op.kind == RemoteOp::kWrite) {
                uint32_t lkey = op.len ? ep.ext_lkey(op.buf, op.len) : 0;
                if (lkey) {
                    sge = {reinterpret_cast<uintptr_t>(op.buf), op.len, lkey};
                    zero_copy++;
                } else if (op.len <= rdma::kBounceBytes) {
                    bounce_off[i] = boff;
                    bounced[i] = true;
                    sge = {reinterpret_cast<uintptr_t>(bounce + boff), op.len, ep.bounce_lkey()};
                    if (op.kind == RemoteOp::kWrite && op.len) std::memcpy(bounce + boff, op.buf, op.len);
                    boff += (op.len + 7) & ~size_t(7);
                } else {
                    ibv_mr* mr = ibv_reg_mr(ep.pd(), op.buf, op.len, IBV_ACCESS_LOCAL_WRITE);
                    if (!mr)
                        throw Error(ErrorCode::kProtocol, "memory node " + addr + ": cannot register a " +
                                                              std::to_string(op.len) + "-byte buffer: " +
                                                              std::strerror(errno));
                    temps.mrs[temps.n++] = mr;
                    sge = {reinterpret_cast<uintptr_t>(op.buf), op.len, mr->lkey};
                }
                if (op.len == 0) wr.num_sge = 0;
                wr.opcode = op.kind == RemoteOp::kRead ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
                wr.wr.rdma.remote_addr = raddr;
                wr.wr.rdma.rkey = rkey;
                if (op.kind == RemoteOp::kRead) {
                    Stats::add(st.remote_reads);
                } else {
                    Stats::add(st.remote_writes);
                    Stats::add(st.bytes_written, op.len);
                }
            } else {
                bounce_off[i] = boff;
                bounced[i] = true;
                sge = {reinterpret_cast<uintptr_t>(bounce + boff), 8, ep.bounce_lkey()};
                boff += 8;
                wr.opcode = op.kind == RemoteOp::kCas ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD;
                wr.wr.atomic.remote_addr = raddr;
                wr.wr.atomic.rkey = rkey;
                wr.wr.atomic.compare_add = op.kind == RemoteOp::kCas ? op.compare : op.swap_or_add;
                wr.wr.atomic.swap = op.kind == RemoteOp::kCas ? op.swap_or_add : 0;
                Stats::add(st.remote_atomics);
            }
            if (fence) wr.send_flags |= IBV_SEND_FENCE;
            if (op.kind != RemoteOp::kWrite) fence = true;  // later requests wait for this one's result
            if (i + 1 == n) wr.send_flags |= IBV_SEND_SIGNALED;
        }
        auto deadline = Clock::now() + std::chrono::milliseconds(opts.op_timeout_ms);
        try {
            ibv_send_wr* bad = nullptr;
            if (ibv_post_send(ep.qp(), wrs, &bad) != 0)
                throw Error(ErrorCode::kProtocol, "connection to memory node " + addr + " failed: ibv_post_send: " +
                                                      std::strerror(errno));
            ibv_wc wc;
            ep.wait(wc, deadline, opts.op_timeout_ms);
            if (wc.status != IBV_WC_SUCCESS) {
                size_t k = wc.wr_id < n ? static_cast<size_t>(wc.wr_id) : n - 1;
                ep.fail_completion(wc, net::op_label(wire_op(ops[k].kind)) + " at offset " + hex(ops[k].offset));
            }
        } catch (...) {
            close();
            throw;
        }
        Stats::add(st.round_trips);
        for (size_t i = 0; i < n; i++) {
            RemoteOp& op = ops[i];
            if (op.kind == RemoteOp::kRead) {
                if (bounced[i] && op.len) std::memcpy(op.buf, bounce + bounce_off[i], op.len);
                Stats::add(st.bytes_read, op.len);
            } else if (op.kind != RemoteOp::kWrite) {
                std::memcpy(&op.result, bounce + bounce_off[i], 8);
            }
        }
    }

    void transfer(RemoteOp::Kind kind, uint64_t offset, void* buf, uint32_t len) {
        auto* p = static_cast<uint8_t*>(buf);
        do {
            uint32_t n = len < kMaxChunk ? len : kMaxChunk;
            ready_for_data();
            check(wire_op(kind), offset, n);
            RemoteOp op{};
            op.kind = kind;
            op.offset = offset;
            op.buf = p;
            op.len = n;
            run_chain(&op, 1);
            p += n;
            offset += n;
            len -= n;
        } while (len > 0);
    }

    uint64_t atomic(RemoteOp::Kind kind, uint64_t offset, uint64_t a, uint64_t b) {
        ready_for_data();
        check(wire_op(kind), offset, 8);
        RemoteOp op{};
        op.kind = kind;
        op.offset = offset;
        op.compare = a;
        op.swap_or_add = b;
        run_chain(&op, 1);
        return op.result;
    }

    void batch(RemoteOp* ops, size_t n) {
        if (n == 0) return;
        ready_for_data();
        for (size_t k = 0; k < n; k++) {
            const RemoteOp& op = ops[k];
            if (op.kind > RemoteOp::kFaa)
                throw Error(ErrorCode::kInvalid, "batch: unknown RemoteOp kind " + std::to_string(op.kind));
            if ((op.kind == RemoteOp::kRead || op.kind == RemoteOp::kWrite) && op.len > kMaxChunk)
                throw Error(ErrorCode::kInvalid, "batched READ/WRITE of " + std::to_string(op.len) +
                                                     " bytes exceeds the frame limit");
            check(wire_op(op.kind), op.offset, op.kind == RemoteOp::kRead || op.kind == RemoteOp::kWrite ? op.len : 8);
        }
        // Chains of at most kMaxChain requests whose staged bytes fit the bounce buffer; order is kept.
        size_t i = 0;
        while (i < n) {
            size_t j = i, used = 0;
            while (j < n && j - i < rdma::kMaxChain) {
                size_t need = bounce_need(ops[j]);
                if (j > i && used + need > rdma::kBounceBytes) break;
                used += need;
                j++;
            }
            run_chain(ops + i, j - i);
            i = j;
        }
    }
};

RdmaTransport::RdmaTransport(std::string address, TransportOptions opts) {
    HostPort hp = parse_host_port(address, "rdma", "rdma://10.0.0.5:7400");
    address_ = hp.canonical;
    impl_ = std::make_unique<Impl>(address_);
    impl_->host = hp.host;
    impl_->port = hp.port;
    impl_->opts = std::move(opts);
    if (impl_->opts.connect_timeout_ms <= 0) impl_->opts.connect_timeout_ms = 1;
    if (impl_->opts.op_timeout_ms <= 0) impl_->opts.op_timeout_ms = 1;
}

RdmaTransport::~RdmaTransport() = default;

uint64_t RdmaTransport::incarnation() {
    impl_->ensure_ready();
    impl_->acknowledge_incarnation();
    return impl_->incarnation;
}

uint64_t RdmaTransport::client_id() {
    impl_->ensure_ready();
    return impl_->client_id;
}

bool RdmaTransport::offload_writes_allowed() {
    impl_->ensure_ready();
    return (impl_->hello_flags & net::kHelloCpuAtomics) != 0;
}

bool RdmaTransport::offload_batch_allowed() {
    impl_->ensure_ready();
    return net::offload_batch_usable(impl_->hello_flags);
}

bool RdmaTransport::offload_bytes_allowed() {
    impl_->ensure_ready();
    return (impl_->hello_flags & net::kHelloOffloadBytes) != 0;
}

bool RdmaTransport::offload_bytes_batch_allowed() {
    impl_->ensure_ready();
    return net::offload_bytes_batch_usable(impl_->hello_flags);
}

bool RdmaTransport::offload_split_allowed() {
    impl_->ensure_ready();
    return net::offload_split_usable(impl_->hello_flags);
}

bool RdmaTransport::offload_split_image_allowed() {
    impl_->ensure_ready();
    return net::offload_split_image_usable(impl_->hello_flags);
}

bool RdmaTransport::offload_bytes_split_allowed() {
    impl_->ensure_ready();
    return net::offload_bytes_split_usable(impl_->hello_flags);
}

bool RdmaTransport::offload_bytes_batch_split_allowed() {
    impl_->ensure_ready();
    return net::offload_bytes_batch_split_usable(impl_->hello_flags);
}

bool RdmaTransport::offload_bytes_dirty_split_allowed() {
    impl_->ensure_ready();
    return net::offload_bytes_dirty_split_usable(impl_->hello_flags);
}

bool RdmaTransport::offload_bytes_split_image_allowed() {
    impl_->ensure_ready();
    return net::offload_bytes_split_image_usable(impl_->hello_flags);
}

bool RdmaTransport::offload_kill_allowed() {
    impl_->ensure_ready();
    return net::offload_kill_usable(impl_->hello_flags);
}

bool RdmaTransport::offload_dirty_split_allowed() {
    impl_->ensure_ready();
    return net::offload_dirty_split_usable(impl_->hello_flags);
}

bool RdmaTransport::split_spare_allowed() {
    impl_->ensure_ready();
    return net::split_spare_usable(impl_->hello_flags);
}

bool RdmaTransport::split_parent_allowed() {
    impl_->ensure_ready();
    return net::split_parent_usable(impl_->hello_flags);
}

bool RdmaTransport::offload_batch_split_allowed() {
    impl_->ensure_ready();
    return net::offload_batch_split_usable(impl_->hello_flags);
}

uint64_t RdmaTransport::connected_client_id() { return impl_->ready ? impl_->client_id : 0; }

void RdmaTransport::read(uint64_t offset, void* dst, uint32_t len) {
    impl_->transfer(RemoteOp::kRead, offset, dst, len);
}
void RdmaTransport::write(uint64_t offset, const void* src, uint32_t len) {
    impl_->transfer(RemoteOp::kWrite, offset, const_cast<void*>(src), len);
}
uint64_t RdmaTransport::cas(uint64_t offset, uint64_t expected, uint64_t desired) {
    return impl_->atomic(RemoteOp::kCas, offset, expected, desired);
}
uint64_t RdmaTransport::faa(uint64_t offset, uint64_t add) { return impl_->atomic(RemoteOp::kFaa, offset, 0, add); }
void RdmaTransport::batch(RemoteOp* ops, size_t n) { impl_->batch(ops, n); }

std::vector<uint8_t> RdmaTransport::rpc(net::Op op, const void* payload, uint32_t len) {
    // Any two-sided op is carried as is (the memory node's engine decides);
    // the handshake and the one-sided verbs are not RPCs.
    if (op < net::kOpAlloc)
        throw Error(ErrorCode::kInvalid, std::string("rpc(): ") + net::op_label(op) + " (" + std::to_string(op) +
                                             ") is not an RPC");
    return impl_->rpc(op, payload, len);
}

void RdmaTransport::register_region(void* base, size_t len) {
    impl_->ext_base = base;
    impl_->ext_len = len;
    if (impl_->ready && impl_->pid == getpid()) impl_->ep.register_ext(base, len);
}

void RdmaTransport::disconnect() { impl_->close(); }
bool RdmaTransport::connected() const { return impl_->ready && impl_->ep.is_open(); }
uint64_t RdmaTransport::zero_copy_transfers() const { return impl_->zero_copy; }
bool RdmaTransport::region_registered() const { return impl_->ready && impl_->ep.ext_registered(); }

}  // namespace dex
