// Creates the Transport for a memory-node URL: the scheme selects it
// (tcp://host:port, rdma://host:port). Constructing never connects.
#pragma once
#include <memory>
#include <string>

#include "transport/transport.h"

namespace dex {

// True for the schemes make_transport() knows ("tcp", "rdma").
bool transport_scheme_supported(const std::string& scheme);
// Throws kInvalid for an unknown scheme or a malformed address.
std::unique_ptr<Transport> make_transport(const std::string& url, const TransportOptions& opts);

}  // namespace dex
