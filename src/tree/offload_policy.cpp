#include "tree/offload_policy.h"

namespace dex::tree {

void MovingAverage::add(double x) {
    if (n_ == buf_.size()) {
        sum_ -= buf_[next_];
    } else {
        n_++;
    }
    buf_[next_] = x;
    sum_ += x;
    next_ = (next_ + 1) % buf_.size();
}

double OffloadPolicy::one_sided_estimate(int missing_levels, int write_round_trips) const {
    if (write_round_trips < 0) write_round_trips = 0;
    // A read always misses at least the node it asks about; a write at a
    // cached leaf (0 missing levels) still has its round trips.
    if (missing_levels < (write_round_trips > 0 ? 0 : 1)) missing_levels = write_round_trips > 0 ? 0 : 1;
    return (missing_levels * (reads_.value() + p_.local_search_us) + write_round_trips * reads_.value()) *
           p_.cache_factor;
}

bool OffloadPolicy::should_offload(int missing_levels, int write_round_trips) {
    decisions_++;
    bool offload = decide(missing_levels, write_round_trips);
    if (offload) chosen_++;
    return offload;
}

bool OffloadPolicy::decide(int missing_levels, int write_round_trips) {
    if (mode_ == OffloadMode::kOn) return true;
    if (mode_ == OffloadMode::kOff) return false;
    // No sample yet of one side: take it, so that both estimates exist.
    if (offloads_.empty()) return true;
    if (reads_.empty()) return false;
    bool offload = offload_estimate() < one_sided_estimate(missing_levels, write_round_trips);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    if (u(rng_) < p_.contrary) {
        contrary_++;
        offload = !offload;
    }
    return offload;
}

}  // namespace dex::tree
