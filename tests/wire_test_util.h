// Helpers for tests that build or decode wire-protocol payloads by hand.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "net/protocol.h"
#include "transport/transport.h"

namespace dex::testing {

// Appends the bytes of x (little-endian on every platform we build for).
template <class T>
void append(std::vector<uint8_t>& v, const T& x) {
    size_t o = v.size();
    v.resize(o + sizeof(T));
    std::memcpy(v.data() + o, &x, sizeof(T));
}

// Reads a T at byte `at` of a response payload (a failed expectation if short).
template <class T>
T as(const std::vector<uint8_t>& v, size_t at = 0) {
    T x{};
    EXPECT_GE(v.size(), at + sizeof(T));
    if (v.size() >= at + sizeof(T)) std::memcpy(&x, v.data() + at, sizeof(T));
    return x;
}

// The memory node's RPCs, as one-line calls for tests.
namespace rpc {

inline uint64_t ns_create(Transport& t, const std::string& tag = "test") {
    uint8_t buf[net::kNamespaceTagLen] = {};
    std::memcpy(buf, tag.data(), std::min(tag.size(), sizeof buf));
    auto r = t.rpc(net::kOpNsCreate, buf, sizeof buf);
    return as<uint64_t>(r);
}

inline uint64_t alloc(Transport& t, uint64_t ns, uint64_t bytes) {
    std::vector<uint8_t> p;
    append(p, ns);
    append(p, bytes);
    return as<uint64_t>(t.rpc(net::kOpAlloc, p.data(), p.size()));
}

inline void free_(Transport& t, uint64_t ns, uint64_t off, uint64_t bytes) {
    std::vector<uint8_t> p;
    append(p, ns);
    append(p, off);
    append(p, bytes);
    auto r = t.rpc(net::kOpFree, p.data(), p.size());
    EXPECT_TRUE(r.empty());
}

inline uint64_t ns_drop(Transport& t, uint64_t ns) { return as<uint64_t>(t.rpc(net::kOpNsDrop, &ns, 8)); }

inline uint64_t get_root(Transport& t, uint64_t ns) { return as<uint64_t>(t.rpc(net::kOpGetRoot, &ns, 8)); }

inline uint64_t set_root(Transport& t, uint64_t ns, uint64_t expected, uint64_t desired) {
    std::vector<uint8_t> p;
    append(p, ns);
    append(p, expected);
    append(p, desired);
    return as<uint64_t>(t.rpc(net::kOpSetRoot, p.data(), p.size()));
}

inline bool client_alive(Transport& t, uint64_t id) {
    std::vector<uint8_t> p;
    append(p, id);
    return as<uint64_t>(t.rpc(net::kOpClientAlive, p.data(), p.size())) == 1;
}

inline net::NodeStats node_stats(Transport& t) { return as<net::NodeStats>(t.rpc(net::kOpStats, nullptr, 0)); }

}  // namespace rpc

}  // namespace dex::testing
