// A write-through tree's dead entries removed by their memory node
// (OFFLOAD_KILL, net/protocol.h; src/README.md "Dead-entry hints"): one round
// trip where remove_if_unchanged's own way takes two (a fresh stamp: lock
// with the read, publish) or three.
#include <cstring>
#include <string>

#include "cache/cache.h"
#include "common/stats.h"
#include "tree/btree.h"
#include "tree/btree_internal.h"
#include "tree/offload_policy.h"

namespace dex::tree {

template <class L>
int64_t BTreeT<L>::offload_kill(GAddr leaf, uint64_t version, const Key* keys, size_t n, bool bottom_up) {
    const uint32_t node = gaddr_node(leaf);
    if (!cache_ || !opts_.offload || wb_ || gaddr_is_swizzled(leaf) || n == 0 || n > net::kMaxOffloadBatch)
        return -1;
    Transport& tr = mem_.node(node);
    if (!tr.offload_writes_allowed() || !tr.offload_kill_allowed() || !should_offload_leaf_write(node, 0)) return -1;
    net::OffloadKillHeader h{};
    h.leaf = gaddr_offset(leaf);
    h.version = version;
    h.tree_id = tree_id_;
    h.node = static_cast<uint16_t>(node);
    h.slotted = L::kSlotted ? 1 : 0;
    h.count = static_cast<uint16_t>(n);
    std::vector<uint8_t> req(sizeof h);
    std::memcpy(req.data(), &h, sizeof h);
    for (size_t i = 0; i < n; i++) {
        if constexpr (L::kSlotted) {
            if (keys[i].empty() || keys[i].size() > net::kMaxOffloadKeyBytes) return -1;  // (storable: never)
            net::append_offload_kill_entry(req, keys[i].data(), static_cast<uint16_t>(keys[i].size()));
        } else {
            net::append_offload_kill_entry(req, &keys[i], sizeof keys[i]);
        }
    }
    std::vector<uint8_t> resp;
    try {
        InterruptHold hold;  // as any offloaded write: its answer is waited for
        resp = tr.rpc(net::kOpOffloadKill, req.data(), static_cast<uint32_t>(req.size()));
    } catch (...) {
        // Removed or not: a cached copy that still has the entries only shows
        // dead ones, but drop it all the same (the rule for unknown writes).
        forget_unknown_write(leaf, 0);
        throw;
    }
    Stats::add(stats().offloads);
    net::OffloadReply rep;
    net::OffloadKillTail tail;
    if (resp.size() < sizeof rep + sizeof tail)
        throw Error(ErrorCode::kProtocol, "OFFLOAD_KILL: short response from memory node");
    std::memcpy(&rep, resp.data(), sizeof rep);
    std::memcpy(&tail, resp.data() + sizeof rep, sizeof tail);
    const bool with_image = rep.status == net::kOffloadDone && tail.removed > 0;
    if (resp.size() != sizeof rep + sizeof tail + (with_image ? kNodeSize : 0) || rep.leaf != leaf ||
        tail.removed > n)
        throw Error(ErrorCode::kProtocol, "OFFLOAD_KILL: malformed response from memory node");
    if (rep.status == net::kOffloadRestart) return -1;  // locked: the one-sided way waits for it
    if (rep.status == net::kOffloadNoop) {              // the leaf changed since the scan: nothing removed
        Stats::add(stats().kills_skipped, n);
        return 0;
    }
    if (rep.status != net::kOffloadDone) throw Error(ErrorCode::kProtocol, "OFFLOAD_KILL: unknown status");
    if (with_image) {
        Node img;
        std::memcpy(static_cast<void*>(&img), resp.data() + sizeof rep + sizeof tail, kNodeSize);
        if (img.tree_id != tree_id_ || img.level != 0 || !snapshot_valid(img) || !L::layout_ok(img))
            throw Error(ErrorCode::kProtocol, "OFFLOAD_KILL: memory node returned an invalid leaf image");
        // Standbys drop their copies (only dead entries left it: a copy
        // that still has them is harmless until then, as after an offloaded
        // insert, which is logged after its publish too).
        log_changed(leaf);
        cache_update(leaf, img);  // write-through: remote first, then the cached copy
    }
    Stats::add(bottom_up ? stats().bottomup_removed : stats().kills, tail.removed);
    if (tail.removed < n) Stats::add(stats().kills_skipped, n - tail.removed);
    return tail.removed;
}

template class BTreeT<FixedLayout>;
template class BTreeT<SlottedLayout>;

}  // namespace dex::tree
