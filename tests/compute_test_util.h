// Helpers for the compute-process tests: in-process memory nodes reachable by
// URL through a MemnodeClient::Factory, with transports that record what the
// client asks of them (region registration, disconnects).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cluster/memnode_client.h"
#include "engine/engine.h"
#include "transport/inproc_transport.h"
#include "tree_test_util.h"

namespace dex::testing {

// An InProcTransport to `engine`, named `url`, that records hook calls and
// counts round trips.
class RecordingTransport final : public Transport {
public:
    RecordingTransport(memnode::Engine& engine, std::string url) : t_(engine), url_(std::move(url)) {}
    uint64_t incarnation() override { return t_.incarnation(); }
    uint64_t client_id() override { return t_.client_id(); }
    uint64_t connected_client_id() override { return t_.connected_client_id(); }
    const std::string& address() const override { return url_; }
    void read(uint64_t off, void* dst, uint32_t len) override { trips++, t_.read(off, dst, len); }
    void write(uint64_t off, const void* src, uint32_t len) override { trips++, t_.write(off, src, len); }
    uint64_t cas(uint64_t off, uint64_t e, uint64_t d) override { return trips++, t_.cas(off, e, d); }
    uint64_t faa(uint64_t off, uint64_t a) override { return trips++, t_.faa(off, a); }
    void batch(RemoteOp* ops, size_t n) override { trips++, t_.batch(ops, n); }
    std::vector<uint8_t> rpc(net::Op op, const void* p, uint32_t len) override { return trips++, t_.rpc(op, p, len); }
    bool offload_writes_allowed() override { return t_.offload_writes_allowed(); }
    void register_region(void* base, size_t len) override {
        region_base = base;
        region_len = len;
        registrations++;
    }
    void disconnect() override { disconnects++; }

    void* region_base = nullptr;
    size_t region_len = 0;
    int registrations = 0;
    int disconnects = 0;
    uint64_t trips = 0;  // round trips asked of it (a batch is one)

private:
    InProcTransport t_;
    std::string url_;
};

// Memory nodes by URL ("tcp://inproc:1", ...): each URL is one engine, made
// on first use; restart(url) replaces it by a new engine (new incarnation,
// empty pool) -- transports made from then on reach the new one.
class InprocNodes {
public:
    cluster::MemnodeClient::Factory factory() {
        return [this](const std::string& url, const TransportOptions&) {
            auto t = std::make_unique<RecordingTransport>(engine(url), url);
            made.push_back(t.get());
            return t;
        };
    }
    memnode::Engine& engine(const std::string& url) {
        auto& e = engines_[url];
        if (!e) e = make_engine(32 << 20);
        return *e;
    }
    void restart(const std::string& url) {
        retired_.push_back(std::move(engines_[url]));
        engines_[url] = make_engine(32 << 20);
    }
    std::vector<RecordingTransport*> made;  // every transport made, in order (owned by the client)

private:
    std::map<std::string, std::unique_ptr<memnode::Engine>> engines_;
    std::vector<std::unique_ptr<memnode::Engine>> retired_;  // old transports may still point at them
};

}  // namespace dex::testing
