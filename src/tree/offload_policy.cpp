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

double OffloadPolicy::one_sided_estimate(int missing_levels) const {
    if (missing_levels < 1) missing_levels = 1;
    return missing_levels * (reads_.value() + p_.local_search_us) * p_.cache_factor;
}

bool OffloadPolicy::should_offload(int missing_levels) {
    if (mode_ == OffloadMode::kOn) return true;
    if (mode_ == OffloadMode::kOff) return false;
    // No sample yet of one side: take it, so that both estimates exist.
    if (offloads_.empty()) return true;
    if (reads_.empty()) return false;
    bool offload = offload_estimate() < one_sided_estimate(missing_levels);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    if (u(rng_) < p_.contrary) {
        contrary_++;
        offload = !offload;
    }
    return offload;
}

}  // namespace dex::tree
