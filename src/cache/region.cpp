#include "cache/region.h"

#include <cstring>
#include <new>

#include "common/error.h"
#include "common/stats.h"

namespace dex::cache {

namespace {
constexpr uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
constexpr size_t kAlign = 64;
constexpr uint32_t kMinFrames = 4;
// Byte offset of inner slot i's child pointer in either layout
// (tree/node_format.h), always 8-aligned. The layout flag is read racily like
// the rest of a frame; any offset below a layout's slot limit is inside the node.
size_t child_off(const Node* n, uint32_t i) {
    return tree::child_offset((__atomic_load_n(&n->flags, __ATOMIC_RELAXED) & kNodeSlotted) != 0, i);
}
static_assert(tree::child_offset(false, 0) % 8 == 0 && sizeof(InnerEntry) % 8 == 0);
static_assert(tree::child_offset(true, 0) % 8 == 0 && DEX_SLOTTED_INNER_SLOT_BYTES % 8 == 0);
static_assert(tree::child_offset(false, kInnerCapacity - 1) + 8 <= kNodeSize &&
              tree::child_offset(true, DEX_SLOTTED_MAX_INNER_SLOTS - 1) + 8 <= kNodeSize);

char* aligned_base(void* mem) {
    return reinterpret_cast<char*>(align_up(reinterpret_cast<uintptr_t>(mem), kAlign));
}
}  // namespace

const char* state_name(FrameState s) {
    switch (s) {
        case FrameState::kFree: return "free";
        case FrameState::kHot: return "hot";
        case FrameState::kCooling: return "cooling";
        case FrameState::kIo: return "io";
        case FrameState::kEvicting: return "evicting";
    }
    return "?";
}

CacheRegion::Layout CacheRegion::layout_for(uint32_t frames) {
    Layout l{};
    MappingTable::size_for(frames, &l.buckets, &l.entries);
    l.cooling_buckets = CoolingMap::buckets_for(frames);
    l.headers_off = align_up(sizeof(CacheRegion), kAlign);
    l.nodes_off = align_up(l.headers_off + uint64_t(frames) * sizeof(FrameHeader), kAlign);
    l.table_off = align_up(l.nodes_off + uint64_t(frames) * kNodeSize, kAlign);
    l.cooling_off = align_up(l.table_off + MappingTable::bytes_for(l.buckets, l.entries), kAlign);
    l.total = l.cooling_off + CoolingMap::bytes_for(l.cooling_buckets);
    return l;
}

uint32_t CacheRegion::frames_for(size_t cache_bytes) {
    uint64_t f = cache_bytes / kNodeSize;
    if (f < kMinFrames) f = kMinFrames;
    if (f > (1u << 30)) f = 1u << 30;  // frame indices must stay below kIoInProgress
    return static_cast<uint32_t>(f);
}

size_t CacheRegion::bytes_for(size_t cache_bytes) { return layout_for(frames_for(cache_bytes)).total + kAlign; }

CacheRegion* CacheRegion::init(void* mem, size_t bytes, AdmissionPolicy policy) {
    char* base = aligned_base(mem);
    size_t slack = static_cast<size_t>(base - static_cast<char*>(mem));
    if (bytes < slack) throw Error(ErrorCode::kInvalid, "node cache: region too small");
    size_t avail = bytes - slack;
    // Largest frame count that fits (the layout grows strictly with frames).
    uint64_t lo = 0, hi = avail / kNodeSize + 1;
    while (lo + 1 < hi) {
        uint64_t mid = (lo + hi) / 2;
        if (mid <= (1u << 30) && layout_for(static_cast<uint32_t>(mid)).total <= avail) lo = mid;
        else hi = mid;
    }
    if (lo < kMinFrames)
        throw Error(ErrorCode::kInvalid, "node cache: region of " + std::to_string(bytes) +
                                             " bytes holds fewer than 4 frames");
    uint32_t frames = static_cast<uint32_t>(lo);
    Layout l = layout_for(frames);

    auto* r = new (base) CacheRegion();
    r->nframes_ = frames;
    r->cache_leaves_ = policy.cache_leaves ? 1 : 0;
    r->leaf_admission_ = policy.leaf_admission;
    r->headers_off_ = l.headers_off;
    r->nodes_off_ = l.nodes_off;
    r->table_off_ = l.table_off;
    r->cooling_off_ = l.cooling_off;
    r->total_ = l.total;
    for (uint32_t f = 0; f < frames; f++) new (&r->headers()[f]) FrameHeader();
    std::memset(base + l.nodes_off, 0, uint64_t(frames) * kNodeSize);
    MappingTable::init(base + l.table_off, l.buckets, l.entries);
    CoolingMap::init(base + l.cooling_off, l.cooling_buckets);
    std::atomic_thread_fence(std::memory_order_release);
    r->magic_ = kMagic;
    return r;
}

CacheRegion* CacheRegion::attach(void* mem) {
    auto* r = reinterpret_cast<CacheRegion*>(aligned_base(mem));
    if (r->magic_ != kMagic) throw Error(ErrorCode::kInvalid, "node cache: no cache region at this address");
    return r;
}

// ---- lookup / optimistic reads / second chance -------------------------------

uint32_t CacheRegion::lookup(GAddr g) {
    uint32_t v = table().lookup(g);
    if (v == MappingTable::kIoInProgress) return v;
    Stats::add(v == kNoFrame ? stats().cache_misses : stats().cache_hits);
    return v;
}

uint64_t CacheRegion::begin_read(uint32_t f, GAddr g) {
    FrameHeader& h = header(f);
    uint64_t v = h.begin_read();
    if (v == FrameHeader::kRestart) return v;
    if (h.gaddr.load(std::memory_order_acquire) != g || !h.validate(v)) return FrameHeader::kRestart;
    return v;
}

bool CacheRegion::touch(uint32_t f, GAddr g) {
    FrameHeader& h = header(f);
    FrameState s = h.get_state();
    if (s == FrameState::kHot) return h.gaddr.load(std::memory_order_acquire) == g;
    if (s != FrameState::kCooling) return false;
    CoolingMap::Locked b(cooling(), cooling().bucket_of(g));
    // Under the bucket lock, membership means "cooling", and a cooling frame's
    // GAddr cannot change (that needs eviction, which takes this lock).
    if (!b.contains(f)) return h.get_state() == FrameState::kHot && h.gaddr.load() == g;
    if (h.gaddr.load(std::memory_order_acquire) != g) return false;
    b.remove(f);
    h.set_state(FrameState::kHot);
    return true;
}

// ---- swizzling ---------------------------------------------------------------

GAddr CacheRegion::load_child(const Node* n, uint32_t i) {
    return __atomic_load_n(reinterpret_cast<const uint64_t*>(reinterpret_cast<const char*>(n) + child_off(n, i)),
                           __ATOMIC_RELAXED);
}

void CacheRegion::store_child(Node* n, uint32_t i, GAddr v) {
    __atomic_store_n(reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(n) + child_off(n, i)), v, __ATOMIC_RELAXED);
}

