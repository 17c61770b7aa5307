// The memory node's pool allocator: free extents of the pool by offset and by
// size, best fit. Namespaces (engine.cpp) take extents from it and keep their
// own freed 1 KiB blocks; this class knows nothing of them. Not thread-safe:
// the engine holds its allocator mutex around every call.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <utility>

namespace dex::memnode {

class ExtentAllocator {
public:
    // [off, off + len) becomes free (the pool's usable range, once).
    void add_free(uint64_t off, uint64_t len) { insert(off, len); }
    // Best fit: the smallest free extent that holds `len`, lowest offset among
    // equals; the rest of it stays free. False: none is large enough.
    bool alloc(uint64_t len, uint64_t& off);
    // An extent alloc() handed out goes back, merged with free neighbours.
    void free(uint64_t off, uint64_t len);
    uint64_t largest_free() const { return by_size_.empty() ? 0 : by_size_.rbegin()->first; }
    uint64_t free_total() const { return free_total_; }
    uint64_t used() const { return used_; }

private:
    void insert(uint64_t off, uint64_t len);
    void erase(std::map<uint64_t, uint64_t>::iterator it);
    std::map<uint64_t, uint64_t> by_off_;               // offset -> length
    std::set<std::pair<uint64_t, uint64_t>> by_size_;   // (length, offset)
    uint64_t free_total_ = 0;
    uint64_t used_ = 0;
};

}  // namespace dex::memnode
