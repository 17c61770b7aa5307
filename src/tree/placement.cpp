// Where a tree's nodes live (src/README.md "Placement over several memory
// nodes"): the tree's namespace on each memory node, allocating a node on a
// given memory node (or, above the placement level, on whichever has room),
// freeing it, and the version a reused block starts at.
#include <algorithm>
#include <cstring>

#include "tree/btree.h"
#include "tree/btree_internal.h"

namespace dex::tree {

template <class L>
void BTreeT<L>::set_placement(std::vector<uint64_t> ns_by_node, int level) {
    if (ns_by_node.size() <= node_id_) ns_by_node.resize(node_id_ + 1, 0);
    if (ns_by_node[node_id_] != ns_)
        throw Error(ErrorCode::kInvalid, "placement: the home memory node's namespace must be the tree's");
    if (level < 1 || level > kMaxPlacementLevel)
        throw Error(ErrorCode::kInvalid, "placement level " + std::to_string(level) + " is out of range 1.." +
                                             std::to_string(kMaxPlacementLevel));
    part_ns_ = std::move(ns_by_node);
    place_level_ = level;
}

template <class L>
std::vector<std::pair<int64_t, uint32_t>> BTreeT<L>::nodes_by_free(uint32_t must_answer) {
    std::vector<std::pair<int64_t, uint32_t>> v;
    for (uint32_t i = 0; i < part_ns_.size(); i++) {
        if (!part_ns_[i]) continue;
        int64_t free_bytes = -1;
        try {
            std::vector<uint8_t> r = mem_.node(i).rpc(net::kOpStats, nullptr, 0);
            if (r.size() >= sizeof(net::NodeStats)) {
                net::NodeStats st;
                std::memcpy(&st, r.data(), sizeof st);
                free_bytes = static_cast<int64_t>(st.pool_bytes - std::min(st.pool_bytes, st.used_bytes));
            }
        } catch (const Error& e) {
            // Another node that does not answer is just not a candidate; the
            // node whose connection holds the caller's locks must answer.
            if (e.code() == ErrorCode::kInterrupted || e.code() == ErrorCode::kLostMemory || i == must_answer) throw;
        }
        v.emplace_back(free_bytes, i);
    }
    std::stable_sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.first > b.first; });
    return v;
}

template <class L>
Error BTreeT<L>::out_of_space(const std::string& what) {
    std::string sizes;
    for (uint32_t i = 0; i < part_ns_.size(); i++) {
        if (!part_ns_[i]) continue;
        if (!sizes.empty()) sizes += ", ";
        std::string addr;
        try {
            Transport& t = mem_.node(i);
            addr = t.address();
            std::vector<uint8_t> r = t.rpc(net::kOpStats, nullptr, 0);
            net::NodeStats st{};
            if (r.size() >= sizeof st) std::memcpy(&st, r.data(), sizeof st);
            sizes += addr + " " + std::to_string(st.used_bytes) + " of " + std::to_string(st.pool_bytes) + " bytes used";
        } catch (const std::exception&) {
            sizes += (addr.empty() ? "memory node " + std::to_string(i) : addr) + " unreachable";
        }
    }
    return Error(ErrorCode::kOutOfSpace, "memory nodes out of space (" + what + "; " + sizes + ")",
                 "Give the memory nodes more --memory, add memory nodes to dex.memnodes and REINDEX, or drop "
                 "unused dex indexes.");
}

template <class L>
GAddr BTreeT<L>::alloc_node(uint32_t node) {
    if (node >= part_ns_.size() || !part_ns_[node])
        throw Error(ErrorCode::kCorrupt, "memory node " + std::to_string(node) + " holds no namespace of tree " +
                                             std::to_string(tree_id_));
    uint64_t req[2] = {part_ns_[node], kNodeSize};
    std::vector<uint8_t> r;
    try {
        r = mem_.node(node).rpc(net::kOpAlloc, req, sizeof req);
    } catch (const Error& e) {
        if (e.code() != ErrorCode::kOutOfSpace) throw;
        throw out_of_space("the subtree's memory node " + mem_.node(node).address() + " is full");
    }
    return make_gaddr(node, detail::get_u64(r, "ALLOC"));
}

