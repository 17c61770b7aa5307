// dex-memnode request engine: pool, allocator, namespaces, verbs and RPCs.
//
// Thread safety: handle() may be called concurrently from any number of
// threads (one ClientSession per connection, used by one thread at a time).
// One-sided verbs touch only pool memory (memcpy / __atomic builtins, exactly
// as RDMA would: concurrent torn reads are allowed). Allocator and namespace
// state live under `mu`; live client ids under `clients_mu`; the CPU-atomics
// refusal and the liveness hook under `hook_mu`.
#include "engine/engine.h"
#include "engine/extent_allocator.h"
#include "engine/offload.h"
#include "engine/offload_requests.h"
#include "engine/request_fail.h"
#include "tree/node_layout.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_set>

namespace dex::memnode {

using namespace dex::net;

namespace {

constexpr uint64_t kGranule = 1024;  // allocation granularity = node size
constexpr uint64_t kHugePage = 2ull << 20;

// Bounds-checked little-endian reader over a request payload.
struct Cursor {
    const uint8_t* p;
    size_t n;
    template <class T>
    bool get(T& v) {
        if (n < sizeof(T)) return false;
        std::memcpy(&v, p, sizeof(T));
        p += sizeof(T);
        n -= sizeof(T);
        return true;
    }
    bool skip(size_t k, const uint8_t** at) {
        if (n < k) return false;
        *at = p;
        p += k;
        n -= k;
        return true;
    }
};

std::string hex(uint64_t v) {
    char b[32];
    std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
    return b;
}

bool token_equal(const std::string& a, const uint8_t* b, size_t blen) {
    // Constant time in the lengths' maximum; never reads out of bounds.
    size_t n = a.size() > blen ? a.size() : blen;
    volatile uint8_t diff = static_cast<uint8_t>(a.size() != blen);
    for (size_t i = 0; i < n; i++) {
        uint8_t x = i < a.size() ? static_cast<uint8_t>(a[i]) : 0;
        uint8_t y = i < blen ? b[i] : 0;
        diff = diff | static_cast<uint8_t>(x ^ y);
    }
    return diff == 0;
}

struct Namespace {
    uint64_t id = 0;
    uint8_t tag[kNamespaceTagLen] = {};
    uint64_t root = 0;
    std::map<uint64_t, uint64_t> extents;  // offset -> length: everything taken from the pool
    uint64_t bytes = 0;                    // sum of extents
    std::set<uint64_t> free_blocks;        // 1 KiB blocks FREEd inside extents, reused by ALLOC(1024)
};

// A parsed one-sided verb (standalone or inside a BATCH).
struct Verb {
    uint16_t op;
    uint64_t off;
    uint32_t len;
    const uint8_t* data;  // WRITE payload
    uint64_t a, b;        // CAS: expected, desired; FAA: add
};

}  // namespace

struct Engine::Impl {
    EngineOptions opts;
    uint8_t* pool = nullptr;
    size_t map_len = 0;
    uint64_t pool_bytes = 0;   // addressable bytes (bounds)
    uint64_t alloc_end = 0;    // allocator limit (floor to granule)
    bool huge = false;
    uint64_t incarnation = 0;

    mutable std::mutex mu;  // allocator + namespaces
    ExtentAllocator extents;  // the pool's free extents
    std::map<uint64_t, Namespace> nss;
    uint64_t next_ns = 1;

    mutable std::mutex clients_mu;
    std::unordered_set<uint64_t> live;
    uint64_t next_client = 1;  // never reused within this incarnation (src/README.md "Synchronization")

    // Set before serving (refuse_cpu_atomics), read by every request after.
    std::atomic<bool> cpu_atomics{true};
    mutable std::mutex hook_mu;  // cpu_atomics_why, liveness (held while `liveness` runs)
    std::string cpu_atomics_why;
    LivenessCheck liveness;

    std::atomic<uint64_t> requests{0};
    std::atomic<uint64_t> offloads{0};  // OFFLOAD requests executed
    // The OFFLOAD* requests (engine/offload_requests.cpp), over this pool.
    OffloadRequests offload_rq{OffloadRequests::Env{
        pool, pool_bytes, opts, cpu_atomics, offloads,
        [this](const std::string& what) { return no_cpu_atomics(what); },
        [this](uint64_t ns) { return split_alloc(ns); },
        [this](uint64_t ns, uint64_t off) { return ns_owns_block(ns, off); }}};

