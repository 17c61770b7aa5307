// Helpers shared by the unit tests of every layer (memory node, transports,
// tree): error codes of a call, elapsed time, engine and transport options,
// a raw loopback connection. Tree-level helpers: tree_test_util.h; wire
// payloads and one-line RPCs: wire_test_util.h.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "common/error.h"
#include "engine/engine.h"
#include "transport/transport.h"

namespace dex::testing {

// MAP_SHARED | MAP_ANONYMOUS memory that forked children share, as PostgreSQL's
// shared memory is (the cache's shared-memory tests fork).
class SharedMem {
public:
    explicit SharedMem(size_t bytes) : bytes_(bytes) {
        p_ = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p_ == MAP_FAILED) p_ = nullptr;
    }
    ~SharedMem() {
        if (p_) munmap(p_, bytes_);
    }
    SharedMem(const SharedMem&) = delete;
    SharedMem& operator=(const SharedMem&) = delete;
    void* get() const { return p_; }

private:
    void* p_;
    size_t bytes_;
};

// The ErrorCode a call throws (kOk if it returns); *msg gets the message.
inline ErrorCode code_of(const std::function<void()>& f, std::string* msg = nullptr) {
    try {
        f();
    } catch (const Error& e) {
        if (msg) *msg = e.what();
        return e.code();
    }
    return ErrorCode::kOk;
}

inline long ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
}

// An in-process memory node's options: a small pool without hugepages
// (many tests run engines side by side), optionally with a token.
inline memnode::EngineOptions small_pool(uint64_t bytes = 8ull << 20, std::string token = {}) {
    memnode::EngineOptions o;
    o.pool_bytes = bytes;
    o.try_hugepages = false;
    o.token = std::move(token);
    return o;
}

// Transport options with test-sized timeouts.
inline TransportOptions opts(int connect_ms = 2000, int op_ms = 5000, std::string token = {}) {
    TransportOptions o;
    o.connect_timeout_ms = connect_ms;
    o.op_timeout_ms = op_ms;
    o.token = std::move(token);
    return o;
}
inline TransportOptions opts(std::string token) { return opts(2000, 5000, std::move(token)); }

// A TCP connection to 127.0.0.1:port that speaks no protocol by itself
// (tests write frames by hand); -1 if refused.
inline int raw_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

}  // namespace dex::testing
