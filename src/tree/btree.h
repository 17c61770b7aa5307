// The B-link tree over remote memory (src/README.md: "Structure modifications").
// One BTree object per open index; not thread-safe per object (each thread /
// backend uses its own BTree and its own Transport), but any number of BTree
// objects in any number of processes may work on the same remote tree.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "transport/remote_memory.h"
#include "tree/journal.h"
#include "tree/key.h"
#include "tree/layout.h"
#include "tree/node_io.h"
#include "tree/node_layout.h"
#include "tree/test_hook.h"
#include "tree/tree_info.h"

namespace dex::tree {

// Tree id stamped into every node of a tree (invariant 4 in src/README.md):
// the home namespace's id, with the home memory node folded into the top byte,
// so two trees homed on different memory nodes whose namespaces got the same
// number never share an id (a tree's nodes may live on every memory node).
// Home node 0 gives exactly the low 32 bits of the namespace id.
inline uint32_t tree_id_for(uint32_t home_node, uint64_t ns) {
    return static_cast<uint32_t>(ns) ^ (home_node << 24);
}

// Default placement level: every subtree rooted at this level lies on one
// memory node. Level 2 is a subtree of about 35 x 35 leaves at the bulk-load
// fill (~1.2K nodes of 1 KiB, ~1.3 MB; up to 39 x 39 nodes when full): big
// enough that an offloaded traversal does real work on one memory node and
// that a bulk load spreads a 10M-key index (~190K leaves) over ~150
// subtrees, small enough to balance memory nodes at MB granularity.
constexpr int kDefaultPlacementLevel = 2;
constexpr int kMaxPlacementLevel = 8;

struct SiblingFrame;  // a dirty split's new frame (writeback_split.cpp)

template <class L>
class BTreeT {
public:
    using Layout = L;
    using Key = typename L::Key;        // owns a key (EntryKey, or a byte string)
    using KeyRef = typename L::KeyRef;  // borrows one

    BTreeT(RemoteMemory& mem, uint32_t node_id, uint64_t ns, TreeOptions opts = {});

    uint32_t node_id() const { return node_id_; }  // home memory node: root word, upper levels
    uint64_t ns() const { return ns_; }            // home namespace
    // Spread the tree over several memory nodes (src/README.md "Placement over
    // several memory nodes"): ns_by_node[i] is the tree's namespace on memory
    // node i (0: not used by this tree; [node_id()] must be ns()); every
    // subtree rooted at `level` (>= 1) lies on one memory node.
    void set_placement(std::vector<uint64_t> ns_by_node, int level);
    int placement_level() const { return place_level_; }
    const std::vector<uint64_t>& namespaces() const { return part_ns_; }
    // How many memory nodes hold a namespace of this tree (> 1: subtrees may
    // be placed on, and migrate to, another one).
    size_t partitions() const {
        return static_cast<size_t>(std::count_if(part_ns_.begin(), part_ns_.end(), [](uint64_t ns) { return ns != 0; }));
    }
    uint32_t tree_id() const { return tree_id_; }
    // Gives the blocks this handle holds for its next splits' siblings
    // (spares_) back to their memory nodes, best effort (closing the handle;
    // only over connections open now).
    void release_spares();
    GAddr held_spare(uint32_t node) {  // (tests: the first of the node's spares)
        std::lock_guard<std::mutex> g(spares_mu_);
        for (size_t i = node * kSparesPerNode; i < (node + 1) * kSparesPerNode && i < spares_.size(); i++)
            if (spares_[i]) return spares_[i];
        return 0;
    }
    // Switch write-back mode (only effective with a cache). Switching it off
    // does not write dirty frames back: the caller flushes them first.
    // `log_entries` (may be empty): TreeOptions::log_entries, told of every
    // entry change while write-back mode is on.
    void set_write_back(bool on, std::function<bool()> register_dirty,
                        decltype(TreeOptions::log_entries) log_entries = {}) {
        opts_.write_back = on;
        opts_.register_dirty = std::move(register_dirty);
        opts_.log_entries = std::move(log_entries);
        wb_ = on && cache_ != nullptr;
    }
    void set_log_position(TreeOptions::LogPosition fn) { opts_.log_position = fn; }
    void set_op_timeout(int ms) {
        opts_.op_timeout_ms = ms;
        io_.set_op_timeout(ms);
    }

    // Crash consistency (src/README.md "Crash survival: the insert journal"):
    // inserts given a heap LSN record themselves in this journal lane first.
    // nullptr: never (tests, benchmarks without a heap).
    void set_journal(JournalWriter* j) { journal_ = j; }

