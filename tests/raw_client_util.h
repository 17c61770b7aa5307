// A raw socket client of dex-memnode's wire protocol (net/protocol.h), for
// tests that send what no Transport would: malformed frames, half frames,
// wrong magic, floods (transport_test.cpp, rdma_transport_test.cpp).
#pragma once
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "net/protocol.h"
#include "test_util.h"
#include "wire_test_util.h"

namespace dex::testing::raw {

using dex::testing::append;
using dex::testing::ms_since;
using dex::testing::raw_connect;
using Clock = std::chrono::steady_clock;

inline bool recv_exact(int fd, void* dst, size_t n, int timeout_ms = 3000) {
    auto* p = static_cast<uint8_t*>(dst);
    auto t0 = Clock::now();
    while (n > 0) {
        pollfd pf{fd, POLLIN, 0};
        if (poll(&pf, 1, 50) <= 0) {
            if (ms_since(t0) > timeout_ms) return false;
            continue;
        }
        ssize_t r = recv(fd, p, n, 0);
        if (r <= 0) return false;
        p += r;
        n -= static_cast<size_t>(r);
    }
    return true;
}

// True if the peer closes the connection (EOF or reset) within the timeout.
inline bool closed_by_peer(int fd, int timeout_ms = 3000) {
    auto t0 = Clock::now();
    while (ms_since(t0) < timeout_ms) {
        pollfd pf{fd, POLLIN, 0};
        if (poll(&pf, 1, 50) <= 0) continue;
        char c;
        ssize_t r = recv(fd, &c, 1, 0);
        if (r <= 0) return true;
    }
    return false;
}

inline std::vector<uint8_t> frame(uint16_t op, const std::vector<uint8_t>& payload, uint16_t count = 0,
                           uint32_t magic = net::kRequestMagic, uint32_t seq = 7) {
    std::vector<uint8_t> f;
    append(f, net::FrameHeader{magic, op, count, static_cast<uint32_t>(payload.size()), seq});
    f.insert(f.end(), payload.begin(), payload.end());
    return f;
}

inline std::vector<uint8_t> hello_payload(const std::string& tok = {}) {
    std::vector<uint8_t> p;
    append(p, net::kProtocolVersion);
    append(p, static_cast<uint32_t>(tok.size()));
    p.insert(p.end(), tok.begin(), tok.end());
    return p;
}

struct Reply {
    bool ok = false;  // a whole frame arrived
    net::FrameHeader h{};
    std::vector<uint8_t> payload;
    std::string msg() const { return std::string(payload.begin(), payload.end()); }
};

inline Reply read_reply(int fd) {
    Reply r;
    if (!recv_exact(fd, &r.h, sizeof r.h)) return r;
    if (r.h.magic != net::kResponseMagic || r.h.payload_len > net::kMaxPayload) return r;
    r.payload.resize(r.h.payload_len);
    r.ok = recv_exact(fd, r.payload.data(), r.payload.size());
    return r;
}

inline bool send_all(int fd, const std::vector<uint8_t>& b) {
    return send(fd, b.data(), b.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(b.size());
}

inline std::vector<uint8_t> rw_req(uint64_t off, uint32_t len) {
    std::vector<uint8_t> p;
    append(p, off);
    append(p, len);
    append(p, uint32_t{0});
    return p;
}

}  // namespace dex::testing::raw
