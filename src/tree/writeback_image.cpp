// Write-back crash redo of leaves logged whole (src/README.md "Write-back
// mode", redo after a crash: a checkpoint that could not write back). When a
// checkpoint cannot wait any longer for the write-back of dirty leaves (a
// hot standby that does not replay holds them back, remote memory is
// unreachable), the worker logs each dirty leaf's image instead
// (cache::WritebackRegistry::log_images), so crash redo, which starts at
// that checkpoint, still has every change remote memory lacks. Replaying
// such an image here restores its key range to the image's entries; the
// entry changes logged after it are replayed after it.
#include <vector>

#include "tree/btree.h"
#include "tree/btree_internal.h"

namespace dex::tree {

template <class L>
uint64_t BTreeT<L>::replay_leaf_image(const Node& img) {
    if (img.level != 0 || !L::layout_ok(img))
        throw Error(ErrorCode::kCorrupt, "write-back redo: a logged leaf image is not a leaf of this tree's layout");
    std::vector<Key> want;
    want.reserve(img.count);
    for (size_t i = 0; i < img.count; i++) want.emplace_back(L::entry(img, i));
    const Key lo(L::low(img)), hi(L::high(img));
    const bool to_inf = L::high_is_pos_inf(img);
    // What the tree holds in [lo, hi) now (the scan's bounds are inclusive).
    std::vector<Key> have, batch;
    auto sc = scan(lo, hi);
    while (sc->next(batch))
        for (Key& k : batch)
            if (to_inf || L::compare(k, hi) < 0) have.push_back(std::move(k));
    // Both ascending: what the image lacks goes, what the tree lacks comes.
    std::vector<Key> extra, missing;
    size_t i = 0, j = 0;
    while (i < have.size() || j < want.size()) {
        if (j == want.size() || (i < have.size() && L::compare(have[i], want[j]) < 0))
            extra.push_back(have[i++]);
        else if (i == have.size() || L::compare(want[j], have[i]) < 0)
            missing.push_back(want[j++]);
        else
            i++, j++;
    }
    uint64_t changed = extra.empty() ? 0 : remove(extra.data(), extra.size());
    for (const Key& k : missing)
        if (insert(k)) changed++;
    return changed;
}

template class BTreeT<FixedLayout>;
template class BTreeT<SlottedLayout>;

}  // namespace dex::tree
