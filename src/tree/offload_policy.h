// DEX 6.1 load- and cost-aware offloading decision (src/README.md
// "Offloading"). On a cache miss at a node `missing_levels` above the leaves
// (inclusive), continuing with one-sided reads is estimated at
//     (missing_levels x (avg remote read latency + local search)
//      + write round trips x avg remote read latency) x cache factor
// (a write done one-sided also re-reads, locks and publishes the leaf: three
// more round trips, kWriteRoundTrips) and offloading at the moving average of recent offload latencies; the
// cheaper one is taken, except that with a small probability the other one is
// taken so both averages stay fresh (a memory node whose CPU saturates makes
// offloads slower, and the policy shifts back to one-sided reads). Per
// process, not thread-safe (one backend = one policy object).
#pragma once
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace dex::tree {

class MovingAverage {
public:
    explicit MovingAverage(size_t window) : buf_(window ? window : 1) {}
    void add(double x);
    bool empty() const { return n_ == 0; }
    size_t size() const { return n_; }
    double value() const { return n_ ? sum_ / static_cast<double>(n_) : 0.0; }

private:
    std::vector<double> buf_;
    size_t next_ = 0, n_ = 0;
    double sum_ = 0;
};

enum class OffloadMode { kAuto, kOn, kOff };

class OffloadPolicy {
public:
    struct Params {
        double local_search_us = 0.3;  // search of one cached node (stable: fixed, DEX 6.1)
        double cache_factor = 1.2;     // cost of using the cache (frame provisioning, admission)
        double contrary = 0.01;        // probability of the contrary action
        size_t window = 50;            // samples in each moving average
    };
    OffloadPolicy() : OffloadPolicy(Params{}) {}
    explicit OffloadPolicy(const Params& p, uint64_t seed = 0x9e3779b97f4a7c15ull)
        : p_(p), reads_(p.window), offloads_(p.window), rng_(seed) {}

    void set_mode(OffloadMode m) { mode_ = m; }
    OffloadMode mode() const { return mode_; }
    // Round trips a one-sided single-entry write adds after its descent
    // (re-read + lock CAS + publish-and-unlock batch); an offloaded write
    // replaces them as well.
    static constexpr int kWriteRoundTrips = 3;
    // Offload the rest of an operation that misses the cache `missing_levels`
    // levels above the leaves (1 = the leaf itself)? `write_round_trips`: 0 for
    // a read, kWriteRoundTrips for an insert or delete.
    bool should_offload(int missing_levels, int write_round_trips = 0);
    void record_remote_read(double us) { reads_.add(us); }
    void record_offload(double us) { offloads_.add(us); }
    double one_sided_estimate(int missing_levels, int write_round_trips = 0) const;
    double offload_estimate() const { return offloads_.value(); }
    uint64_t contrary_taken() const { return contrary_; }
    uint64_t decisions() const { return decisions_; }
    uint64_t offloads_chosen() const { return chosen_; }

private:
    bool decide(int missing_levels, int write_round_trips);
    Params p_;
    OffloadMode mode_ = OffloadMode::kAuto;
    MovingAverage reads_, offloads_;
    std::mt19937_64 rng_;
    uint64_t contrary_ = 0;
    uint64_t decisions_ = 0, chosen_ = 0;  // should_offload() calls / true answers
};

}  // namespace dex::tree
