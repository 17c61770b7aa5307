#include "transport/transport_factory.h"

#include "common/error.h"
#include "transport/rdma_transport.h"
#include "transport/tcp_transport.h"

namespace dex {

bool transport_scheme_supported(const std::string& scheme) { return scheme == "tcp" || scheme == "rdma"; }

std::unique_ptr<Transport> make_transport(const std::string& url, const TransportOptions& opts) {
    if (url.rfind("rdma://", 0) == 0) return std::make_unique<RdmaTransport>(url, opts);
    if (url.rfind("tcp://", 0) == 0) return std::make_unique<TcpTransport>(url, opts);
    throw Error(ErrorCode::kInvalid, "unsupported transport in memory node address \"" + url + "\"",
                "Write each memory node as tcp://host:port or rdma://host:port.");
}

}  // namespace dex