    // One empty leaf as root (fences -inf/+inf), installed with SET_ROOT.
    void init_empty();
    // Adds `key`; false if that exact entry (value and TID) already exists.
    // `lsn`: end of the heap WAL record of the entry's row (0: none); WAL is
    // durable up to `durable`. If lsn > durable, the insert is journaled (or,
    // in write-back mode, its dirty leaf is not written back before WAL up to
    // lsn is durable). Throws NeedDurable if WAL must be flushed first;
    // nothing was changed then.
    //
    // `full` (bottom-up deletion, src/README.md "Dead-entry hints"): when the
    // leaf is full and the entry would split it, give up instead -- return
    // false with full->leaf / full->version set to the leaf and the
    // body_version it was locked at, having changed nothing (journal
    // included) and released every lock; the caller may remove dead entries
    // there (read_leaf, remove_if_unchanged) and insert again. full->leaf
    // stays 0 whenever anything else happened. It still splits (as without
    // `full`) when an offloaded attempt already wrote the entry's journal
    // record. Write-back mode: a cached leaf found full under its frame lock
    // gives up with full->frame / frame_version, the frame's version word
    // then (read_leaf and remove_if_unchanged go to the frame, K5).
    struct LeafFull {
        GAddr leaf = 0;
        uint64_t version = 0;
        uint32_t frame = 0xFFFFFFFFu;
        uint64_t frame_version = 0;
    };
    bool insert(KeyRef key, uint64_t lsn = 0, uint64_t durable = UINT64_MAX, LeafFull* full = nullptr);
    // insert() of keys[0..n) (meant ascending and distinct; order is not
    // needed for correctness), lsns[i] being entry i's row LSN, in as few
    // round trips as it can: one OFFLOAD_BATCH (a slotted tree:
    // OFFLOAD_BYTES_BATCH) per memory node for up to
    // net::kMaxOffloadBatch entries (src/README.md "Offloading", batched
    // inserts; insert_batch.cpp). *done counts the entries known to be in the
    // tree, always a prefix of keys[]. Throws NeedDurable when WAL must be
    // flushed before entry *done can be journaled: nothing of keys[*done..n)
    // was changed then. Any other exception: *done is a lower bound.
    void insert_batch(const Key* keys, const uint64_t* lsns, size_t n, uint64_t durable, size_t* done);
    // The end of a multi-row statement: read back the leaves its batches
    // dropped from the cache that were cached before (and the siblings
    // memory nodes split off those), in batched READs, and admit them
    // (insert_batch.cpp). Best effort: what it cannot read stays uncached.
    void rewarm_batched();
    // Exact-entry lookup.
    bool contains(KeyRef key);
    // Deletes exact entries; `keys` sorted ascending. Returns how many existed.
    uint64_t remove(const Key* keys, size_t n);
    // Write-back crash redo of a leaf logged whole (src/README.md "Write-back
    // mode", a checkpoint that could not write back; writeback_image.cpp):
    // makes the key range of leaf image `img`, [low fence, high fence), hold
    // exactly the image's entries, written through -- entries there that the
    // image lacks are removed, its entries that are missing inserted. The
    // range may span other leaves by now (splits, merges); it is replayed by
    // key. Returns the entries changed. Error(kCorrupt): not a leaf image of
    // this layout.
    uint64_t replay_leaf_image(const Node& img);
    // Dead-entry hints (src/README.md "Dead-entry hints"): removes keys[0..n)
    // (sorted ascending) from the leaf at `leaf` only if that leaf is still
    // at body_version `version`, the image a Scan returned them from
    // (Scan::leaf(), leaf_version()). Any publish since -- an insert, a
    // split, a merge, a delete, a reuse of the memory -- makes it a no-op:
    // the scan's judgement was about that image, and an equal (key, TID)
    // inserted after a VACUUM cycle freed and reused the TID must not go.
    // Returns how many were removed. Never merges (an emptied leaf waits for
    // compact()). Write-back trees: their in-place changes do not advance
    // body_version, so the identity of the image is the cache frame it was
    // copied from at that frame's version word (`frame`, `frame_version`:
    // Scan::leaf_frame(), leaf_frame_version()); the entries go in place
    // (wb_kill), and without a frame stamp nothing is removed -- except a
    // deferred kill (K9, present_only without a frame stamp or hold), which
    // goes wherever the leaf's newest image is (remove_present).
    // `bottom_up`: a bottom-up deletion pass's removal (counted apart).
    // `seen_at`: a moment at which `version` was the leaf's current one
    // (Scan::leaf_seen_at(); default: unknown). Within a second of it the
    // lock is tried at `version` straight away, the image read in the same
    // batch: two round trips (lock + read, publish) instead of three.
    // `hold_lsn` (write-back trees): the frame is not written back before
    // the WAL up to there is durable and replayed by every live standby
    // (the kill's conflict-horizon record, K7); 0: nothing to hold for. A
    // write-through tree refuses a hold (its removal is remote at once).
    // `present_only` (K8): a write-back tree's frame need not be at
    // `frame_version` any more, a write-through leaf not at `version` (K9:
    // a kill deferred until the standbys replayed its record); the entries
    // still in it go -- a deferred kill's also from the leaves a split moved
    // them to (remove_present). Only for a caller that knows no VACUUM can have
    // recycled one of their TIDs since the batch was read.
    uint64_t remove_if_unchanged(GAddr leaf, uint64_t version, const Key* keys, size_t n,
                                 bool bottom_up = false,
                                 std::chrono::steady_clock::time_point seen_at = {},
                                 uint32_t frame = 0xFFFFFFFFu, uint64_t frame_version = 0,
                                 uint64_t hold_lsn = 0, bool present_only = false);
    // May a kill at this stamp still remove anything? Write-back mode with a
    // frame stamp: only while the frame's version word is `frame_version`.
    // Write-through: not if a cached frame of `leaf` is past body version
    // `version` (what the scan judged). Local loads that spare a kill that
    // would be skipped its round trips; true where only a remote read could
    // tell.
    bool stamp_current(GAddr leaf, uint32_t frame, uint64_t frame_version, uint64_t version) const;
    // The entries of the leaf at `leaf` (one remote read) if it is still at
    // body_version `version` (what insert() reported in LeafFull); false
    // (out empty) if it changed, was freed or reused. Write-back mode: from
    // cache frame `frame`, only while its version word is `frame_version`
    // (no round trip; no frame stamp: false).
    bool read_leaf(GAddr leaf, uint64_t version, std::vector<Key>& out, uint32_t frame = 0xFFFFFFFFu,
                   uint64_t frame_version = 0);
    // Merge away leaves that a delete left empty (a merge skipped under lock
    // contention is retried here; VACUUM calls it). Returns nodes freed.
    uint64_t compact();

    // Entries lo <= k <= hi, a leaf at a time (tree/btree_scan.h).
    class Scan;
    // Whether leaf image n has room for fewer than kNearlyFullRoom more
    // entries of the size of its last one (Scan::leaf_nearly_full): the
    // statement's own insert and a few concurrent ones between a scan's
    // batch and its kill.
    static constexpr int kNearlyFullRoom = 3;
    static bool leaf_nearly_full(const Node& n);
    std::unique_ptr<Scan> scan(KeyRef lo, KeyRef hi, bool backward = false) {
        return std::make_unique<Scan>(*this, lo, hi, backward);
    }

    // Bottom-up load from strictly ascending keys (tree/btree_scan.h).
    class BulkLoader;

    // Offloading (DEX 6): the memory node holding `start` (a node at `level`,
    // at or below the placement level, so its whole subtree is on that node)
    // finishes the operation on `key` there: kind = net::kOffloadLeaf (the
    // leaf covering key is copied to *leaf_out), kOffloadInsert or
    // kOffloadDelete (only if no split / merge is needed). Returns the
    // net::OffloadStatus; kOffloadNeedsSmo / kOffloadRestart changed nothing
    // and the caller takes the normal path. A changed leaf's cached copy is
    // dropped before returning.
    uint8_t offload(uint8_t kind, GAddr start, int level, KeyRef key, Node* leaf_out = nullptr,
                    GAddr* leaf_addr = nullptr);

    // Verifies every invariant of node_layout.h / README; throws
    // Error(kCorrupt) naming the node and the violated invariant.
    // check() walks the levels without locks, so a structure modification
    // running meanwhile (a VACUUM merge, a split) can show it a parent and a
    // child from different moments. It therefore reports corruption only if
    // the same walk fails again after the tree had time to settle.
    TreeInfo check();
    TreeInfo check_once();
    // Counts by walking the levels, no invariant checks.
    TreeInfo info();

