// The transport interface: everything the tree needs from remote memory.
//
// One Transport = one connection to one memory node. Implementations: TCP
// (tcp_transport.h), rdma-core verbs (rdma_transport.h), in-process
// (inproc_transport.h, unit tests). The tree never sees which one it has. Every operation is
// counted in dex::stats() by the implementation (see common/stats.h).
//
// Addresses passed here are pool offsets on this memory node (gaddr_offset()).
// All calls throw dex::Error on failure (timeout, interrupt, lost connection,
// remote error); after a kProtocol/kTimeout/kInterrupted error the connection is
// closed and the next call reconnects (the incarnation is re-checked then).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "net/protocol.h"

namespace dex {

struct RemoteOp {
    enum Kind : uint8_t { kRead, kWrite, kCas, kFaa } kind;
    uint64_t offset = 0;
    void* buf = nullptr;          // kRead: destination; kWrite: source (const in practice)
    uint32_t len = 0;             // kRead/kWrite byte count
    uint64_t compare = 0;         // kCas: expected
    uint64_t swap_or_add = 0;     // kCas: desired; kFaa: addend
    uint64_t result = 0;          // kCas/kFaa: old value (out)
};

class Transport {
public:
    virtual ~Transport() = default;

    // Connection facts from the handshake.
    virtual uint64_t incarnation() = 0;   // connects if needed
    virtual uint64_t client_id() = 0;     // remote-lock owner id of this connection (connects if needed)
    // The id of the connection open right now, 0 if there is none: never
    // connects. A holder of remote locks checks it before every write, so it
    // never writes through a newer connection than the one its locks belong to.
    virtual uint64_t connected_client_id() { return client_id(); }
    virtual const std::string& address() const = 0;  // "tcp://host:port" etc., for messages

    // One-sided verbs.
    virtual void read(uint64_t offset, void* dst, uint32_t len) = 0;
    virtual void write(uint64_t offset, const void* src, uint32_t len) = 0;
    virtual uint64_t cas(uint64_t offset, uint64_t expected, uint64_t desired) = 0;  // returns old
    virtual uint64_t faa(uint64_t offset, uint64_t add) = 0;                          // returns old
    // Several verbs in one round trip, executed in order.
    virtual void batch(RemoteOp* ops, size_t n) = 0;

    // Two-sided RPC: op is one of the kOp* RPC codes; payload/response as in net/protocol.h.
    virtual std::vector<uint8_t> rpc(net::Op op, const void* payload, uint32_t len) = 0;

