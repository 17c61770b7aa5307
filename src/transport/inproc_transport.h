// In-process transport for unit tests: encodes the same frames as TCP and hands
// them to a FrameHandler (dex-memnode's engine) in the same process, so tree
// tests run the real request decoder and validator without sockets.
#pragma once
#include <memory>
#include <mutex>
#include <string>

#include "net/frame_handler.h"
#include "transport/transport.h"

namespace dex {

class InProcTransport final : public Transport {
public:
    InProcTransport(net::FrameHandler& handler, std::string token = {});
    ~InProcTransport() override;

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

    // Simulate this client's connection dying (its locks become stealable).
    void kill_session();

private:
    struct Impl;
    std::string address_ = "inproc://";
    std::unique_ptr<Impl> impl_;
};

}  // namespace dex
