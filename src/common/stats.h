// Remote-operation counters. Every transport counts into a Stats object; the
// PostgreSQL glue points the process at one instance in shared memory so that
// dex_stats() shows the whole instance. std::atomic<uint64_t> is lock-free and
// address-free on every platform we build for, so it is valid in shared memory.
#pragma once
#include <atomic>
#include <cstdint>

namespace dex {

struct Stats {
    std::atomic<uint64_t> index_ops{0};      // tree operations (lookup/insert/delete/scan step)
    std::atomic<uint64_t> remote_reads{0};   // one-sided READs (each op of a batch counts)
    std::atomic<uint64_t> remote_writes{0};  // one-sided WRITEs
    std::atomic<uint64_t> remote_atomics{0}; // CAS + FAA
    std::atomic<uint64_t> remote_rpcs{0};    // two-sided RPCs
    std::atomic<uint64_t> round_trips{0};    // network round trips (a batch is one)
    std::atomic<uint64_t> bytes_read{0};     // payload bytes fetched from memory nodes
    std::atomic<uint64_t> bytes_written{0};  // payload bytes sent to memory nodes
    std::atomic<uint64_t> cache_hits{0};     // reserved for the node cache
    std::atomic<uint64_t> cache_misses{0};
    std::atomic<uint64_t> admissions{0};
    std::atomic<uint64_t> evictions{0};
    std::atomic<uint64_t> coolings{0};
    std::atomic<uint64_t> restarts{0};       // traversals restarted (lock seen, torn read, stale fence)
    std::atomic<uint64_t> lock_steals{0};    // remote locks taken over from dead owners
    std::atomic<uint64_t> migrations{0};     // subtrees moved to an emptier memory node at a split
    std::atomic<uint64_t> offloads{0};       // operations executed by a memory node (OFFLOAD RPC)
    std::atomic<uint64_t> dirty_updates{0};  // write-back mode: leaf changes kept in a dirty frame
    std::atomic<uint64_t> write_backs{0};    // write-back mode: dirty frames written to remote memory

    static void add(std::atomic<uint64_t>& c, uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }
    void reset();
};

// The Stats object this process counts into (defaults to a process-local one).
Stats& stats();
void set_stats(Stats* shared);  // nullptr = back to the process-local object

}  // namespace dex
