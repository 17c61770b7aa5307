// dex node cache, process-local side (DEX 5): allocation of frames, selective
// admission, path-aware cooling and eviction over a shared CacheRegion.
//
// One Cache object per process (per thread in the C++ tests); it is not
// thread-safe. It holds what must not be shared: the free-frame set, the PRNG,
// and the write-back callback. Everything shared lives in CacheRegion.
//
// Frame life cycle
//   FREE --allocate_frame--> IO (owned by one process, filled privately)
//        --admit--> HOT (mapped; maybe swizzled into its parent)
//        --cool--> COOLING (unswizzled, written back if dirty, in a cooling bucket)
//        --touch--> HOT                       (second chance)
//        --pushed out of a full bucket / evicted from a random bucket-->
//        EVICTING --finish--> FREE (unmapped, version marked obsolete)
//   A pinned EVICTING frame goes back to HOT instead.
//
// Free frames come from, in order: this process's free set (a plain vector:
// frames freed by our own evictions), the region's shared free stack (frames
// given back by processes that exited), the never-used cursor, and finally
// replacement: sample two frames, prefer the lower level (leaves are colder),
// delegate down swizzled children (path-aware, DEX 5.3) to a frame without
// swizzled children, cool it; a push into a full cooling bucket evicts the
// bucket's oldest frame into our free set. If cooling frees nothing, evict the
// oldest frame of a random (reasonably full) bucket (DEX 5.4).
// (Boost.Intrusive is not used: the free set is a vector of u32 indices, and
// the shared structures cannot hold the pointers an intrusive container needs.)
//
// Write-back: the cache never does I/O itself. Dirty frames (write-back mode,
// src/README.md "Write-back mode") are handed to the WriteBack callback, already unswizzled, while the
// frame is locked: when cooled (the paper's choice: the page is written back
// before it becomes an eviction candidate) and, as a safety net, at eviction.
// The callback must not call back into the cache.
//
// Lock order (never reversed, so no deadlock): parent frame -> child frame ->
// cooling bucket / mapping bucket. Cache code only ever *tries* frame locks
// while holding another frame lock, except swizzle/unswizzle, which block on
// the child while the caller holds the parent; so the tree must never block on
// a parent's lock while holding a child's (take it with try_upgrade, restart
// on failure -- standard OLC).
//
// ---------------------------------------------------------------------------
// How the tree uses this (tree/descend_cache.cpp, cache_sync.cpp,
// writeback.cpp, offload_path.cpp). The rules are src/README.md "Node cache"
// (invariants C1..) and "Write-back mode" (W1..).
//
//  * Descent (descend_cache.cpp): root GAddr -> region.lookup(); at each node
//    v = begin_read(f, g) (header(f).begin_read() when reached through a
//    swizzled pointer), copy the header, check tree id / level / fences as for
//    a remote node, pick the child, validate(v). A swizzled child: read the
//    child's version, then re-validate the parent (lock coupling). Otherwise
//    lookup(c):
//      - a frame (COOLING: touch() first; false -> restart): begin_read(), then
//        swizzle_optimistic(parent, v, slot, child);
//      - kIoInProgress: restart from the cached root (no second remote read);
//      - a miss: if should_admit(level) and try_begin_io(c) == kOwner,
//        allocate_frame(), read the node straight into it (zero copy) and
//        admit_filled() it (admit() of a local copy if no frame could be had),
//        then swizzle it into the parent; otherwise read a local copy.
//    A node that fails its checks makes the next walk re-read the path
//    remotely, dropping the cached copies (not in write-back mode). Scans
//    walking right read leaves through BTree::read_node (frame, or admission
//    on a miss).
//  * Write-through (cache_sync.cpp): the remote lock is taken on a fresh
//    remote read and the new image built from it (never from a frame), then
//    published; cache_update() then installs it under the frame's lock if its
//    body_version is higher (an inner node is unswizzle_all()ed first), or
//    turns a pending admission's marker stale. Structure modifications hold
//    the frames of the nodes whose entries move (FrameHold) from before the
//    publish until their new images are installed. Freed nodes are
//    invalidate()d before their memory goes back (drop_cached_node).
//  * Write-back mode (writeback.cpp): in-place leaf changes under the frame
//    lock, mark_dirty(); the WriteBack callback writes copy_unswizzled()
//    images when frames cool / are evicted / invalidated / flush_frame()d.
//  * Offloading (offload_path.cpp, DEX 6.2): try_begin_io() for the missed
//    node, pin() the cached parent, the RPC, then abort_io() and unpin(); a
//    leaf the memory node changed gets the returned image (cache_update()).
//  * Purges: invalidate_if() for a restarted memory node
//    (cache/incarnations.h) and a dropped tree (cache/shared_cache.h); on a
//    hot standby, WAL replay drops the nodes the primary changed.
//  * dex_cache_stats(): region.for_each_frame() aggregated per (memory node,
//    tree id, level) (SharedCache::census); counters are in dex::stats().
// ---------------------------------------------------------------------------
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "cache/admission.h"
#include "cache/region.h"

