#include "transport/address.h"

#include "common/error.h"

namespace dex {

HostPort parse_host_port(const std::string& address, const std::string& scheme, const std::string& example) {
    std::string a = address;
    const std::string prefix = scheme + "://";
    if (a.rfind(prefix, 0) == 0) a = a.substr(prefix.size());
    while (!a.empty() && a.back() == '/') a.pop_back();
    HostPort hp;
    if (!a.empty() && a[0] == '[') {
        size_t close = a.find(']');
        if (close != std::string::npos && close + 1 < a.size() && a[close + 1] == ':') {
            hp.host = a.substr(1, close - 1);
            hp.port = a.substr(close + 2);
        }
    } else {
        size_t colon = a.rfind(':');
        if (colon != std::string::npos && a.find(':') == colon) {
            hp.host = a.substr(0, colon);
            hp.port = a.substr(colon + 1);
        }
    }
    const std::string& p = hp.port;
    bool port_ok = !p.empty() && p.size() <= 5 && p.find_first_not_of("0123456789") == std::string::npos &&
                   std::stoi(p) > 0 && std::stoi(p) < 65536;
    if (hp.host.empty() || !port_ok)
        throw Error(ErrorCode::kInvalid, "invalid memory node address \"" + address + "\"",
                    "Use " + scheme + "://host:port, for example " + example + ".");
    hp.canonical = prefix + (hp.host.find(':') != std::string::npos ? "[" + hp.host + "]" : hp.host) + ":" + hp.port;
    return hp;
}

}  // namespace dex
