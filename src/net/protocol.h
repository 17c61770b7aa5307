// Wire protocol between compute side and dex-memnode (TCP; the in-process
// transport uses the same frames so unit tests exercise the same decoder).
//
// All integers little-endian (x86_64 / aarch64 native order). A request:
//
//   FrameHeader { magic, op, count, payload_len, seq }  then payload_len bytes
//
// and the memory node answers each request with exactly one response frame
// (same seq, status 0 = OK), in order. A BATCH carries `count` sub-operations
// back to back, each `SubOpHeader` + payload; they execute in order and the
// response payload is the concatenation of their result payloads (READ: the
// bytes, CAS/FAA: the old 8-byte value, WRITE: nothing).
//
// Errors: status != 0 and the payload is a UTF-8 message. For kStatusProtocol,
// kStatusBounds, kStatusAlign, kStatusAuth and kStatusRefused the server
// closes the connection after sending the reply ("bad input never crashes or
// corrupts it").
//
// CLIENT_ALIVE answers "gone" only once the connection is closed (nothing it
// sent is executed afterwards). For a client connected over RDMA it also
// makes the node probe the client's NIC (memnode/rdma_server.cpp): a host
// that vanished without a disconnect is answered "gone" within seconds of the
// first question; until then the answer is "alive".
//
// What a client can make the memory node hold: until its HELLO is accepted, a
// connection may send no frame larger than a HELLO (payload_len >
// kMaxHelloPayload is a protocol error, answered from the header alone, and
// the connection is closed without reading the payload); and a node serves at
// most `dex-memnode --max-connections` connections (TCP and RDMA together,
// authenticated or not). A TCP connection beyond that gets one response
// frame with seq 0 and status kStatusRefused as soon as it is accepted,
// before it has sent anything, and is closed; over RDMA the connect request
// is rejected with RdmaRefusal as private data (net/rdma_wire.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tree/node_capacity.h"