    GAddr root() { return root_ ? root_ : refresh_root(); }
    GAddr refresh_root();

private:
    friend class Scan;
    friend class BulkLoader;
    using Path = std::array<GAddr, 40>;  // node visited at each level during descent
    // Descent::offloaded: no memory node finished the operation.
    static constexpr uint8_t kNoOffload = 0xff;

    // What a descent found. Per call: the caller decides from it whether to
    // finish its operation itself (btree.cpp) or whether it is already done.
    struct Descent {
        // The node at the requested level covering the key (its image in the
        // caller's `out`); 0: the tree's root is below the requested level.
        GAddr addr = kNullGAddr;
        // `out` was copied from a cache frame (the node is cached). A write to
        // it done one-sided still re-reads, locks and publishes the leaf, so
        // the offload policy may send it to the memory node instead
        // (offload_cached_write).
        bool cached = false;
        // A memory node finished the operation during the descent (DEX 6):
        // kOffloadDone (lookup / scan: `out` is the leaf; write: done, `out` is
        // the changed leaf) or kOffloadNoop (write: entry already there /
        // absent). kNoOffload: the descent went on one-sided.
        uint8_t offloaded = kNoOffload;
        // The level of `addr`: the requested level, except for a
        // kFindOffloadStart descent, which stops at a missed node.
        int level = 0;
        // `cached`: the frame `out` was copied from and its version word,
        // validated after the copy (a write-back kill's identity of the image).
        uint32_t frame = 0xFFFFFFFFu;
        uint64_t frame_version = 0;
    };
    // descend_leaf() kind of a batched insert's descent (insert_batch.cpp):
    // through cached nodes only, stopping at the first node at or below the
    // placement level that is not cached (Descent::addr / level), without
    // reading it -- where the memory node will start. Above the placement
    // level misses are read as usual; a cached leaf is returned as found.
    static constexpr uint8_t kFindOffloadStart = 0xfe;

    // ---- key order against a node's fences (either layout) ----
    // k (lt: "the keys < k") lies left of n's low fence: n is right of it.
    static bool left_of_low(const Node& n, KeyRef k, bool lt) {
        int c = L::compare(L::low(n), k);
        return lt ? c >= 0 : c > 0;
    }
    // k (lt: "the keys < k") lies below n's high fence.
    static bool below_high(KeyRef k, const Node& n, bool lt = false) {
        if (L::high_is_pos_inf(n)) return true;
        int c = L::compare(k, L::high(n));
        return lt ? c <= 0 : c < 0;
    }
    static bool covers(const Node& n, KeyRef k, bool lt) { return !left_of_low(n, k, lt) && below_high(k, n, lt); }
    // Leaf entry pos (a lower_bound) is exactly k.
    static bool has_entry(const Node& n, size_t pos, KeyRef k) {
        return pos < n.count && L::equal(L::entry(n, pos), k);
    }

    // k as a one-element array of Key (the slotted layout copies it into tmp).
    static const Key* as_array(KeyRef k, Key& tmp) {
        if constexpr (L::kSlotted) {
            tmp.assign(k);
            return &tmp;
        } else {
            (void)tmp;
            return &k;
        }
    }

    Deadline deadline() const { return Deadline(opts_.op_timeout_ms); }
    bool set_root(GAddr expected, GAddr desired);

    // ---- memory for nodes (placement.cpp) ----
    // One node on memory node `node` (in the tree's namespace there). Out of
    // space: Error(kOutOfSpace) "memory nodes out of space" with every node's sizes.
    GAddr alloc_node(uint32_t node);
    // A node that may go anywhere (a new root above the placement level): the
    // home node, else the memory node with most free space; full nodes skipped.
    GAddr alloc_anywhere();
    void free_node(GAddr a);
    // Spare siblings (src/README.md "Offloading", memory-node splits): per
    // memory node one block a split's reply handed out, the next split's
    // sibling. take: 0 if none; put_back: held, or FREEd if one is (threads
    // sharing a handle); spare_or_alloc: the spare, else an ALLOC.
    GAddr take_spare(uint32_t node);
    void put_back_spare(GAddr a);
    GAddr spare_or_alloc(uint32_t node);
    // Memory nodes of this tree by free bytes (STATS), most free first. A node
    // that does not answer counts as full, except `must_answer` (whose error
    // is thrown: the caller holds locks through its connection).
    std::vector<std::pair<int64_t, uint32_t>> nodes_by_free(uint32_t must_answer = 0xFFFFFFFFu);
    Error out_of_space(const std::string& what);
    uint64_t fresh_version(GAddr a);
    // fresh_version() from the first 24 bytes of `a` already read (`w`: lock
    // word, checksum, body_version of its previous life).
    static uint64_t fresh_version_from(const uint64_t w[3]);

