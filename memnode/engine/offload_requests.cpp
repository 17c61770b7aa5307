// The memory node's offloaded RPCs (engine/offload_requests.h).
#include "engine/offload_requests.h"

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>

#include "engine/offload.h"
#include "tree/node_layout.h"

namespace dex::memnode {

using namespace dex::net;

bool OffloadRequests::handles(uint16_t op) { return is_offload_op(op); }

void OffloadRequests::exact(const FrameHeader& hdr, uint32_t want) const {
    if (hdr.payload_len != want)
        throw Fail{kStatusProtocol, op_label(hdr.op) + ": payload of " + std::to_string(hdr.payload_len) +
                                        " bytes, expected " + std::to_string(want)};
}

void OffloadRequests::handle(const FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp,
                             uint64_t client) {
    switch (hdr.op) {
        case kOpOffload: return do_offload(hdr, payload, resp, client);
        case kOpOffloadBytes: return do_offload_bytes(hdr, payload, resp, client);
        case kOpOffloadKill: return do_offload_kill(hdr, payload, resp, client);
        case kOpOffloadBatch: return do_offload_batch(hdr, payload, resp, client);
        case kOpOffloadBytesBatch: return do_offload_bytes_batch(hdr, payload, resp, client);
        case kOpOffloadSplit: return do_offload_split(hdr, payload, resp, client);
        case kOpOffloadBatchSplit: return do_offload_batch_split(hdr, payload, resp, client);
        case kOpOffloadSplitImage: return do_offload_split_image(hdr, payload, resp, client);
        case kOpOffloadDirtySplit: return do_offload_dirty_split(hdr, payload, resp, client);
        case kOpOffloadBytesSplit: return do_offload_bytes_split(hdr, payload, resp, client);
        case kOpOffloadBytesBatchSplit: return do_offload_bytes_batch_split(hdr, payload, resp, client);
        case kOpOffloadBytesDirtySplit: return do_offload_bytes_dirty_split(hdr, payload, resp, client);
        case kOpOffloadBytesSplitImage: return do_offload_bytes_split_image(hdr, payload, resp, client);
        default: throw Fail{kStatusProtocol, "unknown op " + std::to_string(hdr.op)};
    }
}

// OFFLOAD: one offloaded traversal (engine/offload.cpp).
void OffloadRequests::do_offload(const FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp,
                                 uint64_t client) {
    exact(hdr, sizeof(net::OffloadRequest));
    net::OffloadRequest req;
    std::memcpy(&req, payload, sizeof req);
    // A write takes the leaf's lock word with a CPU compare-and-swap.
    if ((req.kind == net::kOffloadInsert || req.kind == net::kOffloadDelete) &&
        !cpu_atomics.load(std::memory_order_relaxed))
        throw no_cpu_atomics(req.kind == net::kOffloadInsert ? "OFFLOAD insert" : "OFFLOAD delete");
    try {
        execute_offload(pool, pool_bytes, client, req, resp);
    } catch (const std::invalid_argument& e) {
        throw Fail{kStatusProtocol, e.what()};
    }
    offload_work();
    offloads.fetch_add(1, std::memory_order_relaxed);
    return;
}

// OFFLOAD_KILL: dead entries out of one leaf (engine/offload_kill.cpp).
void OffloadRequests::do_offload_kill(const FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp,
                                      uint64_t client) {
    net::OffloadKillView v;
    try {
        v = check_offload_kill(pool_bytes, payload, hdr.payload_len);
    } catch (const std::invalid_argument& e) {
        throw Fail{kStatusProtocol, e.what()};
    }
    if (!cpu_atomics.load(std::memory_order_relaxed)) throw no_cpu_atomics("OFFLOAD_KILL");
    execute_offload_kill(pool, pool_bytes, client, v, resp);
    offload_work();
    offloads.fetch_add(1, std::memory_order_relaxed);
}

// OFFLOAD_BYTES: the same on a slotted tree.
void OffloadRequests::do_offload_bytes(const FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp,
                                       uint64_t client) {
    try {
        // A malformed payload is a protocol error even where writes are refused.
        const net::OffloadBytesView v = check_offload_bytes(pool_bytes, payload, hdr.payload_len);
        if ((v.h.kind == net::kOffloadInsert || v.h.kind == net::kOffloadDelete) &&
            !cpu_atomics.load(std::memory_order_relaxed))
            throw no_cpu_atomics(v.h.kind == net::kOffloadInsert ? "OFFLOAD_BYTES insert" : "OFFLOAD_BYTES delete");
        execute_offload_bytes(pool, pool_bytes, client, v, resp);
    } catch (const std::invalid_argument& e) {
        throw Fail{kStatusProtocol, e.what()};
    }
    offload_work();
    offloads.fetch_add(1, std::memory_order_relaxed);
    return;
}

void OffloadRequests::offload_work() const {
    if (!opts.offload_work_us) return;
    auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(opts.offload_work_us);
    while (std::chrono::steady_clock::now() < until) {
    }
}

void OffloadRequests::do_offload_split(const net::FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp,
                                       uint64_t client) {
    net::OffloadRequest req{};
    net::OffloadSplitExt ext{};  // (split_request checks the length before either is used)
    std::memcpy(&req, payload, std::min<size_t>(sizeof req, hdr.payload_len));
    if (hdr.payload_len >= sizeof req + sizeof ext) std::memcpy(&ext, payload + sizeof req, sizeof ext);
    split_request(
        hdr, sizeof req + sizeof ext, ext, payload, resp, "OFFLOAD_SPLIT",
        [&](const SplitContext& s) {
            if (req.kind != net::kOffloadInsert)
                throw Fail{kStatusProtocol,
                           "OFFLOAD_SPLIT carries inserts only (kind " + std::to_string(req.kind) + ")"};
            execute_offload(pool, pool_bytes, client, req, resp, true, &s);
        },
        true);
}

void OffloadRequests::do_offload_split_image(const net::FrameHeader& hdr, const uint8_t* payload,
                                             std::vector<uint8_t>& resp, uint64_t client) {
    net::OffloadSplitExt ext{};
    if (hdr.payload_len >= net::kOffloadSplitImageRequest)
        std::memcpy(&ext, payload + sizeof(net::OffloadRequest), sizeof ext);
    split_request(
        hdr, net::kOffloadSplitImageRequest, ext, payload, resp, "OFFLOAD_SPLIT_IMAGE",
        [&](const SplitContext& s) { execute_offload_split_image(pool, pool_bytes, client, payload, s, resp); });
}

void OffloadRequests::do_offload_bytes_split(const net::FrameHeader& hdr, const uint8_t* payload,
                                             std::vector<uint8_t>& resp, uint64_t client) {
    constexpr size_t kTail = sizeof(net::OffloadSplitExt) + sizeof(net::OffloadSpareExt);
    if (hdr.payload_len <= kTail)
        throw Fail{kStatusProtocol, "OFFLOAD_BYTES_SPLIT: payload of " + std::to_string(hdr.payload_len) + " bytes"};
    // The OFFLOAD_BYTES request's own length (its header says it) tells
    // whether an OffloadParentSplitExt follows the spare's.
    size_t bytes = hdr.payload_len - kTail;
    if (hdr.payload_len >= sizeof(net::OffloadBytesHeader) + kTail + sizeof(net::OffloadParentSplitExt)) {
        net::OffloadBytesHeader bh{};
        std::memcpy(&bh, payload, sizeof bh);
        const size_t own = sizeof bh + size_t(bh.key_len) + bh.record_len;
        if (hdr.payload_len == own + kTail + sizeof(net::OffloadParentSplitExt)) bytes = own;
    }
    net::OffloadSplitExt ext{};
    std::memcpy(&ext, payload + bytes, sizeof ext);
    split_request(
        hdr, bytes + sizeof ext, ext, payload, resp, "OFFLOAD_BYTES_SPLIT",
        [&](const SplitContext& s) {
            const net::OffloadBytesView v = check_offload_bytes(pool_bytes, payload, bytes);
            if (v.h.kind != net::kOffloadInsert)
                throw Fail{kStatusProtocol,
                           "OFFLOAD_BYTES_SPLIT carries inserts only (kind " + std::to_string(v.h.kind) + ")"};
            execute_offload_bytes(pool, pool_bytes, client, v, resp, true, &s);
        },
        true);
}

void OffloadRequests::do_offload_bytes_split_image(const net::FrameHeader& hdr, const uint8_t* payload,
                                                   std::vector<uint8_t>& resp, uint64_t client) {
    constexpr size_t kTail =
        sizeof(net::OffloadSplitExt) + sizeof(net::OffloadImageExt) + kNodeSize + sizeof(net::OffloadSpareExt);
    if (hdr.payload_len <= kTail)
        throw Fail{kStatusProtocol,
                   "OFFLOAD_BYTES_SPLIT_IMAGE: payload of " + std::to_string(hdr.payload_len) + " bytes"};
    const size_t bytes = hdr.payload_len - kTail;
    net::OffloadSplitExt ext{};
    std::memcpy(&ext, payload + bytes, sizeof ext);
    split_request(hdr, hdr.payload_len - sizeof(net::OffloadSpareExt), ext, payload, resp, "OFFLOAD_BYTES_SPLIT_IMAGE",
                  [&](const SplitContext& s) {
                      const net::OffloadBytesView v = check_offload_bytes(pool_bytes, payload, bytes);
                      execute_offload_bytes_split_image(pool, pool_bytes, client, v, payload + bytes + sizeof ext, s,
                                                        resp);
                  });
}

void OffloadRequests::do_offload_dirty_split(const net::FrameHeader& hdr, const uint8_t* payload,
                                             std::vector<uint8_t>& resp, uint64_t client) {
    exact(hdr, net::kOffloadDirtySplitRequest);
    if (!cpu_atomics.load(std::memory_order_relaxed)) throw no_cpu_atomics("OFFLOAD_DIRTY_SPLIT");
    net::OffloadSplitExt ext{};
    net::OffloadDirtySplitExt dx{};
    std::memcpy(&ext, payload + sizeof(net::OffloadRequest), sizeof ext);
    std::memcpy(&dx, payload + sizeof(net::OffloadRequest) + sizeof ext, sizeof dx);
    dirty_split_request(ext.ns, dx.sibling, resp, [&](uint64_t sibling) {
        execute_offload_dirty_split(pool, pool_bytes, client, payload, sibling, resp);
    });
}

void OffloadRequests::do_offload_bytes_dirty_split(const net::FrameHeader& hdr, const uint8_t* payload,
                                                   std::vector<uint8_t>& resp, uint64_t client) {
    net::OffloadBytesDirtySplitHeader h;
    try {
        h = check_offload_bytes_dirty_split(payload, hdr.payload_len);
    } catch (const std::invalid_argument& e) {
        throw Fail{kStatusProtocol, e.what()};
    }
    if (!cpu_atomics.load(std::memory_order_relaxed)) throw no_cpu_atomics("OFFLOAD_BYTES_DIRTY_SPLIT");
    dirty_split_request(h.ns, h.sibling, resp, [&](uint64_t sibling) {
        execute_offload_bytes_dirty_split(pool, pool_bytes, client, payload, sibling, resp);
    });
}

template <class Run>
void OffloadRequests::dirty_split_request(uint64_t ns, uint64_t sibling, std::vector<uint8_t>& resp, Run run) {
    const bool owned = sibling && ns_owns_block(ns, sibling);
    try {
        run(owned ? sibling : 0);
    } catch (const std::invalid_argument& e) {
        throw Fail{kStatusProtocol, e.what()};
    }
    const bool taken = !resp.empty() && resp[0] == net::kOffloadSplit;
    put(resp, net::OffloadSpareTail{owned && !taken ? sibling : split_alloc(ns)});
    offload_work();
    offloads.fetch_add(1, std::memory_order_relaxed);
}

template <class Run>
void OffloadRequests::split_request(const net::FrameHeader& hdr, size_t base, const net::OffloadSplitExt& ext,
                                    const uint8_t* payload, std::vector<uint8_t>& resp, const char* what, Run run,
                                    bool parent_ext) {
    const size_t with_both = base + sizeof(net::OffloadSpareExt) + sizeof(net::OffloadParentSplitExt);
    const bool with_parent = parent_ext && hdr.payload_len == with_both;
    const bool with_spare = with_parent || hdr.payload_len == base + sizeof(net::OffloadSpareExt);
    if (!with_spare) exact(hdr, base);
    if (!cpu_atomics.load(std::memory_order_relaxed)) throw no_cpu_atomics(what);
    net::OffloadSpareExt spare{};
    if (with_spare) std::memcpy(&spare, payload + base, sizeof spare);
    if (spare.sibling && !ns_owns_block(ext.ns, spare.sibling)) spare.sibling = 0;
    bool taken = false;
    SplitContext split;
    split.parent = ext.parent;
    net::OffloadParentSplitExt pe{};
    bool ptaken = false;
    if (with_parent) {
        std::memcpy(&pe, payload + base + sizeof spare, sizeof pe);
        split.split_parent = true;
        // (an offset that is no level-2 node of the tree takes nothing:
        // link_in_parent checks bounds and what it reads there)
        split.grandparent = pe.grandparent;
        if (pe.sibling && (pe.sibling == spare.sibling || !ns_owns_block(ext.ns, pe.sibling))) pe.sibling = 0;
        split.parent_alloc = [&] {
            if (!pe.sibling || ptaken) return split_alloc(ext.ns);
            ptaken = true;
            return pe.sibling;
        };
        split.next_parent_spare = [&] { return pe.sibling && !ptaken ? pe.sibling : split_alloc(ext.ns); };
    }
    split.alloc = [&] {
        if (!spare.sibling || taken) return split_alloc(ext.ns);
        taken = true;
        return spare.sibling;
    };
    try {
        run(split);
    } catch (const std::invalid_argument& e) {
        throw Fail{kStatusProtocol, e.what()};
    }
    if (with_spare) put(resp, net::OffloadSpareTail{spare.sibling && !taken ? spare.sibling : split_alloc(ext.ns)});
    offload_work();
    offloads.fetch_add(1, std::memory_order_relaxed);
}

void OffloadRequests::do_offload_batch_split(const net::FrameHeader& hdr, const uint8_t* payload,
                                             std::vector<uint8_t>& resp, uint64_t client) {
    net::OffloadBatchSplitHeader h;
    try {
        h = check_offload_batch_split(pool_bytes, payload, hdr.payload_len);
    } catch (const std::invalid_argument& e) {
        throw Fail{kStatusProtocol, e.what()};
    }
    if (!cpu_atomics.load(std::memory_order_relaxed)) throw no_cpu_atomics("OFFLOAD_BATCH_SPLIT");
    execute_offload_batch_split(
        pool, pool_bytes, client, payload, [this](uint64_t ns) { return split_alloc(ns); }, resp);
    for (uint32_t i = 0; i < h.count; i++) offload_work();
    offloads.fetch_add(h.count, std::memory_order_relaxed);
}

void OffloadRequests::do_offload_bytes_batch_split(const net::FrameHeader& hdr, const uint8_t* payload,
                                                   std::vector<uint8_t>& resp, uint64_t client) {
    net::OffloadBatchSplitHeader h;
    std::vector<net::OffloadBytesBatchSplitView> items;
    try {
        items = check_offload_bytes_batch_split(pool_bytes, payload, hdr.payload_len, h);
    } catch (const std::invalid_argument& e) {
        throw Fail{kStatusProtocol, e.what()};
    }
    if (!cpu_atomics.load(std::memory_order_relaxed)) throw no_cpu_atomics("OFFLOAD_BYTES_BATCH_SPLIT");
    execute_offload_bytes_batch_split(
        pool, pool_bytes, client, h, items, [this](uint64_t ns) { return split_alloc(ns); }, resp);
    for (size_t i = 0; i < items.size(); i++) offload_work();
    offloads.fetch_add(items.size(), std::memory_order_relaxed);
}

void OffloadRequests::do_offload_batch(const net::FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp,
                                       uint64_t client) {
    const uint32_t n = hdr.payload_len / sizeof(net::OffloadRequest);
    if (hdr.payload_len % sizeof(net::OffloadRequest) != 0 || n == 0 || n > kMaxOffloadBatch)
        throw Fail{kStatusProtocol, "OFFLOAD_BATCH: payload of " + std::to_string(hdr.payload_len) +
                                        " bytes is not 1.." + std::to_string(kMaxOffloadBatch) + " requests"};
    std::vector<net::OffloadRequest> reqs(n);
    std::memcpy(reqs.data(), payload, hdr.payload_len);
    for (const net::OffloadRequest& r : reqs) {
        if (r.kind != net::kOffloadInsert && r.kind != net::kOffloadDelete)
            throw Fail{kStatusProtocol,
                       "OFFLOAD_BATCH carries inserts and deletes only (kind " + std::to_string(r.kind) + ")"};
        try {
            check_offload_request(pool_bytes, r);
        } catch (const std::invalid_argument& e) {
            throw Fail{kStatusProtocol, e.what()};
        }
    }
    if (!cpu_atomics.load(std::memory_order_relaxed)) throw no_cpu_atomics("OFFLOAD_BATCH");
    resp.reserve(n * sizeof(net::OffloadReply));
    for (const net::OffloadRequest& r : reqs) {
        execute_offload(pool, pool_bytes, client, r, resp, false);  // checked above: does not throw
        offload_work();
        offloads.fetch_add(1, std::memory_order_relaxed);
    }
}

void OffloadRequests::do_offload_bytes_batch(const net::FrameHeader& hdr, const uint8_t* payload,
                                             std::vector<uint8_t>& resp, uint64_t client) {
    std::vector<net::OffloadBytesView> reqs;
    try {
        reqs = check_offload_bytes_batch(pool_bytes, payload, hdr.payload_len);
    } catch (const std::invalid_argument& e) {
        throw Fail{kStatusProtocol, e.what()};
    }
    if (!cpu_atomics.load(std::memory_order_relaxed)) throw no_cpu_atomics("OFFLOAD_BYTES_BATCH");
    resp.reserve(reqs.size() * sizeof(net::OffloadReply));
    for (const net::OffloadBytesView& r : reqs) {
        execute_offload_bytes(pool, pool_bytes, client, r, resp, false);  // checked above: does not throw
        offload_work();
        offloads.fetch_add(1, std::memory_order_relaxed);
    }
}

}  // namespace dex::memnode
