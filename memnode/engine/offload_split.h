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
template <class TL>
bool link_in_parent(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id, uint32_t tree_id, uint64_t parent_off,
                    typename TL::KeyRef sep, GAddr sibling, Node& pimg);

}  // namespace dex::memnode
