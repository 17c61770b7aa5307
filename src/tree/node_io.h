// Node I/O over remote memory: optimistic (validated) reads, remote locks
// with dead-owner stealing, and publish+unlock in one batch. Implements the
// "Synchronization (remote)" section of src/README.md. Checksums, validation
// and sealing of a node image are in tree/node_format.h (included here).
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "transport/remote_memory.h"
#include "tree/node_format.h"
#include "tree/node_layout.h"

namespace dex::cache {
class Cache;
struct FrameHeader;
}

namespace dex::tree {

class OffloadPolicy;

struct TreeOptions {
    int op_timeout_ms = 30000;  // bounds every wait of one tree operation
    int lock_grace_ms = 50;     // same locked word this long -> ask CLIENT_ALIVE(owner)
    // Shared node cache (src/cache, src/README.md "Node cache"): this process's
    // handle on the compute server's CacheRegion. nullptr = no cache: every
    // node is read from remote memory (the original code path, unchanged).
    // Admission policy (inner-only / leaf probability) is the region's.
    cache::Cache* cache = nullptr;
    // Write-back mode (src/README.md "Write-back mode"; needs `cache`): leaf
    // changes that need no structure modification stay in the cached frame
    // (dirty) instead of being written through. Only for nodes no other compute
    // server touches (node_is_shared() == false).
    bool write_back = false;
    // Called (under the frame lock) before a clean frame of this tree becomes
    // dirty: records remotely that this compute server holds dirty nodes of the
    // tree. False: not possible now, write through instead. May throw.
    std::function<bool()> register_dirty;
    // Write-back redo (src/README.md "Write-back mode", "Redo after a crash"):
    // the compute server's log position, read under the frame lock when a
    // clean frame becomes dirty (FrameHeader::dirty_since). Every entry change
    // then logged for that frame (log_entries) lies after it. Must not throw.
    using LogPosition = uint64_t (*)();
    LogPosition log_position = nullptr;
    // Every entry change of a write-back tree -- in place or written through --
    // right after it was made: insert (added unless present) or delete
    // (removed if present) of entries[0..n), entries[i] being lens[i] bytes
    // (a fixed tree: an EntryKey image; a slotted one: the entry's bytes).
    // The compute server logs them so that a crash that loses dirty frames
    // can replay them. `through`: every listed change was made and written
    // through -- remote memory held it, and the publish had named its leaves
    // to log_changes, before this call -- and the operation left no frame
    // dirty (a hot standby need not wait for a write-back of it, src/README.md
    // "Write-back mode", W11). False whenever unsure, and for an insert of an
    // entry already there or a delete of one that is not (either may be so
    // only in a dirty frame).
    // Must not throw or call back into dex.
    std::function<void(bool insert, bool through, const uint8_t* const* entries, const uint32_t* lens, size_t n)>
        log_entries;
    // Offloading (src/README.md "Offloading"): this process's decision model;
    // nullptr = never offload. Used by lookups and forward scans on a cache miss.
    OffloadPolicy* offload = nullptr;
    // Replication (src/README.md "Hot standbys"): called with the nodes a write
    // is about to change (or create), while their remote locks are held and
    // before anything is published, so that another compute server replaying
    // this server's log (PostgreSQL: a standby replaying WAL) drops its cached
    // copies before it can see the commits that depend on the change. Must
    // not throw or call back into dex. nullptr: nothing to tell.
    using ChangeLog = void (*)(const GAddr* nodes, size_t n);
    ChangeLog log_changes = nullptr;
};

// entry_size, capacity_of, used_bytes, node_checksum, snapshot_valid and
// seal_node: tree/node_format.h.

std::string hex_addr(GAddr a);
std::string key_str(const EntryKey& k);

// The bound of one tree operation's waits (dex.op_timeout). Its clock starts
// at the first question, not at construction: every insert and lookup makes
// one, and almost none ever waits -- reading the clock for each cost a bulk
// load about 5% of its backend's CPU (a paravirtual clock: no cheap TSC).
// The first question comes before the first wait, so every wait is still
// bounded by op_timeout from there. One thread's.
class Deadline {
public:
    explicit Deadline(int ms) : ms_(ms) {}
    bool expired() const { return std::chrono::steady_clock::now() > end(); }
    void check(const char* what = "remote tree operation") const;

private:
    std::chrono::steady_clock::time_point end() const {
        if (!started_) {
            end_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms_);
            started_ = true;
        }
        return end_;
    }
    int ms_;
    mutable bool started_ = false;
    mutable std::chrono::steady_clock::time_point end_{};
};