    // ---- pool -----------------------------------------------------------
    void map_pool() {
        pool_bytes = opts.pool_bytes;
        if (pool_bytes < kPoolReservedBytes + kGranule)
            throw std::runtime_error("pool of " + std::to_string(pool_bytes) + " bytes is too small (minimum " +
                                     std::to_string(kPoolReservedBytes + kGranule) + ")");
        if (pool_bytes > (1ull << 48))
            throw std::runtime_error("pool of " + std::to_string(pool_bytes) +
                                     " bytes exceeds the 48-bit address space of a memory node");
        void* p = MAP_FAILED;
        if (opts.try_hugepages) {
            size_t len = (pool_bytes + kHugePage - 1) / kHugePage * kHugePage;
            p = mmap(nullptr, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (opts.touch_pool ? MAP_POPULATE : 0),
                     -1, 0);
            if (p != MAP_FAILED) {
                map_len = len;
                huge = true;
            }
        }
        if (p == MAP_FAILED) {
            size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
            size_t len = (pool_bytes + page - 1) / page * page;
            p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED)
                throw std::runtime_error("could not allocate a pool of " + std::to_string(pool_bytes) +
                                         " bytes: " + std::strerror(errno));
            map_len = len;
#ifdef MADV_HUGEPAGE
            if (opts.try_hugepages) madvise(p, len, MADV_HUGEPAGE);  // transparent huge pages if available
#endif
        }
        pool = static_cast<uint8_t*>(p);
        if (opts.touch_pool) {
            // Pre-fault every page so the pool's size is real memory now, not at first use.
            size_t step = huge ? kHugePage : static_cast<size_t>(sysconf(_SC_PAGESIZE));
            for (size_t i = 0; i < map_len; i += step) reinterpret_cast<volatile uint8_t*>(pool)[i] = 0;
        }
        alloc_end = pool_bytes / kGranule * kGranule;
        extents.add_free(kPoolReservedBytes, alloc_end - kPoolReservedBytes);
    }

    // ALLOC's allocation for namespace n (caller holds mu): a freed block of
    // its own first, else a new extent. False: out of space.
    bool ns_alloc(Namespace& n, uint64_t bytes, uint64_t& off) {
        if (bytes <= kGranule && !n.free_blocks.empty()) {
            off = *n.free_blocks.begin();
            n.free_blocks.erase(n.free_blocks.begin());
            return true;
        }
        uint64_t len = bytes > alloc_end ? 0 : (bytes + kGranule - 1) / kGranule * kGranule;
        if (len == 0 || !extents.alloc(len, off)) return false;
        n.extents.emplace(off, len);
        n.bytes += len;
        return true;
    }

    Namespace& ns_get(uint64_t id) {
        auto it = nss.find(id);
        if (it == nss.end()) throw Fail{kStatusNoNamespace, "namespace " + std::to_string(id) + " does not exist"};
        return it->second;
    }

    // Whether `off` is a node-sized block namespace `ns` took from the pool
    // and has not FREEd (a spare a split may write).
    bool ns_owns_block(uint64_t ns, uint64_t off) {
        std::lock_guard<std::mutex> g(mu);
        auto n = nss.find(ns);
        if (n == nss.end() || off < kPoolReservedBytes || off % kGranule != 0 || off > pool_bytes - kNodeSize)
            return false;
        auto it = n->second.extents.upper_bound(off);
        if (it == n->second.extents.begin()) return false;
        --it;
        return off + kNodeSize <= it->first + it->second && !n->second.free_blocks.count(off);
    }

    // One node-sized block of namespace `ns` for a memory-node split, as an
    // ALLOC of one node would hand out; 0: no such namespace or no space (the
    // insert then answers kOffloadNeedsSmo, nothing changed).
    uint64_t split_alloc(uint64_t ns) {
        std::lock_guard<std::mutex> g(mu);
        auto it = nss.find(ns);
        uint64_t off = 0;
        return it != nss.end() && ns_alloc(it->second, kNodeSize, off) ? off : 0;
    }