namespace dex::net {

constexpr uint32_t kRequestMagic = 0x44455851;   // "DEXQ"
constexpr uint32_t kResponseMagic = 0x44455852;  // "DEXR"
constexpr uint32_t kProtocolVersion = 2;       // 2: OffloadRequest carries a journal record
constexpr uint32_t kMaxPayload = 16u << 20;      // 16 MiB: larger frames are malformed
constexpr uint32_t kMaxBatch = 256;              // sub-operations per BATCH
constexpr uint32_t kMaxTokenLen = 4096;
constexpr uint32_t kMaxHelloPayload = 4 + 4 + kMaxTokenLen;  // u32 version, u32 token_len, token
constexpr size_t kNamespaceTagLen = 64;          // opaque owner tag stored with a namespace
constexpr uint64_t kPoolReservedBytes = 4096;    // offsets below this are never allocated (0 = null)

enum Op : uint16_t {
    // handshake (must be first on a connection)
    kOpHello = 1,        // req: u32 version, u32 token_len, token  resp: HelloReply
    // one-sided verbs, emulated
    kOpRead = 10,        // req: u64 offset, u32 len, u32 pad     resp: len bytes
    kOpWrite = 11,       // req: u64 offset, u32 len, u32 pad, data resp: -
    kOpCas = 12,         // req: u64 offset, u64 expected, u64 desired  resp: u64 old
    kOpFaa = 13,         // req: u64 offset, u64 add                 resp: u64 old
    kOpBatch = 14,       // req: `count` x (SubOpHeader + payload)   resp: concatenated results
    // two-sided RPCs
    kOpAlloc = 20,       // req: u64 ns, u64 bytes                   resp: u64 offset
    kOpFree = 21,        // req: u64 ns, u64 offset, u64 bytes       resp: -
    kOpNsCreate = 22,    // req: tag[64]                             resp: u64 ns
    kOpNsDrop = 23,      // req: u64 ns                              resp: u64 bytes_freed
    kOpNsList = 24,      // req: u64 start (absent: 0)               resp: u32 n, n x NsInfo, u64 next
                         //   the namespaces with id >= start in id order, at most kNsListPage of
                         //   them; next = where the next page starts, 0 = there is no more
    kOpGetRoot = 25,     // req: u64 ns                              resp: u64 root (GAddr as stored)
    kOpSetRoot = 26,     // req: u64 ns, u64 expected, u64 desired   resp: u64 old (CAS semantics)
    kOpStats = 27,       // req: -                                   resp: NodeStats
    kOpClientAlive = 28, // req: u64 client_id                       resp: u64 (1 alive, 0 gone)
    // offloading (DEX 6): the memory node finishes a traversal on its own pool
    kOpOffload = 30,     // req: OffloadRequest                      resp: OffloadReply [+ leaf image]
    kOpOffloadBatch = 31,  // req: n x OffloadRequest (writes only)   resp: n x OffloadReply, no leaf images
                           //   n = payload_len / sizeof(OffloadRequest), 1..kMaxOffloadBatch; executed one
                           //   after the other, each exactly as its own OFFLOAD; only to nodes whose HELLO
                           //   has kHelloOffloadBatch (older nodes close the connection on an unknown op)
    kOpOffloadBytes = 32,  // req: OffloadBytesHeader, key_len key bytes, record_len record bytes
                           //   resp: OffloadReply [+ leaf image], exactly as OFFLOAD
                           //   OFFLOAD for trees of slotted nodes (byte-string keys, tree/slotted_node.h);
                           //   only to nodes whose HELLO has kHelloOffloadBytes
    kOpOffloadBytesBatch = 33,  // req: n x (OffloadBytesHeader, key, record), inserts / deletes only
                                //   resp: n x OffloadReply, no leaf images; OFFLOAD_BATCH for slotted
                                //   trees (see parse_offload_bytes_batch); only to nodes whose HELLO
                                //   has kHelloOffloadBytesBatch
    kOpOffloadSplit = 34,  // req: OffloadRequest (kind kOffloadInsert) + OffloadSplitExt
                           //   resp: as OFFLOAD, or for kOffloadSplit: OffloadReply, leaf image,
                           //   OffloadSplitTail, sibling image [, parent image if tail.parent != 0]
                           //   an offloaded insert that splits a full leaf of the fixed layout on
                           //   the memory node (src/README.md "Offloading", memory-node splits);
                           //   only to nodes whose HELLO has kHelloOffloadSplit
    kOpOffloadBatchSplit = 35,  // req: OffloadBatchSplitHeader, n x OffloadBatchSplitItem (inserts only)
                                //   resp: n x OffloadReply, then one OffloadBatchSplitTail per reply whose
                                //   status is kOffloadSplit, in order, then OffloadBatchSplitImages and
                                //   its parent images; no leaf images. OFFLOAD_BATCH whose
                                //   full leaves are split by the memory node as OFFLOAD_SPLIT does; only to
                                //   nodes whose HELLO has kHelloOffloadBatchSplit
    kOpOffloadSplitImage = 36,  // req: OffloadRequest (kind kOffloadInsert, start = the leaf, level 0) +
                                //   OffloadSplitExt + OffloadImageExt + the leaf's image (kNodeSize bytes)
                                //   resp: as OFFLOAD_SPLIT. Write-back mode: the compute server's cached
                                //   frame is the newest copy of the leaf; the memory node locks the leaf at
                                //   its current version (>= OffloadImageExt::version), replaces it by the
                                //   image and inserts the key there, splitting it as OFFLOAD_SPLIT does
                                //   (src/README.md "Write-back mode", splits); only to nodes whose HELLO
                                //   has kHelloOffloadSplitImage
    // (OFFLOAD_SPLIT and OFFLOAD_SPLIT_IMAGE: + OffloadSpareExt at the end of the request, and
    //  OffloadSpareTail at the end of the reply, with nodes whose HELLO has kHelloSplitSpare;
    //  OFFLOAD_SPLIT and OFFLOAD_BYTES_SPLIT: + OffloadParentSplitExt after the OffloadSpareExt, and
    //  OffloadParentSplitTail [+ images] before the OffloadSpareTail, with nodes whose HELLO has
    //  kHelloSplitParent)
    kOpOffloadDirtySplit = 37,  // req: OffloadRequest (kind kOffloadInsert, start = the leaf, level 0,
                                //   key = the separator, no journal record) + OffloadSplitExt +
                                //   OffloadDirtySplitExt (kOffloadDirtySplitRequest bytes)
                                //   resp: as OFFLOAD_SPLIT, then OffloadSpareTail. Write-back mode, a
                                //   dirty leaf whose entries remote memory may not take yet: the memory
                                //   node splits what it holds at the separator -- the leaf locked at
                                //   OffloadDirtySplitExt::version or newer, the sibling the block it names
                                //   (else kOffloadRestart, nothing changed) -- and links the sibling into
                                //   the parent when that is simple (src/README.md "Splitting a dirty
                                //   leaf"); fixed layout (slotted: OFFLOAD_BYTES_DIRTY_SPLIT); only to
                                //   nodes whose HELLO has kHelloOffloadDirtySplit
    kOpOffloadBytesSplit = 38,  // req: an OFFLOAD_BYTES request (kind kOffloadInsert) + OffloadSplitExt +
                                //   OffloadSpareExt
                                //   resp: as OFFLOAD_SPLIT (slotted images), then OffloadSpareTail.
                                //   OFFLOAD_SPLIT for trees of slotted nodes: an insert that finds its leaf
                                //   full splits it on the memory node; only to nodes whose HELLO has
                                //   kHelloOffloadBytesSplit
    kOpOffloadBytesBatchSplit = 39,  // req: OffloadBatchSplitHeader, n x (OffloadBytesBatchSplitItem, then one
                                     //   OFFLOAD_BYTES insert) -- see parse_offload_bytes_batch_split
                                     //   resp: n x OffloadReply, then one OffloadBytesBatchSplitTail per reply
                                     //   whose status is kOffloadSplit, in order, then OffloadBatchSplitImages
                                     //   and its parent images; no leaf images. OFFLOAD_BATCH_SPLIT for trees
                                     //   of slotted nodes; only to nodes whose HELLO has
                                     //   kHelloOffloadBytesBatchSplit
    kOpOffloadBytesDirtySplit = 40,  // req: OffloadBytesDirtySplitHeader, then sep_len + low_len + high_len
                                     //   bytes (the separator, the leaf's fences)
                                     //   resp: as OFFLOAD_SPLIT (slotted images), then OffloadSpareTail.
                                     //   OFFLOAD_DIRTY_SPLIT for trees of slotted nodes; only to nodes whose
                                     //   HELLO has kHelloOffloadBytesDirtySplit
    kOpOffloadBytesSplitImage = 41,  // req: an OFFLOAD_BYTES request (kind kOffloadInsert, start = the leaf,
                                     //   level 0) + OffloadSplitExt + OffloadImageExt + the leaf's image
                                     //   (kNodeSize bytes) + OffloadSpareExt
                                     //   resp: as OFFLOAD_SPLIT (slotted images), then OffloadSpareTail.
                                     //   OFFLOAD_SPLIT_IMAGE for trees of slotted nodes; only to nodes whose
                                     //   HELLO has kHelloOffloadBytesSplitImage
    kOpOffloadKill = 42,  // req: OffloadKillHeader, count x (u16 length, entry bytes)
                          //   resp: OffloadReply, OffloadKillTail [, the leaf image if it removed any]
                          //   dead entries out of one leaf, only while it is at the version a scan
                          //   judged (src/README.md "Dead-entry hints"); only to nodes whose HELLO has
                          //   kHelloOffloadKill
};

// What an offloaded operation does at the leaf covering `key`.
enum OffloadKind : uint8_t {
    kOffloadLeaf = 1,    // lookup / scan of one leaf: reply carries the validated leaf image
    kOffloadInsert = 2,  // insert `key` if it needs no split
    kOffloadDelete = 3,  // delete exactly `key` if the leaf does not become empty (no merge)
};
enum OffloadStatus : uint8_t {
    kOffloadDone = 0,      // done (leaf image / entry inserted / entry deleted); `leaf` changed if insert/delete
    kOffloadNoop = 1,      // insert: entry already there; delete: entry absent (nothing changed)
    kOffloadNeedsSmo = 2,  // would split / empty the leaf: nothing changed, do it on the compute side
    kOffloadRestart = 3,   // path left this memory node, a node was invalid or stayed locked: nothing changed
    kOffloadSplit = 4,     // OFFLOAD_SPLIT, OFFLOAD_BATCH_SPLIT: inserted by splitting the leaf (reply carries the new images)
};

enum Status : uint16_t {
    kStatusOk = 0,
    kStatusProtocol = 1,   // malformed frame (closes connection)
    kStatusBounds = 2,     // address range outside the pool (closes)
    kStatusAlign = 3,      // atomic not 8-byte aligned (closes)
    kStatusAuth = 4,       // bad token / no HELLO first (closes)
    kStatusNoSpace = 5,    // pool exhausted
    kStatusNoNamespace = 6,
    kStatusInternal = 7,
    kStatusRefused = 8,    // connection limit reached (--max-connections): unsolicited, seq 0 (closes)
    kStatusUnsupported = 9,  // a valid request this node does not execute (CAS/FAA frames and offloaded
                             // writes where its CPU atomics are unsafe, HelloReply::flags); stays open
};

#pragma pack(push, 1)
struct FrameHeader {
    uint32_t magic;
    uint16_t op;           // request: Op; response: Status
    uint16_t count;        // BATCH: number of sub-ops; otherwise 0
    uint32_t payload_len;
    uint32_t seq;
};
static_assert(sizeof(FrameHeader) == 16);

struct SubOpHeader {       // inside a BATCH: op is kOpRead/kOpWrite/kOpCas/kOpFaa only
    uint16_t op;
    uint16_t pad;
    uint32_t payload_len;
};
static_assert(sizeof(SubOpHeader) == 8);

struct HelloReply {
    uint64_t incarnation;  // random at memnode start; changes on restart
    uint64_t pool_bytes;
    // This connection's id, the remote-lock owner (never 0, at most
    // kMaxClientId = 2^39 - 1, never reused within one incarnation).
    uint64_t client_id;
    uint32_t version;
    uint32_t flags;        // kHello* below
};

// HelloReply::flags. kHelloCpuAtomics: the node executes atomics with its
// CPU -- CAS/FAA frames (TCP) and offloaded writes (kOffloadInsert/Delete,
// which take lock words with a CPU compare-and-swap). Set unless the node has
// an RDMA listener whose device's atomics are not atomic with respect to the
// CPU's (atomic_cap IBV_ATOMIC_HCA: the NIC's CMP_AND_SWP and a CPU CAS on
// the same lock word could both succeed). Without it such requests are
// answered kStatusUnsupported; compute servers must then reach the node over
// rdma:// and write one-sided (src/README.md "Offloading").
constexpr uint32_t kHelloCpuAtomics = 1u << 0;
// kHelloOffloadBatch: the node executes OFFLOAD_BATCH. A capability bit
// rather than a new protocol version, so that compute servers and memory
// nodes of either age keep talking: an older node lacks the bit and gets
// single OFFLOADs, an older client never sends the op. Writes in a batch
// still need kHelloCpuAtomics.
constexpr uint32_t kHelloOffloadBatch = 1u << 1;
// kHelloOffloadBytes: the node executes OFFLOAD_BYTES (offloads on slotted
// trees). A capability bit for the same reason as kHelloOffloadBatch; writes
// still need kHelloCpuAtomics.
constexpr uint32_t kHelloOffloadBytes = 1u << 2;
// kHelloOffloadBytesBatch: the node executes OFFLOAD_BYTES_BATCH (batched
// inserts on slotted trees). Its own bit, so that a node with OFFLOAD_BYTES
// but not the batch (an older one) never receives it; writes still need
// kHelloCpuAtomics.
constexpr uint32_t kHelloOffloadBytesBatch = 1u << 3;
// kHelloOffloadSplit: the node executes OFFLOAD_SPLIT (an offloaded insert
// that splits a full leaf itself). A capability bit for the same reason;
// still needs kHelloCpuAtomics.
constexpr uint32_t kHelloOffloadSplit = 1u << 4;
// kHelloOffloadBatchSplit: the node executes OFFLOAD_BATCH_SPLIT (batched
// inserts whose full leaves it splits itself). A capability bit for the same
// reason; still needs kHelloCpuAtomics.
constexpr uint32_t kHelloOffloadBatchSplit = 1u << 5;
// kHelloOffloadSplitImage: the node executes OFFLOAD_SPLIT_IMAGE (a
// write-back leaf's split, from the compute server's image). A capability bit
// for the same reason; still needs kHelloCpuAtomics.
constexpr uint32_t kHelloOffloadSplitImage = 1u << 6;
// kHelloSplitSpare: OFFLOAD_SPLIT and OFFLOAD_SPLIT_IMAGE requests may end in
// an OffloadSpareExt (the sibling block chosen by the compute server, so that
// it can take the sibling's cache marker before the publish and admit the
// new sibling from the reply), and their replies then end in an
// OffloadSpareTail (src/README.md "Offloading", memory-node splits). Older
// nodes would close the connection on the longer request.
constexpr uint32_t kHelloSplitSpare = 1u << 7;
// kHelloOffloadDirtySplit: the node executes OFFLOAD_DIRTY_SPLIT. A
// capability bit for the same reason as kHelloOffloadBatch; still needs
// kHelloCpuAtomics.
constexpr uint32_t kHelloOffloadDirtySplit = 1u << 8;
// kHelloOffloadBytesSplit: the node executes OFFLOAD_BYTES_SPLIT (and its
// OFFLOAD_BYTES answers may come from a node that splits slotted leaves). A
// capability bit for the same reason; still needs kHelloCpuAtomics.
constexpr uint32_t kHelloOffloadBytesSplit = 1u << 9;
// kHelloOffloadBytesBatchSplit: the node executes OFFLOAD_BYTES_BATCH_SPLIT
// (a slotted tree's batched inserts whose full leaves it splits itself). A
// capability bit for the same reason; still needs kHelloCpuAtomics.
constexpr uint32_t kHelloOffloadBytesBatchSplit = 1u << 10;
// kHelloOffloadBytesDirtySplit: the node executes OFFLOAD_BYTES_DIRTY_SPLIT
// (a dirty write-back slotted leaf's split). A capability bit for the same
// reason; still needs kHelloCpuAtomics.
constexpr uint32_t kHelloOffloadBytesDirtySplit = 1u << 11;
// kHelloOffloadBytesSplitImage: the node executes OFFLOAD_BYTES_SPLIT_IMAGE
// (a write-back slotted leaf's split from the compute server's image). A
// capability bit for the same reason; still needs kHelloCpuAtomics.
constexpr uint32_t kHelloOffloadBytesSplitImage = 1u << 12;
// kHelloOffloadKill: the node executes OFFLOAD_KILL. A capability bit for the
// same reason; still needs kHelloCpuAtomics.
constexpr uint32_t kHelloOffloadKill = 1u << 13;
// kHelloSplitParent: OFFLOAD_SPLIT and OFFLOAD_BYTES_SPLIT requests may end
// in an OffloadParentSplitExt (after the OffloadSpareExt): the node may then
// also split the leaf's parent when it is full, and link the parent's new
// sibling into the grandparent the extension names; the reply then carries an
// OffloadParentSplitTail (src/README.md "Memory-node splits", full parents).
// Older nodes would close the connection on the longer request.
constexpr uint32_t kHelloSplitParent = 1u << 14;
// Whether a node whose HELLO said `flags` takes batched offloaded writes.
inline bool offload_batch_usable(uint32_t flags) {
    return (flags & kHelloCpuAtomics) != 0 && (flags & kHelloOffloadBatch) != 0;
}
// Whether a node whose HELLO said `flags` takes OFFLOAD_BYTES_BATCH.
inline bool offload_bytes_batch_usable(uint32_t flags) {
    return (flags & kHelloCpuAtomics) != 0 && (flags & kHelloOffloadBytesBatch) != 0;
}
// Whether a node whose HELLO said `flags` takes OFFLOAD_SPLIT.
inline bool offload_split_usable(uint32_t flags) {
    return (flags & kHelloCpuAtomics) != 0 && (flags & kHelloOffloadSplit) != 0;
}
// Whether a node whose HELLO said `flags` takes OFFLOAD_SPLIT_IMAGE.
inline bool offload_split_image_usable(uint32_t flags) {
    return (flags & kHelloCpuAtomics) != 0 && (flags & kHelloOffloadSplitImage) != 0;
}
// Whether a node whose HELLO said `flags` takes OFFLOAD_BYTES_SPLIT.
inline bool offload_bytes_split_usable(uint32_t flags) {
    return (flags & kHelloCpuAtomics) != 0 && (flags & kHelloOffloadBytesSplit) != 0;
}
// Whether a node whose HELLO said `flags` takes OFFLOAD_DIRTY_SPLIT.
inline bool offload_dirty_split_usable(uint32_t flags) {
    return (flags & kHelloCpuAtomics) != 0 && (flags & kHelloOffloadDirtySplit) != 0;
}
// Whether a node whose HELLO said `flags` takes a spare sibling with its splits.
inline bool split_spare_usable(uint32_t flags) { return (flags & kHelloSplitSpare) != 0; }
// Whether a node whose HELLO said `flags` takes OFFLOAD_BATCH_SPLIT.
inline bool offload_batch_split_usable(uint32_t flags) {
    return (flags & kHelloCpuAtomics) != 0 && (flags & kHelloOffloadBatchSplit) != 0;
}

// Whether a node whose HELLO said `flags` takes OFFLOAD_BYTES_BATCH_SPLIT.
inline bool offload_bytes_batch_split_usable(uint32_t flags) {
    return (flags & kHelloCpuAtomics) != 0 && (flags & kHelloOffloadBytesBatchSplit) != 0;
}
// Whether a node whose HELLO said `flags` takes OFFLOAD_KILL.
inline bool offload_kill_usable(uint32_t flags) {
    return (flags & kHelloCpuAtomics) != 0 && (flags & kHelloOffloadKill) != 0;
}
// Whether a node whose HELLO said `flags` splits full parents in OFFLOAD_SPLIT
// and OFFLOAD_BYTES_SPLIT (which need kHelloSplitSpare: the extension follows
// the spare's).
inline bool split_parent_usable(uint32_t flags) {
    return (flags & kHelloSplitParent) != 0 && (flags & kHelloSplitSpare) != 0;
}
// Whether a node whose HELLO said `flags` takes OFFLOAD_BYTES_SPLIT_IMAGE.
inline bool offload_bytes_split_image_usable(uint32_t flags) {
    return (flags & kHelloCpuAtomics) != 0 && (flags & kHelloOffloadBytesSplitImage) != 0;
}
// Whether a node whose HELLO said `flags` takes OFFLOAD_BYTES_DIRTY_SPLIT.
inline bool offload_bytes_dirty_split_usable(uint32_t flags) {
    return (flags & kHelloCpuAtomics) != 0 && (flags & kHelloOffloadBytesDirtySplit) != 0;
}

struct NsInfo {
    uint64_t ns;
    uint64_t root;
    uint64_t bytes_allocated;
    uint8_t tag[kNamespaceTagLen];
};

// NS_LIST entries per reply: a page stays far below 64 KiB, so it fits one
// RDMA message (kRdmaMsgBytes) whatever the number of namespaces.
constexpr uint32_t kNsListPage = 512;
static_assert(4 + kNsListPage * sizeof(NsInfo) + 8 + sizeof(FrameHeader) < 64 * 1024);

struct NodeStats {
    uint64_t incarnation;
    uint64_t pool_bytes;
    uint64_t used_bytes;
    uint64_t connections;  // currently open
    uint64_t requests;     // frames served since start
    uint64_t offloads;     // offloaded traversals (reserved)
    uint64_t namespaces;
};
struct OffloadRequest {
    uint64_t start;        // pool offset of the node to start at (a subtree root at or below the placement level)
    uint32_t tree_id;      // every node on the way must carry it
    uint16_t node;         // this memory node's id in the compute side's GAddrs (right links must stay here)
    uint8_t kind;          // OffloadKind
    uint8_t start_level;   // level of the start node
    uint8_t key[16];       // EntryKey
    // kOffloadInsert: pool offset of a journal slot on this memory node (0:
    // none) that `record` (a tree::JournalRecord) is written to before the leaf
    // is changed or found to hold the key (src/README.md "Crash survival").
    uint64_t journal;
    uint8_t record[24];
};
static_assert(sizeof(OffloadRequest) == 64);

struct OffloadReply {
    uint8_t status;        // OffloadStatus
    uint8_t pad[7];
    uint64_t leaf;         // GAddr of the leaf reached (the node an insert/delete changed)
    // kOffloadDone: followed by the leaf image (kNodeSize bytes): the leaf read,
    // or as the insert / delete published it (the compute side refreshes its
    // cached copy with it, DEX 6.2)
};
static_assert(sizeof(OffloadReply) == 16);
#pragma pack(pop)

// OFFLOAD_SPLIT: an OffloadRequest (kind kOffloadInsert) followed by this.
// What the memory node needs to split the leaf itself: the tree's namespace
// on this node (the sibling is allocated from it, as ALLOC would) and the
// leaf's parent if the compute side knows it (its cached descent's path[1]).
struct OffloadSplitExt {
    uint64_t ns;           // the tree's namespace on this memory node
    uint64_t parent;       // pool offset of the leaf's level-1 parent on this node; 0: unknown
};
static_assert(sizeof(OffloadSplitExt) == 16);
// kOffloadSplit: after OffloadReply and the leaf image (as published: lower
// half, right link = sibling).
struct OffloadSplitTail {
    uint64_t sibling;      // GAddr of the new right sibling (its image follows)
    uint64_t parent;       // GAddr of the parent that took the downlink (its image follows); 0: none,
                           //   the compute side inserts the separator (the sibling's low fence)
};
static_assert(sizeof(OffloadSplitTail) == 16);
// OFFLOAD_SPLIT_IMAGE: after OffloadRequest and OffloadSplitExt, this, then
// the leaf's image (kNodeSize bytes, the fixed layout, level 0, this tree).
struct OffloadImageExt {
    uint64_t version;      // the image's body_version: remote memory holds the leaf at it or, unlocked, newer
};
static_assert(sizeof(OffloadImageExt) == 8);
constexpr size_t kOffloadSplitImageRequest =
    sizeof(OffloadRequest) + sizeof(OffloadSplitExt) + sizeof(OffloadImageExt) + DEX_NODE_BYTES;
// kHelloSplitSpare: appended to an OFFLOAD_SPLIT or OFFLOAD_SPLIT_IMAGE
// request. `sibling`: a node-sized block of the tree's namespace on this node
// that an earlier reply handed out (OffloadSpareTail); a split uses it as the
// new sibling instead of allocating one. 0, or a block the namespace does not
// own: the node allocates as without the extension.
struct OffloadSpareExt {
    uint64_t sibling;      // pool offset of the spare block; 0: none
};
static_assert(sizeof(OffloadSpareExt) == 8);
// The last 8 bytes of the reply to a request with OffloadSpareExt, whatever
// its status: the spare the compute server holds from now on -- the one it
// sent if no split used it, else a fresh block of the namespace (0: no space).
struct OffloadSpareTail {
    uint64_t spare;        // pool offset; 0: none
};
static_assert(sizeof(OffloadSpareTail) == 8);
// kHelloSplitParent: appended to an OFFLOAD_SPLIT or OFFLOAD_BYTES_SPLIT
// request after its OffloadSpareExt. Its presence allows the node to split the
// level-1 parent (OffloadSplitExt::parent) when the leaf's downlink does not
// fit: the compute server sends it only where it would split that parent on
// the same memory node itself (no subtree migration there). `grandparent`:
// the parent's level-2 parent on this node, which then takes the new parent
// sibling's downlink when that is simple; 0: unknown (the compute server
// inserts it). `sibling`: a spare block for the parent's new sibling, as
// OffloadSpareExt's for the leaf's (the compute server holds its cache
// marker, and admits the parent sibling from the reply); 0, the leaf's
// spare, or a block the namespace does not own: the node allocates.
struct OffloadParentSplitExt {
    uint64_t grandparent;  // pool offset; 0: unknown
    uint64_t sibling;      // pool offset of a spare block; 0: none
};
static_assert(sizeof(OffloadParentSplitExt) == 16);
// The reply to a request with OffloadParentSplitExt whose status is
// kOffloadSplit: after the sibling's (and the parent's) image, before the
// OffloadSpareTail. psibling != 0: the parent split (its image in the reply
// is the lower half, right link = psibling), the new parent sibling's image
// follows, then the grandparent's image if grandparent != 0 (it took the
// downlink; 0: the compute server inserts the psibling's low fence at level 2).
// `spare`: the parent spare the compute server holds from now on -- the one it
// sent if the parent did not split into it, else a fresh block (0: none).
struct OffloadParentSplitTail {
    uint64_t psibling;     // GAddr of the parent's new right sibling; 0: the parent did not split
    uint64_t grandparent;  // GAddr of the level-2 node that took its downlink; 0: none
    uint64_t spare;        // pool offset; 0: none
};
static_assert(sizeof(OffloadParentSplitTail) == 24);
// OFFLOAD_DIRTY_SPLIT: after OffloadRequest and OffloadSplitExt. What the
// compute server's frame says remote memory holds (the leaf's version,
// fences and right link: structure changes are written through), and the
// block that becomes the sibling -- the compute server took that block's
// cache marker before the request, so that no reader of this server meets the
// sibling's remote half (it lacks the dirty entries) before the frame of it.
struct OffloadDirtySplitExt {
    uint64_t version;      // the frame's body_version: remote memory holds the leaf at it or, unlocked, newer
    uint64_t right;        // its right link
    uint64_t sibling;      // pool offset of a node-sized block of the tree's namespace (OffloadSplitExt::ns)
    uint64_t pad;
    uint8_t low[16];       // its fences (EntryKey)
    uint8_t high[16];
};
static_assert(sizeof(OffloadDirtySplitExt) == 64);
constexpr size_t kOffloadDirtySplitRequest =
    sizeof(OffloadRequest) + sizeof(OffloadSplitExt) + sizeof(OffloadDirtySplitExt);
// (leaf, sibling, parent; with a split parent its sibling and the grandparent)
constexpr size_t kMaxOffloadSplitReply = sizeof(OffloadReply) + sizeof(OffloadSplitTail) +
                                         sizeof(OffloadParentSplitTail) + 5 * DEX_NODE_BYTES +
                                         sizeof(OffloadSpareTail);

// OFFLOAD_BYTES: an offload on a tree of slotted nodes. The fixed
// OffloadRequest stays as it is (its 16-byte key is an EntryKey); this form
// carries the search / entry bytes and an opaque journal record of its own
// length, so neither the key nor the journal's byte records (defined by the
// tree) are squeezed into fixed fields. Payload, nothing in between:
//
//   OffloadBytesHeader | key_len bytes of key | record_len bytes of record
//
// and payload_len must be exactly that sum. The memory node answers a
// malformed one (see parse_offload_bytes) with kStatusProtocol, like a
// malformed OFFLOAD, and reads nothing beyond the payload.
constexpr uint32_t kMaxOffloadKeyBytes = DEX_SLOTTED_MAX_ENTRY_BYTES;  // the longest slotted entry
// The journal record is the tree's business (its byte records are 168
// bytes); the memory node copies record_len bytes to the slot and bounds it
// so that a request stays small.
constexpr uint32_t kMaxOffloadRecordBytes = 256;
struct OffloadBytesHeader {
    uint64_t start;        // as OffloadRequest
    uint32_t tree_id;
    uint16_t node;
    uint8_t kind;          // OffloadKind
    uint8_t start_level;
    // kOffloadInsert only (0 otherwise): pool offset of a journal slot, 8-byte
    // aligned, that the record is written to before the leaf is changed or
    // found to hold the entry. record_len is 0 exactly when journal is 0.
    uint64_t journal;
    // Leaf lookup: the search bytes, 0..kMaxOffloadKeyBytes (empty = -inf,
    // the leftmost leaf). Insert / delete: the entry (key bytes + heap TID),
    // 1..kMaxOffloadKeyBytes.
    uint16_t key_len;
    uint16_t record_len;   // 0..kMaxOffloadRecordBytes
    uint32_t pad;          // 0
};
static_assert(sizeof(OffloadBytesHeader) == 32);
constexpr uint32_t kMaxOffloadBytesPayload =
    sizeof(OffloadBytesHeader) + kMaxOffloadKeyBytes + kMaxOffloadRecordBytes;

// A parsed OFFLOAD_BYTES payload; key and record point into it.
struct OffloadBytesView {
    OffloadBytesHeader h;
    const uint8_t* key;
    const uint8_t* record;
};
// Checks the framing rules above (lengths, kind, journal iff record, pad 0;
// not the journal slot against a pool): nullptr and `out` filled if the
// payload is well formed, otherwise why not. Reads at most `len` bytes.
const char* parse_offload_bytes(const uint8_t* payload, size_t len, OffloadBytesView& out);
// The payload for `h` (its key_len / record_len are set from the sizes).
// Throws std::invalid_argument where parse_offload_bytes would refuse it.
std::vector<uint8_t> encode_offload_bytes(OffloadBytesHeader h, const void* key, size_t key_len,
                                          const void* record, size_t record_len);

// OFFLOAD_BATCH sub-requests per frame: the PostgreSQL glue hands the core at
// most 256 entries of a statement at a time. Request (16 KiB) and reply
// (4 KiB) stay far below one RDMA message (net/rdma_wire.h asserts it).
constexpr uint32_t kMaxOffloadBatch = 256;

// OFFLOAD_BATCH_SPLIT (src/README.md "Offloading", batched offloaded inserts):
// OFFLOAD_BATCH for a fixed-layout tree whose memory node splits a full leaf
// itself, as OFFLOAD_SPLIT does, instead of answering kOffloadNeedsSmo. The
// payload is this header, then `count` items (1..kMaxOffloadBatch), nothing
// after. The reply carries no images (256 splits' worth would not fit one
// RDMA message): the compute side drops every leaf it names from its cache;
// the parents that took downlinks come back as images (at most
// kMaxBatchSplitParentImages), so the cached path above stays complete.
#pragma pack(push, 1)
struct OffloadBatchSplitHeader {
    uint64_t ns;           // the tree's namespace on this memory node (siblings come from it)
    uint32_t count;        // items that follow
    uint32_t pad;          // 0
};
static_assert(sizeof(OffloadBatchSplitHeader) == 16);
struct OffloadBatchSplitItem {
    OffloadRequest req;    // kind kOffloadInsert
    uint64_t parent;       // as OffloadSplitExt::parent: the leaf's level-1 parent here; 0: unknown
    // 1: the memory node may split the leaf it reaches (the compute side
    // holds that leaf's cache frame or I/O marker while the batch runs, C7);
    // 0: a full leaf answers kOffloadNeedsSmo as in OFFLOAD_BATCH.
    uint8_t split;
    uint8_t pad[7];        // 0
};
static_assert(sizeof(OffloadBatchSplitItem) == 80);
// One per kOffloadSplit reply (OffloadReply::leaf is the lower half).
struct OffloadBatchSplitTail {
    uint64_t sibling;      // GAddr of the new right sibling
    uint64_t parent;       // GAddr of the parent that took the downlink; 0: the compute side inserts it
    uint8_t sep[16];       // the separator (the sibling's low fence, an EntryKey)
};
static_assert(sizeof(OffloadBatchSplitTail) == 32);
// After the tails: the parents that took downlinks in this batch, each once,
// as read after the last item (a valid snapshot), at most
// kMaxBatchSplitParentImages; `count` x (u64 GAddr, kNodeSize image) follow.
struct OffloadBatchSplitImages {
    uint32_t count;
    uint32_t pad;          // 0
};
static_assert(sizeof(OffloadBatchSplitImages) == 8);
#pragma pack(pop)
constexpr uint32_t kMaxBatchSplitParentImages = 64;
constexpr size_t kMaxOffloadBatchSplitRequest =
    sizeof(OffloadBatchSplitHeader) + kMaxOffloadBatch * sizeof(OffloadBatchSplitItem);
constexpr size_t kMaxOffloadBatchSplitReply = kMaxOffloadBatch * (sizeof(OffloadReply) + sizeof(OffloadBatchSplitTail)) +
                                              sizeof(OffloadBatchSplitImages) +
                                              kMaxBatchSplitParentImages * (8 + DEX_NODE_BYTES);

// OFFLOAD_BYTES_BATCH: 1..kMaxOffloadBatch OFFLOAD_BYTES payloads back to
// back, nothing in between and nothing after the last; each sub-request's
// length is its header's sizeof(OffloadBytesHeader) + key_len + record_len
// and it must pass parse_offload_bytes on exactly those bytes, with kind
// insert or delete. Bounded by the longest sub-request times the count:
// 256 x 440 bytes = 110 KiB, one RDMA message (net/rdma_wire.h asserts it);
// the reply is n x OffloadReply (4 KiB).
constexpr uint32_t kMaxOffloadBytesBatchPayload = kMaxOffloadBatch * kMaxOffloadBytesPayload;
// Splits and checks a whole OFFLOAD_BYTES_BATCH payload before anything is
// executed: nullptr and `out` (one view per sub-request, pointing into
// `payload`) if every sub-request is well formed, otherwise why not (`out`
// then means nothing). Reads at most `len` bytes.
const char* parse_offload_bytes_batch(const uint8_t* payload, size_t len, std::vector<OffloadBytesView>& out);
// Appends one sub-request (encode_offload_bytes: throws std::invalid_argument
// for one parse_offload_bytes would refuse) to a batch payload.
void append_offload_bytes(std::vector<uint8_t>& batch, const OffloadBytesHeader& h, const void* key, size_t key_len,
                          const void* record, size_t record_len);

// OFFLOAD_BYTES_BATCH_SPLIT: OFFLOAD_BATCH_SPLIT for slotted trees. The
// payload is an OffloadBatchSplitHeader, then `count` items (1..256), each an
// OffloadBytesBatchSplitItem followed by one OFFLOAD_BYTES insert (its own
// header's lengths say where it ends), nothing after the last. A split's
// tail carries its separator whole (the sibling's low fence, at most
// kMaxOffloadKeyBytes), so that the compute side can insert the downlink the
// memory node left.
#pragma pack(push, 1)
struct OffloadBytesBatchSplitItem {
    uint64_t parent;       // as OffloadBatchSplitItem::parent
    uint8_t split;         // as OffloadBatchSplitItem::split
    uint8_t pad[7];        // 0
};
static_assert(sizeof(OffloadBytesBatchSplitItem) == 16);
struct OffloadBytesBatchSplitTail {
    uint64_t sibling;      // GAddr of the new right sibling
    uint64_t parent;       // GAddr of the parent that took the downlink; 0: the compute side inserts it
    uint16_t sep_len;      // bytes of sep used
    uint8_t pad[6];        // 0
    uint8_t sep[kMaxOffloadKeyBytes];  // the separator's bytes (the sibling's low fence)
};
static_assert(sizeof(OffloadBytesBatchSplitTail) == 24 + kMaxOffloadKeyBytes);
#pragma pack(pop)
constexpr size_t kMaxOffloadBytesBatchSplitRequest =
    sizeof(OffloadBatchSplitHeader) +
    kMaxOffloadBatch * (sizeof(OffloadBytesBatchSplitItem) + kMaxOffloadBytesPayload);
constexpr size_t kMaxOffloadBytesBatchSplitReply =
    kMaxOffloadBatch * (sizeof(OffloadReply) + sizeof(OffloadBytesBatchSplitTail)) + sizeof(OffloadBatchSplitImages) +
    kMaxBatchSplitParentImages * (8 + DEX_NODE_BYTES);
// One OFFLOAD_BYTES_BATCH_SPLIT item as parsed; `req` points into the payload.
struct OffloadBytesBatchSplitView {
    OffloadBytesBatchSplitItem item;
    OffloadBytesView req;
};
// Checks a whole OFFLOAD_BYTES_BATCH_SPLIT payload before anything runs:
// nullptr, the header and one view per item if it is well formed (every
// sub-request an insert passing parse_offload_bytes on exactly its bytes,
// flags 0 or 1, pads 0), otherwise why not. Reads at most `len` bytes.
const char* parse_offload_bytes_batch_split(const uint8_t* payload, size_t len, OffloadBatchSplitHeader& h,
                                            std::vector<OffloadBytesBatchSplitView>& out);

// OFFLOAD_BYTES_DIRTY_SPLIT: OFFLOAD_DIRTY_SPLIT for slotted trees. The
// header says what OffloadRequest, OffloadSplitExt and OffloadDirtySplitExt
// say for a fixed tree; the separator and the leaf's fences follow as bytes
// (a +inf high fence: high_inf 1 and no bytes), at most kMaxOffloadKeyBytes
// each; the payload is exactly header + sep_len + low_len + high_len.
struct OffloadBytesDirtySplitHeader {
    uint64_t start;        // pool offset of the leaf
    uint32_t tree_id;
    uint16_t node;         // this memory node's id in the compute side's GAddrs
    uint8_t high_inf;      // 1: the leaf's high fence is +inf (high_len 0)
    uint8_t pad0;          // 0
    uint64_t ns;           // as OffloadSplitExt::ns
    uint64_t parent;       // as OffloadSplitExt::parent
    uint64_t version;      // as OffloadDirtySplitExt::version
    uint64_t right;        // ... ::right
    uint64_t sibling;      // ... ::sibling
    uint16_t sep_len;      // 1..kMaxOffloadKeyBytes
    uint16_t low_len;      // 0 (-inf) ..kMaxOffloadKeyBytes
    uint16_t high_len;     // 0..kMaxOffloadKeyBytes
    uint16_t pad1;         // 0
};
static_assert(sizeof(OffloadBytesDirtySplitHeader) == 64);
constexpr size_t kMaxOffloadBytesDirtySplitRequest = sizeof(OffloadBytesDirtySplitHeader) + 3 * kMaxOffloadKeyBytes;

// OFFLOAD_KILL: a write-through tree's removal of entries a scan judged dead
// (remove_if_unchanged) in one round trip. The memory node removes those of
// the entries the leaf holds, under its lock, only if the leaf is still at
// `version` (0: at whatever version it has -- a kill deferred until the
// standbys replayed its horizon, K9) and is a live leaf of the tree and
// layout; the reply's status is kOffloadDone (removed: how many, the leaf
// image follows when that is not 0), kOffloadNoop (the leaf changed, or is
// not such a leaf: nothing removed) or kOffloadRestart (locked: nothing
// changed). Entries are EntryKeys (16 bytes) for the fixed layout, the entry
// bytes for a slotted one.
struct OffloadKillHeader {
    uint64_t leaf;         // pool offset
    uint64_t version;      // body_version the scan judged; 0: any
    uint32_t tree_id;
    uint16_t node;         // this memory node's id in the compute side's GAddrs
    uint8_t slotted;       // 1: a slotted leaf
    uint8_t pad0;          // 0
    uint16_t count;        // entries that follow, 1..kMaxOffloadBatch
    uint16_t pad1[3];      // 0
};
static_assert(sizeof(OffloadKillHeader) == 32);
struct OffloadKillTail {
    uint32_t removed;
    uint32_t pad;
};
static_assert(sizeof(OffloadKillTail) == 8);
constexpr size_t kMaxOffloadKillRequest = sizeof(OffloadKillHeader) + kMaxOffloadBatch * (2 + kMaxOffloadKeyBytes);
// A parsed OFFLOAD_KILL: the header and the entries (pointing into the payload).
struct OffloadKillView {
    OffloadKillHeader h;
    std::vector<std::pair<const uint8_t*, uint16_t>> entries;
};
// Checks the framing above (count, lengths -- 16 for a fixed leaf, 1..
// kMaxOffloadKeyBytes for a slotted one --, pads, nothing after the last
// entry): nullptr and `out` if well formed, otherwise why not. Reads at most
// `len` bytes.
const char* parse_offload_kill(const uint8_t* payload, size_t len, OffloadKillView& out);
// Appends one entry to an OFFLOAD_KILL payload (the header first, by the caller).
void append_offload_kill_entry(std::vector<uint8_t>& payload, const void* entry, uint16_t len);

// "READ", "ALLOC", ... or nullptr for an unknown op.
const char* op_name(uint16_t op);
// op_name(), or "op N" for an unknown op (for messages and logs).
std::string op_label(uint16_t op);
// Whether `op` is a two-sided RPC (a request the memory node's CPU answers)
// rather than a one-sided operation or HELLO: the one list every transport's
// rpc() checks against.
bool is_rpc_op(uint16_t op);
// Whether `op` is one of the OFFLOAD* requests (the memory node's
// OffloadRequests answers exactly these).
bool is_offload_op(uint16_t op);
// Statuses after which the memory node closes the connection.
bool is_fatal_status(uint16_t status);
// Why a node at `max_connections` refuses a connection: "too many connections
// (N)" (the kStatusRefused message; an RDMA client builds it from RdmaRefusal).
std::string refusal_reason(uint32_t max_connections);

}  // namespace dex::net