    // ---- descent (btree.cpp; through the cache: descend_cache.cpp) ----
    // Node at `level` covering k (lt: covering "keys < k"). Fills out/path.
    Descent descend(KeyRef k, int level, Node& out, Path* path, const Deadline& dl, bool lt = false) {
        return descend_op(k, level, out, path, dl, lt, 0);
    }
    // descend() to the leaf covering k for an operation whose rest a memory
    // node may finish if the descent misses the cache low enough (DEX 6):
    // net::kOffloadLeaf (lookup, forward scan), kOffloadInsert / kOffloadDelete
    // (single-entry writes); 0: never.
    Descent descend_leaf(KeyRef k, uint8_t offload_kind, Node& out, Path* path, const Deadline& dl) {
        return descend_op(k, 0, out, path, dl, false, offload_kind);
    }
    Descent descend_op(KeyRef k, int level, Node& out, Path* path, const Deadline& dl, bool lt,
                       uint8_t offload_kind) {
        if (cache_) return descend_cached(k, level, out, path, dl, lt, offload_kind);
        // Without a cache nothing is offloaded: every node is read anyway (the
        // offloading decision is made on cache misses).
        Descent d;
        d.addr = descend_remote(k, level, out, path, dl, lt);
        return d;
    }
    // Remote reads only (no cache).
    GAddr descend_remote(KeyRef k, int level, Node& out, Path* path, const Deadline& dl, bool lt);
    // descend() through the node cache: optimistic lock coupling over cached
    // frames, swizzled child pointers, admission on misses (src/README.md
    // "Node cache"). One call = one CachedDescent (descend_cache.cpp).
    Descent descend_cached(KeyRef k, int level, Node& out, Path* path, const Deadline& dl, bool lt,
                           uint8_t offload_kind);
    class CachedDescent;
    // A validated copy of the node at `a` (from its cached frame if there is
    // one, else a remote read, admitted like a leaf reached by descent).
    // False: no valid image. Only used for leaves (a scan walking right):
    // with cache_leaves = false it always reads remotely.
    // `frame` / `frame_version` (optional): the frame the copy came from and
    // its validated version word, or kNoFrame / 0.
    bool read_node(GAddr a, Node& out, const Deadline& dl, uint32_t* frame = nullptr,
                   uint64_t* frame_version = nullptr);
    bool valid_node(const Node& n, int level) const;
    // A validated image of `leaf`, still a live leaf of this tree at exactly
    // body_version `version` (read_leaf, remove_if_unchanged): a version means
    // nothing on a node of another tree or level, or a freed one.
    bool read_leaf_at(GAddr leaf, uint64_t version, Node& out, const Deadline& dl);
    // A kill the extension deferred until the standbys replayed its record
    // (K9: present_only, no frame stamp, no hold; kill_present.cpp): the
    // entries still in the index go, wherever the leaf's newest image and
    // the splits since put them. Counted as kills (bottomup_removed) and
    // kills_skipped.
    uint64_t remove_present(GAddr leaf, const Key* keys, size_t n, bool bottom_up);
    // A write-through leaf's removal: at body_version `version` (0: at the
    // version found now, only the entries still in it), by its memory node
    // where it does that (offload_kill), else locked here (btree.cpp).
    uint64_t remove_at(GAddr leaf, uint64_t version, const Key* keys, size_t n, bool bottom_up,
                       std::chrono::steady_clock::time_point seen_at);
    // A consistent copy of this server's frame of `leaf` into `img` (a local
    // read; false: no frame, one being read in or replaced, or not that leaf).
    bool cached_leaf_copy(GAddr leaf, Node& img) const;
    // remove_if_unchanged's first attempt: the lock at `version` without a
    // read first, the image read in the lock's batch (btree.cpp).
    LockedNode* lock_at_version(Locks& locks, GAddr leaf, uint64_t version,
                                std::chrono::steady_clock::time_point seen_at);

    // ---- cached copies of changed nodes (cache_sync.cpp) ----
    // After a remote publish of `fresh` at `a`: bring a cached copy up to date
    // (under the frame lock; never goes backwards in body_version). An
    // admission of `a` in progress is marked stale (its read may predate the
    // publish): it will not install its image. Never waits.
    void cache_update(GAddr a, const Node& fresh);
    // Replace the image of frame f (locked by the caller, holding a) by
    // `fresh`, unswizzling its children first (except frames in `held`, which
    // the caller has locked too). False: f holds a previous life of that memory
    // (other tree or level): the caller drops it after unlocking.
    bool install_locked(uint32_t f, const Node& fresh, const std::vector<uint32_t>& held);
    // (install_locked: how many swizzled children one inner frame can keep, either layout)
    static constexpr size_t kMaxKeptSwizzles = std::max(max_inner_slots(false), max_inner_slots(true));
    static int child_slot_of(const Node& inner, GAddr g, uint32_t& from);
    // The cached frames of nodes whose entries a structure modification moves
    // (a split's left half, both leaves of a merge, a migrated subtree) are
    // locked from before the remote publish until the new images are
    // installed: no backend of this compute server can read an image older
    // than the publish once another writer may have built on it
    // (src/README.md "Node cache", writes). Frames are taken parent before
    // child (hold() in level-descending order); an admission in progress is
    // marked stale instead. If the publish fails, the held frames are made
    // unreadable (tree id 0: readers re-read the path remotely) and dropped.
    class FrameHold {
    public:
        explicit FrameHold(BTreeT& t) : t_(t) {}
        ~FrameHold();
        FrameHold(const FrameHold&) = delete;
        FrameHold& operator=(const FrameHold&) = delete;
        // Take a's frame (if cached) or stale its admission. `skip`: a frame
        // the caller already holds (a write-back guard's).
        void hold(GAddr a, uint32_t skip = 0xFFFFFFFFu);
        // Take a's frame only if that needs no waiting: true if it is held
        // now (or already was). False: not cached any more, being fetched, or
        // its frame locked by another holder -- the caller must not change
        // the leaf's entries under a cached copy then (a batch, which holds
        // several frames across its RPC, never waits for one while holding
        // others: no lock-order cycle with another holder).
        bool try_hold(GAddr a);
        // After the publish: install `img` as a's image, then let go of it.
        void install(GAddr a, const Node& img);
        // Nothing was published after all: let go of a's frame unchanged.
        void release(GAddr a);

    private:
        struct Held {
            GAddr a;
            uint32_t frame;
        };
        BTreeT& t_;
        std::vector<Held> held_;
        std::vector<uint32_t> frames_;  // held_[i].frame, for install_locked
    };
    friend class FrameHold;
    // Remove `a` from the cache (unswizzling its children first if needed).
    void cache_drop(GAddr a);
    // A memory node changed leaf `a` and returned its new image `img`: the
    // cached copy (if any) is replaced by it; waits for a concurrent admission
    // of `a` (its read may predate the change) to finish first, so no outdated
    // image can be installed after we return.
    void cache_refresh_changed(GAddr a, const Node& img, const Deadline& dl);

