// Random numbers, key distributions and latency histograms for dex-ycsb.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace dex::bench {

// xoshiro256** seeded by splitmix64: fast, good enough for workload generation.
class Rng {
public:
    explicit Rng(uint64_t seed) {
        for (auto& w : s_) w = splitmix(seed);
    }
    uint64_t next() {
        uint64_t r = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return r;
    }
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
    uint64_t below(uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }

private:
    static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    static uint64_t splitmix(uint64_t& x) {
        uint64_t z = (x += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    uint64_t s_[4];
};

// A pseudo-random bijection of [0, n): rounds of (multiply by an odd constant,
// add, xorshift) modulo 2^b (each step is a bijection on b-bit values), with
// cycle walking to stay below n (expected < 2 rounds since 2^b < 2n).
// Used to scramble zipfian ranks (hot records spread over the key space) and to
// place newly inserted keys at random positions.
class Permutation {
public:
    Permutation(uint64_t n, uint64_t seed) : n_(n ? n : 1) {
        bits_ = 1;
        while ((1ull << bits_) < n_) bits_++;
        mask_ = bits_ >= 64 ? ~0ull : (1ull << bits_) - 1;
        Rng r(seed);
        for (auto& m : mul_) m = r.next() | 1;
        for (auto& a : add_) a = r.next();
        shift_ = bits_ / 2 + 1;
    }
    uint64_t operator()(uint64_t x) const {
        do {
            for (int i = 0; i < 3; i++) {
                x = (x * mul_[i] + add_[i]) & mask_;
                x ^= x >> shift_;
            }
        } while (x >= n_);
        return x;
    }

private:
    uint64_t n_, mask_;
    int bits_, shift_;
    uint64_t mul_[3], add_[3];
};

// Zipfian over ranks [0, n) (0 = most popular), exactly YCSB's
// ZipfianGenerator, i.e. Gray et al., "Quickly generating billion-record
// synthetic databases" (SIGMOD 1994). zeta(n) costs O(n) and is computed once,
// in the parent before fork; the workers inherit the object.
class Zipfian {
public:
    Zipfian(uint64_t n, double theta) : n_(n), theta_(theta) {
        zetan_ = zeta(n, theta);
        double zeta2 = zeta(2, theta);
        alpha_ = 1.0 / (1.0 - theta);
        eta_ = (1.0 - std::pow(2.0 / static_cast<double>(n), 1.0 - theta)) / (1.0 - zeta2 / zetan_);
        half_pow_theta_ = 1.0 + std::pow(0.5, theta);
    }
    uint64_t next(Rng& r) const {
        double u = r.uniform();
        double uz = u * zetan_;
        if (uz < 1.0) return 0;
        if (uz < half_pow_theta_) return n_ > 1 ? 1 : 0;
        uint64_t v = static_cast<uint64_t>(static_cast<double>(n_) * std::pow(eta_ * u - eta_ + 1.0, alpha_));
        return v >= n_ ? n_ - 1 : v;
    }
    double zetan() const { return zetan_; }
    static double zeta(uint64_t n, double theta) {
        double s = 0;
        for (uint64_t i = 1; i <= n; i++) s += 1.0 / std::pow(static_cast<double>(i), theta);
        return s;
    }

private:
    uint64_t n_;
    double theta_, zetan_, alpha_, eta_, half_pow_theta_;
};

// Log-linear latency histogram in nanoseconds: exact below 32 ns, then 32
// sub-buckets per power of two (<= 3.2% relative error). Plain counters: each
// worker owns one (in shared memory); the parent merges after the run.
struct Histogram {
    static constexpr int kSub = 32, kSubBits = 5;
    static constexpr int kBuckets = (64 - kSubBits) * kSub + kSub;
    uint64_t count[kBuckets];
    uint64_t n, sum_ns, max_ns;

    static int index(uint64_t v) {
        if (v < kSub) return static_cast<int>(v);
        int msb = 63 - __builtin_clzll(v);
        return (msb - kSubBits + 1) * kSub + static_cast<int>((v >> (msb - kSubBits)) & (kSub - 1));
    }
    static double value(int idx) {  // midpoint of the bucket
        if (idx < kSub) return idx;
        int msb = idx / kSub - 1 + kSubBits, sub = idx % kSub;
        double lo = std::ldexp(1.0, msb) + std::ldexp(static_cast<double>(sub), msb - kSubBits);
        return lo + std::ldexp(0.5, msb - kSubBits);
    }
    void clear() { std::memset(this, 0, sizeof *this); }
    void add(uint64_t ns) {
        count[index(ns)]++;
        n++;
        sum_ns += ns;
        if (ns > max_ns) max_ns = ns;
    }
    void merge(const Histogram& o) {
        for (int i = 0; i < kBuckets; i++) count[i] += o.count[i];
        n += o.n;
        sum_ns += o.sum_ns;
        if (o.max_ns > max_ns) max_ns = o.max_ns;
    }
    double percentile(double p) const {
        if (n == 0) return 0;
        uint64_t want = static_cast<uint64_t>(std::ceil(p * static_cast<double>(n)));
        if (want == 0) want = 1;
        uint64_t seen = 0;
        for (int i = 0; i < kBuckets; i++) {
            seen += count[i];
            if (seen >= want) return value(i);
        }
        return static_cast<double>(max_ns);
    }
};

}  // namespace dex::bench
