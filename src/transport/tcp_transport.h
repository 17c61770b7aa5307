// TCP transport: one-sided verbs emulated over a TCP connection to dex-memnode.
// Connects lazily on first use; every wait is bounded by the connect/op timeout
// and polls interrupt_requested() every few ms. After any error the connection
// is closed; the next call reconnects and re-reads the incarnation.
#pragma once
#include <memory>
#include <string>

#include "transport/transport.h"

namespace dex {

class TcpTransport final : public Transport {
public:
    // address: "tcp://host:port" (also accepts "host:port").
    TcpTransport(std::string address, TransportOptions opts);
    ~TcpTransport() override;

    uint64_t incarnation() override;
    uint64_t client_id() override;
    uint64_t connected_client_id() override;
    bool offload_writes_allowed() override;
    bool offload_batch_allowed() override;
    bool offload_bytes_allowed() override;
    bool offload_bytes_batch_allowed() override;
    bool offload_split_allowed() override;
    bool offload_batch_split_allowed() override;
    bool offload_split_image_allowed() override;
    bool offload_dirty_split_allowed() override;
    bool offload_bytes_split_allowed() override;
    bool offload_bytes_batch_split_allowed() override;
    bool offload_bytes_dirty_split_allowed() override;
    bool offload_bytes_split_image_allowed() override;
    bool offload_kill_allowed() override;
    bool split_spare_allowed() override;
    bool split_parent_allowed() override;
    bool one_sided_uses_node_cpu() const override { return true; }  // every op is a request to its workers
    const std::string& address() const override { return address_; }

    void read(uint64_t offset, void* dst, uint32_t len) override;
    void write(uint64_t offset, const void* src, uint32_t len) override;
    uint64_t cas(uint64_t offset, uint64_t expected, uint64_t desired) override;
    uint64_t faa(uint64_t offset, uint64_t add) override;
    void batch(RemoteOp* ops, size_t n) override;
    std::vector<uint8_t> rpc(net::Op op, const void* payload, uint32_t len) override;

    void disconnect() override;
    bool connected() const;

private:
    struct Impl;
    std::string address_;
    std::unique_ptr<Impl> impl_;
};

}  // namespace dex
