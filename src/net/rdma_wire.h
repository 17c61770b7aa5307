// What the rdma:// transport and dex-memnode --rdma-listen agree on, on top
// of net/protocol.h.
//
// Connection: librdmacm (RDMA_PS_TCP, RC QP). Two-sided messages are the TCP
// frames unchanged: one request frame (FrameHeader + payload) per SEND, one
// response frame per SEND back, at most kRdmaMsgBytes each, at most
// kRdmaDepth requests outstanding per connection. The first SEND must be the
// HELLO; its OK response payload is HelloReply followed by RdmaHelloExt, the
// only place where the pool's address and rkey are disclosed. One-sided verbs
// (READ/WRITE/CMP_AND_SWP/FETCH_AND_ADD) then go straight to the pool: the
// remote address of pool offset o is pool_addr + o.
#pragma once
#include <cstdint>

#include "net/protocol.h"

namespace dex::net {

constexpr uint32_t kRdmaMsgBytes = 256u * 1024;  // largest two-sided message (frame header included)
constexpr uint32_t kRdmaDepth = 4;               // receive buffers the memory node posts per connection
// The largest OFFLOAD_BATCH (request and reply) is one message: a batch needs no splitting for RDMA.
static_assert(sizeof(FrameHeader) + kMaxOffloadBatch * sizeof(OffloadRequest) <= kRdmaMsgBytes &&
              sizeof(FrameHeader) + kMaxOffloadBatch * sizeof(OffloadReply) <= kRdmaMsgBytes);
// So is the largest OFFLOAD_BYTES request and its reply (with the leaf image).
static_assert(sizeof(FrameHeader) + kMaxOffloadBytesPayload <= kRdmaMsgBytes &&
              sizeof(FrameHeader) + sizeof(OffloadReply) + DEX_NODE_BYTES <= kRdmaMsgBytes);
// And the largest OFFLOAD_BYTES_BATCH (256 longest sub-requests) and its replies.
static_assert(sizeof(FrameHeader) + kMaxOffloadBytesBatchPayload <= kRdmaMsgBytes &&
              sizeof(FrameHeader) + kMaxOffloadBatch * sizeof(OffloadReply) <= kRdmaMsgBytes);

// And the largest OFFLOAD_SPLIT reply (leaf, sibling, parent, parent sibling and grandparent images).
static_assert(sizeof(FrameHeader) + sizeof(OffloadRequest) + sizeof(OffloadSplitExt) <= kRdmaMsgBytes &&
              sizeof(FrameHeader) + kMaxOffloadSplitReply <= kRdmaMsgBytes);
// And OFFLOAD_SPLIT_IMAGE's request (its reply is an OFFLOAD_SPLIT reply).
static_assert(sizeof(FrameHeader) + kOffloadSplitImageRequest + sizeof(OffloadSpareExt) <= kRdmaMsgBytes);
// And OFFLOAD_DIRTY_SPLIT's and the largest OFFLOAD_BYTES_SPLIT's requests
// (their replies are OFFLOAD_SPLIT replies).
static_assert(sizeof(FrameHeader) + kOffloadDirtySplitRequest <= kRdmaMsgBytes &&
              sizeof(FrameHeader) + kMaxOffloadBytesPayload + sizeof(OffloadSplitExt) + sizeof(OffloadSpareExt) <=
                  kRdmaMsgBytes);
// And the largest OFFLOAD_BATCH_SPLIT (256 items; every one split: 256 tails, 64 parent images: 78 KiB).
static_assert(sizeof(FrameHeader) + kMaxOffloadBatchSplitRequest <= kRdmaMsgBytes &&
              sizeof(FrameHeader) + kMaxOffloadBatchSplitReply <= kRdmaMsgBytes);
// And the largest OFFLOAD_BYTES_DIRTY_SPLIT and OFFLOAD_BYTES_SPLIT_IMAGE (their replies are OFFLOAD_SPLIT replies).
static_assert(sizeof(FrameHeader) + kMaxOffloadBytesDirtySplitRequest <= kRdmaMsgBytes &&
              sizeof(FrameHeader) + kMaxOffloadBytesPayload + sizeof(OffloadSplitExt) + sizeof(OffloadImageExt) +
                      DEX_NODE_BYTES + sizeof(OffloadSpareExt) <=
                  kRdmaMsgBytes);
// And the largest OFFLOAD_KILL (its reply: a reply, a tail, a leaf).
static_assert(sizeof(FrameHeader) + kMaxOffloadKillRequest <= kRdmaMsgBytes);
// And the largest OFFLOAD_BYTES_BATCH_SPLIT (256 longest items: 114 KiB; every one split: 110 KiB).
static_assert(sizeof(FrameHeader) + kMaxOffloadBytesBatchSplitRequest <= kRdmaMsgBytes &&
              sizeof(FrameHeader) + kMaxOffloadBytesBatchSplitReply <= kRdmaMsgBytes);

#pragma pack(push, 1)
struct RdmaHelloExt {
    uint64_t pool_addr;   // remote virtual address of pool offset 0
    uint64_t pool_bytes;  // addressable bytes (bounds for one-sided verbs)
    uint32_t rkey;        // of the pool's memory region
    uint32_t msg_bytes;   // kRdmaMsgBytes as the node sees it
    uint32_t depth;       // requests the node accepts outstanding on this connection
    uint32_t pad;
};
static_assert(sizeof(RdmaHelloExt) == 32);

// Private data of the REJECT that answers a connect request beyond the node's
// --max-connections, so that the client can say why instead of "rejected".
struct RdmaRefusal {
    uint32_t magic;            // kResponseMagic
    uint16_t status;           // kStatusRefused
    uint16_t pad;
    uint32_t max_connections;
};
static_assert(sizeof(RdmaRefusal) == 12);
#pragma pack(pop)

}  // namespace dex::net
