// check() -- dex_check(), like amcheck's bt_index_check -- and info():
// walks every level of the tree left to right through right links, without
// locks, reading remote memory only.
#include <chrono>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "tree/btree.h"

namespace dex::tree {

template <class L>
TreeInfo BTreeT<L>::check() {
    constexpr int kAttempts = 4;
    for (int attempt = 0;; attempt++) {
        try {
            return check_once();
        } catch (const Error& e) {
            if (e.code() != ErrorCode::kCorrupt || attempt + 1 >= kAttempts) throw;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50 << attempt));  // 50, 100, 200 ms
    }
}

// One check_once() call: the walk over the levels, from the root down.
// Each level is walked left to right through right links; every node is
// checked on its own (fences, order of entries), against its left sibling
// (fences meet) and against the range its parent's downlink promised (or,
// without a downlink, the range of the left sibling's parent: an interrupted
// split). Its children become the next level's expectations.
template <class L>
class BTreeT<L>::TreeCheck {
public:
    explicit TreeCheck(BTreeT& t) : t_(t) {}
    TreeInfo run();

private:
    // Key range (and, at or below the placement level, memory node) a
    // parent's downlink promises.
    struct Range {
        Key lo, hi;
        int node;  // memory node the child must be on (placement), -1: any
    };
    // The walk of one level so far.
    struct LevelWalk {
        int level;
        std::string lv;  // "level N", for messages
        GAddr prev = 0;  // left sibling of the node at hand
        Key prev_high{};
        Key cover_hi{};  // end of the parent range of the last node that had a downlink
        bool have_cover = false;
        size_t linked = 0;  // nodes of this level reached through a downlink
        std::unordered_set<GAddr> seen_here;
        std::unordered_map<GAddr, Range> next_expected;  // the children named on this level
        GAddr next_leftmost = 0;
    };

    Error corrupt(GAddr a, const std::string& what) const {
        return Error(ErrorCode::kCorrupt, "dex index check failed: node " + hex_addr(a) + ": " + what,
                     "REINDEX the index.");
    }
    // A valid node image of this tree, or Error(kCorrupt).
    void read_strict(GAddr a, Node& n) const;
    // On a memory node that holds a namespace of this tree?
    bool ours(GAddr a) const {
        uint32_t nd = gaddr_node(a);
        return nd < t_.part_ns_.size() && t_.part_ns_[nd] != 0;
    }
    // Reads and checks the root; returns its level.
    int check_root(GAddr root);
    void check_level(LevelWalk& w);
    void check_node(GAddr a, const Node& n, const LevelWalk& w) const;
    void check_entries(GAddr a, const Node& n) const;
    void check_downlink(GAddr a, const Node& n, uint32_t here, LevelWalk& w);
    void collect_children(GAddr a, const Node& n, uint32_t here, LevelWalk& w);

    BTreeT& t_;
    TreeInfo info_;
    int root_level_ = 0;
    std::unordered_map<GAddr, Range> expected_;  // downlinks of the level above
    std::unordered_set<GAddr> seen_;
    GAddr leftmost_ = 0;
};

template <class L>
TreeInfo BTreeT<L>::check_once() { return TreeCheck(*this).run(); }

template <class L>
void BTreeT<L>::TreeCheck::read_strict(GAddr a, Node& n) const {
    Deadline dl = t_.deadline();
    if (t_.io_.read(a, n, dl) != NodeIO::Read::kOk)
        throw corrupt(a, "not a valid node image (lock word " + std::to_string(n.lock) + ", body_version " +
                             std::to_string(n.body_version) + ", count " + std::to_string(n.count) +
                             ": version mismatch or checksum mismatch)");
    if (n.tree_id != t_.tree_id_)
        throw corrupt(a, "tree_id " + std::to_string(n.tree_id) + ", expected " + std::to_string(t_.tree_id_));
    if (!L::layout_ok(n))
        throw corrupt(a, std::string("not a node of this tree's layout (") + (L::kSlotted ? "slotted" : "fixed") +
                             "), or its entry count or offsets are out of bounds");
}

