// Batched inserts into a tree of slotted nodes (byte-string keys; src/README.md
// "Offloading", batched offloaded inserts): insert_batch.cpp's rounds for the
// fixed layout, with the entries and their byte-form journal records sent as
// one OFFLOAD_BYTES_BATCH per memory node (net/protocol.h). Same rules:
// journal slots before any remote write, entries the memory node cannot
// insert without a split go one at a time (the smallest per full leaf splits
// it, the rest wait for the next round), changed leaves leave the cache and
// go to the change log, a lost answer drops what the batch may have changed.
// Kept apart from the fixed InsertBatch (whose requests are fixed-size
// OffloadRequests) so that either can change without the other.
#include <algorithm>
#include <cstring>
#include <map>

#include "cache/cache.h"
#include "common/stats.h"
#include "tree/btree.h"
#include "tree/offload_policy.h"

namespace dex::tree {

template <>
class BTreeT<SlottedLayout>::InsertBatch {
public:
    InsertBatch(BTreeT& t, const std::string* keys, const uint64_t* lsns, size_t n, uint64_t durable)
        : t_(t), keys_(keys), lsns_(lsns), e_(n), durable_(durable) {}

    size_t run() {
        const size_t p = fit_journal();
        e_.resize(p);
        Stats::add(stats().index_ops, p);
        std::vector<size_t> todo(p);
        for (size_t i = 0; i < p; i++) todo[i] = i;
        // Each round inserts at least one entry per full leaf (alone), so
        // rounds end; the bound guards against a node that keeps answering
        // "needs a split" for a leaf the compute side split.
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
        int64_t slot = -1;  // journal slot taken on slot_node by a batched attempt
        uint32_t slot_node = 0;
        bool one_by_one = false;  // insert_reserved() after this round's batches
        bool may_offload = true;  // ... and may that offload (no batched attempt said "needs a split")
        GAddr full_leaf = 0;      // this round: the leaf that answered "needs a split"
    };

    std::vector<size_t> one_round(const std::vector<size_t>& todo) {
        plan(todo);
        std::map<uint32_t, std::vector<size_t>> by_node;
        for (size_t i : todo)
            if (e_[i].start) by_node[gaddr_node(e_[i].start)].push_back(i);
        try {
            for (auto& [node, idx] : by_node) send(node, idx);
        } catch (...) {
            settle();  // what the nodes answered before the failure changed leaves
            throw;
        }
        settle();
        std::vector<size_t> next;
        std::vector<GAddr> split;  // full leaves whose first waiting entry went alone
        for (size_t i : todo) {    // todo is in key order: the first per leaf is its smallest
            Entry& e = e_[i];
            if (e.one_by_one) {
                insert_alone(i, e.may_offload);
            } else if (e.full_leaf) {
                if (std::find(split.begin(), split.end(), e.full_leaf) == split.end()) {
                    split.push_back(e.full_leaf);
                    insert_alone(i, false);  // splits the leaf (or fits: a shorter entry)
                } else {
                    next.push_back(i);
                }
            }
        }
        return next;
    }

    bool journaled(size_t i) const { return lsns_[i] != 0 && lsns_[i] > durable_; }

