// Batched inserts (src/README.md "Offloading", batched offloaded inserts):
// the entries of a multi-row statement (COPY, INSERT ... SELECT), handed over
// up to net::kMaxOffloadBatch at a time, go to the memory nodes as one
// OFFLOAD_BATCH per node (OFFLOAD_BYTES_BATCH for byte-string keys) instead
// of one OFFLOAD (or a one-sided write) each.
// The memory node executes every sub-request exactly as a single offloaded
// insert; a memory node that takes OFFLOAD_BATCH_SPLIT (OFFLOAD_BYTES_BATCH_SPLIT
// for slotted trees) also splits a full leaf itself, as OFFLOAD_SPLIT does. What it cannot do without
// a structure modification comes back and is inserted here one at a time,
// splits included.
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "cache/cache.h"
#include "common/stats.h"
#include "tree/btree.h"
#include "tree/offload_policy.h"

namespace dex::tree {

template <class L>
bool BTreeT<L>::batch_allowed() const {
    // Without a cache nothing is offloaded (every node is read anyway), and
    // write-back leaves may be newer than their remote images: as insert().
    return cache_ && opts_.offload && opts_.offload->mode() != OffloadMode::kOff && !wb_;
}

template <class L>
void BTreeT<L>::insert_batch(const Key* keys, const uint64_t* lsns, size_t n, uint64_t durable, size_t* done) {
    *done = 0;
    for (size_t i = 0; i < n; i++)
        if (!L::storable(keys[i])) throw Error(ErrorCode::kInvalid, "cannot insert key " + L::str(keys[i]));
    // A single entry (a single-row INSERT's, held back until its statement
    // ends) takes the single path: its offload reply carries the leaf image
    // that refreshes the cached leaf (DEX 6.2), where a batch drops it.
    if (n == 1) {
        insert(keys[0], lsns[0], durable);
        *done = 1;
        return;
    }
    if (!batch_allowed()) {
        // One at a time: each insert reserves its journal slots before it
        // changes anything, so a NeedDurable leaves exactly the prefix done.
        if (wb_)
            insert_each_logged(keys, lsns, n, durable, done);
        else
            for (; *done < n; ++*done) insert(keys[*done], lsns[*done], durable);
        return;
    }
    while (*done < n) {
        const size_t m = std::min<size_t>(n - *done, net::kMaxOffloadBatch);
        *done += insert_chunk(keys + *done, lsns + *done, m, durable);
    }
}

// One chunk: which entries the journal can take (a prefix); then rounds of:
// where the memory node starts for each entry, one OFFLOAD_BATCH per memory
// node, the cache and the change log. A leaf that fills up answers "needs a
// split" for the rest of its entries: the first of them is inserted alone
// here (it splits the leaf), the others go into the next round -- so an
// ascending load (serial keys, timestamps), whose entries all land in the
// rightmost leaf, still costs a round trip per leaf's worth of entries and
// one split, not a one-sided insert per row.
// One class for both layouts: they differ only in the request each entry
// becomes (append_request) -- a fixed-size OffloadRequest in OFFLOAD_BATCH,
// or an OffloadBytesHeader with the entry bytes and the byte-form journal
// record in OFFLOAD_BYTES_BATCH (slotted trees, byte-string keys).
template <class L>
class BTreeT<L>::InsertBatch {
public:
    InsertBatch(BTreeT& t, const Key* keys, const uint64_t* lsns, size_t n, uint64_t durable)
        : t_(t), keys_(keys), lsns_(lsns), e_(n), durable_(durable) {}

