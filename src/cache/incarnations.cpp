#include "cache/incarnations.h"

#include <string>

#include "cache/cache.h"
#include "cache/spinlock.h"
#include "common/error.h"

namespace dex::cache {

void IncarnationTable::init() {
    purge_lock_.store(0, std::memory_order_relaxed);
    for (auto& inc : inc_) inc.store(0, std::memory_order_relaxed);
}

bool IncarnationTable::current(uint32_t node, uint64_t inc) const {
    if (node >= kMaxNodes)
        throw Error(ErrorCode::kInvalid, "memory node number " + std::to_string(node) +
                                             " is too large for the node cache (at most " +
                                             std::to_string(kMaxNodes) + " memory nodes)");
    return inc_[node].load(std::memory_order_acquire) == inc;
}

bool IncarnationTable::belongs_to_node(const FrameInfo& i, uint32_t node) {
    return gaddr_node(i.gaddr) == node || (i.tree_id >> 24) == (node & 0xFF);
}

void IncarnationTable::purge(Cache& cache, uint32_t node, uint64_t inc) {
    if (current(node, inc)) return;
    std::atomic<uint64_t>& rec = inc_[node];
    SpinGuard lk(purge_lock_);
    if (rec.load(std::memory_order_acquire) == inc) return;
    // 0 first: a concurrent admission from the old incarnation either installed
    // its frame before this store (the scan below sees it) or reads 0 in its
    // admit check and drops the frame itself.
    rec.store(0, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    // Frames on that node, and frames of trees homed there (their tree ids,
    // derived from the home namespace id, come back after the restart).
    size_t left = cache.invalidate_if([node](const FrameInfo& i) { return belongs_to_node(i, node); });
    if (left != 0)
        throw Error(ErrorCode::kRemote, "node cache: could not drop " + std::to_string(left) +
                                            " cached nodes of a restarted memory node");
    rec.store(inc, std::memory_order_seq_cst);
}

}  // namespace dex::cache
