// The offloaded RPCs of the memory node (OFFLOAD, OFFLOAD_BATCH, the
// byte-string and split forms; net/protocol.h, src/README.md "Offloading"):
// each request checked whole before anything runs (a malformed one is a
// protocol error and changes nothing), refused where this node's CPU may not
// take lock words (kHelloCpuAtomics), executed on the pool
// (engine/offload*.cpp), counted. The engine keeps the pool, its allocator
// and namespaces; this class reaches them only through Env.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/request_fail.h"
#include "net/protocol.h"

namespace dex::memnode {

class OffloadRequests {
public:
    struct Env {
        uint8_t*& pool;  // (set when the engine maps its pool, after this is made)
        uint64_t& pool_bytes;
        const EngineOptions& opts;
        const std::atomic<bool>& cpu_atomics;
        std::atomic<uint64_t>& offloads;
        std::function<Fail(const std::string& what)> no_cpu_atomics;
        // One node-sized block of namespace ns for a split's sibling (0: none).
        std::function<uint64_t(uint64_t ns)> split_alloc;
        // Whether `off` is a node-sized block ns took and has not freed.
        std::function<bool(uint64_t ns, uint64_t off)> ns_owns_block;
    };
    explicit OffloadRequests(Env env)
        : pool(env.pool),
          pool_bytes(env.pool_bytes),
          opts(env.opts),
          cpu_atomics(env.cpu_atomics),
          offloads(env.offloads),
          no_cpu_atomics(std::move(env.no_cpu_atomics)),
          split_alloc(std::move(env.split_alloc)),
          ns_owns_block(std::move(env.ns_owns_block)) {}

    // Whether `op` is one of the requests handle() answers.
    static bool handles(uint16_t op);
    // Answers one request of those ops from connection `client` (its remote-
    // lock owner id); throws Fail.
    void handle(const net::FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp, uint64_t client);

private:
    uint8_t*& pool;
    uint64_t& pool_bytes;
    const EngineOptions& opts;
    const std::atomic<bool>& cpu_atomics;
    std::atomic<uint64_t>& offloads;
    std::function<Fail(const std::string& what)> no_cpu_atomics;
    std::function<uint64_t(uint64_t ns)> split_alloc;
    std::function<bool(uint64_t ns, uint64_t off)> ns_owns_block;

    void exact(const net::FrameHeader& hdr, uint32_t want) const;
    void do_offload(const net::FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp, uint64_t client);
    void do_offload_bytes(const net::FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp,
                          uint64_t client);
    void do_offload_kill(const net::FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp,
                         uint64_t client);
    // --offload-work-us per offloaded operation: busy, not asleep, so the
    // worker thread stays occupied.
    void offload_work() const;

    // OFFLOAD_SPLIT: an offloaded insert that splits a full leaf here
    // (engine/offload_split.cpp); the sibling comes from the tree's namespace
    // as an ALLOC of one node would. A namespace that does not exist (or a
    // full pool) only means "no split here": kOffloadNeedsSmo, nothing changed.
    void do_offload_split(const net::FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp,
                          uint64_t client);

    // OFFLOAD_SPLIT_IMAGE: a write-back leaf's split from the compute
    // server's image (engine/offload.cpp), the sibling from the tree's
    // namespace as for OFFLOAD_SPLIT.
    void do_offload_split_image(const net::FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp,
                                uint64_t client);

    // OFFLOAD_BYTES_SPLIT: OFFLOAD_SPLIT for a slotted tree -- an
    // OFFLOAD_BYTES insert, its split extension and spare at the end.
    void do_offload_bytes_split(const net::FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp,
                                uint64_t client);

    // OFFLOAD_BYTES_SPLIT_IMAGE: OFFLOAD_SPLIT_IMAGE for a slotted tree -- an
    // OFFLOAD_BYTES insert, then the split extension, the image's and the spare.
    void do_offload_bytes_split_image(const net::FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp,
                                      uint64_t client);

    // OFFLOAD_DIRTY_SPLIT: a dirty write-back leaf's split of what remote
    // memory holds (engine/offload.cpp), the sibling the block the request
    // names -- only if the tree's namespace owns it --, then the reply's
    // OffloadSpareTail as for split_request's spares.
    void do_offload_dirty_split(const net::FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp,
                                uint64_t client);

    // OFFLOAD_BYTES_DIRTY_SPLIT: the same for a slotted leaf.
    void do_offload_bytes_dirty_split(const net::FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp,
                                      uint64_t client);

    // Both dirty splits: the sibling block the request names, only if the
    // tree's namespace owns it, then the reply's OffloadSpareTail.
    template <class Run>
    void dirty_split_request(uint64_t ns, uint64_t sibling, std::vector<uint8_t>& resp, Run run);

    // What both split requests share: the length (`base` bytes, or `base` +
    // OffloadSpareExt: kHelloSplitSpare), the sibling's allocation -- the
    // spare the request names if the namespace owns that block, else a new
    // one --, and the reply's OffloadSpareTail: the spare the compute server
    // holds from now on (the one it sent if no split took it, else a fresh
    // block, allocated ahead so that its next split's sibling is known
    // before the memory node publishes it). `parent_ext` (OFFLOAD_SPLIT,
    // OFFLOAD_BYTES_SPLIT): the request may go on with an
    // OffloadParentSplitExt after the spare's (kHelloSplitParent).
    template <class Run>
    void split_request(const net::FrameHeader& hdr, size_t base, const net::OffloadSplitExt& ext,
                       const uint8_t* payload, std::vector<uint8_t>& resp, const char* what, Run run,
                       bool parent_ext = false);

    // OFFLOAD_BATCH_SPLIT (engine/offload_batch_split.cpp): OFFLOAD_BATCH whose
    // full leaves are split here as OFFLOAD_SPLIT splits them.
    void do_offload_batch_split(const net::FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp,
                                uint64_t client);

    // OFFLOAD_BYTES_BATCH_SPLIT: OFFLOAD_BATCH_SPLIT for slotted trees.
    void do_offload_bytes_batch_split(const net::FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp,
                                      uint64_t client);

    // OFFLOAD_BATCH: every sub-request is validated before the first one is
    // executed (a malformed batch changes nothing), then each is executed
    // exactly as its own OFFLOAD would be -- its journal record, the leaf's
    // lock word taken with this connection's id, published, unlocked -- one
    // after the other, so no lock is held across sub-requests. Replies carry
    // no leaf image: the compute side drops its cached copies instead.
    void do_offload_batch(const net::FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp,
                          uint64_t client);

    // OFFLOAD_BYTES_BATCH: as OFFLOAD_BATCH, for slotted trees -- all checked
    // first, then each sub-request exactly as its own OFFLOAD_BYTES, no lock
    // held across them, no leaf images in the replies.
    void do_offload_bytes_batch(const net::FrameHeader& hdr, const uint8_t* payload, std::vector<uint8_t>& resp,
                                uint64_t client);
};

}  // namespace dex::memnode