    size_t run() {
        const size_t p = fit_journal();
        e_.resize(p);
        Stats::add(stats().index_ops, p);
        std::vector<size_t> todo(p);
        for (size_t i = 0; i < p; i++) todo[i] = i;
        // Each round inserts at least one entry per leaf that needed a split
        // (alone), so rounds end; the bound is a guard against a node that
        // keeps answering "needs a split" for a leaf the compute side split.
        for (size_t round = 0; !todo.empty(); round++) {
            if (round >= p + 1) {
                for (size_t i : todo) insert_alone(i, false);
                break;
            }
            todo = one_round(todo);
        }
        return p;
    }

private:
    struct Entry {
        GAddr start = 0;  // where the memory node starts (0: insert it alone)
        int level = 0;    // start's level
        bool journal = false;
        int64_t slot = -1;        // journal slot taken on slot_node by a batched attempt
        uint32_t slot_node = 0;
        bool one_by_one = false;  // insert_reserved() after this round's batches
        bool may_offload = true;  // ... and may that offload (no batched attempt said "needs a split")
        GAddr full_leaf = 0;      // this round: the leaf that answered "needs a split"
        GAddr parent = 0;         // start's level-1 parent (a cached leaf's), for a memory-node split
        bool may_split = false;   // this attempt: its leaf's frame / I/O marker is held (C7)
    };
    // A sibling a memory node created whose downlink it could not insert.
    struct Unlinked {
        Key sep;  // the separator (the sibling's low fence)
        GAddr sibling;
        GAddr parent;  // where the leaf's descent passed level 1 (0: unknown)
    };

    // One round over `todo`; returns the entries for the next round.
    std::vector<size_t> one_round(const std::vector<size_t>& todo) {
        plan(todo);
        std::map<uint32_t, std::vector<size_t>> by_node;
        for (size_t i : todo)
            if (e_[i].start) by_node[gaddr_node(e_[i].start)].push_back(i);
        try {
            for (auto& [node, idx] : by_node) send(node, idx);
        } catch (...) {
            settle();  // what the nodes answered before the failure changed leaves
            try {
                link_siblings();
            } catch (...) {  // B-link readers reach those siblings through their right links
            }
            throw;
        }
        settle();
        link_siblings();
        std::vector<size_t> next;
        std::vector<GAddr> split;  // full leaves whose first waiting entry went alone
        for (size_t i : todo) {    // todo is in key order: the first per leaf is its smallest
            Entry& e = e_[i];
            if (e.one_by_one) {
                insert_alone(i, e.may_offload);
            } else if (e.full_leaf) {
                if (std::find(split.begin(), split.end(), e.full_leaf) == split.end()) {
                    split.push_back(e.full_leaf);
                    // splits the leaf: a slotted one by its memory node where
                    // it can (OFFLOAD_BYTES_SPLIT; a leaf comes back only where
                    // the batch could not split it), else one-sided
                    insert_alone(i, L::kSlotted && t_.node_splits_leaves(gaddr_node(e.full_leaf)));
                } else {
                    next.push_back(i);
                }
            }
        }
        return next;
    }

    bool journaled(size_t i) const { return lsns_[i] != 0 && lsns_[i] > durable_; }

    // The longest prefix whose journaled entries all get a slot (src/README.md
    // "The insert journal", batches): each entry takes at most one slot on
    // each memory node -- its batched attempt's on the node it was sent to,
    // which an insert that goes on alone takes up again, and one on a node it
    // lands on instead -- so `room` consecutive free slots on every node are
    // enough for `room` journaled entries, and nothing after the batch can
    // ask for a WAL flush. None fits: NeedDurable, before anything changed.
    size_t fit_journal() {
        size_t n = e_.size();
        if (!t_.journal_) return n;
        size_t first = n;
        for (size_t i = 0; i < n && first == n; i++)
            if (journaled(i)) first = i;
        if (first == n) return n;
        uint64_t newest = 0;
        const uint32_t room = t_.journal_->batch_room(durable_, &newest);
        uint32_t used = 0;
        size_t p = 0;
        for (; p < n; p++) {
            if (!journaled(p)) continue;
            if (used == room) break;
            used++;
            e_[p].journal = true;
        }
        if (p == 0) {
            // Flushing this far frees every slot and makes the whole chunk
            // durable: one flush, not one per freed slot.
            uint64_t need = newest;
            for (size_t i = 0; i < n; i++) need = std::max(need, lsns_[i]);
            throw NeedDurable(need);
        }
        return p;
    }

