// The shared part of the node cache: one region of caller-provided memory
// (PostgreSQL main shared memory, or an mmap(MAP_SHARED | MAP_ANONYMOUS)
// mapping made before fork) holding every frame, the mapping table and the
// cooling map. It stores no pointers (frame indices and self-relative offsets
// only), no mutexes and nothing on the heap, so any process that maps the
// memory -- at any address -- can attach() and use it.
//
// Layout (offsets from the 64-byte-aligned base):
//   CacheRegion header | FrameHeader[n] | node images [n] x kNodeSize |
//   MappingTable | CoolingMap
//
// This class holds the operations that need no process-local state (lookups,
// optimistic reads, second chance, swizzling, pinning, census). Allocation,
// admission, cooling and eviction need a per-process free-frame set and PRNG:
// they live in dex::cache::Cache (cache.h).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "cache/admission.h"
#include "cache/cooling_map.h"
#include "cache/frame.h"
#include "cache/index_stack.h"
#include "cache/mapping_table.h"
#include "tree/node_format.h"
#include "tree/node_layout.h"

namespace dex::cache {

struct FrameInfo {
    uint32_t frame;
    GAddr gaddr;
    uint32_t tree_id;  // from the node header
    uint8_t level;
    FrameState state;
    bool dirty;
    uint32_t pins;
};

class CacheRegion {
public:
    // Frames for a cache of `cache_bytes` (node images only): cache_bytes / kNodeSize, at least 4.
    static uint32_t frames_for(size_t cache_bytes);
    // Bytes the caller must provide so that init() builds frames_for(cache_bytes)
    // frames (headers, tables and alignment slack included).
    static size_t bytes_for(size_t cache_bytes);
    // Builds a region in [mem, mem + bytes) with as many frames as fit. Run once
    // (PostgreSQL: in the shmem startup hook when the segment is created).
    // Throws dex::Error(kInvalid) if not even 4 frames fit.
    static CacheRegion* init(void* mem, size_t bytes, AdmissionPolicy policy = {});
    // The region previously built in `mem` (same base address or another
    // mapping of the same memory). Throws if there is none.
    static CacheRegion* attach(void* mem);

    uint32_t frame_count() const { return nframes_; }
    FrameHeader& header(uint32_t f) { return headers()[f]; }
    Node* node(uint32_t f) {
        return reinterpret_cast<Node*>(reinterpret_cast<char*>(this) + nodes_off_ + size_t(f) * kNodeSize);
    }
    MappingTable& table() { return *reinterpret_cast<MappingTable*>(reinterpret_cast<char*>(this) + table_off_); }
    CoolingMap& cooling() { return *reinterpret_cast<CoolingMap*>(reinterpret_cast<char*>(this) + cooling_off_); }
    AdmissionPolicy admission_policy() const { return {cache_leaves_ != 0, leaf_admission_}; }
    // Frames ever handed out (only these can be sampled for cooling).
    uint32_t used_frames() const {
        uint32_t c = next_unused_.load(std::memory_order_relaxed);
        return c < nframes_ ? c : nframes_;
    }

    // ---- lookup (counts cache_hits / cache_misses) ----
    // Frame holding g, MappingTable::kIoInProgress, or kNoFrame. A frame is only
    // a hint until begin_read(frame, g) succeeds; if its state is kCooling, call
    // touch() before using it.
    uint32_t lookup(GAddr g);

    // Optimistic read of frame f expected to hold g: version to validate(), or
    // FrameHeader::kRestart if f is locked, obsolete, or holds another node.
    uint64_t begin_read(uint32_t f, GAddr g);
    bool validate(uint32_t f, uint64_t v) { return header(f).validate(v); }

    // Second chance (DEX 5.1): a cooling frame touched again becomes hot. True
    // if f holds g and is hot now; false if it is being evicted / was reused
    // (treat as a miss). Re-swizzling into the parent is NOT done here: only the
    // traversal knows the parent and slot, and swizzling needs the parent's
    // lock, so the traversal calls swizzle_optimistic() when it next passes by.
    bool touch(uint32_t f, GAddr g);

