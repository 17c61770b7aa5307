// OFFLOAD_BYTES_BATCH framing (net/protocol.h): OFFLOAD_BYTES payloads back
// to back. Shared by the memory node, which must refuse a malformed batch
// before it executes any of it, and the compute side's encoder.
#include <cstring>
#include <stdexcept>

#include "net/protocol.h"

namespace dex::net {

static_assert(kMaxOffloadBytesBatchPayload <= kMaxPayload, "a batch must fit one TCP frame");

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

void append_offload_bytes(std::vector<uint8_t>& batch, const OffloadBytesHeader& h, const void* key, size_t key_len,
                          const void* record, size_t record_len) {
    const std::vector<uint8_t> one = encode_offload_bytes(h, key, key_len, record, record_len);
    batch.insert(batch.end(), one.begin(), one.end());
}

}  // namespace dex::net
