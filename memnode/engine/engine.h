// The memory node's request engine: pool, namespaces, allocator and the
// execution of every request frame. No sockets here (see ../server.cpp), so
// the in-process transport and the TCP server run exactly the same code.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "net/frame_handler.h"

namespace dex::memnode {

struct EngineOptions {
    uint64_t pool_bytes = 64ull << 20;
    std::string token;          // "" = no token required
    bool try_hugepages = true;
    bool touch_pool = true;     // pre-fault every page so the size is real
    // CPU time busy-waited per offloaded operation, on top of its real work
    // (--offload-work-us): emulates a memory node whose CPU is slower or
    // busier than this one, so tests and benchmarks can saturate --threads and
    // watch dex.offload = auto shift back to one-sided reads. 0 in production.
    uint32_t offload_work_us = 0;
    // Client ids (remote-lock owners) are handed out from this one upwards and
    // never reused; tests start near the old 23-bit limit to prove ids are whole.
    uint64_t first_client_id = 1;
};

class Engine final : public net::FrameHandler {
public:
    explicit Engine(const EngineOptions& opts);  // throws std::runtime_error if the pool cannot be allocated
    ~Engine() override;

    void handle(net::ClientSession& session, const net::FrameHeader& hdr, const uint8_t* payload,
                uint16_t& status, std::vector<uint8_t>& response) override;
    void session_closed(net::ClientSession& session) override;

    uint64_t incarnation() const;
    uint64_t pool_bytes() const;
    uint64_t used_bytes() const;
    bool hugepages() const;
    // The pool mapping (for the RDMA listener, which registers it as one memory region).
    uint8_t* pool_base() const;
    size_t pool_map_bytes() const;
    net::NodeStats stats() const;
    // Tests: the next client id handed out (ids below it are never handed out again).
    void set_next_client_id(uint64_t id);

    // CPU atomics (src/README.md "Offloading"). Where an RDMA NIC executes
    // compute servers' atomics on the pool without them being atomic with
    // respect to this CPU's (IBV_ATOMIC_HCA), a CPU compare-and-swap on a lock
    // word could succeed together with a NIC's. The RDMA listener calls this
    // before serving: from then on CAS/FAA frames (TCP, also inside a BATCH)
    // and offloaded writes are refused with kStatusUnsupported and a message
    // saying `why` and what to do, and HELLO replies lack kHelloCpuAtomics.
    void refuse_cpu_atomics(const std::string& why);
    bool cpu_atomics() const;

    // Liveness of connections the engine cannot watch itself (RDMA: a client
    // whose host vanished sends no disconnect). CLIENT_ALIVE about a client the
    // engine still counts as connected calls `check(client_id)` and answers
    // "alive"; `check` must not block: it may start a probe that, if the client
    // turns out gone, closes the session (session_closed), so that later
    // questions are answered "gone". nullptr: none. Calls in progress finish
    // before set_liveness_check returns.
    using LivenessCheck = std::function<void(uint64_t client_id)>;
    void set_liveness_check(LivenessCheck check);
    static std::string op_name(uint16_t op);  // "READ", "ALLOC", ... or "op N" (for logs)

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace dex::memnode
