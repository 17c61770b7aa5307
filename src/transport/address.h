// Memory-node addresses: "scheme://host:port" (host may be "[v6]"). One
// parser for every transport, so tcp:// and rdma:// accept the same forms.
#pragma once
#include <string>

namespace dex {

struct HostPort {
    std::string host;  // without brackets
    std::string port;  // decimal, 1..65535
    std::string canonical;  // scheme://host:port (v6 hosts bracketed)
};

// Throws Error(kInvalid) naming `address`, with `example` in the hint.
HostPort parse_host_port(const std::string& address, const std::string& scheme, const std::string& example);

}  // namespace dex