    // ---- verbs -----------------------------------------------------------
    void check_range(uint16_t op, uint64_t off, uint64_t len) const {
        if (len > kMaxPayload)
            throw Fail{kStatusBounds, op_label(op) + " of " + std::to_string(len) + " bytes exceeds the " +
                                          std::to_string(kMaxPayload) + "-byte limit"};
        if (off < kPoolReservedBytes || off > pool_bytes || len > pool_bytes - off)
            throw Fail{kStatusBounds, op_label(op) + " of [" + hex(off) + ", +" + std::to_string(len) +
                                          ") is outside the pool (valid offsets " + hex(kPoolReservedBytes) +
                                          ".." + hex(pool_bytes) + ")"};
    }
    void check_atomic(uint16_t op, uint64_t off) const {
        check_range(op, off, 8);
        if (off % 8 != 0) throw Fail{kStatusAlign, op_label(op) + " at " + hex(off) + " is not 8-byte aligned"};
    }
    // The kStatusUnsupported refusal of a request that needs a CPU atomic.
    Fail no_cpu_atomics(const std::string& what) const {
        std::string why;
        {
            std::lock_guard<std::mutex> g(hook_mu);
            why = cpu_atomics_why;
        }
        return Fail{kStatusUnsupported,
                    what + " needs an atomic executed by this memory node's CPU, and " + why +
                        ": it executes none (CAS/FAA over TCP, offloaded writes). Connect every compute server "
                        "of this memory node over rdma://"};
    }

    // Parses one verb's payload (exactly `c.n` bytes) and validates it.
    void parse_verb(uint16_t op, Cursor c, Verb& v) const {
        v.op = op;
        v.off = v.a = v.b = 0;
        v.len = 0;
        v.data = nullptr;
        bool ok = true;
        switch (op) {
            case kOpRead:
            case kOpWrite: {
                uint32_t pad;
                ok = c.get(v.off) && c.get(v.len) && c.get(pad);
                if (ok && op == kOpWrite) ok = c.skip(v.len, &v.data);
                break;
            }
            case kOpCas: ok = c.get(v.off) && c.get(v.a) && c.get(v.b); break;
            case kOpFaa: ok = c.get(v.off) && c.get(v.a); break;
            default: throw Fail{kStatusProtocol, "unknown verb " + std::to_string(op)};
        }
        if (!ok || c.n != 0)
            throw Fail{kStatusProtocol, op_label(op) + ": payload has the wrong length"};
        if (op == kOpCas || op == kOpFaa)
            check_atomic(op, v.off);
        else
            check_range(op, v.off, v.len);
    }
    uint32_t result_len(const Verb& v) const {
        return v.op == kOpRead ? v.len : (v.op == kOpWrite ? 0 : 8);
    }
    // Executes a validated verb, appending its result at `out` (result_len bytes).
    void exec_verb(const Verb& v, uint8_t* out) {
        uint8_t* p = pool + v.off;
        switch (v.op) {
            case kOpRead:
                if (v.len == 8 && v.off % 8 == 0) {
                    uint64_t x = __atomic_load_n(reinterpret_cast<uint64_t*>(p), __ATOMIC_ACQUIRE);
                    std::memcpy(out, &x, 8);
                } else {
                    __atomic_thread_fence(__ATOMIC_ACQUIRE);
                    std::memcpy(out, p, v.len);
                }
                break;
            case kOpWrite:
                if (v.len == 8 && v.off % 8 == 0) {
                    uint64_t x;
                    std::memcpy(&x, v.data, 8);
                    __atomic_store_n(reinterpret_cast<uint64_t*>(p), x, __ATOMIC_RELEASE);
                } else {
                    std::memcpy(p, v.data, v.len);
                    __atomic_thread_fence(__ATOMIC_RELEASE);
                }
                break;
            case kOpCas: {
                uint64_t exp = v.a;
                __atomic_compare_exchange_n(reinterpret_cast<uint64_t*>(p), &exp, v.b, false, __ATOMIC_SEQ_CST,
                                            __ATOMIC_SEQ_CST);
                std::memcpy(out, &exp, 8);
                break;
            }
            case kOpFaa: {
                uint64_t old = __atomic_fetch_add(reinterpret_cast<uint64_t*>(p), v.a, __ATOMIC_SEQ_CST);
                std::memcpy(out, &old, 8);
                break;
            }
        }
    }