// Exponential backoff: yields first, then sleeps up to ~1 ms. Honours interrupts
// (unless an InterruptHold is active) by throwing ErrorCode::kInterrupted.
void backoff(int attempt);

class NodeIO {
public:
    NodeIO(RemoteMemory& mem, uint32_t node_id, const TreeOptions& opts)
        : mem_(mem), node_id_(node_id), opts_(opts) {}

    enum class Read { kOk, kBad, kBusy };
    // Consistent snapshot of the node at `a`. Waits while it is locked (and takes
    // over locks of dead owners). kBad: the bytes never formed a valid snapshot
    // (freed/reused memory or corruption) -- the caller restarts or reports.
    // With wait_if_locked = false a locked node answers kBusy at once (for
    // opportunistic work such as merges, which must not queue behind writers).
    Read read(GAddr a, Node& out, const Deadline& dl, bool wait_if_locked = true);
    // Raw READ without validation.
    void read_raw(GAddr a, Node& out) { mem_.read(a, &out, kNodeSize); }

    // The connection to the memory node holding `a` (a tree may span several
    // memory nodes: src/README.md "Placement over several memory nodes").
    Transport& transport(GAddr a) { return mem_.node(gaddr_node(a)); }
    Transport& transport() { return mem_.node(node_id_); }
    RemoteMemory& mem() { return mem_; }
    uint32_t node_id() const { return node_id_; }
    const TreeOptions& options() const { return opts_; }
    void set_op_timeout(int ms) { opts_.op_timeout_ms = ms; }

private:
    void steal(GAddr a, uint64_t word);
    bool client_alive(GAddr a, uint64_t owner);

    RemoteMemory& mem_;
    uint32_t node_id_;
    TreeOptions opts_;
};

// A node this process holds the remote lock of, with its local copy.
struct LockedNode {
    GAddr addr = 0;
    uint64_t version = 0;    // body_version at acquisition (the lock word holds its low bits); publish uses + 1
    uint64_t held_word = 0;  // the lock word we installed
    bool held = false;
    Node node;               // local copy (== remote body at acquisition)
};

// RAII set of remote locks. Holds an InterruptHold while any lock is held; on
// destruction releases (unchanged) whatever is still held, best effort.
class Locks {
public:
    explicit Locks(NodeIO& io) : io_(io) {}
    ~Locks();
    Locks(const Locks&) = delete;
    Locks& operator=(const Locks&) = delete;

    // CAS (v,_,0) -> (v,me,1) where `snap` is a validated snapshot of `a`
    // read at `read_at`. Returns nullptr if the node changed or is locked, or
    // if the snapshot is more than a second old (read it again).
    // `also`: ops for a's memory node run in the same batch right after the
    // CAS (whether or not it succeeds; their results are the caller's);
    // `*sent` says whether they ran (not if the snapshot was refused unsent).
    LockedNode* try_lock(GAddr a, const Node& snap,
                         std::chrono::steady_clock::time_point read_at = std::chrono::steady_clock::now(),
                         RemoteOp* also = nullptr, size_t n_also = 0, bool* sent = nullptr);
    // Release without change.
    void unlock(LockedNode* ln);
    // One batch: `before` ops (e.g. WRITE of a new sibling), then each node's
    // body WRITE, then each node's lock word WRITE (version + 1, unlocked).
    // `before` ops target the memory node of the first node.
    // `created`: nodes the `before` ops write for the first time (a split's
    // new sibling): logged with the changed ones (TreeOptions::log_changes).
    // `after` (optional): one more op for the memory node of `after_addr`,
    // last in the batch (a split reads the parent it goes on with).
    void publish(std::initializer_list<LockedNode*> nodes, const std::vector<RemoteOp>& before = {},
                 const std::vector<GAddr>& created = {}, RemoteOp* after = nullptr, GAddr after_addr = 0) {
        publish(std::vector<LockedNode*>(nodes), before, created, after, after_addr);
    }
    void publish(const std::vector<LockedNode*>& nodes, const std::vector<RemoteOp>& before = {},
                 const std::vector<GAddr>& created = {}, RemoteOp* after = nullptr, GAddr after_addr = 0);
    size_t held() const { return held_count_; }

private:
    void on_release();
    // Throws kUnreachable unless ln's lock is held by the transport's current connection.
    void check_connection(const LockedNode& ln);
    NodeIO& io_;
    std::deque<LockedNode> nodes_;
    std::optional<InterruptHold> hold_;
    size_t held_count_ = 0;
};

// A WRITE of a whole (sealed) node image at pool offset of `a`, for batches.
RemoteOp write_node_op(GAddr a, const Node& n);

}  // namespace dex::tree