    // ---- write-back mode (writeback.cpp) ----
    // Is this node possibly read or written by another compute server (a
    // process that does not share our CacheRegion)? See btree.cpp, where it
    // is defined.
    bool node_is_shared(const Node& n) const;
    bool write_back() const { return wb_; }
    // Write-back mode, fast path: apply an insert (n == 1) or deletes of
    // keys[0..n) to the cached frame of leaf `a` under its lock, marking it
    // dirty. 1: done (*used keys consumed); -1: insert found the entry; 0: not
    // possible (no frame, not covering, full leaf): write through instead.
    // `full_at` (insert only): when it answers 0 because the leaf is full,
    // the frame and its version word then (a bottom-up pass's stamp).
    // `frame_hint`: the frame the descent found `a` in (checked, not trusted).
    int wb_modify(GAddr a, const Key* keys, size_t n, bool insert, size_t* used, uint64_t* deleted,
                  LeafFull* full_at = nullptr, uint32_t frame_hint = 0xFFFFFFFFu);
    void wb_note_full(const cache::FrameHeader& h, const Node& n, GAddr a, uint32_t f, LeafFull* full_at);
    // read_leaf() from frame `f` while its version word is `fv`.
    bool wb_read_leaf(GAddr a, uint32_t f, uint64_t fv, std::vector<Key>& out);
    // Write-back kill: keys[0..n) out of frame `f` of leaf `a` in place, only
    // if the frame's version word is still `fv` (the image a scan copied).
    // Returns how many were removed (logged like any delete).
    uint64_t wb_kill(GAddr a, uint32_t f, uint64_t fv, const Key* keys, size_t n, bool bottom_up,
                     uint64_t hold_lsn, bool present_only);
    // Under frame h's exclusive lock, before the first change of a clean
    // frame: register the tree dirty and note dirty_since. False: the tree
    // cannot be dirtied (registry full); the caller writes through or skips.
    // If registering throws, h is unlocked (unchanged) before the rethrow.
    bool wb_begin_change(cache::FrameHeader& h);
    // Frame h (its image n) holds leaf `a` of this tree, live, in our layout.
    bool frame_holds_leaf(const cache::FrameHeader& h, const Node& n, GAddr a) const;
    // Write-back mode, slow path: exclusive right to change leaf `a` while
    // writing through: its frame locked (written back first if dirty), or, if
    // not cached, its I/O marker held (nobody admits and dirties it meanwhile).
    struct WbGuard {
        BTreeT* t = nullptr;
        GAddr a = 0;
        uint32_t frame = 0xFFFFFFFFu;
        bool marker = false;
        // Set by an insert: a dirty frame it holds can only be written
        // through by a split (an insert that fits goes in place).
        bool splits = false;
        // Set by wb_acquire(keep_dirty): the held frame is dirty with entries
        // whose heap WAL is not covered yet (durable_lsn() below its lsn,
        // which it holds): only wb_split_dirty may split it.
        uint64_t uncovered = 0;
        // Unwinding (a failed publish may have reached remote memory): an
        // insert's dirty frame is settled by what remote memory holds
        // (wb_settle_lost_split); otherwise, or if remote memory cannot
        // tell, the frame may now be older than the remote node and is
        // dropped.
        ~WbGuard();
        // Install `published` (if given) into the frame, then let go.
        void release(const Node* published);
        // Install `img` into the frame, which stays dirty with its lsn raised
        // to `lsn`, then let go (wb_split_dirty: remote memory lacks some of it).
        void release_dirty(const Node& img, uint64_t lsn);
    };
    // keep_dirty: a dirty frame is not written back first; the caller locks
    // the remote leaf and publishes the frame's image (wb_lock_from_frame).
    void wb_acquire(GAddr a, WbGuard& g, const Deadline& dl, bool keep_dirty = false);

    // ---- writes and structure modifications (btree.cpp, split_merge.cpp) ----
    // Lock the node at `level` covering k starting at `a` (moving right).
    // nullptr: restart from the root.
    // Saving round trips (src/README.md "Structure modifications", round
    // trips of a split): `LockAssist` may carry a validated snapshot of `a`
    // the caller read remotely itself at `fresh_at` or later (the descent's
    // read of a missed leaf), tried first instead of reading `a` again, and
    // ops for the memory node of the node finally locked that go in the same
    // batch after the lock's CAS (`also_done`: they ran with the last CAS
    // sent, the one that took the lock if lock_covering() returns a node).
    struct LockAssist {
        const Node* fresh = nullptr;
        std::chrono::steady_clock::time_point fresh_at{};
        RemoteOp* also = nullptr;
        size_t n_also = 0;
        uint32_t also_node = 0;  // the memory node `also` addresses
        bool also_done = false;
    };
    LockedNode* lock_covering(GAddr a, int level, KeyRef k, Locks& locks, const Deadline& dl,
                              LockAssist* assist = nullptr);
    // A node allocated for a split before the lock was taken, with the
    // version its first life starts at (0 = not known yet: fresh_version()).
    struct SpareNode {
        GAddr addr = 0;
        uint64_t version = 0;
        uint64_t w[3] = {0, 0, 0};  // read in the lock's batch (fresh_version_from)
        RemoteOp read{RemoteOp::kRead};
    };
    // A spare node no split used (an insert that found room after all) goes
    // back to the handle, or is freed if the handle holds one.
    struct SpareGuard {
        BTreeT& t;
        SpareNode s;
        explicit SpareGuard(BTreeT& tree) : t(tree) {}
        ~SpareGuard() {
            if (s.addr) t.put_back_spare(s.addr);
        }
    };
    void prepare_leaf_lock(LockAssist& assist, SpareNode& spare, GAddr a, const Node& snap,
                           std::chrono::steady_clock::time_point read_at, KeyRef key, bool may_split);
    void split_leaf(Locks& locks, LockedNode* ln, size_t pos, KeyRef key, Path& path, const Deadline& dl,
                    WbGuard* guard = nullptr, SpareNode* spare = nullptr);
    // Step 3 of a split: the downlink (sep -> child) into the level above,
    // splitting that node in turn if it is full.
    // `pre` (optional): a raw image of path[level] read at `pre_at` or later
    // (in the split's publish batch); if it is a valid unlocked snapshot, the
    // parent's lock is tried from it instead of a read of its own.
    void insert_parent(int level, KeyRef sep, GAddr child, Path& path, const Deadline& dl, const Node* pre = nullptr,
                       std::chrono::steady_clock::time_point pre_at = {});
    // insert_parent() found no node at `level`: a new root over the old root
    // `old_root` and `child`. False: the root changed meanwhile (retry).
    bool grow_root(int level, GAddr old_root, KeyRef sep, GAddr child);
    // The full inner node `ln` at `level` takes entry (sep, child) at `pos`:
    // split it (or migrate its right half) and go on with the level above.
    void split_inner(Locks& locks, LockedNode* ln, int level, size_t pos, KeyRef sep, GAddr child,
                     Path& path, const Deadline& dl);
    // Split of a node at the placement level (locked: ln; entries all[0..total),
    // the right half from `mid`): if another memory node has clearly more free
    // space, copy the right half's whole subtree there instead of keeping it
    // here (src/README.md "Placement over several memory nodes"). Best effort:
    // false (nothing changed, ln still locked) if any node of it is busy.
    // One call = one SubtreeMigration (migration.cpp).
    bool migrate_split(Locks& locks, LockedNode* ln, const InnerEntry* all, size_t total, size_t mid, Path& path,
                       const Deadline& dl);
    class SubtreeMigration;
    // Returns the survivor if it is still empty (caller may merge again), else 0.
    GAddr try_merge(GAddr leaf, const Path& path, const Deadline& dl, bool* merged = nullptr);

