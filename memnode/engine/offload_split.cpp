#include "engine/offload_split.h"

#include <algorithm>
#include <cstring>

#include "net/protocol.h"
#include "tree/layout.h"
#include "tree/node_format.h"

namespace dex::memnode {

void publish_node(uint8_t* pool, uint64_t off, const Node& n) {
    std::memcpy(pool + off + 8, reinterpret_cast<const uint8_t*>(&n) + 8, tree::used_bytes(n) - 8);
    __atomic_store_n(lock_word(pool, off), n.lock, __ATOMIC_RELEASE);
}

bool sibling_block_ok(uint64_t pool_bytes, uint64_t na) {
    return na >= net::kPoolReservedBytes && na % 8 == 0 && na <= pool_bytes && pool_bytes - na >= kNodeSize;
}

void publish_sibling(uint8_t* pool, uint64_t na, Node& r) {
    // Above the block's previous life (no ABA, no cached copy looks newer):
    // the rule BTree::fresh_version applies to a block the compute side allocates.
    const uint64_t prev_lock = __atomic_load_n(lock_word(pool, na), __ATOMIC_ACQUIRE);
    uint64_t prev_body;
    std::memcpy(&prev_body, pool + na + 16, sizeof prev_body);
    tree::seal_node(r, fresh_version_after(prev_lock, prev_body));
    // Step 1: the sibling, complete before the leaf points at it. Nobody
    // reaches the new node before step 2; a reader still holding the
    // block's previous life sees a new version (or a torn image) and restarts.
    publish_node(pool, na, r);
}

template <class TL>
bool split_full_leaf(uint8_t* pool, uint64_t pool_bytes, uint16_t node_id, typename TL::KeyRef key, Node& n,
                     const SplitContext& ctx, GAddr& sibling, Node& r) {
    // The layout's own split (the compute side's), on a copy: a slotted
    // leaf's may not fit (an entry too long), which changes nothing.
    Node left = n;
    typename TL::Key sep;
    if (!TL::split(left, TL::lower_bound(n, key), key, 0, r, sep)) return false;
    // Allocated before anything is written, as on the compute side: running
    // out of space changes nothing (the compute side then splits, and reports
    // the error if it cannot allocate either).
    const uint64_t na = ctx.alloc ? ctx.alloc() : 0;
    if (!sibling_block_ok(pool_bytes, na)) return false;
    publish_sibling(pool, na, r);
    sibling = make_gaddr(node_id, na);
    left.right = sibling;
    std::memcpy(static_cast<void*>(&n), &left, sizeof(Node));
    return true;
}

namespace {

// The checks link_in_parent and split_parent share: `p`, read at a level
// `level` node of tree `tree_id`, covers `sep` (B-link: it does not if it
// split meanwhile), and `sep` goes at *pos, after its first separator and not
// there already.
template <class TL>
bool parent_takes(const Node& p, uint32_t tree_id, int level, typename TL::KeyRef sep, size_t* pos) {
    if (p.tree_id != tree_id || p.level != level || !TL::layout_ok(p) || p.is_deleted()) return false;
    if (TL::compare(TL::low(p), sep) > 0 || !(TL::high_is_pos_inf(p) || TL::compare(sep, TL::high(p)) < 0))
        return false;
    const int at = TL::child_index(p, p.count, sep, false) + 1;
    if (at <= 0) return false;  // below its first separator: not a sane parent of this child
    *pos = static_cast<size_t>(at);
    return !TL::equal(TL::sep(p, *pos - 1), sep);  // already there
}

// The writer protocol's lock: (v,_,0) -> (v,me,1) at the version `p` was read at.
bool lock_at(uint8_t* pool, uint64_t off, const Node& p, uint64_t client_id) {
    uint64_t expected = make_lock_word(p.body_version, 0, false);
    return __atomic_compare_exchange_n(lock_word(pool, off), &expected,
                                       make_lock_word(p.body_version, client_id, true), false, __ATOMIC_SEQ_CST,
                                       __ATOMIC_SEQ_CST);
}

}  // namespace

template <class TL>
bool link_in_parent(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id, uint32_t tree_id, uint64_t parent_off,
                    typename TL::KeyRef sep, GAddr sibling, Node& p, int level) {
    // Best effort: a parent that is locked or changes under us is left to the
    // compute side's insert_parent, which waits and moves right as needed.
    for (int attempt = 0; attempt < 4; attempt++) {
        if (!read_pool_node(pool, pool_bytes, parent_off, p)) return false;
        size_t pos = 0;
        if (!parent_takes<TL>(p, tree_id, level, sep, &pos)) return false;
        Node q = p;
        if (!TL::insert_sep(q, pos, sep, sibling)) return false;  // full: split_parent, or the compute side
        // Writer protocol; the child is unlocked already: lock order child
        // before parent holds trivially.
        if (!lock_at(pool, parent_off, p, client_id)) continue;  // changed or locked since the read: read it again
        tree::seal_node(q, p.body_version + 1);
        publish_node(pool, parent_off, q);
        p = q;
        return true;
    }
    return false;
}

template <class TL>
bool split_parent(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id, uint32_t tree_id, uint16_t node_id,
                  uint64_t parent_off, uint64_t gp_off, typename TL::KeyRef sep, GAddr sibling,
                  const SplitContext& ctx, ParentSplit& out) {
    for (int attempt = 0; attempt < 4; attempt++) {
        Node p;
        if (!read_pool_node(pool, pool_bytes, parent_off, p)) return false;
        size_t pos = 0;
        if (!parent_takes<TL>(p, tree_id, 1, sep, &pos)) return false;
        Node q = p;
        if (TL::insert_sep(q, pos, sep, sibling)) return false;  // room after all: the compute side links it
        q = p;
        Node r;
        typename TL::Key up;
        if (!TL::split(q, pos, sep, sibling, r, up)) return false;  // slotted halves that do not fit
        if (!lock_at(pool, parent_off, p, client_id)) continue;
        // Allocated under the lock, so that a lost race leaks no block; out
        // of space changes nothing (the compute side's split reports it).
        const uint64_t na = ctx.parent_alloc ? ctx.parent_alloc() : ctx.alloc ? ctx.alloc() : 0;
        if (!sibling_block_ok(pool_bytes, na)) {
            __atomic_store_n(lock_word(pool, parent_off), make_lock_word(p.body_version, 0, false), __ATOMIC_RELEASE);
            return false;
        }
        // Step 1 (the upper half, unreachable until the lower half points at
        // it), then step 2: the lower half with the right link, unlocked.
        publish_sibling(pool, na, r);
        q.right = make_gaddr(node_id, na);
        tree::seal_node(q, p.body_version + 1);
        publish_node(pool, parent_off, q);
        out.parent = q;
        out.psibling = q.right;
        out.psib = r;
        // Step 3 one level up, no lock held: as for the leaf's sibling.
        out.gp_linked = gp_off && link_in_parent<TL>(pool, pool_bytes, client_id, tree_id, gp_off, TL::low(out.psib),
                                                     out.psibling, out.gp, 2);
        return true;
    }
    return false;
}

template bool split_full_leaf<tree::FixedLayout>(uint8_t*, uint64_t, uint16_t, const EntryKey&, Node&,
                                                 const SplitContext&, GAddr&, Node&);
template bool split_full_leaf<tree::SlottedLayout>(uint8_t*, uint64_t, uint16_t, std::string_view, Node&,
                                                   const SplitContext&, GAddr&, Node&);
template bool link_in_parent<tree::FixedLayout>(uint8_t*, uint64_t, uint64_t, uint32_t, uint64_t, const EntryKey&,
                                                GAddr, Node&, int);
template bool link_in_parent<tree::SlottedLayout>(uint8_t*, uint64_t, uint64_t, uint32_t, uint64_t,
                                                  std::string_view, GAddr, Node&, int);
template bool split_parent<tree::FixedLayout>(uint8_t*, uint64_t, uint64_t, uint32_t, uint16_t, uint64_t, uint64_t,
                                              const EntryKey&, GAddr, const SplitContext&, ParentSplit&);
template bool split_parent<tree::SlottedLayout>(uint8_t*, uint64_t, uint64_t, uint32_t, uint16_t, uint64_t, uint64_t,
                                                std::string_view, GAddr, const SplitContext&, ParentSplit&);

}  // namespace dex::memnode
