// Write-back mode: the split of a dirty leaf whose entries remote memory may
// not take yet (src/README.md "Write-back mode", "Splitting a dirty leaf",
// W13). A dirty frame reaches remote memory only once the heap WAL of its
// entries is durable and every live standby replayed it (W6, writer_hwm):
// writing it through at its split used to make the insert wait for both --
// on a primary with a hot standby, for the standby's and the worker's beats,
// up to tens of milliseconds per split. Here remote memory gets the split of
// what it already holds instead, and the frame's entries stay dirty, in the
// frame and in a new frame of the sibling.
#include <cstring>
#include <exception>

#include "cache/cache.h"
#include "common/stats.h"
#include "tree/btree.h"
#include "tree/btree_internal.h"
#include "tree/offload_policy.h"

namespace dex::tree {

// The sibling's frame and I/O marker, taken before anything is published: a
// sibling half whose dirty entries found no frame after the publish would
// lose them (W5). Given back unless installed.
struct SiblingFrame {
    cache::Cache& c;
    GAddr a = 0;
    uint32_t f = cache::kNoFrame;
    bool marker = false;
    explicit SiblingFrame(cache::Cache& cache) : c(cache) {}
    bool take(GAddr addr) {
        a = addr;
        f = c.allocate_frame();
        if (f == cache::kNoFrame) return false;
        marker = c.try_begin_io(a) == cache::MappingTable::Begin::kOwner;
        return marker;
    }
    // The split leaf's frame's (lsn raised to the new key's): what both halves carry.
    cache::Cache::DirtyState dirty;
    // Installs `img` dirty; the frame is the cache's from here on.
    void install(const Node& img) {
        std::memcpy(static_cast<void*>(c.region().node(f)), &img, kNodeSize);
        const bool ok = c.install(f, a, &dirty);  // (we hold the marker: cannot fail)
        f = cache::kNoFrame;
        marker = false;
        if (!ok) throw Error(ErrorCode::kCorrupt, "dirty split: the sibling's I/O marker was lost");
    }
    ~SiblingFrame() {
        if (f != cache::kNoFrame) c.release_frame(f);
        if (marker) c.abort_io(a);
    }
};

template <class L>
int BTreeT<L>::wb_split_dirty(GAddr a, WbGuard& guard, KeyRef key, Path& path, const Deadline& dl,
                              SpareNode& spare, bool* inserted) {
    cache::CacheRegion& R = cache_->region();
    if (guard.frame == cache::kNoFrame) return 0;
    cache::FrameHeader& h = R.header(guard.frame);
    Node fimg;  // the frame: the newest image (W2), held by the guard
    R.copy_unswizzled(guard.frame, fimg);
    // A draining frame (W14) is not kept dirty longer, nor is any while write-back
    // is paused (W18): the old wait, then its entries are written with the split.
    if (!frame_holds_leaf(h, fimg, a) || !covers(fimg, key, false) || R.draining(guard.frame) ||
        R.write_back_paused())
        return 0;
    const size_t pos = L::lower_bound(fimg, key);
    if (has_entry(fimg, pos, key)) {
        guard.release(nullptr);
        *inserted = false;
        return 1;
    }
    if (L::leaf_fits(fimg, key)) {  // room after all (a delete meanwhile): in place, next round
        guard.release(nullptr);
        return -1;
    }
    // The sibling is a new dirty frame of this tree: registered like any
    // frame that turns dirty (W7), before it exists.
    if (!opts_.register_dirty || !opts_.register_dirty()) return 0;
    if (spare.addr && gaddr_node(spare.addr) != gaddr_node(a)) return 0;  // (never: spares live next to their leaf)
    if (!spare.addr) {
        spare.addr = spare_or_alloc(gaddr_node(a));
        spare.version = 0;
    }
    const GAddr na = spare.addr;
    SiblingFrame sib(*cache_);
    if (!sib.take(na)) return 0;  // no frame to be had, or an old life of na still cached
    in_place_changes_++;  // the key goes into a dirty frame half, not to remote memory (W13)
    sib.dirty = cache::Cache::DirtyState{std::max(guard.uncovered, intent_.lsn),
                                         h.dirty_since.load(std::memory_order_relaxed),
                                         h.imaged_at.load(std::memory_order_relaxed)};
    // one round trip where the memory node can split it
    if (wb_split_dirty_at_memnode(a, guard, fimg, pos, key, path, dl, spare, sib)) {
        *inserted = true;
        return 1;
    }

    // Lock the remote leaf from the frame's image (it is at the frame's
    // version, W2/W3) and read what it holds right after the CAS, in the same
    // round trip -- with the spare's previous life if its version is not known.
    Node rimg;
    RemoteOp also[2];
    size_t n_also = 0;
    if (!spare.version)
        also[n_also++] = RemoteOp{RemoteOp::kRead, gaddr_offset(na), spare.w, sizeof spare.w, 0, 0, 0};
    also[n_also++] = RemoteOp{RemoteOp::kRead, gaddr_offset(a), &rimg, static_cast<uint32_t>(kNodeSize), 0, 0, 0};
    Node fl = fimg, fr;  // the frame's halves
    Key sep;
    std::exception_ptr lost;
    const GAddr parent = path[1];
    Node pre;
    RemoteOp pread{RemoteOp::kRead, gaddr_offset(parent), &pre, static_cast<uint32_t>(kNodeSize), 0, 0, 0};
    bool read_parent = false;
    auto pre_at = std::chrono::steady_clock::now();
    {
        Locks locks(io_);
        LockAssist assist;
        assist.fresh = &fimg;
        assist.fresh_at = std::chrono::steady_clock::now();
        assist.also = also;
        assist.n_also = n_also;
        assist.also_node = gaddr_node(a);
        LockedNode* ln = lock_covering(a, 0, key, locks, dl, &assist);
        if (!ln || ln->addr != a || !assist.also_done) {
            if (ln) locks.unlock(ln);
            guard.release(nullptr);
            return -1;
        }
        if (!spare.version) spare.version = fresh_version_from(spare.w);
        // What remote memory holds: the locked version, the frame's fences
        // and right link (structure changes are written through, W1).
        const bool remote_ok = rimg.body_version == ln->version && body_intact(rimg) && rimg.tree_id == tree_id_ &&
                               rimg.level == 0 && L::layout_ok(rimg) && rimg.right == fimg.right &&
                               L::equal(L::low(rimg), L::low(fimg)) && L::equal(L::high(rimg), L::high(fimg));
        Node rl, rr;
        if (!remote_ok || !L::split(fl, pos, key, 0, fr, sep) || !split_image_at<L>(rimg, sep, na, rl, rr)) {
            locks.unlock(ln);
            return 0;  // (the frame is untouched: fl and fr are copies)
        }
        fl.right = na;
        seal_node(rr, spare.version);
        rl.body_version = ln->version;  // (publish seals it as the next version)
        ln->node = rl;
        spare.addr = 0;  // the split's from here on
        // The parent step 3 locks, read at the end of the publish batch when
        // it lives on the leaf's memory node (as split_leaf does).
        read_parent = parent && gaddr_node(parent) == gaddr_node(a);
        pre_at = std::chrono::steady_clock::now();
        try {
            locks.publish({ln}, {write_node_op(na, rr)}, {na}, read_parent ? &pread : nullptr, parent);
        } catch (...) {
            lost = std::current_exception();
        }
        if (!lost) {
            test_point("dirty-split:published");
            fl.body_version = ln->node.body_version;
            fl.lock = ln->node.lock;
            fr.body_version = rr.body_version;
            fr.lock = rr.lock;
        }
    }  // (the remote lock is let go here if the publish did not)
    if (lost) {
        wb_settle_lost_dirty_split(a, na, guard, fl, fr, sib, dl);
        std::rethrow_exception(lost);
    }
    // The sibling first: a reader that follows the frame's new right link
    // finds its frame (or its marker, and waits), never the remote half.
    sib.install(fr);
    guard.release_dirty(fl, sib.dirty.lsn);
    Stats::add(stats().dirty_splits);
    *inserted = true;
    // Step 3: the downlink, written through (inner nodes are never dirty).
    insert_parent(1, sep, na, path, dl, read_parent ? &pre : nullptr, pre_at);
    return 1;
}

// OFFLOAD_DIRTY_SPLIT (src/README.md "Splitting a dirty leaf"): what the
// one-sided way below does in three to five round trips -- lock and read the
// leaf, publish its remote halves, link the sibling -- the memory node does
// in one, from the frame's description of what it holds (version, fences,
// right link) and the separator of the frame's own split. The frame's halves
// then take the versions remote memory gave its halves and stay dirty, as
// below. True: done (the guard let go, the sibling's frame installed);
// false: nothing changed (the memory node cannot, or the leaf is not what
// the frame says), go one-sided.
template <class L>
bool BTreeT<L>::wb_split_dirty_at_memnode(GAddr a, WbGuard& guard, const Node& fimg, size_t pos, KeyRef key,
                                          Path& path, const Deadline& dl, SpareNode& spare, SiblingFrame& sib) {
    const uint32_t node = gaddr_node(a);
    if (!node_splits_dirty_leaves(node)) return false;
    Node fl = fimg, fr;  // the frame's halves
    Key sep;
    if (!L::split(fl, pos, key, 0, fr, sep)) return false;
    const GAddr na = spare.addr;
    fl.right = na;
    GAddr parent = path[1];
    if (!parent || gaddr_is_swizzled(parent) || gaddr_node(parent) != node || place_level_ < 1) parent = 0;
    SplitReply r;
    try {
        if (!dirty_split_rpc(a, fimg, sep, na, parent, r)) return false;
    } catch (...) {
        // As for a lost publish below: remote memory tells whether it ran.
        spare.addr = 0;  // (it may be the sibling now: never reused)
        wb_settle_lost_dirty_split(a, na, guard, fl, fr, sib, dl);
        throw;
    }
    spare.addr = 0;  // the split's
    test_point("dirty-split:answered");  // remote memory split; the frames still as they were
    fl.body_version = r.leaf_img.body_version;
    fl.lock = r.leaf_img.lock;
    fr.body_version = r.sib_img.body_version;
    fr.lock = r.sib_img.lock;
    // Standbys: every node the memory node changed (as a publish logs them).
    GAddr changed[3] = {a, na, r.parent};
    if (opts_.log_changes) opts_.log_changes(changed, r.parent ? 3 : 2);
    // The sibling first: a reader that follows the frame's new right link
    // finds its frame (or its marker, and waits), never the remote half.
    sib.install(fr);
    guard.release_dirty(fl, sib.dirty.lsn);
    Stats::add(stats().dirty_splits);
    if (r.parent)
        cache_update(r.parent, r.parent_img);  // gained the downlink
    else
        insert_parent(1, sep, na, path, dl);  // step 3 left to us, written through
    return true;
}

// Settled by what remote memory holds (W3): it ran -- the halves, both
// dirty, as after a publish that answered (the downlink is left out: B-link
// readers and the next split of the level tolerate it); it did not -- the
// frame as it was; remote memory cannot tell -- the guard drops the frame,
// as after any publish whose outcome is unknown (limits).
template <class L>
void BTreeT<L>::wb_settle_lost_dirty_split(GAddr a, GAddr na, WbGuard& guard, Node& fl, Node& fr,
                                           SiblingFrame& sib, const Deadline& dl) {
    const int ran = wb_lost_dirty_split(a, na, guard, fl, fr, dl);
    if (ran == 2) {
        sib.install(fr);
        guard.release_dirty(fl, sib.dirty.lsn);
    } else if (ran == 1) {
        guard.release(nullptr);
    } else {
        guard.splits = false;
    }
}

template <class L>
int BTreeT<L>::wb_lost_dirty_split(GAddr a, GAddr na, const WbGuard& guard, Node& left, Node& right,
                                   const Deadline& dl) {
    try {
        cache::CacheRegion& R = cache_->region();
        Node now, held, sib;
        if (io_.read(a, now, dl) != NodeIO::Read::kOk || !frame_holds_leaf(R.header(guard.frame), now, a)) return 0;
        R.copy_unswizzled(guard.frame, held);
        if (now.right == held.right) return 1;
        if (now.right != na || io_.read(na, sib, dl) != NodeIO::Read::kOk || !valid_node(sib, 0)) return 0;
        left.body_version = now.body_version;
        left.lock = now.lock;
        right.body_version = sib.body_version;
        right.lock = sib.lock;
        return 2;
    } catch (...) {
        return 0;
    }
}

template class BTreeT<FixedLayout>;
template class BTreeT<SlottedLayout>;

}  // namespace dex::tree
