// dex-memnode RDMA listener (librdmacm), next to the TCP server.
//
// One thread takes connection-manager events (connect requests, disconnects);
// `threads` worker threads each own a completion channel and serve the
// two-sided requests (SEND/RECV) of the connections given to them with the
// same Engine::handle() as the TCP server, so every RPC op works over RDMA
// without an RDMA-specific case. One-sided verbs never reach this code: the
// pool is registered once per device as one memory region with remote
// READ/WRITE/ATOMIC access, and its address and rkey are sent only in the
// reply to a HELLO whose token checked out (net/rdma_wire.h).
//
// Safety of the remote locks (src/README.md "RDMA transport"): a device whose
// atomics are not atomic with respect to the CPU's (IBV_ATOMIC_HCA) makes the
// engine refuse CPU atomics; and CLIENT_ALIVE about an RDMA client probes its
// NIC, on a queue pair whose ACK timeout and retry count this server sets, so
// that a client whose host vanished is found gone within seconds.
#pragma once
#include <memory>
#include <string>

#include "connection_limit.h"
#include "engine/engine.h"

namespace dex::memnode {

struct RdmaServerOptions {
    std::string host;  // an address of the RDMA device's netdev (e.g. 10.77.0.1)
    std::string port;  // "0" = any
    int threads = 1;
    bool verbose = false;
};

class RdmaServer {
public:
    // Every connection holds a place in `limit` (shared with the TCP server)
    // from its connect request until it is destroyed; a request that finds
    // none is rejected (net/rdma_wire.h RdmaRefusal).
    RdmaServer(Engine& engine, RdmaServerOptions opts, ConnectionLimit& limit);
    ~RdmaServer();  // stop()s
    // Binds, listens, registers the pool and starts the threads. On failure
    // returns false and sets `err`. `bound` = "host:port" actually bound.
    bool start(std::string& err, std::string& bound);
    void stop();

    struct Impl;  // (public so the file-local worker threads can name it)

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace dex::memnode