bool CacheRegion::swizzle(uint32_t parent, uint16_t slot, uint32_t child) {
    FrameHeader& p = header(parent);
    FrameHeader& c = header(child);
    Node* pn = node(parent);
    if (parent == child || pn->level == 0 || slot >= pn->count || slot >= slot_limit(pn)) return false;
    GAddr cur = load_child(pn, slot);
    if (gaddr_is_swizzled(cur)) return swizzled_frame(cur) == child;
    if (p.get_state() != FrameState::kHot) return false;
    c.lock();
    bool ok = c.get_state() == FrameState::kHot && c.parent.load(std::memory_order_relaxed) == kNoFrame &&
              c.gaddr.load(std::memory_order_relaxed) == cur &&
              c.level.load(std::memory_order_relaxed) + 1 == pn->level;
    if (ok) {
        store_child(pn, slot, swizzled_ref(child));
        c.parent.store(parent, std::memory_order_relaxed);
        p.swizzled_children.fetch_add(1, std::memory_order_relaxed);
    }
    c.unlock_unchanged();
    return ok;
}

bool CacheRegion::swizzle_optimistic(uint32_t parent, uint64_t pv, uint16_t slot, uint32_t child) {
    FrameHeader& p = header(parent);
    if (!p.try_upgrade(pv)) return false;
    bool ok = swizzle(parent, slot, child);
    p.unlock();
    return ok;
}

bool CacheRegion::unswizzle(uint32_t parent, uint16_t slot) {
    Node* pn = node(parent);
    if (pn->level == 0 || slot >= slot_limit(pn)) return false;
    GAddr cur = load_child(pn, slot);
    if (!gaddr_is_swizzled(cur)) return false;
    FrameHeader& c = header(swizzled_frame(cur));
    c.lock();
    store_child(pn, slot, c.gaddr.load(std::memory_order_relaxed));
    c.parent.store(kNoFrame, std::memory_order_relaxed);
    header(parent).swizzled_children.fetch_sub(1, std::memory_order_relaxed);
    c.unlock_unchanged();
    return true;
}

