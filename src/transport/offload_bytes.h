// The compute side's OFFLOAD_BYTES call (net/protocol.h; src/README.md
// "Offloading"): an offloaded lookup, insert or delete on a tree of slotted
// nodes (byte-string keys), sent to the memory node that holds the start
// node. The tree decides when to offload (as tree/offload_path.cpp does for
// fixed trees) and what to do with the answer; this is only the round trip:
// encode, send, check and decode the reply.
#pragma once
#include <cstdint>
#include <string_view>

#include "common/gaddr.h"
#include "net/protocol.h"
#include "transport/remote_memory.h"
#include "transport/transport.h"
#include "tree/node_layout.h"

namespace dex {

struct ByteOffload {
    uint8_t kind = net::kOffloadLeaf;  // net::OffloadKind
    GAddr start = 0;                   // remote (not swizzled) address of the start node
    uint8_t start_level = 0;           // its level
    uint32_t tree_id = 0;
    // kOffloadLeaf: the search bytes (empty: -inf); insert / delete: the
    // entry (key bytes + heap TID). At most net::kMaxOffloadKeyBytes.
    std::string_view key;
    // kOffloadInsert: pool offset of a journal slot on the start's memory
    // node (0: none) and the record written there first (at most
    // net::kMaxOffloadRecordBytes, non-empty exactly when journal != 0).
    uint64_t journal = 0;
    std::string_view record;
};

struct ByteOffloadReply {
    uint8_t status = net::kOffloadRestart;  // net::OffloadStatus
    GAddr leaf = 0;                         // the leaf reached (Done / Noop)
    bool has_image = false;                 // status Done: `image` is the leaf (as read / as published)
    Node image;                             // a slotted node's bytes (tree/slotted_node.h) when has_image
};

// Sends `req` over `t`, which must be the connection to gaddr_node(req.start).
// A write holds interrupts while it waits (as the fixed offload does: the
// memory node may have applied it, so its answer is waited for; the op
// timeout still bounds the wait). Throws Error kInvalid for a request the
// wire format refuses (nothing is sent), kProtocol for a reply that is short,
// carries an unknown status or names a leaf on another memory node, and
// whatever the transport throws (the memory node's kStatusProtocol for a
// payload it refuses, kStatusUnsupported where it executes no offloaded
// writes). Check t.offload_bytes_allowed() first: an older memory node
// closes the connection on the unknown op.
ByteOffloadReply offload_bytes(Transport& t, const ByteOffload& req);
// The same, to the memory node the start address names.
inline ByteOffloadReply offload_bytes(RemoteMemory& mem, const ByteOffload& req) {
    return offload_bytes(mem.node(gaddr_node(req.start)), req);
}

}  // namespace dex
