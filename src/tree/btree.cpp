// The B-link tree's operations (src/README.md "Structure modifications"):
// descent, lookup, insert, delete and scans. The other jobs live beside it:
//   descend_cache.cpp  descent through the shared node cache
//   split_merge.cpp    splits (and new roots), merges, compact()
//   migration.cpp      moving a subtree to another memory node at a split
//   placement.cpp      which memory node a node goes to; allocating, freeing
//   writeback.cpp      write-back mode (dirty cached leaves)
//   offload_path.cpp   operations finished by a memory node's CPU (DEX 6)
//   cache_sync.cpp     keeping cached copies exact across remote writes
//   bulk_load.cpp      BulkLoader;  check.cpp  check() and info()
#include "tree/btree.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "cache/cache.h"
#include "common/stats.h"
#include "tree/btree_internal.h"
#include "tree/offload_policy.h"

namespace dex::tree {

using detail::get_u64;

template <class L>
BTreeT<L>::BTreeT(RemoteMemory& mem, uint32_t node_id, uint64_t ns, TreeOptions opts)
    : mem_(mem),
      node_id_(node_id),
      ns_(ns),
      tree_id_(tree_id_for(node_id, ns)),
      part_ns_(node_id + 1, 0),
      opts_(opts),
      io_(mem, node_id, opts),
      cache_(opts.cache),
      wb_(opts.write_back && opts.cache != nullptr) {
    part_ns_[node_id] = ns;
}

// Is this node possibly modified by another compute server (a process that
// does not share our CacheRegion)? There is no logical partitioning yet, so by
// default every node is: every modification takes the remote lock
// (src/README.md "Synchronization (remote)") and is written through. With DEX's
// logical partitioning (DEX 4), nodes below the partition level will belong to
// one compute server; this is the one place that answer goes.
//
// Write-back mode (TreeOptions::write_back, reloption write_back = on) is the
// operator's promise that no other compute server writes this index: then no
// node is shared, and leaf changes that need no structure modification stay
// in the cached frame (dirty) until written back. Inner nodes and SMOs still go
// through the remote locks (src/README.md "Write-back mode").
template <class L>
bool BTreeT<L>::node_is_shared(const Node&) const { return !wb_; }

// ---- the root word (memory-node RPCs) ----------------------------------------

template <class L>
GAddr BTreeT<L>::refresh_root() {
    std::vector<uint8_t> r = mem_.node(node_id_).rpc(net::kOpGetRoot, &ns_, 8);
    root_ = get_u64(r, "GET_ROOT");
    return root_;
}

template <class L>
bool BTreeT<L>::set_root(GAddr expected, GAddr desired) {
    uint64_t req[3] = {ns_, expected, desired};
    std::vector<uint8_t> r = mem_.node(node_id_).rpc(net::kOpSetRoot, req, sizeof req);
    uint64_t old = get_u64(r, "SET_ROOT");
    if (old == expected) {
        root_ = desired;
        return true;
    }
    root_ = old;
    return false;
}

template <class L>
bool BTreeT<L>::valid_node(const Node& n, int level) const {
    if (n.tree_id != tree_id_) return false;
    if (level >= 0 && n.level != level) return false;
    return L::layout_ok(n);
}

// ---- traversal -----------------------------------------------------------

// Remote reads only (no cache): read, validate, follow the B-link protocol
// (deleted nodes forward right, a key above the high fence moves right);
// anything unexpected restarts from the root.

template <class L>
GAddr BTreeT<L>::descend_remote(KeyRef k, int level, Node& out, Path* path, const Deadline& dl, bool lt) {
    int attempt = 0;
    for (;;) {
        GAddr a = root_ ? root_ : refresh_root();
        int expect = -1;
        while (a) {
            dl.check("descending by remote reads");
            if (io_.read(a, out, dl) != NodeIO::Read::kOk || !valid_node(out, expect)) break;
            if (out.is_deleted()) {  // merged away: `right` forwards to the survivor
                expect = out.level;
                a = out.right;
                continue;
            }
            if (left_of_low(out, k, lt)) break;  // landed right of the key: stale pointer
            if (!below_high(k, out, lt)) {       // B-link move right
                expect = out.level;
                a = out.right;
                continue;
            }
            if (out.level < level) {
                if (expect < 0) return kNullGAddr;  // root is below the requested level
                break;
            }
            if (out.level == level) return a;
            if (path) (*path)[out.level] = a;
            int ci = L::child_index(out, out.count, k, lt);
            if (ci < 0) break;
            a = L::child(out, ci);
            expect = out.level - 1;
        }
        Stats::add(stats().restarts);
        root_ = 0;
        dl.check("descending by remote reads");
        backoff(attempt++);
    }
}

template <class L>
LockedNode* BTreeT<L>::lock_covering(GAddr a, int level, KeyRef k, Locks& locks, const Deadline& dl,
                                     LockAssist* assist) {
    Node snap;
    int attempt = 0;
    // The caller's own remote read of `a`, validated like io_.read's: used
    // once, for the first attempt (a cached copy never comes here: it may be
    // older than the one second try_lock allows).
    const Node* fresh = assist ? assist->fresh : nullptr;
    uint64_t seen_lock = 0;  // the lock word last found held (the timeout names its owner)
    while (a) {
        if (dl.expired()) {
            const std::string what = "locking node " + hex_addr(a) +
                                     (lock_held(seen_lock) ? ", held by client " + std::to_string(lock_owner(seen_lock))
                                                           : std::string());
            dl.check(what.c_str());
        }
        auto t0 = std::chrono::steady_clock::now();
        NodeIO::Read rd = NodeIO::Read::kOk;
        if (fresh) {
            std::memcpy(static_cast<void*>(&snap), fresh, kNodeSize);
            t0 = assist->fresh_at;
        } else {
            rd = io_.read(a, snap, dl);
            if (opts_.offload)  // a write's remote read also prices one-sided work (DEX 6.1)
                opts_.offload->record_remote_read(detail::micros_since(t0));
        }
        const bool was_fresh = fresh != nullptr;
        fresh = nullptr;
        if (rd != NodeIO::Read::kOk || !valid_node(snap, level)) {
            refresh_next_ = true;  // the (cached) path led to a non-node: re-read it remotely
            return nullptr;
        }
        if (snap.is_deleted()) {
            a = snap.right;
            continue;
        }
        if (L::compare(L::low(snap), k) > 0) {
            refresh_next_ = true;  // landed right of the key: stale (cached) parent
            return nullptr;
        }
        if (!below_high(k, snap)) {
            a = snap.right;
            continue;
        }
        // Every change that reaches this point takes the remote lock and is
        // written through -- also in write-back mode (unshared nodes), whose
        // in-place leaf changes stay in the frame (wb_modify) and whose
        // structure modifications come here holding the leaf's frame.
        // The assist's ops go with the CAS only to their own memory node.
        const bool also = assist && assist->n_also && gaddr_node(a) == assist->also_node;
        bool sent = false;
        LockedNode* ln = locks.try_lock(a, snap, t0, also ? assist->also : nullptr, also ? assist->n_also : 0, &sent);
        if (assist) assist->also_done = sent;  // the last CAS's: with a node returned, the locking one
        if (ln) return ln;
        seen_lock = snap.lock;
        if (was_fresh) continue;  // changed since the descent read it: read it now
        Stats::add(stats().restarts);
        backoff(attempt++);
    }
    return nullptr;
}

template <class L>
bool BTreeT<L>::contains(KeyRef key) {
    Stats::add(stats().index_ops);
    Deadline dl = deadline();
    Node n;
    descend_leaf(key, net::kOffloadLeaf, n, nullptr, dl);
    return has_entry(n, L::lower_bound(n, key), key);
}

// ---- init ----------------------------------------------------------------

template <class L>
void BTreeT<L>::init_empty() {
    Stats::add(stats().index_ops);
    GAddr a = alloc_node(node_id_);
    Node n;
    L::init(n, tree_id_, 0);
    seal_node(n, fresh_version(a));
    log_changed(a);
    mem_.write(a, &n, static_cast<uint32_t>(used_bytes(n)));
    cache_update(a, n);
    GAddr old = refresh_root();
    while (!set_root(old, a)) old = root_;
}

// ---- insert ----------------------------------------------------------------

template <class L>
bool BTreeT<L>::insert(KeyRef key, uint64_t lsn, uint64_t durable, LeafFull* full) {
    bool through = false;
    const bool r = insert_unlogged(key, lsn, durable, full, &through);
    if (wb_ && !(full && full->leaf)) log_entry_change(true, through, key);
    return r;
}

// insert() without telling the entry change (write-back redo, below);
// *through: it reached remote memory (told through only if it made the
// change: an entry already there may be only in a dirty frame).
template <class L>
bool BTreeT<L>::insert_unlogged(KeyRef key, uint64_t lsn, uint64_t durable, LeafFull* full, bool* through) {
    if (!L::storable(key)) throw Error(ErrorCode::kInvalid, "cannot insert key " + L::str(key));
    Stats::add(stats().index_ops);
    // Before anything is changed: a journal slot on every memory node (may
    // throw NeedDurable), so that whichever leaf takes the entry can record it.
    // Write-back mode journals only what it writes through; its in-place
    // changes keep the LSN in their frame instead (wb_modify).
    if (full) *full = LeafFull{};
    const uint64_t in_place_before = in_place_changes_;
    const bool r = insert_reserved(key, lsn, journal_ != nullptr && journal_->reserve(lsn, durable), true, full);
    *through = r && in_place_changes_ == in_place_before;
    return r;
}

// A write-back tree's batch, one entry at a time, its entry changes told in
// one record per run of equal `through` (a bulk load: one per batch) instead
// of one per entry -- a WAL record per row was about 3% of a bulk load's
// backend CPU. Each is told after it was made, as insert() tells it, only
// later within the batch: the record still follows its row's heap record
// (no stray comes back at redo), the frame turned dirty before it (the
// flushed position stays below it), and nobody can delete the entry of a
// row this transaction is still inserting before it is told. An insert that
// throws is not told (as insert()); those before it are.
template <class L>
void BTreeT<L>::insert_each_logged(const Key* keys, const uint64_t* lsns, size_t n, uint64_t durable, size_t* done) {
    std::vector<Key> run;
    run.reserve(n);
    bool run_through = false;
    auto tell = [&] {
        log_entry_changes(true, run_through, run.data(), run.size());
        run.clear();
    };
    try {
        for (; *done < n; ++*done) {
            bool through = false;
            (void) insert_unlogged(keys[*done], lsns[*done], durable, nullptr, &through);
            if (!run.empty() && through != run_through) tell();
            run_through = through;
            run.push_back(keys[*done]);
        }
    } catch (...) {
        tell();  // (log_entries must not throw: TreeOptions)
        throw;
    }
    tell();
}

// Write-back redo (src/README.md "Write-back mode"): every entry change of a
// write-back tree is told to the compute server after it was made, whichever
// path made it, so that its log holds every change a crash may take from the
// dirty frames. Insert and delete are idempotent per entry, so replaying them
// in log order over any mix of written-back frames gives the final state.
template <class L>
void BTreeT<L>::log_entry_change(bool insert, bool through, KeyRef key) {
    if (!opts_.log_entries) return;
    const uint8_t* p;
    uint32_t len;
    if constexpr (L::kSlotted) {
        p = reinterpret_cast<const uint8_t*>(key.data());
        len = static_cast<uint32_t>(key.size());
    } else {
        p = reinterpret_cast<const uint8_t*>(&key);
        len = sizeof(Key);
    }
    opts_.log_entries(insert, through, &p, &len, 1);
}

template <class L>
void BTreeT<L>::log_entry_changes(bool insert, bool through, const Key* keys, size_t n) {
    if (!opts_.log_entries || n == 0) return;
    std::vector<const uint8_t*> ps(n);
    std::vector<uint32_t> lens(n);
    for (size_t i = 0; i < n; i++) {
        if constexpr (L::kSlotted) {
            ps[i] = reinterpret_cast<const uint8_t*>(keys[i].data());
            lens[i] = static_cast<uint32_t>(keys[i].size());
        } else {
            ps[i] = reinterpret_cast<const uint8_t*>(&keys[i]);
            lens[i] = sizeof(Key);
        }
    }
    opts_.log_entries(insert, through, ps.data(), lens.data(), n);
}

template <class L>
bool BTreeT<L>::insert_reserved(KeyRef key, uint64_t lsn, bool journal, bool may_offload, LeafFull* full) {
    IntentScope intent(*this, key, lsn, journal);
    Deadline dl = deadline();
    int attempt = 0;
    GAddr hint = 0;  // write-back mode: the leaf lock_covering moved right to
    SpareGuard spare(*this);
    for (;;) {
        Path path{};
        Node snap;
        // A memory node may do the whole insert (DEX 6) if the descent misses
        // the cache low enough; it answers "needs a split" and changes nothing
        // when the leaf is full.
        const bool offload = may_offload && !hint;
        // (when the descent's leaf image was read: for `fresh` below, which a
        // write-back tree never is -- no clock read per insert there)
        const auto descent_at = wb_ ? std::chrono::steady_clock::time_point{} : std::chrono::steady_clock::now();
        Descent d = descend_leaf(key, offload ? net::kOffloadInsert : 0, snap, &path, dl);
        if (d.offloaded != kNoOffload) return d.offloaded == net::kOffloadDone;
        uint8_t st;
        // A leaf seen full would only answer "needs a split" (having written
        // the journal record) or be split by its memory node: with `full`, go
        // one-sided and give up.
        const bool seen_full = full && !L::leaf_fits(snap, key);
        if (offload && !seen_full && offload_cached_write(net::kOffloadInsert, d, snap, key, dl, &st, &path))
            return st == net::kOffloadDone;
        GAddr a = hint ? hint : d.addr;
        hint = 0;
        WbGuard guard;
        if (wb_) {
            Key tmp;
            LeafFull at;
            int r = wb_modify(a, as_array(key, tmp), 1, true, nullptr, nullptr, full ? &at : nullptr,
                              d.cached && a == d.addr ? d.frame : cache::kNoFrame);
            if (r != 0) return r > 0;
            if (full && at.leaf) {  // bottom-up deletion first: nothing changed
                *full = at;
                Stats::add(stats().bottomup_passes);
                return false;
            }
            wb_acquire(a, guard, dl, true);  // frame locked (maybe dirty) or I/O marker held
            guard.splits = true;
            bool inserted = false;
            if (guard.uncovered) {  // its entries may not reach remote memory yet: split around them
                const int r2 = wb_split_dirty(a, guard, key, path, dl, spare.s, &inserted);
                if (r2 > 0) return inserted;
                if (r2 < 0) {
                    backoff(attempt++);
                    continue;
                }
                const uint64_t need = guard.uncovered;
                guard.release(nullptr);
                throw NeedDurable(need);  // (the old way: flush WAL, wait for the standbys, retry)
            }
            // A full cached leaf: its memory node splits it in one round trip.
            if (!full && wb_split_at_memnode(a, guard, key, path, dl, &inserted)) return inserted;
        }
        Locks locks(io_);
        LockAssist assist;
        const bool fresh = !wb_ && a == d.addr && !d.cached;
        if (fresh) prepare_leaf_lock(assist, spare.s, a, snap, descent_at, key, full == nullptr);
        // Write-back mode, the leaf's frame held: the frame is the newest
        // image (W2, W3) and remote memory is at its version or, after a
        // write-back that did not move it, unlocked at a newer one (see
        // write_back_nodes). Lock with the frame as the snapshot -- no read,
        // no write-back of a dirty frame first -- and publish the frame's
        // image with the change: its dirty changes go out with it.
        Node frame_img;
        const bool from_frame = wb_ && guard.frame != cache::kNoFrame;
        if (from_frame) {
            cache_->region().copy_unswizzled(guard.frame, frame_img);
            // (a full leaf: the split's node allocated now, its version read
            // in the lock's batch, as for a freshly read leaf)
            prepare_leaf_lock(assist, spare.s, a, frame_img, std::chrono::steady_clock::now(), key, full == nullptr);
        }
        LockedNode* ln = lock_covering(a, 0, key, locks, dl, fresh || from_frame ? &assist : nullptr);
        if (ln && from_frame && ln->addr == a) std::memcpy(static_cast<void*>(&ln->node), &frame_img, kNodeSize);
        if (assist.n_also && assist.also_done) spare.s.version = fresh_version_from(spare.s.w);
        if (!ln) {
            Stats::add(stats().restarts);
            backoff(attempt++);
            continue;
        }
        if (wb_ && ln->addr != a) {  // moved right: guard that leaf instead
            hint = ln->addr;
            locks.unlock(ln);
            continue;
        }
        Node& n = ln->node;
        size_t pos = L::lower_bound(n, key);
        if (has_entry(n, pos, key)) {
            // Already there (a journal recovery kept it for this very row, or
            // a retry): it is journaled all the same, so that a crash before
            // this row's WAL is durable cannot leave it unlisted.
            std::vector<RemoteOp> rec = journal_ops(ln->addr);
            if (!rec.empty()) mem_.batch(gaddr_node(ln->addr), rec.data(), rec.size());
            locks.unlock(ln);
            return false;
        }
        if (L::insert_entry(n, pos, key)) {
            locks.publish({ln}, journal_ops(ln->addr));
            if (wb_)
                guard.release(&n);
            else
                cache_update(ln->addr, n);  // write-through: remote first, then the cached copy
            return true;
        }
        // Bottom-up deletion: give up before the split, unchanged. Not if an
        // offloaded attempt ("needs a split") already wrote the journal
        // record: that insert has changed something and goes on.
        if (full && !wb_ && !(journal && journal_->any_slot_taken())) {
            full->leaf = ln->addr;
            full->version = n.body_version;  // locked at it: the image is the node
            Stats::add(stats().bottomup_passes);
            locks.unlock(ln);
            return false;
        }
        split_leaf(locks, ln, pos, key, path, dl, wb_ ? &guard : nullptr, &spare.s);
        return true;
    }
}

// The descent has just read the leaf remotely (a missed, uncached leaf: a
// bulk load's usual case, since batches drop the leaves they change): lock
// it from that image instead of reading it again, and if it is already full,
// allocate the split's new node now and read its previous life's version in
// the lock's batch -- a split then costs three round trips fewer
// (src/README.md "Structure modifications", round trips of a split).
template <class L>
void BTreeT<L>::prepare_leaf_lock(LockAssist& assist, SpareNode& spare, GAddr a, const Node& snap,
                                  std::chrono::steady_clock::time_point read_at, KeyRef key, bool may_split) {
    assist.fresh = &snap;
    assist.fresh_at = read_at;
    if (!may_split || L::leaf_fits(snap, key) || has_entry(snap, L::lower_bound(snap, key), key)) return;
    if (!spare.addr) {
        spare.addr = spare_or_alloc(gaddr_node(a));  // next to the leaf, as split_leaf() allocates
        spare.version = 0;
    }
    if (spare.version) return;
    spare.read = RemoteOp{RemoteOp::kRead, gaddr_offset(spare.addr), spare.w, sizeof spare.w, 0, 0, 0};
    assist.also = &spare.read;
    assist.n_also = 1;
    assist.also_node = gaddr_node(spare.addr);
}

template <class L>
void BTreeT<L>::log_changed(GAddr a) {
    if (opts_.log_changes) opts_.log_changes(&a, 1);
}

template <class L>
std::vector<RemoteOp> BTreeT<L>::journal_ops(GAddr a) {
    if (!intent_.journal) return {};
    if constexpr (L::kSlotted)  // (a journal of the other form refuses: JournalWriter::take_op)
        return {journal_->take_op(gaddr_node(a), reinterpret_cast<const uint8_t*>(intent_.key.data()),
                                  intent_.key.size(), intent_.lsn)};
    else
        return {journal_->take_op(gaddr_node(a), intent_.key, intent_.lsn)};
}

// ---- delete ----------------------------------------------------------------

template <class L>
uint64_t BTreeT<L>::remove(const Key* keys, size_t n) {
    if (!wb_) return remove_entries(keys, n);
    // Write-back: logged even when it fails part way (some deletes may be in
    // frames already); deleting an absent entry at replay changes nothing.
    const uint64_t in_place_before = in_place_changes_;
    try {
        const uint64_t d = remove_entries(keys, n);
        log_entry_changes(false, d == n && in_place_changes_ == in_place_before, keys, n);
        return d;
    } catch (...) {
        log_entry_changes(false, false, keys, n);
        throw;
    }
}

template <class L>
uint64_t BTreeT<L>::remove_entries(const Key* keys, size_t n) {
    Stats::add(stats().index_ops);
    uint64_t deleted = 0;
    size_t i = 0;
    int attempt = 0;
    GAddr hint = 0;
    while (i < n) {
        Deadline dl = deadline();  // bounds the waits of one leaf group, not of the whole batch
        Path path{};
        Node snap;
        // A single entry (an update's old version) may be deleted by a memory
        // node (DEX 6) unless that would empty the leaf (a merge).
        const bool single = n == 1 && !hint;
        Descent d = descend_leaf(keys[i], single ? net::kOffloadDelete : 0, snap, &path, dl);
        uint8_t st = d.offloaded;  // offload_cached_write() sets st only when it did the delete
        if (st == kNoOffload && single) offload_cached_write(net::kOffloadDelete, d, snap, keys[i], dl, &st);
        if (st != kNoOffload) {
            if (st == net::kOffloadDone) deleted++;
            i++;
            continue;
        }
        GAddr a = hint ? hint : d.addr;
        hint = 0;
        bool emptied = false;
        GAddr leaf = 0;
        {
            // Write-back mode: a cached leaf takes the deletes in place (a
            // leaf emptied there is merged later by compact(), i.e. VACUUM).
            WbGuard guard;
            if (wb_) {
                size_t used = 0;
                if (wb_modify(a, keys + i, n - i, false, &used, &deleted) > 0 && used > 0) {
                    i += used;
                    continue;
                }
                wb_acquire(a, guard, dl);
            }
            Locks locks(io_);
            LockedNode* ln = lock_covering(a, 0, keys[i], locks, dl);
            if (!ln) {
                Stats::add(stats().restarts);
                backoff(attempt++);
                continue;
            }
            if (wb_ && ln->addr != a) {
                hint = ln->addr;
                locks.unlock(ln);
                continue;
            }
            Node& nd = ln->node;
            size_t j = i;
            bool changed = false;
            while (j < n && covers(nd, keys[j], false)) {
                size_t pos = L::lower_bound(nd, keys[j]);
                if (has_entry(nd, pos, keys[j])) {
                    L::erase(nd, pos);
                    changed = true;
                    deleted++;
                }
                j++;
            }
            if (changed) {
                locks.publish({ln});
                if (wb_)
                    guard.release(&nd);
                else
                    cache_update(ln->addr, nd);
            } else
                locks.unlock(ln);
            emptied = changed && nd.count == 0;
            leaf = ln->addr;
            i = j;
        }
        for (int rounds = 0; emptied && leaf && rounds < 8; rounds++) leaf = try_merge(leaf, path, dl);
    }
    return deleted;
}

// ---- dead-entry hints -----------------------------------------------------------

template <class L>
bool BTreeT<L>::read_leaf(GAddr leaf, uint64_t version, std::vector<Key>& out, uint32_t frame,
                          uint64_t frame_version) {
    Stats::add(stats().index_ops);
    out.clear();
    if (wb_) return leaf != kNullGAddr && frame_version != 0 && wb_read_leaf(leaf, frame, frame_version, out);
    if (leaf == kNullGAddr || version == 0) return false;
    Node snap;
    if (!read_leaf_at(leaf, version, snap, deadline())) return false;
    out.reserve(snap.count);
    for (size_t i = 0; i < snap.count; i++) out.emplace_back(L::entry(snap, i));
    return true;
}

// The lock CAS from "unlocked at `version`" needs no image first: it
// succeeds only if the lock word still carries version's low 24 bits,
// unlocked. `seen_at` (when `version` was current) bounds the ABA exactly as
// try_lock's one-second rule bounds a read snapshot's: 2^24 publishes of one
// leaf cannot fit in a second. The image comes from a READ right after the
// CAS in the same batch, so it is the locked node itself. nullptr: not
// locked (age unknown or over the bound, changed, locked by someone, or the
// image not a live leaf at `version` -- then unlocked again); the caller
// takes the read-first way.
template <class L>
LockedNode* BTreeT<L>::lock_at_version(Locks& locks, GAddr leaf, uint64_t version,
                                       std::chrono::steady_clock::time_point seen_at) {
    if (seen_at == std::chrono::steady_clock::time_point{}) return nullptr;
    Node fake;
    std::memset(static_cast<void*>(&fake), 0, kNodeSize);
    fake.body_version = version;
    fake.lock = make_lock_word(version, 0, false);
    Node img;
    RemoteOp rd{RemoteOp::kRead, gaddr_offset(leaf), &img, static_cast<uint32_t>(kNodeSize), 0, 0, 0};
    LockedNode* ln = locks.try_lock(leaf, fake, seen_at, &rd, 1);
    if (!ln) return nullptr;
    if (!valid_node(img, 0) || img.is_deleted() || img.body_version != version) {
        locks.unlock(ln);  // (cannot happen while the lock word says `version`)
        return nullptr;
    }
    img.lock = ln->node.lock;  // the image shows our lock; keep what try_lock recorded
    std::memcpy(static_cast<void*>(&ln->node), &img, kNodeSize);
    return ln;
}

template <class L>
bool BTreeT<L>::read_leaf_at(GAddr leaf, uint64_t version, Node& out, const Deadline& dl) {
    return io_.read(leaf, out, dl) == NodeIO::Read::kOk && valid_node(out, 0) && !out.is_deleted() &&
           out.body_version == version;
}

template <class L>
bool BTreeT<L>::cached_leaf_copy(GAddr leaf, Node& img) const {
    if (!cache_) return false;
    cache::CacheRegion& R = cache_->region();
    const uint32_t f = R.table().lookup(leaf);
    if (f == cache::kNoFrame || f == cache::MappingTable::kIoInProgress) return false;
    cache::FrameHeader& h = R.header(f);
    const uint64_t v = h.begin_read();
    if (v == cache::FrameHeader::kRestart) return false;
    R.copy_unswizzled(f, img);
    return R.validate(f, v) && frame_holds_leaf(h, img, leaf);
}

template <class L>
uint64_t BTreeT<L>::remove_if_unchanged(GAddr leaf, uint64_t version, const Key* keys, size_t n, bool bottom_up,
                                        std::chrono::steady_clock::time_point seen_at, uint32_t frame,
                                        uint64_t frame_version, uint64_t hold_lsn, bool present_only) {
    Stats::add(stats().index_ops);
    if (n == 0) return 0;
    if (wb_ && leaf != kNullGAddr && frame_version != 0)
        return wb_kill(leaf, frame, frame_version, keys, n, bottom_up, hold_lsn, present_only);
    // A kill the extension deferred until the standbys replayed its horizon
    // (K9), whose leaf has usually changed since: the entries still in the
    // index go, wherever they are now.
    if (leaf != kNullGAddr && present_only && hold_lsn == 0) return remove_present(leaf, keys, n, bottom_up);
    // A removal that must wait for a logged record (K7) only a write-back
    // frame can hold back: remote memory would lose the entries at once.
    if (wb_ || leaf == kNullGAddr || version == 0 || hold_lsn != 0) {
        Stats::add(stats().kills_skipped, n);
        return 0;
    }
    return remove_at(leaf, version, keys, n, bottom_up, seen_at);
}

template <class L>
uint64_t BTreeT<L>::remove_at(GAddr leaf, uint64_t version, const Key* keys, size_t n, bool bottom_up,
                              std::chrono::steady_clock::time_point seen_at) {
    const bool present_only = version == 0;
    // One round trip where its memory node does it (OFFLOAD_KILL).
    if (const int64_t r = offload_kill(leaf, version, keys, n, bottom_up); r >= 0) return static_cast<uint64_t>(r);
    Deadline dl = deadline();
    int attempt = 0;
    for (;;) {
        dl.check("removing dead entries");
        Locks locks(io_);
        LockedNode* ln = attempt == 0 && !present_only ? lock_at_version(locks, leaf, version, seen_at) : nullptr;
        if (!ln) {
            Node snap;
            auto t0 = std::chrono::steady_clock::now();
            const bool ok = present_only ? io_.read(leaf, snap, dl) == NodeIO::Read::kOk && valid_node(snap, 0) &&
                                               !snap.is_deleted()
                                         : read_leaf_at(leaf, version, snap, dl);
            if (!ok) {
                Stats::add(stats().kills_skipped, n);
                return 0;
            }
            ln = locks.try_lock(leaf, snap, t0);
        }
        if (!ln) {  // locked meanwhile, or changed: the next read tells which
            Stats::add(stats().restarts);
            backoff(attempt++);
            continue;
        }
        // Locked at `version` (or, present_only, at the version just read):
        // the node is exactly the image judged.
        Node& nd = ln->node;
        uint64_t removed = 0;
        for (size_t i = 0; i < n; i++) {
            size_t pos = L::lower_bound(nd, keys[i]);
            if (has_entry(nd, pos, keys[i])) {
                L::erase(nd, pos);
                removed++;
            }
        }
        if (removed == 0) {
            locks.unlock(ln);
        } else {
            locks.publish({ln});
            cache_update(ln->addr, nd);  // write-through: remote first, then the cached copy
        }
        Stats::add(bottom_up ? stats().bottomup_removed : stats().kills, removed);
        if (removed < n) Stats::add(stats().kills_skipped, n - removed);
        return removed;
    }
}

// ---- scans -------------------------------------------------------------------

template <class L>
BTreeT<L>::Scan::Scan(BTreeT& t, KeyRef lo, KeyRef hi, bool backward)
    : t_(t), lo_(lo), hi_(hi), backward_(backward), cursor_(backward ? hi : lo) {
    if (L::compare(lo, hi) > 0) done_ = true;
}

template <class L>
bool BTreeT<L>::leaf_nearly_full(const Node& n) {
    // (Every scan batch of a write-back tree asks: arithmetic, no copy.)
    if (n.count == 0) return false;
    if constexpr (L::kSlotted) {
        // each such entry takes its slot and its bytes (what leaf_fits checks)
        const slotted::SNode& s = L::s(n);
        return slotted::free_bytes(s) < kNearlyFullRoom * slotted::entry_cost(s, L::entry(n, n.count - 1).size());
    } else {
        return n.count + kNearlyFullRoom > kLeafCapacity;
    }
}

template <class L>
bool BTreeT<L>::Scan::next(std::vector<Key>& out) {
    out.clear();
    if (done_) return false;
    Stats::add(stats().index_ops);
    Deadline dl = t_.deadline();
    Node n;
    while (!done_) {
        // (before the read: the image was current at some moment after this)
        const auto seen_at = std::chrono::steady_clock::now();
        if (!backward_) {
            bool ok = false;
            GAddr at = next_addr_;
            if (next_addr_) {
                ok = t_.read_node(next_addr_, n, dl, &leaf_frame_, &leaf_frame_version_) &&
                     t_.valid_node(n, 0) && !n.is_deleted() && L::equal(L::low(n), cursor_);
                next_addr_ = 0;
            }
            if (!ok) {
                Descent d = t_.descend_leaf(cursor_, net::kOffloadLeaf, n, nullptr, dl);
                at = d.addr;
                leaf_frame_ = d.frame;
                leaf_frame_version_ = d.frame_version;
            }
            leaf_ = at;
            leaf_version_ = n.body_version;
            leaf_seen_at_ = seen_at;
            leaf_nearly_full_ = t_.write_back() && BTreeT::leaf_nearly_full(n);
            for (size_t i = L::lower_bound(n, cursor_); i < n.count; i++) {
                if (L::compare(L::entry(n, i), hi_) > 0) break;
                out.emplace_back(L::entry(n, i));
            }
            if (below_high(hi_, n)) {
                done_ = true;
            } else {
                cursor_ = Key(L::high(n));
                next_addr_ = n.right;
            }
        } else {
            Descent d = t_.descend(cursor_, 0, n, nullptr, dl, exclusive_);
            leaf_ = d.addr;
            leaf_frame_ = d.frame;
            leaf_frame_version_ = d.frame_version;
            leaf_version_ = n.body_version;
            leaf_seen_at_ = seen_at;
            leaf_nearly_full_ = t_.write_back() && BTreeT::leaf_nearly_full(n);
            for (size_t i = n.count; i-- > 0;) {
                KeyRef k = L::entry(n, i);
                int c = L::compare(k, cursor_);
                if (exclusive_ ? c >= 0 : c > 0) continue;
                if (L::compare(k, lo_) < 0) break;
                out.emplace_back(k);
            }
            if (L::low_is_neg_inf(n) || L::compare(L::low(n), lo_) <= 0) {
                done_ = true;
            } else {
                cursor_ = Key(L::low(n));
                exclusive_ = true;
            }
        }
        if (!out.empty()) return true;
    }
    return false;
}

template class BTreeT<FixedLayout>;
template class BTreeT<SlottedLayout>;

}  // namespace dex::tree