namespace dex::cache {

class Cache {
public:
    // Writes the image of the dirty frame `frame` (locked by the caller) to remote
    // memory. False: could not (unreachable, timeout): the frame stays dirty and
    // is not evicted / dropped. Must not throw and must not call into the cache.
    using WriteBack = std::function<bool(uint32_t frame, const Node& unswizzled)>;
    // Writes back the dirty leaf frames frames[0..n) (all locked by the caller)
    // in as few round trips as it can; ok[i]: frame i is written and imgs[i]
    // now holds the image as published (its new version), or was discarded
    // (its node is gone). Must not throw and must not call into the cache.
    using WriteBackMany = std::function<void(const uint32_t* frames, Node* imgs, size_t n, bool* ok)>;

    // seed 0: derive from pid / clock / address.
    explicit Cache(CacheRegion& region, uint64_t seed = 0);
    // Gives this process's free frames back to the region's shared free stack.
    ~Cache();
    Cache(const Cache&) = delete;
    Cache& operator=(const Cache&) = delete;

    CacheRegion& region() { return r_; }
    void set_write_back(WriteBack wb) { write_back_ = std::move(wb); }
    void set_write_back_many(WriteBackMany wb) { write_back_many_ = std::move(wb); }
    void set_policy(AdmissionPolicy p) { admission_.set_policy(p); }
    const AdmissionPolicy& policy() const { return admission_.policy(); }
    // Called by admit() right after a frame was installed; false -> the frame
    // is dropped again and admit() returns kNoFrame (the caller keeps using its
    // local copy). cluster::ComputeProcess installs IncarnationTable::admit_ok
    // here (cache/incarnations.h) to refuse images read from a memory node
    // incarnation the region has already been purged of (src/README.md, C11).
    using AdmitCheck = std::function<bool(GAddr)>;
    void set_admit_check(AdmitCheck c) { admit_check_ = std::move(c); }
    Rng& rng() { return admission_.rng(); }

    // ---- admission ----
    // Admission control (DEX 5.4) keeps leaves fetched once from pushing hot
    // nodes out. While frames are still unused nothing is pushed out, so a
    // leaf turned away by the draw is admitted anyway (cache_leaves permitting):
    // a cache larger than the index then ends up holding all of it.
    bool should_admit(uint8_t level) {
        if (admission_.should_admit(level)) return true;
        return level == 0 && admission_.policy().cache_leaves && has_room();
    }
    // Frames that can be had without evicting anything (never used, or freed).
    bool has_room() { return !free_.empty() || r_.has_unused(); }
    MappingTable::Begin try_begin_io(GAddr g, uint32_t* frame = nullptr) { return r_.table().try_begin_io(g, frame); }
    void abort_io(GAddr g) { r_.table().abort_io(g); }
    // Caller owns g's I/O marker (try_begin_io == kOwner) and fetched `n` (a
    // remote image: no swizzled pointers). Copies it into a frame, maps g to
    // it, state HOT. Returns the frame, or kNoFrame if none could be freed (the
    // marker is then removed; proceed uncached). Counts stats().admissions.
    uint32_t admit(GAddr g, const Node& n);
    // Zero-copy variant: the caller allocate_frame()d f and read g's remote
    // image straight into node(f) (an RDMA READ then lands in the registered
    // cache region, no bounce buffer); installs it like admit(). A frame that
    // is not admitted after all goes back with release_frame(f) + abort_io(g).
    uint32_t admit_filled(uint32_t f, GAddr g);
    // Low-level variant: fill an allocated frame yourself (node(f)), then
    // install it under g (needs g's marker). False: no marker; f is released.
    // `dirty` (write-back mode): installed dirty with that lsn and
    // dirty_since (a split of a dirty leaf whose entries remote memory lacks:
    // the frame is born holding the only copy of some of them, W5).
    struct DirtyState {
        uint64_t lsn = 0;
        uint64_t since = 0;
        uint64_t imaged_at = 0;  // (the split leaf's: its image covered this half too)
    };
    bool install(uint32_t f, GAddr g, const DirtyState* dirty = nullptr);

