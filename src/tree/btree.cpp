#include "tree/btree.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <unordered_map>
#include <unordered_set>

#include "cache/cache.h"
#include "common/stats.h"
#include "tree/offload_policy.h"
#include <chrono>
#include <thread>

namespace dex::tree {

namespace {

constexpr uint64_t kBulkExtentBytes = 256 * 1024;

void init_node(Node& n, uint32_t tree_id, uint8_t level) {
    std::memset(static_cast<void*>(&n), 0, sizeof(Node));
    n.tree_id = tree_id;
    n.level = level;
    n.low = neg_inf_key();
    n.high = pos_inf_key();
}

uint64_t get_u64(const std::vector<uint8_t>& r, const char* what) {
    if (r.size() < 8) throw Error(ErrorCode::kProtocol, std::string(what) + ": short response from memory node");
    uint64_t v;
    std::memcpy(&v, r.data(), 8);
    return v;
}

// Index of the child covering k among the first `count` entries: largest i
// with sep_i <= k (lt: sep_i < k); -1 if none. On a cached frame this reads
// racily; the caller validates the frame version afterwards.
int child_index_n(const Node& n, size_t count, const EntryKey& k, bool lt) {
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = compare_keys(n.inner[mid].sep, k);
        bool go_right = lt ? c < 0 : c <= 0;
        if (go_right)
            lo = mid + 1;
        else
            hi = mid;
    }
    return static_cast<int>(lo) - 1;
}
int child_index(const Node& n, const EntryKey& k, bool lt) { return child_index_n(n, n.count, k, lt); }

size_t leaf_lower_bound(const Node& n, const EntryKey& k) {
    return std::lower_bound(n.leaf, n.leaf + n.count, k) - n.leaf;
}

}  // namespace

BTree::BTree(RemoteMemory& mem, uint32_t node_id, uint64_t ns, TreeOptions opts)
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

void BTree::set_placement(std::vector<uint64_t> ns_by_node, int level) {
    if (ns_by_node.size() <= node_id_) ns_by_node.resize(node_id_ + 1, 0);
    if (ns_by_node[node_id_] != ns_)
        throw Error(ErrorCode::kInvalid, "placement: the home memory node's namespace must be the tree's");
    if (level < 1 || level > kMaxPlacementLevel)
        throw Error(ErrorCode::kInvalid, "placement level " + std::to_string(level) + " is out of range 1.." +
                                             std::to_string(kMaxPlacementLevel));
    part_ns_ = std::move(ns_by_node);
    place_level_ = level;
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
bool BTree::node_is_shared(const Node&) const { return !wb_; }

// The cache's WriteBack callback (set by the C API) and the write-back slow
// path use this. It runs under the frame's lock, which is safe because nobody
// waits for a frame lock while holding a remote lock (cache_update runs only
// after the publish released them; the write-back slow path takes the frame
// lock before the remote one).
uint64_t write_back_node(NodeIO& io, GAddr a, const Node& img, const Deadline& dl) {
    Node snap;
    int attempt = 0;
    for (;;) {
        dl.check("writing back a dirty cached node");
        if (io.read(a, snap, dl) != NodeIO::Read::kOk)
            throw Error(ErrorCode::kCorrupt, "write-back: node " + hex_addr(a) + " is not a valid node image");
        if (snap.tree_id != img.tree_id || snap.level != img.level)
            throw Error(ErrorCode::kCorrupt, "write-back: node " + hex_addr(a) + " belongs to another tree now");
        Locks locks(io);
        LockedNode* ln = locks.try_lock(a, snap);
        if (!ln) {
            backoff(attempt++);
            continue;
        }
        std::memcpy(static_cast<void*>(&ln->node), &img, kNodeSize);
        locks.publish({ln});
        Stats::add(stats().write_backs);
        return ln->version + 1;
    }
}

// ---- write-back mode ---------------------------------------------------------

int BTree::wb_modify(GAddr a, const EntryKey* keys, size_t n, bool insert, size_t* used, uint64_t* deleted) {
    cache::CacheRegion& R = cache_->region();
    uint32_t f = R.table().lookup(a);
    if (f == cache::kNoFrame || f == cache::MappingTable::kIoInProgress) return 0;
    cache::FrameHeader& h = R.header(f);
    h.lock();  // we hold no other frame lock
    if (h.gaddr.load(std::memory_order_relaxed) != a || h.get_state() == cache::FrameState::kFree) {
        h.unlock_unchanged();
        return 0;
    }
    Node* nd = R.node(f);
    if (nd->tree_id != tree_id_ || nd->level != 0 || nd->is_deleted() || nd->count > kLeafCapacity ||
        compare_keys(nd->low, keys[0]) > 0 || !key_below_high(keys[0], *nd)) {
        h.unlock_unchanged();
        return 0;
    }
    if (insert) {
        size_t pos = leaf_lower_bound(*nd, keys[0]);
        if (pos < nd->count && nd->leaf[pos] == keys[0]) {
            h.unlock_unchanged();
            return -1;
        }
        if (nd->count >= kLeafCapacity) {  // needs a split: write through
            h.unlock_unchanged();
            return 0;
        }
    }
    if (!h.dirty.load(std::memory_order_relaxed)) {
        bool ok;
        try {
            ok = opts_.register_dirty ? opts_.register_dirty() : false;
        } catch (...) {
            h.unlock_unchanged();
            throw;
        }
        if (!ok) {
            h.unlock_unchanged();
            return 0;
        }
    }
    if (insert) {
        size_t pos = leaf_lower_bound(*nd, keys[0]);
        std::memmove(&nd->leaf[pos + 1], &nd->leaf[pos], (nd->count - pos) * sizeof(EntryKey));
        nd->leaf[pos] = keys[0];
        nd->count++;
        if (used) *used = 1;
        // Not written back before the row's heap WAL is durable (no stray
        // entry can reach remote memory; src/README.md "Crash survival").
        if (intent_.lsn > h.lsn.load(std::memory_order_relaxed)) h.lsn.store(intent_.lsn, std::memory_order_relaxed);
    } else {
        size_t j = 0;
        while (j < n && compare_keys(nd->low, keys[j]) <= 0 && key_below_high(keys[j], *nd)) {
            size_t pos = leaf_lower_bound(*nd, keys[j]);
            if (pos < nd->count && nd->leaf[pos] == keys[j]) {
                std::memmove(&nd->leaf[pos], &nd->leaf[pos + 1], (nd->count - pos - 1) * sizeof(EntryKey));
                nd->count--;
                if (deleted) (*deleted)++;
            }
            j++;
        }
        if (used) *used = j;
    }
    R.mark_dirty(f);
    h.unlock();
    Stats::add(stats().dirty_updates);
    return 1;
}

void BTree::wb_acquire(GAddr a, WbGuard& g, const Deadline& dl) {
    cache::CacheRegion& R = cache_->region();
    int attempt = 0;
    for (;;) {
        dl.check("waiting for a cached leaf in write-back mode");
        uint32_t f = R.table().lookup(a);
        if (f == cache::MappingTable::kIoInProgress) {
            backoff(attempt++);
            continue;
        }
        if (f == cache::kNoFrame) {
            auto b = cache_->try_begin_io(a);
            if (b == cache::MappingTable::Begin::kOwner) {
                g.t = this;
                g.a = a;
                g.marker = true;
                return;
            }
            if (b != cache::MappingTable::Begin::kCached) backoff(attempt++);
            continue;
        }
        cache::FrameHeader& h = R.header(f);
        h.lock();  // we hold no other frame lock
        if (h.gaddr.load(std::memory_order_relaxed) != a || h.get_state() == cache::FrameState::kFree) {
            h.unlock_unchanged();
            continue;
        }
        if (h.dirty.load(std::memory_order_relaxed)) {
            uint64_t need = h.lsn.load(std::memory_order_relaxed);
            if (need > durable_lsn()) {  // its entries' heap WAL first (the caller flushes and retries)
                h.unlock_unchanged();
                throw NeedDurable(need);
            }
        }
        g.t = this;
        g.a = a;
        g.frame = f;  // from here on the guard unlocks it
        if (h.dirty.load(std::memory_order_relaxed)) {
            Node img;
            R.copy_unswizzled(f, img);
            write_back_node(io_, a, img, dl);
            h.dirty.store(0, std::memory_order_relaxed);
            h.lsn.store(0, std::memory_order_relaxed);
        }
        return;
    }
}

BTree::WbGuard::~WbGuard() {
    BTree* owner = t;
    GAddr addr = a;
    bool had_frame = t && frame != cache::kNoFrame;
    release(nullptr);
    if (had_frame && std::uncaught_exceptions() > 0) {
        try {
            owner->cache_drop(addr);
        } catch (...) {
        }
    }
}

void BTree::WbGuard::release(const Node* published) {
    if (!t) return;
    cache::CacheRegion& R = t->cache_->region();
    if (frame != cache::kNoFrame) {
        cache::FrameHeader& h = R.header(frame);
        if (published) {
            std::memcpy(static_cast<void*>(R.node(frame)), published, kNodeSize);
            h.unlock();
        } else {
            h.unlock_unchanged();
        }
    } else if (marker) {
        t->cache_->abort_io(a);
    }
    t = nullptr;
    frame = cache::kNoFrame;
    marker = false;
}

// ---- memory-node RPCs ------------------------------------------------------

GAddr BTree::refresh_root() {
    std::vector<uint8_t> r = mem_.node(node_id_).rpc(net::kOpGetRoot, &ns_, 8);
    root_ = get_u64(r, "GET_ROOT");
    return root_;
}

bool BTree::set_root(GAddr expected, GAddr desired) {
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

std::vector<std::pair<int64_t, uint32_t>> BTree::nodes_by_free(uint32_t must_answer) {
    std::vector<std::pair<int64_t, uint32_t>> v;
    for (uint32_t i = 0; i < part_ns_.size(); i++) {
        if (!part_ns_[i]) continue;
        int64_t free_bytes = -1;
        try {
            std::vector<uint8_t> r = mem_.node(i).rpc(net::kOpStats, nullptr, 0);
            if (r.size() >= sizeof(net::NodeStats)) {
                net::NodeStats st;
                std::memcpy(&st, r.data(), sizeof st);
                free_bytes = static_cast<int64_t>(st.pool_bytes - std::min(st.pool_bytes, st.used_bytes));
            }
        } catch (const Error& e) {
            // Another node that does not answer is just not a candidate; the
            // node whose connection holds the caller's locks must answer.
            if (e.code() == ErrorCode::kInterrupted || e.code() == ErrorCode::kLostMemory || i == must_answer) throw;
        }
        v.emplace_back(free_bytes, i);
    }
    std::stable_sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.first > b.first; });
    return v;
}

