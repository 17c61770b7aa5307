// rdma:// transport: rdma-core verbs to a dex-memnode started with
// --rdma-listen. One RC queue pair per transport object (= per process per
// memory node in PostgreSQL), created on first use through librdmacm and
// reused; one-sided READ/WRITE/CMP_AND_SWP/FETCH_AND_ADD go straight to the
// node's registered pool, RPCs travel as frames over SEND/RECV (the same
// frames as TCP, so every RPC op works unchanged). Errors, timeouts,
// interrupts and dex::stats() counting behave as in TcpTransport.
#pragma once
#include <memory>
#include <string>

#include "transport/transport.h"

namespace dex {

class RdmaTransport final : public Transport {
public:
    // address: "rdma://host:port" (host: an address of the node's RDMA interface).
    RdmaTransport(std::string address, TransportOptions opts);
    ~RdmaTransport() override;

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
    const std::string& address() const override { return address_; }

    void read(uint64_t offset, void* dst, uint32_t len) override;
    void write(uint64_t offset, const void* src, uint32_t len) override;
    uint64_t cas(uint64_t offset, uint64_t expected, uint64_t desired) override;
    uint64_t faa(uint64_t offset, uint64_t add) override;
    void batch(RemoteOp* ops, size_t n) override;
    std::vector<uint8_t> rpc(net::Op op, const void* payload, uint32_t len) override;

    void register_region(void* base, size_t len) override;
    void disconnect() override;
    bool connected() const;

    // For tests: transfers that used the registered region directly (no bounce copy),
    // and whether the region is registered on the current connection.
    uint64_t zero_copy_transfers() const;
    bool region_registered() const;

private:
    struct Impl;
    std::string address_;
    std::unique_ptr<Impl> impl_;
};

}  // namespace dex