    // insert() after its journal reservation: `journal` says whether the
    // entry is journaled (slots reserved); `may_offload` false keeps the
    // whole insert on the compute side (a batched attempt already asked the
    // memory node and got "needs a split").
    bool insert_reserved(KeyRef key, uint64_t lsn, bool journal, bool may_offload, LeafFull* full = nullptr);
    bool insert_unlogged(KeyRef key, uint64_t lsn, uint64_t durable, LeafFull* full, bool* through);
    void insert_each_logged(const Key* keys, const uint64_t* lsns, size_t n, uint64_t durable, size_t* done);
    // Write-back mode: tell TreeOptions::log_entries of entry changes made;
    // `through` as there (callers compare in_place_changes_ before and after).
    void log_entry_changes(bool insert, bool through, const Key* keys, size_t n);
    uint64_t remove_entries(const Key* keys, size_t n);  // remove() without the write-back log
    void log_entry_change(bool insert, bool through, KeyRef key);
    // Write-back mode: changes this handle made in a frame that stays dirty
    // (an in-place insert or delete, a kill, a dirty split's halves) -- raised
    // before the change can be seen, so an operation that finds it unmoved
    // wrote everything through.
    uint64_t in_place_changes_ = 0;

    // ---- batched inserts (insert_batch.cpp) ----
    // Whether insert_batch() may send OFFLOAD_BATCHes at all (a node cache, an
    // offload mode other than off, write-through); each memory node must
    // also say so (Transport::offload_batch_allowed(), a slotted tree's
    // offload_bytes_batch_allowed()).
    bool batch_allowed() const;
    // One run of at most net::kMaxOffloadBatch entries; returns how many
    // (a prefix) it inserted. One call = one InsertBatch.
    size_t insert_chunk(const Key* keys, const uint64_t* lsns, size_t n, uint64_t durable);
    class InsertBatch;
    // For rewarm_batched(), across the calls of one statement: leaves that
    // were cached when a batch planned them, with the siblings memory nodes
    // split off them (at most kRewarmMaxLeaves), and which of them a batch
    // dropped from the cache.
    static constexpr size_t kRewarmMaxLeaves = 16384;
    std::unordered_set<GAddr> rewarm_hot_;
    std::unordered_set<GAddr> rewarm_dropped_;
    void rewarm_note_hot(GAddr a) {
        if (rewarm_hot_.size() < kRewarmMaxLeaves) rewarm_hot_.insert(a);
    }
    bool rewarm_is_hot(GAddr a) const { return rewarm_hot_.count(a) != 0; }
    void rewarm_node(uint32_t node, const std::vector<GAddr>& leaves);