uint32_t CacheRegion::unswizzle_all(uint32_t parent) {
    uint32_t n = 0;
    const uint32_t slots = child_slots(node(parent));
    for (uint32_t i = 0; i < slots && header(parent).swizzled_children.load() > 0; i++)
        if (unswizzle(parent, static_cast<uint16_t>(i))) n++;
    return n;
}

void CacheRegion::copy_unswizzled(uint32_t f, Node& out) {
    std::memcpy(&out, node(f), kNodeSize);
    if (out.level == 0) return;
    // child_slots(): a fixed node's stale copies past count included.
    for (uint32_t i = 0, slots = child_slots(&out); i < slots; i++) {
        GAddr c = load_child(&out, i);
        if (gaddr_is_swizzled(c) && swizzled_frame(c) < nframes_)
            store_child(&out, i, header(swizzled_frame(c)).gaddr.load(std::memory_order_acquire));
    }
}

// ---- pinning -----------------------------------------------------------------

bool CacheRegion::pin(uint32_t f, GAddr g) {
    FrameHeader& h = header(f);
    // Dekker handshake with Cache::finish_evict: we publish the pin, then look
    // at the lock word; the evicter takes the lock, then looks at the pins. One
    // of the two sees the other.
    h.pins.fetch_add(1, std::memory_order_seq_cst);
    for (unsigned attempt = 0;;) {
        uint64_t v = h.version.load(std::memory_order_seq_cst);
        if (v & kVerLocked) {
            spin_backoff(attempt);
            continue;
        }
        bool ok = !(v & kVerObsolete) && h.gaddr.load(std::memory_order_acquire) == g;
        if (h.version.load(std::memory_order_acquire) != v) continue;
        if (!ok) {
            unpin(f);
            return false;
        }
        break;
    }
    if (h.get_state() == FrameState::kCooling) touch(f, g);
    return true;
}

// ---- census ------------------------------------------------------------------

void CacheRegion::for_each_frame(const std::function<void(const FrameInfo&)>& fn) {
    uint32_t used = used_frames();
    for (uint32_t f = 0; f < used; f++) {
        FrameHeader& h = header(f);
        FrameInfo info{};
        info.frame = f;
        info.state = h.get_state();
        if (info.state == FrameState::kFree) continue;
        Node* n = node(f);
        for (int attempt = 0; attempt < 8; attempt++) {
            uint64_t v = h.version.load(std::memory_order_acquire);
            info.gaddr = h.gaddr.load(std::memory_order_relaxed);
            info.tree_id = __atomic_load_n(&n->tree_id, __ATOMIC_RELAXED);
            info.level = __atomic_load_n(&n->level, __ATOMIC_RELAXED);
            if (!(v & kVerLocked) && h.validate(v)) break;
        }
        info.dirty = h.dirty.load(std::memory_order_relaxed) != 0;
        info.pins = h.pins.load(std::memory_order_relaxed);
        fn(info);
    }
}

// ---- write-back mode: paused ---------------------------------------------------

void CacheRegion::pause_write_back(uint32_t why) {
    wb_paused_.fetch_or(why, std::memory_order_seq_cst);
    // Every lock taken after the store sees it; a holder that read the flag
    // before it is waited for here (the lock's release/acquire carries its
    // dirty mark to whoever scans the frame next).
    uint32_t used = used_frames();
    for (uint32_t f = 0; f < used; f++) {
        FrameHeader& h = header(f);
        h.lock();
        h.unlock_unchanged();
    }
}

// ---- free frames -------------------------------------------------------------

uint32_t CacheRegion::take_unused() {
    if (next_unused_.load(std::memory_order_relaxed) >= nframes_) return kNoFrame;
    uint32_t f = next_unused_.fetch_add(1, std::memory_order_relaxed);
    if (f >= nframes_) {
        next_unused_.store(nframes_, std::memory_order_relaxed);  // keep the cursor from wrapping
        return kNoFrame;
    }
    return f;
}

void CacheRegion::push_free(uint32_t f) {
    FrameHeader* h = headers();
    free_.push(f, [h](uint32_t i) -> std::atomic<uint32_t>& { return h[i].next_free; });
}

uint32_t CacheRegion::pop_free() {
    FrameHeader* h = headers();
    uint32_t f = free_.pop([h](uint32_t i) -> std::atomic<uint32_t>& { return h[i].next_free; });
    return f == IndexStack::kNil ? kNoFrame : f;
}

}  // namespace dex::cache
