// Spinlocks for the shared cache region: a std::atomic<uint32_t> word, 0 = free.
//
// Why not std::mutex / pthread_mutex: the region is shared by processes and
// must hold only address-free plain data (a process-shared robust pthread mutex
// would work but drags in per-platform attributes and kernel state). Every
// critical section guarded by these locks is a handful of loads and stores
// (a hash-bucket chain walk, a 14-slot array shift), so spinning is cheap.
//
// A process that dies while holding one leaves it locked forever. That is
// acceptable under PostgreSQL: a backend crash makes the postmaster kill every
// backend and re-initialize shared memory (including this region), so no
// survivor ever waits on a dead holder. Outside PostgreSQL (the benchmark
// driver) a crashed worker aborts the run anyway.
#pragma once
#include <sched.h>

#include <atomic>
#include <cstdint>

namespace dex::cache {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

// Spin a little, then yield: on a 2-core box a preempted lock holder must get
// the CPU back, so pure spinning would be pathological.
inline void spin_backoff(unsigned& attempt) {
    if (attempt < 16) {
        for (unsigned i = 0; i < (1u << (attempt / 2)); i++) cpu_relax();
    } else {
        sched_yield();
    }
    attempt++;
}

inline bool spin_try_lock(std::atomic<uint32_t>& w) {
    return w.load(std::memory_order_relaxed) == 0 && w.exchange(1, std::memory_order_acquire) == 0;
}

inline void spin_lock(std::atomic<uint32_t>& w) {
    unsigned attempt = 0;
    while (!spin_try_lock(w)) spin_backoff(attempt);
}

inline void spin_unlock(std::atomic<uint32_t>& w) { w.store(0, std::memory_order_release); }

class SpinGuard {
public:
    explicit SpinGuard(std::atomic<uint32_t>& w) : w_(w) { spin_lock(w_); }
    ~SpinGuard() { spin_unlock(w_); }
    SpinGuard(const SpinGuard&) = delete;
    SpinGuard& operator=(const SpinGuard&) = delete;

private:
    std::atomic<uint32_t>& w_;
};

// 64-bit mixer (splitmix64 finalizer): GAddrs differ mostly in a few middle
// bits (node-aligned offsets), so they must be mixed before bucketing.
inline uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

}  // namespace dex::cache
