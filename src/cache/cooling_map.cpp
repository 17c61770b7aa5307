#include "cache/cooling_map.h"

#include <cstring>
#include <new>

#include "cache/spinlock.h"

namespace dex::cache {

uint32_t CoolingMap::buckets_for(uint32_t frames) {
    uint64_t cooling = frames / 10;
    uint64_t b = (cooling + kSlots - 1) / kSlots;
    return b < 1 ? 1 : static_cast<uint32_t>(b);
}

size_t CoolingMap::bytes_for(uint32_t buckets) { return 64 + size_t(buckets) * sizeof(CoolingBucket); }

CoolingMap* CoolingMap::init(void* mem, uint32_t buckets) {
    auto* m = new (mem) CoolingMap();
    m->nbuckets_ = buckets;
    m->buckets_off_ = 64;
    CoolingBucket* b = m->buckets();
    for (uint32_t i = 0; i < buckets; i++) new (&b[i]) CoolingBucket();
    return m;
}

CoolingBucket* CoolingMap::buckets() { return reinterpret_cast<CoolingBucket*>(reinterpret_cast<char*>(this) + buckets_off_); }
const CoolingBucket* CoolingMap::buckets() const {
    return reinterpret_cast<const CoolingBucket*>(reinterpret_cast<const char*>(this) + buckets_off_);
}

uint32_t CoolingMap::bucket_of(GAddr g) const {
    // Multiply-high maps the hash onto [0, nbuckets) without a power-of-two size.
    return static_cast<uint32_t>((static_cast<unsigned __int128>(mix64(g ^ 0x5bd1e995ull)) * nbuckets_) >> 64);
}

uint32_t CoolingMap::approx_size(uint32_t bucket) const {
    return __atomic_load_n(&buckets()[bucket].count, __ATOMIC_RELAXED);
}

CoolingMap::Locked::Locked(CoolingMap& m, uint32_t bucket) : b_(m.buckets()[bucket]) { spin_lock(b_.lock); }
CoolingMap::Locked::~Locked() { spin_unlock(b_.lock); }

bool CoolingMap::Locked::contains(uint32_t frame) const {
    for (uint32_t i = 0; i < b_.count; i++)
        if (b_.slots[i] == frame) return true;
    return false;
}

uint32_t CoolingMap::Locked::push_back(uint32_t frame) {
    uint32_t out = kNoFrame;
    if (b_.count == kSlots) out = pop_front();
    b_.slots[b_.count] = frame;
    __atomic_store_n(&b_.count, b_.count + 1, __ATOMIC_RELAXED);
    return out;
}

uint32_t CoolingMap::Locked::pop_front() {
    if (b_.count == 0) return kNoFrame;
    uint32_t out = b_.slots[0];
    std::memmove(&b_.slots[0], &b_.slots[1], (b_.count - 1) * sizeof(uint32_t));
    __atomic_store_n(&b_.count, b_.count - 1, __ATOMIC_RELAXED);
    return out;
}

bool CoolingMap::Locked::remove(uint32_t frame) {
    for (uint32_t i = 0; i < b_.count; i++) {
        if (b_.slots[i] != frame) continue;
        std::memmove(&b_.slots[i], &b_.slots[i + 1], (b_.count - i - 1) * sizeof(uint32_t));
        __atomic_store_n(&b_.count, b_.count - 1, __ATOMIC_RELAXED);
        return true;
    }
    return false;
}

}  // namespace dex::cache