template <class L>
TreeInfo BTreeT<L>::TreeCheck::run() {
    GAddr root = t_.refresh_root();
    if (!root)
        throw Error(ErrorCode::kCorrupt,
                    "dex index check failed: namespace " + std::to_string(t_.ns_) + " has no root");
    if (!ours(root)) throw corrupt(root, "root is on a memory node that holds no namespace of this tree");
    info_.placement_level = t_.place_level_;
    info_.nodes_on.assign(t_.part_ns_.size(), 0);
    info_.subtrees_on.assign(t_.part_ns_.size(), 0);
    root_level_ = check_root(root);
    info_.root = root;
    info_.height = static_cast<uint32_t>(root_level_) + 1;
    leftmost_ = root;
    for (int level = root_level_; level >= 0; --level) {
        LevelWalk w;
        w.level = level;
        w.lv = "level " + std::to_string(level);
        check_level(w);
        expected_ = std::move(w.next_expected);
        leftmost_ = w.next_leftmost;
    }
    if (info_.missing_downlinks)
        info_.notes += std::to_string(info_.missing_downlinks) +
                       " node(s) reachable only through right links (interrupted split; tolerated); ";
    return info_;
}

template <class L>
int BTreeT<L>::TreeCheck::check_root(GAddr root) {
    Node n;
    read_strict(root, n);
    if (n.is_deleted()) throw corrupt(root, "root is marked deleted");
    if (!L::low_is_neg_inf(n)) throw corrupt(root, "root low fence is " + L::str(L::low(n)) + ", expected -inf");
    if (n.right) info_.notes += "root " + hex_addr(root) + " has a right sibling (new root not installed yet); ";
    return n.level;
}

template <class L>
void BTreeT<L>::TreeCheck::check_level(LevelWalk& w) {
    const int level = w.level;
    Node n;
    GAddr a = leftmost_;
    while (a) {
        if (!ours(a)) throw corrupt(a, "address names a memory node that holds no namespace of this tree");
        const uint32_t here = gaddr_node(a);
        info_.nodes_on[here]++;
        if (level == t_.place_level_ || (level == root_level_ && root_level_ < t_.place_level_))
            info_.subtrees_on[here]++;
        if (!seen_.insert(a).second)
            throw corrupt(a, "reached twice (cycle in right links, or node shared between levels/parents)");
        w.seen_here.insert(a);
        read_strict(a, n);
        check_node(a, n, w);
        if (level < root_level_) check_downlink(a, n, here, w);
        if (n.is_leaf()) {
            info_.leaves++;
            info_.entries += n.count;
        } else {
            info_.inner_nodes++;
            collect_children(a, n, here, w);
        }
        w.prev = a;
        w.prev_high = Key(L::high(n));
        a = n.right;
    }
    if (!L::is_pos_inf(w.prev_high))
        throw corrupt(w.prev, "rightmost node of " + w.lv + " has high fence " + L::str(w.prev_high) +
                                  ", expected +inf");
    if (level < root_level_ && w.linked != expected_.size()) {
        for (auto& [c, r] : expected_)
            if (!w.seen_here.count(c))
                throw corrupt(c, "child named by level " + std::to_string(level + 1) +
                                     " is not on the sibling chain of " + w.lv + " (unreachable)");
    }
}

// The node on its own and against its left sibling.
template <class L>
void BTreeT<L>::TreeCheck::check_node(GAddr a, const Node& n, const LevelWalk& w) const {
    if (n.level != w.level)
        throw corrupt(a, "level " + std::to_string(n.level) + ", expected " + std::to_string(w.level) +
                             " (levels must decrease by one)");
    if (n.is_deleted())
        throw corrupt(a, "deleted node is still linked" +
                             (w.prev ? " as right sibling of " + hex_addr(w.prev) : std::string(" from above")));
    if (!w.prev) {
        if (!L::low_is_neg_inf(n))
            throw corrupt(a, "leftmost node of " + w.lv + " has low fence " + L::str(L::low(n)) + ", expected -inf");
    } else if (!L::equal(L::low(n), w.prev_high)) {
        throw corrupt(a, "low fence " + L::str(L::low(n)) + " differs from high fence " + L::str(w.prev_high) +
                             " of left sibling " + hex_addr(w.prev));
    }
    if (L::compare(L::low(n), L::high(n)) >= 0)
        throw corrupt(a, "low fence " + L::str(L::low(n)) + " is not below high fence " + L::str(L::high(n)));
    if (!n.is_leaf() && n.count == 0) throw corrupt(a, "inner node without children");
    check_entries(a, n);
    if (!n.is_leaf() && !L::equal(L::sep(n, 0), L::low(n)))
        throw corrupt(a, "first separator " + L::str(L::sep(n, 0)) + " differs from low fence " + L::str(L::low(n)));
}

