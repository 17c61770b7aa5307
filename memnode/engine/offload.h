// Offloaded index operations (DEX 6; src/README.md "Offloading"): the memory
// node finishes a traversal that a compute server started, on its own pool,
// with the same remote locking protocol as the compute servers use (a writer
// CASes the node's lock word, publishes body then lock word; readers validate
// lock bit, version and checksum), so offloaded and one-sided operations on
// the same nodes can run at the same time.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "net/protocol.h"

namespace dex::memnode {

// Executes `req` on `pool` (pool_bytes long) for the connection `client_id`
// (the remote-lock owner id used while the leaf is locked) and appends the
// OffloadReply (and, when done and `with_image`, the leaf image: as read, or
// as published) to `resp`. Never throws for bad tree contents (answers
// kOffloadRestart); throws std::invalid_argument for a malformed request.
// OFFLOAD_BATCH runs it once per sub-request, without images.
// The checks execute_offload() starts with (known kind, journal slot inside
// the pool): throws std::invalid_argument. OFFLOAD_BATCH runs them on every
// sub-request before executing any, so a malformed batch changes nothing.
void check_offload_request(uint64_t pool_bytes, const net::OffloadRequest& req);

// OFFLOAD_SPLIT (engine/offload_split.cpp): what an insert that finds its
// leaf full needs to split it here. `alloc` hands out one node-sized block of
// the tree's namespace on this node (0: out of space, or no such namespace --
// the insert then answers kOffloadNeedsSmo and changes nothing); `parent` is
// the pool offset of the leaf's parent the request names (0: none; a descent
// that passes a level-1 node uses that one instead).
// `batch_tail` (OFFLOAD_BATCH_SPLIT): a split answers only its OffloadReply
// (no images) and fills *batch_tail, which the batch appends after all replies.
// `bytes_tail` (OFFLOAD_BYTES_BATCH_SPLIT): the same for a slotted tree.
// `may_split_under` (batches): whether a full leaf under this parent (pool
// offset, 0: unknown) may split here -- a batch stops splitting under a
// parent that could not take a downlink, since every such sibling costs the
// compute side a one-sided parent insert, where a leaf sent back splits
// after the compute side split the parent, and is linked here again.
// `*used_parent` (if set) is told the parent a split tried.
// `split_parent` (OffloadParentSplitExt, kHelloSplitParent; single splits
// only): a parent too full for the downlink is split here as well, its new
// sibling allocated by `parent_alloc` (the request's parent spare first) and
// linked into `grandparent` (pool offset, 0: unknown) when that is simple;
// the reply then carries an OffloadParentSplitTail, whose spare
// `next_parent_spare` says.
struct SplitContext {
    std::function<uint64_t()> alloc;
    uint64_t parent = 0;
    bool split_parent = false;
    uint64_t grandparent = 0;
    std::function<uint64_t()> parent_alloc;
    std::function<uint64_t()> next_parent_spare;
    net::OffloadBatchSplitTail* batch_tail = nullptr;
    net::OffloadBytesBatchSplitTail* bytes_tail = nullptr;
    std::function<bool(uint64_t parent)> may_split_under;
    uint64_t* used_parent = nullptr;
};

// `split`: the request is an OFFLOAD_SPLIT or an OFFLOAD_BATCH_SPLIT item
// (insert only, fixed layout); null for OFFLOAD and OFFLOAD_BATCH, which
// answer kOffloadNeedsSmo at a full leaf.
void execute_offload(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id, const net::OffloadRequest& req,
                     std::vector<uint8_t>& resp, bool with_image = true, const SplitContext* split = nullptr);

// OFFLOAD_SPLIT_IMAGE (net/protocol.h; src/README.md "Write-back mode"):
// `payload` is kOffloadSplitImageRequest bytes (the engine checked the
// length). The leaf at req.start is locked at the version remote memory holds
// (never below the image's), replaced by the image with the key inserted,
// and split as OFFLOAD_SPLIT splits (`split`: its allocator and the parent
// from the request). Answers as OFFLOAD_SPLIT; kOffloadRestart (nothing
// changed) when the leaf is locked, changed meanwhile or not this tree's leaf.
// Throws std::invalid_argument for a malformed request or image.
void execute_offload_split_image(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id, const uint8_t* payload,
                                 const SplitContext& split, std::vector<uint8_t>& resp);
// OFFLOAD_BYTES_SPLIT_IMAGE: the same for a slotted leaf; `v` a checked
// OFFLOAD_BYTES insert (check_offload_bytes), `image_ext` its OffloadImageExt
// and the image after it. Throws std::invalid_argument for a request or an
// image that is not a slotted leaf of the tree.
void execute_offload_bytes_split_image(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id,
                                       const net::OffloadBytesView& v, const uint8_t* image_ext,
                                       const SplitContext& split, std::vector<uint8_t>& resp);

// OFFLOAD_DIRTY_SPLIT (net/protocol.h; src/README.md "Splitting a dirty
// leaf"): `payload` is kOffloadDirtySplitRequest bytes (the engine checked
// the length). The leaf at req.start -- at the request's version or newer,
// with its fences and right link -- is locked, what it holds split at the request's
// key (tree::split_image_at), the upper half written to `sibling` (a block of
// the tree's namespace the engine checked; 0: none, nothing changes), the
// lower half published, and the sibling linked into the request's parent when
// that is simple. Answers as OFFLOAD_SPLIT; kOffloadRestart (nothing changed)
// otherwise. Throws std::invalid_argument for a malformed request.
void execute_offload_dirty_split(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id, const uint8_t* payload,
                                 uint64_t sibling, std::vector<uint8_t>& resp);
// OFFLOAD_BYTES_DIRTY_SPLIT: the same for a slotted leaf. check_ throws
// std::invalid_argument for a malformed payload (lengths, flags), reading
// nothing beyond `len`, and returns its header; execute_ takes only a
// checked payload.
net::OffloadBytesDirtySplitHeader check_offload_bytes_dirty_split(const uint8_t* payload, size_t len);
void execute_offload_bytes_dirty_split(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id,
                                       const uint8_t* payload, uint64_t sibling, std::vector<uint8_t>& resp);

// OFFLOAD_BYTES (net/protocol.h): the same operation on a tree of slotted
// nodes, the key and journal record given as bytes. check_offload_bytes()
// throws std::invalid_argument for a malformed payload (net::
// parse_offload_bytes) or a journal slot outside the pool, reading nothing
// beyond `len`, and returns the parsed request (pointing into `payload`).
// execute_offload_bytes() takes only such a checked request and answers as
// execute_offload() does. A node of the fixed layout on the way is never
// searched as slotted, nor a slotted one by OFFLOAD: either mismatch answers
// kOffloadRestart.
net::OffloadBytesView check_offload_bytes(uint64_t pool_bytes, const uint8_t* payload, size_t len);
// `split` (OFFLOAD_BYTES_SPLIT): an insert into a full slotted leaf splits it
// here as OFFLOAD_SPLIT splits a fixed one (null: kOffloadNeedsSmo).
void execute_offload_bytes(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id,
                           const net::OffloadBytesView& checked, std::vector<uint8_t>& resp, bool with_image = true,
                           const SplitContext* split = nullptr);

// OFFLOAD_BYTES_BATCH (offload_bytes_batch.cpp): every sub-request checked
// as check_offload_bytes() does (net::parse_offload_bytes_batch splits them)
// before the first runs: throws std::invalid_argument for a malformed batch,
// so that it changes nothing. The engine then runs execute_offload_bytes()
// on each, without images.
std::vector<net::OffloadBytesView> check_offload_bytes_batch(uint64_t pool_bytes, const uint8_t* payload,
                                                             size_t len);

// OFFLOAD_KILL (offload_kill.cpp): check_offload_kill() throws
// std::invalid_argument for a malformed request (net::parse_offload_kill) or
// a leaf offset outside the pool; execute_offload_kill() takes only a checked
// one and answers as net/protocol.h says.
net::OffloadKillView check_offload_kill(uint64_t pool_bytes, const uint8_t* payload, size_t len);
void execute_offload_kill(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id, const net::OffloadKillView& v,
                          std::vector<uint8_t>& resp);

// OFFLOAD_BATCH_SPLIT (offload_batch_split.cpp): the whole payload checked
// (framing, kinds, journal slots) before any item runs -- throws
// std::invalid_argument for a malformed batch, which then changes nothing --,
// then each item executed as its own OFFLOAD_SPLIT would be, without images:
// `alloc(ns)` hands out one node-sized block of namespace ns (0: none).
// Appends the n replies, then the tails of the split ones, to `resp`.
net::OffloadBatchSplitHeader check_offload_batch_split(uint64_t pool_bytes, const uint8_t* payload, size_t len);
void execute_offload_batch_split(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id, const uint8_t* payload,
                                 const std::function<uint64_t(uint64_t ns)>& alloc, std::vector<uint8_t>& resp);

// OFFLOAD_BYTES_BATCH_SPLIT (offload_batch_split.cpp): the same for a slotted
// tree; check_offload_bytes_batch_split() checks every item as
// check_offload_bytes() does (net::parse_offload_bytes_batch_split splits
// them) and returns the parsed items, which execute_ takes.
std::vector<net::OffloadBytesBatchSplitView> check_offload_bytes_batch_split(uint64_t pool_bytes,
                                                                             const uint8_t* payload, size_t len,
                                                                             net::OffloadBatchSplitHeader& h);
void execute_offload_bytes_batch_split(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id,
                                       const net::OffloadBatchSplitHeader& h,
                                       const std::vector<net::OffloadBytesBatchSplitView>& items,
                                       const std::function<uint64_t(uint64_t ns)>& alloc, std::vector<uint8_t>& resp);

}  // namespace dex::memnode
