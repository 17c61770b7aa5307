// Helpers for tests that build or decode wire-protocol payloads by hand.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

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

}  // namespace dex::testing
