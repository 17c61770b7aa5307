// C API (dex_capi.h), process-wide setup: memory-node configuration,
// interrupts, statistics, per-process hooks. Thin wrappers over
// dex::cluster::ComputeProcess; no exception leaves this file.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include "capi/capi_internal.h"
#include "common/stats.h"
#include "tree/btree.h"

using dex::capi::guarded;
using dex::capi::proc;

static_assert(sizeof(DexStatsSnapshot) == dex::Stats::kCount * sizeof(uint64_t),
              "DexStatsSnapshot is one uint64_t per counter of common/stats_list.h");

namespace {

std::atomic<int (*)(void)> g_interrupt_fn{nullptr};
bool interrupt_trampoline() {
    int (*fn)(void) = g_interrupt_fn.load(std::memory_order_acquire);
    return fn != nullptr && fn() != 0;
}

// dex.crash_at: the point's name (a fixed buffer: the hook runs deep inside
// tree code, where nothing may allocate or throw). One backend's setting.
char g_crash_point[64];

void crash_hook(const char* point) {
    if (g_crash_point[0] == '\0' || std::strcmp(point, g_crash_point) != 0) return;
    char line[128];
    const int n = snprintf(line, sizeof line, "dex: crash_at \"%s\" reached: SIGKILL\n", point);
    if (n > 0) (void)!::write(STDERR_FILENO, line, static_cast<size_t>(n));
    ::kill(::getpid(), SIGKILL);
}

}  // namespace

extern "C" {

void dex_set_crash_point(const char* point) {
    if (!point || !*point) {
        g_crash_point[0] = '\0';
        dex::tree::set_test_hook(nullptr);
        return;
    }
    snprintf(g_crash_point, sizeof g_crash_point, "%s", point);
    dex::tree::set_test_hook(crash_hook);
}

int dex_configure(const char* memnodes, const char* token, int connect_timeout_ms, int op_timeout_ms,
                  DexError* err) {
    return guarded(err, [&] {
        proc().client().configure(memnodes, token ? token : "", connect_timeout_ms, op_timeout_ms);
    });
}

int dex_memnode_count(void) { return static_cast<int>(proc().client().count()); }

const char* dex_memnode_address(int node) { return proc().client().address(node); }

void dex_set_interrupt_check(int (*fn)(void)) {
    g_interrupt_fn.store(fn, std::memory_order_release);
    dex::set_interrupt_check(fn ? &interrupt_trampoline : nullptr);
}

size_t dex_stats_shmem_size(void) { return sizeof(dex::Stats); }

void dex_stats_attach(void* mem, int initialize) { proc().attach_stats(mem, initialize != 0); }

void dex_stats_read(DexStatsSnapshot* out) {
    if (!out) return;
    dex::Stats& s = dex::stats();
#define DEX_STATS_READ(name, description) out->name = s.name.load(std::memory_order_relaxed);
    DEX_STATS_COUNTERS(DEX_STATS_READ)
#undef DEX_STATS_READ
}

void dex_stats_reset(void) { dex::stats().reset(); }

void dex_stats_count_deferred_kills(int n) {
    if (n > 0) dex::Stats::add(dex::stats().kills_deferred, static_cast<uint64_t>(n));
}

void dex_stats_count_standby_wb_scan(int waited) {
    dex::Stats::add(dex::stats().standby_wb_scans, 1);
    if (waited) dex::Stats::add(dex::stats().standby_wb_waits, 1);
}

void dex_stats_private(int on) { proc().stats_private(on != 0); }

void dex_disconnect_all(void) {
    try {
        proc().client().disconnect_all();
    } catch (...) {
    }
}

void dex_set_offload_mode(int mode) {
    proc().set_offload_mode(mode == DEX_OFFLOAD_ON    ? dex::tree::OffloadMode::kOn
                            : mode == DEX_OFFLOAD_OFF ? dex::tree::OffloadMode::kOff
                                                      : dex::tree::OffloadMode::kAuto);
}

void dex_set_durable_lsn_fn(uint64_t (*fn)(void)) { dex::tree::set_durable_lsn_source(fn); }

void dex_set_change_log_fn(void (*fn)(const uint64_t*, size_t)) { proc().set_change_log(fn); }

}  // extern "C"
