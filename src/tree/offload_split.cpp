// Memory-node splits (src/README.md "Offloading", memory-node splits): an
// insert into a cached full leaf sent as one OFFLOAD_SPLIT; the memory node
// splits the leaf (and links the sibling into the parent when that is simple)
// in the order of split_leaf() + insert_parent() (split_merge.cpp), and this
// side installs the new images and finishes what the memory node left.
#include <chrono>
#include <cstring>

#include "cache/cache.h"
#include "common/stats.h"
#include "tree/btree.h"
#include "tree/btree_internal.h"
#include "tree/offload_policy.h"

namespace dex::tree {

namespace {

void append_bytes(std::vector<uint8_t>& v, const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    v.insert(v.end(), b, b + n);
}

}  // namespace

template <class L>
BTreeT<L>::SplitReply::~SplitReply() {
    drop_marker();
    drop_pmarker();
}

template <class L>
void BTreeT<L>::SplitReply::drop_marker() const {
    if (marker_cache && marker) marker_cache->abort_io(marker);
    marker = 0;
}

template <class L>
void BTreeT<L>::SplitReply::drop_pmarker() const {
    if (marker_cache && pmarker) marker_cache->abort_io(pmarker);
    pmarker = 0;
}

template <>
void BTreeT<FixedLayout>::offload_split_rpc(GAddr start, int level, KeyRef key, GAddr parent, SplitReply& out,
                                            const Node* image, GAddr grandparent) {
    const uint32_t node = gaddr_node(start);
    const net::OffloadRequest r = fixed_offload_request(net::kOffloadInsert, start, level, key);
    const net::OffloadSplitExt ext{part_ns_[node], parent ? gaddr_offset(parent) : 0};
    std::vector<uint8_t> req;
    req.reserve(net::kOffloadSplitImageRequest + sizeof(net::OffloadSpareExt));
    append_bytes(req, &r, sizeof r);
    append_bytes(req, &ext, sizeof ext);
    if (image) {
        const net::OffloadImageExt ie{image->body_version};
        append_bytes(req, &ie, sizeof ie);
        append_bytes(req, image, kNodeSize);
    }
    net::OffloadParentSplitExt pe{};
    split_rpc(node, image ? net::kOpOffloadSplitImage : net::kOpOffloadSplit, req, out,
              image ? nullptr : parent_split_ext(node, parent, grandparent, pe));
}

// A slotted tree's: the OFFLOAD_BYTES insert (its journal record first, as
// offload_rpc_slotted's), the split extension, the image's (write-back:
// OFFLOAD_BYTES_SPLIT_IMAGE) and, always, the spare.
template <>
void BTreeT<SlottedLayout>::offload_split_rpc(GAddr start, int level, KeyRef key, GAddr parent, SplitReply& out,
                                              const Node* image, GAddr grandparent) {
    const uint32_t node = gaddr_node(start);
    net::OffloadBytesHeader h{};
    h.start = gaddr_offset(start);
    h.tree_id = tree_id_;
    h.node = static_cast<uint16_t>(node);
    h.kind = net::kOffloadInsert;
    h.start_level = static_cast<uint8_t>(level);
    std::string_view rec;
    if (intent_.journal) {
        h.journal = journal_->take(node, reinterpret_cast<const uint8_t*>(key.data()), key.size(), intent_.lsn);
        rec = journal_->record_bytes();
    }
    std::vector<uint8_t> req;
    try {
        req = net::encode_offload_bytes(h, key.data(), key.size(), rec.data(), rec.size());
    } catch (const std::invalid_argument& e) {
        throw Error(ErrorCode::kInvalid, e.what());
    }
    const net::OffloadSplitExt ext{part_ns_[node], parent ? gaddr_offset(parent) : 0};
    append_bytes(req, &ext, sizeof ext);
    if (image) {
        const net::OffloadImageExt ie{image->body_version};
        append_bytes(req, &ie, sizeof ie);
        append_bytes(req, image, kNodeSize);
    }
    net::OffloadParentSplitExt pe{};
    split_rpc(node, image ? net::kOpOffloadBytesSplitImage : net::kOpOffloadBytesSplit, req, out,
              image ? nullptr : parent_split_ext(node, parent, grandparent, pe));
}

template <class L>
bool BTreeT<L>::node_splits_leaves(uint32_t node) {
    if (node >= part_ns_.size() || !part_ns_[node]) return false;  // no namespace there for siblings
    Transport& t = mem_.node(node);
    if constexpr (L::kSlotted)  // (its request always carries a spare)
        return t.offload_bytes_split_allowed() && t.split_spare_allowed();
    else
        return t.offload_split_allowed();
}

template <class L>
bool BTreeT<L>::node_splits_parents(uint32_t node) {
    if (!mem_.node(node).split_parent_allowed()) return false;
    if constexpr (L::kSlotted) {
        return true;  // a slotted tree's subtrees stay where they are split
    } else {
        // split_inner migrates only at the placement level, and only with a
        // second memory node to migrate to (migrate_split).
        return place_level_ != 1 || partitions() < 2;
    }
}

template <class L>
const net::OffloadParentSplitExt* BTreeT<L>::parent_split_ext(uint32_t node, GAddr parent, GAddr grandparent,
                                                              net::OffloadParentSplitExt& pe) {
    if (!parent || !node_splits_parents(node)) return nullptr;
    const bool gp_here = grandparent && !gaddr_is_swizzled(grandparent) && gaddr_node(grandparent) == node;
    pe.grandparent = gp_here ? gaddr_offset(grandparent) : 0;
    return &pe;
}

template <class L>
void BTreeT<L>::split_rpc(uint32_t node, net::Op op, std::vector<uint8_t>& req, SplitReply& out,
                          const net::OffloadParentSplitExt* pext) {
    const char* what = net::op_name(op);
    // The spare sibling (kHelloSplitSpare): if it becomes the sibling, the
    // memory node publishes it and may link it into the parent before we
    // have its image, and another writer of this server could reach it
    // through a remote read of that parent and change it. Its I/O marker,
    // taken now, keeps everyone of this server away from it until the reply's
    // image is admitted (split_leaf admits its own sibling the same way).
    const bool with_spare = mem_.node(node).split_spare_allowed();
    if (with_spare) {
        const GAddr spare = take_spare(node);
        if (spare && cache_ && (wb_ || cache_->should_admit(0)) &&
            cache_->try_begin_io(spare) == cache::MappingTable::Begin::kOwner) {
            out.marker_cache = cache_;
            out.marker = spare;
        }
        const net::OffloadSpareExt se{spare ? gaddr_offset(spare) : 0};
        append_bytes(req, &se, sizeof se);
        if (pext) {  // (split_parent_allowed implies the spare's bit: it follows that extension)
            // A second spare for the parent's sibling, its marker taken for
            // the same reason (inner nodes are always admitted).
            net::OffloadParentSplitExt pe = *pext;
            const GAddr ps = take_spare(node);
            if (ps && cache_ && cache_->try_begin_io(ps) == cache::MappingTable::Begin::kOwner) {
                out.marker_cache = cache_;
                out.pmarker = ps;
            }
            pe.sibling = ps ? gaddr_offset(ps) : 0;
            out.psent = ps;
            append_bytes(req, &pe, sizeof pe);
            out.asked_parent = true;
        }
    }
    // (No answer: the spare may be the sibling now or not; it is dropped.)
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<uint8_t> resp;
    {
        InterruptHold hold;  // as any offloaded write: its answer is waited for (offload_rpc_fixed)
        resp = mem_.node(node).rpc(op, req.data(), static_cast<uint32_t>(req.size()));
    }
    Stats::add(stats().offloads);
    net::OffloadReply rep{};
    if (resp.size() < sizeof rep + (with_spare ? sizeof(net::OffloadSpareTail) : 0))
        throw Error(ErrorCode::kProtocol, std::string(what) + ": short response from memory node");
    if (with_spare) {  // the block to send with the next split
        net::OffloadSpareTail st{};
        std::memcpy(&st, resp.data() + resp.size() - sizeof st, sizeof st);
        resp.resize(resp.size() - sizeof st);
        if (st.spare >= net::kPoolReservedBytes && st.spare % kNodeSize == 0) put_back_spare(make_gaddr(node, st.spare));
    }
    std::memcpy(&rep, resp.data(), sizeof rep);
    // An insert without a split prices the next offload decisions as any
    // offloaded write (DEX 6.1); a split is not one (it replaces 5-9 round
    // trips, and its latency would make plain offloads look dearer).
    if (opts_.offload && rep.status != net::kOffloadSplit) opts_.offload->record_offload(detail::micros_since(t0));
    take_split_reply(node, resp, out, what);
    if (out.asked_parent) {  // the parent spare: the reply's, or (no tail) the one we sent
        const bool tail = out.status == net::kOffloadSplit;
        if (tail && out.pspare >= net::kPoolReservedBytes && out.pspare % kNodeSize == 0)
            put_back_spare(make_gaddr(node, out.pspare));
        else if (!tail && out.psent)
            put_back_spare(out.psent);
    }
    if (out.status != net::kOffloadSplit || out.psibling != out.pmarker) out.drop_pmarker();
    if (out.status != net::kOffloadSplit || out.sibling != out.marker) out.drop_marker();
}

template <class L>
void BTreeT<L>::take_split_reply(uint32_t node, const std::vector<uint8_t>& resp, SplitReply& out,
                                 const char* what) const {
    net::OffloadReply rep{};
    if (resp.size() < sizeof rep) throw Error(ErrorCode::kProtocol, std::string(what) + ": short response from memory node");
    std::memcpy(&rep, resp.data(), sizeof rep);
    if (rep.status > net::kOffloadSplit)
        throw Error(ErrorCode::kProtocol, std::string(what) + ": unknown status from memory node");
    out.status = rep.status;
    out.leaf = rep.leaf;
    if (rep.status != net::kOffloadDone && rep.status != net::kOffloadSplit) return;
    // Every address it names must be in its own pool, every image a sealed
    // node of this tree at its level: anything else is a protocol error, not
    // something to cache.
    auto own = [&](GAddr a) { return gaddr_node(a) == node && !gaddr_is_swizzled(a) && a != 0; };
    auto image_ok = [&](const Node& n, uint32_t tree_id, int level) {
        return n.tree_id == tree_id && n.level == level && snapshot_valid(n) && L::layout_ok(n);
    };
    const uint8_t* p = resp.data() + sizeof rep;
    size_t left = resp.size() - sizeof rep;
    auto take = [&](void* dst, size_t n) {
        if (left < n) throw Error(ErrorCode::kProtocol, std::string(what) + ": truncated response from memory node");
        std::memcpy(dst, p, n);
        p += n;
        left -= n;
    };
    take(&out.leaf_img, kNodeSize);
    bool ok = own(rep.leaf) && image_ok(out.leaf_img, tree_id_, 0);
    if (rep.status == net::kOffloadSplit) {
        net::OffloadSplitTail tail{};
        take(&tail, sizeof tail);
        take(&out.sib_img, kNodeSize);
        out.sibling = tail.sibling;
        out.parent = tail.parent;
        if (out.parent) take(&out.parent_img, kNodeSize);
        ok = ok && own(out.sibling) && image_ok(out.sib_img, tree_id_, 0) && out.leaf_img.right == out.sibling &&
             (!out.parent || (own(out.parent) && image_ok(out.parent_img, tree_id_, 1)));
        if (out.asked_parent) {
            net::OffloadParentSplitTail pt{};
            take(&pt, sizeof pt);
            out.psibling = pt.psibling;
            out.gparent = pt.grandparent;
            out.pspare = pt.spare;
            if (out.psibling) take(&out.psib_img, kNodeSize);
            if (out.gparent) take(&out.gp_img, kNodeSize);
            // A parent split comes with the parent (its lower half, pointing
            // at the new sibling); a grandparent only with a parent split.
            ok = ok && (!out.psibling || (out.parent && own(out.psibling) && image_ok(out.psib_img, tree_id_, 1) &&
                                          out.parent_img.right == out.psibling)) &&
                 (!out.gparent || (out.psibling && own(out.gparent) && image_ok(out.gp_img, tree_id_, 2)));
        }
    }
    if (!ok) throw Error(ErrorCode::kProtocol, std::string(what) + ": memory node returned an invalid node image");
}

// The request of OFFLOAD_DIRTY_SPLIT (fixed) or OFFLOAD_BYTES_DIRTY_SPLIT
// (slotted): the leaf `a` as the frame's image describes it, the separator,
// the sibling block `na`, the parent.
template <>
std::vector<uint8_t> BTreeT<FixedLayout>::dirty_split_request(GAddr a, const Node& fimg, KeyRef sep, GAddr na,
                                                              GAddr parent) const {
    const uint32_t node = gaddr_node(a);
    std::vector<uint8_t> req(net::kOffloadDirtySplitRequest);
    // (Not fixed_offload_request: no journal record -- the new key stays in
    // the frame's halves, dirty; the request's key is the separator.)
    net::OffloadRequest r{};
    r.start = gaddr_offset(a);
    r.tree_id = tree_id_;
    r.node = static_cast<uint16_t>(node);
    r.kind = net::kOffloadInsert;
    r.start_level = 0;
    std::memcpy(r.key, &sep, sizeof r.key);
    const net::OffloadSplitExt ext{part_ns_[node], parent ? gaddr_offset(parent) : 0};
    net::OffloadDirtySplitExt dx{};
    dx.version = fimg.body_version;
    dx.right = fimg.right;
    dx.sibling = gaddr_offset(na);
    std::memcpy(dx.low, &fimg.low, sizeof dx.low);
    std::memcpy(dx.high, &fimg.high, sizeof dx.high);
    std::memcpy(req.data(), &r, sizeof r);
    std::memcpy(req.data() + sizeof r, &ext, sizeof ext);
    std::memcpy(req.data() + sizeof r + sizeof ext, &dx, sizeof dx);
    return req;
}

template <>
std::vector<uint8_t> BTreeT<SlottedLayout>::dirty_split_request(GAddr a, const Node& fimg, KeyRef sep, GAddr na,
                                                                GAddr parent) const {
    using L = SlottedLayout;
    const uint32_t node = gaddr_node(a);
    net::OffloadBytesDirtySplitHeader h{};
    h.start = gaddr_offset(a);
    h.tree_id = tree_id_;
    h.node = static_cast<uint16_t>(node);
    h.ns = part_ns_[node];
    h.parent = parent ? gaddr_offset(parent) : 0;
    h.version = fimg.body_version;
    h.right = fimg.right;
    h.sibling = gaddr_offset(na);
    const KeyRef low = L::low(fimg);
    const KeyRef high = L::high_is_pos_inf(fimg) ? KeyRef() : L::high(fimg);
    h.high_inf = L::high_is_pos_inf(fimg) ? 1 : 0;
    // (a separator and fences are at most an entry long: kMaxOffloadKeyBytes)
    h.sep_len = static_cast<uint16_t>(sep.size());
    h.low_len = static_cast<uint16_t>(low.size());
    h.high_len = static_cast<uint16_t>(high.size());
    std::vector<uint8_t> req(sizeof h);
    std::memcpy(req.data(), &h, sizeof h);
    for (KeyRef b : {sep, low, high}) req.insert(req.end(), b.begin(), b.end());
    return req;
}

template <class L>
bool BTreeT<L>::dirty_split_rpc(GAddr a, const Node& fimg, KeyRef sep, GAddr na, GAddr parent, SplitReply& out) {
    const uint32_t node = gaddr_node(a);
    constexpr net::Op op = L::kSlotted ? net::kOpOffloadBytesDirtySplit : net::kOpOffloadDirtySplit;
    constexpr const char* what = L::kSlotted ? "OFFLOAD_BYTES_DIRTY_SPLIT" : "OFFLOAD_DIRTY_SPLIT";
    const std::vector<uint8_t> req = dirty_split_request(a, fimg, sep, na, parent);
    std::vector<uint8_t> resp;
    {
        InterruptHold hold;  // as any offloaded write: its answer is waited for
        resp = mem_.node(node).rpc(op, req.data(), static_cast<uint32_t>(req.size()));
    }
    Stats::add(stats().offloads);
    net::OffloadSpareTail st{};
    if (resp.size() < sizeof(net::OffloadReply) + sizeof st)
        throw Error(ErrorCode::kProtocol, std::string(what) + ": short response from memory node");
    std::memcpy(&st, resp.data() + resp.size() - sizeof st, sizeof st);
    resp.resize(resp.size() - sizeof st);
    take_split_reply(node, resp, out, what);
    const bool split = out.status == net::kOffloadSplit;
    // The block for the next split (the one we sent stays ours if no split took it).
    if (st.spare >= net::kPoolReservedBytes && st.spare % kNodeSize == 0 &&
        (split || st.spare != gaddr_offset(na)))
        put_back_spare(make_gaddr(node, st.spare));
    if (!split) return false;
    if (out.leaf != a || out.sibling != na || L::compare(L::low(out.sib_img), sep) != 0)
        throw Error(ErrorCode::kProtocol, std::string(what) + ": memory node split another leaf or into another block");
    return true;
}

// Whether the memory node of leaves on `node` splits dirty leaves of this layout.
template <class L>
bool BTreeT<L>::node_splits_dirty_leaves(uint32_t node) {
    if ((opts_.offload && opts_.offload->mode() == OffloadMode::kOff) || node >= part_ns_.size() || !part_ns_[node])
        return false;
    Transport& t = mem_.node(node);
    return L::kSlotted ? t.offload_bytes_dirty_split_allowed() : t.offload_dirty_split_allowed();
}

template <class L>
bool BTreeT<L>::offload_cached_split(const Descent& d, KeyRef key, Path& path, const Deadline& dl, uint8_t* st) {
    // (d: the descent found the leaf full, cached or just fetched.)
    const GAddr leaf = d.addr;
    const uint32_t node = gaddr_node(leaf);
    // No cost decision: one-sided the split costs 5-9 round trips (ALLOC,
    // fresh version, leaf re-read + lock, publish batch, parent read +
    // lock + publish), offloaded one. Only dex.offload = off says no.
    if (opts_.offload->mode() == OffloadMode::kOff || !node_splits_leaves(node)) return false;
    // The parent the descent came from, if the memory node can link the
    // sibling there: on the same node and at or below the placement
    // level (where a subtree stays on its memory node).
    GAddr parent = path[1];
    if (!parent || gaddr_is_swizzled(parent) || gaddr_node(parent) != node || place_level_ < 1) parent = 0;
    SplitReply r;
    // C7: the upper half leaves the leaf, so no reader of this server may
    // use an image of it from before the memory node's publish once the
    // insert returns: a cached copy's frame is held from before the RPC
    // until it shows the lower half (readers restart meanwhile) -- as
    // split_leaf() holds it; an uncached leaf's I/O marker keeps it from
    // being admitted meanwhile (offload_at_miss's rule). Nothing else is
    // held during the RPC but the spare sibling's marker (offload_split_rpc).
    const auto b = cache_->try_begin_io(leaf);
    if (b == cache::MappingTable::Begin::kIoInProgress) return false;  // being fetched: one-sided
    const bool marker = b == cache::MappingTable::Begin::kOwner;
    FrameHold hold(*this);  // unwinding: the held frame is made unreadable and dropped
    if (!marker) hold.hold(leaf);
    try {
        offload_split_rpc(leaf, 0, key, parent, r, nullptr, parent ? path[2] : 0);
    } catch (...) {
        if (marker) {
            cache_->abort_io(leaf);
            forget_unknown_write(leaf, 0);
        }
        throw;
    }
    if (marker) cache_->abort_io(leaf);  // before any cache_update of it
    FrameHold* held = marker ? nullptr : &hold;
    switch (r.status) {
        case net::kOffloadSplit:
            finish_memnode_split(r, held, leaf, path, dl);
            *st = net::kOffloadDone;
            return true;
        case net::kOffloadDone:  // it had room after all (the cached copy was older)
            log_changed(r.leaf);
            if (held && r.leaf == leaf) {
                hold.install(leaf, r.leaf_img);
            } else {
                if (held) hold.release(leaf);
                cache_update(r.leaf, r.leaf_img);
            }
            *st = r.status;
            return true;
        case net::kOffloadNoop:
            if (held) hold.release(leaf);
            *st = r.status;
            return true;
        default:  // out of space on the node, or restart: nothing changed, one-sided
            if (held) hold.release(leaf);
            return false;
    }
}

// Write-back mode: the frame (held by `guard`, W2: the newest image of the
// leaf, dirty changes included) is sent with the key; the memory node locks
// the leaf at the version it holds (the frame's, or newer after a single
// write-back), replaces it by the image, inserts and splits as OFFLOAD_SPLIT
// does. Its dirty entries' heap WAL is durable (wb_acquire checked the
// frame's LSN, W6) and the new key's journal record is written first, as for
// a split here. The sibling is admitted only if it is the handle's spare,
// whose I/O marker offload_split_rpc took before the RPC: otherwise the
// memory node may already have linked it into the parent, so another writer
// of this server could reach and change it before we could admit our image
// of it, and the next descent there reads and admits it.
template <class L>
bool BTreeT<L>::wb_split_at_memnode(GAddr a, WbGuard& guard, KeyRef key, Path& path, const Deadline& dl,
                                    bool* inserted) {
    const uint32_t node = gaddr_node(a);
    if (guard.frame == cache::kNoFrame || (opts_.offload && opts_.offload->mode() == OffloadMode::kOff) ||
        node >= part_ns_.size() || !part_ns_[node])
        return false;
    Transport& tr = mem_.node(node);
    if (L::kSlotted ? !(tr.offload_bytes_split_image_allowed() && tr.split_spare_allowed())
                    : !tr.offload_split_image_allowed())
        return false;
    Node img;
    cache_->region().copy_unswizzled(guard.frame, img);
    if (!frame_holds_leaf(cache_->region().header(guard.frame), img, a) || !covers(img, key, false) ||
        L::leaf_fits(img, key) || has_entry(img, L::lower_bound(img, key), key))
        return false;  // not a split of this leaf: the one-sided path sorts it out
    GAddr parent = path[1];
    if (!parent || gaddr_is_swizzled(parent) || gaddr_node(parent) != node || place_level_ < 1) parent = 0;
    SplitReply r;
    offload_split_rpc(a, 0, key, parent, r, &img);  // no answer: the guard settles (wb_settle_lost_split)
    if (r.status != net::kOffloadSplit && r.status != net::kOffloadDone) return false;  // nothing changed
    if (r.leaf != a)
        throw Error(ErrorCode::kProtocol, std::string(L::kSlotted ? "OFFLOAD_BYTES_SPLIT_IMAGE" : "OFFLOAD_SPLIT_IMAGE") +
                                              ": memory node answered for another leaf");
    if (r.status == net::kOffloadDone) {  // (the image had room after all: not sent so)
        log_changed(a);
        guard.release(&r.leaf_img);
        *inserted = true;
        return true;
    }
    guard.release(&r.leaf_img);  // the lower half, clean: remote memory holds the frame's changes now
    finish_memnode_split(r, nullptr, 0, path, dl);  // (its cache_update of the leaf finds it current)
    *inserted = true;
    return true;
}

// No answer to OFFLOAD_SPLIT_IMAGE or to a one-sided split's publish batch
// (a timeout, a lost connection; run by the unwinding WbGuard, after the
// remote lock was let go): the memory node may have split the leaf or not.
// The frame must not stay as it is if it did (a later write-back of the
// pre-split image would undo the split: entries twice, a right link lost),
// nor be dropped if it did not (its dirty entries would be lost). Remote
// memory tells: nobody else changes the leaf while we hold its frame (W3),
// and a dirty frame is written through only by a split, which always gives
// the leaf a new right link. (Not "the key is there": a delete still only in
// the frame may have left an equal entry remotely.) Ran: the remote lower
// half goes into the frame, clean (the downlink may be missing, which B-link
// readers tolerate). Did not: the frame stays as it was, dirty. Remote
// memory unreadable too: the guard drops the frame as after a failed publish
// (src/README.md "Write-back mode", limits). Never throws.
template <class L>
void BTreeT<L>::wb_settle_lost_split(GAddr a, WbGuard& guard, const Deadline& dl) {
    try {
        cache::CacheRegion& R = cache_->region();
        Node now, held;
        if (io_.read(a, now, dl) != NodeIO::Read::kOk || !frame_holds_leaf(R.header(guard.frame), now, a)) return;
        R.copy_unswizzled(guard.frame, held);
        if (now.right != held.right) {
            GAddr changed[2] = {a, now.right};
            if (opts_.log_changes) opts_.log_changes(changed, 2);
            guard.release(&now);
        } else {
            guard.release(nullptr);
        }
    } catch (...) {
    }
}

template <class L>
void BTreeT<L>::finish_memnode_split(const SplitReply& r, FrameHold* hold, GAddr held, Path& path,
                                     const Deadline& dl) {
    Stats::add(stats().memnode_splits);
    // Standbys: every node the memory node changed, in one call (the entry's
    // transaction has not committed yet, so after the publish is early enough).
    // (A split parent's two halves and the grandparent too.)
    GAddr changed[5] = {r.leaf, r.sibling, r.parent, r.psibling, r.gparent};
    size_t nchanged = 2;
    for (size_t i = 2; i < 5; i++)
        if (changed[i]) changed[nchanged++] = changed[i];
    if (opts_.log_changes) opts_.log_changes(changed, nchanged);
    if (hold && r.leaf == held) {
        hold->install(held, r.leaf_img);
    } else {
        // Not cached (a miss: our I/O marker kept it out until the reply), or
        // the descent's cached leaf had split before (another compute server)
        // and the memory node moved right and split that one.
        if (hold) hold->release(held);
        cache_update(r.leaf, r.leaf_img);
    }
    // Leaf frame first, then the others: frames are taken parent before
    // child, so none is locked while another one is held.
    if (r.marker == r.sibling) {
        // The spare's marker was held since before the memory node published
        // it: nobody of this server read or changed it since, so the reply's
        // image is what remote memory holds (a clean frame).
        cache_->admit(r.sibling, r.sib_img);  // (gives the marker up)
        r.marker = 0;
    } else {
        cache_update(r.sibling, r.sib_img);  // only matters if its block's previous life is still cached
    }
    if (!r.parent) {
        // Step 3 left to us (parent full, moved, locked or unknown): as split_leaf.
        insert_parent(1, L::low(r.sib_img), r.sibling, path, dl);
        return;
    }
    // Gained a downlink, or split taking it (lower half): a stale copy was
    // harmless meanwhile -- its children are where it says, B-link readers
    // move right past its new high fence -- as after any parent's publish.
    cache_update(r.parent, r.parent_img);
    if (!r.psibling) return;
    if (r.pmarker == r.psibling) {
        // The parent spare's marker was held since before the memory node
        // published it: the reply's image is what remote memory holds.
        cache_->admit(r.psibling, r.psib_img);  // (gives the marker up)
        r.pmarker = 0;
    } else {
        cache_update(r.psibling, r.psib_img);  // only matters if its block's previous life is still cached
    }
    if (r.gparent) {
        cache_update(r.gparent, r.gp_img);
        return;
    }
    // The split parent's downlink left to us: as split_inner's step 3.
    insert_parent(2, L::low(r.psib_img), r.psibling, path, dl);
}

template <class L>
bool BTreeT<L>::split_at_miss(uint8_t kind, GAddr g, int level, bool marker) {
    // Only at the leaf itself, whose marker keeps it out of this server's
    // cache while the memory node moves half of it (C7 without a frame to
    // hold). Started higher up, a cached copy of the leaf could exist.
    const uint32_t node = gaddr_node(g);
    return kind == net::kOffloadInsert && level == 0 && marker && node_splits_leaves(node);
}

template <class L>
typename BTreeT<L>::MissOffload BTreeT<L>::finish_miss_split(const SplitReply& r, GAddr parent, Node& out,
                                                             const Deadline& dl, Descent* d) {
    switch (r.status) {
        case net::kOffloadSplit: {
            Path path{};
            path[1] = parent;
            finish_memnode_split(r, nullptr, 0, path, dl);
            break;
        }
        case net::kOffloadDone: cache_refresh_changed(r.leaf, r.leaf_img, dl); break;
        case net::kOffloadNoop: break;
        default: return MissOffload::kNotDone;  // out of space / restart: nothing changed
    }
    std::memcpy(static_cast<void*>(&out), &r.leaf_img, kNodeSize);
    d->addr = r.leaf;
    d->offloaded = r.status == net::kOffloadNoop ? net::kOffloadNoop : net::kOffloadDone;
    return MissOffload::kFinished;
}

template class BTreeT<FixedLayout>;
template class BTreeT<SlottedLayout>;

}  // namespace dex::tree
