// OFFLOAD_BATCH_SPLIT and OFFLOAD_BYTES_BATCH_SPLIT on the memory node
// (net/protocol.h; src/README.md "Offloading", batched offloaded inserts):
// OFFLOAD_BATCH (OFFLOAD_BYTES_BATCH) whose items that
// find their leaf full split it here, exactly as an OFFLOAD_SPLIT would
// (engine/offload_split.cpp, through execute_offload()), instead of
// answering kOffloadNeedsSmo. Items run one after the other with no lock held
// across them, so a later item whose key now belongs in a sibling an earlier
// one created reaches it as any B-link reader does: its start (the old leaf,
// or the parent) routes it right or down to it.
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/gaddr.h"
#include "engine/offload.h"
#include "engine/offload_split.h"

namespace dex::memnode {

net::OffloadBatchSplitHeader check_offload_batch_split(uint64_t pool_bytes, const uint8_t* payload, size_t len) {
    net::OffloadBatchSplitHeader h{};
    if (len < sizeof h) throw std::invalid_argument("OFFLOAD_BATCH_SPLIT: payload shorter than its header");
    std::memcpy(&h, payload, sizeof h);
    if (h.pad != 0) throw std::invalid_argument("OFFLOAD_BATCH_SPLIT: non-zero header padding");
    if (h.count == 0 || h.count > net::kMaxOffloadBatch ||
        len - sizeof h != static_cast<size_t>(h.count) * sizeof(net::OffloadBatchSplitItem))
        throw std::invalid_argument("OFFLOAD_BATCH_SPLIT: payload of " + std::to_string(len) + " bytes is not 1.." +
                                    std::to_string(net::kMaxOffloadBatch) + " items");
    for (uint32_t i = 0; i < h.count; i++) {
        net::OffloadBatchSplitItem it;
        std::memcpy(&it, payload + sizeof h + i * sizeof it, sizeof it);
        if (it.req.kind != net::kOffloadInsert)
            throw std::invalid_argument("OFFLOAD_BATCH_SPLIT carries inserts only (kind " +
                                        std::to_string(it.req.kind) + ")");
        if (it.split > 1 || std::any_of(it.pad, it.pad + sizeof it.pad, [](uint8_t b) { return b != 0; }))
            throw std::invalid_argument("OFFLOAD_BATCH_SPLIT: bad item flags");
        check_offload_request(pool_bytes, it.req);
    }
    return h;
}

namespace {

// What both batch splits share: `run(i, split)` executes item i (its reply
// appended to resp; `split` may split its leaf, and the item's parent is set
// in it by run) and returns its memory-node id; a split fills the tail the
// loop hands over (Tail: the layout's), which all go after the replies, then
// the parents that took downlinks, as they are after the last item.
template <class Tail, class Run>
void run_batch_split(uint8_t* pool, uint64_t pool_bytes, uint64_t ns, uint32_t count,
                     const std::function<uint64_t(uint64_t ns)>& alloc, Run run, std::vector<uint8_t>& resp) {
    std::vector<Tail> tails;
    std::vector<uint64_t> parents;  // pool offsets of the parents that took downlinks, each once
    uint16_t node = 0;
    resp.reserve(count * sizeof(net::OffloadReply));
    SplitContext split;
    split.alloc = [&alloc, ns] { return alloc(ns); };
    // Parents that could not take a downlink in this batch: their other full
    // leaves go back (SplitContext::may_split_under).
    std::vector<uint64_t> full;
    uint64_t used_parent = 0;
    split.used_parent = &used_parent;
    split.may_split_under = [&full](uint64_t p) { return std::find(full.begin(), full.end(), p) == full.end(); };
    for (uint32_t i = 0; i < count; i++) {
        Tail tail{};
        if constexpr (std::is_same_v<Tail, net::OffloadBatchSplitTail>)
            split.batch_tail = &tail;
        else
            split.bytes_tail = &tail;
        const size_t at = resp.size();
        const uint16_t item_node = run(i, split);
        if (resp[at] != net::kOffloadSplit) continue;  // OffloadReply::status is its first byte
        tails.push_back(tail);
        node = item_node;
        if (!tail.parent) full.push_back(used_parent);
        if (tail.parent && std::find(parents.begin(), parents.end(), gaddr_offset(tail.parent)) == parents.end())
            parents.push_back(gaddr_offset(tail.parent));
    }
    const uint8_t* p = reinterpret_cast<const uint8_t*>(tails.data());
    resp.insert(resp.end(), p, p + tails.size() * sizeof(Tail));
    // The parents as they are now (every downlink of this batch in), so that
    // the compute side's cached path stays complete instead of being re-read.
    net::OffloadBatchSplitImages imgs{0, 0};
    const size_t count_at = resp.size();
    resp.resize(resp.size() + sizeof imgs);
    for (uint64_t off : parents) {
        if (imgs.count == net::kMaxBatchSplitParentImages) break;  // the rest: dropped by the compute side
        Node n;
        if (!read_pool_node(pool, pool_bytes, off, n)) continue;
        const uint64_t g = make_gaddr(node, off);
        const uint8_t* q = reinterpret_cast<const uint8_t*>(&g);
        resp.insert(resp.end(), q, q + sizeof g);
        q = reinterpret_cast<const uint8_t*>(&n);
        resp.insert(resp.end(), q, q + kNodeSize);
        imgs.count++;
    }
    std::memcpy(resp.data() + count_at, &imgs, sizeof imgs);
}

}  // namespace

void execute_offload_batch_split(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id, const uint8_t* payload,
                                 const std::function<uint64_t(uint64_t ns)>& alloc, std::vector<uint8_t>& resp) {
    net::OffloadBatchSplitHeader h;
    std::memcpy(&h, payload, sizeof h);
    run_batch_split<net::OffloadBatchSplitTail>(
        pool, pool_bytes, h.ns, h.count, alloc,
        [&](uint32_t i, SplitContext& split) {
            net::OffloadBatchSplitItem it;
            std::memcpy(&it, payload + sizeof h + i * sizeof it, sizeof it);
            split.parent = it.parent;
            // (checked above: does not throw)
            execute_offload(pool, pool_bytes, client_id, it.req, resp, false, it.split ? &split : nullptr);
            return it.req.node;
        },
        resp);
}

std::vector<net::OffloadBytesBatchSplitView> check_offload_bytes_batch_split(uint64_t pool_bytes,
                                                                             const uint8_t* payload, size_t len,
                                                                             net::OffloadBatchSplitHeader& h) {
    std::vector<net::OffloadBytesBatchSplitView> v;
    if (const char* why = net::parse_offload_bytes_batch_split(payload, len, h, v)) throw std::invalid_argument(why);
    // Each sub-request once more through the single request's checks (its
    // journal slot inside the pool), on exactly its own bytes.
    for (net::OffloadBytesBatchSplitView& r : v) {
        const uint8_t* at = r.req.key - sizeof(net::OffloadBytesHeader);
        r.req = check_offload_bytes(pool_bytes, at, sizeof(net::OffloadBytesHeader) + r.req.h.key_len +
                                                        r.req.h.record_len);
    }
    return v;
}

void execute_offload_bytes_batch_split(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id,
                                       const net::OffloadBatchSplitHeader& h,
                                       const std::vector<net::OffloadBytesBatchSplitView>& items,
                                       const std::function<uint64_t(uint64_t ns)>& alloc, std::vector<uint8_t>& resp) {
    run_batch_split<net::OffloadBytesBatchSplitTail>(
        pool, pool_bytes, h.ns, static_cast<uint32_t>(items.size()), alloc,
        [&](uint32_t i, SplitContext& split) {
            const net::OffloadBytesBatchSplitView& it = items[i];
            split.parent = it.item.parent;
            execute_offload_bytes(pool, pool_bytes, client_id, it.req, resp, false, it.item.split ? &split : nullptr);
            return it.req.h.node;
        },
        resp);
}

}  // namespace dex::memnode
