#include "net/protocol.h"

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
        default: return nullptr;
    }
}

std::string op_label(uint16_t op) {
    const char* n = op_name(op);
    return n ? std::string(n) : "op " + std::to_string(op);
}

bool is_fatal_status(uint16_t status) {
    return status == kStatusProtocol || status == kStatusBounds || status == kStatusAlign ||
           status == kStatusAuth || status == kStatusRefused;
}

std::string refusal_reason(uint32_t max_connections) {
    return "too many connections (" + std::to_string(max_connections) + ")";
}

}  // namespace dex::net
