#include "cache/writeback_registry.h"

#include <algorithm>
#include <set>
#include <vector>

#include "cache/cache.h"
#include "cache/region.h"
#include "cache/spinlock.h"
#include "transport/remote_memory.h"

namespace dex::cache {

Error lost_dirty_error(const std::string& name) {
    return Error(ErrorCode::kLostMemory,
                 "index \"" + name +
                     "\" lost its remote memory (dirty nodes of write-back mode were lost in a crash: the compute "
                     "server instance that held them is gone)",
                 "REINDEX INDEX " + name);
}

void WritebackRegistry::init() {
    lock_.store(0, std::memory_order_relaxed);
    used_.store(0, std::memory_order_relaxed);
    for (auto& e : e_) {
        e.lock.store(0, std::memory_order_relaxed);
        e.registered.store(0, std::memory_order_relaxed);
        e.node = -1;
        e.ns = 0;
        e.word = 0;
        e.incarnation = 0;
        e.tree_id = 0;
    }
}

int WritebackRegistry::find(int node, uint64_t ns, GAddr word) const {
    if (!word) return -1;
    uint32_t n = used();
    for (uint32_t i = 0; i < n; i++)
        if (e_[i].node == node && e_[i].ns == ns && e_[i].word == word) return static_cast<int>(i);
    return -1;
}

int WritebackRegistry::find_or_add(int node, uint64_t ns, GAddr word, uint64_t incarnation, uint32_t tree_id) {
    if (!word) return -1;
    int found = find(node, ns, word);
    if (found >= 0) return found;
    SpinGuard lk(lock_);
    uint32_t n = used_.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < n; i++)
        if (e_[i].node == node && e_[i].ns == ns && e_[i].word == word) return static_cast<int>(i);
    if (n >= kMaxTrees) return -1;  // full: this tree writes through
    Entry& e = e_[n];
    e.node = node;
    e.ns = ns;
    e.word = word;
    e.incarnation = incarnation;
    e.tree_id = tree_id;
    e.registered.store(0, std::memory_order_relaxed);
    used_.store(n + 1, std::memory_order_release);
    return static_cast<int>(n);
}

void WritebackRegistry::register_dirty(int slot, uint64_t generation, RemoteMemory& mem,
                                       const std::string& index_name) {
    Entry& e = e_[slot];
    if (e.registered.load(std::memory_order_seq_cst)) return;
    SpinGuard lk(e.lock);
    if (e.registered.load(std::memory_order_seq_cst) || !e.word) return;
    uint64_t old = mem.cas(e.word, 0, generation);
    if (old != 0 && old != generation) throw lost_dirty_error(index_name);
    e.registered.store(1, std::memory_order_seq_cst);
}

uint64_t WritebackRegistry::flush(int only, Cache& cache, RemoteMemory& mem) {
    uint32_t n = used();
    if (n == 0) return 0;  // no tree ever registered: no frame can be dirty
    CacheRegion& region = cache.region();
    auto selected = [&](uint32_t i) { return only < 0 || static_cast<uint32_t>(only) == i; };
    // 1. From now on a clean frame that becomes dirty registers again (and so
    //    keeps its word set); frames already dirty are written by the scan.
    for (uint32_t i = 0; i < n; i++) {
        if (!selected(i)) continue;
        SpinGuard lk(e_[i].lock);
        e_[i].registered.store(0, std::memory_order_seq_cst);
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);
    // 2. Write back.
    std::vector<uint32_t> frames;
    uint32_t tid = only >= 0 ? e_[only].tree_id : 0;
    region.for_each_frame([&](const FrameInfo& i) {
        if (!i.dirty || i.gaddr == kNullGAddr) return;
        if (only >= 0 && i.tree_id != tid) return;
        frames.push_back(i.frame);
    });
    uint64_t written = cache.flush_frames(frames);
    // 3. Trees with frames that are still dirty (a failed write-back) keep their word.
    std::set<uint32_t> still;  // tree ids
    region.for_each_frame([&](const FrameInfo& i) {
        if (i.dirty && i.gaddr != kNullGAddr) still.insert(i.tree_id);
    });
    for (uint32_t i = 0; i < n; i++) {
        if (!selected(i)) continue;
        Entry& e = e_[i];
        SpinGuard lk(e.lock);
        if (!e.word) continue;
        if (still.count(e.tree_id)) {
            e.registered.store(1, std::memory_order_seq_cst);
            continue;
        }
        if (e.registered.load(std::memory_order_seq_cst)) continue;  // dirtied again meanwhile
        try {
            if (mem.node(static_cast<uint32_t>(e.node)).incarnation() != e.incarnation) continue;
            uint64_t zero = 0;
            mem.write(e.word, &zero, 8);
        } catch (...) {
            e.registered.store(1, std::memory_order_seq_cst);  // not cleared: stays "possibly dirty"
            throw;
        }
    }
    return written;
}