    void do_verb(const FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp) {
        Verb v;
        parse_verb(hdr.op, Cursor{payload, hdr.payload_len}, v);
        resp.resize(result_len(v));
        exec_verb(v, resp.data());
    }

    void do_batch(const FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp) {
        if (hdr.count > kMaxBatch)
            throw Fail{kStatusProtocol, "BATCH of " + std::to_string(hdr.count) + " sub-operations exceeds the limit of " +
                                            std::to_string(kMaxBatch)};
        Verb verbs[kMaxBatch];
        Cursor c{payload, hdr.payload_len};
        uint64_t total = 0;
        for (uint32_t i = 0; i < hdr.count; i++) {
            SubOpHeader sh;
            const uint8_t* body;
            if (!c.get(sh) || !c.skip(sh.payload_len, &body))
                throw Fail{kStatusProtocol, "BATCH sub-operation " + std::to_string(i) + " is truncated"};
            if (sh.op != kOpRead && sh.op != kOpWrite && sh.op != kOpCas && sh.op != kOpFaa)
                throw Fail{kStatusProtocol, "BATCH sub-operation " + std::to_string(i) + ": " + op_label(sh.op) +
                                                " is not allowed in a batch"};
            try {
                parse_verb(sh.op, Cursor{body, sh.payload_len}, verbs[i]);
                // Refused before anything of the batch runs.
                if ((sh.op == kOpCas || sh.op == kOpFaa) && !cpu_atomics.load(std::memory_order_relaxed))
                    throw no_cpu_atomics(op_label(sh.op));
            } catch (Fail& f) {
                f.msg = "BATCH sub-operation " + std::to_string(i) + ": " + f.msg;
                throw;
            }
            total += result_len(verbs[i]);
        }
        if (c.n != 0)
            throw Fail{kStatusProtocol, "BATCH has " + std::to_string(c.n) + " trailing bytes after " +
                                            std::to_string(hdr.count) + " sub-operations"};
        if (total > kMaxPayload)
            throw Fail{kStatusProtocol, "BATCH response of " + std::to_string(total) + " bytes exceeds the limit"};
        resp.resize(total);
        uint8_t* out = resp.data();
        for (uint32_t i = 0; i < hdr.count; i++) {
            exec_verb(verbs[i], out);
            out += result_len(verbs[i]);
        }
    }

    // ---- handshake -------------------------------------------------------
    void do_hello(ClientSession& s, const FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp) {
        Cursor c{payload, hdr.payload_len};
        uint32_t version, tlen;
        const uint8_t* tok;
        if (!c.get(version) || !c.get(tlen) || tlen > kMaxTokenLen || !c.skip(tlen, &tok) || c.n != 0)
            throw Fail{kStatusProtocol, "HELLO: malformed payload"};
        if (version != kProtocolVersion)
            throw Fail{kStatusProtocol, "HELLO: protocol version " + std::to_string(version) +
                                            " is not supported (this memory node speaks version " +
                                            std::to_string(kProtocolVersion) + ")"};
        if (!opts.token.empty() && !token_equal(opts.token, tok, tlen))
            throw Fail{kStatusAuth, "authentication failed: wrong token"};
        uint64_t id;
        {
            std::lock_guard<std::mutex> g(clients_mu);
            if (next_client == 0) next_client = 1;
            if (next_client > kMaxClientId)
                throw Fail{kStatusInternal, "this memory node has handed out all " + std::to_string(kMaxClientId) +
                                                " client ids of its incarnation; restart it"};
            id = next_client++;
            live.insert(id);
        }
        s.client_id = id;
        HelloReply r{};
        r.incarnation = incarnation;
        r.pool_bytes = pool_bytes;
        r.client_id = id;
        r.version = kProtocolVersion;
        r.flags = (cpu_atomics.load(std::memory_order_relaxed) ? kHelloCpuAtomics : 0) | kHelloOffloadBatch |
                  kHelloOffloadBytes | kHelloOffloadBytesBatch | kHelloOffloadSplit |
                  kHelloOffloadBatchSplit | kHelloOffloadSplitImage | kHelloSplitSpare | kHelloOffloadDirtySplit |
                  kHelloOffloadBytesSplit | kHelloOffloadBytesBatchSplit | kHelloOffloadBytesDirtySplit |
                  kHelloOffloadBytesSplitImage | kHelloOffloadKill | kHelloSplitParent;
        put(resp, r);
    }

