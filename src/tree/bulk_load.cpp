// Bottom-up bulk load (CREATE INDEX, REINDEX): leaves filled to the fill
// factor from strictly ascending keys, then each level above them, written
// in large batches from extents allocated in one piece. With placement over
// several memory nodes the leaves are cut into segments -- the leaves of one
// full subtree at the placement level -- and each segment, with the inner
// nodes above it up to that level, goes to one memory node.
#include <algorithm>
#include <cstring>

#include "common/stats.h"
#include "tree/btree.h"
#include "tree/btree_internal.h"

namespace dex::tree {

namespace {
// Bytes allocated at once for the nodes of a bulk load on one memory node.
constexpr uint64_t kBulkExtentBytes = 256 * 1024;
}  // namespace

using detail::get_u64;

template <class L>
BTreeT<L>::BulkLoader::BulkLoader(BTreeT& t, double ff) : t_(t) {
    if (!(ff > 0.0) || ff > 1.0) ff = 0.9;
    if (ff < 0.1) ff = 0.1;
    ff_ = ff;
    // Fixed: entries per node. Slotted: body bytes per leaf, and an estimate
    // of children per inner node (16-byte separators) for the segments;
    // finish() sizes each level's inner nodes by its longest separator.
    leaf_fill_ = L::leaf_fill(ff);
    inner_fill_ = L::inner_fill(ff, 16);
    // A segment is the leaves of one full subtree at the placement level.
    seg_leaves_ = 1;
    for (int i = 0; i < t_.place_level_ && seg_leaves_ < (uint64_t(1) << 40); i++) seg_leaves_ *= inner_fill_;
    ext_.resize(t_.part_ns_.size());
    free_.assign(t_.part_ns_.size(), -1);
    if (t_.partitions() > 1) {
        for (auto& [free_bytes, i] : t_.nodes_by_free()) free_[i] = free_bytes;
    } else {
        free_[t_.node_id_] = INT64_MAX;  // one node: no choice to make
    }
    cur_addr_ = alloc(segment_node());
    L::init(cur_, t_.tree_id_, 0);
    children_.push_back(Child{L::neg_inf(), cur_addr_, 0});
    leaves_ = 1;
}

// Memory node for the next segment: round-robin over the tree's memory nodes
// (starting at one picked by the tree id, so small indexes do not all start
// on the same node), skipping nodes whose free space (measured at the start,
// minus what this load took since) cannot hold a whole segment; if none can,
// the one with most free space. Single-node trees: the home node.
template <class L>
uint32_t BTreeT<L>::BulkLoader::segment_node() {
    const uint64_t seg_bytes = (seg_leaves_ + seg_leaves_ / inner_fill_ + 1) * kNodeSize;
    std::vector<uint32_t> parts;
    for (uint32_t i = 0; i < free_.size(); i++)
        if (t_.part_ns_[i] && free_[i] >= 0) parts.push_back(i);
    uint32_t best = t_.node_id_;
    if (!parts.empty()) {
        size_t start = (t_.tree_id_ + seg_node_.size()) % parts.size();
        bool found = false;
        for (size_t k = 0; k < parts.size() && !found; k++) {
            uint32_t i = parts[(start + k) % parts.size()];
            if (free_[i] >= static_cast<int64_t>(seg_bytes)) {
                best = i;
                found = true;
            }
        }
        if (!found) {
            int64_t best_free = -1;
            for (uint32_t i : parts)
                if (free_[i] > best_free) {
                    best = i;
                    best_free = free_[i];
                }
        }
    }
    seg_node_.push_back(best);
    return best;
}

template <class L>
GAddr BTreeT<L>::BulkLoader::alloc(uint32_t node) {
    Extent& x = ext_[node];
    if (x.left == 0) {
        uint64_t bytes = kBulkExtentBytes;
        std::vector<uint8_t> r;
        uint64_t ns = t_.part_ns_[node];
        try {
            uint64_t req[2] = {ns, bytes};
            r = t_.mem_.node(node).rpc(net::kOpAlloc, req, sizeof req);
        } catch (const Error& e) {
            if (e.code() != ErrorCode::kOutOfSpace) throw;
            bytes = kNodeSize;
            uint64_t req[2] = {ns, bytes};
            try {
                r = t_.mem_.node(node).rpc(net::kOpAlloc, req, sizeof req);
            } catch (const Error& e2) {
                if (e2.code() != ErrorCode::kOutOfSpace) throw;
                throw t_.out_of_space("bulk load: memory node " + t_.mem_.node(node).address() + " is full");
            }
        }
        x.off = get_u64(r, "ALLOC");
        x.left = bytes / kNodeSize;
        if (free_[node] >= 0) free_[node] = std::max<int64_t>(0, free_[node] - static_cast<int64_t>(bytes));
    }
    GAddr a = make_gaddr(node, x.off);
    x.off += kNodeSize;
    x.left--;
    return a;
}

template <class L>
void BTreeT<L>::BulkLoader::emit(GAddr a, Node& n) {
    seal_node(n, 1);
    pending_.emplace_back(a, n);
    if (pending_.size() >= 128) flush();
}

template <class L>
void BTreeT<L>::BulkLoader::flush() {
    if (pending_.empty()) return;
    std::vector<RemoteOp> ops;
    ops.reserve(pending_.size());
    for (auto& [a, n] : pending_) ops.push_back(write_node_op(a, n));
    // One batch per run of nodes on the same memory node, in order.
    size_t b = 0;
    while (b < ops.size()) {
        uint32_t node = gaddr_node(pending_[b].first);
        size_t e = b + 1;
        while (e < ops.size() && gaddr_node(pending_[e].first) == node) e++;
        t_.mem_.batch(node, ops.data() + b, e - b);
        b = e;
    }
    // Bulk-loaded nodes start at version 1: a cached copy of an earlier life of
    // the same memory must go, it could look newer.
    for (auto& [a, n] : pending_) t_.cache_drop(a);
    pending_.clear();
}

template <class L>
void BTreeT<L>::BulkLoader::add(KeyRef key) {
    if (finished_) throw Error(ErrorCode::kInvalid, "bulk load already finished");
    if (!L::storable(key)) throw Error(ErrorCode::kInvalid, "bulk load: key " + L::str(key) + " cannot be stored");
    if (have_last_ && L::compare(last_, key) >= 0)
        throw Error(ErrorCode::kInvalid,
                    "bulk load keys must be strictly ascending: " + L::str(key) + " after " + L::str(last_));
    if (!L::leaf_takes(cur_, key, leaf_fill_)) {
        int64_t seg = static_cast<int64_t>(leaves_ / seg_leaves_);
        uint32_t node = static_cast<size_t>(seg) < seg_node_.size() ? seg_node_[seg] : segment_node();
        GAddr na = alloc(node);
        leaves_++;
        // Slotted: the shortest separator (suffix truncation); leaf_takes()
        // kept room for it as the high fence.
        Key sep = L::separator(last_, key);
        Key lo(L::low(cur_));  // (a view into cur_ would move when set_fences compacts)
        if (!L::set_fences(cur_, lo, sep)) throw Error(ErrorCode::kCorrupt, "bulk load: no room for a high fence");
        cur_.right = na;
        emit(cur_addr_, cur_);
        L::init(cur_, t_.tree_id_, 0);
        L::set_fences(cur_, sep, L::pos_inf());
        cur_addr_ = na;
        children_.push_back(Child{sep, na, seg});
    }
    if (!L::insert_entry(cur_, cur_.count, key))
        throw Error(ErrorCode::kCorrupt, "bulk load: entry " + L::str(key) + " does not fit an empty leaf");
    last_ = Key(key);
    have_last_ = true;
}

template <class L>
void BTreeT<L>::BulkLoader::finish() {
    if (finished_) throw Error(ErrorCode::kInvalid, "bulk load already finished");
    finished_ = true;
    Stats::add(stats().index_ops);
    emit(cur_addr_, cur_);
    std::vector<Child> kids = std::move(children_);
    uint8_t level = 1;
    while (kids.size() > 1) {
        // Up to the placement level, a node groups children of one segment
        // only (so each segment becomes one subtree on its memory node); above
        // it, children of any segment, and the node goes to the home node.
        const bool in_segment = level <= t_.place_level_;
        size_t longest = 0;
        for (const Child& c : kids) longest = std::max(longest, L::key_bytes(c.low));
        const size_t fill = L::kSlotted ? L::inner_fill(ff_, longest) : inner_fill_;
        struct Group {
            size_t begin, end;
            int64_t seg;
        };
        std::vector<Group> groups;
        size_t run = 0;
        while (run < kids.size()) {
            size_t run_end = run + 1;
            while (run_end < kids.size() && (!in_segment || kids[run_end].seg == kids[run].seg)) run_end++;
            size_t n = run_end - run;
            size_t ng = (n + fill - 1) / fill;
            // Spread evenly so that no node is left nearly empty.
            size_t per = (n + ng - 1) / ng;
            for (size_t b = run; b < run_end; b += per)
                groups.push_back(Group{b, std::min(run_end, b + per), in_segment ? kids[run].seg : -1});
            run = run_end;
        }
        std::vector<GAddr> addrs;
        addrs.reserve(groups.size());
        for (auto& g : groups) {
            if (g.seg >= 0) {
                addrs.push_back(alloc(seg_node_[static_cast<size_t>(g.seg)]));
            } else {
                try {
                    addrs.push_back(alloc(t_.node_id_));
                } catch (const Error& e) {
                    if (e.code() != ErrorCode::kOutOfSpace) throw;
                    addrs.push_back(alloc(segment_node()));  // home full: most free node
                }
            }
        }
        std::vector<Child> parents;
        for (size_t gi = 0; gi < groups.size(); gi++) {
            const Group& g = groups[gi];
            Node n;
            L::init(n, t_.tree_id_, level);
            const bool last = gi + 1 == groups.size();
            bool ok = L::set_fences(n, kids[g.begin].low, last ? L::pos_inf() : kids[groups[gi + 1].begin].low);
            for (size_t i = g.begin; ok && i < g.end; i++) ok = L::insert_sep(n, i - g.begin, kids[i].low, kids[i].addr);
            if (!ok) throw Error(ErrorCode::kCorrupt, "bulk load: an inner node's entries do not fit");
            if (!last) n.right = addrs[gi + 1];
            parents.push_back(Child{kids[g.begin].low, addrs[gi], level < t_.place_level_ ? g.seg : -1});
            emit(addrs[gi], n);
        }
        kids = std::move(parents);
        level++;
    }
    flush();
    GAddr root = kids[0].addr;
    GAddr old = t_.refresh_root();
    while (!t_.set_root(old, root)) old = t_.root_;
}

template class BTreeT<FixedLayout>;
template class BTreeT<SlottedLayout>;

}  // namespace dex::tree
