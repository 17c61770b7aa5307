// The cooling map (DEX 5.2): eviction candidates, without a central FIFO.
//
// A fixed array of buckets; each is one 64-byte cache line holding a spinlock
// and a FIFO array of up to kSlots frame indices (oldest first). A frame being
// cooled goes to the bucket chosen by hashing its GAddr and is appended at the
// tail; appending to a full bucket pushes out the head (the bucket's oldest
// candidate), which the caller then evicts. Processes cooling / evicting in
// different buckets never touch the same cache line.
//
// Slots are u32 frame indices rather than the paper's 8-byte local pointers
// (the region is shared by processes mapped at possibly different addresses),
// so one line holds 14 of them instead of 7.
//
// Invariant kept by CacheRegion: under bucket b's lock, a frame whose GAddr
// hashes to b is in b  <=>  its state is kCooling. So every COOLING -> X
// transition takes the bucket lock, and a frame is in at most one slot.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cache/frame.h"
#include "common/gaddr.h"

namespace dex::cache {

constexpr uint32_t kCoolingSlots = 14;

struct alignas(64) CoolingBucket {
    std::atomic<uint32_t> lock{0};
    uint32_t count = 0;  // written only under `lock` (approx_size() peeks with an atomic load)
    uint32_t slots[kCoolingSlots] = {};
};
static_assert(sizeof(CoolingBucket) == 64);

class CoolingMap {
public:
    static constexpr uint32_t kSlots = kCoolingSlots;

    // About 10% of the frames can be cooling (LeanStore's default ratio).
    static uint32_t buckets_for(uint32_t frames);
    static size_t bytes_for(uint32_t buckets);
    static CoolingMap* init(void* mem, uint32_t buckets);  // mem 64-byte aligned

    uint32_t bucket_count() const { return nbuckets_; }
    uint32_t bucket_of(GAddr g) const;

    // One bucket, locked for the lifetime of this object.
    class Locked {
    public:
        Locked(CoolingMap& m, uint32_t bucket);
        ~Locked();
        Locked(const Locked&) = delete;
        Locked& operator=(const Locked&) = delete;

        uint32_t size() const { return b_.count; }
        bool full() const { return b_.count == kSlots; }
        uint32_t at(uint32_t i) const { return b_.slots[i]; }  // 0 = oldest
        bool contains(uint32_t frame) const;
        // Append `frame` as the newest. If the bucket was full, its oldest
        // frame is removed first and returned; otherwise kNoFrame.
        uint32_t push_back(uint32_t frame);
        uint32_t pop_front();  // oldest, or kNoFrame if empty
        bool remove(uint32_t frame);

    private:
        CoolingBucket& b_;
    };

    uint32_t approx_size(uint32_t bucket) const;  // unlocked peek, for sampling

private:
    friend class Locked;
    CoolingBucket* buckets();
    const CoolingBucket* buckets() const;
    uint32_t nbuckets_ = 0;
    uint64_t buckets_off_ = 0;
};

}  // namespace dex::cache