    // ---- RPCs ------------------------------------------------------------
    void exact(const FrameHeader& hdr, uint32_t want) const {
        if (hdr.payload_len != want)
            throw Fail{kStatusProtocol, op_label(hdr.op) + ": payload of " + std::to_string(hdr.payload_len) +
                                            " bytes, expected " + std::to_string(want)};
    }

    void do_rpc(const FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp, uint64_t client) {
        Cursor c{payload, hdr.payload_len};
        switch (hdr.op) {
            case kOpAlloc: {
                exact(hdr, 16);
                uint64_t ns = 0, bytes = 0;
                c.get(ns);
                c.get(bytes);
                if (bytes == 0) throw Fail{kStatusProtocol, "ALLOC of 0 bytes"};
                std::lock_guard<std::mutex> g(mu);
                uint64_t off = 0;
                if (!ns_alloc(ns_get(ns), bytes, off))
                    throw Fail{kStatusNoSpace, "out of space: requested " + std::to_string(bytes) + " bytes, " +
                                                   std::to_string(extents.free_total()) + " bytes free (largest free extent " +
                                                   std::to_string(extents.largest_free()) + "), pool " +
                                                   std::to_string(pool_bytes) + " bytes"};
                put(resp, off);
                return;
            }
            case kOpFree: {
                exact(hdr, 24);
                uint64_t ns = 0, off = 0, bytes = 0;
                c.get(ns);
                c.get(off);
                c.get(bytes);
                if (bytes == 0) throw Fail{kStatusProtocol, "FREE of 0 bytes"};
                std::lock_guard<std::mutex> g(mu);
                Namespace& n = ns_get(ns);
                uint64_t len = bytes > alloc_end ? alloc_end : (bytes + kGranule - 1) / kGranule * kGranule;
                auto it = n.extents.upper_bound(off);
                bool owned = it != n.extents.begin() && bytes <= alloc_end;
                if (owned) {
                    --it;
                    owned = off % kGranule == 0 && off + len <= it->first + it->second;
                }
                if (!owned)
                    throw Fail{kStatusBounds, "FREE of [" + hex(off) + ", +" + std::to_string(bytes) +
                                                  ") names memory namespace " + std::to_string(ns) +
                                                  " does not own"};
                if (off == it->first && len == it->second && len > kGranule) {
                    // A whole extent: back to the pool.
                    n.free_blocks.erase(n.free_blocks.lower_bound(off), n.free_blocks.lower_bound(off + len));
                    n.bytes -= len;
                    n.extents.erase(it);
                    extents.free(off, len);
                    return;
                }
                for (uint64_t b = off; b < off + len; b += kGranule)
                    if (n.free_blocks.count(b))
                        throw Fail{kStatusBounds, "FREE of [" + hex(off) + ", +" + std::to_string(bytes) +
                                                      "): block " + hex(b) + " is already free"};
                for (uint64_t b = off; b < off + len; b += kGranule) n.free_blocks.insert(b);
                return;
            }
            case kOpNsCreate: {
                exact(hdr, kNamespaceTagLen);
                std::lock_guard<std::mutex> g(mu);
                uint64_t id = next_ns++;
                Namespace& n = nss[id];
                n.id = id;
                std::memcpy(n.tag, payload, kNamespaceTagLen);
                put(resp, id);
                return;
            }
            case kOpNsDrop: {
                exact(hdr, 8);
                uint64_t ns = 0;
                c.get(ns);
                std::lock_guard<std::mutex> g(mu);
                Namespace& n = ns_get(ns);
                uint64_t freed = n.bytes;
                for (auto& [off, len] : n.extents) extents.free(off, len);
                nss.erase(ns);
                put(resp, freed);
                return;
            }
            case kOpNsList: {
                uint64_t start = 0;
                if (hdr.payload_len != 0) {  // no payload: from the first namespace
                    exact(hdr, 8);
                    c.get(start);
                }
                ns_list_page(start, resp);
                return;
            }
            case kOpGetRoot: {
                exact(hdr, 8);
                uint64_t ns = 0;
                c.get(ns);
                std::lock_guard<std::mutex> g(mu);
                put(resp, ns_get(ns).root);
                return;
            }
            case kOpSetRoot: {
                exact(hdr, 24);
                uint64_t ns = 0, expected = 0, desired = 0;
                c.get(ns);
                c.get(expected);
                c.get(desired);
                std::lock_guard<std::mutex> g(mu);
                Namespace& n = ns_get(ns);
                uint64_t old = n.root;
                if (old == expected) n.root = desired;
                put(resp, old);
                return;
            }
            case kOpStats: {
                exact(hdr, 0);
                put(resp, stats());
                return;
            }
            case kOpClientAlive: {
                exact(hdr, 8);
                uint64_t id = 0;
                c.get(id);
                uint64_t alive;
                {
                    std::lock_guard<std::mutex> g(clients_mu);
                    alive = id != 0 && live.count(id) ? 1 : 0;
                }
                if (alive) {
                    // Connected as far as this engine knows; a listener that
                    // cannot see a vanished peer (RDMA) checks it now, and a
                    // waiter asking again learns the outcome.
                    std::lock_guard<std::mutex> g(hook_mu);
                    if (liveness) liveness(id);
                }
                put(resp, alive);
                return;
            }
            default:
                if (OffloadRequests::handles(hdr.op)) return offload_rq.handle(hdr, payload, resp, client);
                throw Fail{kStatusProtocol, "unknown op " + std::to_string(hdr.op)};
        }
    }

