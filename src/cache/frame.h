// One cache page frame's header and its optimistic lock (OLC, Leis et al.,
// "The ART of Practical Synchronization", DaMoN 2016).
//
// The header lives in the shared cache region, so it holds only atomics and
// frame indices (never pointers). The node image itself (kNodeSize bytes) lives
// in a separate array of the region; see region.h.
//
// Version word:  bit 0 = locked (exclusive), bit 1 = obsolete, bits 2.. = counter.
//   Reader:  v = begin_read(); read what you need; validate(v). A locked or
//            obsolete word fails begin_read; any unlock in between fails validate.
//   Writer:  try_lock()/lock() (CAS on the word), modify, unlock() (counter + 1).
//            try_upgrade(v) turns a validated optimistic read into a lock.
//   unlock_unchanged(): release without a counter bump, only if the node image
//            was not modified (e.g. only header fields like `parent` changed),
//            so concurrent optimistic readers need not restart.
//   unlock_obsolete(): release and mark obsolete: the frame no longer holds the
//            node it held (evicted / invalidated). Readers that found the frame
//            through a stale mapping-table lookup or a stale swizzled pointer
//            fail their validation. A later admission clears the bit.
//
// What the version word protects: the node image, and the header fields gaddr,
// level, parent, swizzled_children, dirty, lsn (all changed only under the
// frame's exclusive lock). `state` is changed under the frame lock except for the
// COOLING -> HOT / COOLING -> EVICTING transitions, which happen under the
// frame's cooling-map bucket lock (see cooling_map.h). `pins` is a plain
// counter (see CacheRegion::pin for its handshake with eviction).
#pragma once
#include <atomic>
#include <cstdint>

#include "cache/spinlock.h"
#include "common/gaddr.h"

namespace dex::cache {

constexpr uint32_t kNoFrame = UINT32_MAX;

enum class FrameState : uint32_t {
    kFree = 0,      // in some process's free set / the shared free stack / never used
    kHot = 1,       // cached, mapped, not an eviction candidate
    kCooling = 2,   // cached, mapped, unswizzled from its parent, in a cooling-map bucket
    kIo = 3,        // owned by an admitting process (being filled)
    kEvicting = 4,  // taken out of its cooling bucket by an evicter, about to be freed
};
const char* state_name(FrameState s);

constexpr uint64_t kVerLocked = 1;
constexpr uint64_t kVerObsolete = 2;
constexpr uint64_t kVerStep = 4;

struct alignas(64) FrameHeader {
    std::atomic<uint64_t> version{kVerObsolete};
    std::atomic<uint64_t> gaddr{kNullGAddr};       // node held (unswizzled address)
    std::atomic<uint32_t> state{0};                // FrameState
    std::atomic<uint32_t> parent{kNoFrame};        // frame whose node holds a swizzled pointer to us
    std::atomic<uint32_t> swizzled_children{0};    // how many of our child pointers are swizzled
    std::atomic<uint32_t> pins{0};                 // > 0: never cooled nor evicted
    std::atomic<uint32_t> next_free{kNoFrame};     // link in the region's shared free stack
    std::atomic<uint8_t> level{0};                 // copy of the node's level (sampling without reading the image)
    std::atomic<uint8_t> dirty{0};                 // image differs from remote memory (write-back mode)
    // Dirty frame: highest heap-WAL position (LSN) of an entry changed in it
    // since it was last clean; it is written back only once the log is durable
    // that far (src/README.md "Crash survival"). 0 = nothing to wait for.
    std::atomic<uint64_t> lsn{0};
    // Dirty frame: the compute server's log position when it last became
    // dirty (TreeOptions::log_position); every change in it was logged later.
    // A flush that leaves it dirty can promise remote memory only up to here
    // (src/README.md "Write-back mode", redo after a crash).
    std::atomic<uint64_t> dirty_since{0};
    // Dirty frame: the log position at which its whole image was last logged
    // (a checkpoint that could not write it back, WritebackRegistry::
    // log_images); every change in it logged before that is in the image,
    // every later one was logged later. 0 = never since it became dirty.
    std::atomic<uint64_t> imaged_at{0};

    FrameState get_state() const { return static_cast<FrameState>(state.load(std::memory_order_acquire)); }
    void set_state(FrameState s) { state.store(static_cast<uint32_t>(s), std::memory_order_release); }

    // ---- optimistic lock coupling ----
    static constexpr uint64_t kRestart = ~0ull;
    // Version to validate against later, or kRestart if locked/obsolete.
    uint64_t begin_read() const {
        uint64_t v = version.load(std::memory_order_acquire);
        return (v & (kVerLocked | kVerObsolete)) ? kRestart : v;
    }
    // True if nothing was published since begin_read() returned v. The fence
    // orders the caller's (racy, relaxed) data reads before the re-read.
    bool validate(uint64_t v) const {
        std::atomic_thread_fence(std::memory_order_acquire);
        return v != kRestart && version.load(std::memory_order_relaxed) == v;
    }
    bool is_locked() const { return (version.load(std::memory_order_relaxed) & kVerLocked) != 0; }
    bool is_obsolete() const { return (version.load(std::memory_order_acquire) & kVerObsolete) != 0; }

    // Exclusive lock regardless of the obsolete bit (an owner re-using a free
    // frame locks an obsolete word). Returns the pre-lock word.
    bool try_lock(uint64_t* prev = nullptr) {
        uint64_t v = version.load(std::memory_order_relaxed);
        if (v & kVerLocked) return false;
        if (!version.compare_exchange_strong(v, v | kVerLocked, std::memory_order_acquire)) return false;
        if (prev) *prev = v;
        return true;
    }
    void lock() {
        unsigned attempt = 0;
        while (!try_lock()) spin_backoff(attempt);
    }
    // Upgrade an optimistic read (v from begin_read) to the exclusive lock.
    bool try_upgrade(uint64_t v) {
        return v != kRestart && version.compare_exchange_strong(v, v | kVerLocked, std::memory_order_acquire);
    }
    void unlock() {
        uint64_t v = version.load(std::memory_order_relaxed);
        version.store((v & ~(kVerLocked | kVerObsolete)) + kVerStep, std::memory_order_release);
    }
    void unlock_unchanged() {
        uint64_t v = version.load(std::memory_order_relaxed);
        version.store(v & ~kVerLocked, std::memory_order_release);
    }
    void unlock_obsolete() {
        uint64_t v = version.load(std::memory_order_relaxed);
        version.store(((v & ~(kVerLocked | kVerObsolete)) + kVerStep) | kVerObsolete, std::memory_order_release);
    }
};
static_assert(sizeof(FrameHeader) == 64);
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free &&
              std::atomic<uint8_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free (hence address-free)");

// A child pointer in a cached inner node: swizzled = kSwizzleBit | frame index.
constexpr GAddr swizzled_ref(uint32_t frame) { return kSwizzleBit | frame; }
constexpr uint32_t swizzled_frame(GAddr a) { return static_cast<uint32_t>(a & 0xffffffffu); }

}  // namespace dex::cache