    // Per entry: down the cached inner nodes to the first node at or below
    // the placement level that is not cached, or to the cached leaf, as a
    // single insert's offload_at_miss / offload_cached_write would start.
    void plan(const std::vector<size_t>& todo) {
        Deadline dl = t_.deadline();
        Node snap;
        for (size_t i : todo) {
            Path path{};
            Descent d = t_.descend_leaf(keys_[i], kFindOffloadStart, snap, &path, dl);
            Entry& e = e_[i];
            e.full_leaf = 0;
            e.one_by_one = false;
            e.start = d.addr;
            e.level = d.level;
            if (d.level == 0 && d.cached && d.addr && !gaddr_is_swizzled(d.addr)) t_.rewarm_note_hot(d.addr);
            // A cached leaf's parent, if its memory node can link a sibling
            // there (same node, at or below the placement level); a start
            // higher up passes the parent on the memory node itself.
            e.parent = d.level == 0 ? path[1] : 0;
            if (!e.parent || gaddr_is_swizzled(e.parent) || gaddr_node(e.parent) != gaddr_node(d.addr) ||
                t_.place_level_ < 1)
                e.parent = 0;
            if (!e.start || gaddr_is_swizzled(e.start) || e.level < 0 || e.level > t_.place_level_) {
                e.start = 0;
                e.one_by_one = true;
            }
        }
    }

    static constexpr net::Op kBatchOp = L::kSlotted ? net::kOpOffloadBytesBatch : net::kOpOffloadBatch;
    static constexpr net::Op kSplitOp = L::kSlotted ? net::kOpOffloadBytesBatchSplit : net::kOpOffloadBatchSplit;
    static constexpr const char* kBatchName = L::kSlotted ? "OFFLOAD_BYTES_BATCH" : "OFFLOAD_BATCH";
    // A split's tail in the reply: a slotted one carries its separator's bytes.
    using SplitTail = std::conditional_t<L::kSlotted, net::OffloadBytesBatchSplitTail, net::OffloadBatchSplitTail>;

    // Whether `node` splits full leaves inside the batch (OFFLOAD_BATCH_SPLIT,
    // OFFLOAD_BYTES_BATCH_SPLIT): it says so, and the tree has a namespace
    // there for the siblings.
    bool node_splits(uint32_t node, Transport& tr) const {
        if (node >= t_.part_ns_.size() || !t_.part_ns_[node]) return false;
        return L::kSlotted ? tr.offload_bytes_batch_split_allowed() : tr.offload_batch_split_allowed();
    }

    // The rest of entry i's split item: where it goes in the request (a
    // slotted item's comes first: its sub-request's length varies).
    void append_split_item(std::vector<uint8_t>& payload, const Entry& e) {
        if constexpr (L::kSlotted) {
            net::OffloadBytesBatchSplitItem it{};
            it.parent = e.parent ? gaddr_offset(e.parent) : 0;
            it.split = e.may_split ? 1 : 0;
            const uint8_t* q = reinterpret_cast<const uint8_t*>(&it);
            payload.insert(payload.end(), q, q + sizeof it);
        } else {
            const uint64_t parent = e.parent ? gaddr_offset(e.parent) : 0;
            const uint8_t* q = reinterpret_cast<const uint8_t*>(&parent);
            payload.insert(payload.end(), q, q + sizeof parent);
            const uint8_t flags[8] = {static_cast<uint8_t>(e.may_split ? 1 : 0)};
            payload.insert(payload.end(), flags, flags + sizeof flags);
        }
    }

