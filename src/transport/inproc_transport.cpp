// In-process transport: the same frames as TCP, handed to a FrameHandler.
#include "transport/inproc_transport.h"

#include <cstring>

#include "common/error.h"
#include "transport/frame_client.h"

namespace dex {

struct InProcTransport::Impl final : net::FrameClient {
    net::FrameHandler& handler;
    std::string token;
    const std::string& addr;
    net::ClientSession session;
    bool ready = false;
    uint64_t incarnation = 0;
    uint32_t hello_flags = 0;  // of the current session's HELLO reply
    std::mutex mu;  // one thread at a time is the contract; this makes misuse safe

    Impl(net::FrameHandler& h, std::string tok, const std::string& a) : handler(h), token(std::move(tok)), addr(a) {}
    ~Impl() override { close(); }

    void close() {
        if (ready || session.client_id != 0) handler.session_closed(session);
        session = net::ClientSession{};
        ready = false;
    }

    void ensure_ready() override {
        if (ready) return;
        session = net::ClientSession{};
        ready = true;  // exchange() needs a session; hello() drops it on failure
        try {
            net::HelloReply r = hello(token);
            incarnation = r.incarnation;
            hello_flags = r.flags;
        } catch (...) {
            close();
            throw;
        }
        note_incarnation(incarnation);
    }

    uint16_t exchange(const std::vector<uint8_t>& req, std::vector<uint8_t>& resp) override {
        net::FrameHeader h;
        std::memcpy(&h, req.data(), sizeof h);
        uint16_t status = net::kStatusInternal;
        handler.handle(session, h, req.data() + sizeof h, status, resp);
        if (session.close_after_reply) {
            // The server would close the connection after this reply.
            close();
        }
        return status;
    }

    void drop_session() override { close(); }
    const std::string& peer() const override { return addr; }
};

InProcTransport::InProcTransport(net::FrameHandler& handler, std::string token)
    : impl_(std::make_unique<Impl>(handler, std::move(token), address_)) {}

InProcTransport::~InProcTransport() = default;

uint64_t InProcTransport::incarnation() {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->ensure_ready();
    impl_->acknowledge_incarnation();
    return impl_->incarnation;
}

uint64_t InProcTransport::client_id() {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->ensure_ready();
    return impl_->session.client_id;
}

bool InProcTransport::offload_writes_allowed() {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->ensure_ready();
    return (impl_->hello_flags & net::kHelloCpuAtomics) != 0;
}

bool InProcTransport::offload_batch_allowed() {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->ensure_ready();
    return net::offload_batch_usable(impl_->hello_flags);
}

bool InProcTransport::offload_bytes_allowed() {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->ensure_ready();
    return (impl_->hello_flags & net::kHelloOffloadBytes) != 0;
}

bool InProcTransport::offload_bytes_batch_allowed() {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->ensure_ready();
    return net::offload_bytes_batch_usable(impl_->hello_flags);
}

bool InProcTransport::offload_split_allowed() {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->ensure_ready();
    return net::offload_split_usable(impl_->hello_flags);
}

bool InProcTransport::offload_split_image_allowed() {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->ensure_ready();
    return net::offload_split_image_usable(impl_->hello_flags);
}

bool InProcTransport::offload_bytes_split_allowed() {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->ensure_ready();
    return net::offload_bytes_split_usable(impl_->hello_flags);
}

bool InProcTransport::offload_bytes_batch_split_allowed() {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->ensure_ready();
    return net::offload_bytes_batch_split_usable(impl_->hello_flags);
}

bool InProcTransport::offload_bytes_dirty_split_allowed() {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->ensure_ready();
    return net::offload_bytes_dirty_split_usable(impl_->hello_flags);
}

bool InProcTransport::offload_bytes_split_image_allowed() {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->ensure_ready();
    return net::offload_bytes_split_image_usable(impl_->hello_flags);
}

bool InProcTransport::offload_kill_allowed() {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->ensure_ready();
    return net::offload_kill_usable(impl_->hello_flags);
}

bool InProcTransport::offload_dirty_split_allowed() {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->ensure_ready();
    return net::offload_dirty_split_usable(impl_->hello_flags);
}

bool InProcTransport::split_spare_allowed() {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->ensure_ready();
    return net::split_spare_usable(impl_->hello_flags);
}

bool InProcTransport::split_parent_allowed() {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->ensure_ready();
    return net::split_parent_usable(impl_->hello_flags);
}

bool InProcTransport::offload_batch_split_allowed() {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->ensure_ready();
    return net::offload_batch_split_usable(impl_->hello_flags);
}

uint64_t InProcTransport::connected_client_id() {
    std::lock_guard<std::mutex> g(impl_->mu);
    return impl_->ready ? impl_->session.client_id : 0;
}

void InProcTransport::read(uint64_t offset, void* dst, uint32_t len) {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->read(offset, dst, len);
}

void InProcTransport::write(uint64_t offset, const void* src, uint32_t len) {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->write(offset, src, len);
}

uint64_t InProcTransport::cas(uint64_t offset, uint64_t expected, uint64_t desired) {
    std::lock_guard<std::mutex> g(impl_->mu);
    return impl_->cas(offset, expected, desired);
}

uint64_t InProcTransport::faa(uint64_t offset, uint64_t add) {
    std::lock_guard<std::mutex> g(impl_->mu);
    return impl_->faa(offset, add);
}

void InProcTransport::batch(RemoteOp* ops, size_t n) {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->batch(ops, n);
}

std::vector<uint8_t> InProcTransport::rpc(net::Op op, const void* payload, uint32_t len) {
    std::lock_guard<std::mutex> g(impl_->mu);
    return impl_->rpc(op, payload, len);
}

void InProcTransport::kill_session() {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->close();
}

}  // namespace dex
