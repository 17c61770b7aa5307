// Subtree migration (src/README.md "Placement over several memory nodes"):
// when a node at the placement level splits and another memory node has
// clearly more free space, the right half's whole subtree is copied there
// instead of staying with the left half. Every subtree rooted at the
// placement level still lies on one memory node afterwards.
//
// The protocol, under the split node's remote lock:
//   1. lock (try_lock only: we hold the parent, so we must not wait for a
//      child) level by level the chain of nodes the right half covers and the
//      node left of it on each level (its right link changes);
//   2. write the copies, with their child and right pointers mapped to the
//      copies, to the target node (unreachable until step 3);
//   3. one ordered batch on this node: the left neighbours link to the
//      copies, the moved nodes become deleted nodes forwarding to their
//      copies, the split node keeps the left half and links to the new sibling;
//   4. the new sibling's downlink goes into the level above (insert_parent).
// Busy nodes, too many nodes or a full target abort it before anything
// changed; the caller then splits in place.
#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "cache/cache.h"
#include "common/stats.h"
#include "tree/btree.h"
#include "tree/btree_internal.h"

namespace dex::tree {

namespace {
// Free-space difference (bytes) above which a split at the placement level
// moves its right half to the emptier memory node.
constexpr int64_t kMigrateMarginBytes = 1 << 20;
// Largest subtree (nodes) worth moving at once; a bigger one splits in place.
constexpr size_t kMigrateMaxNodes = 8192;
}  // namespace

// One migrate_split() call: the nodes locked, moved and allocated so far.
template <>
class BTreeT<FixedLayout>::SubtreeMigration {
public:
    SubtreeMigration(BTreeT& t, Locks& locks, LockedNode* ln, const InnerEntry* all, size_t total, size_t mid)
        : t_(t),
          locks_(locks),
          ln_(ln),
          all_(all),
          total_(total),
          mid_(mid),
          here_(gaddr_node(ln->addr)),
          level_(ln->node.level),
          lo_(all[mid].sep),
          hi_(ln->node.high) {}

    // The memory node with most free space, if it has clearly more than this
    // one (false: stay here).
    bool pick_target();
    // Step 1. False: a node was busy, on another memory node or the chain was
    // too long; everything locked here is released again.
    bool lock_chain(const Deadline& dl);
    // Room for the copies and the new sibling on the target. False: it is
    // full; nothing allocated is kept and the locks are released.
    bool allocate_copies();
    // Take the cached frames of every node whose entries or right link
    // change (the split node, the left neighbours, the moved chain) before
    // anything is written. A write-back tree's leaf frame is only tried (its
    // holder may be waiting for one of our remote locks); held, no in-place
    // change can happen until its new image is in. A dirty one must be
    // covered (W6): its entries replace the remote image's, so the copy (or,
    // for a left neighbour, the published node) carries them and the frame
    // is clean once published (W16). False: a leaf frame was busy, being
    // fetched or dirty and not covered; nothing was changed, the copies are
    // freed and the locks released.
    bool hold_frames(FrameHold& hold);
    // Steps 2 to 4.
    void move(FrameHold& hold, Path& path, const Deadline& dl);

private:
    // Lock the node on `level` whose right link is `first`, moving right from
    // `start` (the left half's last child). nullptr: not found, busy or on
    // another memory node.
    LockedNode* lock_left_neighbour(GAddr start, GAddr first, int level, const Deadline& dl);
    // Lock the nodes on `level` from `first` up to the one whose high fence
    // reaches hi_. *next_first: the leftmost child of the first of them.
    bool lock_moving_level(GAddr first, int level, GAddr* next_first, const Deadline& dl);
    bool abort() {
        for (LockedNode* x : held_) locks_.unlock(x);
        return false;
    }
    GAddr copy_of(GAddr a) const {
        auto it = to_.find(a);
        return it == to_.end() ? a : it->second;
    }