    void send(uint32_t node, const std::vector<size_t>& idx) {
        Transport& tr = t_.mem_.node(node);
        if (L::kSlotted ? !tr.offload_bytes_batch_allowed() : !tr.offload_batch_allowed()) {
            // Refuses offloaded writes (HCA atomics), or an older node without
            // the batch op: the single path decides for each entry.
            for (size_t i : idx) e_[i].one_by_one = true;
            return;
        }
        const bool splits = node_splits(node, tr);
        // C7 for the leaves the memory node may split: no reader of this
        // server may use a leaf's image from before the split once the batch
        // returns, so each start leaf's frame is held (or, not cached, its
        // I/O marker taken) from before the RPC until it is dropped.
        std::optional<FrameHold> hold;
        hold.emplace(t_);
        std::vector<GAddr> markers;
        if (splits) guard_leaves(idx, *hold, markers);
        std::vector<uint8_t> payload;
        payload.reserve(idx.size() * (L::kSlotted ? 256 : sizeof(net::OffloadBatchSplitItem)) + 16);
        if (splits) {
            const net::OffloadBatchSplitHeader h{t_.part_ns_[node], static_cast<uint32_t>(idx.size()), 0};
            const uint8_t* q = reinterpret_cast<const uint8_t*>(&h);
            payload.insert(payload.end(), q, q + sizeof h);
        }
        for (size_t i : idx) {
            Entry& e = e_[i];
            if (e.journal) {  // the memory node writes it before it changes the leaf
                t_.journal_->begin_entry();
                // a later round's attempt on the same node rewrites the same slot
                if (e.slot >= 0 && e.slot_node == node) t_.journal_->resume(node, e.slot);
            }
            if (splits && L::kSlotted) append_split_item(payload, e);
            append_request(payload, node, i);
            if (splits && !L::kSlotted) append_split_item(payload, e);
            if (e.journal) {
                e.slot = t_.journal_->slot_taken(node);
                e.slot_node = node;
            }
        }
        try {
            std::vector<uint8_t> resp;
            {
                // Writes the memory node may already have applied: a query
                // cancel waits for the answer (the op timeout still bounds
                // it), as for a single offloaded write.
                InterruptHold hold;
                resp = tr.rpc(splits ? kSplitOp : kBatchOp, payload.data(),
                              static_cast<uint32_t>(payload.size()));
            }
            Stats::add(stats().offloads, idx.size());
            test_point("offload-batch:answered");  // the memory node applied the batch; nothing here knows it yet
            take_replies(node, idx, resp, splits);
        } catch (...) {
            // Let go first (a held frame is made unreadable and dropped), so
            // that forget()'s drops do not wait for our own frames.
            for (GAddr a : markers) t_.cache_->abort_io(a);
            hold.reset();
            // A parent the memory node may have linked a sibling into: a stale
            // copy would only lack the downlink (B-link readers move right),
            // but each later descent would pay that move: drop it too.
            for (size_t i : idx)
                if (e_[i].may_split && e_[i].parent) try {
                        t_.cache_drop(e_[i].parent);
                    } catch (...) {
                    }
            forget(idx);
            throw;
        }
        // Markers: the leaves stay uncached until a read after the publishes.
        for (GAddr a : markers) t_.cache_->abort_io(a);
        // A held leaf the batch did not change goes back as it was; a changed
        // one stays held and `hold`'s end makes it unreadable and drops it
        // (its new image did not come back), before settle() logs it.
        for (size_t i : idx)
            if (e_[i].may_split && std::find(changed_.begin(), changed_.end(), e_[i].start) == changed_.end())
                hold->release(e_[i].start);
    }