Error BTree::out_of_space(const std::string& what) {
    std::string sizes;
    for (uint32_t i = 0; i < part_ns_.size(); i++) {
        if (!part_ns_[i]) continue;
        if (!sizes.empty()) sizes += ", ";
        std::string addr;
        try {
            Transport& t = mem_.node(i);
            addr = t.address();
            std::vector<uint8_t> r = t.rpc(net::kOpStats, nullptr, 0);
            net::NodeStats st{};
            if (r.size() >= sizeof st) std::memcpy(&st, r.data(), sizeof st);
            sizes += addr + " " + std::to_string(st.used_bytes) + " of " + std::to_string(st.pool_bytes) + " bytes used";
        } catch (const std::exception&) {
            sizes += (addr.empty() ? "memory node " + std::to_string(i) : addr) + " unreachable";
        }
    }
    return Error(ErrorCode::kOutOfSpace, "memory nodes out of space (" + what + "; " + sizes + ")",
                 "Give the memory nodes more --memory, add memory nodes to dex.memnodes and REINDEX, or drop "
                 "unused dex indexes.");
}

GAddr BTree::alloc_node(uint32_t node) {
    if (node >= part_ns_.size() || !part_ns_[node])
        throw Error(ErrorCode::kCorrupt, "memory node " + std::to_string(node) + " holds no namespace of tree " +
                                             std::to_string(tree_id_));
    uint64_t req[2] = {part_ns_[node], kNodeSize};
    std::vector<uint8_t> r;
    try {
        r = mem_.node(node).rpc(net::kOpAlloc, req, sizeof req);
    } catch (const Error& e) {
        if (e.code() != ErrorCode::kOutOfSpace) throw;
        throw out_of_space("the subtree's memory node " + mem_.node(node).address() + " is full");
    }
    return make_gaddr(node, get_u64(r, "ALLOC"));
}

GAddr BTree::alloc_anywhere() {
    try {
        return alloc_node(node_id_);
    } catch (const Error& e) {
        if (e.code() != ErrorCode::kOutOfSpace) throw;
    }
    for (auto& [free_bytes, i] : nodes_by_free()) {
        if (i == node_id_ || free_bytes < static_cast<int64_t>(kNodeSize)) continue;
        try {
            return alloc_node(i);
        } catch (const Error& e) {
            if (e.code() != ErrorCode::kOutOfSpace) throw;
        }
    }
    throw out_of_space("no memory node has room for a new node");
}

void BTree::free_node(GAddr a) {
    uint32_t node = gaddr_node(a);
    if (node >= part_ns_.size() || !part_ns_[node]) return;  // not ours: leave it (check() reports strays)
    uint64_t req[3] = {part_ns_[node], gaddr_offset(a), kNodeSize};
    mem_.node(node).rpc(net::kOpFree, req, sizeof req);
}

// A reused block keeps versions increasing, so a CAS prepared from a read of the
// block's previous life can never succeed on its new life (no ABA).
uint64_t BTree::fresh_version(GAddr a) {
    uint64_t w[3] = {0, 0, 0};  // lock word, checksum, body_version of the previous life (or any bytes)
    mem_.read(a, w, sizeof w);
    // Above the previous life's lock version (a CAS prepared from it cannot
    // succeed) and, if it was a node, above its full body version (a cached
    // copy of it can never look newer).
    uint64_t v = std::max(lock_version(w[0]), w[2]) + 1;
    return v < (1ull << 62) ? v : lock_version(w[0]) + 1;
}

bool BTree::valid_node(const Node& n, int level) const {
    if (n.tree_id != tree_id_) return false;
    if (level >= 0 && n.level != level) return false;
    return n.count <= capacity_of(n.level);
}

// ---- traversal -----------------------------------------------------------

GAddr BTree::descend(const EntryKey& k, int level, Node& out, Path* path, const Deadline& dl, bool lt) {
    return cache_ ? descend_cached(k, level, out, path, dl, lt) : descend_remote(k, level, out, path, dl, lt);
}

