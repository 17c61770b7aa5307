// LocalTransport: the `--mode local` baseline of dex-ycsb. A Transport whose
// "remote memory" is a MAP_SHARED anonymous buffer in this machine's RAM, so
// the SAME BTree code and node layout (src/tree/node_layout.h) run with no
// network at all. Forked worker processes share the buffer (create it before
// fork, then give every process its own LocalTransport object).
//
// What it implements, and how (benchmark baseline, deliberately small):
//   read/write/cas/faa/batch  memcpy / __atomic builtins on the buffer, with the
//                             same 8-byte atomic rule as dex-memnode's engine
//   ALLOC                     bump allocator: atomic cursor in the buffer header
//   FREE                      ignored (memory is not reused; the benchmark never
//                             empties a leaf, so merges do not happen anyway)
//   NS_CREATE                 one namespace per buffer (returns kLocalNs)
//   GET_ROOT / SET_ROOT       root word in the header, SET_ROOT is a CAS
//   CLIENT_ALIVE              always 1 (no lock holder ever dies in a benchmark)
//   STATS                     pool size / used bytes
//   anything else             dex::Error(kInvalid)
// It does NOT count into dex::stats() (nothing here is remote); node accesses
// are counted in LocalShared::counters instead, reported as "local accesses".
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

#include "transport/transport.h"

namespace dex::bench {

constexpr uint64_t kLocalNs = 0x10001;

struct LocalCounters {
    std::atomic<uint64_t> reads{0}, writes{0}, atomics{0}, rpcs{0};
};

// Lives at offset 0 of the buffer (offsets below net::kPoolReservedBytes are
// never handed out, like on a memory node).
struct LocalShared {
    uint64_t pool_bytes;
    uint64_t incarnation;
    std::atomic<uint64_t> cursor;     // bump allocator
    std::atomic<uint64_t> root;       // the one namespace's root GAddr
    std::atomic<uint32_t> next_client;
    LocalCounters counters;
};

class LocalPool {
public:
    // mmap(MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE); pages are faulted on use.
    explicit LocalPool(uint64_t bytes);
    ~LocalPool();
    LocalPool(const LocalPool&) = delete;
    LocalPool& operator=(const LocalPool&) = delete;
    uint8_t* base() const { return base_; }
    uint64_t bytes() const { return bytes_; }
    LocalShared& shared() const { return *reinterpret_cast<LocalShared*>(base_); }

private:
    uint8_t* base_ = nullptr;
    uint64_t bytes_ = 0;
};

class LocalTransport final : public Transport {
public:
    explicit LocalTransport(LocalPool& pool);

    uint64_t incarnation() override { return sh_.incarnation; }
    uint64_t client_id() override { return client_id_; }
    const std::string& address() const override { return address_; }

    void read(uint64_t offset, void* dst, uint32_t len) override;
    void write(uint64_t offset, const void* src, uint32_t len) override;
    uint64_t cas(uint64_t offset, uint64_t expected, uint64_t desired) override;
    uint64_t faa(uint64_t offset, uint64_t add) override;
    void batch(RemoteOp* ops, size_t n) override;
    std::vector<uint8_t> rpc(net::Op op, const void* payload, uint32_t len) override;

private:
    uint8_t* at(uint64_t offset, uint64_t len, bool atomic) const;
    uint8_t* base_;
    uint64_t bytes_;
    LocalShared& sh_;
    uint64_t client_id_;
    std::string address_ = "local://";
};

}  // namespace dex::bench