    // ---- swizzling (DEX 5.1) ----
    // Entry `slot` of the inner node in frame `parent` (locked exclusively by the
    // caller) holds child's GAddr; make it swizzled_ref(child). Requires both
    // frames hot, child unswizzled (parent == kNoFrame), child.level + 1 ==
    // parent level. Briefly locks the child (lock order: parent before child).
    // True if swizzled (or already swizzled to child).
    bool swizzle(uint32_t parent, uint16_t slot, uint32_t child);
    // Same, for a traversal holding only an optimistic read (version pv) of the
    // parent: upgrades to the lock, swizzles, unlocks. False if pv is stale.
    bool swizzle_optimistic(uint32_t parent, uint64_t pv, uint16_t slot, uint32_t child);
    // Restores the child's GAddr in slot `slot` of `parent` (locked by the caller).
    bool unswizzle(uint32_t parent, uint16_t slot);
    // Unswizzles every child of `parent` (locked by the caller), e.g. before an
    // inner split moves entries to a new node. Returns how many.
    uint32_t unswizzle_all(uint32_t parent);
    // The node image of f with every swizzled child replaced by its GAddr: what
    // may be written to remote memory. Caller holds f's lock (or validates after).
    void copy_unswizzled(uint32_t f, Node& out);
    // A child pointer read from a cached inner node, as a GAddr.
    GAddr resolve(GAddr child_ref) {
        return gaddr_is_swizzled(child_ref) ? header(swizzled_frame(child_ref)).gaddr.load(std::memory_order_acquire)
                                            : child_ref;
    }
    // Racy-but-untearable accessors for an inner entry's child pointer (aligned 8 bytes).
    static GAddr load_child(const Node* n, uint32_t i);
    static void store_child(Node* n, uint32_t i, GAddr v);
    // How many slots an inner node of this layout can have (flag read racily).
    static uint32_t slot_limit(const Node* n) {
        return tree::max_inner_slots((__atomic_load_n(&n->flags, __ATOMIC_RELAXED) & kNodeSlotted) != 0);
    }
    // min(count, slot limit) of an inner node (count read racily).
    static uint32_t entries_in_use(const Node* n) {
        uint32_t c = __atomic_load_n(&n->count, __ATOMIC_RELAXED), lim = slot_limit(n);
        return c < lim ? c : lim;
    }
    // The slots that may hold a swizzled child reference. Fixed layout: all
    // of them, since an in-place shift may leave a stale copy past count.
    // Slotted layout: [0, count) only -- past the slot array lie free space
    // and entry bytes, which must never be taken for a child, and a slotted
    // erase zeroes the slot it vacates, so no reference lingers there
    // (tree/slotted_node.cpp; cache invariant C15 in src/README.md).
    static uint32_t child_slots(const Node* n) {
        return (__atomic_load_n(&n->flags, __ATOMIC_RELAXED) & kNodeSlotted) != 0 ? entries_in_use(n)
                                                                                   : slot_limit(n);
    }

    // ---- pinning ----
    // A pinned frame is neither cooled nor evicted. pin() is for a frame the
    // caller does not have locked: false if f no longer holds g. A cooling frame
    // gets its second chance. Do not call it on a frame you hold locked: use
    // pin_locked() then.
    bool pin(uint32_t f, GAddr g);
    void pin_locked(uint32_t f) { header(f).pins.fetch_add(1, std::memory_order_seq_cst); }
    void unpin(uint32_t f) { header(f).pins.fetch_sub(1, std::memory_order_release); }

    // Caller holds f's lock and modified the image (write-back mode).
    void mark_dirty(uint32_t f) { header(f).dirty.store(1, std::memory_order_relaxed); }
    // Caller holds f's lock; remote memory now holds f's image (written back,
    // or published from it), or the node is gone. A dirty frame's cleaning
    // is counted *before* its flag drops and before the frame can leave the
    // mapping table: an offloaded read of a write-back tree (which reads
    // remote memory and cannot see frames) is checked against this count
    // (src/README.md W15).
    void mark_clean(uint32_t f) {
        FrameHeader& h = header(f);
        if (h.dirty.load(std::memory_order_relaxed)) cleanings_.fetch_add(1, std::memory_order_seq_cst);
        h.dirty.store(0, std::memory_order_relaxed);
        h.lsn.store(0, std::memory_order_relaxed);
        h.imaged_at.store(0, std::memory_order_relaxed);
    }
    // How many dirty frames have been cleaned (mark_clean) so far.
    uint64_t cleanings() const { return cleanings_.load(std::memory_order_seq_cst); }

