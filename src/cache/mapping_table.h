// The cache's mapping table: GAddr -> frame index, in shared memory (DEX 5.1).
//
// Chained hash table: a power-of-two array of buckets, each a spinlock and the
// head of a chain of entries; entries come from a fixed pool in the same
// region (lock-free free stack), linked by index. Every operation holds the
// bucket's spinlock for a short chain walk. With buckets >= 2 x frames the
// average chain is <= 0.5 entries. (Lock-free readers were not worth it: entries
// are recycled between chains, which makes unlocked chain walks subtle, and
// the swizzled-pointer fast path does not touch this table at all.)
//
// A value is a frame index or kIoInProgress: some process is fetching that
// node from remote memory (or, later, an offloaded operation owns its subtree,
// DEX 6.2). Whoever sees kIoInProgress must not issue the same remote read;
// the tree restarts from its cached root (DEX 5.4).
//
// The table itself never touches frames; CacheRegion keeps the invariant
// "table[g] == f  =>  frame f holds g (or is locked by its admitter/evicter)".
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "cache/index_stack.h"
#include "common/gaddr.h"

namespace dex::cache {

class MappingTable {
public:
    static constexpr uint32_t kIoInProgress = UINT32_MAX - 1;
    static constexpr uint32_t kNotFound = UINT32_MAX;  // == kNoFrame
    // A marker whose fetch may have read an image older than a change made
    // since (mark_stale): its publish() fails, so that image is never cached.
    // Seen from outside (lookup, try_begin_io) it is just kIoInProgress.
    static constexpr uint32_t kIoStale = UINT32_MAX - 2;

    // Sizes for a cache of `frames` frames: buckets = pow2 >= 2 x frames; entries =
    // frames (at most one mapping per frame) + room for in-flight I/O markers.
    static void size_for(uint32_t frames, uint32_t* buckets, uint32_t* entries);
    static size_t bytes_for(uint32_t buckets, uint32_t entries);
    // Lays the table out in `mem` (8-byte aligned, bytes_for() bytes); buckets
    // must be a power of two.
    static MappingTable* init(void* mem, uint32_t buckets, uint32_t entries);

    // Frame index, kIoInProgress (also for a stale marker), or kNotFound.
    uint32_t lookup(GAddr g);
    // How many lookups this thread made: a test's and a profile's question
    // (which paths still take a bucket's spin lock). Thread-local, so
    // counting writes no line another backend or thread reads.
    static uint64_t lookups_by_this_thread();

    enum class Begin {
        kOwner,         // marker inserted: the caller fetches the node, then publish() or abort_io()
        kCached,        // already mapped; *frame says where
        kIoInProgress,  // another process is fetching it
        kFull,          // entry pool exhausted: proceed uncached
    };
    Begin try_begin_io(GAddr g, uint32_t* frame = nullptr);
    // Marker of g -> frame. False if g has no I/O marker, or a stale one
    // (which is removed: the caller drops its image).
    bool publish(GAddr g, uint32_t frame);
    // Remove g's I/O marker (stale or not). False if g has none.
    bool abort_io(GAddr g) { return erase(g, kIoInProgress) || erase(g, kIoStale); }
    // A writer changed g after the marker's owner may have read it: turn the
    // marker stale. True if g has a marker (now stale); false if it has none
    // (absent, or mapped to a frame: the caller looks again).
    bool mark_stale(GAddr g);
    // Insert g -> value if g is absent (value may be kIoInProgress).
    bool insert(GAddr g, uint32_t value);
    // Remove g if it maps to `expected`.
    bool erase(GAddr g, uint32_t expected);

    // Every (g, value), bucket by bucket, each bucket under its lock (so fn must
    // not call back into the table). For diagnostics and tests.
    void for_each(const std::function<void(GAddr, uint32_t)>& fn);
    uint32_t size() const { return count_.load(std::memory_order_relaxed); }
    uint32_t capacity() const { return nentries_; }
    uint32_t bucket_count() const { return nbuckets_; }

private:
    struct Bucket {
        std::atomic<uint32_t> lock{0};
        std::atomic<uint32_t> head{IndexStack::kNil};
    };
    struct Entry {
        std::atomic<uint64_t> key{0};
        std::atomic<uint32_t> value{0};
        std::atomic<uint32_t> next{IndexStack::kNil};  // chain link, or free-stack link
    };
    static_assert(sizeof(Bucket) == 8 && sizeof(Entry) == 16);

    Bucket* buckets() { return reinterpret_cast<Bucket*>(reinterpret_cast<char*>(this) + buckets_off_); }
    Entry* entries() { return reinterpret_cast<Entry*>(reinterpret_cast<char*>(this) + entries_off_); }
    Bucket& bucket_of(GAddr g);
    // Under the bucket lock: the entry holding g, or kNil; *link = the word pointing at it.
    uint32_t find_locked(Bucket& b, GAddr g, std::atomic<uint32_t>** link);
    uint32_t alloc_entry();
    void free_entry(uint32_t e);

    // Self-relative offsets keep the table address-free.
    uint32_t nbuckets_ = 0;
    uint32_t nentries_ = 0;
    uint64_t buckets_off_ = 0;
    uint64_t entries_off_ = 0;
    IndexStack free_;
    std::atomic<uint32_t> count_{0};
};

}  // namespace dex::cache
