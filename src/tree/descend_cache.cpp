// Descent through the shared node cache (src/README.md "Node cache"):
// optimistic lock coupling over cached frames, swizzled child pointers,
// admission of nodes read on a miss, and on a miss low enough the choice to
// let the memory node finish the operation (offload_path.cpp).
//
// Per node on the way down we hold at most an optimistic read (frame f,
// version v) of the current node and remember the parent's (frame, version,
// slot) so a freshly found child can be swizzled into it. No frame lock is
// ever held across steps; swizzle_optimistic() takes the parent's lock and
// then (briefly) the child's, which is the permitted order.
//
// The hot path -- a lookup whose whole path is cached -- is walk(): the root
// through the mapping table (fetch), every level below through a swizzled
// pointer, validated in place; no allocation, no virtual call, no remote
// operation. Misses leave it through fetch() and read_remote().
#include <chrono>
#include <cstring>
#include <string>

#include "cache/cache.h"
#include "common/stats.h"
#include "tree/btree.h"
#include "tree/btree_internal.h"
#include "tree/offload_policy.h"

namespace dex::tree {

using cache::FrameHeader;
using cache::kNoFrame;
using cache::MappingTable;

// One descend_cached() call. Lives on the caller's stack; what a walk needs
// across its steps is here, what one step needs is local to it.
template <class L>
class BTreeT<L>::CachedDescent {
public:
    CachedDescent(BTreeT& t, KeyRef k, int level, Node& out, Path* path, const Deadline& dl, bool lt,
                  uint8_t offload_kind)
        : t_(t),
          R_(t.cache_->region()),
          nframes_(R_.frame_count()),
          k_(k),
          level_(level),
          out_(out),
          path_(path),
          dl_(dl),
          lt_(lt),
          offload_kind_(offload_kind),
          // cache_leaves = false (inner nodes only): leaves are neither
          // admitted nor read from frames admitted earlier under another
          // policy. Write-back mode: the cached leaf may be the only
          // up-to-date copy, so leaves are always read from frames, and
          // always admitted.
          leaves_(t.wb_ || t.cache_->policy().cache_leaves),
          refresh_(t.refresh_next_) {}

    // How one walk from the root ended.
    enum class Walk {
        kFound,      // *d filled (found at the level, or the memory node finished the operation)
        kRootBelow,  // the tree's root is below the requested level
        kRestart,    // a frame changed under us, a fetch in progress, a bad read: walk again
        kStale,      // a node did not cover the key: walk again, re-reading the path remotely
    };
    // One walk from the root.
    Walk walk(Descent& d);
    // After a walk that met a stale node: walk again re-reading the path remotely.
    void refresh_path() { refresh_ = t_.refresh_next_ = true; }

private:
    // The node the walk stands on: read from frame f at version v, or, if f
    // is kNoFrame, from tmp_ (a remote read).
    struct Current {
        GAddr g;  // its remote address
        uint32_t f;
        uint64_t v;
        const Node* np;
    };
    // The cached node we came from (f == kNoFrame: uncached, or a right move).
    struct Parent {
        uint32_t f = kNoFrame;
        uint64_t v = 0;
        int slot = -1;
    };
    enum class Fetch { kOk, kRestart, kFinished };

    // The root (cur.g, not yet read): from the frame this handle last found
    // it in, if that frame still holds it at a readable version and is hot
    // (a cooling one goes through fetch(), which touches it), and no refresh
    // wants it re-read. As safe as a mapping-table lookup, whose answer may
    // be just as old by the time its frame is read: begin_read() checks the
    // frame's address and version, and the walk validates that version.
    bool root_hint(Current& cur) {
        const uint32_t f = t_.root_frame_;
        if (f >= nframes_ || refresh_) return false;
        if (R_.header(f).get_state() != cache::FrameState::kHot) return false;
        const uint64_t v = R_.begin_read(f, cur.g);
        if (v == FrameHeader::kRestart) return false;
        cur.f = f;
        cur.v = v;
        cur.np = R_.node(f);
        return true;
    }
    // `g` was not reached through a usable swizzled pointer: its frame
    // through the mapping table, else offload or read it remotely.
    Fetch fetch(GAddr g, int expect, Parent& parent, Current& cur, Descent& d);
    // A miss: read `g` remotely into tmp_, admitting it if the policy says so.
    Fetch read_remote(GAddr g, int expect, const Parent& parent, Current& cur);

