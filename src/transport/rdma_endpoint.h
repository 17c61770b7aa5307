// RdmaEndpoint: the verbs resources of one rdma:// connection (librdmacm id,
// protection domain, completion queue + channel, RC queue pair, registered
// buffers) and the two waits every operation needs: a connection-manager
// event during setup, a work completion afterwards. Every wait is bounded by
// a deadline, checks interrupt_requested() and throws dex::Error naming the
// rdma:// address. Used only by RdmaTransport.
#pragma once
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace dex::rdma {

using Clock = std::chrono::steady_clock;

constexpr size_t kBounceBytes = 1u << 20;  // registered staging buffer for verbs
constexpr uint32_t kRecvSlots = 2;         // receive buffers for RPC replies (one request at a time)
constexpr uint32_t kMaxChain = 64;         // work requests per ibv_post_send chain

class RdmaEndpoint {
public:
    explicit RdmaEndpoint(std::string addr) : addr_(std::move(addr)) {}
    ~RdmaEndpoint() { close(); }
    RdmaEndpoint(const RdmaEndpoint&) = delete;
    RdmaEndpoint& operator=(const RdmaEndpoint&) = delete;

    // Resolves, creates the QP and buffers, connects. `ext_base/ext_len`: an
    // external region to register too (failure to register it is tolerated:
    // transfers then use the bounce buffer). Throws kUnreachable/kInterrupted.
    void open(const std::string& host, const std::string& port, int connect_timeout_ms, void* ext_base,
              size_t ext_len);
    // Destroys everything. In a forked child the parent's resources are left
    // alone (they belong to the parent's device context).
    void close();
    // Throws unless the path MTU lets a node WRITE travel as one packet.
    void require_whole_node_writes();
    bool is_open() const { return id_ != nullptr; }
    void register_ext(void* base, size_t len);  // (re)registers the external region now

    // Next completion; throws on deadline, interrupt, or the connection going away.
    void wait(ibv_wc& wc, Clock::time_point deadline, int op_timeout_ms);
    // Throws the error for a failed completion (`what` names the operation).
    [[noreturn]] void fail_completion(const ibv_wc& wc, const std::string& what);

    ibv_qp* qp() const { return id_->qp; }
    ibv_pd* pd() const { return pd_; }
    uint8_t* bounce() const { return bounce_; }
    uint32_t bounce_lkey() const { return bounce_mr_->lkey; }
    uint8_t* send_buf() const { return msg_; }
    uint8_t* recv_buf(uint32_t slot) const;
    uint32_t msg_lkey() const { return msg_mr_->lkey; }
    bool post_recv(uint32_t slot);
    // lkey of the registered external region if [p, p+len) lies inside it, else 0.
    uint32_t ext_lkey(const void* p, size_t len) const;
    bool ext_registered() const { return ext_mr_ != nullptr; }

private:
    void wait_cm(rdma_cm_event_type want, Clock::time_point deadline, const char* step);

    std::string addr_;  // "rdma://host:port"
    pid_t pid_ = 0;
    rdma_event_channel* ec_ = nullptr;
    rdma_cm_id* id_ = nullptr;
    ibv_pd* pd_ = nullptr;
    ibv_comp_channel* cch_ = nullptr;
    ibv_cq* cq_ = nullptr;
    uint8_t* bounce_ = nullptr;
    ibv_mr* bounce_mr_ = nullptr;
    uint8_t* msg_ = nullptr;  // one send slot, then kRecvSlots receive slots
    ibv_mr* msg_mr_ = nullptr;
    ibv_mr* ext_mr_ = nullptr;
    bool qp_created_ = false;
};

}  // namespace dex::rdma
