// What the cache's write-back hooks and a standby's replay need without a
// tree (src/cluster/compute_process.cpp): dirty leaf images published
// (writeback.cpp) and a node dropped from a compute server's cache
// (cache_sync.cpp).
#pragma once
#include <cstdint>
#include <vector>

#include "cache/cache.h"
#include "common/gaddr.h"
#include "transport/remote_memory.h"
#include "tree/node_io.h"
#include "tree/node_layout.h"

namespace dex::tree {

// Write-back mode: publish `img` (the image of a dirty cached leaf; no swizzled
// pointers) at `a` with the remote-lock protocol (read, CAS, publish batch).
// Returns the published body_version.
uint64_t write_back_node(NodeIO& io, GAddr a, const Node& img, const Deadline& dl);
// How long write_back_node may wait for the leaf's remote lock while its
// caller holds the frame's latch (eviction, invalidation, wb_acquire): every
// reader of the leaf restarts meanwhile, and a writer of this server holding
// the leaf's remote lock may be spinning for that latch -- a cycle only a
// timeout ends. Long enough for a dead holder's lock to be taken over
// (NodeIO's lock_grace_ms, then one CLIENT_ALIVE); a live holder's lock
// makes the caller let the latch go (the frame stays dirty, or retries).
constexpr int kLatchedWriteBackMs = 1000;
// The write-back of many dirty leaves of memory node `node` (a flush), in two
// round trips instead of three per leaf: one batch of CASes taking each
// leaf's lock at the version its image holds, one batch publishing those it
// took (bodies, then lock words, as Locks::publish). Sound because a
// write-back leaf has one writer, this compute server, whose frame holds
// every change to it (W2, W3): remote memory is at the image's version, or --
// after a write-back through write_back_node, which does not move the frame's
// version -- at the unlocked version the failed CAS reports, tried once more.
// A leaf found locked is left to write_back_node. done[i]: leaf i published,
// *imgs[i] now sealed at its new version. Throws on transport errors (what
// was not published stays dirty; locks taken are given back where possible).
// `log` (TreeOptions::log_changes) names the leaves it is about to publish,
// while it holds their locks, as Locks::publish does: a hot standby's cache
// drops them (src/README.md "Write-back mode", standbys).
std::vector<bool> write_back_nodes(RemoteMemory& mem, uint32_t node, const std::vector<GAddr>& addrs,
                                   const std::vector<Node*>& imgs, TreeOptions::ChangeLog log = nullptr);

// Drop node `a` from a compute server's cache through handle `c` (frames of
// inner nodes unswizzled first; an admission in progress marked stale; a
// frame that cannot be dropped made unreadable). For callers without a tree:
// a standby replaying another server's changes.
void drop_cached_node(cache::Cache& c, GAddr a);

}  // namespace dex::tree