    // For send(): the distinct start leaves of `idx` (their entries are in key
    // order, so the frames are taken left to right, as a merge takes them),
    // each held or marked; entries whose leaf could be neither (another
    // process is fetching it, the mapping table is full) or that start above
    // the leaf (a cached copy of it could exist) may not split.
    void guard_leaves(const std::vector<size_t>& idx, FrameHold& hold, std::vector<GAddr>& markers) {
        GAddr last = 0;
        bool last_ok = false;
        for (size_t i : idx) {
            Entry& e = e_[i];
            e.may_split = false;
            if (e.level != 0) continue;
            if (e.start != last) {
                last = e.start;
                // Never waits for a frame while holding others (try_hold):
                // two batches whose plans order leaves differently (a stale
                // cached copy) cannot deadlock; a leaf whose frame is busy
                // just may not split this round.
                const auto b = t_.cache_->try_begin_io(e.start);
                last_ok = b == cache::MappingTable::Begin::kOwner ||
                          (b == cache::MappingTable::Begin::kCached && hold.try_hold(e.start));
                if (b == cache::MappingTable::Begin::kOwner) markers.push_back(e.start);
            }
            e.may_split = last_ok;
        }
    }

    // Entry i's request (journal slot taken here, inside begin_entry()).
    void append_request(std::vector<uint8_t>& payload, uint32_t node, size_t i) {
        const Entry& e = e_[i];
        if constexpr (L::kSlotted) {
            const std::string& k = keys_[i];
            net::OffloadBytesHeader h{};
            h.start = gaddr_offset(e.start);
            h.tree_id = t_.tree_id_;
            h.node = static_cast<uint16_t>(node);
            h.kind = net::kOffloadInsert;
            h.start_level = static_cast<uint8_t>(e.level);
            std::string_view rec;
            if (e.journal) {
                h.journal = t_.journal_->take(node, reinterpret_cast<const uint8_t*>(k.data()), k.size(), lsns_[i]);
                rec = t_.journal_->record_bytes();
            }
            try {
                net::append_offload_bytes(payload, h, k.data(), k.size(), rec.data(), rec.size());
            } catch (const std::invalid_argument& ex) {
                // (storable() and the journal bound every entry: not reached)
                throw Error(ErrorCode::kInvalid, ex.what());
            }
        } else {
            net::OffloadRequest r{};
            r.start = gaddr_offset(e.start);
            r.tree_id = t_.tree_id_;
            r.node = static_cast<uint16_t>(node);
            r.kind = net::kOffloadInsert;
            r.start_level = static_cast<uint8_t>(e.level);
            std::memcpy(r.key, &keys_[i], sizeof r.key);
            if (e.journal) {
                r.journal = t_.journal_->take(node, keys_[i], lsns_[i]);
                std::memcpy(r.record, &t_.journal_->record(), sizeof r.record);
            }
            const uint8_t* q = reinterpret_cast<const uint8_t*>(&r);
            payload.insert(payload.end(), q, q + sizeof r);
        }
    }