uint64_t WritebackRegistry::dirty_lsn_max(CacheRegion& region, uint32_t tree_id, bool all) const {
    if (used() == 0) return 0;  // never dirty
    uint64_t m = 0;
    region.for_each_frame([&](const FrameInfo& i) {
        if (!i.dirty || i.gaddr == kNullGAddr || (!all && i.tree_id != tree_id)) return;
        m = std::max(m, region.header(i.frame).lsn.load(std::memory_order_relaxed));
    });
    return m;
}

namespace {
// Lowest `pos(header)` over the dirty frames (UINT64_MAX: none).
template <class Pos>
uint64_t dirty_min(CacheRegion& region, Pos pos) {
    uint64_t m = UINT64_MAX;
    region.for_each_frame([&](const FrameInfo& i) {
        if (i.dirty && i.gaddr != kNullGAddr) m = std::min(m, pos(region.header(i.frame)));
    });
    return m;
}
}  // namespace

uint64_t WritebackRegistry::dirty_since_min(CacheRegion& region) const {
    if (used() == 0) return UINT64_MAX;  // never dirty
    return dirty_min(region, [](const FrameHeader& h) { return h.dirty_since.load(std::memory_order_relaxed); });
}

uint64_t WritebackRegistry::crash_since_min(CacheRegion& region) const {
    if (used() == 0) return UINT64_MAX;
    return dirty_min(region, [](const FrameHeader& h) {
        return std::max(h.dirty_since.load(std::memory_order_relaxed), h.imaged_at.load(std::memory_order_relaxed));
    });
}

uint64_t WritebackRegistry::log_images(CacheRegion& region, const ImageLog& log) const {
    if (used() == 0) return 0;
    std::vector<std::pair<uint32_t, uint32_t>> dirty;  // (frame, tree id)
    region.for_each_frame([&](const FrameInfo& i) {
        if (i.dirty && i.gaddr != kNullGAddr && i.level == 0) dirty.emplace_back(i.frame, i.tree_id);
    });
    uint64_t logged = 0;
    Node img;
    for (auto [f, tree_id] : dirty) {
        const Entry* e = nullptr;
        for (uint32_t s = 0; s < used() && !e; s++)
            if (e_[s].word && e_[s].tree_id == tree_id) e = &e_[s];
        if (!e) continue;  // (its namespace was dropped: nothing to keep)
        FrameHeader& h = region.header(f);
        h.lock();
        // Still a dirty leaf of that tree? (written back or reused meanwhile)
        const bool same = h.dirty.load(std::memory_order_relaxed) && h.gaddr.load(std::memory_order_relaxed) != kNullGAddr &&
                          h.get_state() != FrameState::kFree && region.node(f)->level == 0 &&
                          region.node(f)->tree_id == tree_id;
        uint64_t at = 0;
        if (same) {
            region.copy_unswizzled(f, img);
            try {
                at = log(e->node, e->ns, img);
            } catch (...) {
                h.unlock_unchanged();
                throw;
            }
            if (at) h.imaged_at.store(at, std::memory_order_relaxed);
        }
        h.unlock_unchanged();  // (the image did not change)
        if (at) logged++;
    }
    return logged;
}

void WritebackRegistry::forget(int node, uint64_t ns) {
    uint32_t n = used();
    for (uint32_t i = 0; i < n; i++) {
        Entry& e = e_[i];
        if (e.node != node || e.ns != ns) continue;
        SpinGuard lk(e.lock);
        e.word = 0;
        e.registered.store(0, std::memory_order_seq_cst);
    }
}

void WritebackRegistry::check_owner_word(RemoteMemory& mem, GAddr word, uint64_t generation,
                                         const std::string& index_name) {
    uint64_t w = 0;
    mem.read(word, &w, 8);
    if (w != 0 && w != generation) throw lost_dirty_error(index_name);
}

}  // namespace dex::cache
