#include "cache/shared_cache.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <new>
#include <random>

#include "common/error.h"

namespace dex::cache {

size_t SharedCache::header_bytes() { return (sizeof(SharedCacheHeader) + 63) & ~size_t(63); }

size_t SharedCache::bytes_for(uint64_t cache_bytes) { return header_bytes() + CacheRegion::bytes_for(cache_bytes); }

uint64_t SharedCache::random_generation() {
    std::random_device rd;
    uint64_t gen = 0;
    while (gen == 0)
        gen = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
              static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    return gen;
}

void SharedCache::reset() {
    header_ = nullptr;
    region_ = nullptr;
    cache_ = nullptr;  // a handle on an earlier region (shared memory re-initialized) is dropped
    pid_ = 0;
    block_ = nullptr;
    block_bytes_ = 0;
}

void SharedCache::create(void* mem, uint64_t cache_bytes, uint64_t generation) {
    reset();
    if (generation == 0) throw Error(ErrorCode::kInvalid, "node cache: generation 0");
    char* rmem = static_cast<char*>(mem) + header_bytes();
    size_t bytes = CacheRegion::bytes_for(cache_bytes);
    CacheRegion* r = CacheRegion::init(rmem, bytes, policy_);
    auto* sh = new (mem) SharedCacheHeader;
    sh->magic = SharedCacheHeader::kMagic;
    sh->cache_bytes = cache_bytes;
    sh->generation = generation;
    sh->writeback.init();
    sh->incarnations.init();
    std::atomic_thread_fence(std::memory_order_seq_cst);
    region_ = r;
    header_ = sh;
    block_ = mem;
    block_bytes_ = header_bytes() + bytes;
}

void SharedCache::attach(void* mem, uint64_t cache_bytes) {
    reset();
    auto* sh = static_cast<SharedCacheHeader*>(mem);
    if (sh->magic != SharedCacheHeader::kMagic || sh->cache_bytes != cache_bytes)
        throw Error(ErrorCode::kInvalid, "node cache: no cache of this size in shared memory");
    region_ = CacheRegion::attach(static_cast<char*>(mem) + header_bytes());
    header_ = sh;
    block_ = mem;
    block_bytes_ = bytes_for(cache_bytes);
}

Cache* SharedCache::process_cache() {
    if (!region_) return nullptr;
    pid_t me = getpid();
    if (cache_ && pid_ == me) return cache_;
    // A forked child inherits the parent's handle object: it is not ours (the
    // postmaster never allocates frames, so abandoning it loses nothing).
    auto* c = new Cache(*region_);
    c->set_policy(policy_);
    c->set_admit_check(admit_check_);
    c->set_write_back(write_back_);
    c->set_write_back_many(write_back_many_);
    cache_ = c;
    pid_ = me;
    return c;
}

void SharedCache::set_hooks(Cache::AdmitCheck admit_check, Cache::WriteBack write_back,
                            Cache::WriteBackMany write_back_many) {
    admit_check_ = std::move(admit_check);
    write_back_ = std::move(write_back);
    write_back_many_ = std::move(write_back_many);
}

void SharedCache::set_policy(AdmissionPolicy p) {
    policy_ = p;
    if (cache_ && pid_ == getpid()) cache_->set_policy(policy_);
}

void SharedCache::detach_process() {
    if (cache_ && pid_ == getpid()) delete cache_;  // returns our free frames
    cache_ = nullptr;
    pid_ = 0;
}

void SharedCache::sync_node(uint32_t node, uint64_t inc) {
    if (!header_) return;
    IncarnationTable& t = header_->incarnations;
    if (t.current(node, inc)) return;
    t.purge(*process_cache(), node, inc);
}

void SharedCache::drop_tree(uint32_t tree_id) {
    if (!header_) return;
    process_cache()->invalidate_if([tree_id](const FrameInfo& i) { return i.tree_id == tree_id; });
}

uint64_t SharedCache::flush(int only, RemoteMemory& mem) {
    if (!header_ || !region_) return 0;
    if (header_->writeback.used() == 0) return 0;  // no tree ever registered: no frame can be dirty
    return header_->writeback.flush(only, *process_cache(), mem);
}

uint64_t SharedCache::dirty_lsn_max(uint32_t tree_id, bool all) {
    if (!region_) return 0;
    return header_->writeback.dirty_lsn_max(*region_, tree_id, all);
}

uint64_t SharedCache::dirty_since_min() {
    if (!region_) return UINT64_MAX;
    return header_->writeback.dirty_since_min(*region_);
}

uint64_t SharedCache::crash_since_min() {
    if (!region_) return UINT64_MAX;
    return header_->writeback.crash_since_min(*region_);
}

uint64_t SharedCache::log_images(const WritebackRegistry::ImageLog& log) {
    if (!region_) return 0;
    return header_->writeback.log_images(*region_, log);
}

std::vector<CensusRow> SharedCache::census() {
    std::vector<CensusRow> out;
    if (!region_) return out;
    std::map<std::tuple<int, uint32_t, int>, CensusRow> agg;
    region_->for_each_frame([&](const FrameInfo& i) {
        if (i.state != FrameState::kHot && i.state != FrameState::kCooling) return;
        if (i.gaddr == kNullGAddr) return;
        int node = static_cast<int>(gaddr_node(i.gaddr));
        CensusRow& r = agg[std::make_tuple(node, i.tree_id, static_cast<int>(i.level))];
        r.node = node;
        r.tree_id = i.tree_id;
        r.level = i.level;
        r.frames++;
        if (i.state == FrameState::kCooling) r.cooling++;
        if (i.dirty) r.dirty++;
    });
    out.reserve(agg.size());
    for (auto& [key, r] : agg) out.push_back(r);
    return out;
}

}  // namespace dex::cache