    // ---- census (dex_cache_stats) ----
    // Every frame that is not free, with the tree id and level read from its
    // node (best effort while frames change). Caller aggregates.
    void for_each_frame(const std::function<void(const FrameInfo&)>& fn);

    // ---- write-back mode: draining (src/README.md "Write-back mode", W14) ----
    // A dirty leaf whose first change was logged before this position takes
    // no more in-place inserts, nor splits that keep it dirty, until it is
    // written back: a leaf that keeps changing would otherwise never be
    // covered by the durable position, never written back, and hold the
    // flushed position (checkpoints, standbys) back forever.
    uint64_t drain_before() const { return drain_before_.load(std::memory_order_acquire); }
    void raise_drain_before(uint64_t lsn) {
        uint64_t cur = drain_before_.load(std::memory_order_relaxed);
        while (cur < lsn && !drain_before_.compare_exchange_weak(cur, lsn, std::memory_order_acq_rel)) {
        }
    }
    // ---- write-back mode: paused (src/README.md "Write-back mode", W18) ----
    // While paused, no frame takes an in-place change: a clean leaf stays
    // clean and a dirty one is written through with the next change to it.
    // A compute server pauses while nothing makes checkpoints wait for its
    // dirty leaves (PostgreSQL: the dex worker's checkpoint fence is down),
    // so nothing dirty is left that only the WAL before a checkpoint holds.
    // Every in-place change reads the flag under the frame lock it changes
    // the frame under; pause_write_back() sets it, then takes and releases
    // every frame lock once: when it returns, every change that read
    // "not paused" has finished, and a scan for dirty frames sees it.
    // Paused for any of several reasons (bits: each is set and cleared by
    // its own owner); resumed when none is left.
    static constexpr uint32_t kPauseNoFence = 1;  // no checkpoint fence (W18)
    static constexpr uint32_t kPauseStandby = 2;  // a hot standby is attached and its scans should not wait (W11)
    bool write_back_paused() const { return wb_paused_.load(std::memory_order_seq_cst) != 0; }
    uint32_t write_back_pause_reasons() const { return wb_paused_.load(std::memory_order_seq_cst); }
    void pause_write_back(uint32_t why = kPauseNoFence);
    void resume_write_back(uint32_t why = kPauseNoFence) { wb_paused_.fetch_and(~why, std::memory_order_seq_cst); }

    // Frame f (locked or read under its version) is dirty and must drain.
    bool draining(uint32_t f) {
        const FrameHeader& h = header(f);
        return h.dirty.load(std::memory_order_relaxed) &&
               h.dirty_since.load(std::memory_order_relaxed) < drain_before();
    }

    // ---- free frames (used by Cache) ----
    uint32_t take_unused();               // next never-used frame, or kNoFrame
    bool has_unused() const { return next_unused_.load(std::memory_order_relaxed) < nframes_; }
    void push_free(uint32_t f);           // shared stack: frames a process gives back
    uint32_t pop_free();                  // or kNoFrame

private:
    static constexpr uint64_t kMagic = 0x6465782d63616368ull;  // "dex-cach"
    struct Layout {
        uint64_t headers_off, nodes_off, table_off, cooling_off, total;
        uint32_t buckets, entries, cooling_buckets;
    };
    static Layout layout_for(uint32_t frames);
    FrameHeader* headers() { return reinterpret_cast<FrameHeader*>(reinterpret_cast<char*>(this) + headers_off_); }

    uint64_t magic_ = 0;
    uint32_t nframes_ = 0;
    uint32_t cache_leaves_ = 1;
    double leaf_admission_ = 0.1;
    uint64_t headers_off_ = 0, nodes_off_ = 0, table_off_ = 0, cooling_off_ = 0, total_ = 0;
    alignas(64) std::atomic<uint32_t> next_unused_{0};  // "never used" cursor
    alignas(64) std::atomic<uint64_t> drain_before_{0};
    // (beside drain_before_: both read by every in-place change, rarely written;
    // not on cleanings_' line, which every write-back increments)
    std::atomic<uint32_t> wb_paused_{0};
    alignas(64) std::atomic<uint64_t> cleanings_{0};
    alignas(64) IndexStack free_;                        // frames given back by exiting processes
};

}  // namespace dex::cache
