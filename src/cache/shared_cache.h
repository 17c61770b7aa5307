// The shared cache block of a compute server, and one process's view of it
// (src/README.md "Node cache", "In PostgreSQL").
//
// Layout of the block (one per compute server; PostgreSQL: main shared
// memory, built in the postmaster's shmem startup, inherited by backends):
//
//     SharedCacheHeader | CacheRegion (frames, mapping table, cooling map)
//
// The header holds what the processes of the compute server agree on beside
// the frames: a random `generation` (the id of this region's life, written
// into the dirty-owner words of write-back trees), the write-back registry
// (cache/writeback_registry.h) and the memory-node incarnation table
// (cache/incarnations.h).
//
// SharedCache is the process-local object: where the block is, and this
// process's Cache handle, created lazily per pid (a forked child never uses
// its parent's free set or PRNG) with this process's admission policy and
// the admit-check / write-back hooks the owner installed.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "cache/admission.h"
#include "cache/cache.h"
#include "cache/incarnations.h"
#include "cache/region.h"
#include "cache/writeback_registry.h"

namespace dex::cache {

struct SharedCacheHeader {
    static constexpr uint64_t kMagic = 0x6465782d63617069ull;  // "dex-capi"
    uint64_t magic;
    uint64_t cache_bytes;
    uint64_t generation;  // random, chosen when the block is built; never 0
    WritebackRegistry writeback;
    IncarnationTable incarnations;
};

// Frames per (memory node, tree id, level), for dex_cache_stats().
struct CensusRow {
    int node = 0;
    uint32_t tree_id = 0;
    int level = 0;
    uint64_t frames = 0;   // mapped frames (hot + cooling)
    uint64_t cooling = 0;
    uint64_t dirty = 0;
};

class SharedCache {
public:
    // Bytes of the header (rounded up to 64) and of the whole block for a
    // cache of `cache_bytes`. bytes_for throws like CacheRegion::bytes_for.
    static size_t header_bytes();
    static size_t bytes_for(uint64_t cache_bytes);
    // A random, non-zero generation.
    static uint64_t random_generation();

    // Build the block in `mem` (bytes_for(cache_bytes) bytes): an empty region
    // with this process's admission policy, an empty registry and table, and
    // `generation` (non-zero).
    void create(void* mem, uint64_t cache_bytes, uint64_t generation);
    // Find the block another process built in `mem`. Throws kInvalid if there
    // is no block of this cache size there.
    void attach(void* mem, uint64_t cache_bytes);
    // No block any more (shared memory re-initialized, or no cache). This
    // process's handle on the earlier region is abandoned, not deleted.
    void reset();

    bool enabled() const { return region_ != nullptr; }
    CacheRegion* region() { return region_; }
    SharedCacheHeader* header() { return header_; }
    void* block() const { return block_; }
    size_t block_bytes() const { return block_bytes_; }
    uint64_t generation() const { return header_ ? header_->generation : 0; }

    // ---- this process's handle ----
    // nullptr without a block. Created on first use in each process (pid).
    Cache* process_cache();
    // Installed on every handle created from now on.
    void set_hooks(Cache::AdmitCheck admit_check, Cache::WriteBack write_back,
                   Cache::WriteBackMany write_back_many = {});
    // This process's admission policy (also the policy create() builds with).
    void set_policy(AdmissionPolicy p);
    const AdmissionPolicy& policy() const { return policy_; }
    // Process exit: delete our handle (its free frames go back to the region).
    void detach_process();

    // ---- operations that use this process's handle ----
    // IncarnationTable::sync for `node` (nothing without a block): the purge,
    // if one is needed, runs through this process's handle.
    void sync_node(uint32_t node, uint64_t inc);
    // Drop every frame of tree `tree_id` (on any memory node).
    void drop_tree(uint32_t tree_id);
    // WritebackRegistry::flush (0 without a block or a registered tree).
    uint64_t flush(int only, RemoteMemory& mem);
    // WritebackRegistry::dirty_lsn_max (0 without a block).
    uint64_t dirty_lsn_max(uint32_t tree_id, bool all);
    // WritebackRegistry::dirty_since_min (UINT64_MAX without a block).
    uint64_t dirty_since_min();
    // WritebackRegistry::crash_since_min (UINT64_MAX without a block).
    uint64_t crash_since_min();
    // WritebackRegistry::log_images (0 without a block).
    uint64_t log_images(const WritebackRegistry::ImageLog& log);
    // Mapped frames per (memory node, tree id, level), ascending.
    std::vector<CensusRow> census();

private:
    SharedCacheHeader* header_ = nullptr;
    CacheRegion* region_ = nullptr;
    void* block_ = nullptr;  // header + region, for Transport::register_region
    size_t block_bytes_ = 0;
    Cache* cache_ = nullptr;  // this process's handle (see process_cache)
    pid_t pid_ = 0;
    AdmissionPolicy policy_;
    Cache::AdmitCheck admit_check_;
    Cache::WriteBack write_back_;
    Cache::WriteBackMany write_back_many_;
};

}  // namespace dex::cache
