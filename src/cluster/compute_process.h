// What one compute-server process (a PostgreSQL backend, the postmaster, the
// dex worker) keeps for its whole life, and the glue between the pieces:
//
//   - its memory-node client (cluster/memnode_client.h);
//   - its view of the compute server's shared cache block
//     (cache/shared_cache.h), whose handles it equips with the admission
//     check (cache/incarnations.h) and the write-back callback (the remote
//     lock protocol, tree::write_back_node);
//   - its offloading decision model (tree/offload_policy.h), per pid like the
//     cache handle: its moving averages are per backend;
//   - the change-log hook that standbys depend on (TreeOptions::log_changes);
//   - which Stats object it counts into (shared, or private for the worker).
//
// The C API (src/capi) is a thin layer over instance(); tests may build their
// own ComputeProcess over in-process memory nodes (MemnodeClient::Factory).
// Not thread-safe: one process, one thread (as a PostgreSQL backend).
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "cache/shared_cache.h"
#include "cluster/memnode_client.h"
#include "common/stats.h"
#include "tree/node_io.h"
#include "tree/offload_policy.h"

namespace dex::cluster {

class ComputeProcess {
public:
    // The process's own (never destroyed: backends exit without running our
    // destructors safely).
    static ComputeProcess& instance();

    explicit ComputeProcess(MemnodeClient::Factory factory = {});
    ComputeProcess(const ComputeProcess&) = delete;
    ComputeProcess& operator=(const ComputeProcess&) = delete;

    MemnodeClient& client() { return client_; }
    RemoteMemory& mem() { return client_.mem(); }
    cache::SharedCache& cache() { return cache_; }
    // dex.op_timeout as configured (0: the transport default).
    int op_timeout_ms() const { return client_.options().op_timeout_ms; }

    // ---- shared node cache ----
    // Build (initialize: with a new random generation) or find the shared
    // cache block in `mem` (cache/shared_cache.h); mem == nullptr or
    // cache_bytes == 0: no cache. The block is registered with every
    // transport (Transport::register_region).
    void attach_cache(void* mem, uint64_t cache_bytes, bool initialize);
    // Before reading through the cache for a tree homed on `home` (built in
    // incarnation `home_inc`), spread over the nodes with part_ns[j] != 0
    // (built in part_inc[j]): frames of another incarnation of the home node
    // are purged (IncarnationTable); so are those of every other part node
    // whose cache record is not already the expected incarnation and that
    // answers with it (a node that does not answer costs nothing here: the
    // lazy node check fails the query only if it needs that node).
    void sync_tree_nodes(int home, uint64_t home_inc, const std::vector<uint64_t>& part_ns,
                         const std::vector<uint64_t>& part_inc);
    // Purge frames of memory node `node` unless the cache holds `inc`'s.
    void sync_node(int node, uint64_t inc);
    // Drop every cached frame of the tree homed in namespace ns on `node`.
    void drop_tree(int node, uint64_t ns);
    // WAL replay on a standby: drop these nodes from the cache.
    void forget_nodes(const uint64_t* nodes, size_t n);

    // The cache's admission check: an image of `g` may stay only if the
    // cache's record for its node is the incarnation we are connected to.
    bool admit_check(GAddr g);
    // The cache's WriteBack callback: write a dirty frame's image with the
    // remote lock protocol once its entries' heap WAL is durable. Never throws.
    bool write_back_frame(uint32_t frame, const Node& img);
    // The cache's WriteBackMany hook: tree::write_back_nodes per memory node.
    void write_back_frames(const uint32_t* frames, Node* imgs, size_t n, bool* ok);

    // ---- write-back mode (cache/writeback_registry.h) ----
    // A tree's register_dirty callback: find or add its registry entry
    // (*slot caches it; -1 = not yet) and make its owner word ours. False:
    // registry full, write through. Throws lost_dirty_error.
    bool register_dirty(int* slot, int node, uint64_t ns, GAddr word, uint64_t incarnation,
                        const std::string& index_name);
    // Opening a tree with owner word `word` (validated home node): throws
    // lost_dirty_error if an instance that held dirty nodes of it is gone.
    void check_owner_word(GAddr word, const std::string& index_name);
    // Write-back redo (src/README.md "Write-back mode", redo after a crash):
    // the owner word's value, and its release by the recovery that replayed
    // the lost generation's changes (CAS expected -> 0; false: it held
    // something else).
    uint64_t read_owner_word(GAddr word);
    bool release_owner_word(GAddr word, uint64_t expected);
    // Write back this tree's dirty frames (before reading its remote images).
    void flush_tree(int node, uint64_t ns, GAddr word);
    // A tree leaves (or never was in) write-back mode in this process: frames
    // of it that were dirtied (by us if was_write_back, or by another
    // process) are written back first; throws tree::NeedDurable if their
    // heap WAL is not durable yet.
    void flush_tree_for_write_through(int node, uint64_t ns, GAddr word, bool was_write_back);
    // Every tree's dirty frames (dex_flush(), the worker). Returns frames written.
    uint64_t flush_all();

    // ---- namespaces (one per index and memory node) ----
    // NS_CREATE, then: namespace ids restart after a memory node restart, so
    // the node's frames are synchronized with its incarnation and no frame of
    // an earlier tree with this id survives.
    uint64_t create_namespace(int node, const uint8_t* tag, uint64_t* incarnation);
    // NS_DROP; its write-back registry entry is forgotten (the owner word is
    // freed memory) and its frames dropped before and after (the memory may
    // hold the next tree's nodes). Returns the bytes freed.
    uint64_t drop_namespace(int node, uint64_t ns);

    // ---- offloading ----
    // This process's decision model (created per pid, random seed).
    tree::OffloadPolicy* offload_policy();
    void set_offload_mode(tree::OffloadMode mode);

    // ---- trees ----
    void set_change_log(tree::TreeOptions::ChangeLog fn) { change_log_.store(fn, std::memory_order_release); }
    void set_log_position(tree::TreeOptions::LogPosition fn) { log_position_.store(fn, std::memory_order_release); }
    // Options for a new BTree of this process: the cache handle (nullptr
    // without a cache), the offload policy (with a cache) and the change log.
    tree::TreeOptions tree_options();

    // ---- statistics ----
    // Count into the Stats in `mem` (initialize: construct it first); nullptr:
    // the process-local Stats (the shared one stays remembered).
    void attach_stats(void* mem, bool initialize);
    // Count privately (on) or into the shared Stats again.
    void stats_private(bool on);

private:
    MemnodeClient client_;
    cache::SharedCache cache_;
    tree::OffloadPolicy* offload_ = nullptr;  // this process's (per pid)
    pid_t offload_pid_ = 0;
    tree::OffloadMode offload_mode_ = tree::OffloadMode::kAuto;  // dex.offload's default
    std::atomic<tree::TreeOptions::ChangeLog> change_log_{nullptr};
    std::atomic<tree::TreeOptions::LogPosition> log_position_{nullptr};
    Stats* shared_stats_ = nullptr;  // what attach_stats installed
};

}  // namespace dex::cluster
