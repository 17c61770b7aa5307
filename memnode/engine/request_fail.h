// Requests the memory node fails: a status and a message for the client
// (net/protocol.h statuses), thrown by the engine's request handlers and
// caught where the reply frame is built (Engine::handle).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace dex::memnode {

struct Fail {
    uint16_t status;
    std::string msg;
};

// Appends v's bytes to a reply.
template <class T>
void put(std::vector<uint8_t>& out, const T& v) {
    size_t o = out.size();
    out.resize(o + sizeof(T));
    std::memcpy(out.data() + o, &v, sizeof(T));
}

}  // namespace dex::memnode
