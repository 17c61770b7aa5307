// LocalTransport: see local_transport.h.
#include "local_transport.h"

#include <sys/mman.h>

#include <cstring>
#include <random>

#include "common/error.h"
#include "common/gaddr.h"

namespace dex::bench {

namespace {
std::vector<uint8_t> u64_reply(uint64_t v) {
    std::vector<uint8_t> r(8);
    std::memcpy(r.data(), &v, 8);
    return r;
}
uint64_t u64_at(const void* p, uint32_t len, uint32_t i) {
    if (len < (i + 1) * 8) throw Error(ErrorCode::kProtocol, "local transport: short RPC payload");
    uint64_t v;
    std::memcpy(&v, static_cast<const uint8_t*>(p) + i * 8, 8);
    return v;
}
constexpr uint64_t kGranule = 1024;
}  // namespace

LocalPool::LocalPool(uint64_t bytes) : bytes_(bytes) {
    if (bytes < 2 * net::kPoolReservedBytes) throw Error(ErrorCode::kInvalid, "local pool too small");
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw Error(ErrorCode::kOutOfSpace, "local pool: mmap of " + std::to_string(bytes) + " bytes failed");
    base_ = static_cast<uint8_t*>(p);
    static_assert(sizeof(LocalShared) <= net::kPoolReservedBytes);
    auto* sh = new (base_) LocalShared{};
    sh->pool_bytes = bytes;
    sh->incarnation = std::random_device{}() | 1;
    sh->cursor.store(net::kPoolReservedBytes);
    sh->root.store(0);
    sh->next_client.store(1);
}

LocalPool::~LocalPool() {
    if (base_) munmap(base_, bytes_);
}

LocalTransport::LocalTransport(LocalPool& pool)
    : base_(pool.base()), bytes_(pool.bytes()), sh_(pool.shared()),
      client_id_(pool.shared().next_client.fetch_add(1)) {}

uint8_t* LocalTransport::at(uint64_t offset, uint64_t len, bool atomic) const {
    if (offset < net::kPoolReservedBytes || offset > bytes_ || len > bytes_ - offset)
        throw Error(ErrorCode::kRemote, "local transport: access outside the pool at offset " + std::to_string(offset));
    if (atomic && offset % 8) throw Error(ErrorCode::kRemote, "local transport: unaligned atomic");
    return base_ + offset;
}

// Same rule as the memory node's engine: an aligned 8-byte access is one
// atomic load/store (lock words); anything else is memcpy plus a fence. The
// tree validates every node image (version + checksum), so a copy racing with
// a writer is detected and retried exactly as over TCP.
void LocalTransport::read(uint64_t offset, void* dst, uint32_t len) {
    uint8_t* p = at(offset, len, false);
    sh_.counters.reads.fetch_add(1, std::memory_order_relaxed);
    if (len == 8 && offset % 8 == 0) {
        uint64_t x = __atomic_load_n(reinterpret_cast<uint64_t*>(p), __ATOMIC_ACQUIRE);
        std::memcpy(dst, &x, 8);
    } else {
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        std::memcpy(dst, p, len);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
    }
}

void LocalTransport::write(uint64_t offset, const void* src, uint32_t len) {
    uint8_t* p = at(offset, len, false);
    sh_.counters.writes.fetch_add(1, std::memory_order_relaxed);
    if (len == 8 && offset % 8 == 0) {
        uint64_t x;
        std::memcpy(&x, src, 8);
        __atomic_store_n(reinterpret_cast<uint64_t*>(p), x, __ATOMIC_RELEASE);
    } else {
        __atomic_thread_fence(__ATOMIC_RELEASE);
        std::memcpy(p, src, len);
        __atomic_thread_fence(__ATOMIC_RELEASE);
    }
}

uint64_t LocalTransport::cas(uint64_t offset, uint64_t expected, uint64_t desired) {
    uint8_t* p = at(offset, 8, true);
    sh_.counters.atomics.fetch_add(1, std::memory_order_relaxed);
    __atomic_compare_exchange_n(reinterpret_cast<uint64_t*>(p), &expected, desired, false, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    return expected;
}

uint64_t LocalTransport::faa(uint64_t offset, uint64_t add) {
    uint8_t* p = at(offset, 8, true);
    sh_.counters.atomics.fetch_add(1, std::memory_order_relaxed);
    return __atomic_fetch_add(reinterpret_cast<uint64_t*>(p), add, __ATOMIC_SEQ_CST);
}

void LocalTransport::batch(RemoteOp* ops, size_t n) {
    for (size_t i = 0; i < n; i++) {
        RemoteOp& op = ops[i];
        switch (op.kind) {
            case RemoteOp::kRead: read(op.offset, op.buf, op.len); break;
            case RemoteOp::kWrite: write(op.offset, op.buf, op.len); break;
            case RemoteOp::kCas: op.result = cas(op.offset, op.compare, op.swap_or_add); break;
            case RemoteOp::kFaa: op.result = faa(op.offset, op.swap_or_add); break;
        }
    }
}

std::vector<uint8_t> LocalTransport::rpc(net::Op op, const void* payload, uint32_t len) {
    sh_.counters.rpcs.fetch_add(1, std::memory_order_relaxed);
    auto check_ns = [&](uint64_t ns) {
        if (ns != kLocalNs) throw Error(ErrorCode::kNotFound, "local transport: unknown namespace " + std::to_string(ns));
    };
    switch (op) {
        case net::kOpAlloc: {
            check_ns(u64_at(payload, len, 0));
            uint64_t bytes = u64_at(payload, len, 1);
            if (bytes == 0) throw Error(ErrorCode::kRemote, "local transport: ALLOC of 0 bytes");
            uint64_t rounded = (bytes + kGranule - 1) / kGranule * kGranule;
            uint64_t off = sh_.cursor.fetch_add(rounded);
            if (off + rounded > bytes_ || off + rounded < off) {
                sh_.cursor.fetch_sub(rounded);
                throw Error(ErrorCode::kOutOfSpace, "local pool exhausted (" + std::to_string(bytes_) +
                                                        " bytes); raise --memory");
            }
            return u64_reply(off);
        }
        case net::kOpFree:
            check_ns(u64_at(payload, len, 0));
            return {};  // not reused (see header)
        case net::kOpNsCreate:
            return u64_reply(kLocalNs);
        case net::kOpNsDrop:
            check_ns(u64_at(payload, len, 0));
            return u64_reply(0);
        case net::kOpGetRoot:
            check_ns(u64_at(payload, len, 0));
            return u64_reply(sh_.root.load());
        case net::kOpSetRoot: {
            check_ns(u64_at(payload, len, 0));
            uint64_t expected = u64_at(payload, len, 1), desired = u64_at(payload, len, 2);
            sh_.root.compare_exchange_strong(expected, desired);
            return u64_reply(expected);  // old value (CAS semantics)
        }
        case net::kOpClientAlive:
            return u64_reply(1);
        case net::kOpStats: {
            net::NodeStats s{};
            s.incarnation = sh_.incarnation;
            s.pool_bytes = bytes_;
            s.used_bytes = sh_.cursor.load();
            s.namespaces = 1;
            std::vector<uint8_t> r(sizeof s);
            std::memcpy(r.data(), &s, sizeof s);
            return r;
        }
        default:
            throw Error(ErrorCode::kInvalid, "local transport: RPC " + std::to_string(op) + " not supported");
    }
}

}  // namespace dex::bench
