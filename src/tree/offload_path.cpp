// Offloading (DEX 6, src/README.md "Offloading"): the memory node that holds
// a subtree finishes a lookup, forward scan or single-entry write there with
// its own CPU. Entered three ways: offload() (tests, tools), a descent that
// misses the cache at or below the placement level (offload_at_miss, called
// by descend_cache.cpp), and a single-entry write whose leaf the descent
// found cached (offload_cached_write).
#include <chrono>
#include <cstring>

#include "cache/cache.h"
#include "common/stats.h"
#include "tree/btree.h"
#include "tree/btree_internal.h"
#include "tree/offload_policy.h"
#include "transport/offload_bytes.h"

namespace dex::tree {

template <class L>
uint8_t BTreeT<L>::offload(uint8_t kind, GAddr start, int level, KeyRef key, Node* leaf_out, GAddr* leaf_addr) {
    GAddr leaf = 0;
    Node img;
    uint8_t st;
    try {
        st = offload_rpc(kind, start, level, key, &img, &leaf);
    } catch (...) {
        if (kind == net::kOffloadInsert || kind == net::kOffloadDelete) forget_unknown_write(start, level);
        throw;
    }
    if (leaf_addr) *leaf_addr = leaf;
    if (st == net::kOffloadDone && leaf_out) std::memcpy(static_cast<void*>(leaf_out), &img, kNodeSize);
    // DEX 6.2: no outdated cached copy of a node the memory node changed survives
    if (st == net::kOffloadDone && kind != net::kOffloadLeaf) cache_refresh_changed(leaf, img, deadline());
    return st;
}

template <class L>
uint8_t BTreeT<L>::offload_rpc(uint8_t kind, GAddr start, int level, KeyRef key, Node* leaf_out,
                           GAddr* leaf_addr) {
    if (gaddr_is_swizzled(start) || level < 0 || level > place_level_)
        throw Error(ErrorCode::kInvalid, "offload: start node must be a remote address at or below the placement level");
    uint8_t st;
    if constexpr (L::kSlotted) {
        st = offload_rpc_slotted(kind, start, level, key, leaf_out, leaf_addr);
    } else {
        st = offload_rpc_fixed(kind, start, level, key, leaf_out, leaf_addr);
    }
    // the memory node changed a leaf; neither the cache nor the caller knows yet
    if (st == net::kOffloadDone && kind != net::kOffloadLeaf) test_point("offload-write:answered");
    return st;
}

// A slotted tree's offload: OFFLOAD_BYTES with the entry bytes and, for an
// insert that journals, the byte-form record (transport/offload_bytes.h).
template <>
uint8_t BTreeT<SlottedLayout>::offload_rpc_slotted(uint8_t kind, GAddr start, int level, KeyRef key,
                                                   Node* leaf_out, GAddr* leaf_addr) {
    ByteOffload req;
    req.kind = kind;
    req.start = start;
    req.start_level = static_cast<uint8_t>(level);
    req.tree_id = tree_id_;
    req.key = key;
    if (kind == net::kOffloadInsert && intent_.journal) {
        // The memory node writes the journal record before it changes the leaf.
        req.journal = journal_->take(gaddr_node(start), reinterpret_cast<const uint8_t*>(key.data()), key.size(),
                                     intent_.lsn);
        req.record = journal_->record_bytes();
    }
    auto t0 = std::chrono::steady_clock::now();
    ByteOffloadReply rep = offload_bytes(mem_, req);
    if (opts_.offload)  // every offload round trip prices the next decisions (DEX 6.1)
        opts_.offload->record_offload(detail::micros_since(t0));
    Stats::add(stats().offloads);
    if (leaf_addr) *leaf_addr = rep.leaf;
    if (rep.status == net::kOffloadDone && leaf_out) std::memcpy(static_cast<void*>(leaf_out), &rep.image, kNodeSize);
    return rep.status;
}

template <>
net::OffloadRequest BTreeT<FixedLayout>::fixed_offload_request(uint8_t kind, GAddr start, int level, KeyRef key) {
    net::OffloadRequest req{};
    req.start = gaddr_offset(start);
    req.tree_id = tree_id_;
    req.node = static_cast<uint16_t>(gaddr_node(start));
    req.kind = kind;
    req.start_level = static_cast<uint8_t>(level);
    std::memcpy(req.key, &key, sizeof req.key);
    if (kind == net::kOffloadInsert && intent_.journal) {
        // The memory node writes the journal record before it changes the leaf.
        req.journal = journal_->take(gaddr_node(start), key, intent_.lsn);
        std::memcpy(req.record, &journal_->record(), sizeof req.record);
    }
    return req;
}

template <>
uint8_t BTreeT<FixedLayout>::offload_rpc_fixed(uint8_t kind, GAddr start, int level, KeyRef key, Node* leaf_out,
                                     GAddr* leaf_addr) {
    const net::OffloadRequest req = fixed_offload_request(kind, start, level, key);
    auto t0 = std::chrono::steady_clock::now();
    std::vector<uint8_t> r;
    if (kind == net::kOffloadInsert || kind == net::kOffloadDelete) {
        // A write the memory node may already have applied: a query cancel
        // waits for its answer (the op timeout still bounds it), so the leaf
        // image comes back and the cache follows the change. See
        // forget_unknown_write() for the failures that remain.
        InterruptHold hold;
        r = mem_.node(gaddr_node(start)).rpc(net::kOpOffload, &req, sizeof req);
    } else {
        r = mem_.node(gaddr_node(start)).rpc(net::kOpOffload, &req, sizeof req);
    }
    if (opts_.offload)  // every offload round trip prices the next decisions (DEX 6.1)
        opts_.offload->record_offload(detail::micros_since(t0));
    net::OffloadReply rep{};
    if (r.size() < sizeof rep) throw Error(ErrorCode::kProtocol, "OFFLOAD: short response from memory node");
    std::memcpy(&rep, r.data(), sizeof rep);
    Stats::add(stats().offloads);
    if (rep.status > net::kOffloadRestart) throw Error(ErrorCode::kProtocol, "OFFLOAD: unknown status from memory node");
    if ((rep.status == net::kOffloadDone || rep.status == net::kOffloadNoop) && kind != net::kOffloadLeaf &&
        (gaddr_node(rep.leaf) != gaddr_node(start) || gaddr_is_swizzled(rep.leaf)))
        throw Error(ErrorCode::kProtocol, "OFFLOAD: memory node named a leaf outside its own pool");
    if (leaf_addr) *leaf_addr = rep.leaf;
    if (rep.status == net::kOffloadDone) {
        if (r.size() < sizeof rep + kNodeSize) throw Error(ErrorCode::kProtocol, "OFFLOAD: leaf image missing");
        if (leaf_out) std::memcpy(static_cast<void*>(leaf_out), r.data() + sizeof rep, kNodeSize);
    }
    return rep.status;
}

template <class L>
bool BTreeT<L>::offload_cached_write(uint8_t kind, const Descent& d, const Node& snap, KeyRef key,
                                 const Deadline& dl, uint8_t* st, Path* path) {
    const GAddr leaf = d.addr;
    if (!cache_ || !opts_.offload || wb_ || !leaf || gaddr_is_swizzled(leaf) ||
        !mem_.node(gaddr_node(leaf)).offload_writes_allowed() ||
        (L::kSlotted && !mem_.node(gaddr_node(leaf)).offload_bytes_allowed()))
        return false;
    // A full leaf, cached or just fetched: the memory node may split it
    // itself (OFFLOAD_SPLIT; one-sided a split costs 5-9 round trips);
    // otherwise the split -- or a merge -- is done here: don't ask first.
    if (kind == net::kOffloadInsert && !L::leaf_fits(snap, key))
        return path && offload_cached_split(d, key, *path, dl, st);
    if (!d.cached || (kind == net::kOffloadDelete && snap.count <= 1)) return false;
    if (!should_offload_leaf_write(gaddr_node(leaf), 0)) return false;
    GAddr at = 0;
    Node img;
    uint8_t r;
    try {
        r = offload_rpc(kind, leaf, 0, key, &img, &at);
    } catch (...) {
        forget_unknown_write(leaf, 0);
        throw;
    }
    if (r == net::kOffloadDone) cache_refresh_changed(at, img, dl);
    if (r != net::kOffloadDone && r != net::kOffloadNoop) return false;  // split / merge / restart: one-sided
    *st = r;
    return true;
}

// An offloaded write failed without an answer (timeout, lost connection,
// protocol error): the memory node may have changed a leaf or not. A cached
// copy without the change must not outlive this: a scan would miss an entry
// (harmless, its transaction aborts with this error), but VACUUM reading that
// copy would leave the entry behind, pointing at a heap slot it lets be
// reused or truncated. Started at the leaf: drop it; higher up the leaf is
// unknown: drop every cached leaf of this tree (rare: only after a failure).
template <class L>
void BTreeT<L>::forget_unknown_write(GAddr start, int level) {
    if (!cache_) return;
    if (level == 0) {
        cache_drop(start);
        return;
    }
    const uint32_t tree = tree_id_;
    cache_->invalidate_if([tree](const cache::FrameInfo& i) { return i.tree_id == tree && i.level == 0; });
}

// DEX 6: a miss at a subtree root at or below the placement level; the memory
// node may finish the operation. For a read, a miss at the leaf itself saves
// nothing (and the leaf would not be admitted): offloaded only when forced
// on. A write done one-sided still re-reads, locks and publishes the leaf, so
// its leaf misses count too.
template <class L>
bool BTreeT<L>::should_offload_at_miss(uint8_t kind, GAddr g, int level) {
    const bool write = kind == net::kOffloadInsert || kind == net::kOffloadDelete;
    // A write that misses at its leaf: the memory node's answer carries the
    // changed leaf, which is admitted under our marker (offload_at_miss) --
    // one round trip that also caches the leaf, where a fetch followed by a
    // one-sided write takes three. Slotted trees offload at the leaf only
    // (OFFLOAD_BYTES starts there; a memory node walks no slotted inner node).
    const bool leaf_write = write && level == 0;
    // Write-back trees (W15, W17): reads; and an insert that misses at the
    // leaf itself -- a cached leaf takes it in place, cheaper than any round
    // trip, but an uncached one costs a fetch now and a write-back later.
    return opts_.offload && (!wb_ || !write || (kind == net::kOffloadInsert && level == 0)) &&
           (!L::kSlotted || (leaf_write && mem_.node(gaddr_node(g)).offload_bytes_allowed())) &&
           (level >= 1 || (level == 0 && (write || opts_.offload->mode() == OffloadMode::kOn))) &&
           level <= place_level_ && (!write || mem_.node(gaddr_node(g)).offload_writes_allowed()) &&
           // auto: while the cache still has room, a fetched node costs no
           // eviction and serves later hits (DEX's cache factor is the cost
           // of provisioning a frame): fetch -- except at a leaf write, whose
           // offload admits the leaf all the same.
           !(opts_.offload->mode() == OffloadMode::kAuto && cache_->has_room() && !leaf_write) &&
           (leaf_write ? should_offload_leaf_write(gaddr_node(g), 1)
                       : opts_.offload->should_offload(level + 1, write ? OffloadPolicy::kWriteRoundTrips : 0));
}

// A single-leaf write (cached leaf: missing_levels 0; a miss at the leaf: 1).
// DEX 6.1's decision weighs the memory node's CPU against one-sided
// operations that bypass it. Over a transport whose one-sided operations are
// requests to that same CPU (TCP), the one-sided write (re-read, lock,
// publish) costs it three requests where the offload costs one, and is never
// the cheaper choice: no decision (and no contrary exploration, which cost
// ~1% of such writes two extra round trips). dex.offload = off still says no.
template <class L>
bool BTreeT<L>::should_offload_leaf_write(uint32_t node, int missing_levels) {
    if (opts_.offload->mode() == OffloadMode::kOff) return false;
    if (mem_.node(node).one_sided_uses_node_cpu()) return true;
    return opts_.offload->should_offload(missing_levels, OffloadPolicy::kWriteRoundTrips);
}

// The leaf `g` an offloaded write started at and changed, its image `img`
// as the memory node published it, while we hold g's I/O marker: admitted,
// so that the next write there is a cached one (one round trip, not a fetch
// and a one-sided write). Safe for the same reason as read_remote()'s
// admission: the marker was in place before the memory node changed the leaf,
// so no other writer of this server changed it meanwhile unnoticed -- an
// offloaded one restarts at the marker, a one-sided one publishing after
// that turns the marker stale and install() refuses it. False: not admitted
// (policy, no frame); the marker is still ours then.
template <class L>
bool BTreeT<L>::admit_written_leaf(GAddr g, const Node& img) {
    if (img.tree_id != tree_id_ || img.level != 0 || !snapshot_valid(img) || img.is_deleted())
        throw Error(ErrorCode::kProtocol, "OFFLOAD: memory node returned an invalid leaf image for " + hex_addr(g));
    if (!wb_ && !cache_->should_admit(0)) return false;  // (write-back trees admit every leaf: W2)
    // admit() gives the marker up whatever happens; a refused admission
    // (no frame, a stale marker, a purged incarnation) leaves nothing cached.
    // (The caller logs the change for standbys.)
    cache_->admit(g, img);
    return true;
}

// W15. The memory node read `leaf` from remote memory, which lacks the
// changes of a dirty frame. Its image holds every entry a reader may need
// unless such a frame existed when the request left (`cleaned_before` was
// read then): an entry of a transaction this reader can see was in place
// before the scan began. A frame (or an I/O marker: a dirty split's sibling
// being installed) of the leaf now: use it instead. None: either there was
// none, or it was cleaned and unmapped since -- and a cleaning is counted
// before the frame leaves the mapping table (CacheRegion::mark_clean), so
// then the count moved. (The lookup's bucket lock orders the two reads.)
template <class L>
bool BTreeT<L>::wb_offloaded_leaf_current(GAddr leaf, uint64_t cleaned_before) {
    cache::CacheRegion& R = cache_->region();
    if (R.table().lookup(leaf) != cache::MappingTable::kNotFound) return false;
    return R.cleanings() == cleaned_before;
}

template <class L>
typename BTreeT<L>::MissOffload BTreeT<L>::offload_at_miss(uint8_t kind, GAddr g, int level, uint32_t parent, KeyRef k,
                                          Node& out, const Deadline& dl, Descent* d, bool frame_usable) {
    cache::CacheRegion& R = cache_->region();
    const bool write = kind == net::kOffloadInsert || kind == net::kOffloadDelete;
    auto b = cache_->try_begin_io(g);
    // A frame that appeared since the descent's lookup: use it (restart) --
    // unless this descent never uses one for g. Then restarting finds the
    // frame again, forever (an inner-only session's write to a leaf other
    // sessions cache looped until dex.op_timeout); it goes on unmarked, as
    // at a full cache, and the frame is refreshed from the memory node's
    // image (cache_refresh_changed) like after any write of another process.
    if (b == cache::MappingTable::Begin::kIoInProgress || (b == cache::MappingTable::Begin::kCached && frame_usable))
        return MissOffload::kRestart;
    const bool owner = b == cache::MappingTable::Begin::kOwner;  // marker: nobody fetches g meanwhile
    if (wb_ && write && !owner) return MissOffload::kNotDone;  // W17 needs the leaf's marker
    const bool pinned =
        parent != cache::kNoFrame && R.pin(parent, R.header(parent).gaddr.load(std::memory_order_acquire));
    auto release = [&] {
        if (pinned) R.unpin(parent);
        if (owner) cache_->abort_io(g);
    };
    // admit_written_leaf() under our marker; an invalid image (it throws
    // before admitting) must not leave the marker or the parent's pin behind.
    auto admit = [&](const Node& img) {
        try {
            return admit_written_leaf(g, img);
        } catch (...) {
            release();
            throw;
        }
    };
    if (!wb_ && split_at_miss(kind, g, level, owner)) {  // an insert the memory node may split for (offload_split.cpp)
        GAddr pg = pinned ? R.header(parent).gaddr.load(std::memory_order_acquire) : 0;
        if (pg && (gaddr_is_swizzled(pg) || gaddr_node(pg) != gaddr_node(g) || place_level_ < 1)) pg = 0;
        SplitReply r;
        try {
            offload_split_rpc(g, 0, k, pg, r);
        } catch (...) {
            release();
            forget_unknown_write(g, level);
            throw;
        }
        // The leaf as published (split or not) is admitted under our
        // marker as after any offloaded write; finish_miss_split logs it.
        const bool admitted = (r.status == net::kOffloadSplit || r.status == net::kOffloadDone) &&
                              r.leaf == g && admit(r.leaf_img);
        if (!admitted) {
            release();
        } else if (pinned) {
            R.unpin(parent);
        }
        return finish_miss_split(r, pg, out, dl, d);
    }
    uint8_t st;
    GAddr leaf = 0;
    const uint64_t cleaned_before = wb_ ? R.cleanings() : 0;  // before the memory node reads (W15)
    try {
        st = offload_rpc(kind, g, level, k, &out, &leaf);
    } catch (...) {
        release();
        if (write) forget_unknown_write(g, level);
        throw;
    }
    if (wb_ && write) {
        // W17. A write-back tree's insert that missed at leaf g, offloaded
        // under g's marker: while we hold it no frame of g can exist or
        // appear (W3), so the memory node changed the only copy, and its image
        // is admitted clean (the marker goes with the admission). Any other
        // answer -- "needs a split", a restart, or the entry put into a leaf
        // right of g (g split before our descent read its parent), whose
        // dirty frame a later write-back would overwrite -- goes on along the
        // usual path, whose insert is idempotent: it puts the entry into that
        // frame too, or finds it there remotely.
        if (st == net::kOffloadDone && leaf == g) {
            admit(out);  // (write-back trees admit every leaf: the marker goes with it)
            if (pinned) R.unpin(parent);
            log_changed(g);  // standbys: as every offloaded write
            d->addr = leaf;
            d->offloaded = st;
            return MissOffload::kFinished;
        }
        release();
        if (st != net::kOffloadNoop || leaf != g) return MissOffload::kNotDone;
        d->addr = leaf;  // already in g, which has no frame
        d->offloaded = st;
        return MissOffload::kFinished;
    }
    if (write && st == net::kOffloadDone && owner && leaf == g && admit(out)) {
        log_changed(g);  // standbys: as every offloaded write (cache_refresh_changed)
        if (pinned) R.unpin(parent);  // the marker went with the admission
        d->addr = leaf;
        d->offloaded = st;
        return MissOffload::kFinished;
    }
    release();
    if (st == net::kOffloadDone && !write) {  // `out` is the leaf
        if (wb_ && !wb_offloaded_leaf_current(leaf, cleaned_before)) {
            Stats::add(stats().wb_offload_fallbacks);
            return MissOffload::kNotDone;  // read it (or its frame) the usual way
        }
        d->addr = leaf;
        d->offloaded = st;
        return MissOffload::kFinished;
    }
    if (write && (st == net::kOffloadDone || st == net::kOffloadNoop)) {
        // DEX 6.2: the leaf changed under any cached copy; invalidated only
        // now that our own marker is gone.
        if (st == net::kOffloadDone) cache_refresh_changed(leaf, out, dl);
        d->addr = leaf;
        d->offloaded = st;
        return MissOffload::kFinished;
    }
    // needs a split / merge, or the path left the node: go on one-sided
    return MissOffload::kNotDone;
}

template class BTreeT<FixedLayout>;
template class BTreeT<SlottedLayout>;

}  // namespace dex::tree