// Entries (keys or separators) sorted, of a storable class, within the fences.
template <class L>
void BTreeT<L>::TreeCheck::check_entries(GAddr a, const Node& n) const {
    for (size_t i = 0; i < n.count; i++) {
        KeyRef k = n.is_leaf() ? L::entry(n, i) : L::sep(n, i);
        if (n.is_leaf() && !L::storable(k))
            throw corrupt(a, "entry " + std::to_string(i) + " " + L::str(k) + " cannot be stored");
        if (i > 0) {
            KeyRef pk = n.is_leaf() ? L::entry(n, i - 1) : L::sep(n, i - 1);
            if (L::compare(pk, k) >= 0)
                throw corrupt(a, "entries not sorted: entry " + std::to_string(i - 1) + " " + L::str(pk) +
                                     " >= entry " + std::to_string(i) + " " + L::str(k));
        }
        if (L::compare(k, L::low(n)) < 0 || !below_high(k, n))
            throw corrupt(a, "entry " + std::to_string(i) + " " + L::str(k) + " outside fences [" +
                                 L::str(L::low(n)) + ", " + L::str(L::high(n)) + ")");
    }
}

// Below the root: the range (and memory node) the parent's downlink promised,
// or -- no downlink -- the range of the left sibling's parent (an interrupted
// split, tolerated and counted).
template <class L>
void BTreeT<L>::TreeCheck::check_downlink(GAddr a, const Node& n, uint32_t here, LevelWalk& w) {
    const int level = w.level;
    auto it = expected_.find(a);
    if (it != expected_.end()) {
        if (!L::equal(L::low(n), it->second.lo))
            throw corrupt(a, "low fence " + L::str(L::low(n)) + " differs from the parent's separator " +
                                 L::str(it->second.lo));
        if (L::compare(L::high(n), it->second.hi) > 0)
            throw corrupt(a, "high fence " + L::str(L::high(n)) + " exceeds the parent's range end " +
                                 L::str(it->second.hi));
        w.cover_hi = it->second.hi;
        w.have_cover = true;
        w.linked++;
        if (it->second.node >= 0 && static_cast<int>(here) != it->second.node)
            throw corrupt(a, "placement: on memory node " + std::to_string(here) + " but its parent (level " +
                                 std::to_string(level + 1) + " <= placement level " +
                                 std::to_string(t_.place_level_) + ") is on memory node " +
                                 std::to_string(it->second.node) + " (a subtree must lie on one memory node)");
        return;
    }
    if (!w.have_cover || L::compare(L::low(n), w.cover_hi) >= 0 || L::compare(L::high(n), w.cover_hi) > 0)
        throw corrupt(a, "no downlink in " + std::string("level ") + std::to_string(level + 1) + " and range [" +
                             L::str(L::low(n)) + ", " + L::str(L::high(n)) +
                             ") is not covered by a left sibling's parent range");
    if (level < t_.place_level_ && w.prev && gaddr_node(w.prev) != here)
        throw corrupt(a, "placement: reachable only through the right link of " + hex_addr(w.prev) +
                             " on another memory node (below the placement level a split stays on its memory node)");
    info_.missing_downlinks++;
}

// An inner node's children: what the next level must find.
template <class L>
void BTreeT<L>::TreeCheck::collect_children(GAddr a, const Node& n, uint32_t here, LevelWalk& w) {
    for (size_t i = 0; i < n.count; i++) {
        GAddr c = L::child(n, i);
        if (!c) throw corrupt(a, "entry " + std::to_string(i) + " has a null child");
        Range r{Key(L::sep(n, i)), Key(i + 1 < n.count ? L::sep(n, i + 1) : L::high(n)),
                w.level <= t_.place_level_ ? static_cast<int>(here) : -1};
        if (!w.next_expected.emplace(c, r).second) throw corrupt(a, "child " + hex_addr(c) + " is referenced twice");
    }
    if (!w.next_leftmost) w.next_leftmost = L::child(n, 0);
}

template <class L>
TreeInfo BTreeT<L>::info() {
    TreeInfo info;
    GAddr root = refresh_root();
    if (!root) throw Error(ErrorCode::kNotFound, "namespace " + std::to_string(ns_) + " has no tree");
    info.root = root;
    GAddr leftmost = root;
    Node n;
    bool first = true;
    while (leftmost) {
        GAddr a = leftmost;
        leftmost = 0;
        while (a) {
            Deadline dl = deadline();
            if (io_.read(a, n, dl) != NodeIO::Read::kOk)
                throw Error(ErrorCode::kCorrupt, "node " + hex_addr(a) + ": not a valid node image");
            if (first) {
                info.height = n.level + 1u;
                first = false;
            }
            if (n.is_leaf()) {
                info.leaves++;
                info.entries += n.count;
            } else {
                info.inner_nodes++;
                if (!leftmost && n.count) leftmost = L::child(n, 0);
            }
            a = n.right;
        }
    }
    return info;
}

template class BTreeT<FixedLayout>;
template class BTreeT<SlottedLayout>;

}  // namespace dex::tree