    // ---- offloading (offload_path.cpp) ----
    // A single-entry write whose leaf the descent found in the cache: done
    // one-sided it still costs a re-read, a lock CAS and a publish batch, so
    // the policy may send it to the memory node instead. True (and *st set)
    // if the memory node finished it.
    // `path` (an insert's descent): a full leaf may be split by the memory
    // node (offload_cached_split); without it a full leaf is split here.
    bool offload_cached_write(uint8_t kind, const Descent& d, const Node& snap, KeyRef key,
                              const Deadline& dl, uint8_t* st, Path* path = nullptr);
    // ---- memory-node splits (offload_split.cpp) ----
    // What an OFFLOAD_SPLIT answered: status, the leaf reached and its image;
    // for kOffloadSplit also the sibling, and the parent if it took the downlink.
    struct SplitReply {
        uint8_t status = 0;
        GAddr leaf = 0, sibling = 0, parent = 0;
        Node leaf_img, sib_img, parent_img;
        // The request allowed the memory node to split a full parent
        // (OffloadParentSplitExt): if it did, `psibling` is the parent's new
        // sibling (parent_img its lower half), and `gparent` the level-2 node
        // that took psibling's downlink (0: ours to insert).
        bool asked_parent = false;
        GAddr psibling = 0, gparent = 0;
        Node psib_img, gp_img;
        GAddr psent = 0;       // the parent spare the request named (0: none)
        uint64_t pspare = 0;   // the reply's OffloadParentSplitTail::spare
        // The parent spare's I/O marker, as `marker` for the leaf's sibling.
        mutable GAddr pmarker = 0;
        // `sibling`'s I/O marker (the named spare's, taken before the RPC):
        // finish_memnode_split admits sib_img under it, else ~SplitReply drops it.
        mutable cache::Cache* marker_cache = nullptr;
        mutable GAddr marker = 0;
        SplitReply() = default;
        SplitReply(const SplitReply&) = delete;
        SplitReply& operator=(const SplitReply&) = delete;
        ~SplitReply();
        void drop_marker() const;   // the leaf's spare's
        void drop_pmarker() const;  // the parent spare's
    };
    // An insert into the cached full leaf d.addr done by its memory node,
    // split included (OFFLOAD_SPLIT). True (and *st set) if it finished the
    // insert; false: nothing changed, go one-sided.
    bool offload_cached_split(const Descent& d, KeyRef key, Path& path, const Deadline& dl, uint8_t* st);
    // The RPC: `parent` the leaf's parent if known and on the same node (else 0).
    // With `image` (write-back mode, at the leaf `start`): OFFLOAD_SPLIT_IMAGE,
    // the leaf replaced by that image (its body_version the one the frame holds).
    // Without, the memory node may split a full parent too where
    // node_splits_parents says so, and link its new sibling into
    // `grandparent` (the descent's path[2]; 0: unknown).
    void offload_split_rpc(GAddr start, int level, KeyRef key, GAddr parent, SplitReply& out,
                           const Node* image = nullptr, GAddr grandparent = 0);
    // What both layouts' split RPCs share: the spare sibling (its marker
    // taken, OffloadSpareExt appended to `req`), the OffloadParentSplitExt if
    // given (after the spare's), the round trip, the spare tail and the
    // answer (take_split_reply).
    void split_rpc(uint32_t node, net::Op op, std::vector<uint8_t>& req, SplitReply& out,
                   const net::OffloadParentSplitExt* pext = nullptr);
    // The OffloadParentSplitExt for a split under `parent` on `node`, if
    // node_splits_parents(node); else null (`pe` unused).
    const net::OffloadParentSplitExt* parent_split_ext(uint32_t node, GAddr parent, GAddr grandparent,
                                                       net::OffloadParentSplitExt& pe);
    // Whether memory node `node` splits this tree's full leaves itself
    // (OFFLOAD_SPLIT; a slotted tree's: OFFLOAD_BYTES_SPLIT).
    bool node_splits_leaves(uint32_t node);
    // Whether it may also split their full level-1 parents
    // (kHelloSplitParent): only where split_inner would split such a parent
    // on the same memory node -- never where it may migrate the subtree.
    bool node_splits_parents(uint32_t node);
    // OFFLOAD_DIRTY_SPLIT (OFFLOAD_BYTES_DIRTY_SPLIT) for wb_split_dirty: the memory node
    // splits what remote memory holds of the leaf `a` -- which the frame's
    // image `fimg` describes: version, fences, right link -- at `sep` into
    // `a` and the block `na` (the caller holds na's I/O marker) and links na
    // into `parent` (0: none) if that is simple. True: split, `out` as an
    // OFFLOAD_SPLIT's answer; false: nothing changed. Throws when the answer
    // is lost (the memory node may have split or not).
    bool dirty_split_rpc(GAddr a, const Node& fimg, KeyRef sep, GAddr na, GAddr parent, SplitReply& out);
    // Its request, per layout.
    std::vector<uint8_t> dirty_split_request(GAddr a, const Node& fimg, KeyRef sep, GAddr na, GAddr parent) const;
    // Whether `node`'s memory node takes this layout's dirty split.
    bool node_splits_dirty_leaves(uint32_t node);
    // A split answer's images and addresses (`resp` without its spare tail)
    // into `out`, every one checked to be this tree's and on `node`.
    void take_split_reply(uint32_t node, const std::vector<uint8_t>& resp, SplitReply& out, const char* what) const;
    // Write-back mode (src/README.md "Write-back mode", splits): an insert
    // into the full leaf `a` whose frame `guard` holds (dirty or not), split
    // by its memory node from the frame's image in one round trip. True (and
    // *inserted set): done, the guard let go; false: nothing changed, the
    // guard still held, go one-sided.
    bool wb_split_at_memnode(GAddr a, WbGuard& guard, KeyRef key, Path& path, const Deadline& dl, bool* inserted);
    // A split of the dirty frame `guard` holds failed without an answer: the
    // frame made to match what the memory node did (or left to the guard to
    // drop if remote memory cannot tell).
    void wb_settle_lost_split(GAddr a, WbGuard& guard, const Deadline& dl);
    // Write-back mode, W13 (writeback_split.cpp): an insert into the full
    // dirty leaf `a` whose frame `guard` holds while remote memory may not
    // take the frame's entries yet (guard.uncovered). The remote image and
    // the frame are split at the same separator: remote memory gets the two
    // halves of what it held (and the downlink), the frame and a new frame
    // of the sibling the two halves of the frame, both dirty -- so that an
    // insert never waits for WAL or for a standby's replay to split a leaf.
    // 1: done (*inserted set, the guard let go); 0: not possible this way
    // (nothing changed, the guard still held); -1: the leaf changed under
    // us (nothing changed, the guard let go: retry).
    bool wb_split_dirty_at_memnode(GAddr a, WbGuard& guard, const Node& fimg, size_t pos, KeyRef key, Path& path,
                                   const Deadline& dl, SpareNode& spare, SiblingFrame& sib);
    int wb_split_dirty(GAddr a, WbGuard& guard, KeyRef key, Path& path, const Deadline& dl, SpareNode& spare,
                       bool* inserted);
    // wb_split_dirty's publish went unanswered (after the remote lock was
    // let go): 2 it ran (remote memory shows the leaf's new right link; the
    // versions of `left` and `right` set to what it published), 1 it did
    // not (the leaf unchanged), 0 remote memory cannot tell.
    int wb_lost_dirty_split(GAddr a, GAddr na, const WbGuard& guard, Node& left, Node& right, const Deadline& dl);
    // ... and what follows from it for the frame (fl), the sibling's frame
    // (`sib`, fr) and the guard.
    void wb_settle_lost_dirty_split(GAddr a, GAddr na, WbGuard& guard, Node& fl, Node& fr, SiblingFrame& sib,
                                    const Deadline& dl);
    // After a kOffloadSplit: the new images into the cache (the leaf's frame
    // held by `hold` since before the RPC, if it was cached), the changed
    // nodes logged, and the downlink inserted here if the memory node left it
    // to us.
    void finish_memnode_split(const SplitReply& r, FrameHold* hold, GAddr held, Path& path, const Deadline& dl);
    // The RPC of offload() without its cache invalidation (descend_cached()
    // holds an I/O marker while it runs and invalidates after letting go).
    uint8_t offload_rpc(uint8_t kind, GAddr start, int level, KeyRef key, Node* leaf_out, GAddr* leaf_addr);
    // The fixed layout's request (16-byte key); offload_rpc() of a fixed tree.
    uint8_t offload_rpc_fixed(uint8_t kind, GAddr start, int level, KeyRef key, Node* leaf_out, GAddr* leaf_addr);
    // Its OffloadRequest (an insert takes its journal slot here); also OFFLOAD_SPLIT's.
    net::OffloadRequest fixed_offload_request(uint8_t kind, GAddr start, int level, KeyRef key);
    // OFFLOAD_BYTES (entry bytes, byte-form journal record); offload_rpc() of a slotted tree.
    uint8_t offload_rpc_slotted(uint8_t kind, GAddr start, int level, KeyRef key, Node* leaf_out, GAddr* leaf_addr);
    // An offloaded write started at `start` (`level`) failed without an
    // answer: drop every cached copy it may have outdated (offload_path.cpp).
    void forget_unknown_write(GAddr start, int level);
    // remove_if_unchanged's removal from a write-through leaf by its memory
    // node (OFFLOAD_KILL; `version` 0: present_only): how many went, or -1 if
    // the memory node does not do it or found the leaf locked (the caller's
    // own way then). Throws when the answer is lost.
    int64_t offload_kill(GAddr leaf, uint64_t version, const Key* keys, size_t n, bool bottom_up);
    // A cache miss at node `g` (expected at `level`; -1: the root) during a
    // descent to the leaf: should the memory node finish operation `kind`
    // from there (at or below the placement level; DEX 6.1 cost model)?
    bool should_offload_at_miss(uint8_t kind, GAddr g, int level);
    // A write-back tree's offloaded read answered with `leaf`: is that image
    // complete, given the region's cleanings() before the request (W15)?
    bool wb_offloaded_leaf_current(GAddr leaf, uint64_t cleaned_before);
    // An offloaded write changed the missed leaf g, under our I/O marker of
    // it: admit the published image (offload_path.cpp). False: not admitted,
    // the marker is still the caller's.
    bool admit_written_leaf(GAddr g, const Node& img);
    // Offload a write to one leaf on memory node `node` (offload_path.cpp)?
    bool should_offload_leaf_write(uint32_t node, int missing_levels);
    // What offload_at_miss() did.
    enum class MissOffload {
        kNotDone,   // needs a split / merge, or the path left the node: go on one-sided
        kRestart,   // another process is fetching `g`: restart the descent
        kFinished,  // the memory node finished the operation (*d filled)
    };
    // Offload operation `kind` at the missed node `g` (should_offload_at_miss()
    // said yes): holds g's I/O marker (nobody fetches it meanwhile) and pins
    // `parent` (the cached frame the descent came from, or kNoFrame) while
    // the RPC runs. `frame_usable` false: the descent reads `g` remotely
    // even where it is cached (a leaf under the inner-only policy), so a
    // frame of g is no reason to restart -- the write goes on without the
    // marker and refreshes that frame, as at a full cache.
    MissOffload offload_at_miss(uint8_t kind, GAddr g, int level, uint32_t parent, KeyRef k, Node& out,
                                const Deadline& dl, Descent* d, bool frame_usable);
    // Memory-node splits at a miss (offload_split.cpp): an insert's descent
    // missed leaf `g` (its I/O marker held by us iff `marker`): may the
    // memory node split it? Then offload_at_miss() sends OFFLOAD_SPLIT.
    bool split_at_miss(uint8_t kind, GAddr g, int level, bool marker);
    // offload_at_miss()'s answer to an OFFLOAD_SPLIT (marker released).
    MissOffload finish_miss_split(const SplitReply& r, GAddr parent, Node& out, const Deadline& dl, Descent* d);

