#include "cache/cache.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "common/stats.h"

namespace dex::cache {

namespace {
constexpr int kMaxDepth = 64;          // delegation hops (a tree is far shallower; bounds races)
constexpr int kMaxAllocRounds = 64;    // replacement rounds before giving up
constexpr int kSamplePairs = 8;        // sample pairs tried per cool_sample()
}  // namespace

Cache::Cache(CacheRegion& region, uint64_t seed) : r_(region), admission_(region.admission_policy(), seed) {
    free_.reserve(64);
}

Cache::~Cache() {
    for (uint32_t f : free_) r_.push_free(f);
}

// ---- frames ----------------------------------------------------------------

uint32_t Cache::allocate_frame() {
    uint32_t f = kNoFrame;
    if (!free_.empty()) {
        f = free_.back();
        free_.pop_back();
    }
    if (f == kNoFrame) f = r_.pop_free();
    if (f == kNoFrame) f = r_.take_unused();
    for (int round = 0; f == kNoFrame && round < kMaxAllocRounds; round++) {
        cool_sample();  // a push into a full bucket evicts into free_
        if (free_.empty()) {
            // Nothing pushed out: evict from a random bucket, at first only from
            // well-filled ones so that fresh candidates get their second chance.
            CoolingMap& cm = r_.cooling();
            uint32_t b = rng().below(cm.bucket_count());
            uint32_t min = round < 8 ? CoolingMap::kSlots / 2 : 1;
            if (cm.approx_size(b) >= min) evict_oldest(b);
        }
        if (!free_.empty()) {
            f = free_.back();
            free_.pop_back();
        }
    }
    if (f != kNoFrame) r_.header(f).set_state(FrameState::kIo);
    return f;
}

void Cache::release_frame(uint32_t f) {
    r_.header(f).set_state(FrameState::kFree);
    free_.push_back(f);
}

bool Cache::install(uint32_t f, GAddr g, const DirtyState* dirty) {
    FrameHeader& h = r_.header(f);
    Node* n = r_.node(f);
    h.lock();
    h.gaddr.store(g, std::memory_order_relaxed);
    h.level.store(n->level, std::memory_order_relaxed);
    h.parent.store(kNoFrame, std::memory_order_relaxed);
    h.swizzled_children.store(0, std::memory_order_relaxed);
    h.dirty.store(dirty ? 1 : 0, std::memory_order_relaxed);
    h.lsn.store(dirty ? dirty->lsn : 0, std::memory_order_relaxed);
    if (dirty) h.dirty_since.store(dirty->since, std::memory_order_relaxed);
    h.imaged_at.store(dirty ? dirty->imaged_at : 0, std::memory_order_relaxed);
    // Map before becoming HOT and before unlocking: a HOT frame must be mapped,
    // or an evicter could free it before publish() and we would map a free frame.
    if (!r_.table().publish(g, f)) {
        h.gaddr.store(kNullGAddr, std::memory_order_relaxed);
        h.dirty.store(0, std::memory_order_relaxed);
        h.unlock_obsolete();
        release_frame(f);
        return false;
    }
    h.set_state(FrameState::kHot);
    h.unlock();
    Stats::add(stats().admissions);
    return true;
}

uint32_t Cache::admit(GAddr g, const Node& n) {
    uint32_t f = allocate_frame();
    if (f == kNoFrame) {
        abort_io(g);
        return kNoFrame;
    }
    std::memcpy(r_.node(f), &n, kNodeSize);  // owned frame: nobody reads it yet
    return admit_filled(f, g);
}

uint32_t Cache::admit_filled(uint32_t f, GAddr g) {
    if (!install(f, g)) return kNoFrame;
    if (admit_check_) {
        std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with the purger's store + scan
        if (!admit_check_(g)) {
            invalidate(g);
            return kNoFrame;
        }
    }
    return f;
}

// ---- cooling -----------------------------------------------------------------

bool Cache::cool_sample() {
    uint32_t used = r_.used_frames();
    if (used == 0) return false;
    // Normally almost every frame is hot and the first pair does; retrying a
    // few pairs covers caches that are mostly free / being admitted.
    for (int tries = 0; tries < kSamplePairs; tries++) {
        uint32_t a = rng().below(used), b = rng().below(used);
        bool ha = r_.header(a).get_state() == FrameState::kHot;
        bool hb = r_.header(b).get_state() == FrameState::kHot;
        uint32_t pick;
        if (ha && hb)  // prefer the lower level: leaves are colder than inner nodes
            pick = r_.header(b).level.load(std::memory_order_relaxed) <
                           r_.header(a).level.load(std::memory_order_relaxed)
                       ? b
                       : a;
        else if (ha) pick = a;
        else if (hb) pick = b;
        else continue;
        return cool_from(pick) != kNoFrame;
    }
    return false;
}

uint32_t Cache::delegate(uint32_t f) {
    for (int depth = 0; depth < kMaxDepth; depth++) {
        FrameHeader& h = r_.header(f);
        if (h.get_state() != FrameState::kHot) return kNoFrame;
        if (h.swizzled_children.load(std::memory_order_acquire) == 0) return f;
        // Pick one swizzled child, starting at a random slot, under an optimistic read.
        uint64_t v = h.begin_read();
        if (v == FrameHeader::kRestart) return kNoFrame;
        const Node* n = r_.node(f);
        uint32_t count = CacheRegion::entries_in_use(n);
        if (__atomic_load_n(&n->level, __ATOMIC_RELAXED) == 0 || count == 0) return kNoFrame;
        uint32_t start = rng().below(count), child = kNoFrame;
        for (uint32_t k = 0; k < count; k++) {
            GAddr c = CacheRegion::load_child(n, (start + k) % count);
            if (gaddr_is_swizzled(c)) {
                child = swizzled_frame(c);
                break;
            }
        }
        if (!h.validate(v) || child == kNoFrame || child >= r_.frame_count()) return kNoFrame;
        f = child;
    }
    return kNoFrame;
}

uint32_t Cache::cool_from(uint32_t start) {
    uint32_t c = delegate(start);
    return c != kNoFrame && cool_frame(c) ? c : kNoFrame;
}

bool Cache::write_back_locked(uint32_t f) {
    FrameHeader& h = r_.header(f);
    if (!h.dirty.load(std::memory_order_relaxed)) return true;
    if (write_back_) {
        Node img;
        r_.copy_unswizzled(f, img);
        if (!write_back_(f, img)) return false;  // stays dirty; the caller keeps the frame
    }
    r_.mark_clean(f);
    return true;
}

bool Cache::flush_frame(uint32_t f) {
    if (f >= r_.frame_count()) return false;
    FrameHeader& h = r_.header(f);
    if (!h.dirty.load(std::memory_order_acquire)) return false;
    h.lock();  // we hold no other frame lock
    FrameState s = h.get_state();
    bool wrote = false;
    if (h.dirty.load(std::memory_order_relaxed) && h.gaddr.load(std::memory_order_relaxed) != kNullGAddr &&
        s != FrameState::kFree)
        wrote = write_back_locked(f) ;
    h.unlock_unchanged();
    return wrote;
}

uint64_t Cache::flush_frames(const std::vector<uint32_t>& frames) {
    constexpr size_t kBatch = kFlushBatch;  // frames locked at a time (others may wait for them)
    uint64_t written = 0;
    std::vector<uint32_t> single;  // busy, not a leaf, or not written by the batch
    std::vector<uint32_t> held;
    std::vector<Node> imgs;
    for (size_t b = 0; b < frames.size() && write_back_many_; b += kBatch) {
        held.clear();
        for (size_t i = b; i < std::min(frames.size(), b + kBatch); i++) {
            uint32_t f = frames[i];
            if (f >= r_.frame_count()) continue;
            FrameHeader& h = r_.header(f);
            if (!h.dirty.load(std::memory_order_acquire)) continue;
            if (!h.try_lock()) {  // never wait for a frame while holding others
                single.push_back(f);
                continue;
            }
            if (!h.dirty.load(std::memory_order_relaxed) || h.gaddr.load(std::memory_order_relaxed) == kNullGAddr ||
                h.get_state() == FrameState::kFree || r_.node(f)->level != 0) {
                h.unlock_unchanged();
                if (h.dirty.load(std::memory_order_relaxed)) single.push_back(f);
                continue;
            }
            held.push_back(f);
        }
        if (held.empty()) continue;
        imgs.resize(held.size());
        for (size_t i = 0; i < held.size(); i++) r_.copy_unswizzled(held[i], imgs[i]);
        std::unique_ptr<bool[]> ok(new bool[held.size()]());
        write_back_many_(held.data(), imgs.data(), held.size(), ok.get());
        for (size_t i = 0; i < held.size(); i++) {
            FrameHeader& h = r_.header(held[i]);
            if (!ok[i]) {
                h.unlock_unchanged();
                single.push_back(held[i]);
                continue;
            }
            // A leaf has no swizzled pointers: the published image is the
            // frame's, with the version remote memory has now.
            std::memcpy(static_cast<void*>(r_.node(held[i])), &imgs[i], kNodeSize);
            r_.mark_clean(held[i]);
            h.unlock();
            written++;
        }
    }
    if (!write_back_many_) single = frames;
    for (uint32_t f : single)
        if (flush_frame(f)) written++;
    return written;
}

bool Cache::cool_frame(uint32_t c) {
    FrameHeader& h = r_.header(c);
    uint32_t p = h.parent.load(std::memory_order_acquire);
    if (p != kNoFrame && (p >= r_.frame_count() || !r_.header(p).try_lock())) return false;
    if (!h.try_lock()) {
        if (p != kNoFrame) r_.header(p).unlock_unchanged();
        return false;
    }
    bool ok = h.get_state() == FrameState::kHot && h.pins.load(std::memory_order_seq_cst) == 0 &&
              h.swizzled_children.load(std::memory_order_relaxed) == 0 &&
              h.parent.load(std::memory_order_relaxed) == p;
    int slot = -1;
    if (ok && p != kNoFrame) {
        const Node* pn = r_.node(p);
        for (uint32_t i = 0, n = CacheRegion::entries_in_use(pn); i < n; i++)
            if (CacheRegion::load_child(pn, i) == swizzled_ref(c)) {
                slot = static_cast<int>(i);
                break;
            }
        ok = slot >= 0;
    }
    if (!ok) {
        h.unlock_unchanged();
        if (p != kNoFrame) r_.header(p).unlock_unchanged();
        return false;
    }
    // Written back before it becomes an eviction candidate (the paper's
    // choice); a failed write-back keeps the frame hot and dirty.
    if (!write_back_locked(c)) {
        h.unlock_unchanged();
        if (p != kNoFrame) r_.header(p).unlock_unchanged();
        return false;
    }
    // Unswizzle proactively (DEX 5.2): the evicter then needs no parent.
    if (p != kNoFrame) {
        CacheRegion::store_child(r_.node(p), static_cast<uint32_t>(slot), h.gaddr.load(std::memory_order_relaxed));
        r_.header(p).swizzled_children.fetch_sub(1, std::memory_order_relaxed);
        h.parent.store(kNoFrame, std::memory_order_relaxed);
    }
    uint32_t victim;
    {
        CoolingMap::Locked b(r_.cooling(), r_.cooling().bucket_of(h.gaddr.load(std::memory_order_relaxed)));
        victim = b.push_back(c);
        h.set_state(FrameState::kCooling);
        if (victim != kNoFrame) r_.header(victim).set_state(FrameState::kEvicting);
    }
    h.unlock_unchanged();
    if (p != kNoFrame) r_.header(p).unlock();
    Stats::add(stats().coolings);
    if (victim != kNoFrame && finish_evict(victim)) free_.push_back(victim);
    return true;
}

// ---- eviction ----------------------------------------------------------------

uint32_t Cache::evict_oldest(uint32_t bucket) {
    uint32_t v;
    {
        CoolingMap::Locked b(r_.cooling(), bucket);
        v = b.pop_front();
        if (v == kNoFrame) return kNoFrame;
        r_.header(v).set_state(FrameState::kEvicting);
    }
    if (!finish_evict(v)) return kNoFrame;
    free_.push_back(v);
    return v;
}

bool Cache::finish_evict(uint32_t f) {
    FrameHeader& h = r_.header(f);
    h.lock();  // we hold no other lock here
    std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with CacheRegion::pin
    if (h.pins.load(std::memory_order_seq_cst) > 0 || h.swizzled_children.load(std::memory_order_relaxed) > 0) {
        h.set_state(FrameState::kHot);  // pinned meanwhile: out of cooling, stays cached
        h.unlock_unchanged();
        return false;
    }
    if (!write_back_locked(f)) {  // could not write it: keep it (hot, dirty)
        h.set_state(FrameState::kHot);
        h.unlock_unchanged();
        return false;
    }
    r_.table().erase(h.gaddr.load(std::memory_order_relaxed), f);
    h.gaddr.store(kNullGAddr, std::memory_order_relaxed);
    h.parent.store(kNoFrame, std::memory_order_relaxed);
    h.set_state(FrameState::kFree);
    h.unlock_obsolete();
    Stats::add(stats().evictions);
    return true;
}

size_t Cache::invalidate_if(const std::function<bool(const FrameInfo&)>& pred) {
    std::vector<std::pair<uint8_t, GAddr>> victims;
    r_.for_each_frame([&](const FrameInfo& i) {
        if (i.gaddr != kNullGAddr && !gaddr_is_swizzled(i.gaddr) && pred(i)) victims.emplace_back(i.level, i.gaddr);
    });
    // Leaves first: a parent loses its swizzled children before its own turn.
    std::sort(victims.begin(), victims.end());
    size_t left = 0;
    for (const auto& [level, g] : victims) {
        bool gone = false;
        unsigned spin = 0;
        for (int round = 0; round < 200 && !gone; round++) {
            uint32_t f = r_.table().lookup(g);
            if (f == kNoFrame) {
                gone = true;
                break;
            }
            if (f == MappingTable::kIoInProgress) {  // being (re)admitted: not ours to drop
                gone = true;
                break;
            }
            FrameHeader& h = r_.header(f);
            if (h.swizzled_children.load(std::memory_order_acquire) > 0) {
                h.lock();  // we hold no other frame lock
                bool changed = h.gaddr.load(std::memory_order_relaxed) == g && r_.unswizzle_all(f) > 0;
                if (changed) h.unlock();
                else h.unlock_unchanged();
            }
            if (invalidate(g, false)) {
                gone = true;
                break;
            }
            spin_backoff(spin);
        }
        if (!gone) left++;
    }
    return left;
}

bool Cache::invalidate(GAddr g, bool write_back) {
    for (int attempt = 0; attempt < 1000; attempt++) {
        uint32_t f = r_.table().lookup(g);
        if (f == kNoFrame || f == MappingTable::kIoInProgress) return f == kNoFrame;
        FrameHeader& h = r_.header(f);
        if (write_back && h.dirty.load(std::memory_order_acquire)) {
            // Written back under the frame's latch alone, then dropped clean:
            // a write-back may wait for the leaf's remote lock (up to 1 s,
            // tree::kLatchedWriteBackMs; dex.op_timeout until 2026-12-02), and
            // the parent's latch held meanwhile made every descent through the
            // parent restart and a subtree migration (which holds the leaf's
            // remote lock) spin for it -- a cycle.
            h.lock();  // we hold nothing else
            const bool ok = h.gaddr.load(std::memory_order_relaxed) != g || write_back_locked(f);
            h.unlock_unchanged();
            if (!ok) return false;
            continue;
        }
        uint32_t p = h.parent.load(std::memory_order_acquire);
        if (p != kNoFrame) r_.header(p).lock();  // parent before child; we hold nothing else
        h.lock();
        auto unlock_all = [&] {
            h.unlock_unchanged();
            if (p != kNoFrame) r_.header(p).unlock_unchanged();
        };
        if (h.gaddr.load(std::memory_order_relaxed) != g || h.parent.load(std::memory_order_relaxed) != p) {
            unlock_all();  // changed under us: retry
            continue;
        }
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (h.pins.load(std::memory_order_seq_cst) > 0 || h.swizzled_children.load(std::memory_order_relaxed) > 0) {
            unlock_all();
            return false;
        }
        // A dirty frame (write-back mode) is written back first, above
        // (write_back = false: the node is gone, e.g. its namespace was
        // dropped); dirtied again since: once more, never under the parent's latch.
        if (write_back && h.dirty.load(std::memory_order_relaxed)) {
            unlock_all();
            continue;
        }
        FrameState s = h.get_state();
        if (s == FrameState::kCooling) {
            CoolingMap::Locked b(r_.cooling(), r_.cooling().bucket_of(g));
            if (!b.remove(f)) s = FrameState::kEvicting;  // an evicter took it meanwhile
        }
        if (s != FrameState::kHot && s != FrameState::kCooling) {
            unlock_all();  // an evicter owns it and will unmap it
            return true;
        }
        bool parent_changed = false;
        if (p != kNoFrame) {
            Node* pn = r_.node(p);
            for (uint32_t i = 0, n = CacheRegion::entries_in_use(pn); i < n; i++)
                if (CacheRegion::load_child(pn, i) == swizzled_ref(f)) {
                    CacheRegion::store_child(pn, i, g);
                    r_.header(p).swizzled_children.fetch_sub(1, std::memory_order_relaxed);
                    parent_changed = true;
                    break;
                }
        }
        r_.mark_clean(f);  // written back, or the node is gone (write_back = false); counted before unmapping
        r_.table().erase(g, f);
        h.gaddr.store(kNullGAddr, std::memory_order_relaxed);
        h.parent.store(kNoFrame, std::memory_order_relaxed);
        h.set_state(FrameState::kFree);
        h.unlock_obsolete();
        if (p != kNoFrame) {
            if (parent_changed) r_.header(p).unlock();
            else r_.header(p).unlock_unchanged();
        }
        free_.push_back(f);
        Stats::add(stats().evictions);
        return true;
    }
    return false;
}

}  // namespace dex::cache
