// Selective cache admission (DEX 5.4) and the process-local PRNG it draws from.
//
// Inner nodes are always admitted (a cached path must be contiguous from the
// root for optimistic traversal and for offloading decisions); a leaf is
// admitted with probability `leaf_admission` (paper default 0.1), so leaves
// must prove themselves hot by being fetched repeatedly. cache_leaves = false
// never admits leaves (the Sherman / SMART policy: inner nodes only).
#pragma once
#include <unistd.h>

#include <chrono>
#include <cstdint>

namespace dex::cache {

// xorshift64* seeded per process/thread: one multiply per draw, no shared
// state (a shared PRNG would be a contended cache line on every miss).
class Rng {
public:
    explicit Rng(uint64_t seed = 0) { reseed(seed); }
    void reseed(uint64_t seed) {
        if (seed == 0)
            seed = static_cast<uint64_t>(getpid()) * 0x9e3779b97f4a7c15ull ^
                   static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                   reinterpret_cast<uintptr_t>(this);
        s_ = seed | 1;
        for (int i = 0; i < 4; i++) next();
    }
    uint64_t next() {
        s_ ^= s_ >> 12;
        s_ ^= s_ << 25;
        s_ ^= s_ >> 27;
        return s_ * 0x2545f4914f6cdd1dull;
    }
    // Uniform in [0, n) (multiply-high; n > 0).
    uint32_t below(uint32_t n) { return static_cast<uint32_t>(((next() >> 32) * n) >> 32); }

private:
    uint64_t s_ = 1;
};

struct AdmissionPolicy {
    bool cache_leaves = true;
    double leaf_admission = 0.1;  // probability, 0..1
};

class Admission {
public:
    explicit Admission(AdmissionPolicy p = {}, uint64_t seed = 0) : rng_(seed) { set_policy(p); }
    void set_policy(AdmissionPolicy p) {
        policy_ = p;
        double q = p.leaf_admission < 0 ? 0 : p.leaf_admission > 1 ? 1 : p.leaf_admission;
        always_ = q >= 1.0;
        threshold_ = static_cast<uint64_t>(q * 18446744073709551616.0);  // q * 2^64
    }
    const AdmissionPolicy& policy() const { return policy_; }

    bool should_admit(uint8_t level) {
        if (level > 0) return true;
        if (!policy_.cache_leaves) return false;
        return always_ || rng_.next() < threshold_;
    }
    Rng& rng() { return rng_; }

private:
    AdmissionPolicy policy_;
    bool always_ = false;
    uint64_t threshold_ = 0;
    Rng rng_;
};

}  // namespace dex::cache