    // `splits`: an OFFLOAD_(BYTES_)BATCH_SPLIT's replies, a tail after them for
    // each kOffloadSplit (src/README.md "Offloading", batched offloaded inserts).
    void take_replies(uint32_t node, const std::vector<size_t>& idx, const std::vector<uint8_t>& resp, bool splits) {
        size_t nsplit = 0;
        for (size_t j = 0; splits && j < idx.size() && (j + 1) * sizeof(net::OffloadReply) <= resp.size(); j++)
            nsplit += resp[j * sizeof(net::OffloadReply)] == net::kOffloadSplit;  // status: the first byte
        const size_t fixed = idx.size() * sizeof(net::OffloadReply) + nsplit * sizeof(SplitTail);
        net::OffloadBatchSplitImages imgs{0, 0};
        if (splits && resp.size() >= fixed + sizeof imgs) std::memcpy(&imgs, resp.data() + fixed, sizeof imgs);
        if (resp.size() != fixed + (splits ? sizeof imgs + imgs.count * (sizeof(GAddr) + kNodeSize) : 0) ||
            imgs.count > net::kMaxBatchSplitParentImages)
            throw Error(ErrorCode::kProtocol, std::string(kBatchName) + ": " + std::to_string(resp.size()) +
                                                  " bytes of replies for " + std::to_string(idx.size()) + " requests");
        const uint8_t* tails = resp.data() + idx.size() * sizeof(net::OffloadReply);
        for (size_t j = 0; j < idx.size(); j++) {
            net::OffloadReply rep;
            std::memcpy(&rep, resp.data() + j * sizeof rep, sizeof rep);
            Entry& e = e_[idx[j]];
            switch (rep.status) {
                case net::kOffloadDone:
                case net::kOffloadNoop:
                    if (gaddr_node(rep.leaf) != node || gaddr_is_swizzled(rep.leaf) || !rep.leaf)
                        throw Error(ErrorCode::kProtocol,
                                    std::string(kBatchName) + ": memory node named a leaf outside its own pool");
                    if (rep.status == net::kOffloadDone) {
                        changed_.push_back(rep.leaf);
                        Stats::add(stats().batched_inserts);
                    }
                    break;
                case net::kOffloadNeedsSmo:
                    // Nothing changed but the journal record: the leaf is full
                    // (one_round() splits it with the first of its entries).
                    e.full_leaf = rep.leaf ? rep.leaf : e.start;
                    break;
                case net::kOffloadSplit:
                    if (!splits) throw Error(ErrorCode::kProtocol, std::string(kBatchName) + ": split status");
                    take_split(node, e, rep.leaf, tails);
                    tails += sizeof(SplitTail);
                    break;
                case net::kOffloadRestart:
                    // The path left the node: find the leaf one-sided.
                    e.one_by_one = true;
                    e.may_offload = false;
                    break;
                default:
                    throw Error(ErrorCode::kProtocol, std::string(kBatchName) + ": unknown status from memory node");
            }
        }
        if (splits) take_parents(node, resp.data() + fixed + sizeof imgs, imgs.count);
    }

    // The parents that took downlinks: refreshed from their images where the
    // memory node sent one, else dropped with the changed leaves.
    void take_parents(uint32_t node, const uint8_t* at, uint32_t count) {
        std::vector<std::pair<GAddr, Node>> got(count);
        for (auto& [g, img] : got) {
            std::memcpy(&g, at, sizeof g);
            std::memcpy(static_cast<void*>(&img), at + sizeof g, kNodeSize);
            at += sizeof g + kNodeSize;
            if (gaddr_node(g) != node || gaddr_is_swizzled(g) || !g || img.tree_id != t_.tree_id_ ||
                img.level != 1 || !snapshot_valid(img) || is_slotted(img) != L::kSlotted)
                throw Error(ErrorCode::kProtocol, std::string(kBatchName) +
                                                      "_SPLIT: memory node returned an invalid parent image");
        }
        for (GAddr p : linked_) {
            auto it = std::find_if(got.begin(), got.end(), [p](const auto& x) { return x.first == p; });
            if (it == got.end()) {
                changed_.push_back(p);
            } else if (std::find_if(refreshed_.begin(), refreshed_.end(),
                                    [p](const auto& x) { return x.first == p; }) == refreshed_.end()) {
                refreshed_.push_back(*it);
            }
        }
        linked_.clear();
    }

    // A memory-node split inside the batch: the entry is in (leaf or sibling).
    // Leaf, sibling and parent go to the change log and out of the cache with
    // the changed leaves (settle()); a sibling the memory node could not link
    // waits for link_siblings().
    void take_split(uint32_t node, const Entry& e, GAddr leaf, const uint8_t* at) {
        SplitTail tail;
        std::memcpy(&tail, at, sizeof tail);
        auto own = [&](GAddr a) { return gaddr_node(a) == node && !gaddr_is_swizzled(a) && a != 0; };
        if (!own(leaf) || !own(tail.sibling) || (tail.parent && !own(tail.parent)))
            throw Error(ErrorCode::kProtocol,
                        std::string(kBatchName) + "_SPLIT: memory node named a node outside its own pool");
        Key sep;
        if constexpr (L::kSlotted) {
            if (tail.sep_len == 0 || tail.sep_len > sizeof tail.sep)
                throw Error(ErrorCode::kProtocol, "OFFLOAD_BYTES_BATCH_SPLIT: separator of " +
                                                      std::to_string(tail.sep_len) + " bytes");
            sep.assign(reinterpret_cast<const char*>(tail.sep), tail.sep_len);
        } else {
            std::memcpy(&sep, tail.sep, sizeof sep);
        }
        changed_.push_back(leaf);
        changed_.push_back(tail.sibling);
        // a cached leaf's new sibling holds half of its keys: as hot
        if (t_.rewarm_is_hot(leaf)) t_.rewarm_note_hot(tail.sibling);
        if (tail.parent) linked_.push_back(tail.parent);
        Stats::add(stats().batched_inserts);
        Stats::add(stats().memnode_splits);
        if (!tail.parent) unlinked_.push_back(Unlinked{std::move(sep), tail.sibling, e.parent});
    }

