#include "transport/offload_bytes.h"

#include <cstring>
#include <stdexcept>
#include <vector>

#include "common/error.h"

namespace dex {

ByteOffloadReply offload_bytes(Transport& t, const ByteOffload& req) {
    if (gaddr_is_swizzled(req.start) || req.start == 0)
        throw Error(ErrorCode::kInvalid, "OFFLOAD_BYTES: the start node must be a remote address");
    net::OffloadBytesHeader h{};
    h.start = gaddr_offset(req.start);
    h.tree_id = req.tree_id;
    h.node = static_cast<uint16_t>(gaddr_node(req.start));
    h.kind = req.kind;
    h.start_level = req.start_level;
    h.journal = req.journal;
    std::vector<uint8_t> payload;
    try {
        payload = net::encode_offload_bytes(h, req.key.data(), req.key.size(), req.record.data(), req.record.size());
    } catch (const std::invalid_argument& e) {
        throw Error(ErrorCode::kInvalid, e.what());
    }
    const bool write = req.kind == net::kOffloadInsert || req.kind == net::kOffloadDelete;
    std::vector<uint8_t> r;
    if (write) {
        InterruptHold hold;
        r = t.rpc(net::kOpOffloadBytes, payload.data(), static_cast<uint32_t>(payload.size()));
    } else {
        r = t.rpc(net::kOpOffloadBytes, payload.data(), static_cast<uint32_t>(payload.size()));
    }
    net::OffloadReply rep{};
    if (r.size() < sizeof rep) throw Error(ErrorCode::kProtocol, "OFFLOAD_BYTES: short response from memory node");
    std::memcpy(&rep, r.data(), sizeof rep);
    if (rep.status > net::kOffloadRestart)
        throw Error(ErrorCode::kProtocol, "OFFLOAD_BYTES: unknown status from memory node");
    if ((rep.status == net::kOffloadDone || rep.status == net::kOffloadNoop) &&
        (gaddr_node(rep.leaf) != gaddr_node(req.start) || gaddr_is_swizzled(rep.leaf) || rep.leaf == 0))
        throw Error(ErrorCode::kProtocol, "OFFLOAD_BYTES: memory node named a leaf outside its own pool");
    ByteOffloadReply out;
    out.status = rep.status;
    out.leaf = rep.leaf;
    if (rep.status == net::kOffloadDone) {
        if (r.size() < sizeof rep + kNodeSize) throw Error(ErrorCode::kProtocol, "OFFLOAD_BYTES: leaf image missing");
        std::memcpy(static_cast<void*>(&out.image), r.data() + sizeof rep, kNodeSize);
        out.has_image = true;
    }
    return out;
}

}  // namespace dex