    BTreeT& t_;
    cache::CacheRegion& R_;
    const uint32_t nframes_;
    KeyRef k_;
    const int level_;
    Node& out_;
    Path* path_;
    const Deadline& dl_;
    const bool lt_;
    const uint8_t offload_kind_;
    const bool leaves_;
    // Re-read the path remotely, replacing cached copies (BTreeT::refresh_next_).
    bool refresh_;
    Node tmp_;  // the node read remotely
    // Does this walk replace g's cached copy by a remote read? Only when
    // refreshing (a node on the last walk did not cover the key), and in
    // write-back mode only a copy that is not dirty: a dirty leaf is the
    // newest image (W2), but a clean frame holds what remote memory holds
    // and may be the stale or unreadable one the walk met (C8; never
    // replacing it looped until dex.op_timeout). A frame turning dirty
    // meanwhile is written back before it is dropped (Cache::invalidate).
    bool replaces(GAddr g) const {
        if (!refresh_) return false;
        if (!t_.wb_) return true;
        const uint32_t f = R_.table().lookup(g);
        return f == kNoFrame || (f < nframes_ && !R_.header(f).dirty.load(std::memory_order_relaxed));
    }
    // Why the last walk restarted, and at which node: the timeout's message
    // says it (a descent that never finds its node is a bug to report).
    const char* why_ = "";
    GAddr why_at_ = 0;
    template <class R>
    R again(R r, const char* why, GAddr at) {
        why_ = why;
        why_at_ = at;
        return r;
    }

public:
    void check_deadline() const {
        if (dl_.expired()) dl_.check(last_restart().c_str());
    }
    std::string last_restart() const {
        return std::string("descending to level ") + std::to_string(level_) + " (last restart: " + why_ +
               (why_at_ ? " at " + hex_addr(why_at_) : std::string()) + (refresh_ ? ", re-reading the path" : "") + ")";
    }
};

// Walks from the root until one walk finds the node (restarting, with
// backoff, as often as the deadline allows).
template <class L>
typename BTreeT<L>::Descent BTreeT<L>::descend_cached(KeyRef k, int level, Node& out, Path* path, const Deadline& dl,
                                     bool lt, uint8_t offload_kind) {
    CachedDescent cd(*this, k, level, out, path, dl, lt, offload_kind);
    int attempt = 0;
    for (;;) {
        Descent d;
        switch (cd.walk(d)) {
            case CachedDescent::Walk::kFound:
                refresh_next_ = false;
                return d;
            case CachedDescent::Walk::kRootBelow:
                return d;
            case CachedDescent::Walk::kStale:
                cd.refresh_path();
                break;
            case CachedDescent::Walk::kRestart:
                break;
        }
        Stats::add(stats().restarts);
        root_ = 0;
        cd.check_deadline();
        backoff(attempt++);
    }
}

// (a straight walk is no longer than the tree is high; only a bound on
// when a long walk starts asking the deadline, not on the walk)
constexpr int kStraightWalkSteps = 12;

template <class L>
typename BTreeT<L>::CachedDescent::Walk BTreeT<L>::CachedDescent::walk(Descent& d) {
    if (refresh_) t_.refresh_root();
    GAddr a = t_.root_ ? t_.root_ : t_.refresh_root();
    int expect = -1;
    Parent parent;
    // The deadline is asked only once a walk goes on longer than a tree is
    // high (right links followed, deleted nodes passed): a descent that goes
    // straight down reads no clock (each read was ~5% of a bulk load's CPU).
    // Restarts ask it in descend_cached's loop.
    int steps = 0;
    while (a) {
        if (++steps > kStraightWalkSteps) check_deadline();
        Current cur{a, kNoFrame, 0, nullptr};
        if (gaddr_is_swizzled(a)) {
            // Hot path: a local pointer. Lock coupling: read the child's
            // version, then re-validate the parent, which proves the pointer
            // was still swizzled (so the frame still held the child).
            const uint32_t f = cache::swizzled_frame(a);
            if (f >= nframes_ || parent.f == kNoFrame) return again(Walk::kRestart, "a swizzled pointer without its parent's frame", a);
            const uint64_t v = R_.header(f).begin_read();
            cur.g = R_.header(f).gaddr.load(std::memory_order_acquire);
            if (v == FrameHeader::kRestart || !R_.validate(parent.f, parent.v) || !R_.validate(f, v))
                return again(Walk::kRestart, "a cached frame changed while read", cur.g);
            // Refreshing (replaces()), or a leaf under the inner-only
            // policy: re-read it below like an unswizzled pointer.
            if (!(replaces(cur.g) || (expect == 0 && !leaves_))) {
                Stats::add(stats().cache_hits);
                cur.f = f;
                cur.v = v;
                cur.np = R_.node(f);
            }
        }
        if (!cur.np && expect < 0 && root_hint(cur)) Stats::add(stats().cache_hits);
        if (!cur.np) {
            Fetch r = fetch(cur.g, expect, parent, cur, d);
            if (r == Fetch::kRestart) return Walk::kRestart;
            if (r == Fetch::kFinished) return Walk::kFound;
            if (expect < 0) t_.root_frame_ = cur.f;  // (kNoFrame: read remotely)
        }
        auto ok = [&] { return cur.f == kNoFrame || R_.validate(cur.f, cur.v); };
        // The fixed layout's header holds its fences; a slotted node is
        // copied whole and searched in the copy (L::kCopyBytes).
        Node hdr;
        std::memcpy(static_cast<void*>(&hdr), cur.np, L::kCopyBytes);
        if (!ok()) return again(Walk::kRestart, "a cached frame changed while read", cur.g);
        // Fences are checked for every node, cached or not: a cached copy may
        // be stale w.r.t. another compute server, or name freed memory.
        if (!t_.valid_node(hdr, expect)) return again(Walk::kStale, "not a valid node of the expected level", cur.g);
        if (hdr.is_deleted()) {  // merged away: `right` forwards to the survivor
            expect = hdr.level;
            a = hdr.right;
            parent.f = kNoFrame;
            continue;
        }
        if (left_of_low(hdr, k_, lt_)) return again(Walk::kStale, "a node whose low fence is above the key", cur.g);
        if (!below_high(k_, hdr, lt_)) {  // B-link move right (right links are never swizzled)
            expect = hdr.level;
            a = hdr.right;
            parent.f = kNoFrame;
            continue;
        }
        if (hdr.level < level_) return expect < 0 ? Walk::kRootBelow : Walk::kStale;
        if (hdr.level == level_) {
            if (cur.f == kNoFrame) {
                std::memcpy(static_cast<void*>(&out_), cur.np, kNodeSize);
            } else {
                R_.copy_unswizzled(cur.f, out_);
                if (!ok()) return again(Walk::kRestart, "a cached frame changed while copied", cur.g);
            }
            d.addr = cur.g;
            d.cached = cur.f != kNoFrame;
            if (d.cached) {
                d.frame = cur.f;
                d.frame_version = cur.v;
            }
            return Walk::kFound;
        }
        if (path_) (*path_)[hdr.level] = cur.g;
        int ci = L::child_index(L::kCopyBytes == kNodeSize ? hdr : *cur.np, hdr.count, k_, lt_);
        GAddr c = ci < 0 ? kNullGAddr
                         : (cur.f == kNoFrame ? L::child(*cur.np, ci) : cache::CacheRegion::load_child(cur.np, ci));
        if (!ok()) return again(Walk::kRestart, "a cached frame changed while read", cur.g);
        if (ci < 0 || c == kNullGAddr) return again(Walk::kStale, "an inner node without a child for the key", cur.g);
        parent = Parent{cur.f, cur.v, ci};
        a = c;
        expect = hdr.level - 1;
    }
    return again(Walk::kRestart, "a right link or child pointer that is null", 0);
}

template <class L>
typename BTreeT<L>::CachedDescent::Fetch BTreeT<L>::CachedDescent::fetch(GAddr g, int expect, Parent& parent, Current& cur,
                                                        Descent& d) {
    uint32_t lf;
    if (replaces(g)) {  // replace whatever copy we have by the remote node
        t_.cache_drop(g);
        Stats::add(stats().cache_misses);
        lf = kNoFrame;
    } else if (expect == 0 && !leaves_) {
        lf = kNoFrame;  // inner-only policy: leaves are always read remotely
    } else {
        lf = R_.lookup(g);  // counts the hit / miss
    }
    if (lf == MappingTable::kIoInProgress)  // another process fetches it
        return again(Fetch::kRestart, "another backend reads or changes it (I/O marker)", g);
    if (lf != kNoFrame) {
        if (R_.header(lf).get_state() == cache::FrameState::kCooling && !R_.touch(lf, g))
            return again(Fetch::kRestart, "its cooling frame could not be touched", g);
        const uint64_t v = R_.begin_read(lf, g);
        if (v == FrameHeader::kRestart) return again(Fetch::kRestart, "its frame is locked or being replaced", g);
        cur.f = lf;
        cur.v = v;
        cur.np = R_.node(lf);
        if (parent.f != kNoFrame && R_.swizzle_optimistic(parent.f, parent.v, static_cast<uint16_t>(parent.slot), lf))
            parent.f = kNoFrame;
        return Fetch::kOk;
    }
    if (offload_kind_ == kFindOffloadStart && level_ == 0 && !lt_ && !refresh_ && expect >= 0 &&
        expect <= t_.place_level_) {
        // A batched insert only wants to know where the memory node should
        // start: the missed node itself, not read (insert_batch.cpp).
        d.addr = g;
        d.level = expect;
        return Fetch::kFinished;
    }
    if (offload_kind_ && offload_kind_ != kFindOffloadStart && level_ == 0 && !lt_ && !refresh_ &&
        t_.should_offload_at_miss(offload_kind_, g, expect)) {
        const bool frame_usable = expect != 0 || leaves_;
        switch (t_.offload_at_miss(offload_kind_, g, expect, parent.f, k_, out_, dl_, &d, frame_usable)) {
            case MissOffload::kRestart:
                return again(Fetch::kRestart, "an offloaded operation asked for a restart", g);
            case MissOffload::kFinished:
                return Fetch::kFinished;
            case MissOffload::kNotDone:
                break;  // continue with one-sided reads
        }
    }
    return read_remote(g, expect, parent, cur);
}

template <class L>
typename BTreeT<L>::CachedDescent::Fetch BTreeT<L>::CachedDescent::read_remote(GAddr g, int expect, const Parent& parent,
                                                              Current& cur) {
    cache::Cache& cache = *t_.cache_;
    const uint8_t lvl = static_cast<uint8_t>(expect >= 0 ? expect : 1);  // the root: as an inner node
    bool owner = false;
    if ((t_.wb_ && expect == 0) || cache.should_admit(lvl)) {
        auto b = cache.try_begin_io(g);
        if (b == MappingTable::Begin::kIoInProgress || b == MappingTable::Begin::kCached)
            return again(Fetch::kRestart, "admitted or marked by another backend meanwhile", g);
        owner = b == MappingTable::Begin::kOwner;  // kFull: proceed uncached
    }
    // The marker is in place before this read: a writer publishing `g` after
    // our read waits for the marker and then updates the frame
    // (cache_update), so we cannot cache an outdated image. Zero copy: the
    // owner reads straight into the frame it will admit (kNoFrame: cache
    // exhausted, read into tmp_ as before).
    uint32_t zf = owner ? cache.allocate_frame() : kNoFrame;
    Node& dst = zf != kNoFrame ? *R_.node(zf) : tmp_;
    auto drop_zf = [&] {
        if (zf != kNoFrame) cache.release_frame(zf);
        zf = kNoFrame;
    };
    NodeIO::Read rd;
    auto t0 = std::chrono::steady_clock::now();
    try {
        rd = t_.io_.read(g, dst, dl_);
        if (t_.opts_.offload) t_.opts_.offload->record_remote_read(detail::micros_since(t0));
    } catch (...) {
        drop_zf();
        if (owner) cache.abort_io(g);
        throw;
    }
    if (zf != kNoFrame) std::memcpy(static_cast<void*>(&tmp_), &dst, kNodeSize);
    if (rd != NodeIO::Read::kOk) {
        drop_zf();
        if (owner) cache.abort_io(g);
        return again(Fetch::kRestart, "its remote image was locked or torn", g);
    }
    if (owner) {
        if (!t_.valid_node(tmp_, expect) || tmp_.is_deleted()) {
            drop_zf();
            cache.abort_io(g);
        } else {
            uint32_t nf = zf != kNoFrame ? cache.admit_filled(zf, g) : cache.admit(g, tmp_);
            if (nf != kNoFrame && parent.f != kNoFrame)
                R_.swizzle_optimistic(parent.f, parent.v, static_cast<uint16_t>(parent.slot), nf);
        }
    }
    cur.np = &tmp_;
    cur.f = kNoFrame;
    return Fetch::kOk;
}

// ---- single leaves (scans walking right) -----------------------------------------

template <class L>
bool BTreeT<L>::read_node(GAddr a, Node& out, const Deadline& dl, uint32_t* frame, uint64_t* frame_version) {
    if (frame) *frame = cache::kNoFrame;
    if (frame_version) *frame_version = 0;
    if (cache_ && (wb_ || cache_->policy().cache_leaves)) {  // (only used for leaves)
        cache::CacheRegion& R = cache_->region();
        uint32_t f = R.lookup(a);
        if (f != cache::kNoFrame && f != cache::MappingTable::kIoInProgress &&
            (R.header(f).get_state() != cache::FrameState::kCooling || R.touch(f, a))) {
            uint64_t v = R.begin_read(f, a);
            if (v != cache::FrameHeader::kRestart) {
                R.copy_unswizzled(f, out);
                if (R.validate(f, v)) {
                    if (frame) *frame = f;
                    if (frame_version) *frame_version = v;
                    return true;
                }
            }
        }
        // Write-back mode: a frame we could not use may be dirty; the caller
        // descends instead (which waits for it) rather than read remotely.
        if (wb_ && f != cache::kNoFrame) return false;
        // A miss: admitted like a leaf reached by descent (a scan that walks
        // right would otherwise never bring its leaves into the cache). The
        // I/O marker goes in before the read, as in descend().
        if (f == cache::kNoFrame && (wb_ || cache_->should_admit(0)) &&
            cache_->try_begin_io(a) == cache::MappingTable::Begin::kOwner) {
            uint32_t zf = cache_->allocate_frame();  // zero copy, as in descend()
            Node& dst = zf != cache::kNoFrame ? *R.node(zf) : out;
            NodeIO::Read rd;
            try {
                rd = io_.read(a, dst, dl);
            } catch (...) {
                if (zf != cache::kNoFrame) cache_->release_frame(zf);
                cache_->abort_io(a);
                throw;
            }
            if (zf != cache::kNoFrame) std::memcpy(static_cast<void*>(&out), &dst, kNodeSize);
            if (rd == NodeIO::Read::kOk && valid_node(out, 0) && !out.is_deleted()) {
                if (zf != cache::kNoFrame)
                    cache_->admit_filled(zf, a);
                else
                    cache_->admit(a, out);
            } else {
                if (zf != cache::kNoFrame) cache_->release_frame(zf);
                cache_->abort_io(a);
            }
            return rd == NodeIO::Read::kOk;
        }
    }
    return io_.read(a, out, dl) == NodeIO::Read::kOk;
}

template class BTreeT<FixedLayout>;
template class BTreeT<SlottedLayout>;

}  // namespace dex::tree