template <class L>
GAddr BTreeT<L>::alloc_anywhere() {
    try {
        return alloc_node(node_id_);
    } catch (const Error& e) {
        if (e.code() != ErrorCode::kOutOfSpace) throw;
    }
    for (auto& [free_bytes, i] : nodes_by_free()) {
        if (i == node_id_ || free_bytes < static_cast<int64_t>(kNodeSize)) continue;
        try {
            return alloc_node(i);
        } catch (const Error& e) {
            if (e.code() != ErrorCode::kOutOfSpace) throw;
        }
    }
    throw out_of_space("no memory node has room for a new node");
}

template <class L>
void BTreeT<L>::free_node(GAddr a) {
    uint32_t node = gaddr_node(a);
    if (node >= part_ns_.size() || !part_ns_[node]) return;  // not ours: leave it (check() reports strays)
    uint64_t req[3] = {part_ns_[node], gaddr_offset(a), kNodeSize};
    mem_.node(node).rpc(net::kOpFree, req, sizeof req);
}

template <class L>
GAddr BTreeT<L>::take_spare(uint32_t node) {
    std::lock_guard<std::mutex> g(spares_mu_);
    for (size_t i = node * kSparesPerNode; i < (node + 1) * kSparesPerNode && i < spares_.size(); i++) {
        if (!spares_[i]) continue;
        const GAddr a = spares_[i];
        spares_[i] = 0;
        return a;
    }
    return 0;
}

template <class L>
void BTreeT<L>::put_back_spare(GAddr a) {
    const uint32_t node = gaddr_node(a);
    {
        std::lock_guard<std::mutex> g(spares_mu_);
        if (spares_.size() < (node + 1) * kSparesPerNode) spares_.resize((node + 1) * kSparesPerNode, 0);
        for (size_t i = node * kSparesPerNode; i < (node + 1) * kSparesPerNode; i++) {
            if (spares_[i] == a) return;  // (never twice)
            if (!spares_[i]) {
                spares_[i] = a;
                return;
            }
        }
    }
    try {
        free_node(a);
    } catch (...) {  // an unreachable node: the space stays allocated (as after a crash mid-split)
    }
}

template <class L>
GAddr BTreeT<L>::spare_or_alloc(uint32_t node) {
    const GAddr a = take_spare(node);
    return a ? a : alloc_node(node);
}

template <class L>
void BTreeT<L>::release_spares() {
    std::vector<GAddr> held;
    {
        std::lock_guard<std::mutex> g(spares_mu_);
        held.swap(spares_);
    }
    for (GAddr a : held) {
        // Only over a connection that is open now: closing a handle (at
        // backend exit too) never waits for a connect to an unreachable node.
        if (!a || !mem_.node(gaddr_node(a)).connected_client_id()) continue;
        try {
            free_node(a);
        } catch (...) {  // unreachable: the block stays allocated until the index is dropped
        }
    }
}

// A reused block keeps versions increasing, so a CAS prepared from a read of the
// block's previous life can never succeed on its new life (no ABA).
template <class L>
uint64_t BTreeT<L>::fresh_version(GAddr a) {
    uint64_t w[3] = {0, 0, 0};  // lock word, checksum, body_version of the previous life (or any bytes)
    mem_.read(a, w, sizeof w);
    return fresh_version_from(w);
}

template <class L>
uint64_t BTreeT<L>::fresh_version_from(const uint64_t w[3]) {
    return fresh_version_after(w[0], w[2]);  // the rule the memory node's splits share
}

template class BTreeT<FixedLayout>;
template class BTreeT<SlottedLayout>;

}  // namespace dex::tree
