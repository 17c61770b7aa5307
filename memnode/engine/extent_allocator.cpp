#include "engine/extent_allocator.h"

#include <iterator>

namespace dex::memnode {

void ExtentAllocator::insert(uint64_t off, uint64_t len) {
    by_off_.emplace(off, len);
    by_size_.emplace(len, off);
    free_total_ += len;
}

void ExtentAllocator::erase(std::map<uint64_t, uint64_t>::iterator it) {
    by_size_.erase({it->second, it->first});
    free_total_ -= it->second;
    by_off_.erase(it);
}

bool ExtentAllocator::alloc(uint64_t len, uint64_t& off) {
    auto s = by_size_.lower_bound({len, 0});
    if (s == by_size_.end()) return false;
    const uint64_t elen = s->first, eoff = s->second;
    erase(by_off_.find(eoff));
    if (elen > len) insert(eoff + len, elen - len);
    off = eoff;
    used_ += len;
    return true;
}

void ExtentAllocator::free(uint64_t off, uint64_t len) {
    used_ -= len;
    auto next = by_off_.lower_bound(off);
    if (next != by_off_.end() && next->first == off + len) {
        len += next->second;
        erase(next);
    }
    auto it = by_off_.lower_bound(off);
    if (it != by_off_.begin()) {
        auto prev = std::prev(it);
        if (prev->first + prev->second == off) {
            off = prev->first;
            len += prev->second;
            erase(prev);
        }
    }
    insert(off, len);
}

}  // namespace dex::memnode
