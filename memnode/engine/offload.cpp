#include "engine/offload.h"

#include "engine/offload_split.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <type_traits>

#include "common/gaddr.h"
#include "tree/key.h"
#include "tree/layout.h"
#include "tree/node_format.h"
#include "tree/node_layout.h"
#include "tree/slotted_node.h"

namespace dex::memnode {

namespace {

using tree::capacity_of;
using tree::is_slotted;
using tree::seal_node;
using tree::snapshot_valid;
namespace sl = tree::slotted;

constexpr int kMaxHops = 64;       // nodes visited (levels plus right moves)
constexpr int kMaxAttempts = 2000; // torn / locked reads of one node before giving up

}  // namespace

// A validated snapshot of the node at `off` (reader protocol). False: still
// locked or torn after many attempts, or out of bounds.
bool read_pool_node(uint8_t* pool, uint64_t pool_bytes, uint64_t off, Node& out) {
    if (off < net::kPoolReservedBytes || off % 8 != 0 || off > pool_bytes || pool_bytes - off < kNodeSize) return false;
    for (int attempt = 0; attempt < kMaxAttempts; attempt++) {
        uint64_t w = __atomic_load_n(lock_word(pool, off), __ATOMIC_ACQUIRE);
        if (!lock_held(w)) {
            std::memcpy(static_cast<void*>(&out), pool + off, kNodeSize);
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            out.lock = w;  // the body must belong to this version (checked below)
            if (snapshot_valid(out) && __atomic_load_n(lock_word(pool, off), __ATOMIC_ACQUIRE) == w) return true;
        }
        if (attempt > 16) std::this_thread::yield();
    }
    return false;
}

namespace {

void reply(std::vector<uint8_t>& resp, uint8_t status, GAddr leaf, const Node* image = nullptr) {
    net::OffloadReply r{};
    r.status = status;
    r.leaf = leaf;
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&r);
    resp.insert(resp.end(), p, p + sizeof r);
    if (image) {
        const uint8_t* q = reinterpret_cast<const uint8_t*>(image);
        resp.insert(resp.end(), q, q + kNodeSize);
    }
}

// A journal slot the request names: 8-byte aligned, inside the pool, above
// the reserved bytes, room for `len` bytes.
bool journal_slot_ok(uint64_t pool_bytes, uint64_t journal, size_t len) {
    return journal >= net::kPoolReservedBytes && journal % 8 == 0 && journal <= pool_bytes &&
           pool_bytes - journal >= len;
}

// The insert's journal record first: whatever follows (the entry published,
// found present, or the compute side told to split), a crash can never leave
// the entry in the leaf without it.
void write_journal(uint8_t* pool, uint64_t journal, const uint8_t* record, size_t len) {
    std::memcpy(pool + journal, record, len);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

// What a request says beside its key: the same for both forms.
struct Target {
    uint64_t start;
    uint32_t tree_id;
    uint16_t node;
    uint8_t kind;
    uint8_t start_level;
};

// One step of the descent at a validated node.
enum class Route { kRight, kDown, kLeaf, kRestart };

// The layout policies: the traversal, locking and publishing below are one
// implementation; only what a node's bytes mean differs. A node of the other
// layout is never interpreted (accepts() is false: kOffloadRestart).
struct FixedLayout {
    using Tree = tree::FixedLayout;        // the compute side's layout (tree/layout.h)
    static constexpr bool kSplits = true;  // OFFLOAD_SPLIT: engine/offload_split.cpp
    EntryKey key;
    bool accepts(const Node& n) const { return !is_slotted(n) && n.count <= capacity_of(n.level); }
    Route route(const Node& n, GAddr& next) const {
        if (n.is_deleted() || !(n.high.cls == kPosInf || compare_keys(key, n.high) < 0)) {
            next = n.right;  // merged away (forwarding) or B-link move right
            return Route::kRight;
        }
        if (compare_keys(n.low, key) > 0) return Route::kRestart;  // landed right of the key
        if (n.level == 0) return Route::kLeaf;
        size_t lo = 0, hi = n.count;  // largest i with sep_i <= key
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (compare_keys(n.inner[mid].sep, key) <= 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == 0) return Route::kRestart;
        next = n.inner[lo - 1].child;
        return Route::kDown;
    }
    // Applies an insert / delete to the private image n: kOffloadDone if it
    // changed, otherwise the status to answer (n may then be garbage).
    uint8_t change(Node& n, uint8_t kind) const {
        size_t pos = std::lower_bound(n.leaf, n.leaf + n.count, key) - n.leaf;
        bool present = pos < n.count && n.leaf[pos] == key;
        if (kind == net::kOffloadInsert) {
            if (present) return net::kOffloadNoop;
            if (n.count >= kLeafCapacity) return net::kOffloadNeedsSmo;
            std::memmove(&n.leaf[pos + 1], &n.leaf[pos], (n.count - pos) * sizeof(EntryKey));
            n.leaf[pos] = key;
            n.count++;
        } else {
            if (!present) return net::kOffloadNoop;
            if (n.count == 1) return net::kOffloadNeedsSmo;
            std::memmove(&n.leaf[pos], &n.leaf[pos + 1], (n.count - pos - 1) * sizeof(EntryKey));
            n.count--;
        }
        return net::kOffloadDone;
    }
};

// A slotted node is read into a Node buffer (same size and alignment, same
// first 40 bytes); snapshot_valid() has run layout_valid() on it, so every
// offset the accessors follow is inside the buffer.
const sl::SNode& as_slotted(const Node& n) { return reinterpret_cast<const sl::SNode&>(n); }
sl::SNode& as_slotted(Node& n) { return reinterpret_cast<sl::SNode&>(n); }

struct SlottedLayout {
    using Tree = tree::SlottedLayout;
    static constexpr bool kSplits = true;  // OFFLOAD_BYTES_SPLIT
    sl::Bytes key;
    bool accepts(const Node& n) const { return is_slotted(n); }
    Route route(const Node& n, GAddr& next) const {
        const sl::SNode& s = as_slotted(n);
        if (s.is_deleted() || !(sl::high_is_inf(s) || sl::compare(key, sl::high(s)) < 0)) {
            next = s.right;
            return Route::kRight;
        }
        if (sl::compare(sl::low(s), key) > 0) return Route::kRestart;
        if (s.level == 0) return Route::kLeaf;
        int i = sl::child_index(s, key);
        if (i < 0) return Route::kRestart;
        next = sl::child(s, static_cast<size_t>(i));
        return Route::kDown;
    }
    uint8_t change(Node& n, uint8_t kind) const {
        sl::SNode& s = as_slotted(n);
        size_t pos = sl::lower_bound(s, key);
        bool present = pos < s.count && sl::compare(sl::key(s, pos), key) == 0;
        if (kind == net::kOffloadInsert) {
            if (present) return net::kOffloadNoop;
            // False: does not fit even after compaction -> the compute side splits.
            if (!sl::insert_leaf(s, pos, key)) return net::kOffloadNeedsSmo;
        } else {
            if (!present) return net::kOffloadNoop;
            if (s.count == 1) return net::kOffloadNeedsSmo;
            sl::erase(s, pos);
        }
        return net::kOffloadDone;
    }
};

// At the validated leaf snapshot n (at `off`): writer protocol on the local
// pool. CAS (v,_,0) -> (v,me,1) -- success proves the node is still the
// snapshot -- then change a private copy and publish it (body from byte 8,
// then the lock word at version + 1, unlocked), or restore the lock word if
// nothing changes. False: the CAS failed (changed or locked meanwhile).
// With `split` (OFFLOAD_SPLIT) an insert into a full leaf splits it while the
// lock is held (split_full_leaf writes the sibling, `n` becomes the lower half
// published here): status kOffloadSplit, the sibling in `sib` / `sib_img`.
template <class Layout>
bool write_leaf(uint8_t* pool, uint64_t pool_bytes, uint64_t off, uint64_t client_id, const Layout& layout,
                const Target& t, const SplitContext* split, Node& n, uint8_t& status, GAddr& sib, Node& sib_img) {
    const uint64_t v = n.body_version;  // full version; the lock word keeps its low bits
    uint64_t expected = make_lock_word(v, 0, false);
    const uint64_t mine = make_lock_word(v, client_id, true);
    if (!__atomic_compare_exchange_n(lock_word(pool, off), &expected, mine, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        return false;
    status = layout.change(n, t.kind);
    if constexpr (Layout::kSplits) {
        // change() left n as it was when it answered "needs a split".
        if (status == net::kOffloadNeedsSmo && split && t.kind == net::kOffloadInsert &&
            split_full_leaf<typename Layout::Tree>(pool, pool_bytes, t.node, layout.key, n, *split, sib, sib_img))
            status = net::kOffloadSplit;
    }
    if (status != net::kOffloadDone && status != net::kOffloadSplit) {
        __atomic_store_n(lock_word(pool, off), expected, __ATOMIC_RELEASE);  // unchanged
        return true;
    }
    seal_node(n, v + 1);  // dispatches on the layout flag
    publish_node(pool, off, n);
    return true;
}

// After a split published the leaf (no lock held any more): step 3 if the
// parent takes the downlink simply, then the reply with every changed image
// (an OFFLOAD_BATCH_SPLIT item: its status, and the tail for the batch).
template <class TL>
void reply_split(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id, const Target& t, const SplitContext& split,
                 uint64_t parent, GAddr leaf, const Node& n, GAddr sib, const Node& sib_img,
                 std::vector<uint8_t>& resp) {
    Node pimg;
    bool linked =
        parent && link_in_parent<TL>(pool, pool_bytes, client_id, t.tree_id, parent, TL::low(sib_img), sib, pimg);
    // A full parent (kHelloSplitParent; never in a batch, whose tails have
    // no room for it): split here too, as the compute side's insert_parent would.
    ParentSplit ps;
    if (!linked && parent && split.split_parent && !split.batch_tail && !split.bytes_tail &&
        split_parent<TL>(pool, pool_bytes, client_id, t.tree_id, t.node, parent, split.grandparent, TL::low(sib_img),
                         sib, split, ps)) {
        linked = true;
        pimg = ps.parent;
    }
    if constexpr (std::is_same_v<TL, tree::FixedLayout>) {
        if (split.batch_tail) {  // OFFLOAD_BATCH_SPLIT: addresses and separator only
            reply(resp, net::kOffloadSplit, leaf);
            *split.batch_tail = net::OffloadBatchSplitTail{sib, linked ? make_gaddr(t.node, parent) : 0, {}};
            std::memcpy(split.batch_tail->sep, &sib_img.low, sizeof split.batch_tail->sep);
            return;
        }
    } else if (split.bytes_tail) {  // OFFLOAD_BYTES_BATCH_SPLIT: the same, the separator's bytes whole
        reply(resp, net::kOffloadSplit, leaf);
        const auto sep = TL::low(sib_img);
        net::OffloadBytesBatchSplitTail& bt = *split.bytes_tail;
        bt = net::OffloadBytesBatchSplitTail{};
        bt.sibling = sib;
        bt.parent = linked ? make_gaddr(t.node, parent) : 0;
        bt.sep_len = static_cast<uint16_t>(sep.size());  // a fence: at most kMaxOffloadKeyBytes
        std::memcpy(bt.sep, sep.data(), sep.size());
        return;
    }
    reply(resp, net::kOffloadSplit, leaf, &n);
    const net::OffloadSplitTail tail{sib, linked ? make_gaddr(t.node, parent) : 0};
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&tail);
    resp.insert(resp.end(), p, p + sizeof tail);
    const uint8_t* q = reinterpret_cast<const uint8_t*>(&sib_img);
    resp.insert(resp.end(), q, q + kNodeSize);
    if (linked) {
        q = reinterpret_cast<const uint8_t*>(&pimg);
        resp.insert(resp.end(), q, q + kNodeSize);
    }
    if (!split.split_parent) return;
    const net::OffloadParentSplitTail pt{ps.psibling, ps.gp_linked ? make_gaddr(t.node, split.grandparent) : 0,
                                         split.next_parent_spare ? split.next_parent_spare() : 0};
    p = reinterpret_cast<const uint8_t*>(&pt);
    resp.insert(resp.end(), p, p + sizeof pt);
    if (ps.psibling) {
        q = reinterpret_cast<const uint8_t*>(&ps.psib);
        resp.insert(resp.end(), q, q + kNodeSize);
    }
    if (ps.gp_linked) {
        q = reinterpret_cast<const uint8_t*>(&ps.gp);
        resp.insert(resp.end(), q, q + kNodeSize);
    }
}

// From the start node down (moving right as B-link readers do) to the leaf
// covering the layout's key, then the request's kind there.
template <class Layout>
void traverse(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id, const Target& t, const Layout& layout,
              std::vector<uint8_t>& resp, bool with_image, const SplitContext* split = nullptr) {
    uint64_t off = t.start;
    int expect = t.start_level;
    Node n;
    int cas_failures = 0;
    // The leaf's parent for a split's downlink: the last level-1 node the
    // descent went down from, else the one the request named.
    uint64_t parent = split ? split->parent : 0;
    for (int hop = 0; hop < kMaxHops; hop++) {
        if (!read_pool_node(pool, pool_bytes, off, n) || n.tree_id != t.tree_id || n.level != expect ||
            !layout.accepts(n))
            return reply(resp, net::kOffloadRestart, 0);
        GAddr next = 0;
        switch (layout.route(n, next)) {
            case Route::kRestart: return reply(resp, net::kOffloadRestart, 0);
            case Route::kRight: break;
            case Route::kDown:
                if (n.level == 1) parent = off;
                expect = n.level - 1;
                break;
            case Route::kLeaf: {
                const GAddr leaf = make_gaddr(t.node, off);
                if (t.kind == net::kOffloadLeaf)
                    return reply(resp, net::kOffloadDone, leaf, with_image ? &n : nullptr);
                uint8_t st;
                GAddr sib = 0;
                Node sib_img;
                const SplitContext* sp = split && split->may_split_under && !split->may_split_under(parent) ? nullptr : split;
                if (sp && sp->used_parent) *sp->used_parent = parent;
                if (!write_leaf(pool, pool_bytes, off, client_id, layout, t, sp, n, st, sib, sib_img)) {
                    hop--;  // read it again (bounded by kMaxAttempts per read)
                    if (++cas_failures > 200) return reply(resp, net::kOffloadRestart, 0);
                    continue;
                }
                if (st == net::kOffloadSplit)
                    return reply_split<typename Layout::Tree>(pool, pool_bytes, client_id, t, *split, parent, leaf, n,
                                                              sib, sib_img, resp);
                return reply(resp, st, leaf, st == net::kOffloadDone && with_image ? &n : nullptr);
            }
        }
        if (!next || gaddr_node(next) != t.node || gaddr_is_swizzled(next))
            return reply(resp, net::kOffloadRestart, 0);  // the path leaves this memory node
        off = gaddr_offset(next);
    }
    reply(resp, net::kOffloadRestart, 0);
}

}  // namespace

void check_offload_request(uint64_t pool_bytes, const net::OffloadRequest& req) {
    if (req.kind < net::kOffloadLeaf || req.kind > net::kOffloadDelete)
        throw std::invalid_argument("OFFLOAD: unknown kind " + std::to_string(req.kind));
    if (req.kind == net::kOffloadInsert && req.journal != 0 &&
        !journal_slot_ok(pool_bytes, req.journal, sizeof req.record))
        throw std::invalid_argument("OFFLOAD: journal slot outside the pool");
}

void execute_offload(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id, const net::OffloadRequest& req,
                     std::vector<uint8_t>& resp, bool with_image, const SplitContext* split) {
    check_offload_request(pool_bytes, req);
    if (req.kind == net::kOffloadInsert && req.journal != 0)
        write_journal(pool, req.journal, req.record, sizeof req.record);
    FixedLayout layout;
    std::memcpy(&layout.key, req.key, sizeof layout.key);
    traverse(pool, pool_bytes, client_id, Target{req.start, req.tree_id, req.node, req.kind, req.start_level}, layout,
             resp, with_image, split);
}

namespace {

// The shared body of OFFLOAD_SPLIT_IMAGE and OFFLOAD_BYTES_SPLIT_IMAGE: the
// leaf at `off` -- remote memory at the image's version `version` or
// (unlocked) newer -- replaced by the compute server's image `img` with the
// layout's key inserted (its journal record written first by `journal`),
// split as OFFLOAD_SPLIT splits when full. `img` was checked to be a valid
// leaf image of this tree and layout.
template <class Layout>
void split_image(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id, const Target& t, const Layout& layout,
                 Node& img, uint64_t version, const SplitContext& split, const std::function<void()>& journal,
                 std::vector<uint8_t>& resp) {
    using TL = typename Layout::Tree;
    const uint64_t off = t.start;
    Node cur;  // what remote memory holds: the same leaf, at the image's version or (unlocked) newer
    if (!read_pool_node(pool, pool_bytes, off, cur) || cur.tree_id != t.tree_id || cur.level != 0 ||
        is_slotted(cur) != TL::kSlotted || cur.is_deleted() || cur.body_version < version)
        return reply(resp, net::kOffloadRestart, 0);
    journal();
    // write_leaf locks at cur's version (the CAS proves nothing changed since
    // the read) and then works on the image instead of cur: the frame holds
    // every change of the leaf (single writer), cur at most fewer.
    img.body_version = cur.body_version;
    uint8_t st = 0;
    GAddr sib = 0;
    Node sib_img;
    if (!write_leaf(pool, pool_bytes, off, client_id, layout, t, &split, img, st, sib, sib_img))
        return reply(resp, net::kOffloadRestart, 0);  // changed or locked since the read: the compute side's way
    const GAddr leaf = make_gaddr(t.node, off);
    if (st == net::kOffloadSplit)
        return reply_split<TL>(pool, pool_bytes, client_id, t, split, split.parent, leaf, img, sib, sib_img, resp);
    reply(resp, st, leaf, st == net::kOffloadDone ? &img : nullptr);
}

}  // namespace

void execute_offload_split_image(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id, const uint8_t* payload,
                                 const SplitContext& split, std::vector<uint8_t>& resp) {
    net::OffloadRequest req;
    net::OffloadImageExt img_ext;
    Node img;
    std::memcpy(&req, payload, sizeof req);
    std::memcpy(&img_ext, payload + sizeof req + sizeof(net::OffloadSplitExt), sizeof img_ext);
    std::memcpy(static_cast<void*>(&img), payload + sizeof req + sizeof(net::OffloadSplitExt) + sizeof img_ext,
                kNodeSize);
    check_offload_request(pool_bytes, req);
    if (req.kind != net::kOffloadInsert || req.start_level != 0)
        throw std::invalid_argument("OFFLOAD_SPLIT_IMAGE: an insert at a leaf only");
    // The image is the compute server's: only a leaf of the fixed layout of
    // this tree whose entries fit is used (then the layout's split is safe).
    if (is_slotted(img) || img.level != 0 || img.tree_id != req.tree_id || img.count > kLeafCapacity ||
        img.is_deleted())
        throw std::invalid_argument("OFFLOAD_SPLIT_IMAGE: the image is not a leaf of the tree");
    FixedLayout layout;
    std::memcpy(&layout.key, req.key, sizeof layout.key);
    const Target t{req.start, req.tree_id, req.node, req.kind, 0};
    split_image(pool, pool_bytes, client_id, t, layout, img, img_ext.version, split, [&] {
        if (req.journal != 0) write_journal(pool, req.journal, req.record, sizeof req.record);
    }, resp);
}

void execute_offload_bytes_split_image(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id,
                                       const net::OffloadBytesView& v, const uint8_t* image_ext,
                                       const SplitContext& split, std::vector<uint8_t>& resp) {
    net::OffloadImageExt img_ext;
    Node img;
    std::memcpy(&img_ext, image_ext, sizeof img_ext);
    std::memcpy(static_cast<void*>(&img), image_ext + sizeof img_ext, kNodeSize);
    if (v.h.kind != net::kOffloadInsert || v.h.start_level != 0)
        throw std::invalid_argument("OFFLOAD_BYTES_SPLIT_IMAGE: an insert at a leaf only");
    // The image is the compute server's: only a valid slotted leaf of this
    // tree is used (its slot array and heap checked: the layout's insert and
    // split then stay inside the node).
    if (!is_slotted(img) || img.level != 0 || img.tree_id != v.h.tree_id || img.is_deleted() ||
        !tree::SlottedLayout::layout_ok(img))
        throw std::invalid_argument("OFFLOAD_BYTES_SPLIT_IMAGE: the image is not a slotted leaf of the tree");
    const SlottedLayout layout{sl::bytes(v.key, v.h.key_len)};
    const Target t{v.h.start, v.h.tree_id, v.h.node, v.h.kind, 0};
    split_image(pool, pool_bytes, client_id, t, layout, img, img_ext.version, split, [&] {
        if (v.h.journal != 0) write_journal(pool, v.h.journal, v.record, v.h.record_len);
    }, resp);
}

namespace {

// What a dirty split's request says, either layout's.
template <class L>
struct DirtySplitAsk {
    uint64_t off;  // the leaf
    uint32_t tree_id;
    uint16_t node;
    uint64_t parent, version, right;
    typename L::Key sep, low, high;
};

// The shared body of OFFLOAD_DIRTY_SPLIT and OFFLOAD_BYTES_DIRTY_SPLIT.
template <class L>
void dirty_split(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id, const DirtySplitAsk<L>& q, uint64_t sibling,
                 std::vector<uint8_t>& resp) {
    // Both halves cover a key range: low < sep < high.
    if (L::compare(q.low, q.sep) >= 0 || (!L::is_pos_inf(q.high) && L::compare(q.sep, q.high) >= 0))
        throw std::invalid_argument("OFFLOAD_DIRTY_SPLIT: the separator is not inside the leaf's fences");
    const uint64_t off = q.off;
    Node cur;
    // The leaf the compute server's frame describes: at the frame's version
    // or, after a write-back of it, unlocked at a newer one (the frame's
    // holder is its only writer); its structure is written through (W1), so
    // fences and right link agree. Else nothing changes and the compute side
    // splits one-sided.
    if (!sibling || !sibling_block_ok(pool_bytes, sibling) || sibling == off ||
        !read_pool_node(pool, pool_bytes, off, cur) || cur.tree_id != q.tree_id || cur.level != 0 ||
        is_slotted(cur) != L::kSlotted || !L::layout_ok(cur) || cur.is_deleted() || cur.body_version < q.version ||
        cur.right != q.right || !L::equal(L::low(cur), q.low) || !L::equal(L::high(cur), q.high))
        return reply(resp, net::kOffloadRestart, 0);
    const uint64_t v = cur.body_version;
    uint64_t expected = make_lock_word(v, 0, false);
    if (!__atomic_compare_exchange_n(lock_word(pool, off), &expected, make_lock_word(v, client_id, true), false,
                                     __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        return reply(resp, net::kOffloadRestart, 0);  // locked or changed since the read
    const GAddr sib = make_gaddr(q.node, sibling);
    Node lo, hi;
    // (a fixed leaf's halves always fit; a slotted half may not: a separator
    // longer than the fence it replaces)
    if (!tree::split_image_at<L>(cur, q.sep, sib, lo, hi)) {
        __atomic_store_n(lock_word(pool, off), expected, __ATOMIC_RELEASE);
        return reply(resp, net::kOffloadRestart, 0);
    }
    publish_sibling(pool, sibling, hi);  // step 1, then the leaf points at it (step 2)
    seal_node(lo, v + 1);
    publish_node(pool, off, lo);
    const Target t{off, q.tree_id, q.node, net::kOffloadInsert, 0};
    const SplitContext plain;  // (answers with images, as OFFLOAD_SPLIT)
    reply_split<L>(pool, pool_bytes, client_id, t, plain, q.parent, make_gaddr(q.node, off), lo, sib, hi, resp);
}

}  // namespace

void execute_offload_dirty_split(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id, const uint8_t* payload,
                                 uint64_t sibling, std::vector<uint8_t>& resp) {
    using L = tree::FixedLayout;
    net::OffloadRequest req;
    net::OffloadSplitExt ext;
    net::OffloadDirtySplitExt dx;
    std::memcpy(&req, payload, sizeof req);
    std::memcpy(&ext, payload + sizeof req, sizeof ext);
    std::memcpy(&dx, payload + sizeof req + sizeof ext, sizeof dx);
    check_offload_request(pool_bytes, req);
    if (req.kind != net::kOffloadInsert || req.start_level != 0 || req.journal != 0)
        throw std::invalid_argument("OFFLOAD_DIRTY_SPLIT: the split of a leaf only, without a journal record");
    DirtySplitAsk<L> q{req.start, req.tree_id, req.node, ext.parent, dx.version, dx.right, {}, {}, {}};
    std::memcpy(&q.sep, req.key, sizeof q.sep);
    std::memcpy(&q.low, dx.low, sizeof q.low);
    std::memcpy(&q.high, dx.high, sizeof q.high);
    dirty_split<L>(pool, pool_bytes, client_id, q, sibling, resp);
}

net::OffloadBytesDirtySplitHeader check_offload_bytes_dirty_split(const uint8_t* payload, size_t len) {
    net::OffloadBytesDirtySplitHeader h;
    if (len < sizeof h) throw std::invalid_argument("OFFLOAD_BYTES_DIRTY_SPLIT: payload shorter than its header");
    std::memcpy(&h, payload, sizeof h);
    if (h.pad0 != 0 || h.pad1 != 0 || h.high_inf > 1 || (h.high_inf && h.high_len != 0))
        throw std::invalid_argument("OFFLOAD_BYTES_DIRTY_SPLIT: bad flags or padding");
    if (h.sep_len == 0 || h.sep_len > net::kMaxOffloadKeyBytes || h.low_len > net::kMaxOffloadKeyBytes ||
        h.high_len > net::kMaxOffloadKeyBytes)
        throw std::invalid_argument("OFFLOAD_BYTES_DIRTY_SPLIT: separator or fence too long (or no separator)");
    if (len != sizeof h + size_t(h.sep_len) + h.low_len + h.high_len)
        throw std::invalid_argument("OFFLOAD_BYTES_DIRTY_SPLIT: payload length is not header + sep + fences");
    return h;
}

void execute_offload_bytes_dirty_split(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id,
                                       const uint8_t* payload, uint64_t sibling, std::vector<uint8_t>& resp) {
    using L = tree::SlottedLayout;
    net::OffloadBytesDirtySplitHeader h;
    std::memcpy(&h, payload, sizeof h);
    const char* p = reinterpret_cast<const char*>(payload) + sizeof h;
    DirtySplitAsk<L> q{h.start, h.tree_id, h.node, h.parent, h.version, h.right, {}, {}, {}};
    q.sep.assign(p, h.sep_len);
    q.low.assign(p + h.sep_len, h.low_len);
    q.high = h.high_inf ? L::pos_inf() : L::Key(p + h.sep_len + h.low_len, h.high_len);
    dirty_split<L>(pool, pool_bytes, client_id, q, sibling, resp);
}

net::OffloadBytesView check_offload_bytes(uint64_t pool_bytes, const uint8_t* payload, size_t len) {
    net::OffloadBytesView v;
    if (const char* why = net::parse_offload_bytes(payload, len, v)) throw std::invalid_argument(why);
    if (v.h.journal != 0 && !journal_slot_ok(pool_bytes, v.h.journal, v.h.record_len))
        throw std::invalid_argument("OFFLOAD_BYTES: journal slot outside the pool");
    return v;
}

void execute_offload_bytes(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id, const net::OffloadBytesView& v,
                           std::vector<uint8_t>& resp, bool with_image, const SplitContext* split) {
    if (v.h.journal != 0) write_journal(pool, v.h.journal, v.record, v.h.record_len);
    const SlottedLayout layout{sl::bytes(v.key, v.h.key_len)};
    traverse(pool, pool_bytes, client_id, Target{v.h.start, v.h.tree_id, v.h.node, v.h.kind, v.h.start_level},
             layout, resp, with_image, split);
}

}  // namespace dex::memnode