    // Whether the memory node executes offloaded writes (kOffloadInsert /
    // kOffloadDelete): its HELLO's kHelloCpuAtomics flag. False where its CPU's
    // atomics are not atomic with respect to its RDMA NIC's (src/README.md
    // "Offloading"); the tree then writes one-sided. Connects if needed.
    virtual bool offload_writes_allowed() { return true; }
    // Whether the memory node takes OFFLOAD_BATCH (kHelloOffloadBatch) and
    // executes offloaded writes: batched inserts go there in one round trip;
    // otherwise they are inserted one at a time. Connects if needed.
    virtual bool offload_batch_allowed() { return false; }
    // Whether the memory node takes OFFLOAD_BYTES (kHelloOffloadBytes):
    // offloads on trees of slotted nodes (transport/offload_bytes.h). Writes
    // also need offload_writes_allowed(). Connects if needed.
    virtual bool offload_bytes_allowed() { return false; }
    // Whether the memory node takes OFFLOAD_BYTES_BATCH (kHelloOffloadBytesBatch)
    // and executes offloaded writes: a slotted tree's batched inserts go there
    // in one round trip. Connects if needed.
    virtual bool offload_bytes_batch_allowed() { return false; }
    // Whether the memory node takes OFFLOAD_SPLIT (kHelloOffloadSplit) and
    // executes offloaded writes: an insert into a full leaf of a fixed tree
    // may be split there. Connects if needed.
    virtual bool offload_split_allowed() { return false; }
    // Whether the memory node takes OFFLOAD_BATCH_SPLIT (kHelloOffloadBatchSplit)
    // and executes offloaded writes: a fixed tree's batched inserts go there,
    // and a full leaf is split there instead of coming back. Connects if needed.
    virtual bool offload_batch_split_allowed() { return false; }
    // Whether the memory node takes OFFLOAD_SPLIT_IMAGE (kHelloOffloadSplitImage)
    // and executes offloaded writes: a write-back leaf that fills up is split
    // there from its cached image. Connects if needed.
    virtual bool offload_split_image_allowed() { return false; }
    // Whether the memory node takes OFFLOAD_DIRTY_SPLIT (kHelloOffloadDirtySplit)
    // and executes offloaded writes: a dirty write-back leaf whose entries may
    // not reach remote memory yet is split there in one round trip. Connects
    // if needed.
    virtual bool offload_dirty_split_allowed() { return false; }
    // Whether the memory node takes OFFLOAD_BYTES_SPLIT (kHelloOffloadBytesSplit)
    // and executes offloaded writes: a slotted tree's full leaf is split
    // there in one round trip. Connects if needed.
    virtual bool offload_bytes_split_allowed() { return false; }
    // Whether the memory node takes OFFLOAD_BYTES_BATCH_SPLIT
    // (kHelloOffloadBytesBatchSplit) and executes offloaded writes: a slotted
    // tree's batched inserts go there, and a full leaf is split there instead
    // of coming back. Connects if needed.
    virtual bool offload_bytes_batch_split_allowed() { return false; }
    // Whether the memory node takes OFFLOAD_BYTES_DIRTY_SPLIT
    // (kHelloOffloadBytesDirtySplit) and executes offloaded writes: a dirty
    // write-back slotted leaf is split there in one round trip. Connects if
    // needed.
    virtual bool offload_bytes_dirty_split_allowed() { return false; }
    // Whether the memory node takes OFFLOAD_BYTES_SPLIT_IMAGE
    // (kHelloOffloadBytesSplitImage) and executes offloaded writes: a
    // write-back slotted leaf that fills up is split there from its cached
    // image. Connects if needed.
    virtual bool offload_bytes_split_image_allowed() { return false; }
    // Whether the memory node takes OFFLOAD_KILL (kHelloOffloadKill) and
    // executes offloaded writes: a write-through tree's dead entries go in
    // one round trip. Connects if needed.
    virtual bool offload_kill_allowed() { return false; }
    // Whether OFFLOAD_SPLIT and OFFLOAD_SPLIT_IMAGE may carry a spare sibling
    // block (kHelloSplitSpare): the split's new sibling is then admitted to
    // the cache from the reply. Connects if needed.
    virtual bool split_spare_allowed() { return false; }
    // Whether OFFLOAD_SPLIT / OFFLOAD_BYTES_SPLIT may carry an
    // OffloadParentSplitExt (kHelloSplitParent): the node then also splits a
    // full parent.
    virtual bool split_parent_allowed() { return false; }
    // Whether this transport's one-sided operations (read, write, CAS) are
    // served by the memory node's CPU too, as TCP's are (a request per op to
    // its worker threads), rather than bypassing it (RDMA verbs, in-process
    // memory). DEX 6.1 weighs the memory node's CPU against one-sided
    // operations that do not use it; where they do, a single-leaf write done
    // one-sided costs that CPU three requests where an offload costs one
    // (BTree::should_offload_leaf_write).
    virtual bool one_sided_uses_node_cpu() const { return false; }

    // Optional hooks (no-ops unless the transport has a use for them).
    // A local memory region (e.g. the shared node cache) that reads may land
    // in and writes may come from: RDMA registers it once per process so such
    // transfers skip the bounce buffer. The region must outlive the transport.
    virtual void register_region(void* base, size_t len) {}
    // Close the connection now (backend exit); the next call reconnects.
    virtual void disconnect() {}
};

// Called while waiting on the network, every few milliseconds. Returns true if
// the wait must be abandoned (query cancel, statement_timeout, backend exit):
// the transport then closes the connection and throws ErrorCode::kInterrupted.
// It must not longjmp or throw. Default: never interrupts.
using InterruptCheck = bool (*)();
void set_interrupt_check(InterruptCheck fn);
bool interrupt_requested();  // consults the hook unless interrupts are held

// While an InterruptHold is alive (e.g. a remote lock is held), interrupts are
// not honoured; only the op timeout ends a wait. Keeps the tree consistent.
class InterruptHold {
public:
    InterruptHold();
    ~InterruptHold();
    InterruptHold(const InterruptHold&) = delete;
    InterruptHold& operator=(const InterruptHold&) = delete;
};

struct TransportOptions {
    int connect_timeout_ms = 5000;
    int op_timeout_ms = 30000;
    std::string token;  // shared secret sent in HELLO ("" = none)
};

}  // namespace dex
