// Structure modifications of the B-link tree (src/README.md "Structure
// modifications"): leaf and inner splits in three steps (new sibling, publish
// + unlock, downlink into the parent), new roots, merges of empty leaves and
// compact(). A split at the placement level may move its right half to
// another memory node instead (migration.cpp).
#include <cstring>
#include <string>

#include "cache/cache.h"
#include "common/stats.h"
#include "tree/btree.h"
#include "tree/btree_internal.h"

namespace dex::tree {


// ---- splits --------------------------------------------------------------------

template <class L>
void BTreeT<L>::split_leaf(Locks& locks, LockedNode* ln, size_t pos, KeyRef key, Path& path,
                       const Deadline& dl, WbGuard* guard, SpareNode* spare) {
    Node& n = ln->node;
    // The new sibling lives next to the leaf it splits from: a subtree rooted
    // at the placement level stays on one memory node. Allocated before
    // anything is published, so running out of space changes nothing; or
    // before the lock was taken (prepare_leaf_lock), with its version read in
    // the lock's batch. Once taken, a spare is the split's (never freed).
    GAddr na = 0;
    uint64_t version = 0;
    if (spare && spare->addr && gaddr_node(spare->addr) == gaddr_node(ln->addr)) {
        na = spare->addr;
        version = spare->version;
        spare->addr = 0;
    } else {
        na = alloc_node(gaddr_node(ln->addr));
    }
    if (!version) version = fresh_version(na);
    Node r;
    Key sep;
    // The layout's argument (node_capacity.h) guarantees both halves fit;
    // a failure here is a bug, reported before anything is published.
    if (!L::split(n, pos, key, 0, r, sep)) throw Error(ErrorCode::kCorrupt, "leaf split: halves do not fit");
    seal_node(r, version);
    n.right = na;
    // Step 1 (new sibling) and step 2 (publish + unlock) in one ordered batch,
    // after the journal record of the key being inserted (if it needs one).
    // The upper half leaves ln: its cached copy is held from before the
    // publish until it shows the lower half (write-back mode: the guard holds it).
    std::vector<RemoteOp> before = journal_ops(ln->addr);
    before.push_back(write_node_op(na, r));
    FrameHold hold(*this);
    hold.hold(ln->addr, guard ? guard->frame : cache::kNoFrame);
    // The parent step 3 locks, read at the end of the same batch when it
    // lives on the leaf's memory node: a round trip fewer per split. (Only a
    // snapshot for the parent's lock CAS, which fails if it is not current;
    // in write-back mode too: inner nodes are never dirty.)
    const GAddr parent = path[1];
    Node pre;
    RemoteOp pread{RemoteOp::kRead, gaddr_offset(parent), &pre, static_cast<uint32_t>(kNodeSize), 0, 0, 0};
    const bool read_parent = parent && gaddr_node(parent) == gaddr_node(ln->addr);
    // The new sibling is admitted as published (a clean frame: remote memory
    // holds exactly r), so the next insert into its half of the range finds
    // it cached instead of reading it. Its I/O marker goes in before the
    // publish: a writer that changes it after the publish turns the
    // admission stale (cache_update) rather than being hidden by r.
    const bool admit_sibling = cache_ && (wb_ || cache_->should_admit(0)) &&
                               cache_->try_begin_io(na) == cache::MappingTable::Begin::kOwner;
    const auto pre_at = std::chrono::steady_clock::now();
    try {
        locks.publish({ln}, before, {na}, read_parent ? &pread : nullptr, parent);
    } catch (...) {
        if (admit_sibling) cache_->abort_io(na);
        throw;
    }
    test_point("split:published");
    if (guard)
        guard->release(&n);  // write-back mode: we hold the frame (or marker) of ln
    else
        hold.install(ln->addr, n);
    if (admit_sibling)
        cache_->admit(na, r);  // (gives the marker up; refused if it went stale)
    else
        cache_update(na, r);  // only matters if a copy of na's previous life is still cached
    // Step 3.
    insert_parent(1, sep, na, path, dl, read_parent ? &pre : nullptr, pre_at);
}

template <class L>
void BTreeT<L>::insert_parent(int level, KeyRef sep, GAddr child, Path& path, const Deadline& dl, const Node* pre,
                              std::chrono::steady_clock::time_point pre_at) {
    GAddr hint = level < static_cast<int>(path.size()) ? path[level] : 0;
    // A raw image: usable as the lock's snapshot only as io_.read would accept it.
    if (pre && (lock_held(pre->lock) || !snapshot_valid(*pre))) pre = nullptr;
    int attempt = 0;
    const char* why = "none";  // the last restart's reason: the timeout names it
    for (;;) {
        if (dl.expired()) {
            const std::string what = "inserting a separator into level " + std::to_string(level) + " for child " +
                                     hex_addr(child) + " (last restart: " + why + ")";
            dl.check(what.c_str());
        }
        if (!hint) {
            GAddr r = refresh_root();
            Node rn;
            if (!r || io_.read(r, rn, dl) != NodeIO::Read::kOk || !valid_node(rn, -1) || rn.is_deleted()) {
                why = "the root could not be read";
                Stats::add(stats().restarts);
                backoff(attempt++);
                continue;
            }
            if (rn.level < level) {
                if (rn.level != level - 1 || !L::low_is_neg_inf(rn)) {
                    why = "the root is below the level but not the leftmost node of the level under it";
                    Stats::add(stats().restarts);
                    backoff(attempt++);
                    continue;
                }
                if (grow_root(level, r, sep, child)) return;
                why = "a new root lost its race";
                continue;
            }
            Node snap;
            hint = descend(sep, level, snap, nullptr, dl).addr;
            if (!hint) {
                why = "no node at the level";
                continue;
            }
        }
        Locks locks(io_);
        // The child's image for the check below, read in the lock's batch
        // right after the CAS (on the parent's memory node): a round trip
        // fewer per split.
        Node cpre;
        LockAssist assist;
        RemoteOp cread{RemoteOp::kRead, gaddr_offset(child), &cpre, static_cast<uint32_t>(kNodeSize), 0, 0, 0};
        assist.also = &cread;
        assist.n_also = 1;
        assist.also_node = gaddr_node(child);
        if (pre && hint == path[level]) {  // first attempt only
            assist.fresh = pre;
            assist.fresh_at = pre_at;
        }
        pre = nullptr;
        LockedNode* ln = lock_covering(hint, level, sep, locks, dl, &assist);
        if (!ln) {
            why = "the node found at the level did not cover the separator (re-reading the path)";
            hint = 0;
            Stats::add(stats().restarts);
            backoff(attempt++);
            continue;
        }
        // A subtree migration (migrate_split) may have moved `child` since it
        // was split off: it is then a deleted node forwarding to its copy. We
        // hold the parent now, so it cannot move any more; link the copy.
        // (A locked child is not a migrated one: deleted nodes are never locked.)
        // The image read after the lock settles the usual case (not deleted)
        // as the loop's first read would; anything else takes the loop.
        const bool not_moved = assist.also_done && (lock_held(cpre.lock) || (snapshot_valid(cpre) &&
                                                     (!valid_node(cpre, level - 1) || !cpre.is_deleted() || !cpre.right)));
        for (int hops = 0; hops < 4 && !not_moved; hops++) {
            Node cn;
            if (io_.read(child, cn, dl, false) != NodeIO::Read::kOk || !valid_node(cn, level - 1) ||
                !cn.is_deleted() || !cn.right)
                break;
            Node fw;
            if (io_.read(cn.right, fw, dl, false) != NodeIO::Read::kOk || !valid_node(fw, level - 1) ||
                !L::equal(L::low(fw), sep))
                break;
            child = cn.right;
        }
        Node& n = ln->node;
        size_t pos = static_cast<size_t>(L::child_index(n, n.count, sep, false) + 1);
        if (pos > 0 && L::equal(L::sep(n, pos - 1), sep)) {  // already present
            locks.unlock(ln);
            return;
        }
        if (L::insert_sep(n, pos, sep, child)) {
            locks.publish({ln});
            cache_update(ln->addr, n);
            return;
        }
        split_inner(locks, ln, level, pos, sep, child, path, dl);
        return;
    }
}

// The level above does not exist yet: install a new root over the leftmost
// node (the old root) and `child`. Any node in between that lacks a downlink
// is reachable through right links.
template <class L>
bool BTreeT<L>::grow_root(int level, GAddr old_root, KeyRef sep, GAddr child) {
    // A new root at or below the placement level belongs to the subtree of
    // the old root; above it, it may go anywhere.
    GAddr na = level > place_level_ ? alloc_anywhere() : alloc_node(gaddr_node(old_root));
    Node nr;
    L::init(nr, tree_id_, static_cast<uint8_t>(level));
    if (!L::insert_sep(nr, 0, L::neg_inf(), old_root) || !L::insert_sep(nr, 1, sep, child))
        throw Error(ErrorCode::kCorrupt, "new root: two entries do not fit");
    seal_node(nr, fresh_version(na));
    log_changed(na);
    mem_.write(na, &nr, static_cast<uint32_t>(used_bytes(nr)));
    cache_update(na, nr);
    if (set_root(old_root, na)) return true;
    free_node(na);
    return false;
}

template <class L>
void BTreeT<L>::split_inner(Locks& locks, LockedNode* ln, int level, size_t pos, KeyRef sep, GAddr child,
                        Path& path, const Deadline& dl) {
    Node& n = ln->node;
    if constexpr (!L::kSlotted) {  // a slotted tree's subtrees stay where they are split (migration.cpp)
        if (level == place_level_) {
            InnerEntry all[kInnerCapacity + 1];
            std::memcpy(all, n.inner, pos * sizeof(InnerEntry));
            all[pos] = InnerEntry{sep, child};
            std::memcpy(all + pos + 1, n.inner + pos, (n.count - pos) * sizeof(InnerEntry));
            const size_t total = n.count + 1, mid = total / 2;
            if (migrate_split(locks, ln, all, total, mid, path, dl)) return;
        }
    }
    // Same memory node as the splitting node: at or below the placement
    // level the children that move to `na` are on it (one subtree per node).
    // Above it, a full memory node may be skipped.
    GAddr na;
    if (level > place_level_) {
        try {
            na = alloc_node(gaddr_node(ln->addr));
        } catch (const Error& e) {
            if (e.code() != ErrorCode::kOutOfSpace) throw;
            na = alloc_anywhere();
        }
    } else {
        na = alloc_node(gaddr_node(ln->addr));
    }
    Node r;
    Key up;
    if (!L::split(n, pos, sep, child, r, up)) throw Error(ErrorCode::kCorrupt, "inner split: halves do not fit");
    seal_node(r, fresh_version(na));
    n.right = na;
    FrameHold hold(*this);  // entries move to na: no cached image of the whole node after the publish
    if (gaddr_node(na) == gaddr_node(ln->addr)) {
        hold.hold(ln->addr);
        locks.publish({ln}, {write_node_op(na, r)}, {na});
    } else {  // step 1 on another memory node: complete it before step 2
        log_changed(na);
        mem_.write(na, &r, static_cast<uint32_t>(used_bytes(r)));
        hold.hold(ln->addr);
        locks.publish({ln});
    }
    test_point("inner-split:published");
    hold.install(ln->addr, n);  // unswizzles its children: some moved to na
    cache_update(na, r);
    insert_parent(level + 1, up, na, path, dl);
}

// ---- merges ---------------------------------------------------------------------

// right, then the parent; the left node absorbs the right one, the right one is
// published deleted (forwarding to the left) and its downlink removed, all in
// one batch; then the right node is FREEd. Best effort: any change seen on the
// way (a locked node, contention, missing downlink, different parents) just
// skips the merge -- without waiting; compact() retries it later.
template <class L>
GAddr BTreeT<L>::try_merge(GAddr e, const Path& path, const Deadline& dl, bool* merged) {
    GAddr p = path[1];
    if (!p) return 0;
    Node pn;
    int idx = -1;
    for (int hops = 0; hops < 4 && p && idx < 0; hops++) {
        if (io_.read(p, pn, dl, false) != NodeIO::Read::kOk || !valid_node(pn, 1) || pn.is_deleted()) return 0;
        for (int i = 0; i < pn.count; i++)
            if (L::child(pn, i) == e) idx = i;
        if (idx < 0) p = pn.right;
    }
    if (idx < 0 || pn.count < 2) return 0;
    GAddr la, ra;
    if (idx + 1 < pn.count) {
        la = e;
        ra = L::child(pn, idx + 1);
    } else {
        la = L::child(pn, idx - 1);
        ra = e;
    }
    // Write-back mode: a leaf's newest image may be a dirty frame. Hold both
    // leaves' frames (left to right, as every path that holds two does),
    // written back first, so remote memory is current and no in-place change
    // slips in until the merged images are installed below.
    WbGuard gl, gr;
    if (wb_) {
        wb_acquire(la, gl, dl);
        wb_acquire(ra, gr, dl);
    }
    Locks locks(io_);
    Node s;
    if (io_.read(la, s, dl, false) != NodeIO::Read::kOk || !valid_node(s, 0) || s.is_deleted() || s.right != ra)
        return 0;
    LockedNode* lk = locks.try_lock(la, s);
    if (!lk) return 0;
    if (io_.read(ra, s, dl, false) != NodeIO::Read::kOk || !valid_node(s, 0) || s.is_deleted() ||
        !L::equal(L::low(s), L::high(lk->node)))
        return 0;
    LockedNode* rk = locks.try_lock(ra, s);
    if (!rk) return 0;
    if (lk->node.count != 0 && rk->node.count != 0) return 0;
    if (io_.read(p, s, dl, false) != NodeIO::Read::kOk || !valid_node(s, 1) || s.is_deleted()) return 0;
    LockedNode* pk = locks.try_lock(p, s);
    if (!pk) return 0;
    Node& pp = pk->node;
    int j = -1;
    for (int i = 0; i + 1 < pp.count; i++)
        if (L::child(pp, i) == la && L::child(pp, i + 1) == ra && L::equal(L::sep(pp, i + 1), L::low(rk->node))) j = i;
    if (j < 0) return 0;

    Node& l = lk->node;
    Node& r = rk->node;
    if (!L::absorb(l, r)) return 0;  // (slotted: the fences may not fit beside the entries)
    r.flags |= kNodeDeleted;
    r.right = la;
    r.count = 0;
    L::erase(pp, static_cast<size_t>(j + 1));
    // The right leaf's entries move left: both leaves' cached copies are held
    // (left, then right) until they show the merged state. The parent only
    // loses a downlink, which a stale copy tolerates (the right leaf forwards).
    FrameHold hold(*this);
    if (!wb_) {
        hold.hold(la);
        hold.hold(ra);
    }
    locks.publish({lk, rk, pk});
    test_point("merge:published");
    if (merged) *merged = true;
    if (wb_) {
        gl.release(&l);
        gr.release(&r);  // deleted: an in-place change now falls back to the locked path
    } else {
        hold.install(la, l);
        hold.install(ra, r);  // deleted, forwarding to la (if the drop below fails)
    }
    cache_update(p, pp);
    cache_drop(ra);  // before its memory can be reused
    free_node(ra);
    return l.count == 0 ? la : 0;  // survivor still empty: try again
}

template <class L>
uint64_t BTreeT<L>::compact() {
    uint64_t freed = 0;
    Node parent, child;
    Deadline dl = deadline();
    // Leftmost level-1 node, then along level 1 through right links.
    GAddr p = descend(L::neg_inf(), 1, parent, nullptr, dl).addr;
    if (!p || parent.level != 1) return 0;  // the root is a leaf: nothing to merge with
    while (p) {
        dl = deadline();
        if (io_.read(p, parent, dl) != NodeIO::Read::kOk || !valid_node(parent, 1)) break;
        for (int i = 0; i < parent.count; i++) {
            GAddr c = L::child(parent, i);
            if (io_.read(c, child, dl) != NodeIO::Read::kOk || !valid_node(child, 0)) continue;
            if (child.is_deleted() || child.count != 0) continue;
            Path path{};
            path[0] = c;
            path[1] = p;
            for (int rounds = 0; c && rounds < 8; rounds++) {
                bool merged = false;
                c = try_merge(c, path, dl, &merged);
                if (merged) freed++;
            }
        }
        p = parent.right;
    }
    return freed;
}

template class BTreeT<FixedLayout>;
template class BTreeT<SlottedLayout>;

}  // namespace dex::tree
