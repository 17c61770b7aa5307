// Keeping this compute server's cached copies exact while the tree changes
// them remotely (src/README.md "Node cache", writes): updates after a
// publish, frames held across the publish of a structure modification, stale
// admissions, drops.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "cache/cache.h"
#include "common/stats.h"
#include "tree/btree.h"
#include "tree/write_back_nodes.h"

namespace dex::tree {

namespace {
std::atomic<TestHook> g_test_hook{nullptr};
}  // namespace

void set_test_hook(TestHook hook) { g_test_hook.store(hook, std::memory_order_release); }

void test_point(const char* point) {
    TestHook h = g_test_hook.load(std::memory_order_acquire);
    if (h) h(point);
}

template <class L>
bool BTreeT<L>::install_locked(uint32_t f, const Node& fresh, const std::vector<uint32_t>& held) {
    cache::CacheRegion& R = cache_->region();
    Node* n = R.node(f);
    if (n->tree_id != fresh.tree_id || n->level != fresh.level) return false;  // a previous life of this memory
    if (n->body_version >= fresh.body_version) return true;                     // already as new (monotonic)
    // Children may move between nodes (splits, merges, migrations): a child
    // the fresh image no longer holds is unswizzled; one it still holds keeps
    // its frame, swizzled at its new slot -- a split's new separator replaced
    // the parent of some 60 leaves, and each unswizzled one cost the next
    // descent to it a mapping-table lookup and the parent's exclusive lock to
    // swizzle it again (a bulk load: about one per row). The child's `parent`
    // stays f throughout (we hold f's lock; an evicter looks the child up in
    // f's slots under it). A child frame the caller holds locked itself is
    // unswizzled without taking its lock.
    // (Stop once the count is 0, as unswizzle_all does: a stale copy of a
    // swizzled pointer may linger past `count` after a shift and must not be
    // counted twice.)
    struct Kept {
        uint32_t slot, frame;
    };
    Kept kept[kMaxKeptSwizzles];
    size_t nkept = 0;
    uint32_t search_from = 0;
    if (n->level > 0) {
        const uint32_t slots = cache::CacheRegion::child_slots(n);
        for (uint32_t i = 0; i < slots && R.header(f).swizzled_children.load(std::memory_order_acquire) > 0; i++) {
            GAddr c = cache::CacheRegion::load_child(n, i);
            if (!gaddr_is_swizzled(c)) continue;
            uint32_t cf = cache::swizzled_frame(c);
            cache::FrameHeader& ch = R.header(cf);
            const GAddr g = ch.gaddr.load(std::memory_order_relaxed);
            const bool held_by_caller = std::find(held.begin(), held.end(), cf) != held.end();
            const int at = held_by_caller || nkept == kMaxKeptSwizzles ? -1 : child_slot_of(fresh, g, search_from);
            if (at < 0 && !held_by_caller) {
                R.unswizzle(f, static_cast<uint16_t>(i));
                continue;
            }
            cache::CacheRegion::store_child(n, i, g);
            R.header(f).swizzled_children.fetch_sub(1, std::memory_order_relaxed);
            if (at >= 0)
                kept[nkept++] = Kept{static_cast<uint32_t>(at), cf};
            else
                ch.parent.store(cache::kNoFrame, std::memory_order_relaxed);
        }
    }
    std::memcpy(static_cast<void*>(n), &fresh, kNodeSize);
    R.header(f).level.store(fresh.level, std::memory_order_relaxed);
    for (size_t k = 0; k < nkept; k++) {
        cache::CacheRegion::store_child(n, kept[k].slot, cache::swizzled_ref(kept[k].frame));
        R.header(f).swizzled_children.fetch_add(1, std::memory_order_relaxed);
    }
    return true;
}

// The slot of an inner image whose child is g, or -1. Searched from `from`
// on, then from the start: children keep their order across splits (a new
// one comes in between), so asking in slot order costs one pass in all.
template <class L>
int BTreeT<L>::child_slot_of(const Node& inner, GAddr g, uint32_t& from) {
    if (inner.level == 0 || gaddr_is_swizzled(g)) return -1;
    const uint32_t c = cache::CacheRegion::entries_in_use(&inner);
    for (uint32_t k = 0; k < c; k++) {
        const uint32_t j = (from + k) % c;
        if (cache::CacheRegion::load_child(&inner, j) == g) {
            from = j + 1;
            return static_cast<int>(j);
        }
    }
    return -1;
}

template <class L>
void BTreeT<L>::cache_update(GAddr a, const Node& fresh) {
    if (!cache_) return;
    cache::CacheRegion& R = cache_->region();
    unsigned spin = 0;
    for (;;) {
        uint32_t f = R.table().lookup(a);
        if (f == cache::kNoFrame) return;
        if (f == cache::MappingTable::kIoInProgress) {
            // Someone is admitting `a`; its read may predate our publish. Its
            // image must not be installed: no waiting (an interrupt or a retry
            // bound could end a wait and let it in).
            if (R.table().mark_stale(a)) return;
            continue;  // it was just installed or dropped: look again
        }
        cache::FrameHeader& h = R.header(f);
        h.lock();  // we hold no other frame lock
        if (h.gaddr.load(std::memory_order_relaxed) != a || h.get_state() == cache::FrameState::kFree) {
            h.unlock_unchanged();  // evicted / reused meanwhile: look again
            cache::spin_backoff(spin);
            continue;
        }
        if (!install_locked(f, fresh, {})) {
            h.unlock_unchanged();
            cache_drop(a);  // a previous life of this memory
            return;
        }
        h.unlock();
        return;
    }
}

template <class L>
void BTreeT<L>::cache_drop(GAddr a) {
    if (cache_) drop_cached_node(*cache_, a);
}

void drop_cached_node(cache::Cache& c, GAddr a) {
    cache::CacheRegion& R = c.region();
    for (int round = 0; round < 100; round++) {
        uint32_t f = R.table().lookup(a);
        if (f == cache::kNoFrame) return;
        if (f == cache::MappingTable::kIoInProgress) {
            if (R.table().mark_stale(a)) return;  // its image will not be installed
            continue;
        }
        cache::FrameHeader& h = R.header(f);
        if (h.swizzled_children.load(std::memory_order_acquire) > 0) {
            h.lock();
            bool changed = h.gaddr.load(std::memory_order_relaxed) == a && R.unswizzle_all(f) > 0;
            if (changed) h.unlock();  // readers holding old swizzled pointers must restart
            else h.unlock_unchanged();
        }
        if (c.invalidate(a)) return;
        // A dirty frame that could not be written back (its WAL is not
        // durable yet, W6) is the newest image of the node (W2): it stays,
        // readable. (Callers that free the node clean its frame first.)
        if (h.dirty.load(std::memory_order_relaxed) && h.gaddr.load(std::memory_order_acquire) == a) return;
        unsigned spin = 0;
        cache::spin_backoff(spin);
    }
    // Still pinned or busy: make its image unreadable instead (readers fail its
    // tree-id check and re-read the path remotely, replacing it) -- never a
    // dirty one's, whose changes remote memory does not hold.
    uint32_t f = R.table().lookup(a);
    if (f == cache::kNoFrame || f == cache::MappingTable::kIoInProgress) return;
    cache::FrameHeader& h = R.header(f);
    h.lock();
    if (h.gaddr.load(std::memory_order_relaxed) == a && !h.dirty.load(std::memory_order_relaxed)) {
        R.node(f)->tree_id = 0;
        h.unlock();
    } else {
        h.unlock_unchanged();
    }
}

template <class L>
void BTreeT<L>::cache_refresh_changed(GAddr a, const Node& img, const Deadline&) {
    if (!cache_) return;
    // The image the memory node published replaces a cached copy exactly as
    // after a one-sided write: an admission in progress is marked stale (its
    // read may predate the change), and versions never go backwards. An image
    // that is not a sealed leaf of this tree is a protocol error, not something
    // to cache.
    if (img.tree_id != tree_id_ || img.level != 0 || !snapshot_valid(img))
        throw Error(ErrorCode::kProtocol, "OFFLOAD: memory node returned an invalid leaf image for " + hex_addr(a));
    // Only the written entry changed, and its transaction has not committed
    // yet: logging after the memory node's publish is early enough.
    log_changed(a);
    cache_update(a, img);
}

template <class L>
void BTreeT<L>::FrameHold::hold(GAddr a, uint32_t skip) {
    if (!t_.cache_) return;
    cache::CacheRegion& R = t_.cache_->region();
    unsigned spin = 0;
    for (;;) {
        uint32_t f = R.table().lookup(a);
        if (f == cache::kNoFrame) return;  // an admission from now on reads after our publish (we hold a's remote lock)
        if (f == cache::MappingTable::kIoInProgress) {
            if (R.table().mark_stale(a)) return;
            continue;
        }
        if (f == skip || std::find(frames_.begin(), frames_.end(), f) != frames_.end()) return;
        cache::FrameHeader& h = R.header(f);
        h.lock();  // parent before child: callers hold in level-descending order
        if (h.gaddr.load(std::memory_order_relaxed) != a || h.get_state() == cache::FrameState::kFree) {
            h.unlock_unchanged();
            cache::spin_backoff(spin);
            continue;
        }
        held_.push_back({a, f});
        frames_.push_back(f);
        return;
    }
}

template <class L>
bool BTreeT<L>::FrameHold::try_hold(GAddr a) {
    if (!t_.cache_) return false;
    cache::CacheRegion& R = t_.cache_->region();
    const uint32_t f = R.table().lookup(a);
    if (f == cache::kNoFrame || f == cache::MappingTable::kIoInProgress) return false;
    if (std::find(frames_.begin(), frames_.end(), f) != frames_.end()) return true;
    cache::FrameHeader& h = R.header(f);
    if (!h.try_lock()) return false;
    if (h.gaddr.load(std::memory_order_relaxed) != a || h.get_state() == cache::FrameState::kFree) {
        h.unlock_unchanged();
        return false;
    }
    held_.push_back({a, f});
    frames_.push_back(f);
    return true;
}

template <class L>
void BTreeT<L>::FrameHold::install(GAddr a, const Node& img) {
    for (size_t i = 0; i < held_.size(); i++) {
        if (held_[i].a != a) continue;
        uint32_t f = held_[i].frame;
        cache::FrameHeader& h = t_.cache_->region().header(f);
        bool same_life = t_.install_locked(f, img, frames_);
        held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
        frames_.erase(std::find(frames_.begin(), frames_.end(), f));
        if (same_life) {
            h.unlock();
        } else {
            h.unlock_unchanged();
            t_.cache_drop(a);
        }
        return;
    }
}

template <class L>
void BTreeT<L>::FrameHold::release(GAddr a) {
    for (size_t i = 0; i < held_.size(); i++) {
        if (held_[i].a != a) continue;
        const uint32_t f = held_[i].frame;
        held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
        frames_.erase(std::find(frames_.begin(), frames_.end(), f));
        t_.cache_->region().header(f).unlock_unchanged();
        return;
    }
}

template <class L>
BTreeT<L>::FrameHold::~FrameHold() {
    if (held_.empty()) return;
    // The publish did not complete (or was not installed): the remote node may
    // be newer than the frame. Make the image unreadable -- readers fail its
    // tree-id check and re-read the path remotely -- then drop it.
    cache::CacheRegion& R = t_.cache_->region();
    for (const Held& x : held_) {
        R.node(x.frame)->tree_id = 0;
        R.header(x.frame).unlock();
    }
    for (const Held& x : held_) {
        try {
            t_.cache_drop(x.a);
        } catch (...) {
        }
    }
}

template class BTreeT<FixedLayout>;
template class BTreeT<SlottedLayout>;

}  // namespace dex::tree
