// OFFLOAD_KILL framing (net/protocol.h): shared by the memory node, which
// refuses a malformed request before it reads the leaf, and the compute
// side's encoder.
#include <cstring>

#include "net/protocol.h"

namespace dex::net {

static_assert(kMaxOffloadKillRequest <= kMaxPayload, "a kill must fit one TCP frame");

const char* parse_offload_kill(const uint8_t* payload, size_t len, OffloadKillView& out) {
    out.entries.clear();
    if (len < sizeof out.h) return "OFFLOAD_KILL: payload shorter than its header";
    std::memcpy(&out.h, payload, sizeof out.h);
    const OffloadKillHeader& h = out.h;
    if (h.pad0 != 0 || h.pad1[0] != 0 || h.pad1[1] != 0 || h.pad1[2] != 0 || h.slotted > 1)
        return "OFFLOAD_KILL: bad flags or padding";
    if (h.count == 0 || h.count > kMaxOffloadBatch) return "OFFLOAD_KILL: not 1..256 entries";
    size_t at = sizeof h;
    for (uint32_t i = 0; i < h.count; i++) {
        uint16_t n;
        if (len - at < sizeof n) return "OFFLOAD_KILL: truncated entry length";
        std::memcpy(&n, payload + at, sizeof n);
        at += sizeof n;
        if (h.slotted ? (n == 0 || n > kMaxOffloadKeyBytes) : n != 16) return "OFFLOAD_KILL: bad entry length";
        if (len - at < n) return "OFFLOAD_KILL: entry runs past the payload";
        out.entries.emplace_back(payload + at, n);
        at += n;
    }
    if (at != len) return "OFFLOAD_KILL: bytes after the last entry";
    return nullptr;
}

void append_offload_kill_entry(std::vector<uint8_t>& payload, const void* entry, uint16_t len) {
    const uint8_t* l = reinterpret_cast<const uint8_t*>(&len);
    payload.insert(payload.end(), l, l + sizeof len);
    const uint8_t* e = static_cast<const uint8_t*>(entry);
    payload.insert(payload.end(), e, e + len);
}

}  // namespace dex::net
