// FrameHandler: something that executes one request frame and produces one
// response. dex-memnode's engine implements it; the in-process transport calls
// it directly (unit tests), the TCP server calls it for each frame received.
#pragma once
#include <cstdint>
#include <vector>

#include "net/protocol.h"

namespace dex::net {

struct ClientSession {
    uint64_t client_id = 0;     // assigned at HELLO; 0 = not yet authenticated
    bool close_after_reply = false;  // set by the handler for fatal request errors
};

class FrameHandler {
public:
    virtual ~FrameHandler() = default;
    // Executes `hdr` + `payload` (hdr.payload_len bytes). Fills `status` and the
    // response payload (cleared by the callee first). Never throws.
    virtual void handle(ClientSession& session, const FrameHeader& hdr, const uint8_t* payload,
                        uint16_t& status, std::vector<uint8_t>& response) = 0;
    // The session's connection closed (its remote locks become stealable).
    virtual void session_closed(ClientSession& session) = 0;
};

}  // namespace dex::net
