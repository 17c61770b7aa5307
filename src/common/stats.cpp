#include "common/stats.h"

namespace dex {

namespace {
Stats g_local_stats;
Stats* g_stats = &g_local_stats;
}  // namespace

void Stats::reset() {
    for (auto* c : {&index_ops, &remote_reads, &remote_writes, &remote_atomics, &remote_rpcs,
                    &round_trips, &bytes_read, &bytes_written, &cache_hits, &cache_misses,
                    &admissions, &evictions, &coolings, &restarts, &lock_steals, &dirty_updates, &write_backs, &migrations, &offloads})
        c->store(0, std::memory_order_relaxed);
}

Stats& stats() { return *g_stats; }
void set_stats(Stats* shared) { g_stats = shared ? shared : &g_local_stats; }

}  // namespace dex
