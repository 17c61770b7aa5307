// Write-back mode (src/README.md "Write-back mode"): in-place leaf changes
// kept in a dirty cached frame (wb_modify), the exclusive right to change a
// leaf while writing through (wb_acquire, WbGuard), and writing a dirty
// frame back with the remote-lock protocol (write_back_node).
#include <algorithm>
#include <cstring>
#include <exception>
#include <string>

#include "cache/cache.h"
#include "common/stats.h"
#include "tree/btree.h"
#include "tree/btree_internal.h"
#include "tree/write_back_nodes.h"

namespace dex::tree {


// The cache's WriteBack callback (cluster::ComputeProcess::write_back_frame,
// installed on every process's cache handle) and the write-back slow path use
// this. It runs under the frame's lock, which is safe because nobody
// waits for a frame lock while holding a remote lock (cache_update runs only
// after the publish released them; the write-back slow path takes the frame
// lock before the remote one).
uint64_t write_back_node(NodeIO& io, GAddr a, const Node& img, const Deadline& dl) {
    Node snap;
    int attempt = 0;
    for (;;) {
        dl.check("writing back a dirty cached node");
        if (io.read(a, snap, dl) != NodeIO::Read::kOk)
            throw Error(ErrorCode::kCorrupt, "write-back: node " + hex_addr(a) + " is not a valid node image");
        if (snap.tree_id != img.tree_id || snap.level != img.level)
            throw Error(ErrorCode::kCorrupt, "write-back: node " + hex_addr(a) + " belongs to another tree now");
        Locks locks(io);
        LockedNode* ln = locks.try_lock(a, snap);
        if (!ln) {
            backoff(attempt++);
            continue;
        }
        std::memcpy(static_cast<void*>(&ln->node), &img, kNodeSize);
        locks.publish({ln});
        Stats::add(stats().write_backs);
        return ln->version + 1;
    }
}

std::vector<bool> write_back_nodes(RemoteMemory& mem, uint32_t node, const std::vector<GAddr>& a,
                                   const std::vector<Node*>& img, TreeOptions::ChangeLog log) {
    const size_t n = a.size();
    std::vector<bool> done(n, false);
    if (n == 0) return done;
    Transport& t = mem.node(node);
    InterruptHold hold;  // remote locks are held from the CAS to the publish
    const uint64_t cid = t.client_id();
    std::vector<uint64_t> base(n);
    std::vector<bool> locked(n, false);
    std::vector<size_t> todo;
    for (size_t i = 0; i < n; i++) {
        base[i] = img[i]->body_version;
        todo.push_back(i);
    }
    for (int round = 0; round < 2 && !todo.empty(); round++) {
        std::vector<RemoteOp> ops(todo.size());
        for (size_t k = 0; k < todo.size(); k++) {
            const size_t i = todo[k];
            ops[k] = RemoteOp{RemoteOp::kCas, gaddr_offset(a[i]), nullptr, 0, make_lock_word(base[i], 0, false),
                              make_lock_word(base[i], cid, true), 0};
        }
        t.batch(ops.data(), ops.size());
        std::vector<size_t> again;
        for (size_t k = 0; k < todo.size(); k++) {
            const size_t i = todo[k];
            const uint64_t w = ops[k].result;
            if (w == ops[k].compare) {
                locked[i] = true;
            } else if (round == 0 && !lock_held(w)) {
                // Published since the frame's version (by write_back_node):
                // the full version from the word's low bits, never behind.
                uint64_t v = (base[i] & ~kLockVersionMask) | lock_version(w);
                if (v < base[i]) v += kLockVersionMask + 1;
                base[i] = v;
                again.push_back(i);
            }
        }
        todo = std::move(again);
    }
    std::vector<size_t> won;
    for (size_t i = 0; i < n; i++)
        if (locked[i]) won.push_back(i);
    if (won.empty()) return done;
    try {
        if (t.connected_client_id() != cid)  // the locks are a dead connection's: left to the takeover
            throw Error(ErrorCode::kUnreachable, "write-back: connection lost while holding locks");
        if (log) {
            std::vector<GAddr> changed(won.size());
            for (size_t j = 0; j < won.size(); j++) changed[j] = a[won[j]];
            log(changed.data(), changed.size());
        }
        std::vector<uint64_t> words(won.size());
        std::vector<RemoteOp> ops;
        ops.reserve(2 * won.size());
        for (size_t j = 0; j < won.size(); j++) {
            Node& im = *img[won[j]];
            seal_node(im, base[won[j]] + 1);
            words[j] = im.lock;
            ops.push_back(RemoteOp{RemoteOp::kWrite, gaddr_offset(a[won[j]]) + 8, reinterpret_cast<uint8_t*>(&im) + 8,
                                   static_cast<uint32_t>(used_bytes(im) - 8), 0, 0, 0});
        }
        for (size_t j = 0; j < won.size(); j++)
            ops.push_back(RemoteOp{RemoteOp::kWrite, gaddr_offset(a[won[j]]), &words[j], 8, 0, 0, 0});
        t.batch(ops.data(), ops.size());
        test_point("writeback:written");  // remote memory has the frames' images; they are still dirty here
    } catch (...) {
        for (size_t i : won) {
            try {
                t.cas(gaddr_offset(a[i]), make_lock_word(base[i], cid, true), make_lock_word(base[i], 0, false));
            } catch (...) {
            }
        }
        throw;
    }
    for (size_t i : won) {
        done[i] = true;
        Stats::add(stats().write_backs);
    }
    return done;
}

// ---- the leaf's frame -----------------------------------------------------------

template <class L>
int BTreeT<L>::wb_modify(GAddr a, const Key* keys, size_t n, bool insert, size_t* used, uint64_t* deleted,
                         LeafFull* full_at, uint32_t frame_hint) {
    cache::CacheRegion& R = cache_->region();
    // The descent's frame, if it still names `a`, instead of a lookup (its
    // bucket's spin lock): checked again under the frame's lock below, as a
    // lookup's answer is, and a frame that is not hot or cooling -- being
    // filled or evicted -- is looked up as before.
    uint32_t f = cache::kNoFrame;
    if (frame_hint < R.frame_count()) {
        const cache::FrameState st = R.header(frame_hint).get_state();
        if ((st == cache::FrameState::kHot || st == cache::FrameState::kCooling) &&
            R.header(frame_hint).gaddr.load(std::memory_order_acquire) == a)
            f = frame_hint;
    }
    if (f == cache::kNoFrame) f = R.table().lookup(a);
    if (f == cache::kNoFrame || f == cache::MappingTable::kIoInProgress) return 0;
    cache::FrameHeader& h = R.header(f);
    h.lock();  // we hold no other frame lock
    Node* nd = R.node(f);
    if (!frame_holds_leaf(h, *nd, a) || !covers(*nd, keys[0], false) ||
        (f == frame_hint && h.get_state() != cache::FrameState::kHot && h.get_state() != cache::FrameState::kCooling)) {
        h.unlock_unchanged();
        return 0;
    }
    if (R.write_back_paused()) {  // W18: written through -- a dirty frame with it -- not changed in place
        // A full leaf still gives up with its stamp: the bottom-up pass then
        // defers its removal (K9) -- the insert splits the leaf meanwhile.
        if (insert && full_at && !L::leaf_fits(*nd, keys[0]) && !has_entry(*nd, L::lower_bound(*nd, keys[0]), keys[0]))
            wb_note_full(h, *nd, a, f, full_at);
        else
            Stats::add(stats().wb_paused_writes);
        h.unlock_unchanged();
        return 0;
    }
    if (insert) {
        size_t pos = L::lower_bound(*nd, keys[0]);
        if (has_entry(*nd, pos, keys[0])) {
            h.unlock_unchanged();
            return -1;
        }
        if (R.draining(f)) {  // W14: written through (covered) or after a wait, not kept dirty longer
            h.unlock_unchanged();
            return 0;
        }
        if (!L::leaf_fits(*nd, keys[0])) {  // needs a split: write through
            if (full_at) wb_note_full(h, *nd, a, f, full_at);
            h.unlock_unchanged();
            return 0;
        }
    }
    if (!wb_begin_change(h)) {
        h.unlock_unchanged();
        return 0;
    }
    if (insert) {
        L::insert_entry(*nd, L::lower_bound(*nd, keys[0]), keys[0]);  // fits (checked above)
        if (used) *used = 1;
        // Not written back before the row's heap WAL is durable (no stray
        // entry can reach remote memory; src/README.md "Crash survival").
        if (intent_.lsn > h.lsn.load(std::memory_order_relaxed)) h.lsn.store(intent_.lsn, std::memory_order_relaxed);
    } else {
        size_t j = 0;
        while (j < n && covers(*nd, keys[j], false)) {
            size_t pos = L::lower_bound(*nd, keys[j]);
            if (has_entry(*nd, pos, keys[j])) {
                L::erase(*nd, pos);
                if (deleted) (*deleted)++;
            }
            j++;
        }
        if (used) *used = j;
    }
    in_place_changes_++;  // (before the frame shows the change: this backend logs it next)
    R.mark_dirty(f);
    h.unlock();
    Stats::add(stats().dirty_updates);
    return 1;
}

// A full leaf's stamp for a bottom-up pass, under frame h's exclusive lock
// (the version word unlock_unchanged() restores).
template <class L>
void BTreeT<L>::wb_note_full(const cache::FrameHeader& h, const Node& n, GAddr a, uint32_t f, LeafFull* full_at) {
    full_at->leaf = a;
    full_at->version = n.body_version;
    full_at->frame = f;
    full_at->frame_version = h.version.load(std::memory_order_relaxed) & ~cache::kVerLocked;
}

template <class L>
bool BTreeT<L>::frame_holds_leaf(const cache::FrameHeader& h, const Node& n, GAddr a) const {
    return h.gaddr.load(std::memory_order_acquire) == a && h.get_state() != cache::FrameState::kFree &&
           n.tree_id == tree_id_ && n.level == 0 && !n.is_deleted() && L::layout_ok(n);
}

template <class L>
bool BTreeT<L>::wb_begin_change(cache::FrameHeader& h) {
    if (cache_->region().write_back_paused()) return false;  // W18
    if (h.dirty.load(std::memory_order_relaxed)) return true;
    bool ok;
    try {
        ok = opts_.register_dirty ? opts_.register_dirty() : false;
    } catch (...) {
        h.unlock_unchanged();
        throw;
    }
    if (!ok) return false;
    // Before the change: the change's log record comes after this position.
    h.dirty_since.store(opts_.log_position ? opts_.log_position() : 0, std::memory_order_relaxed);
    h.imaged_at.store(0, std::memory_order_relaxed);
    return true;
}

// A kill of a write-back tree (src/README.md "Dead-entry hints", K5). The
// frame's version word is bumped by every change of its image -- an in-place
// insert or delete, an installed publish, an eviction or a reuse of the frame
// -- so holding it at `fv` means the frame holds exactly the image the scan
// judged (K1), which in write-back mode is the newest copy of the leaf (W2).
// The removal then is an in-place delete like VACUUM's: the frame turns
// dirty and the change is logged for redo. The caller logged the kill's
// conflict horizon at `hold_lsn` (K7): the frame's lsn rises to it, so the
// removal reaches remote memory -- where standbys read -- only once that
// record is durable (nothing removed belongs to a row a crash could bring
// back) and replayed by every live standby (which cancelled the queries that
// could still see the rows). Without a record (0) the caller passed the
// kills' gate instead. `present_only` (K8): the frame may have changed since
// (an insert into the leaf, another kill, a write-back); whatever of the
// entries it still holds goes -- the caller knows no VACUUM can have handed
// one of their TIDs to a new row meanwhile.
template <class L>
uint64_t BTreeT<L>::wb_kill(GAddr a, uint32_t f, uint64_t fv, const Key* keys, size_t n, bool bottom_up,
                            uint64_t hold_lsn, bool present_only) {
    cache::CacheRegion& R = cache_->region();
    uint64_t removed = 0;
    std::vector<Key> gone;
    if (f < R.frame_count()) {
        cache::FrameHeader& h = R.header(f);
        bool locked = h.try_upgrade(fv);
        if (!locked && present_only) {
            h.lock();  // we hold no other frame lock
            locked = true;
        }
        if (locked) {
            Node* nd = R.node(f);
            if (frame_holds_leaf(h, *nd, a) && !(hold_lsn != 0 && R.draining(f))) {  // (W14: a hint, skipped)
                for (size_t i = 0; i < n; i++)
                    if (has_entry(*nd, L::lower_bound(*nd, keys[i]), keys[i])) gone.push_back(keys[i]);
            }
            if (gone.empty() || !wb_begin_change(h)) {
                gone.clear();
                h.unlock_unchanged();
            } else {
                for (const Key& k : gone) {  // (keys come sorted and distinct; re-checked anyway)
                    const size_t pos = L::lower_bound(*nd, k);
                    if (has_entry(*nd, pos, k)) {
                        L::erase(*nd, pos);
                        removed++;
                    }
                }
                R.mark_dirty(f);
                // (under the frame lock, which every write-back holds while
                // it compares the frame's lsn with the durable position)
                if (hold_lsn > h.lsn.load(std::memory_order_relaxed))
                    h.lsn.store(hold_lsn, std::memory_order_relaxed);
                h.unlock();
                Stats::add(stats().dirty_updates);
            }
        }
    }
    // Logged after the frame lock is released, as every in-place change
    // (W10: dirty_since was taken before the change).
    log_entry_changes(false, false, gone.data(), gone.size());  // (in place, or nothing)
    Stats::add(bottom_up ? stats().bottomup_removed : stats().kills, removed);
    if (removed < n) Stats::add(stats().kills_skipped, n - removed);
    return removed;
}

template <class L>
bool BTreeT<L>::stamp_current(GAddr leaf, uint32_t f, uint64_t fv, uint64_t version) const {
    if (!cache_) return true;
    cache::CacheRegion& R = cache_->region();
    if (wb_) {
        if (fv == 0) return true;
        return f < R.frame_count() && R.header(f).version.load(std::memory_order_acquire) == fv &&
               R.header(f).gaddr.load(std::memory_order_acquire) == leaf;
    }
    // Write-through: a frame of the leaf holds a remote image (never a local
    // change), and cache_update never moves it back in body version. A
    // frame past `version` therefore says remote memory changed since the
    // scan judged the leaf: the kill's version check would fail after the
    // gate's round trip and the lock's. (Hot leaves of a zipfian update mix
    // changed under about half of their kills.) Anything else -- no frame,
    // one being read or replaced, an older one (another compute server's
    // write it has not seen) -- says nothing: the remote check decides.
    Node img;
    if (leaf == kNullGAddr || version == 0 || !cached_leaf_copy(leaf, img)) return true;
    return img.body_version <= version;
}

template <class L>
bool BTreeT<L>::wb_read_leaf(GAddr a, uint32_t f, uint64_t fv, std::vector<Key>& out) {
    cache::CacheRegion& R = cache_->region();
    out.clear();
    if (f >= R.frame_count()) return false;
    cache::FrameHeader& h = R.header(f);
    if (h.begin_read() != fv) return false;
    Node img;
    R.copy_unswizzled(f, img);
    if (!R.validate(f, fv) || !frame_holds_leaf(h, img, a)) return false;
    out.reserve(img.count);
    for (size_t i = 0; i < img.count; i++) out.emplace_back(L::entry(img, i));
    return true;
}

template <class L>
void BTreeT<L>::wb_acquire(GAddr a, WbGuard& g, const Deadline& dl, bool keep_dirty) {
    cache::CacheRegion& R = cache_->region();
    int attempt = 0;
    std::string busy;  // why the last write-back let the latch go: the timeout names it
    for (;;) {
        if (dl.expired()) dl.check(("waiting for a cached leaf in write-back mode" + busy).c_str());
        uint32_t f = R.table().lookup(a);
        if (f == cache::MappingTable::kIoInProgress) {
            backoff(attempt++);
            continue;
        }
        if (f == cache::kNoFrame) {
            auto b = cache_->try_begin_io(a);
            if (b == cache::MappingTable::Begin::kOwner) {
                g.t = this;
                g.a = a;
                g.marker = true;
                return;
            }
            if (b != cache::MappingTable::Begin::kCached) backoff(attempt++);
            continue;
        }
        cache::FrameHeader& h = R.header(f);
        h.lock();  // we hold no other frame lock
        if (h.gaddr.load(std::memory_order_relaxed) != a || h.get_state() == cache::FrameState::kFree) {
            h.unlock_unchanged();
            continue;
        }
        g.uncovered = 0;
        if (h.dirty.load(std::memory_order_relaxed)) {
            uint64_t need = h.lsn.load(std::memory_order_relaxed);
            if (need > durable_lsn()) {
                if (!keep_dirty) {  // its entries' heap WAL first (the caller flushes and retries)
                    h.unlock_unchanged();
                    throw NeedDurable(need);
                }
                g.uncovered = need;  // an insert's split: wb_split_dirty, or the caller throws NeedDurable
            }
        }
        g.t = this;
        g.a = a;
        g.frame = f;  // from here on the guard unlocks it
        if (h.dirty.load(std::memory_order_relaxed) && !keep_dirty) {
            Node img;
            R.copy_unswizzled(f, img);
            try {
                // (a short wait under the latch, kLatchedWriteBackMs: a live
                // holder of the remote lock -- the latch goes, then again)
                write_back_node(io_, a, img, Deadline(std::min(opts_.op_timeout_ms, kLatchedWriteBackMs)));
            } catch (const Error& e) {
                if (e.code() != ErrorCode::kTimeout) throw;  // (the guard unlocks the frame)
                busy = std::string(" (its write-back: ") + e.what() + ")";
                g.t = nullptr;
                g.frame = cache::kNoFrame;
                h.unlock_unchanged();
                backoff(attempt++);
                continue;
            }
            R.mark_clean(f);
        }
        return;
    }
}

template <class L>
BTreeT<L>::WbGuard::~WbGuard() {
    if (t && frame != cache::kNoFrame && splits && std::uncaught_exceptions() > 0 &&
        t->cache_->region().header(frame).dirty.load(std::memory_order_relaxed)) {
        // (the remote lock is released by now: Locks lives inside the guard's scope)
        t->wb_settle_lost_split(a, *this, t->deadline());
        if (!t) return;  // settled: the frame holds what remote memory holds, or stays dirty
    }
    BTreeT* owner = t;
    GAddr addr = a;
    bool had_frame = t && frame != cache::kNoFrame;
    release(nullptr);
    if (had_frame && std::uncaught_exceptions() > 0) {
        try {
            owner->cache_drop(addr);
        } catch (...) {
        }
    }
}

template <class L>
void BTreeT<L>::WbGuard::release(const Node* published) {
    if (!t) return;
    cache::CacheRegion& R = t->cache_->region();
    if (frame != cache::kNoFrame) {
        cache::FrameHeader& h = R.header(frame);
        if (published) {
            // Built from the frame's image (dirty changes included) or after
            // they were written back: remote memory now holds all of it.
            std::memcpy(static_cast<void*>(R.node(frame)), published, kNodeSize);
            R.mark_clean(frame);
            h.unlock();
        } else {
            h.unlock_unchanged();
        }
    } else if (marker) {
        t->cache_->abort_io(a);
    }
    t = nullptr;
    frame = cache::kNoFrame;
    marker = false;
}

template <class L>
void BTreeT<L>::WbGuard::release_dirty(const Node& img, uint64_t lsn) {
    if (!t || frame == cache::kNoFrame) return;
    cache::FrameHeader& h = t->cache_->region().header(frame);
    std::memcpy(static_cast<void*>(t->cache_->region().node(frame)), &img, kNodeSize);
    if (lsn > h.lsn.load(std::memory_order_relaxed)) h.lsn.store(lsn, std::memory_order_relaxed);
    h.unlock();  // (still dirty: dirty_since unchanged, the changes were logged after it)
    t = nullptr;
    frame = cache::kNoFrame;
    marker = false;
}

template class BTreeT<FixedLayout>;
template class BTreeT<SlottedLayout>;

}  // namespace dex::tree