    BTreeT& t_;
    Locks& locks_;
    LockedNode* ln_;  // the splitting node at the placement level
    const InnerEntry* all_;
    const size_t total_, mid_;
    const uint32_t here_;
    const int level_;
    const EntryKey lo_, hi_;  // the key range that moves
    uint32_t target_ = 0;
    std::vector<LockedNode*> held_;   // everything locked here, level-descending (released on abort)
    std::vector<LockedNode*> moved_;  // nodes to copy
    std::vector<LockedNode*> lefts_;  // node left of the moved chain, per level
    std::unordered_map<GAddr, GAddr> to_;  // moved node -> its copy
    std::vector<GAddr> fresh_;             // the copies, then the new sibling
    std::vector<uint32_t> dirty_;          // write-back: held dirty leaf frames whose entries go out with us
};

template <>
bool BTreeT<FixedLayout>::migrate_split(Locks& locks, LockedNode* ln, const InnerEntry* all, size_t total, size_t mid, Path& path,
                          const Deadline& dl) {
    if (mid == 0 || mid >= total) return false;
    if (partitions() < 2) return false;
    SubtreeMigration m(*this, locks, ln, all, total, mid);
    if (!m.pick_target() || !m.lock_chain(dl) || !m.allocate_copies()) return false;
    FrameHold hold(*this);
    if (!m.hold_frames(hold)) return false;
    m.move(hold, path, dl);
    return true;
}

bool BTreeT<FixedLayout>::SubtreeMigration::pick_target() {
    auto byfree = t_.nodes_by_free(here_);  // we hold ln's lock through `here`'s connection
    int64_t here_free = -1;
    for (auto& [f, i] : byfree)
        if (i == here_) here_free = f;
    if (byfree.empty() || byfree[0].second == here_ || byfree[0].first < here_free + kMigrateMarginBytes) return false;
    target_ = byfree[0].second;
    return true;
}

bool BTreeT<FixedLayout>::SubtreeMigration::lock_chain(const Deadline& dl) {
    GAddr first = all_[mid_].child, left_start = all_[mid_ - 1].child;
    for (int k = level_ - 1; k >= 0; k--) {
        LockedNode* left = lock_left_neighbour(left_start, first, k, dl);
        if (!left) return abort();
        held_.push_back(left);
        lefts_.push_back(left);
        GAddr next_first = 0;
        if (!lock_moving_level(first, k, &next_first, dl)) return abort();
        if (k > 0) {
            first = next_first;
            left_start = left->node.inner[left->node.count - 1].child;
        }
    }
    return true;
}

LockedNode* BTreeT<FixedLayout>::SubtreeMigration::lock_left_neighbour(GAddr start, GAddr first, int level, const Deadline& dl) {
    Node snap;
    GAddr a = start;
    LockedNode* left = nullptr;
    for (int hops = 0; a && hops < 16; hops++) {
        if (t_.io_.read(a, snap, dl, false) != NodeIO::Read::kOk || !t_.valid_node(snap, level) || snap.is_deleted())
            return nullptr;
        if (snap.right == first) {
            left = locks_.try_lock(a, snap);
            break;
        }
        a = snap.right;
    }
    // A left neighbour found on another memory node is not added to held_:
    // it stays locked until the caller's Locks let go. (Every node of the
    // subtree is on here_, so this does not happen in a sound tree.)
    if (!left || gaddr_node(left->addr) != here_) return nullptr;
    return left;
}

bool BTreeT<FixedLayout>::SubtreeMigration::lock_moving_level(GAddr first, int level, GAddr* next_first, const Deadline& dl) {
    Node snap;
    GAddr a = first;
    for (;;) {
        if (moved_.size() >= kMigrateMaxNodes) return false;
        if (t_.io_.read(a, snap, dl, false) != NodeIO::Read::kOk || !t_.valid_node(snap, level) ||
            snap.is_deleted() || gaddr_node(a) != here_)
            return false;
        LockedNode* m = locks_.try_lock(a, snap);
        if (!m) return false;
        held_.push_back(m);
        moved_.push_back(m);
        if (!*next_first && level > 0) *next_first = m->node.inner[0].child;
        if (hi_.cls == kPosInf ? m->node.right == 0 : !(compare_keys(m->node.high, hi_) < 0)) return true;
        a = m->node.right;
        if (!a) return false;
    }
}

bool BTreeT<FixedLayout>::SubtreeMigration::allocate_copies() {
    try {
        for (LockedNode* m : moved_) {
            GAddr c = t_.alloc_node(target_);
            fresh_.push_back(c);
            to_[m->addr] = c;
        }
        fresh_.push_back(t_.alloc_node(target_));  // the new sibling at the placement level
    } catch (const Error& e) {
        if (e.code() != ErrorCode::kOutOfSpace) throw;
        for (GAddr c : fresh_) t_.free_node(c);
        return abort();
    }
    return true;
}

bool BTreeT<FixedLayout>::SubtreeMigration::hold_frames(FrameHold& hold) {
    // Parents before children: the split node, then `held_` level by level.
    hold.hold(ln_->addr);
    for (LockedNode* x : held_) {
        if (!t_.wb_ || !x->node.is_leaf()) {
            hold.hold(x->addr);
            continue;
        }
        cache::CacheRegion& R = t_.cache_->region();
        bool ok = true;
        if (hold.try_hold(x->addr)) {
            const uint32_t f = R.table().lookup(x->addr);  // (held: it stays mapped)
            ok = f < R.frame_count();
            cache::FrameHeader& h = R.header(f);
            if (ok && h.dirty.load(std::memory_order_relaxed)) {
                ok = h.lsn.load(std::memory_order_relaxed) <= durable_lsn();
                Node img;
                R.copy_unswizzled(f, img);
                // Same node (structure changes write through, W1): same fences
                // and right link; the frame's entries are the newest (W2).
                ok = ok && img.level == 0 && img.count <= kLeafCapacity &&
                     compare_keys(img.low, x->node.low) == 0 && img.right == x->node.right;
                if (ok) {
                    x->node.count = img.count;
                    std::memcpy(x->node.leaf, img.leaf, img.count * sizeof(EntryKey));
                    dirty_.push_back(f);
                }
            }
        } else {
            // Not cached: an admission from now on reads after our publish
            // (it waits for x's remote lock). Being fetched or locked: give up.
            ok = R.table().lookup(x->addr) == cache::MappingTable::kNotFound;
        }
        if (!ok) {
            hold.release(ln_->addr);
            for (LockedNode* y : held_) hold.release(y->addr);
            for (GAddr c : fresh_) t_.free_node(c);
            return abort();
        }
    }
    return true;
}

void BTreeT<FixedLayout>::SubtreeMigration::move(FrameHold& hold, Path& path, const Deadline& dl) {
    const GAddr na = fresh_.back();
    std::vector<Node> copies(moved_.size());
    std::vector<RemoteOp> ops;
    for (size_t i = 0; i < moved_.size(); i++) {
        Node& c = copies[i];
        std::memcpy(static_cast<void*>(&c), &moved_[i]->node, kNodeSize);
        if (!c.is_leaf())
            for (size_t j = 0; j < c.count; j++) c.inner[j].child = copy_of(c.inner[j].child);
        c.right = copy_of(c.right);
        seal_node(c, t_.fresh_version(fresh_[i]));
        ops.push_back(write_node_op(fresh_[i], c));
    }
    Node r;
    FixedLayout::init(r, t_.tree_id_, static_cast<uint8_t>(level_));
    r.count = static_cast<uint16_t>(total_ - mid_);
    r.right = ln_->node.right;
    r.low = lo_;
    r.high = hi_;
    for (size_t i = mid_; i < total_; i++) r.inner[i - mid_] = InnerEntry{all_[i].sep, copy_of(all_[i].child)};
    seal_node(r, t_.fresh_version(na));
    ops.push_back(write_node_op(na, r));
    // 2. the copies (unreachable until step 3)
    if (t_.opts_.log_changes) t_.opts_.log_changes(fresh_.data(), fresh_.size());
    for (size_t b = 0; b < ops.size(); b += net::kMaxBatch)
        t_.mem_.batch(target_, ops.data() + b, std::min<size_t>(net::kMaxBatch, ops.size() - b));
    // 3. one ordered batch on this node.
    for (LockedNode* l : lefts_) l->node.right = copy_of(l->node.right);
    for (size_t i = 0; i < moved_.size(); i++) {
        Node& o = moved_[i]->node;
        o.flags |= kNodeDeleted;
        o.right = fresh_[i];
        o.count = 0;
    }
    Node& n = ln_->node;
    n.count = static_cast<uint16_t>(mid_);
    std::memcpy(n.inner, all_, mid_ * sizeof(InnerEntry));
    n.high = lo_;
    n.right = na;
    std::vector<LockedNode*> pub{ln_};
    pub.insert(pub.end(), held_.begin(), held_.end());
    // Every node whose entries or right link change is held in the cache from
    // before the copies are written until its new image is in (hold_frames).
    locks_.publish(pub);
    test_point("migrate:published");
    // Remote memory holds the held dirty frames' entries now (in the copies
    // or the published left neighbours): clean, before their images change.
    for (uint32_t f : dirty_) t_.cache_->region().mark_clean(f);
    Stats::add(stats().migrations);
    hold.install(ln_->addr, n);
    for (LockedNode* x : held_) hold.install(x->addr, x->node);  // moved ones: deleted, forwarding
    for (size_t i = 0; i < moved_.size(); i++) t_.cache_update(fresh_[i], copies[i]);
    t_.cache_update(na, r);
    for (LockedNode* m : moved_) {
        t_.cache_drop(m->addr);  // before its memory can be reused
        t_.free_node(m->addr);
    }
    // 4. the new sibling's downlink
    t_.insert_parent(level_ + 1, lo_, na, path, dl);
}

}  // namespace dex::tree
