#include "net/protocol.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace dex::net {

const char* op_name(uint16_t op) {
    switch (op) {
        case kOpHello: return "HELLO";
        case kOpRead: return "READ";
        case kOpWrite: return "WRITE";
        case kOpCas: return "CAS";
        case kOpFaa: return "FAA";
        case kOpBatch: return "BATCH";
        case kOpAlloc: return "ALLOC";
        case kOpFree: return "FREE";
        case kOpNsCreate: return "NS_CREATE";
        case kOpNsDrop: return "NS_DROP";
        case kOpNsList: return "NS_LIST";
        case kOpGetRoot: return "GET_ROOT";
        case kOpSetRoot: return "SET_ROOT";
        case kOpStats: return "STATS";
        case kOpClientAlive: return "CLIENT_ALIVE";
        case kOpOffload: return "OFFLOAD";
        case kOpOffloadBatch: return "OFFLOAD_BATCH";
        case kOpOffloadBytes: return "OFFLOAD_BYTES";
        case kOpOffloadBytesBatch: return "OFFLOAD_BYTES_BATCH";
        case kOpOffloadSplit: return "OFFLOAD_SPLIT";
        case kOpOffloadBatchSplit: return "OFFLOAD_BATCH_SPLIT";
        case kOpOffloadSplitImage: return "OFFLOAD_SPLIT_IMAGE";
        case kOpOffloadDirtySplit: return "OFFLOAD_DIRTY_SPLIT";
        case kOpOffloadBytesSplit: return "OFFLOAD_BYTES_SPLIT";
        case kOpOffloadBytesBatchSplit: return "OFFLOAD_BYTES_BATCH_SPLIT";
        case kOpOffloadBytesDirtySplit: return "OFFLOAD_BYTES_DIRTY_SPLIT";
        case kOpOffloadBytesSplitImage: return "OFFLOAD_BYTES_SPLIT_IMAGE";
        case kOpOffloadKill: return "OFFLOAD_KILL";
        default: return nullptr;
    }
}

std::string op_label(uint16_t op) {
    const char* n = op_name(op);
    return n ? std::string(n) : "op " + std::to_string(op);
}

bool is_offload_op(uint16_t op) {
    switch (op) {
        case kOpOffload:
        case kOpOffloadBatch:
        case kOpOffloadBytes:
        case kOpOffloadBytesBatch:
        case kOpOffloadSplit:
        case kOpOffloadBatchSplit:
        case kOpOffloadSplitImage:
        case kOpOffloadDirtySplit:
        case kOpOffloadBytesSplit:
        case kOpOffloadBytesBatchSplit:
        case kOpOffloadBytesDirtySplit:
        case kOpOffloadBytesSplitImage:
        case kOpOffloadKill: return true;
        default: return false;
    }
}

bool is_rpc_op(uint16_t op) { return (op >= kOpAlloc && op <= kOpClientAlive) || is_offload_op(op); }

bool is_fatal_status(uint16_t status) {
    return status == kStatusProtocol || status == kStatusBounds || status == kStatusAlign ||
           status == kStatusAuth || status == kStatusRefused;
}

std::string refusal_reason(uint32_t max_connections) {
    return "too many connections (" + std::to_string(max_connections) + ")";
}

const char* parse_offload_bytes(const uint8_t* payload, size_t len, OffloadBytesView& out) {
    if (len < sizeof(OffloadBytesHeader)) return "OFFLOAD_BYTES: payload shorter than its header";
    std::memcpy(&out.h, payload, sizeof out.h);
    const OffloadBytesHeader& h = out.h;
    if (h.kind < kOffloadLeaf || h.kind > kOffloadDelete) return "OFFLOAD_BYTES: unknown kind";
    if (h.pad != 0) return "OFFLOAD_BYTES: pad is not 0";
    if (h.key_len > kMaxOffloadKeyBytes) return "OFFLOAD_BYTES: key longer than the longest entry";
    if (h.key_len == 0 && h.kind != kOffloadLeaf) return "OFFLOAD_BYTES: empty entry";
    if (h.record_len > kMaxOffloadRecordBytes) return "OFFLOAD_BYTES: journal record too long";
    if ((h.journal == 0) != (h.record_len == 0)) return "OFFLOAD_BYTES: journal slot and record go together";
    if (h.journal != 0 && h.kind != kOffloadInsert) return "OFFLOAD_BYTES: a journal record with a non-insert";
    // Compared in size_t: the sum of two u16 and the header cannot wrap.
    if (len != sizeof h + size_t(h.key_len) + h.record_len)
        return "OFFLOAD_BYTES: payload length is not header + key_len + record_len";
    out.key = payload + sizeof h;
    out.record = out.key + h.key_len;
    return nullptr;
}

std::vector<uint8_t> encode_offload_bytes(OffloadBytesHeader h, const void* key, size_t key_len, const void* record,
                                          size_t record_len) {
    if (key_len > kMaxOffloadKeyBytes || record_len > kMaxOffloadRecordBytes)
        throw std::invalid_argument("OFFLOAD_BYTES: key or journal record too long");
    h.key_len = static_cast<uint16_t>(key_len);
    h.record_len = static_cast<uint16_t>(record_len);
    h.pad = 0;
    std::vector<uint8_t> p(sizeof h + key_len + record_len);
    std::memcpy(p.data(), &h, sizeof h);
    if (key_len) std::memcpy(p.data() + sizeof h, key, key_len);
    if (record_len) std::memcpy(p.data() + sizeof h + key_len, record, record_len);
    OffloadBytesView v;
    if (const char* why = parse_offload_bytes(p.data(), p.size(), v)) throw std::invalid_argument(why);
    return p;
}

}  // namespace dex::net
