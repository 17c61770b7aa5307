// OFFLOAD_BYTES_BATCH on the memory node (net/protocol.h): the checks that
// come before any sub-request runs. Execution is execute_offload_bytes() per
// sub-request (engine.cpp), so a batched insert is exactly a single one.
#include <stdexcept>

#include "engine/offload.h"

namespace dex::memnode {

std::vector<net::OffloadBytesView> check_offload_bytes_batch(uint64_t pool_bytes, const uint8_t* payload,
                                                             size_t len) {
    std::vector<net::OffloadBytesView> v;
    if (const char* why = net::parse_offload_bytes_batch(payload, len, v)) throw std::invalid_argument(why);
    // Each sub-request once more through the single request's checks (its
    // journal slot inside the pool), on exactly its own bytes.
    for (net::OffloadBytesView& r : v) {
        const uint8_t* at = r.key - sizeof(net::OffloadBytesHeader);
        r = check_offload_bytes(pool_bytes, at, sizeof(net::OffloadBytesHeader) + r.h.key_len + r.h.record_len);
    }
    return v;
}

}  // namespace dex::memnode
