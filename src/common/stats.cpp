#include "common/stats.h"

namespace dex {

namespace {
Stats g_local_stats;
Stats* g_stats = &g_local_stats;
}  // namespace

const char* const Stats::kNames[] = {
#define DEX_STATS_NAME(name, description) #name,
    DEX_STATS_COUNTERS(DEX_STATS_NAME)
#undef DEX_STATS_NAME
};
static_assert(sizeof(Stats::kNames) / sizeof(Stats::kNames[0]) == Stats::kCount);
static_assert(sizeof(Stats) == Stats::kCount * sizeof(std::atomic<uint64_t>), "Stats holds the counters only");

void Stats::reset() {
#define DEX_STATS_RESET(name, description) name.store(0, std::memory_order_relaxed);
    DEX_STATS_COUNTERS(DEX_STATS_RESET)
#undef DEX_STATS_RESET
}

Stats& stats() { return *g_stats; }
void set_stats(Stats* shared) { g_stats = shared ? shared : &g_local_stats; }

}  // namespace dex
