// The memory node's own leaf split (OFFLOAD_SPLIT, src/README.md "Offloading",
// memory-node splits): an offloaded insert that finds its leaf full splits it
// here instead of answering kOffloadNeedsSmo, in the order and with the
// invariants of the compute side's split (src/tree/split_merge.cpp
// split_leaf + insert_parent): sibling written, leaf published with its right
// link, then -- with no lock held -- the downlink into the parent if that is
// simple. Internal to the engine (offload.cpp calls it).
#pragma once
#include <cstdint>

#include "common/gaddr.h"
#include "engine/offload.h"
#include "tree/key.h"
#include "tree/layout.h"
#include "tree/node_layout.h"

namespace dex::memnode {

// The lock word of the node at pool offset `off` (its first 8 bytes), for
// the __atomic builtins.
inline uint64_t* lock_word(uint8_t* pool, uint64_t off) { return reinterpret_cast<uint64_t*>(pool + off); }

// A validated snapshot of the node at `off` (reader protocol; offload.cpp).
// False: still locked or torn after many attempts, or out of bounds.
bool read_pool_node(uint8_t* pool, uint64_t pool_bytes, uint64_t off, Node& out);

// Steps 1 and 2 up to the publish, for tree layout TL (tree::FixedLayout or
// tree::SlottedLayout: tree/layout.h, the compute side's). The caller holds
// the lock of the full leaf image `n` (at `off`, node id `node_id`) and
// found no room for `key`. Splits with the layout's own split -- `key` lands
// in one half --, allocates the sibling (ctx.alloc) and writes it (upper
// half, version above its block's previous life) unlocked. `n` is left as
// the lower half with right = the sibling; the caller seals and publishes it
// (version + 1) and unlocks. False: out of space or a slotted half that does
// not fit; nothing written, `n` unchanged.
template <class TL>
bool split_full_leaf(uint8_t* pool, uint64_t pool_bytes, uint16_t node_id, typename TL::KeyRef key, Node& n,
                     const SplitContext& ctx, GAddr& sibling, Node& r);

// Publish image `n` (sealed) at `off`: body from byte 8, then the lock word --
// the order of the remote writer protocol, so a reader never accepts a mix.
void publish_node(uint8_t* pool, uint64_t off, const Node& n);

// A node-sized block at pool offset `na` inside the pool, above its reserved bytes.
bool sibling_block_ok(uint64_t pool_bytes, uint64_t na);

// Step 1 of a split: `r` sealed at a version above the block's previous life
// at `na` and written there, unlocked, before anything points at it.
void publish_sibling(uint8_t* pool, uint64_t na, Node& r);

// Step 3 when it is simple: the level-1 node at `parent_off` (tree
// `tree_id`, layout TL), if it is valid, covers `sep` and has room, takes
// (sep, sibling); locked with the writer protocol as client `client_id`,
// published at version + 1 and unlocked. True: `pimg` is the published
// parent. False: nothing changed (no such node, moved, full, locked, or the
// separator is there already) -- the compute side inserts the downlink,
// B-link readers reach the sibling through the leaf's right link meanwhile.
// `level`: the same one level up (2: a split parent's sibling into the
// grandparent).
template <class TL>
bool link_in_parent(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id, uint32_t tree_id, uint64_t parent_off,
                    typename TL::KeyRef sep, GAddr sibling, Node& pimg, int level = 1);

// What split_parent did.
struct ParentSplit {
    Node parent;            // the parent as published: its lower half, right link = psibling
    GAddr psibling = 0;     // its new right sibling (upper half)
    Node psib;
    bool gp_linked = false;  // psibling's downlink went into the grandparent
    Node gp;                 // the grandparent as published (gp_linked)
};

// Step 3 with a full parent (kHelloSplitParent): the compute side's
// split_inner + insert_parent, on this node. The level-1 node at
// `parent_off`, if valid and covering `sep` but without room for (sep,
// sibling), is locked (writer protocol), split by the layout's own split
// taking the downlink, its upper half written to a block from ctx.parent_alloc
// (version above the block's previous life) before the lower half is
// published with the new right link and unlocked; then, with no lock held,
// the upper half's downlink goes into the level-2 node at `gp_off` when that
// is simple (link_in_parent, level 2). True: the leaf's downlink is in, `out`
// says the rest. False: nothing changed (moved, locked, room after all, out
// of space, a slotted half that does not fit) -- the compute side inserts.
template <class TL>
bool split_parent(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id, uint32_t tree_id, uint16_t node_id,
                  uint64_t parent_off, uint64_t gp_off, typename TL::KeyRef sep, GAddr sibling,
                  const SplitContext& ctx, ParentSplit& out);

}  // namespace dex::memnode
