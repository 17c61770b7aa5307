#include "cache/mapping_table.h"

#include <new>

#include "cache/spinlock.h"

namespace dex::cache {

namespace {
constexpr uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
}  // namespace

void MappingTable::size_for(uint32_t frames, uint32_t* buckets, uint32_t* entries) {
    uint32_t b = 16;
    while (b < 2ull * frames && b < (1u << 31)) b <<= 1;
    *buckets = b;
    // In-flight markers: one per concurrent fetch (a few per process) plus
    // offloaded subtrees; frames/2 + 1024 is far more than enough.
    *entries = frames + frames / 2 + 1024;
}

size_t MappingTable::bytes_for(uint32_t buckets, uint32_t entries) {
    return align_up(sizeof(MappingTable), 64) + align_up(size_t(buckets) * sizeof(Bucket), 64) +
           size_t(entries) * sizeof(Entry);
}

MappingTable* MappingTable::init(void* mem, uint32_t buckets, uint32_t entries) {
    auto* t = new (mem) MappingTable();
    t->nbuckets_ = buckets;
    t->nentries_ = entries;
    t->buckets_off_ = align_up(sizeof(MappingTable), 64);
    t->entries_off_ = t->buckets_off_ + align_up(size_t(buckets) * sizeof(Bucket), 64);
    Bucket* b = t->buckets();
    for (uint32_t i = 0; i < buckets; i++) new (&b[i]) Bucket();
    Entry* e = t->entries();
    for (uint32_t i = 0; i < entries; i++) new (&e[i]) Entry();
    for (uint32_t i = entries; i-- > 0;) t->free_entry(i);
    return t;
}

MappingTable::Bucket& MappingTable::bucket_of(GAddr g) { return buckets()[mix64(g) & (nbuckets_ - 1)]; }

uint32_t MappingTable::alloc_entry() {
    Entry* e = entries();
    return free_.pop([e](uint32_t i) -> std::atomic<uint32_t>& { return e[i].next; });
}

void MappingTable::free_entry(uint32_t i) {
    Entry* e = entries();
    free_.push(i, [e](uint32_t j) -> std::atomic<uint32_t>& { return e[j].next; });
}

uint32_t MappingTable::find_locked(Bucket& b, GAddr g, std::atomic<uint32_t>** link) {
    Entry* e = entries();
    std::atomic<uint32_t>* l = &b.head;
    for (uint32_t i = l->load(std::memory_order_relaxed); i != IndexStack::kNil;
         i = l->load(std::memory_order_relaxed)) {
        if (e[i].key.load(std::memory_order_relaxed) == g) {
            if (link) *link = l;
            return i;
        }
        l = &e[i].next;
    }
    return IndexStack::kNil;
}

namespace {
thread_local uint64_t t_lookups = 0;
}  // namespace

uint64_t MappingTable::lookups_by_this_thread() { return t_lookups; }

uint32_t MappingTable::lookup(GAddr g) {
    t_lookups++;
    Bucket& b = bucket_of(g);
    SpinGuard guard(b.lock);
    uint32_t i = find_locked(b, g, nullptr);
    if (i == IndexStack::kNil) return kNotFound;
    uint32_t v = entries()[i].value.load(std::memory_order_relaxed);
    return v == kIoStale ? kIoInProgress : v;
}

bool MappingTable::insert(GAddr g, uint32_t value) {
    Bucket& b = bucket_of(g);
    SpinGuard guard(b.lock);
    if (find_locked(b, g, nullptr) != IndexStack::kNil) return false;
    uint32_t i = alloc_entry();
    if (i == IndexStack::kNil) return false;
    Entry& e = entries()[i];
    e.key.store(g, std::memory_order_relaxed);
    e.value.store(value, std::memory_order_relaxed);
    e.next.store(b.head.load(std::memory_order_relaxed), std::memory_order_relaxed);
    b.head.store(i, std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
    return true;
}

MappingTable::Begin MappingTable::try_begin_io(GAddr g, uint32_t* frame) {
    Bucket& b = bucket_of(g);
    SpinGuard guard(b.lock);
    uint32_t i = find_locked(b, g, nullptr);
    if (i != IndexStack::kNil) {
        uint32_t v = entries()[i].value.load(std::memory_order_relaxed);
        if (v == kIoInProgress || v == kIoStale) return Begin::kIoInProgress;
        if (frame) *frame = v;
        return Begin::kCached;
    }
    i = alloc_entry();
    if (i == IndexStack::kNil) return Begin::kFull;
    Entry& e = entries()[i];
    e.key.store(g, std::memory_order_relaxed);
    e.value.store(kIoInProgress, std::memory_order_relaxed);
    e.next.store(b.head.load(std::memory_order_relaxed), std::memory_order_relaxed);
    b.head.store(i, std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
    return Begin::kOwner;
}

bool MappingTable::publish(GAddr g, uint32_t frame) {
    Bucket& b = bucket_of(g);
    uint32_t i;
    {
        SpinGuard guard(b.lock);
        std::atomic<uint32_t>* link = nullptr;
        i = find_locked(b, g, &link);
        if (i == IndexStack::kNil) return false;
        uint32_t v = entries()[i].value.load(std::memory_order_relaxed);
        if (v == kIoInProgress) {
            entries()[i].value.store(frame, std::memory_order_relaxed);
            return true;
        }
        if (v != kIoStale) return false;
        link->store(entries()[i].next.load(std::memory_order_relaxed), std::memory_order_relaxed);
    }
    count_.fetch_sub(1, std::memory_order_relaxed);
    free_entry(i);
    return false;
}

bool MappingTable::mark_stale(GAddr g) {
    Bucket& b = bucket_of(g);
    SpinGuard guard(b.lock);
    uint32_t i = find_locked(b, g, nullptr);
    if (i == IndexStack::kNil) return false;
    uint32_t v = entries()[i].value.load(std::memory_order_relaxed);
    if (v != kIoInProgress && v != kIoStale) return false;
    entries()[i].value.store(kIoStale, std::memory_order_relaxed);
    return true;
}

bool MappingTable::erase(GAddr g, uint32_t expected) {
    Bucket& b = bucket_of(g);
    uint32_t i;
    {
        SpinGuard guard(b.lock);
        std::atomic<uint32_t>* link = nullptr;
        i = find_locked(b, g, &link);
        if (i == IndexStack::kNil || entries()[i].value.load(std::memory_order_relaxed) != expected) return false;
        link->store(entries()[i].next.load(std::memory_order_relaxed), std::memory_order_relaxed);
    }
    count_.fetch_sub(1, std::memory_order_relaxed);
    free_entry(i);
    return true;
}

void MappingTable::for_each(const std::function<void(GAddr, uint32_t)>& fn) {
    Entry* e = entries();
    for (uint32_t bi = 0; bi < nbuckets_; bi++) {
        Bucket& b = buckets()[bi];
        SpinGuard guard(b.lock);
        for (uint32_t i = b.head.load(std::memory_order_relaxed); i != IndexStack::kNil;
             i = e[i].next.load(std::memory_order_relaxed))
        {
            uint32_t v = e[i].value.load(std::memory_order_relaxed);
            fn(e[i].key.load(std::memory_order_relaxed), v == kIoStale ? kIoInProgress : v);
        }
    }
}

}  // namespace dex::cache