    // One check_once() call (check.cpp).
    class TreeCheck;

    // ---- crash consistency (btree.cpp) ----
    // The journal record WRITE (for a batch on the memory node of `a`), or none.
    std::vector<RemoteOp> journal_ops(GAddr a);
    // A node written outside Locks::publish (a new root, a migrated copy, a
    // leaf an offloaded write changed): tell TreeOptions::log_changes.
    void log_changed(GAddr a);

    RemoteMemory& mem_;
    uint32_t node_id_;
    uint64_t ns_;
    uint32_t tree_id_;
    std::vector<uint64_t> part_ns_;  // namespace per memory node (0: none)
    std::mutex spares_mu_;
    // Per memory node, kSparesPerNode slots (node * kSparesPerNode + i): spare
    // sibling blocks (0: none) -- a leaf's split takes one, and one more for
    // its parent's sibling where the memory node may split the parent.
    static constexpr size_t kSparesPerNode = 2;
    std::vector<GAddr> spares_;
    int place_level_ = kDefaultPlacementLevel;
    TreeOptions opts_;
    NodeIO io_;
    GAddr root_ = 0;
    // The frame this handle last found root_ in: a hint that spares every
    // descent the mapping table's lookup of the root -- a bucket spin lock
    // that every backend's every descent would otherwise write. Checked like
    // a lookup's answer (the frame still holds root_, not obsolete, by its
    // version), so a stale hint only costs that lookup (CachedDescent::walk).
    uint32_t root_frame_ = 0xFFFFFFFFu;  // (cache::kNoFrame)
    cache::Cache* cache_ = nullptr;
    bool wb_ = false;  // write-back mode (opts_.write_back with a cache)
    // Set when a node reached through the cache did not cover the search key
    // (stale cached copy, or freed/reused memory): the next descent re-reads
    // its whole path from remote memory, starting at the remote root, and
    // replaces the cached copies on it. Tree state, not per call: it is set by
    // lock_covering() for the descent that follows, which may belong to the
    // next operation (insert_parent() can finish by installing a new root
    // without descending again).
    bool refresh_next_ = false;
    JournalWriter* journal_ = nullptr;
    // The insert in progress and whether it must write a journal record before
    // any publish that makes its entry exist (src/README.md "Crash survival").
    // Per operation, but needed deep inside it (journal_ops() of a split's
    // publish, offload_rpc() of an offloaded insert), hence a member.
    struct Intent {
        bool journal = false;
        Key key{};
        uint64_t lsn = 0;
    } intent_;
    struct IntentScope {
        BTreeT& t;
        IntentScope(BTreeT& tree, KeyRef k, uint64_t lsn, bool journal) : t(tree) {
            t.intent_.journal = journal;
            t.intent_.key = k;
            t.intent_.lsn = lsn;
        }
        ~IntentScope() { t.intent_ = Intent{}; }
    };
};

// The two trees (tree/layout.h): 16-byte keys (integers, dates, floats...)
// and byte-string keys (text, uuid, numeric, several columns). Their code is
// one template; each source file instantiates both at its end.
using BTree = BTreeT<FixedLayout>;
using SlottedTree = BTreeT<SlottedLayout>;
// Fixed layout only (migration.cpp): moving a subtree at a split; a slotted
// tree splits in place. Batched inserts have one chunk per layout:
// OFFLOAD_BATCH (16-byte keys, insert_batch.cpp) and OFFLOAD_BYTES_BATCH.
template <>
bool BTreeT<FixedLayout>::migrate_split(Locks& locks, LockedNode* ln, const InnerEntry* all, size_t total, size_t mid,
                                        Path& path, const Deadline& dl);
template <>
uint8_t BTreeT<FixedLayout>::offload_rpc_fixed(uint8_t kind, GAddr start, int level, KeyRef key, Node* leaf_out,
                                               GAddr* leaf_addr);
template <>
net::OffloadRequest BTreeT<FixedLayout>::fixed_offload_request(uint8_t kind, GAddr start, int level, KeyRef key);
template <>
void BTreeT<FixedLayout>::offload_split_rpc(GAddr start, int level, KeyRef key, GAddr parent, SplitReply& out,
                                            const Node* image, GAddr grandparent);
template <>
void BTreeT<SlottedLayout>::offload_split_rpc(GAddr start, int level, KeyRef key, GAddr parent, SplitReply& out,
                                              const Node* image, GAddr grandparent);
template <>
std::vector<uint8_t> BTreeT<FixedLayout>::dirty_split_request(GAddr a, const Node& fimg, KeyRef sep, GAddr na,
                                                              GAddr parent) const;
template <>
std::vector<uint8_t> BTreeT<SlottedLayout>::dirty_split_request(GAddr a, const Node& fimg, KeyRef sep, GAddr na,
                                                                GAddr parent) const;
template <>
uint8_t BTreeT<SlottedLayout>::offload_rpc_slotted(uint8_t kind, GAddr start, int level, KeyRef key,
                                                   Node* leaf_out, GAddr* leaf_addr);

// Write-backs and cache drops for callers without a tree: tree/write_back_nodes.h.

// Order helpers shared with the scan / check code.
inline bool key_below_high(const EntryKey& k, const Node& n) {
    return n.high.cls == kPosInf || compare_keys(k, n.high) < 0;
}

}  // namespace dex::tree

#include "tree/btree_scan.h"  // (Scan, BulkLoader: defined apart, part of this interface)