    // The longest prefix whose journaled entries all get a slot; none fits:
    // NeedDurable before anything changed (insert_batch.cpp's fit_journal).
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
            uint64_t need = newest;
            for (size_t i = 0; i < n; i++) need = std::max(need, lsns_[i]);
            throw NeedDurable(need);
        }
        return p;
    }

    // Per entry: where the memory node starts (kFindOffloadStart), as for the
    // fixed layout: the first uncached node at or below the placement level,
    // or the cached leaf.
    void plan(const std::vector<size_t>& todo) {
        Deadline dl = t_.deadline();
        Node snap;
        for (size_t i : todo) {
            Descent d = t_.descend_leaf(keys_[i], kFindOffloadStart, snap, nullptr, dl);
            Entry& e = e_[i];
            e.full_leaf = 0;
            e.one_by_one = false;
            e.start = d.addr;
            e.level = d.level;
            if (!e.start || gaddr_is_swizzled(e.start) || e.level < 0 || e.level > t_.place_level_) {
                e.start = 0;
                e.one_by_one = true;
            }
        }
    }

    void send(uint32_t node, const std::vector<size_t>& idx) {
        Transport& tr = t_.mem_.node(node);
        if (!tr.offload_bytes_batch_allowed()) {
            // Refuses offloaded writes, or predates OFFLOAD_BYTES_BATCH: the
            // single path decides for each entry (OFFLOAD_BYTES at a cached leaf).
            for (size_t i : idx) e_[i].one_by_one = true;
            return;
        }
        std::vector<uint8_t> payload;
        payload.reserve(idx.size() * 256);
        for (size_t i : idx) {
            Entry& e = e_[i];
            const std::string& k = keys_[i];
            net::OffloadBytesHeader h{};
            h.start = gaddr_offset(e.start);
            h.tree_id = t_.tree_id_;
            h.node = static_cast<uint16_t>(node);
            h.kind = net::kOffloadInsert;
            h.start_level = static_cast<uint8_t>(e.level);
            std::string_view rec;
            if (e.journal) {  // the memory node writes it before it changes the leaf
                t_.journal_->begin_entry();
                // a later round's attempt on the same node rewrites the same slot
                if (e.slot >= 0 && e.slot_node == node) t_.journal_->resume(node, e.slot);
                h.journal = t_.journal_->take(node, reinterpret_cast<const uint8_t*>(k.data()), k.size(), lsns_[i]);
                rec = t_.journal_->record_bytes();
                e.slot = t_.journal_->slot_taken(node);
                e.slot_node = node;
            }
            try {
                net::append_offload_bytes(payload, h, k.data(), k.size(), rec.data(), rec.size());
            } catch (const std::invalid_argument& ex) {
                // (storable() and the journal bound every entry: not reached)
                throw Error(ErrorCode::kInvalid, ex.what());
            }
        }
        try {
            std::vector<uint8_t> resp;
            {
                // Writes the memory node may already have applied: a query
                // cancel waits for the answer (the op timeout bounds it).
                InterruptHold hold;
                resp = tr.rpc(net::kOpOffloadBytesBatch, payload.data(), static_cast<uint32_t>(payload.size()));
            }
            Stats::add(stats().offloads, idx.size());
            take_replies(node, idx, resp);
        } catch (...) {
            forget(idx);
            throw;
        }
    }

    void take_replies(uint32_t node, const std::vector<size_t>& idx, const std::vector<uint8_t>& resp) {
        if (resp.size() != idx.size() * sizeof(net::OffloadReply))
            throw Error(ErrorCode::kProtocol, "OFFLOAD_BYTES_BATCH: " + std::to_string(resp.size()) +
                                                  " bytes of replies for " + std::to_string(idx.size()) + " requests");
        for (size_t j = 0; j < idx.size(); j++) {
            net::OffloadReply rep;
            std::memcpy(&rep, resp.data() + j * sizeof rep, sizeof rep);
            Entry& e = e_[idx[j]];
            switch (rep.status) {
                case net::kOffloadDone:
                case net::kOffloadNoop:
                    if (gaddr_node(rep.leaf) != node || gaddr_is_swizzled(rep.leaf) || !rep.leaf)
                        throw Error(ErrorCode::kProtocol,
                                    "OFFLOAD_BYTES_BATCH: memory node named a leaf outside its own pool");
                    if (rep.status == net::kOffloadDone) {
                        changed_.push_back(rep.leaf);
                        Stats::add(stats().batched_inserts);
                    }
                    break;
                case net::kOffloadNeedsSmo:
                    // Nothing changed but the journal record: the leaf is full.
                    e.full_leaf = rep.leaf ? rep.leaf : e.start;
                    break;
                case net::kOffloadRestart:
                    e.one_by_one = true;
                    e.may_offload = false;
                    break;
                default:
                    throw Error(ErrorCode::kProtocol, "OFFLOAD_BYTES_BATCH: unknown status from memory node");
            }
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

    // Changed leaves: the change log once, then out of this server's cache.
    void settle() {
        if (changed_.empty()) return;
        std::sort(changed_.begin(), changed_.end());
        changed_.erase(std::unique(changed_.begin(), changed_.end()), changed_.end());
        if (t_.opts_.log_changes) t_.opts_.log_changes(changed_.data(), changed_.size());
        for (GAddr a : changed_) {
            try {
                t_.cache_drop(a);
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
    const std::string* keys_;
    const uint64_t* lsns_;
    std::vector<Entry> e_;
    uint64_t durable_;
    std::vector<GAddr> changed_;
};

template <>
size_t BTreeT<SlottedLayout>::insert_chunk(const Key* keys, const uint64_t* lsns, size_t n, uint64_t durable) {
    InsertBatch b(*this, keys, lsns, n, durable);
    return b.run();
}

}  // namespace dex::tree
