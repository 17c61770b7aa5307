// OFFLOAD_BYTES_BATCH framing (net/protocol.h): OFFLOAD_BYTES payloads back
// to back; OFFLOAD_BYTES_BATCH_SPLIT's, each after its item header. Shared by the memory node, which must refuse a malformed batch
// before it executes any of it, and the compute side's encoder.
#include <cstring>
#include <stdexcept>

#include "net/protocol.h"

namespace dex::net {

static_assert(kMaxOffloadBytesBatchPayload <= kMaxPayload, "a batch must fit one TCP frame");
static_assert(kMaxOffloadBytesBatchSplitRequest <= kMaxPayload && kMaxOffloadBytesBatchSplitReply <= kMaxPayload,
              "a batch and its answer must fit one TCP frame");

const char* parse_offload_bytes_batch(const uint8_t* payload, size_t len, std::vector<OffloadBytesView>& out) {
    out.clear();
    if (len > kMaxOffloadBytesBatchPayload) return "OFFLOAD_BYTES_BATCH: payload longer than 256 longest requests";
    size_t at = 0;
    while (at < len) {
        if (out.size() == kMaxOffloadBatch) return "OFFLOAD_BYTES_BATCH: more than 256 requests";
        // The sub-request's length comes from its own header; parse_offload_bytes
        // then checks those exact bytes, so nothing is read beyond `len`.
        if (len - at < sizeof(OffloadBytesHeader)) return "OFFLOAD_BYTES_BATCH: truncated request header";
        OffloadBytesHeader h;
        std::memcpy(&h, payload + at, sizeof h);
        const size_t sub = sizeof h + size_t(h.key_len) + h.record_len;
        if (sub > len - at) return "OFFLOAD_BYTES_BATCH: request runs past the payload";
        OffloadBytesView v;
        if (const char* why = parse_offload_bytes(payload + at, sub, v)) return why;
        if (v.h.kind != kOffloadInsert && v.h.kind != kOffloadDelete)
            return "OFFLOAD_BYTES_BATCH carries inserts and deletes only";
        out.push_back(v);
        at += sub;
    }
    if (out.empty()) return "OFFLOAD_BYTES_BATCH: no requests";
    return nullptr;
}

const char* parse_offload_bytes_batch_split(const uint8_t* payload, size_t len, OffloadBatchSplitHeader& h,
                                            std::vector<OffloadBytesBatchSplitView>& out) {
    out.clear();
    if (len > kMaxOffloadBytesBatchSplitRequest) return "OFFLOAD_BYTES_BATCH_SPLIT: payload longer than 256 longest items";
    if (len < sizeof h) return "OFFLOAD_BYTES_BATCH_SPLIT: payload shorter than its header";
    std::memcpy(&h, payload, sizeof h);
    if (h.pad != 0) return "OFFLOAD_BYTES_BATCH_SPLIT: non-zero header padding";
    if (h.count == 0 || h.count > kMaxOffloadBatch) return "OFFLOAD_BYTES_BATCH_SPLIT: not 1..256 items";
    size_t at = sizeof h;
    for (uint32_t i = 0; i < h.count; i++) {
        OffloadBytesBatchSplitView v;
        if (len - at < sizeof v.item + sizeof(OffloadBytesHeader)) return "OFFLOAD_BYTES_BATCH_SPLIT: truncated item";
        std::memcpy(&v.item, payload + at, sizeof v.item);
        if (v.item.split > 1) return "OFFLOAD_BYTES_BATCH_SPLIT: bad item flags";
        for (uint8_t b : v.item.pad)
            if (b != 0) return "OFFLOAD_BYTES_BATCH_SPLIT: non-zero item padding";
        at += sizeof v.item;
        OffloadBytesHeader rh;
        std::memcpy(&rh, payload + at, sizeof rh);
        const size_t sub = sizeof rh + size_t(rh.key_len) + rh.record_len;
        if (sub > len - at) return "OFFLOAD_BYTES_BATCH_SPLIT: request runs past the payload";
        if (const char* why = parse_offload_bytes(payload + at, sub, v.req)) return why;
        if (v.req.h.kind != kOffloadInsert) return "OFFLOAD_BYTES_BATCH_SPLIT carries inserts only";
        out.push_back(v);
        at += sub;
    }
    if (at != len) return "OFFLOAD_BYTES_BATCH_SPLIT: bytes after the last item";
    return nullptr;
}

void append_offload_bytes(std::vector<uint8_t>& batch, const OffloadBytesHeader& h, const void* key, size_t key_len,
                          const void* record, size_t record_len) {
    const std::vector<uint8_t> one = encode_offload_bytes(h, key, key_len, record, record_len);
    batch.insert(batch.end(), one.begin(), one.end());
}

}  // namespace dex::net
