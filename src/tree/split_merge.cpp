// Structure modifications of the B-link tree (src/README.md "Structure
// modifications"): leaf and inner splits in three steps (new sibling, publish
// + unlock, downlink into the parent), new roots, merges of empty leaves and
// compact(). A split at the placement level may move its right half to
// another memory node instead (migration.cpp).
#include <cstring>

#include "cache/cache.h"
#include "common/stats.h"
#include "tree/btree.h"
#include "tree/btree_internal.h"

namespace dex::tree {

using detail::child_index;
using detail::init_node;

// ---- splits --------------------------------------------------------------------

void BTree::split_leaf(Locks& locks, LockedNode* ln, size_t pos, const EntryKey& key, Path& path,
                       const Deadline& dl, WbGuard* guard) {
    Node& n = ln->node;
    EntryKey all[kLeafCapacity + 1];
    std::memcpy(all, n.leaf, pos * sizeof(EntryKey));
    all[pos] = key;
    std::memcpy(all + pos + 1, n.leaf + pos, (n.count - pos) * sizeof(EntryKey));
    const size_t total = n.count + 1, mid = total / 2;

    // The new sibling lives next to the leaf it splits from: a subtree rooted
    // at the placement level stays on one memory node. Allocated before
    // anything is published, so running out of space changes nothing.
    GAddr na = alloc_node(gaddr_node(ln->addr));
    Node r;
    init_node(r, tree_id_, 0);
    r.count = static_cast<uint16_t>(total - mid);
    r.right = n.right;
    r.low = all[mid];
    r.high = n.high;
    std::memcpy(r.leaf, all + mid, r.count * sizeof(EntryKey));
    seal_node(r, fresh_version(na));

    n.count = static_cast<uint16_t>(mid);
    std::memcpy(n.leaf, all, mid * sizeof(EntryKey));
    n.high = all[mid];
    n.right = na;
    EntryKey sep = all[mid];
    // Step 1 (new sibling) and step 2 (publish + unlock) in one ordered batch,
    // after the journal record of the key being inserted (if it needs one).
    // The upper half leaves ln: its cached copy is held from before the
    // publish until it shows the lower half (write-back mode: the guard holds it).
    std::vector<RemoteOp> before = journal_ops(ln->addr);
    before.push_back(write_node_op(na, r));
    FrameHold hold(*this);
    hold.hold(ln->addr, guard ? guard->frame : cache::kNoFrame);
    locks.publish({ln}, before, {na});
    test_point("split:published");
    if (guard)
        guard->release(&n);  // write-back mode: we hold the frame (or marker) of ln
    else
        hold.install(ln->addr, n);
    cache_update(na, r);  // only matters if a copy of na's previous life is still cached
    // Step 3.
    insert_parent(1, sep, na, path, dl);
}

void BTree::insert_parent(int level, const EntryKey& sep, GAddr child, Path& path, const Deadline& dl) {
    GAddr hint = level < static_cast<int>(path.size()) ? path[level] : 0;
    int attempt = 0;
    for (;;) {
        dl.check();
        if (!hint) {
            GAddr r = refresh_root();
            Node rn;
            if (!r || io_.read(r, rn, dl) != NodeIO::Read::kOk || !valid_node(rn, -1) || rn.is_deleted()) {
                Stats::add(stats().restarts);
                backoff(attempt++);
                continue;
            }
            if (rn.level < level) {
                if (rn.level != level - 1 || rn.low.cls != kNegInf) {
                    Stats::add(stats().restarts);
                    backoff(attempt++);
                    continue;
                }
                if (grow_root(level, r, sep, child)) return;
                continue;
            }
            Node snap;
            hint = descend(sep, level, snap, nullptr, dl).addr;
            if (!hint) continue;
        }
        Locks locks(io_);
        LockedNode* ln = lock_covering(hint, level, sep, locks, dl);
        if (!ln) {
            hint = 0;
            Stats::add(stats().restarts);
            backoff(attempt++);
            continue;
        }
        // A subtree migration (migrate_split) may have moved `child` since it
        // was split off: it is then a deleted node forwarding to its copy. We
        // hold the parent now, so it cannot move any more; link the copy.
        // (A locked child is not a migrated one: deleted nodes are never locked.)
        for (int hops = 0; hops < 4; hops++) {
            Node cn;
            if (io_.read(child, cn, dl, false) != NodeIO::Read::kOk || !valid_node(cn, level - 1) ||
                !cn.is_deleted() || !cn.right)
                break;
            Node fw;
            if (io_.read(cn.right, fw, dl, false) != NodeIO::Read::kOk || !valid_node(fw, level - 1) ||
                !(fw.low == sep))
                break;
            child = cn.right;
        }
        Node& n = ln->node;
        size_t pos = static_cast<size_t>(child_index(n, sep, false) + 1);
        if (pos > 0 && n.inner[pos - 1].sep == sep) {  // already present
            locks.unlock(ln);
            return;
        }
        if (n.count < kInnerCapacity) {
            std::memmove(&n.inner[pos + 1], &n.inner[pos], (n.count - pos) * sizeof(InnerEntry));
            n.inner[pos] = InnerEntry{sep, child};
            n.count++;
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
bool BTree::grow_root(int level, GAddr old_root, const EntryKey& sep, GAddr child) {
    // A new root at or below the placement level belongs to the subtree of
    // the old root; above it, it may go anywhere.
    GAddr na = level > place_level_ ? alloc_anywhere() : alloc_node(gaddr_node(old_root));
    Node nr;
    init_node(nr, tree_id_, static_cast<uint8_t>(level));
    nr.count = 2;
    nr.inner[0] = InnerEntry{neg_inf_key(), old_root};
    nr.inner[1] = InnerEntry{sep, child};
    seal_node(nr, fresh_version(na));
    log_changed(na);
    mem_.write(na, &nr, static_cast<uint32_t>(used_bytes(nr)));
    cache_update(na, nr);
    if (set_root(old_root, na)) return true;
    free_node(na);
    return false;
}

void BTree::split_inner(Locks& locks, LockedNode* ln, int level, size_t pos, const EntryKey& sep, GAddr child,
                        Path& path, const Deadline& dl) {
    Node& n = ln->node;
    InnerEntry all[kInnerCapacity + 1];
    std::memcpy(all, n.inner, pos * sizeof(InnerEntry));
    all[pos] = InnerEntry{sep, child};
    std::memcpy(all + pos + 1, n.inner + pos, (n.count - pos) * sizeof(InnerEntry));
    const size_t total = n.count + 1, mid = total / 2;
    if (level == place_level_ && migrate_split(locks, ln, all, total, mid, path, dl)) return;
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
    init_node(r, tree_id_, static_cast<uint8_t>(level));
    r.count = static_cast<uint16_t>(total - mid);
    r.right = n.right;
    r.low = all[mid].sep;
    r.high = n.high;
    std::memcpy(r.inner, all + mid, r.count * sizeof(InnerEntry));
    seal_node(r, fresh_version(na));
    n.count = static_cast<uint16_t>(mid);
    std::memcpy(n.inner, all, mid * sizeof(InnerEntry));
    n.high = all[mid].sep;
    n.right = na;
    EntryKey up = all[mid].sep;
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
GAddr BTree::try_merge(GAddr e, const Path& path, const Deadline& dl, bool* merged) {
    GAddr p = path[1];
    if (!p) return 0;
    Node pn;
    int idx = -1;
    for (int hops = 0; hops < 4 && p && idx < 0; hops++) {
        if (io_.read(p, pn, dl, false) != NodeIO::Read::kOk || !valid_node(pn, 1) || pn.is_deleted()) return 0;
        for (int i = 0; i < pn.count; i++)
            if (pn.inner[i].child == e) idx = i;
        if (idx < 0) p = pn.right;
    }
    if (idx < 0 || pn.count < 2) return 0;
    GAddr la, ra;
    if (idx + 1 < pn.count) {
        la = e;
        ra = pn.inner[idx + 1].child;
    } else {
        la = pn.inner[idx - 1].child;
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
    LockedNode* L = locks.try_lock(la, s);
    if (!L) return 0;
    if (io_.read(ra, s, dl, false) != NodeIO::Read::kOk || !valid_node(s, 0) || s.is_deleted() || !(s.low == L->node.high))
        return 0;
    LockedNode* R = locks.try_lock(ra, s);
    if (!R) return 0;
    if ((L->node.count != 0 && R->node.count != 0) || L->node.count + R->node.count > kLeafCapacity) return 0;
    if (io_.read(p, s, dl, false) != NodeIO::Read::kOk || !valid_node(s, 1) || s.is_deleted()) return 0;
    LockedNode* P = locks.try_lock(p, s);
    if (!P) return 0;
    Node& pp = P->node;
    int j = -1;
    for (int i = 0; i + 1 < pp.count; i++)
        if (pp.inner[i].child == la && pp.inner[i + 1].child == ra && pp.inner[i + 1].sep == R->node.low) j = i;
    if (j < 0) return 0;

    Node& l = L->node;
    Node& r = R->node;
    std::memcpy(&l.leaf[l.count], r.leaf, r.count * sizeof(EntryKey));
    l.count = static_cast<uint16_t>(l.count + r.count);
    l.high = r.high;
    l.right = r.right;
    r.flags |= kNodeDeleted;
    r.right = la;
    r.count = 0;
    std::memmove(&pp.inner[j + 1], &pp.inner[j + 2], (pp.count - j - 2) * sizeof(InnerEntry));
    pp.count--;
    // The right leaf's entries move left: both leaves' cached copies are held
    // (left, then right) until they show the merged state. The parent only
    // loses a downlink, which a stale copy tolerates (the right leaf forwards).
    FrameHold hold(*this);
    if (!wb_) {
        hold.hold(la);
        hold.hold(ra);
    }
    locks.publish({L, R, P});
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

uint64_t BTree::compact() {
    uint64_t freed = 0;
    Node parent, child;
    Deadline dl = deadline();
    // Leftmost level-1 node, then along level 1 through right links.
    GAddr p = descend(neg_inf_key(), 1, parent, nullptr, dl).addr;
    if (!p || parent.level != 1) return 0;  // the root is a leaf: nothing to merge with
    while (p) {
        dl = deadline();
        if (io_.read(p, parent, dl) != NodeIO::Read::kOk || !valid_node(parent, 1)) break;
        for (int i = 0; i < parent.count; i++) {
            GAddr c = parent.inner[i].child;
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

}  // namespace dex::tree