    // Step 3 of the memory nodes' splits that they left to us (parent full,
    // locked, moved, unknown or elsewhere), after settle() dropped the nodes
    // they changed: as split_leaf() would, through the level above.
    void link_siblings() {
        Deadline dl = t_.deadline();
        while (!unlinked_.empty()) {
            const Unlinked u = unlinked_.back();
            unlinked_.pop_back();
            Path path{};
            path[1] = u.parent;
            t_.insert_parent(1, u.sep, u.sibling, path, dl);
        }
    }

    // A batch whose answer is unknown may have changed any of its leaves.
    void forget(const std::vector<size_t>& idx) {
        try {
            for (size_t i : idx) {
                t_.forget_unknown_write(e_[i].start, e_[i].level);
                if (e_[i].level > 0) return;  // that dropped every cached leaf of the tree
            }
        } catch (...) {
        }
    }

    // DEX 6.2 without leaf images: the leaves the memory nodes changed go into
    // the change log once (standbys drop them), then out of this compute
    // server's cache -- an admission in progress is marked stale, its read may
    // predate the change -- before insert_batch() returns.
    // Parents a memory-node split linked a sibling into come with their images
    // (cache_update: a newer version replaces the cached copy, C6).
    void settle() {
        if (changed_.empty() && refreshed_.empty()) return;
        std::sort(changed_.begin(), changed_.end());
        changed_.erase(std::unique(changed_.begin(), changed_.end()), changed_.end());
        for (const auto& r : refreshed_)
            if (!std::binary_search(changed_.begin(), changed_.end(), r.first)) changed_.push_back(r.first);
        if (t_.opts_.log_changes) t_.opts_.log_changes(changed_.data(), changed_.size());
        for (const auto& [g, img] : refreshed_) {
            changed_.erase(std::find(changed_.begin(), changed_.end(), g));  // refreshed, not dropped
            try {
                t_.cache_update(g, img);
            } catch (...) {
                t_.cache_drop(g);
            }
        }
        refreshed_.clear();
        for (GAddr a : changed_) {
            try {
                t_.cache_drop(a);
                if (t_.rewarm_is_hot(a)) t_.rewarm_dropped_.insert(a);
            } catch (...) {
                try {
                    t_.forget_unknown_write(a, 1);  // could not drop it: drop every cached leaf
                } catch (...) {
                }
            }
        }
        changed_.clear();
    }

    void insert_alone(size_t i, bool may_offload) {
        Entry& e = e_[i];
        if (e.journal && t_.journal_) {
            t_.journal_->begin_entry();
            if (e.slot >= 0) t_.journal_->resume(e.slot_node, e.slot);
        }
        t_.insert_reserved(keys_[i], lsns_[i], e.journal, may_offload);
    }

