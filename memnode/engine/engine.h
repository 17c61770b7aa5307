// The memory node's request engine: pool, namespaces, allocator and the
// execution of every request frame. No sockets here (see ../server.cpp), so
// the in-process transport and the TCP server run exactly the same code.
#pragma once
#include <cstddef>
#include <cstdint>
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
    static std::string op_name(uint16_t op);  // "READ", "ALLOC", ... or "op N" (for logs)

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace dex::memnode