    // One NS_LIST page: up to kNsListPage namespaces with id >= start, then
    // the id the next page starts at (0: none). Bounded so that a reply always
    // fits one RDMA message; the client pages until next is 0.
    void ns_list_page(uint64_t start, std::vector<uint8_t>& resp) {
        std::lock_guard<std::mutex> g(mu);
        resp.resize(4);
        uint32_t cnt = 0;
        uint64_t next = 0;
        for (auto it = nss.lower_bound(start); it != nss.end(); ++it) {
            if (cnt == kNsListPage) {
                next = it->first;
                break;
            }
            const Namespace& n = it->second;
            NsInfo info{};
            info.ns = n.id;
            info.root = n.root;
            info.bytes_allocated = n.bytes;
            std::memcpy(info.tag, n.tag, kNamespaceTagLen);
            put(resp, info);
            cnt++;
        }
        std::memcpy(resp.data(), &cnt, 4);
        put(resp, next);
    }

    net::NodeStats stats() const {
        net::NodeStats s{};
        s.incarnation = incarnation;
        s.pool_bytes = pool_bytes;
        {
            std::lock_guard<std::mutex> g(mu);
            s.used_bytes = extents.used();
            s.namespaces = nss.size();
        }
        {
            std::lock_guard<std::mutex> g(clients_mu);
            s.connections = live.size();
        }
        s.requests = requests.load(std::memory_order_relaxed);
        s.offloads = offloads.load(std::memory_order_relaxed);
        return s;
    }

