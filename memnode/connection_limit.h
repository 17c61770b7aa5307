// --max-connections: the number of connections a memory node serves at once,
// TCP and RDMA together, authenticated or not. Each connection costs memory
// before its HELLO is checked (a TCP read buffer; an RDMA connection's
// registered message slots, 2 x kRdmaDepth x kRdmaMsgBytes = 2 MiB), so
// without a cap anonymous clients could grow the process until the OOM killer
// ends it and every index on it is lost. A connection beyond the cap is
// refused with a reason the client reports (net/protocol.h).
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace dex::memnode {

constexpr uint32_t kDefaultMaxConnections = 1024;

class ConnectionLimit {
public:
    explicit ConnectionLimit(uint32_t max) : max_(max) {}
    ConnectionLimit(const ConnectionLimit&) = delete;
    ConnectionLimit& operator=(const ConnectionLimit&) = delete;

    uint32_t max() const { return max_; }
    // Takes a place for a new connection; false if all are taken (refuse it).
    bool try_acquire();
    // The connection that held a place is gone.
    void release();
    // What a refused client is told: "too many connections (N)".
    std::string refusal_reason() const;
    // Logs the refusal of a `transport` ("tcp", "rdma") connection from
    // `peer`, at most one line a second: a flood of refused connects must not
    // flood the log (the refusals in between are counted in the next line).
    void log_refusal(const char* transport, const std::string& peer);

private:
    const uint32_t max_;
    std::mutex mu_;
    uint32_t open_ = 0;
    std::chrono::steady_clock::time_point last_log_{};
    bool logged_ = false;
    uint64_t unlogged_ = 0;  // refusals since the last line
};

}  // namespace dex::memnode