    BTreeT& t_;
    const Key* keys_;
    const uint64_t* lsns_;
    std::vector<Entry> e_;
    uint64_t durable_;
    std::vector<GAddr> changed_;
    std::vector<GAddr> linked_;                       // parents that took downlinks (take_parents)
    std::vector<std::pair<GAddr, Node>> refreshed_;   // ... and their images, for settle()
    std::vector<Unlinked> unlinked_;
};

// ---- reading back what a multi-row statement dropped ----------------------
//
// A batch drops the cached leaves it changed (settle(): their new images do
// not come back), so a multi-row statement into a cached index -- INSERT ...
// SELECT, COPY, a batch UPDATE -- left every leaf it touched cold, and the
// reads after it paid a round trip per leaf. At the statement's end (the
// glue calls rewarm_batched() after its last flush, not per batch: a bulk
// load touches the same leaves batch after batch) the leaves that were
// cached before the statement changed them, and the siblings memory nodes
// split off those, are read back: one batched READ per memory node per 256
// leaves, each under its own I/O marker taken before the read and admitted
// as a descent's miss is (a change by another backend of this server
// meanwhile marks the marker stale and admit() refuses the image). Where
// fewer than kRewarmMinLeaves are on a node (a small multi-row VALUES) they
// stay dropped: the READ's round trip may never be repaid (their next insert
// is offloaded and admits them anyway, their next read fetches them).
// Best effort: a locked or torn image, or any failure, leaves the leaf
// uncached, as before.

template <class L>
void BTreeT<L>::rewarm_batched() {
    constexpr size_t kRewarmMinLeaves = 4;
    std::vector<GAddr> dropped(rewarm_dropped_.begin(), rewarm_dropped_.end());
    rewarm_dropped_.clear();
    rewarm_hot_.clear();
    if (!cache_ || dropped.empty()) return;
    std::sort(dropped.begin(), dropped.end());  // (each node's leaves in address order)
    std::map<uint32_t, std::vector<GAddr>> by_node;
    for (GAddr a : dropped) by_node[gaddr_node(a)].push_back(a);
    for (auto& [node, leaves] : by_node)
        if (leaves.size() >= kRewarmMinLeaves) rewarm_node(node, leaves);
}

template <class L>
void BTreeT<L>::rewarm_node(uint32_t node, const std::vector<GAddr>& leaves) {
    std::vector<Node> imgs(std::min<size_t>(leaves.size(), net::kMaxBatch));
    std::vector<RemoteOp> ops;
    std::vector<GAddr> marked;
    for (size_t from = 0; from < leaves.size(); from += net::kMaxBatch) {
        const size_t to = std::min(leaves.size(), from + net::kMaxBatch);
        marked.clear();
        for (size_t i = from; i < to; i++)
            if (cache_->try_begin_io(leaves[i]) == cache::MappingTable::Begin::kOwner) marked.push_back(leaves[i]);
        if (marked.empty()) continue;
        ops.assign(marked.size(), RemoteOp{});
        for (size_t i = 0; i < marked.size(); i++) {
            ops[i].kind = RemoteOp::kRead;
            ops[i].offset = gaddr_offset(marked[i]);
            ops[i].buf = &imgs[i];
            ops[i].len = kNodeSize;
        }
        try {
            mem_.batch(node, ops.data(), ops.size());
        } catch (...) {
            for (GAddr a : marked) cache_->abort_io(a);
            throw;
        }
        for (size_t i = 0; i < marked.size(); i++) {
            const Node& img = imgs[i];
            if (!lock_held(img.lock) && snapshot_valid(img) && valid_node(img, 0) && !img.is_deleted()) {
                if (cache_->admit(marked[i], img) != cache::kNoFrame) Stats::add(stats().batch_rewarms);
            } else {
                cache_->abort_io(marked[i]);
            }
        }
    }
}

template <class L>
size_t BTreeT<L>::insert_chunk(const Key* keys, const uint64_t* lsns, size_t n, uint64_t durable) {
    InsertBatch b(*this, keys, lsns, n, durable);
    return b.run();
}

template class BTreeT<FixedLayout>;
template class BTreeT<SlottedLayout>;

}  // namespace dex::tree