    void dispatch(ClientSession& s, const FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp) {
        if (hdr.magic != kRequestMagic) throw Fail{kStatusProtocol, "bad frame magic " + hex(hdr.magic)};
        if (hdr.payload_len > kMaxPayload)
            throw Fail{kStatusProtocol, "frame payload of " + std::to_string(hdr.payload_len) +
                                            " bytes exceeds the limit of " + std::to_string(kMaxPayload)};
        // Before authentication nothing larger than a HELLO is accepted, so an
        // anonymous client cannot make a server buffer MiBs: the TCP server
        // stops at this header (it passes no payload) and closes.
        if (s.client_id == 0 && hdr.payload_len > kMaxHelloPayload)
            throw Fail{kStatusProtocol, op_label(hdr.op) + ": payload of " + std::to_string(hdr.payload_len) +
                                            " bytes before HELLO was accepted (at most " +
                                            std::to_string(kMaxHelloPayload) + " bytes until then)"};
        if (hdr.payload_len > 0 && payload == nullptr) throw Fail{kStatusProtocol, "missing payload"};
        if (hdr.count != 0 && hdr.op != kOpBatch)
            throw Fail{kStatusProtocol, op_label(hdr.op) + " with a non-zero sub-operation count"};
        if (s.client_id == 0) {
            if (hdr.op != kOpHello)
                throw Fail{kStatusAuth, op_label(hdr.op) + " before HELLO: the handshake must come first"};
            do_hello(s, hdr, payload, resp);
            return;
        }
        switch (hdr.op) {
            case kOpHello: throw Fail{kStatusProtocol, "duplicate HELLO"};
            case kOpRead:
            case kOpWrite: do_verb(hdr, payload, resp); return;
            case kOpCas:
            case kOpFaa:
                if (!cpu_atomics.load(std::memory_order_relaxed)) throw no_cpu_atomics(op_label(hdr.op));
                do_verb(hdr, payload, resp);
                return;
            case kOpBatch: do_batch(hdr, payload, resp); return;
            default: do_rpc(hdr, payload, resp, s.client_id); return;
        }
    }
};

Engine::Engine(const EngineOptions& opts) : impl_(std::make_unique<Impl>()) {
    impl_->opts = opts;
    impl_->next_client = opts.first_client_id;
    impl_->map_pool();
    std::random_device rd;
    uint64_t inc = 0;
    while (inc == 0) inc = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    impl_->incarnation = inc;
}

Engine::~Engine() {
    if (impl_ && impl_->pool) munmap(impl_->pool, impl_->map_len);
}

void Engine::handle(ClientSession& session, const FrameHeader& hdr, const uint8_t* payload, uint16_t& status,
                    std::vector<uint8_t>& response) {
    response.clear();
    status = kStatusOk;
    impl_->requests.fetch_add(1, std::memory_order_relaxed);
    auto fail = [&](uint16_t st, const std::string& msg) {
        status = st;
        response.assign(msg.begin(), msg.end());
        if (is_fatal_status(st)) session.close_after_reply = true;
    };
    try {
        impl_->dispatch(session, hdr, payload, response);
    } catch (const Fail& f) {
        fail(f.status, f.msg);
    } catch (const std::bad_alloc&) {
        fail(kStatusInternal, "memory node is out of process memory");
    } catch (const std::exception& e) {
        fail(kStatusInternal, std::string("internal error: ") + e.what());
    } catch (...) {
        fail(kStatusInternal, "internal error");
    }
}

void Engine::session_closed(ClientSession& session) {
    if (session.client_id != 0) {
        std::lock_guard<std::mutex> g(impl_->clients_mu);
        impl_->live.erase(session.client_id);
    }
    session.client_id = 0;
}

uint64_t Engine::incarnation() const { return impl_->incarnation; }
void Engine::set_next_client_id(uint64_t id) {
    std::lock_guard<std::mutex> g(impl_->clients_mu);
    impl_->next_client = id;
}
void Engine::refuse_cpu_atomics(const std::string& why) {
    {
        std::lock_guard<std::mutex> g(impl_->hook_mu);
        impl_->cpu_atomics_why = why;
    }
    impl_->cpu_atomics.store(false);
}
bool Engine::cpu_atomics() const { return impl_->cpu_atomics.load(); }
void Engine::set_liveness_check(LivenessCheck check) {
    std::lock_guard<std::mutex> g(impl_->hook_mu);
    impl_->liveness = std::move(check);
}
uint64_t Engine::pool_bytes() const { return impl_->pool_bytes; }
uint64_t Engine::used_bytes() const {
    std::lock_guard<std::mutex> g(impl_->mu);
    return impl_->extents.used();
}
bool Engine::hugepages() const { return impl_->huge; }
uint8_t* Engine::pool_base() const { return impl_->pool; }
size_t Engine::pool_map_bytes() const { return impl_->map_len; }
net::NodeStats Engine::stats() const { return impl_->stats(); }
std::string Engine::op_name(uint16_t op) { return op_label(op); }

}  // namespace dex::memnode
