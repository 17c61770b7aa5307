// Lock-free LIFO of array indices (Treiber stack) for shared memory. The head
// packs (ABA tag << 32 | index), so it is a single address-free 64-bit atomic;
// the links live in the caller's array (`next` of element i).
//
// Used for the mapping table's free entries and the region's shared free
// frames. Popping reads next[top] while another process may already have
// popped `top` and reused its link word: the value is garbage but the tag makes
// the CAS fail, so nothing is lost.
#pragma once
#include <atomic>
#include <cstdint>

namespace dex::cache {

struct IndexStack {
    static constexpr uint32_t kNil = UINT32_MAX;
    std::atomic<uint64_t> head{kNil};

    template <class NextOf>  // NextOf(i) -> std::atomic<uint32_t>&
    void push(uint32_t i, NextOf next_of) {
        uint64_t h = head.load(std::memory_order_relaxed);
        for (;;) {
            next_of(i).store(static_cast<uint32_t>(h), std::memory_order_relaxed);
            uint64_t nh = ((h >> 32) + 1) << 32 | i;
            if (head.compare_exchange_weak(h, nh, std::memory_order_release, std::memory_order_relaxed)) return;
        }
    }

    template <class NextOf>
    uint32_t pop(NextOf next_of) {
        uint64_t h = head.load(std::memory_order_acquire);
        for (;;) {
            uint32_t top = static_cast<uint32_t>(h);
            if (top == kNil) return kNil;
            uint32_t nxt = next_of(top).load(std::memory_order_relaxed);
            uint64_t nh = ((h >> 32) + 1) << 32 | nxt;
            if (head.compare_exchange_weak(h, nh, std::memory_order_acquire, std::memory_order_acquire)) return top;
        }
    }

    bool empty() const { return static_cast<uint32_t>(head.load(std::memory_order_relaxed)) == kNil; }
};

}  // namespace dex::cache
