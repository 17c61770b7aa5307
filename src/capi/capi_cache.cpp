// C API (dex_capi.h), the shared node cache: its shared-memory block, this
// process's handle and policy, statistics, write-back flushes. Thin wrappers
// over dex::cluster::ComputeProcess and dex::cache::SharedCache; no exception
// leaves this file.
#include <cstdlib>

#include "capi/capi_internal.h"

using dex::capi::guarded;
using dex::capi::proc;
using dex::Error;
using dex::ErrorCode;

extern "C" {

size_t dex_cache_shmem_size(uint64_t cache_bytes) {
    if (cache_bytes == 0) return 0;
    try {
        return dex::cache::SharedCache::bytes_for(cache_bytes);
    } catch (...) {
        return 0;
    }
}

int dex_cache_attach(void* mem, uint64_t cache_bytes, int initialize, DexError* err) {
    return guarded(err, [&] { proc().attach_cache(mem, cache_bytes, initialize != 0); });
}

void dex_cache_set_policy(double leaf_admission, int cache_leaves) {
    dex::cache::AdmissionPolicy p = proc().cache().policy();
    p.leaf_admission = leaf_admission < 0 ? 0 : leaf_admission > 1 ? 1 : leaf_admission;
    p.cache_leaves = cache_leaves != 0;
    proc().cache().set_policy(p);
}

void dex_cache_detach(void) {
    try {
        proc().cache().detach_process();
    } catch (...) {
    }
}

int dex_cache_enabled(void) { return proc().cache().enabled(); }

int dex_cache_census(DexCacheCensusRow** rows, int* n, DexError* err) {
    if (rows) *rows = nullptr;
    if (n) *n = 0;
    return guarded(err, [&] {
        if (!rows || !n) throw Error(ErrorCode::kInvalid, "dex_cache_census: NULL argument");
        if (!proc().cache().enabled()) return;
        std::vector<dex::cache::CensusRow> census = proc().cache().census();
        auto* arr = dex::capi::malloc_array<DexCacheCensusRow>(census.size());
        for (size_t k = 0; k < census.size(); k++) {
            const dex::cache::CensusRow& r = census[k];
            arr[k] = DexCacheCensusRow{r.node, r.tree_id, r.level, r.frames, r.cooling, r.dirty};
        }
        *rows = arr;
        *n = static_cast<int>(census.size());
    });
}

void dex_cache_forget_nodes(const uint64_t* nodes, size_t n) {
    try {
        proc().forget_nodes(nodes, n);
    } catch (...) {
    }
}

int dex_cache_flush(uint64_t* written, DexError* err) {
    if (written) *written = 0;
    return guarded(err, [&] {
        uint64_t w = proc().flush_all();
        if (written) *written = w;
    });
}

uint64_t dex_cache_dirty_lsn(void) {
    try {
        return proc().cache().dirty_lsn_max(0, true);
    } catch (...) {
        return 0;
    }
}

uint64_t dex_cache_generation(void) { return proc().cache().generation(); }

void dex_cache_drain_before(uint64_t lsn) {
    try {
        if (dex::cache::CacheRegion* r = proc().cache().region()) r->raise_drain_before(lsn);
    } catch (...) {
    }
}

static_assert(DEX_WB_PAUSE_NO_FENCE == dex::cache::CacheRegion::kPauseNoFence &&
                  DEX_WB_PAUSE_STANDBY == dex::cache::CacheRegion::kPauseStandby,
              "the C API's pause reasons are the region's bits");

void dex_cache_pause_write_back(int why, int paused) {
    try {
        dex::cache::CacheRegion* r = proc().cache().region();
        if (!r) return;
        if (paused)
            r->pause_write_back(static_cast<uint32_t>(why));
        else
            r->resume_write_back(static_cast<uint32_t>(why));
    } catch (...) {
    }
}

int dex_cache_write_back_paused(void) {
    try {
        dex::cache::CacheRegion* r = proc().cache().region();
        return r ? static_cast<int>(r->write_back_pause_reasons()) : 0;
    } catch (...) {
        return 0;
    }
}

uint64_t dex_cache_dirty_since_min(void) {
    try {
        return proc().cache().dirty_since_min();
    } catch (...) {
        return 0;  // unknown: promise nothing
    }
}

uint64_t dex_cache_crash_since_min(void) {
    try {
        return proc().cache().crash_since_min();
    } catch (...) {
        return 0;  // unknown: promise nothing
    }
}

int dex_cache_log_dirty_images(DexImageLogFn fn, uint64_t* logged, DexError* err) {
    if (logged) *logged = 0;
    return guarded(err, [&] {
        if (!fn) throw dex::Error(dex::ErrorCode::kInvalid, "dex_cache_log_dirty_images: NULL function");
        uint64_t n = proc().cache().log_images([fn](int32_t node, uint64_t ns, const dex::Node& img) {
            return fn(static_cast<uint32_t>(node), ns, reinterpret_cast<const uint8_t*>(&img),
                      static_cast<uint32_t>(dex::kNodeSize));
        });
        if (logged) *logged = n;
    });
}

void dex_set_log_position_fn(uint64_t (*fn)(void)) { proc().set_log_position(fn); }

}  // extern "C"
