// Memory-node incarnations of the shared node cache (src/README.md "Node
// cache", "Invalidation: memory-node incarnations").
//
// Frames are keyed by GAddr, and a memory node that restarted hands out the
// same addresses and namespace ids (hence tree ids) again, so nothing in a
// frame tells an image of the old life from one of the new. This table
// records, per memory node number, the incarnation the cached frames of that
// node belong to (0: none, or a purge in progress). Before a process reads a
// node's data through the cache it calls sync() with the incarnation it is
// connected to; a different record purges the node's frames first. Images
// read just before a restart and admitted after the purge are caught by
// admit_ok(), the cache's admission check.
//
// Lives in shared memory (plain data, no pointers), inside the shared cache
// block (cache/shared_cache.h); one per compute server.
#pragma once
#include <atomic>
#include <cstdint>

#include "common/gaddr.h"

namespace dex::cache {

class Cache;
struct FrameInfo;

class IncarnationTable {
public:
    static constexpr uint32_t kMaxNodes = 1024;

    // Every record 0, purge lock free. Only while no process uses the table.
    void init();

    // The incarnation whose frames the cache may hold for `node` (0: none).
    uint64_t recorded(uint32_t node) const {
        return node < kMaxNodes ? inc_[node].load(std::memory_order_acquire) : 0;
    }
    // True if the cache is known to hold only frames of incarnation `inc` of
    // `node` (no purge needed). Throws kInvalid if node >= kMaxNodes.
    bool current(uint32_t node, uint64_t inc) const;
    // Make the record for `node` equal `inc`, dropping (through `cache`, this
    // process's handle) every frame of that memory node and every frame of a
    // tree homed there (its tree id comes back after the restart) first,
    // unless another process did meanwhile. Serialized by the purge lock.
    // Throws kInvalid (node too large) or kRemote (frames that could not be
    // dropped: the record stays 0, so the next sync tries again).
    void purge(Cache& cache, uint32_t node, uint64_t inc);
    // current() or purge().
    void sync(Cache& cache, uint32_t node, uint64_t inc) {
        if (!current(node, inc)) purge(cache, node, inc);
    }
    // The admission check: may an image of `g` just admitted stay in the
    // cache? Only if the record for its node is not 0 (a purge is running) and
    // equals connected(node), the incarnation this process is connected to
    // (asked only then: it may connect; if it throws, the answer is no). The 0
    // a purge stores before its scan makes this race-free: either the frame
    // was installed before the scan, which drops it, or this check sees 0 or
    // the new incarnation.
    template <class ConnectedIncarnation>
    bool admit_ok(GAddr g, ConnectedIncarnation&& connected) const {
        uint32_t node = gaddr_node(g);
        if (node >= kMaxNodes) return false;
        try {
            uint64_t have = inc_[node].load(std::memory_order_seq_cst);
            return have != 0 && have == connected(node);
        } catch (...) {
            return false;
        }
    }

    // Does frame `i` belong to memory node `node` for purging? Its node is
    // `node`, or its tree is homed there: tree ids carry the home node in
    // their top byte (tree::tree_id_for).
    static bool belongs_to_node(const FrameInfo& i, uint32_t node);

private:
    std::atomic<uint32_t> purge_lock_;  // serializes purges (spinlock)
    std::atomic<uint64_t> inc_[kMaxNodes];
};

}  // namespace dex::cache
