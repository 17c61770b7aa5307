// The write-back registry and the dirty-owner-word protocol (src/README.md
// "Write-back mode", "Crash detection: the dirty-owner word").
//
// Every index that can use write-back mode has an 8-byte dirty-owner word in
// its namespace. It holds 0, or the random generation of the cache region
// (one compute-server life) that may hold dirty frames of the tree. This
// registry, in the shared cache block, has one entry per tree whose word may
// hold our generation:
//   - before a clean frame of a tree becomes dirty, register_dirty() makes
//     sure the word holds our generation (CAS 0 -> generation, once per tree
//     until the next flush; another generation there means an instance died
//     with dirty nodes of the tree: lost_dirty_error);
//   - flush() first clears `registered`, then writes back every dirty frame,
//     then writes 0 into the words of trees that did not register again
//     meanwhile and have no frame left dirty. A writer checks `registered`
//     under the frame lock it dirties the frame under, so either the flush's
//     scan (which takes each frame's lock) comes after the change and writes
//     it, or the writer sees registered == 0 and registers again, which keeps
//     the word set;
//   - check_owner_word() is the check made when a tree is opened.
// A full registry (kMaxTrees trees per region life) makes further trees write
// through (find_or_add answers -1).
//
// Lives in shared memory (plain data, no pointers); one per compute server.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "common/error.h"
#include "common/gaddr.h"

namespace dex {
class RemoteMemory;
struct Node;
}

namespace dex::cache {

class Cache;
class CacheRegion;

// "index x lost its remote memory" because an instance that held dirty nodes
// of it is gone (HINT REINDEX INDEX x).
Error lost_dirty_error(const std::string& index_name);

class WritebackRegistry {
public:
    static constexpr uint32_t kMaxTrees = 512;

    struct Entry {
        std::atomic<uint32_t> lock;        // spinlock (a remote op on the owner word is done under it)
        std::atomic<uint32_t> registered;  // 1: the owner word holds our generation; dirty frames may exist
        int32_t node;                      // home memory node
        uint64_t ns;                       // home namespace
        GAddr word;                        // the owner word; 0 = free / namespace dropped
        uint64_t incarnation;              // of the home node when the entry was made
        uint32_t tree_id;                  // tree::tree_id_for(node, ns): the tree's frames
    };

    // Empty registry. Only while no process uses it.
    void init();

    // Entries in use (entries are never removed; forget() only clears them).
    uint32_t used() const { return used_.load(std::memory_order_acquire); }
    const Entry& entry(int slot) const { return e_[slot]; }
    bool registered(int slot) const { return e_[slot].registered.load(std::memory_order_seq_cst) != 0; }

    // Entry of the tree (home node, namespace, owner word), or -1 (it never
    // had dirty frames in this region). word 0: -1.
    int find(int node, uint64_t ns, GAddr word) const;
    // Find or add; -1: registry full (the tree then writes through) or word 0.
    int find_or_add(int node, uint64_t ns, GAddr word, uint64_t incarnation, uint32_t tree_id);

    // Make sure the owner word of entry `slot` holds `generation` (CAS 0 ->
    // generation through `mem`). Throws lost_dirty_error(index_name) if it
    // holds another generation, and any error of the CAS.
    void register_dirty(int slot, uint64_t generation, RemoteMemory& mem, const std::string& index_name);

    // Write back every dirty frame (of entry `only`, or of every tree if
    // only < 0) through `cache` (this process's handle, whose WriteBack
    // callback does the writing) and set the owner words of the selected
    // trees left without dirty frames back to 0 (through `mem`, only while
    // the home node is still the incarnation the entry was made in). Returns
    // the frames written. A failed clear leaves the entry registered and
    // throws.
    uint64_t flush(int only, Cache& cache, RemoteMemory& mem);

    // Highest heap-WAL position (FrameHeader::lsn) carried by a dirty frame
    // of tree `tree_id`, or of any tree if `all` (0: none). 0 at once if no
    // tree ever registered (no frame can be dirty).
    uint64_t dirty_lsn_max(CacheRegion& region, uint32_t tree_id, bool all) const;
    // Lowest FrameHeader::dirty_since of a dirty frame of any tree: every
    // entry change logged before it is in remote memory (or in a frame being
    // written back right now). UINT64_MAX: nothing dirty.
    uint64_t dirty_since_min(CacheRegion& region) const;
    // Lowest position crash redo must start at for dirty frames: a frame's
    // imaged_at if it was logged whole since it turned dirty, else its
    // dirty_since (every change remote memory lacks is logged at or after
    // it, or is in an image logged at or after it). UINT64_MAX: nothing dirty.
    uint64_t crash_since_min(CacheRegion& region) const;

    // Log every dirty leaf frame whole (src/README.md "Write-back mode",
    // a checkpoint that cannot write back): under each frame's lock,
    // `log(node, ns, image)` -- the tree's home node and namespace, the
    // frame's image -- logs it and returns a log position at or before the
    // record (0: not logged), which becomes the frame's imaged_at. Returns
    // the frames logged. Waits for each frame's lock, holding no other.
    using ImageLog = std::function<uint64_t(int32_t node, uint64_t ns, const Node& img)>;
    uint64_t log_images(CacheRegion& region, const ImageLog& log) const;

    // The namespace (node, ns) is being dropped: forget its entries (the
    // word is freed memory from now on).
    void forget(int node, uint64_t ns);

    // Opening a tree: its owner word (read through `mem`) must be 0 or our
    // `generation` (0 without a cache); anything else is an instance that
    // crashed with dirty nodes of it: throws lost_dirty_error(index_name).
    static void check_owner_word(RemoteMemory& mem, GAddr word, uint64_t generation, const std::string& index_name);

private:
    std::atomic<uint32_t> lock_;  // serializes adding entries
    std::atomic<uint32_t> used_;
    Entry e_[kMaxTrees];
};

}  // namespace dex::cache