GAddr BTree::descend_remote(const EntryKey& k, int level, Node& out, Path* path, const Deadline& dl, bool lt) {
    int attempt = 0;
    for (;;) {
        GAddr a = root_ ? root_ : refresh_root();
        int expect = -1;
        while (a) {
            dl.check();
            if (io_.read(a, out, dl) != NodeIO::Read::kOk || !valid_node(out, expect)) break;
            if (out.is_deleted()) {  // merged away: `right` forwards to the survivor
                expect = out.level;
                a = out.right;
                continue;
            }
            int lc = compare_keys(out.low, k);
            if (lt ? lc >= 0 : lc > 0) break;  // landed right of the key: stale pointer
            bool below = lt ? (out.high.cls == kPosInf || compare_keys(k, out.high) <= 0) : key_below_high(k, out);
            if (!below) {  // B-link move right
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
            int ci = child_index(out, k, lt);
            if (ci < 0) break;
            a = out.inner[ci].child;
            expect = out.level - 1;
        }
        Stats::add(stats().restarts);
        root_ = 0;
        dl.check();
        backoff(attempt++);
    }
}

// ---- traversal through the node cache ------------------------------------------
//
// Per node on the way down we hold at most an optimistic read (frame f,
// version v) of the current node and remember the parent's (pf, pv, slot) so a
// freshly found child can be swizzled into it. No frame lock is ever held
// across steps; swizzle_optimistic() takes the parent's lock and then (briefly)
// the child's, which is the permitted order.

GAddr BTree::descend_cached(const EntryKey& k, int level, Node& out, Path* path, const Deadline& dl, bool lt) {
    using cache::FrameHeader;
    using cache::MappingTable;
    using cache::kNoFrame;
    cache::CacheRegion& R = cache_->region();
    const uint32_t nframes = R.frame_count();
    Node tmp;
    int attempt = 0;
    bool refresh = refresh_next_;
    // cache_leaves = false (inner nodes only): leaves are neither admitted nor
    // read from frames admitted earlier under another policy.
    // Write-back mode: the cached leaf may be the only up-to-date copy, so
    // leaves are always read from frames, and always admitted.
    const bool leaves = wb_ || cache_->policy().cache_leaves;
    for (;;) {
        if (refresh) refresh_root();
        GAddr a = root_ ? root_ : refresh_root();
        int expect = -1;
        uint32_t pf = kNoFrame;  // cached parent we came from (kNoFrame: uncached, or a right move)
        uint64_t pv = 0;
        int pslot = -1;
        bool stale = false;
        while (a) {
            dl.check();
            uint32_t f = kNoFrame;  // frame the current node is read from (kNoFrame: `tmp`)
            uint64_t v = 0;
            GAddr g = a;            // the node's remote address
            const Node* np = nullptr;
            if (gaddr_is_swizzled(a)) {
                // Hot path: a local pointer. Lock coupling: read the child's
                // version, then re-validate the parent, which proves the
                // pointer was still swizzled (so the frame still held the child).
                f = cache::swizzled_frame(a);
                if (f >= nframes || pf == kNoFrame) break;
                v = R.header(f).begin_read();
                g = R.header(f).gaddr.load(std::memory_order_acquire);
                if (v == FrameHeader::kRestart || !R.validate(pf, pv) || !R.validate(f, v)) break;
                if ((refresh && !wb_) || (expect == 0 && !leaves)) {
                    f = kNoFrame;  // re-read it below like an unswizzled pointer
                } else {
                    Stats::add(stats().cache_hits);
                    np = R.node(f);
                }
            }
            if (!np) {
                uint32_t lf;
                // Write-back mode: frames are coherent (one compute server, and a
                // dirty leaf is the newest copy): never replaced by a remote read.
                if (refresh && !wb_) {  // replace whatever copy we have by the remote node
                    cache_drop(g);
                    Stats::add(stats().cache_misses);
                    lf = kNoFrame;
                } else if (expect == 0 && !leaves) {
                    lf = kNoFrame;  // inner-only policy: leaves are always read remotely
                } else {
                    lf = R.lookup(g);  // counts the hit / miss
                }
                if (lf == MappingTable::kIoInProgress) break;  // another process fetches it: restart
                if (lf != kNoFrame) {
                    if (R.header(lf).get_state() == cache::FrameState::kCooling && !R.touch(lf, g)) break;
                    v = R.begin_read(lf, g);
                    if (v == FrameHeader::kRestart) break;
                    f = lf;
                    np = R.node(f);
                    if (pf != kNoFrame && R.swizzle_optimistic(pf, pv, static_cast<uint16_t>(pslot), f)) pf = kNoFrame;
                } else {
                    // DEX 6: a miss at a subtree root at or below the placement
                    // level; the memory node may finish the operation. For a
                    // read, a miss at the leaf itself saves nothing (and the
                    // leaf would not be admitted): offloaded only when forced
                    // on. A write done one-sided still re-reads, locks and
                    // publishes the leaf, so its leaf misses count too.
                    const bool write = offload_kind_ == net::kOffloadInsert || offload_kind_ == net::kOffloadDelete;
                    if (offload_kind_ && opts_.offload && level == 0 && !lt && !wb_ && !refresh &&
                        (expect >= 1 || (expect == 0 && (write || opts_.offload->mode() == OffloadMode::kOn))) &&
                        expect <= place_level_ && (!write || mem_.node(gaddr_node(g)).offload_writes_allowed()) &&
                        // auto: while the cache still has room, a fetched node
                        // costs no eviction and serves later hits (DEX's cache
                        // factor is the cost of provisioning a frame): fetch.
                        !(opts_.offload->mode() == OffloadMode::kAuto && cache_->has_room()) &&
                        opts_.offload->should_offload(expect + 1, write ? OffloadPolicy::kWriteRoundTrips : 0)) {
                        auto b = cache_->try_begin_io(g);
                        if (b == MappingTable::Begin::kIoInProgress || b == MappingTable::Begin::kCached) break;
                        const bool owner = b == MappingTable::Begin::kOwner;  // marker: nobody fetches g meanwhile
                        const bool pinned =
                            pf != kNoFrame && R.pin(pf, R.header(pf).gaddr.load(std::memory_order_acquire));
                        auto release = [&] {
                            if (pinned) R.unpin(pf);
                            if (owner) cache_->abort_io(g);
                        };
                        uint8_t st;
                        GAddr leaf = 0;
                        try {
                            st = offload_rpc(offload_kind_, g, expect, k, &out, &leaf);
                        } catch (...) {
                            release();
                            throw;
                        }
                        release();
                        if (st == net::kOffloadDone && !write) {
                            refresh_next_ = false;
                            return leaf;
                        }
                        if (write && (st == net::kOffloadDone || st == net::kOffloadNoop)) {
                            // DEX 6.2: the leaf changed under any cached copy;
                            // invalidated only now that our own marker is gone.
                            if (st == net::kOffloadDone) cache_refresh_changed(leaf, out, dl);
                            offload_result_ = st;
                            refresh_next_ = false;
                            return leaf;
                        }
                        // otherwise (needs a split / merge, or the path left
                        // the node) continue with one-sided reads
                    }
                    uint8_t lvl = static_cast<uint8_t>(expect >= 0 ? expect : 1);  // the root: as an inner node
                    bool owner = false;
                    if ((wb_ && expect == 0) || cache_->should_admit(lvl)) {
                        auto b = cache_->try_begin_io(g);
                        if (b == MappingTable::Begin::kIoInProgress || b == MappingTable::Begin::kCached) break;
                        owner = b == MappingTable::Begin::kOwner;  // kFull: proceed uncached
                    }
                    // The marker is in place before this read: a writer publishing
                    // `g` after our read waits for the marker and then updates the
                    // frame (cache_update), so we cannot cache an outdated image.
                    // Zero copy: the owner reads straight into the frame it will
                    // admit (kNoFrame: cache exhausted, read into tmp as before).
                    uint32_t zf = owner ? cache_->allocate_frame() : kNoFrame;
                    Node& dst = zf != kNoFrame ? *R.node(zf) : tmp;
                    auto drop_zf = [&] {
                        if (zf != kNoFrame) cache_->release_frame(zf);
                        zf = kNoFrame;
                    };
                    NodeIO::Read rd;
                    auto t0 = std::chrono::steady_clock::now();
                    try {
                        rd = io_.read(g, dst, dl);
                        if (opts_.offload)
                            opts_.offload->record_remote_read(
                                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                                    .count());
                    } catch (...) {
                        drop_zf();
                        if (owner) cache_->abort_io(g);
                        throw;
                    }
                    if (zf != kNoFrame) std::memcpy(static_cast<void*>(&tmp), &dst, kNodeSize);
                    if (rd != NodeIO::Read::kOk) {
                        drop_zf();
                        if (owner) cache_->abort_io(g);
                        break;
                    }
                    if (owner) {
                        if (!valid_node(tmp, expect) || tmp.is_deleted()) {
                            drop_zf();
                            cache_->abort_io(g);
                        } else {
                            uint32_t nf = zf != kNoFrame ? cache_->admit_filled(zf, g) : cache_->admit(g, tmp);
                            if (nf != kNoFrame && pf != kNoFrame)
                                R.swizzle_optimistic(pf, pv, static_cast<uint16_t>(pslot), nf);
                        }
                    }
                    np = &tmp;
                    f = kNoFrame;
                }
            }
            auto ok = [&] { return f == kNoFrame || R.validate(f, v); };
            Node hdr;
            std::memcpy(static_cast<void*>(&hdr), np, kNodeHeaderBytes);
            if (!ok()) break;
            // Fences are checked for every node, cached or not: a cached copy may
            // be stale w.r.t. another compute server, or name freed memory.
            if (!valid_node(hdr, expect)) {
                stale = true;
                break;
            }
            if (hdr.is_deleted()) {  // merged away: `right` forwards to the survivor
                expect = hdr.level;
                a = hdr.right;
                pf = kNoFrame;
                continue;
            }
            int lc = compare_keys(hdr.low, k);
            if (lt ? lc >= 0 : lc > 0) {
                stale = true;
                break;
            }
            bool below = lt ? (hdr.high.cls == kPosInf || compare_keys(k, hdr.high) <= 0) : key_below_high(k, hdr);
            if (!below) {  // B-link move right (right links are never swizzled)
                expect = hdr.level;
                a = hdr.right;
                pf = kNoFrame;
                continue;
            }
            if (hdr.level < level) {
                if (expect < 0) return kNullGAddr;
                stale = true;
                break;
            }
            if (hdr.level == level) {
                if (f == kNoFrame) {
                    std::memcpy(static_cast<void*>(&out), np, kNodeSize);
                } else {
                    R.copy_unswizzled(f, out);
                    if (!ok()) break;
                }
                found_cached_ = f != kNoFrame;
                refresh_next_ = false;
                return g;
            }
            if (path) (*path)[hdr.level] = g;
            int ci = child_index_n(*np, hdr.count, k, lt);
            GAddr c = ci < 0 ? kNullGAddr
                             : (f == kNoFrame ? np->inner[ci].child : cache::CacheRegion::load_child(np, ci));
            if (!ok()) break;
            if (ci < 0 || c == kNullGAddr) {
                stale = true;
                break;
            }
            pf = f;
            pv = v;
            pslot = ci;
            a = c;
            expect = hdr.level - 1;
        }
        Stats::add(stats().restarts);
        if (stale) refresh = refresh_next_ = true;
        root_ = 0;
        dl.check();
        backoff(attempt++);
    }
}

bool BTree::read_node(GAddr a, Node& out, const Deadline& dl) {
    if (cache_ && (wb_ || cache_->policy().cache_leaves)) {  // (only used for leaves)
        cache::CacheRegion& R = cache_->region();
        uint32_t f = R.lookup(a);
        if (f != cache::kNoFrame && f != cache::MappingTable::kIoInProgress &&
            (R.header(f).get_state() != cache::FrameState::kCooling || R.touch(f, a))) {
            uint64_t v = R.begin_read(f, a);
            if (v != cache::FrameHeader::kRestart) {
                R.copy_unswizzled(f, out);
                if (R.validate(f, v)) return true;
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

LockedNode* BTree::lock_covering(GAddr a, int level, const EntryKey& k, Locks& locks, const Deadline& dl) {
    Node snap;
    int attempt = 0;
    while (a) {
        dl.check();
        auto t0 = std::chrono::steady_clock::now();
        NodeIO::Read rd = io_.read(a, snap, dl);
        if (opts_.offload)  // a write's remote read also prices one-sided work (DEX 6.1)
            opts_.offload->record_remote_read(
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        if (rd != NodeIO::Read::kOk || !valid_node(snap, level)) {
            refresh_next_ = true;  // the (cached) path led to a non-node: re-read it remotely
            return nullptr;
        }
        if (snap.is_deleted()) {
            a = snap.right;
            continue;
        }
        if (compare_keys(snap.low, k) > 0) {
            refresh_next_ = true;  // landed right of the key: stale (cached) parent
            return nullptr;
        }
        if (!key_below_high(k, snap)) {
            a = snap.right;
            continue;
        }
        // Every change that reaches this point takes the remote lock and is
        // written through -- also in write-back mode (unshared nodes), whose
        // in-place leaf changes stay in the frame (wb_modify) and whose
        // structure modifications come here holding the leaf's frame.
        if (LockedNode* ln = locks.try_lock(a, snap, t0)) return ln;
        Stats::add(stats().restarts);
        backoff(attempt++);
    }
    return nullptr;
}

bool BTree::contains(const EntryKey& key) {
    Stats::add(stats().index_ops);
    Deadline dl = deadline();
    Node n;
    {
        OffloadScope o(*this, net::kOffloadLeaf);
        descend(key, 0, n, nullptr, dl);
    }
    size_t pos = leaf_lower_bound(n, key);
    return pos < n.count && n.leaf[pos] == key;
}

// ---- init ----------------------------------------------------------------

void BTree::init_empty() {
    Stats::add(stats().index_ops);
    GAddr a = alloc_node(node_id_);
    Node n;
    init_node(n, tree_id_, 0);
    seal_node(n, fresh_version(a));
    log_changed(a);
    mem_.write(a, &n, static_cast<uint32_t>(used_bytes(n)));
    cache_update(a, n);
    GAddr old = refresh_root();
    while (!set_root(old, a)) old = root_;
}

// ---- insert ----------------------------------------------------------------

bool BTree::insert(const EntryKey& key, uint64_t lsn, uint64_t durable) {
    if (key.cls != kValue && key.cls != kNull)
        throw Error(ErrorCode::kInvalid, "cannot insert a key of class " + std::to_string(key.cls));
    Stats::add(stats().index_ops);
    // Before anything is changed: a journal slot on every memory node (may
    // throw NeedDurable), so that whichever leaf takes the entry can record it.
    // Write-back mode journals only what it writes through; its in-place
    // changes keep the LSN in their frame instead (wb_modify).
    IntentScope intent(*this, key, lsn, journal_ != nullptr && journal_->reserve(lsn, durable));
    Deadline dl = deadline();
    int attempt = 0;
    GAddr hint = 0;  // write-back mode: the leaf lock_covering moved right to
    for (;;) {
        Path path{};
        Node snap;
        GAddr a;
        {
            // A memory node may do the whole insert (DEX 6) if the descent
            // misses the cache low enough; it answers "needs a split" and
            // changes nothing when the leaf is full.
            OffloadScope o(*this, hint ? 0 : net::kOffloadInsert);
            a = descend(key, 0, snap, &path, dl);
            if (offload_result_ != kNoOffload) return offload_result_ == net::kOffloadDone;
            uint8_t st;
            if (!hint && offload_cached_write(net::kOffloadInsert, a, snap, key, dl, &st))
                return st == net::kOffloadDone;
        }
        if (hint) a = hint;
        hint = 0;
        WbGuard guard;
        if (wb_) {
            int r = wb_modify(a, &key, 1, true, nullptr, nullptr);
            if (r != 0) return r > 0;
            wb_acquire(a, guard, dl);  // frame locked (clean) or I/O marker held
        }
        Locks locks(io_);
        LockedNode* ln = lock_covering(a, 0, key, locks, dl);
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
        size_t pos = leaf_lower_bound(n, key);
        if (pos < n.count && n.leaf[pos] == key) {
            // Already there (a journal recovery kept it for this very row, or
            // a retry): it is journaled all the same, so that a crash before
            // this row's WAL is durable cannot leave it unlisted.
            std::vector<RemoteOp> rec = journal_ops(ln->addr);
            if (!rec.empty()) mem_.batch(gaddr_node(ln->addr), rec.data(), rec.size());
            locks.unlock(ln);
            return false;
        }
        if (n.count < kLeafCapacity) {
            std::memmove(&n.leaf[pos + 1], &n.leaf[pos], (n.count - pos) * sizeof(EntryKey));
            n.leaf[pos] = key;
            n.count++;
            locks.publish({ln}, journal_ops(ln->addr));
            if (wb_)
                guard.release(&n);
            else
                cache_update(ln->addr, n);  // write-through: remote first, then the cached copy
            return true;
        }
        split_leaf(locks, ln, pos, key, path, dl, wb_ ? &guard : nullptr);
        return true;
    }
}

void BTree::log_changed(GAddr a) {
    if (opts_.log_changes) opts_.log_changes(&a, 1);
}

std::vector<RemoteOp> BTree::journal_ops(GAddr a) {
    if (!intent_.journal) return {};
    return {journal_->take_op(gaddr_node(a), intent_.key, intent_.lsn)};
}

void BTree::split_leaf(Locks& locks, LockedNode* ln, size_t pos, const EntryKey& key, Path& path,
                       const Deadline& dl, WbGuard* guard) {
    Node& n = ln->node;
    EntryKey all[kLeafCapacity + 1];
    std::memcpy(all, n.leaf, pos * sizeof(EntryKey));
    all[pos] = key;
    std::memcpy(all + pos + 1, n.leaf + pos, (n.count - pos) * sizeof(EntryKey));
    const size_t total = n.count + 1, mid = total / 2;

    // The new sibling lives next to the leaf it splits from: a subtree rooted
    // at the placement level stays on one memory node. Allocated before
    // anything is published, so running out of space changes nothing.
    GAddr na = alloc_node(gaddr_node(ln->addr));
    Node r;
    init_node(r, tree_id_, 0);
    r.count = static_cast<uint16_t>(total - mid);
    r.right = n.right;
    r.low = all[mid];
    r.high = n.high;
    std::memcpy(r.leaf, all + mid, r.count * sizeof(EntryKey));
    seal_node(r, fresh_version(na));

    n.count = static_cast<uint16_t>(mid);
    std::memcpy(n.leaf, all, mid * sizeof(EntryKey));
    n.high = all[mid];
    n.right = na;
    EntryKey sep = all[mid];
    // Step 1 (new sibling) and step 2 (publish + unlock) in one ordered batch,
    // after the journal record of the key being inserted (if it needs one).
    // The upper half leaves ln: its cached copy is held from before the
    // publish until it shows the lower half (write-back mode: the guard holds it).
    std::vector<RemoteOp> before = journal_ops(ln->addr);
    before.push_back(write_node_op(na, r));
    FrameHold hold(*this);
    hold.hold(ln->addr, guard ? guard->frame : cache::kNoFrame);
    locks.publish({ln}, before, {na});
    test_point("split:published");
    if (guard)
        guard->release(&n);  // write-back mode: we hold the frame (or marker) of ln
    else
        hold.install(ln->addr, n);
    cache_update(na, r);  // only matters if a copy of na's previous life is still cached
    // Step 3.
    insert_parent(1, sep, na, path, dl);
}

void BTree::insert_parent(int level, const EntryKey& sep, GAddr child, Path& path, const Deadline& dl) {
    GAddr hint = level < static_cast<int>(path.size()) ? path[level] : 0;
    int attempt = 0;
    for (;;) {
        dl.check();
        if (!hint) {
            GAddr r = refresh_root();
            Node rn;
            if (!r || io_.read(r, rn, dl) != NodeIO::Read::kOk || !valid_node(rn, -1) || rn.is_deleted()) {
                Stats::add(stats().restarts);
                backoff(attempt++);
                continue;
            }
            if (rn.level < level) {
                if (rn.level != level - 1 || rn.low.cls != kNegInf) {
                    Stats::add(stats().restarts);
                    backoff(attempt++);
                    continue;
                }
                // The level above does not exist yet: install a new root over the
                // leftmost node (the old root) and `child`. Any node in between
                // that lacks a downlink is reachable through right links.
                // A new root at or below the placement level belongs to the
                // subtree of the old root; above it, it may go anywhere.
                GAddr na = level > place_level_ ? alloc_anywhere() : alloc_node(gaddr_node(r));
                Node nr;
                init_node(nr, tree_id_, static_cast<uint8_t>(level));
                nr.count = 2;
                nr.inner[0] = InnerEntry{neg_inf_key(), r};
                nr.inner[1] = InnerEntry{sep, child};
                seal_node(nr, fresh_version(na));
                log_changed(na);
                mem_.write(na, &nr, static_cast<uint32_t>(used_bytes(nr)));
                cache_update(na, nr);
                if (set_root(r, na)) return;
                free_node(na);
                continue;
            }
            Node snap;
            hint = descend(sep, level, snap, nullptr, dl);
            if (!hint) continue;
        }
        Locks locks(io_);
        LockedNode* ln = lock_covering(hint, level, sep, locks, dl);
        if (!ln) {
            hint = 0;
            Stats::add(stats().restarts);
            backoff(attempt++);
            continue;
        }
        // A subtree migration (migrate_split) may have moved `child` since it
        // was split off: it is then a deleted node forwarding to its copy. We
        // hold the parent now, so it cannot move any more; link the copy.
        // (A locked child is not a migrated one: deleted nodes are never locked.)
        for (int hops = 0; hops < 4; hops++) {
            Node cn;
            if (io_.read(child, cn, dl, false) != NodeIO::Read::kOk || !valid_node(cn, level - 1) ||
                !cn.is_deleted() || !cn.right)
                break;
            Node fw;
            if (io_.read(cn.right, fw, dl, false) != NodeIO::Read::kOk || !valid_node(fw, level - 1) ||
                !(fw.low == sep))
                break;
            child = cn.right;
        }
        Node& n = ln->node;
        size_t pos = static_cast<size_t>(child_index(n, sep, false) + 1);
        if (pos > 0 && n.inner[pos - 1].sep == sep) {  // already present
            locks.unlock(ln);
            return;
        }
        if (n.count < kInnerCapacity) {
            std::memmove(&n.inner[pos + 1], &n.inner[pos], (n.count - pos) * sizeof(InnerEntry));
            n.inner[pos] = InnerEntry{sep, child};
            n.count++;
            locks.publish({ln});
            cache_update(ln->addr, n);
            return;
        }
        InnerEntry all[kInnerCapacity + 1];
        std::memcpy(all, n.inner, pos * sizeof(InnerEntry));
        all[pos] = InnerEntry{sep, child};
        std::memcpy(all + pos + 1, n.inner + pos, (n.count - pos) * sizeof(InnerEntry));
        const size_t total = n.count + 1, mid = total / 2;
        if (level == place_level_ && migrate_split(locks, ln, all, total, mid, path, dl)) return;
        // Same memory node as the splitting node: at or below the placement
        // level the children that move to `na` are on it (one subtree per node).
        // Above it, a full memory node may be skipped.
        GAddr na;
        if (level > place_level_) {
            try {
                na = alloc_node(gaddr_node(ln->addr));
            } catch (const Error& e) {
                if (e.code() != ErrorCode::kOutOfSpace) throw;
                na = alloc_anywhere();
            }
        } else {
            na = alloc_node(gaddr_node(ln->addr));
        }
        Node r;
        init_node(r, tree_id_, static_cast<uint8_t>(level));
        r.count = static_cast<uint16_t>(total - mid);
        r.right = n.right;
        r.low = all[mid].sep;
        r.high = n.high;
        std::memcpy(r.inner, all + mid, r.count * sizeof(InnerEntry));
        seal_node(r, fresh_version(na));
        n.count = static_cast<uint16_t>(mid);
        std::memcpy(n.inner, all, mid * sizeof(InnerEntry));
        n.high = all[mid].sep;
        n.right = na;
        EntryKey up = all[mid].sep;
        FrameHold hold(*this);  // entries move to na: no cached image of the whole node after the publish
        if (gaddr_node(na) == gaddr_node(ln->addr)) {
            hold.hold(ln->addr);
            locks.publish({ln}, {write_node_op(na, r)}, {na});
        } else {  // step 1 on another memory node: complete it before step 2
            log_changed(na);
            mem_.write(na, &r, static_cast<uint32_t>(used_bytes(r)));
            hold.hold(ln->addr);
            locks.publish({ln});
        }
        test_point("inner-split:published");
        hold.install(ln->addr, n);  // unswizzles its children: some moved to na
        cache_update(na, r);
        insert_parent(level + 1, up, na, path, dl);
        return;
    }
}

// Free-space difference (bytes) above which a split at the placement level
// moves its right half to the emptier memory node.
constexpr int64_t kMigrateMarginBytes = 1 << 20;
constexpr size_t kMigrateMaxNodes = 8192;

bool BTree::migrate_split(Locks& locks, LockedNode* ln, const InnerEntry* all, size_t total, size_t mid, Path& path,
                          const Deadline& dl) {
    if (wb_ || mid == 0 || mid >= total) return false;  // write-back: dirty frames may be newer than remote
    size_t nparts = 0;
    for (uint64_t x : part_ns_) nparts += x != 0;
    if (nparts < 2) return false;
    const uint32_t here = gaddr_node(ln->addr);
    auto byfree = nodes_by_free(here);  // we hold ln's lock through `here`'s connection
    int64_t here_free = -1;
    for (auto& [f, i] : byfree)
        if (i == here) here_free = f;
    if (byfree.empty() || byfree[0].second == here || byfree[0].first < here_free + kMigrateMarginBytes) return false;
    const uint32_t target = byfree[0].second;
    const int level = ln->node.level;
    const EntryKey lo = all[mid].sep, hi = ln->node.high;

    // Lock, level by level, the chain of nodes the right half covers ([lo, hi))
    // and the node left of it (its right link changes). try_lock only: we hold
    // the parent, so we must not wait for a child (lock order).
    std::vector<LockedNode*> held;      // everything locked here (released on abort)
    std::vector<LockedNode*> moved;     // nodes to copy
    std::vector<LockedNode*> lefts;     // node left of the moved chain, per level
    auto abort = [&] {
        for (LockedNode* x : held) locks.unlock(x);
        return false;
    };
    GAddr first = all[mid].child, left_start = all[mid - 1].child;
    Node snap;
    for (int k = level - 1; k >= 0; k--) {
        // the left neighbour: from the left half's last child, move right to `first`
        GAddr a = left_start;
        LockedNode* left = nullptr;
        for (int hops = 0; a && hops < 16; hops++) {
            if (io_.read(a, snap, dl, false) != NodeIO::Read::kOk || !valid_node(snap, k) || snap.is_deleted())
                return abort();
            if (snap.right == first) {
                left = locks.try_lock(a, snap);
                break;
            }
            a = snap.right;
        }
        if (!left || gaddr_node(left->addr) != here) return abort();
        held.push_back(left);
        lefts.push_back(left);
        GAddr next_first = 0, next_left = 0;
        a = first;
        for (;;) {
            if (moved.size() >= kMigrateMaxNodes) return abort();
            if (io_.read(a, snap, dl, false) != NodeIO::Read::kOk || !valid_node(snap, k) || snap.is_deleted() ||
                gaddr_node(a) != here)
                return abort();
            LockedNode* m = locks.try_lock(a, snap);
            if (!m) return abort();
            held.push_back(m);
            moved.push_back(m);
            if (!next_first && k > 0) next_first = m->node.inner[0].child;
            if (hi.cls == kPosInf ? m->node.right == 0 : !(compare_keys(m->node.high, hi) < 0)) break;
            a = m->node.right;
            if (!a) return abort();
        }
        if (k > 0) {
            next_left = left->node.inner[left->node.count - 1].child;
            first = next_first;
            left_start = next_left;
        }
    }
    // Allocate the copies and the new level-L sibling on the target node.
    std::unordered_map<GAddr, GAddr> to;
    std::vector<GAddr> fresh;
    try {
        for (LockedNode* m : moved) {
            GAddr c = alloc_node(target);
            fresh.push_back(c);
            to[m->addr] = c;
        }
        fresh.push_back(alloc_node(target));
    } catch (const Error& e) {
        if (e.code() != ErrorCode::kOutOfSpace) throw;
        for (GAddr c : fresh) free_node(c);
        return abort();
    }
    const GAddr na = fresh.back();
    auto map = [&](GAddr a) {
        auto it = to.find(a);
        return it == to.end() ? a : it->second;
    };
    std::vector<Node> copies(moved.size());
    std::vector<RemoteOp> ops;
    for (size_t i = 0; i < moved.size(); i++) {
        Node& c = copies[i];
        std::memcpy(static_cast<void*>(&c), &moved[i]->node, kNodeSize);
        if (!c.is_leaf())
            for (size_t j = 0; j < c.count; j++) c.inner[j].child = map(c.inner[j].child);
        c.right = map(c.right);
        seal_node(c, fresh_version(fresh[i]));
        ops.push_back(write_node_op(fresh[i], c));
    }
    Node r;
    init_node(r, tree_id_, static_cast<uint8_t>(level));
    r.count = static_cast<uint16_t>(total - mid);
    r.right = ln->node.right;
    r.low = lo;
    r.high = hi;
    for (size_t i = mid; i < total; i++) r.inner[i - mid] = InnerEntry{all[i].sep, map(all[i].child)};
    seal_node(r, fresh_version(na));
    ops.push_back(write_node_op(na, r));
    // 1. the copies (unreachable until step 2)
    if (opts_.log_changes) opts_.log_changes(fresh.data(), fresh.size());
    for (size_t b = 0; b < ops.size(); b += net::kMaxBatch) mem_.batch(target, ops.data() + b, std::min<size_t>(net::kMaxBatch, ops.size() - b));
    // 2. one ordered batch on this node: left neighbours now link to the copies,
    //    the moved nodes are deleted forwarding to their copies, the split node
    //    keeps the left half and links to the new sibling.
    for (LockedNode* l : lefts) l->node.right = map(l->node.right);
    for (size_t i = 0; i < moved.size(); i++) {
        Node& o = moved[i]->node;
        o.flags |= kNodeDeleted;
        o.right = fresh[i];
        o.count = 0;
    }
    Node& n = ln->node;
    n.count = static_cast<uint16_t>(mid);
    std::memcpy(n.inner, all, mid * sizeof(InnerEntry));
    n.high = lo;
    n.right = na;
    std::vector<LockedNode*> pub{ln};
    pub.insert(pub.end(), held.begin(), held.end());
    // Every node whose entries or right link change is held in the cache from
    // before the publish until its new image is in: the split node, then level
    // by level (parents before children) the left neighbour and the moved chain.
    FrameHold hold(*this);
    hold.hold(ln->addr);
    for (LockedNode* x : held) hold.hold(x->addr);  // `held` is in level-descending order
    locks.publish(pub);
    test_point("migrate:published");
    Stats::add(stats().migrations);
    hold.install(ln->addr, n);
    for (LockedNode* x : held) hold.install(x->addr, x->node);  // moved ones: deleted, forwarding
    for (size_t i = 0; i < moved.size(); i++) cache_update(fresh[i], copies[i]);
    cache_update(na, r);
    for (LockedNode* m : moved) {
        cache_drop(m->addr);  // before its memory can be reused
        free_node(m->addr);
    }
    // 3. the new sibling's downlink
    insert_parent(level + 1, lo, na, path, dl);
    return true;
}

// ---- offloading --------------------------------------------------------------

uint8_t BTree::offload(uint8_t kind, GAddr start, int level, const EntryKey& key, Node* leaf_out, GAddr* leaf_addr) {
    GAddr leaf = 0;
    Node img;
    uint8_t st = offload_rpc(kind, start, level, key, &img, &leaf);
    if (leaf_addr) *leaf_addr = leaf;
    if (st == net::kOffloadDone && leaf_out) std::memcpy(static_cast<void*>(leaf_out), &img, kNodeSize);
    // DEX 6.2: no outdated cached copy of a node the memory node changed survives
    if (st == net::kOffloadDone && kind != net::kOffloadLeaf) cache_refresh_changed(leaf, img, deadline());
    return st;
}

uint8_t BTree::offload_rpc(uint8_t kind, GAddr start, int level, const EntryKey& key, Node* leaf_out,
                           GAddr* leaf_addr) {
    if (gaddr_is_swizzled(start) || level < 0 || level > place_level_)
        throw Error(ErrorCode::kInvalid, "offload: start node must be a remote address at or below the placement level");
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
    auto t0 = std::chrono::steady_clock::now();
    std::vector<uint8_t> r = mem_.node(gaddr_node(start)).rpc(net::kOpOffload, &req, sizeof req);
    if (opts_.offload)  // every offload round trip prices the next decisions (DEX 6.1)
        opts_.offload->record_offload(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
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

bool BTree::offload_cached_write(uint8_t kind, GAddr leaf, const Node& snap, const EntryKey& key, const Deadline& dl,
                                 uint8_t* st) {
    if (!cache_ || !opts_.offload || wb_ || !found_cached_ || !leaf || gaddr_is_swizzled(leaf) ||
        !mem_.node(gaddr_node(leaf)).offload_writes_allowed())
        return false;
    // A split or a merge is done here anyway: don't ask the memory node first.
    if (kind == net::kOffloadInsert ? snap.count >= kLeafCapacity : snap.count <= 1) return false;
    if (!opts_.offload->should_offload(0, OffloadPolicy::kWriteRoundTrips)) return false;
    GAddr at = 0;
    Node img;
    uint8_t r = offload_rpc(kind, leaf, 0, key, &img, &at);
    if (r == net::kOffloadDone) cache_refresh_changed(at, img, dl);
    if (r != net::kOffloadDone && r != net::kOffloadNoop) return false;  // split / merge / restart: one-sided
    *st = r;
    return true;
}

// ---- delete ----------------------------------------------------------------

uint64_t BTree::remove(const EntryKey* keys, size_t n) {
    Stats::add(stats().index_ops);
    uint64_t deleted = 0;
    size_t i = 0;
    int attempt = 0;
    GAddr hint = 0;
    while (i < n) {
        Deadline dl = deadline();  // bounds the waits of one leaf group, not of the whole batch
        Path path{};
        Node snap;
        GAddr a;
        {
            // A single entry (an update's old version) may be deleted by a
            // memory node (DEX 6) unless that would empty the leaf (a merge).
            OffloadScope o(*this, n == 1 && !hint ? net::kOffloadDelete : 0);
            a = descend(keys[i], 0, snap, &path, dl);
            uint8_t st = offload_result_;  // offload_cached_write() sets st only when it did the delete
            if (st == kNoOffload && n == 1 && !hint) offload_cached_write(net::kOffloadDelete, a, snap, keys[i], dl, &st);
            if (st != kNoOffload) {
                if (st == net::kOffloadDone) deleted++;
                i++;
                continue;
            }
        }
        if (hint) a = hint;
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
            while (j < n && compare_keys(nd.low, keys[j]) <= 0 && key_below_high(keys[j], nd)) {
                size_t pos = leaf_lower_bound(nd, keys[j]);
                if (pos < nd.count && nd.leaf[pos] == keys[j]) {
                    std::memmove(&nd.leaf[pos], &nd.leaf[pos + 1], (nd.count - pos - 1) * sizeof(EntryKey));
                    nd.count--;
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

// Merge the empty leaf `e` with a sibling under the same parent: lock left,
// right, then the parent; the left node absorbs the right one, the right one is
// published deleted (forwarding to the left) and its downlink removed, all in
// one batch; then the right node is FREEd. Best effort: any change seen on the
// way (a locked node, contention, missing downlink, different parents) just
// skips the merge -- without waiting; compact() retries it later.
GAddr BTree::try_merge(GAddr e, const Path& path, const Deadline& dl, bool* merged) {
    GAddr p = path[1];
    if (!p) return 0;
    Node pn;
    int idx = -1;
    for (int hops = 0; hops < 4 && p && idx < 0; hops++) {
        if (io_.read(p, pn, dl, false) != NodeIO::Read::kOk || !valid_node(pn, 1) || pn.is_deleted()) return 0;
        for (int i = 0; i < pn.count; i++)
            if (pn.inner[i].child == e) idx = i;
        if (idx < 0) p = pn.right;
    }
    if (idx < 0 || pn.count < 2) return 0;
    GAddr la, ra;
    if (idx + 1 < pn.count) {
        la = e;
        ra = pn.inner[idx + 1].child;
    } else {
        la = pn.inner[idx - 1].child;
        ra = e;
    }
    // Write-back mode: a leaf's newest image may be a dirty frame. Hold both
    // leaves' frames (left to right, as every path that holds two does),
    // written back first, so remote memory is current and no in-place change
    // slips in until the merged images are installed below.
    WbGuard gl, gr;
    if (wb_) {
        wb_acquire(la, gl, dl);
        wb_acquire(ra, gr, dl);
    }
    Locks locks(io_);
    Node s;
    if (io_.read(la, s, dl, false) != NodeIO::Read::kOk || !valid_node(s, 0) || s.is_deleted() || s.right != ra)
        return 0;
    LockedNode* L = locks.try_lock(la, s);
    if (!L) return 0;
    if (io_.read(ra, s, dl, false) != NodeIO::Read::kOk || !valid_node(s, 0) || s.is_deleted() || !(s.low == L->node.high))
        return 0;
    LockedNode* R = locks.try_lock(ra, s);
    if (!R) return 0;
    if ((L->node.count != 0 && R->node.count != 0) || L->node.count + R->node.count > kLeafCapacity) return 0;
    if (io_.read(p, s, dl, false) != NodeIO::Read::kOk || !valid_node(s, 1) || s.is_deleted()) return 0;
    LockedNode* P = locks.try_lock(p, s);
    if (!P) return 0;
    Node& pp = P->node;
    int j = -1;
    for (int i = 0; i + 1 < pp.count; i++)
        if (pp.inner[i].child == la && pp.inner[i + 1].child == ra && pp.inner[i + 1].sep == R->node.low) j = i;
    if (j < 0) return 0;

    Node& l = L->node;
    Node& r = R->node;
    std::memcpy(&l.leaf[l.count], r.leaf, r.count * sizeof(EntryKey));
    l.count = static_cast<uint16_t>(l.count + r.count);
    l.high = r.high;
    l.right = r.right;
    r.flags |= kNodeDeleted;
    r.right = la;
    r.count = 0;
    std::memmove(&pp.inner[j + 1], &pp.inner[j + 2], (pp.count - j - 2) * sizeof(InnerEntry));
    pp.count--;
    // The right leaf's entries move left: both leaves' cached copies are held
    // (left, then right) until they show the merged state. The parent only
    // loses a downlink, which a stale copy tolerates (the right leaf forwards).
    FrameHold hold(*this);
    if (!wb_) {
        hold.hold(la);
        hold.hold(ra);
    }
    locks.publish({L, R, P});
    test_point("merge:published");
    if (merged) *merged = true;
    if (wb_) {
        gl.release(&l);
        gr.release(&r);  // deleted: an in-place change now falls back to the locked path
    } else {
        hold.install(la, l);
        hold.install(ra, r);  // deleted, forwarding to la (if the drop below fails)
    }
    cache_update(p, pp);
    cache_drop(ra);  // before its memory can be reused
    free_node(ra);
    return l.count == 0 ? la : 0;  // survivor still empty: try again
}

uint64_t BTree::compact() {
    uint64_t freed = 0;
    Node parent, child;
    Deadline dl = deadline();
    // Leftmost level-1 node, then along level 1 through right links.
    GAddr p = descend(neg_inf_key(), 1, parent, nullptr, dl);
    if (!p || parent.level != 1) return 0;  // the root is a leaf: nothing to merge with
    while (p) {
        dl = deadline();
        if (io_.read(p, parent, dl) != NodeIO::Read::kOk || !valid_node(parent, 1)) break;
        for (int i = 0; i < parent.count; i++) {
            GAddr c = parent.inner[i].child;
            if (io_.read(c, child, dl) != NodeIO::Read::kOk || !valid_node(child, 0)) continue;
            if (child.is_deleted() || child.count != 0) continue;
            Path path{};
            path[0] = c;
            path[1] = p;
            for (int rounds = 0; c && rounds < 8; rounds++) {
                bool merged = false;
                c = try_merge(c, path, dl, &merged);
                if (merged) freed++;
            }
        }
        p = parent.right;
    }
    return freed;
}

// ---- scans -------------------------------------------------------------------

BTree::Scan::Scan(BTree& t, const EntryKey& lo, const EntryKey& hi, bool backward)
    : t_(t), lo_(lo), hi_(hi), backward_(backward), cursor_(backward ? hi : lo) {
    if (compare_keys(lo, hi) > 0) done_ = true;
}

bool BTree::Scan::next(std::vector<EntryKey>& out) {
    out.clear();
    if (done_) return false;
    Stats::add(stats().index_ops);
    Deadline dl = t_.deadline();
    Node n;
    while (!done_) {
        if (!backward_) {
            bool ok = false;
            if (next_addr_) {
                ok = t_.read_node(next_addr_, n, dl) && t_.valid_node(n, 0) &&
                     !n.is_deleted() && n.low == cursor_;
                next_addr_ = 0;
            }
            if (!ok) {
                OffloadScope o(t_, net::kOffloadLeaf);
                t_.descend(cursor_, 0, n, nullptr, dl);
            }
            for (size_t i = leaf_lower_bound(n, cursor_); i < n.count; i++) {
                if (compare_keys(n.leaf[i], hi_) > 0) break;
                out.push_back(n.leaf[i]);
            }
            if (n.high.cls == kPosInf || compare_keys(hi_, n.high) < 0) {
                done_ = true;
            } else {
                cursor_ = n.high;
                next_addr_ = n.right;
            }
        } else {
            t_.descend(cursor_, 0, n, nullptr, dl, exclusive_);
            for (size_t i = n.count; i-- > 0;) {
                const EntryKey& k = n.leaf[i];
                int c = compare_keys(k, cursor_);
                if (exclusive_ ? c >= 0 : c > 0) continue;
                if (compare_keys(k, lo_) < 0) break;
                out.push_back(k);
            }
            if (n.low.cls == kNegInf || compare_keys(n.low, lo_) <= 0) {
                done_ = true;
            } else {
                cursor_ = n.low;
                exclusive_ = true;
            }
        }
        if (!out.empty()) return true;
    }
    return false;
}

// ---- bulk load ---------------------------------------------------------------

BTree::BulkLoader::BulkLoader(BTree& t, double ff) : t_(t) {
    if (!(ff > 0.0) || ff > 1.0) ff = 0.9;
    if (ff < 0.1) ff = 0.1;
    leaf_fill_ = std::max<size_t>(1, static_cast<size_t>(kLeafCapacity * ff));
    inner_fill_ = std::max<size_t>(2, static_cast<size_t>(kInnerCapacity * ff));
    // A segment is the leaves of one full subtree at the placement level.
    seg_leaves_ = 1;
    for (int i = 0; i < t_.place_level_ && seg_leaves_ < (uint64_t(1) << 40); i++) seg_leaves_ *= inner_fill_;
    ext_.resize(t_.part_ns_.size());
    free_.assign(t_.part_ns_.size(), -1);
    size_t nparts = 0;
    for (uint64_t ns : t_.part_ns_) nparts += ns != 0;
    if (nparts > 1) {
        for (auto& [free_bytes, i] : t_.nodes_by_free()) free_[i] = free_bytes;
    } else {
        free_[t_.node_id_] = INT64_MAX;  // one node: no choice to make
    }
    cur_addr_ = alloc(segment_node());
    init_node(cur_, t_.tree_id_, 0);
    children_.push_back(Child{neg_inf_key(), cur_addr_, 0});
    leaves_ = 1;
}

// Memory node for the next segment: round-robin over the tree's memory nodes
// (starting at one picked by the tree id, so small indexes do not all start
// on the same node), skipping nodes whose free space (measured at the start,
// minus what this load took since) cannot hold a whole segment; if none can,
// the one with most free space. Single-node trees: the home node.
uint32_t BTree::BulkLoader::segment_node() {
    const uint64_t seg_bytes = (seg_leaves_ + seg_leaves_ / inner_fill_ + 1) * kNodeSize;
    std::vector<uint32_t> parts;
    for (uint32_t i = 0; i < free_.size(); i++)
        if (t_.part_ns_[i] && free_[i] >= 0) parts.push_back(i);
    uint32_t best = t_.node_id_;
    if (!parts.empty()) {
        size_t start = (t_.tree_id_ + seg_node_.size()) % parts.size();
        bool found = false;
        for (size_t k = 0; k < parts.size() && !found; k++) {
            uint32_t i = parts[(start + k) % parts.size()];
            if (free_[i] >= static_cast<int64_t>(seg_bytes)) {
                best = i;
                found = true;
            }
        }
        if (!found) {
            int64_t best_free = -1;
            for (uint32_t i : parts)
                if (free_[i] > best_free) {
                    best = i;
                    best_free = free_[i];
                }
        }
    }
    seg_node_.push_back(best);
    return best;
}

GAddr BTree::BulkLoader::alloc(uint32_t node) {
    Extent& x = ext_[node];
    if (x.left == 0) {
        uint64_t bytes = kBulkExtentBytes;
        std::vector<uint8_t> r;
        uint64_t ns = t_.part_ns_[node];
        try {
            uint64_t req[2] = {ns, bytes};
            r = t_.mem_.node(node).rpc(net::kOpAlloc, req, sizeof req);
        } catch (const Error& e) {
            if (e.code() != ErrorCode::kOutOfSpace) throw;
            bytes = kNodeSize;
            uint64_t req[2] = {ns, bytes};
            try {
                r = t_.mem_.node(node).rpc(net::kOpAlloc, req, sizeof req);
            } catch (const Error& e2) {
                if (e2.code() != ErrorCode::kOutOfSpace) throw;
                throw t_.out_of_space("bulk load: memory node " + t_.mem_.node(node).address() + " is full");
            }
        }
        x.off = get_u64(r, "ALLOC");
        x.left = bytes / kNodeSize;
        if (free_[node] >= 0) free_[node] = std::max<int64_t>(0, free_[node] - static_cast<int64_t>(bytes));
    }
    GAddr a = make_gaddr(node, x.off);
    x.off += kNodeSize;
    x.left--;
    return a;
}

void BTree::BulkLoader::emit(GAddr a, Node& n) {
    seal_node(n, 1);
    pending_.emplace_back(a, n);
    if (pending_.size() >= 128) flush();
}

void BTree::BulkLoader::flush() {
    if (pending_.empty()) return;
    std::vector<RemoteOp> ops;
    ops.reserve(pending_.size());
    for (auto& [a, n] : pending_) ops.push_back(write_node_op(a, n));
    // One batch per run of nodes on the same memory node, in order.
    size_t b = 0;
    while (b < ops.size()) {
        uint32_t node = gaddr_node(pending_[b].first);
        size_t e = b + 1;
        while (e < ops.size() && gaddr_node(pending_[e].first) == node) e++;
        t_.mem_.batch(node, ops.data() + b, e - b);
        b = e;
    }
    // Bulk-loaded nodes start at version 1: a cached copy of an earlier life of
    // the same memory must go, it could look newer.
    for (auto& [a, n] : pending_) t_.cache_drop(a);
    pending_.clear();
}

void BTree::BulkLoader::add(const EntryKey& key) {
    if (finished_) throw Error(ErrorCode::kInvalid, "bulk load already finished");
    if (key.cls != kValue && key.cls != kNull)
        throw Error(ErrorCode::kInvalid, "bulk load: key of class " + std::to_string(key.cls) + " cannot be stored");
    if (have_last_ && !(last_ < key))
        throw Error(ErrorCode::kInvalid,
                    "bulk load keys must be strictly ascending: " + key_str(key) + " after " + key_str(last_));
    if (cur_.count >= leaf_fill_) {
        int64_t seg = static_cast<int64_t>(leaves_ / seg_leaves_);
        uint32_t node = static_cast<size_t>(seg) < seg_node_.size() ? seg_node_[seg] : segment_node();
        GAddr na = alloc(node);
        leaves_++;
        cur_.high = key;
        cur_.right = na;
        emit(cur_addr_, cur_);
        init_node(cur_, t_.tree_id_, 0);
        cur_.low = key;
        cur_addr_ = na;
        children_.push_back(Child{key, na, seg});
    }
    cur_.leaf[cur_.count++] = key;
    last_ = key;
    have_last_ = true;
}

void BTree::BulkLoader::finish() {
    if (finished_) throw Error(ErrorCode::kInvalid, "bulk load already finished");
    finished_ = true;
    Stats::add(stats().index_ops);
    emit(cur_addr_, cur_);
    std::vector<Child> kids = std::move(children_);
    uint8_t level = 1;
    while (kids.size() > 1) {
        // Up to the placement level, a node groups children of one segment
        // only (so each segment becomes one subtree on its memory node); above
        // it, children of any segment, and the node goes to the home node.
        const bool in_segment = level <= t_.place_level_;
        struct Group {
            size_t begin, end;
            int64_t seg;
        };
        std::vector<Group> groups;
        size_t run = 0;
        while (run < kids.size()) {
            size_t run_end = run + 1;
            while (run_end < kids.size() && (!in_segment || kids[run_end].seg == kids[run].seg)) run_end++;
            size_t n = run_end - run;
            size_t ng = (n + inner_fill_ - 1) / inner_fill_;
            // Spread evenly so that no node is left nearly empty.
            size_t per = (n + ng - 1) / ng;
            for (size_t b = run; b < run_end; b += per)
                groups.push_back(Group{b, std::min(run_end, b + per), in_segment ? kids[run].seg : -1});
            run = run_end;
        }
        std::vector<GAddr> addrs;
        addrs.reserve(groups.size());
        for (auto& g : groups) {
            if (g.seg >= 0) {
                addrs.push_back(alloc(seg_node_[static_cast<size_t>(g.seg)]));
            } else {
                try {
                    addrs.push_back(alloc(t_.node_id_));
                } catch (const Error& e) {
                    if (e.code() != ErrorCode::kOutOfSpace) throw;
                    addrs.push_back(alloc(segment_node()));  // home full: most free node
                }
            }
        }
        std::vector<Child> parents;
        for (size_t gi = 0; gi < groups.size(); gi++) {
            const Group& g = groups[gi];
            Node n;
            init_node(n, t_.tree_id_, level);
            n.low = kids[g.begin].low;
            n.count = static_cast<uint16_t>(g.end - g.begin);
            for (size_t i = g.begin; i < g.end; i++) n.inner[i - g.begin] = InnerEntry{kids[i].low, kids[i].addr};
            if (gi + 1 < groups.size()) {
                n.high = kids[groups[gi + 1].begin].low;
                n.right = addrs[gi + 1];
            }
            parents.push_back(Child{n.low, addrs[gi], level < t_.place_level_ ? g.seg : -1});
            emit(addrs[gi], n);
        }
        kids = std::move(parents);
        level++;
    }
    flush();
    GAddr root = kids[0].addr;
    GAddr old = t_.refresh_root();
    while (!t_.set_root(old, root)) old = t_.root_;
}

// ---- check / info --------------------------------------------------------------

TreeInfo BTree::check() {
    constexpr int kAttempts = 4;
    for (int attempt = 0;; attempt++) {
        try {
            return check_once();
        } catch (const Error& e) {
            if (e.code() != ErrorCode::kCorrupt || attempt + 1 >= kAttempts) throw;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50 << attempt));  // 50, 100, 200 ms
    }
}

TreeInfo BTree::check_once() {
    TreeInfo info;
    auto corrupt = [&](GAddr a, const std::string& what) {
        return Error(ErrorCode::kCorrupt, "dex index check failed: node " + hex_addr(a) + ": " + what,
                     "REINDEX the index.");
    };
    auto read_strict = [&](GAddr a, Node& n) {
        Deadline dl = deadline();
        if (io_.read(a, n, dl) != NodeIO::Read::kOk)
            throw corrupt(a, "not a valid node image (lock word " + std::to_string(n.lock) + ", body_version " +
                                 std::to_string(n.body_version) + ", count " + std::to_string(n.count) +
                                 ": version mismatch or checksum mismatch)");
        if (n.tree_id != tree_id_)
            throw corrupt(a, "tree_id " + std::to_string(n.tree_id) + ", expected " + std::to_string(tree_id_));
    };
    GAddr root = refresh_root();
    if (!root)
        throw Error(ErrorCode::kCorrupt, "dex index check failed: namespace " + std::to_string(ns_) + " has no root");
    auto ours = [&](GAddr a) {
        uint32_t nd = gaddr_node(a);
        return nd < part_ns_.size() && part_ns_[nd] != 0;
    };
    if (!ours(root)) throw corrupt(root, "root is on a memory node that holds no namespace of this tree");
    info.placement_level = place_level_;
    info.nodes_on.assign(part_ns_.size(), 0);
    info.subtrees_on.assign(part_ns_.size(), 0);
    Node n;
    read_strict(root, n);
    if (n.is_deleted()) throw corrupt(root, "root is marked deleted");
    if (n.low.cls != kNegInf) throw corrupt(root, "root low fence is " + key_str(n.low) + ", expected -inf");
    if (n.right) info.notes += "root " + hex_addr(root) + " has a right sibling (new root not installed yet); ";
    const int root_level = n.level;
    info.root = root;
    info.height = static_cast<uint32_t>(root_level) + 1;

    struct Range {
        EntryKey lo, hi;
        int node;  // memory node the child must be on (placement), -1: any
    };
    std::unordered_map<GAddr, Range> expected;
    std::unordered_set<GAddr> seen;
    GAddr leftmost = root;
    for (int level = root_level; level >= 0; --level) {
        std::unordered_map<GAddr, Range> next_expected;
        GAddr next_leftmost = 0;
        GAddr a = leftmost, prev = 0;
        EntryKey prev_high{}, cover_hi{};
        bool have_cover = false;
        size_t linked = 0;
        std::unordered_set<GAddr> this_level;
        const std::string lv = "level " + std::to_string(level);
        while (a) {
            if (!ours(a)) throw corrupt(a, "address names a memory node that holds no namespace of this tree");
            const uint32_t here = gaddr_node(a);
            info.nodes_on[here]++;
            if (level == place_level_ || (level == root_level && root_level < place_level_)) info.subtrees_on[here]++;
            if (!seen.insert(a).second)
                throw corrupt(a, "reached twice (cycle in right links, or node shared between levels/parents)");
            this_level.insert(a);
            read_strict(a, n);
            if (n.level != level)
                throw corrupt(a, "level " + std::to_string(n.level) + ", expected " + std::to_string(level) +
                                     " (levels must decrease by one)");
            if (n.is_deleted())
                throw corrupt(a, "deleted node is still linked" +
                                     (prev ? " as right sibling of " + hex_addr(prev) : std::string(" from above")));
            if (!prev) {
                if (n.low.cls != kNegInf)
                    throw corrupt(a, "leftmost node of " + lv + " has low fence " + key_str(n.low) + ", expected -inf");
            } else if (!(n.low == prev_high)) {
                throw corrupt(a, "low fence " + key_str(n.low) + " differs from high fence " + key_str(prev_high) +
                                     " of left sibling " + hex_addr(prev));
            }
            if (compare_keys(n.low, n.high) >= 0)
                throw corrupt(a, "low fence " + key_str(n.low) + " is not below high fence " + key_str(n.high));
            if (!n.is_leaf() && n.count == 0) throw corrupt(a, "inner node without children");
            for (size_t i = 0; i < n.count; i++) {
                const EntryKey& k = n.is_leaf() ? n.leaf[i] : n.inner[i].sep;
                if (n.is_leaf() && k.cls != kValue && k.cls != kNull)
                    throw corrupt(a, "entry " + std::to_string(i) + " has key class " + std::to_string(k.cls));
                if (i > 0) {
                    const EntryKey& pk = n.is_leaf() ? n.leaf[i - 1] : n.inner[i - 1].sep;
                    if (!(pk < k))
                        throw corrupt(a, "entries not sorted: entry " + std::to_string(i - 1) + " " + key_str(pk) +
                                             " >= entry " + std::to_string(i) + " " + key_str(k));
                }
                if (compare_keys(k, n.low) < 0 || !key_below_high(k, n))
                    throw corrupt(a, "entry " + std::to_string(i) + " " + key_str(k) + " outside fences [" +
                                         key_str(n.low) + ", " + key_str(n.high) + ")");
            }
            if (!n.is_leaf() && !(n.inner[0].sep == n.low))
                throw corrupt(a, "first separator " + key_str(n.inner[0].sep) + " differs from low fence " +
                                     key_str(n.low));
            if (level < root_level) {
                auto it = expected.find(a);
                if (it != expected.end()) {
                    if (!(n.low == it->second.lo))
                        throw corrupt(a, "low fence " + key_str(n.low) + " differs from the parent's separator " +
                                             key_str(it->second.lo));
                    if (compare_keys(n.high, it->second.hi) > 0)
                        throw corrupt(a, "high fence " + key_str(n.high) + " exceeds the parent's range end " +
                                             key_str(it->second.hi));
                    cover_hi = it->second.hi;
                    have_cover = true;
                    linked++;
                    if (it->second.node >= 0 && static_cast<int>(here) != it->second.node)
                        throw corrupt(a, "placement: on memory node " + std::to_string(here) + " but its parent (level " +
                                             std::to_string(level + 1) + " <= placement level " +
                                             std::to_string(place_level_) + ") is on memory node " +
                                             std::to_string(it->second.node) +
                                             " (a subtree must lie on one memory node)");
                } else {
                    if (!have_cover || compare_keys(n.low, cover_hi) >= 0 || compare_keys(n.high, cover_hi) > 0)
                        throw corrupt(a, "no downlink in " + std::string("level ") + std::to_string(level + 1) +
                                             " and range [" + key_str(n.low) + ", " + key_str(n.high) +
                                             ") is not covered by a left sibling's parent range");
                    if (level < place_level_ && prev && gaddr_node(prev) != here)
                        throw corrupt(a, "placement: reachable only through the right link of " + hex_addr(prev) +
                                             " on another memory node (below the placement level a split stays on "
                                             "its memory node)");
                    info.missing_downlinks++;
                }
            }
            if (n.is_leaf()) {
                info.leaves++;
                info.entries += n.count;
            } else {
                info.inner_nodes++;
                for (size_t i = 0; i < n.count; i++) {
                    GAddr c = n.inner[i].child;
                    if (!c) throw corrupt(a, "entry " + std::to_string(i) + " has a null child");
                    Range r{n.inner[i].sep, i + 1 < n.count ? n.inner[i + 1].sep : n.high,
                            level <= place_level_ ? static_cast<int>(here) : -1};
                    if (!next_expected.emplace(c, r).second)
                        throw corrupt(a, "child " + hex_addr(c) + " is referenced twice");
                }
                if (!next_leftmost) next_leftmost = n.inner[0].child;
            }
            prev = a;
            prev_high = n.high;
            a = n.right;
        }
        if (prev_high.cls != kPosInf)
            throw corrupt(prev, "rightmost node of " + lv + " has high fence " + key_str(prev_high) +
                                    ", expected +inf");
        if (level < root_level && linked != expected.size()) {
            for (auto& [c, r] : expected)
                if (!this_level.count(c))
                    throw corrupt(c, "child named by level " + std::to_string(level + 1) +
                                         " is not on the sibling chain of " + lv + " (unreachable)");
        }
        expected = std::move(next_expected);
        leftmost = next_leftmost;
    }
    if (info.missing_downlinks)
        info.notes += std::to_string(info.missing_downlinks) +
                      " node(s) reachable only through right links (interrupted split; tolerated); ";
    return info;
}

TreeInfo BTree::info() {
    TreeInfo info;
    GAddr root = refresh_root();
    if (!root) throw Error(ErrorCode::kNotFound, "namespace " + std::to_string(ns_) + " has no tree");
    info.root = root;
    GAddr leftmost = root;
    Node n;
    bool first = true;
    while (leftmost) {
        GAddr a = leftmost;
        leftmost = 0;
        while (a) {
            Deadline dl = deadline();
            if (io_.read(a, n, dl) != NodeIO::Read::kOk)
                throw Error(ErrorCode::kCorrupt, "node " + hex_addr(a) + ": not a valid node image");
            if (first) {
                info.height = n.level + 1u;
                first = false;
            }
            if (n.is_leaf()) {
                info.leaves++;
                info.entries += n.count;
            } else {
                info.inner_nodes++;
                if (!leftmost && n.count) leftmost = n.inner[0].child;
            }
            a = n.right;
        }
    }
    return info;
}

}  // namespace dex::tree
