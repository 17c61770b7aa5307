// Kills the extension deferred until every hot standby replayed their
// conflict horizon (src/README.md "Dead-entry hints", K9), taken back
// present-only, without a frame stamp or hold. The leaf has usually changed
// since the batch was read: entries were removed, inserted, or moved right by
// a split -- a deferred bottom-up removal's leaf is split by the very insert
// whose pass queued it. The entries still in the index go, wherever they are
// now.
#include <algorithm>
#include <utility>
#include <vector>

#include "cache/cache.h"
#include "common/stats.h"
#include "tree/btree.h"
#include "tree/btree_internal.h"

namespace dex::tree {

// This server's frame of the leaf, when it has one, is the leaf's newest
// image (a write-back frame by W2; a write-through one is updated after each
// of this writer's publishes, so a lagging copy only costs a round trip or
// loses a hint). From it:
//  - entries at or above its high fence were moved right by a split since:
//    they go as VACUUM's deletes go (remove(): descended to by key);
//  - entries it covers but lacks are gone already: no round trip;
//  - the rest go from this leaf: a write-through tree's at the version found
//    now (remove_at), a write-back tree's as VACUUM's deletes (in place, or
//    written through with the frame's image while write-back is paused for a
//    standby, W18; logged for redo either way).
// Without a frame all are tried at this leaf (a write-back tree: by key).
template <class L>
uint64_t BTreeT<L>::remove_present(GAddr leaf, const Key* keys, size_t n, bool bottom_up) {
    Node img;
    const bool cached = cached_leaf_copy(leaf, img);
    std::vector<Key> here, moved;
    uint64_t gone = 0;
    for (size_t i = 0; i < n; i++) {
        if (cached && !L::high_is_pos_inf(img) && L::compare(keys[i], L::high(img)) >= 0)
            moved.push_back(keys[i]);
        else if (!cached || has_entry(img, L::lower_bound(img, keys[i]), keys[i]))
            here.push_back(keys[i]);
        else
            gone++;
    }
    if (gone) Stats::add(stats().kills_skipped, gone);
    // remove() counts nothing as a kill: count its part here. A write-back
    // tree logs the deletes, and a record of fewer deletes than entries given
    // says "maybe not written through" (W11): a standby's scan of that range
    // would wait for the next write-back although write-back is paused. So
    // only entries still in the index are given (contains(): this writer's
    // newest image) unless the leaf's cached image just showed them.
    auto by_key = [&](std::vector<Key> v, bool known_present) {
        const size_t given = v.size();
        if (wb_ && !known_present)
            v.erase(std::remove_if(v.begin(), v.end(), [&](const Key& k) { return !contains(k); }), v.end());
        const uint64_t d = v.empty() ? 0 : remove(v.data(), v.size());
        Stats::add(bottom_up ? stats().bottomup_removed : stats().kills, d);
        if (d < given) Stats::add(stats().kills_skipped, given - d);
        return d;
    };
    uint64_t removed = 0;
    if (!here.empty())
        removed += wb_ ? by_key(std::move(here), cached) : remove_at(leaf, 0, here.data(), here.size(), bottom_up, {});
    if (!moved.empty()) {
        Stats::add(stats().kills_moved, moved.size());
        removed += by_key(std::move(moved), false);
    }
    return removed;
}

template class BTreeT<FixedLayout>;
template class BTreeT<SlottedLayout>;

}  // namespace dex::tree
