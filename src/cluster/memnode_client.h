// A compute-server process's client over its memory nodes: the parsed
// dex.memnodes list, one Transport per memory node (RemoteMemory: position in
// the list = memory node id of every GAddr), reconfiguration that keeps the
// connections of unchanged nodes, the memory region every transport may
// register (the shared node cache block), and the memory-node RPCs that are
// not tree operations (statistics, namespaces, single allocations).
//
// Not thread-safe beyond configure() / set_region() / disconnect_all(), which
// serialize among themselves: one PostgreSQL backend is single-threaded.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/gaddr.h"
#include "net/protocol.h"
#include "transport/remote_memory.h"
#include "transport/transport.h"

namespace dex::cluster {

// Parses dex.memnodes: comma-separated scheme://host:port (scheme tcp or
// rdma), blanks around items ignored, "" or blanks = no memory node. Throws
// kInvalid (with a hint) for an empty item, an unknown scheme or a bad port.
std::vector<std::string> parse_memnodes(const char* list);

class MemnodeClient {
public:
    // Makes the transport of one memory node (default: make_transport).
    using Factory = std::function<std::unique_ptr<Transport>(const std::string& url, const TransportOptions&)>;
    explicit MemnodeClient(Factory factory = {});

    // (Re)configure: connections to nodes whose position, address and options
    // are unchanged (and usable) are kept; others are replaced (not
    // connected yet) and get the registered region; surplus ones are
    // dropped. On an error nothing changes.
    void configure(const char* memnodes, const std::string& token, int connect_timeout_ms, int op_timeout_ms);
    size_t count() const { return addrs_.size(); }
    // Address of memory node `node`, or nullptr.
    const char* address(int node) const;
    const TransportOptions& options() const { return opts_; }
    RemoteMemory& mem() { return mem_; }
    // Transport of memory node `node`; throws kInvalid for an unknown one.
    Transport& node(int node);
    // Drop every connection (process exit).
    void disconnect_all();

    // The region transports may register (Transport::register_region) so that
    // transfers into / out of it skip a copy: recorded for every transport
    // made from now on; register_region_everywhere() also hands it to the
    // existing ones (errors ignored: they register when they can).
    void set_region(void* base, size_t len);
    void register_region_everywhere();

    // ---- memory-node RPCs ----
    net::NodeStats node_stats(int node);
    // New namespace with `tag` (kNamespaceTagLen bytes); *incarnation = the
    // node's, which must not change during the call (kLostMemory).
    uint64_t ns_create(int node, const uint8_t* tag, uint64_t* incarnation);
    // Returns the bytes freed.
    uint64_t ns_drop(int node, uint64_t ns);
    // Every namespace, in id order (paged NS_LIST; a malformed or
    // non-advancing reply is kProtocol: nothing is dropped silently).
    std::vector<net::NsInfo> ns_list(int node);
    // One zeroed node-sized block in namespace ns (the dirty-owner word).
    GAddr alloc_word(int node, uint64_t ns);

private:
    void register_region(Transport& t) { t.register_region(region_, region_ ? region_len_ : 0); }

    std::mutex mu_;
    Factory factory_;
    std::vector<std::string> addrs_;
    TransportOptions opts_;
    RemoteMemory mem_{std::vector<std::unique_ptr<Transport>>{}};
    void* region_ = nullptr;
    size_t region_len_ = 0;
};

}  // namespace dex::cluster