    // ---- frames ----
    // A frame owned exclusively by the caller (state IO, version obsolete), or
    // kNoFrame if nothing could be freed (everything pinned / being admitted).
    uint32_t allocate_frame();
    // Give an owned (allocated, never installed) frame back.
    void release_frame(uint32_t f);
    size_t local_free() const { return free_.size(); }
    // Give this process's free frames back to the region's shared stack (a
    // process that drops frames but never admits any, e.g. WAL replay).
    void give_back_free() {
        for (uint32_t f : free_) r_.push_free(f);
        free_.clear();
    }

    // ---- replacement ----
    // Sample two frames and cool one (path-aware). True if a frame was cooled.
    bool cool_sample();
    // Delegate from `start` down swizzled children to a frame without swizzled
    // children and cool that one. Returns the cooled frame or kNoFrame.
    uint32_t cool_from(uint32_t start);
    // Pop bucket b's oldest frame and evict it into the free set. Returns it or kNoFrame.
    uint32_t evict_oldest(uint32_t bucket);
    // Drop g from the cache now (its node was freed / changed elsewhere). Fails
    // (false) if the frame is pinned or still has swizzled children.
    // A dirty frame is written back first (write_back = false: discarded, the
    // node is gone); a failed write-back keeps the frame (false).
    bool invalidate(GAddr g, bool write_back = true);
    // Write back frame f if it is dirty (takes its lock; the caller holds no
    // frame lock). True if it was written.
    bool flush_frame(uint32_t f);
    // flush_frame() of each of `frames`, the leaves in batches of
    // kFlushBatch through the WriteBackMany hook (a frame that is busy or
    // that the batch could not write goes through flush_frame()). Returns the
    // frames written.
    uint64_t flush_frames(const std::vector<uint32_t>& frames);
    // Leaves locked and written per batch: two round trips each (the lock
    // CASes, then bodies and lock words: 2 x 128 = net::kMaxBatch
    // sub-operations). A round trip costs its fixed CPU whatever it carries
    // (bench/results/2026-11-26-vm-round-trip-cpu.md), and a frame is held
    // for the batch's two round trips however many others it holds.
    static constexpr size_t kFlushBatch = 128;
    // Drops every mapped frame whose FrameInfo satisfies `pred` (leaves first,
    // unswizzling children as needed), e.g. every frame of one memory node or of
    // one tree id. Retries frames that are pinned / being modified for a while;
    // returns how many frames matched but could not be dropped (0 = all gone).
    // Frames admitted concurrently are not covered: callers make sure no
    // process admits matching nodes meanwhile (or re-check after admission).
    size_t invalidate_if(const std::function<bool(const FrameInfo&)>& pred);

private:
    // Delegation target below `start`, or kNoFrame (start not hot / race).
    uint32_t delegate(uint32_t start);
    bool cool_frame(uint32_t c);
    // Finish evicting a frame this process moved to EVICTING. True: freed.
    bool finish_evict(uint32_t f);
    bool write_back_locked(uint32_t f);

    CacheRegion& r_;
    Admission admission_;
    WriteBack write_back_;
    WriteBackMany write_back_many_;
    AdmitCheck admit_check_;
    std::vector<uint32_t> free_;
};

}  // namespace dex::cache
