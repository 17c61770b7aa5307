// Remote-operation counters. Every transport counts into a Stats object; the
// PostgreSQL glue points the process at one instance in shared memory so that
// dex_stats() shows the whole instance. std::atomic<uint64_t> is lock-free and
// address-free on every platform we build for, so it is valid in shared memory.
// The counters themselves are listed once, in common/stats_list.h.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/stats_list.h"

namespace dex {

struct Stats {
#define DEX_STATS_MEMBER(name, description) std::atomic<uint64_t> name{0};
    DEX_STATS_COUNTERS(DEX_STATS_MEMBER)
#undef DEX_STATS_MEMBER

    // How many counters there are, and their names in list order.
    static constexpr size_t kCount = 0
#define DEX_STATS_ONE(name, description) +1
        DEX_STATS_COUNTERS(DEX_STATS_ONE)
#undef DEX_STATS_ONE
        ;
    static const char* const kNames[];

    static void add(std::atomic<uint64_t>& c, uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }
    void reset();
};

// The Stats object this process counts into (defaults to a process-local one).
Stats& stats();
void set_stats(Stats* shared);  // nullptr = back to the process-local object

}  // namespace dex
