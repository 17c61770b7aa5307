// C API (dex_capi.h), the cluster registry (src/cluster/registry.h) through
// which a primary and its standbys coordinate. Thin wrappers; no exception
// leaves this file.
#include <cstring>

#include "capi/capi_internal.h"
#include "cluster/registry.h"
#include "common/stats.h"

using dex::capi::guarded;
using dex::capi::proc;
using dex::Error;
using dex::ErrorCode;
using dex::cluster::Registry;

static_assert(DEX_MAX_STANDBYS == dex::cluster::kMaxStandbys && DEX_SLOT_EXPIRED == dex::cluster::kExpired &&
              DEX_SLOT_DETACHED == dex::cluster::kDetached);
static_assert(DEX_MAX_ADOPTED == dex::cluster::kMaxAdopted && DEX_WRITER_MOVED == dex::cluster::kWriterMoved);
static_assert(sizeof(DexStandbySlot) == sizeof(dex::cluster::StandbySlot));

extern "C" {

int dex_registry_open(int node, uint64_t ns, int create, uint64_t floor_lsn, uint64_t* addr, DexError* err) {
    if (addr) *addr = 0;
    return guarded(err, [&] {
        if (!addr || node < 0) throw Error(ErrorCode::kInvalid, "dex_registry_open: invalid arguments");
        *addr = Registry::open(proc().mem(), static_cast<uint32_t>(node), ns, create != 0, floor_lsn);
    });
}

namespace {
void fill_state(const dex::cluster::RegistryHeader& h, DexRegistryState* out) {
    out->writer_life = h.writer_life;
    out->writer_beat = h.writer_beat;
    out->writer_hwm = h.writer_hwm;
    out->removal_lsn = h.removal_lsn;
    out->writer_tli = h.writer_tli;
    out->flush_request_lsn = h.flush_request_lsn;
    std::memcpy(out->slots, h.slots, sizeof out->slots);
    out->moved_to = h.moved_to;
    std::memcpy(out->adopted, h.adopted, sizeof out->adopted);
}
}  // namespace

int dex_registry_read(uint64_t addr, DexRegistryState* out, DexError* err) {
    return guarded(err, [&] {
        if (!out || !addr) throw Error(ErrorCode::kInvalid, "dex_registry_read: no registry");
        fill_state(Registry(proc().mem(), addr).read(), out);
    });
}

int dex_registry_raise_removal_read(uint64_t addr, uint64_t lsn, DexRegistryState* out, DexError* err) {
    return guarded(err, [&] {
        if (!out || !addr) throw Error(ErrorCode::kInvalid, "dex_registry_raise_removal_read: no registry");
        fill_state(Registry(proc().mem(), addr).raise_removal_and_read(lsn), out);
    });
}

int dex_registry_fence_moved(uint64_t addr, uint64_t expected_life, uint64_t sysid, int* done, DexError* err) {
    if (done) *done = 0;
    return guarded(err, [&] {
        bool d = Registry(proc().mem(), addr).fence_moved(expected_life, sysid);
        if (done) *done = d ? 1 : 0;
    });
}

int dex_registry_add_adopted(uint64_t addr, uint64_t sysid, int* done, DexError* err) {
    if (done) *done = 0;
    return guarded(err, [&] {
        bool d = Registry(proc().mem(), addr).add_adopted(sysid);
        if (done) *done = d ? 1 : 0;
    });
}

int dex_registry_cas_writer(uint64_t addr, uint64_t expected, uint64_t life, uint64_t* seen, DexError* err) {
    return guarded(err, [&] {
        uint64_t v = Registry(proc().mem(), addr).cas_writer(expected, life);
        if (seen) *seen = v;
    });
}

int dex_registry_writer_beat(uint64_t addr, uint64_t beat, uint64_t hwm, uint32_t tli, DexError* err) {
    return guarded(err, [&] { Registry(proc().mem(), addr).writer_beat(beat, hwm, tli); });
}

int dex_registry_beat_read(uint64_t addr, uint64_t beat_from, uint64_t hwm, uint64_t lsn, DexRegistryState* out,
                           int* beat_done, DexError* err) {
    if (beat_done) *beat_done = 0;
    return guarded(err, [&] {
        if (!out || !addr) throw Error(ErrorCode::kInvalid, "dex_registry_beat_read: no registry");
        bool done = false;
        fill_state(Registry(proc().mem(), addr).beat_and_read(beat_from, hwm, lsn, &done), out);
        if (beat_done) *beat_done = done ? 1 : 0;
    });
}

int dex_registry_kill_allowed(uint64_t addr, uint64_t life, uint64_t lsn, int n, int* allowed, DexError* err) {
    if (allowed) *allowed = 0;
    return guarded(err, [&] {
        if (!addr || !allowed) throw Error(ErrorCode::kInvalid, "dex_registry_kill_allowed: no registry");
        *allowed = Registry(proc().mem(), addr).kill_allowed(life, lsn) ? 1 : 0;
        if (!*allowed && n > 0) dex::Stats::add(dex::stats().kills_refused, static_cast<uint64_t>(n));
    });
}

int dex_registry_set_removal_lsn(uint64_t addr, uint64_t lsn, DexError* err) {
    return guarded(err, [&] { Registry(proc().mem(), addr).set_removal_lsn(lsn); });
}

int dex_registry_request_flush(uint64_t addr, uint64_t lsn, DexError* err) {
    return guarded(err, [&] { Registry(proc().mem(), addr).request_flush(lsn); });
}

int dex_registry_raise_hwm(uint64_t addr, uint64_t lsn, DexError* err) {
    return guarded(err, [&] { Registry(proc().mem(), addr).raise_hwm(lsn); });
}

int dex_registry_expire_slot(uint64_t addr, int slot, uint64_t beat, int* done, DexError* err) {
    return guarded(err, [&] {
        bool d = Registry(proc().mem(), addr).expire_slot(static_cast<uint32_t>(slot), beat);
        if (done) *done = d ? 1 : 0;
    });
}

int dex_registry_detach_slot(uint64_t addr, int slot, uint64_t beat, int* done, DexError* err) {
    return guarded(err, [&] {
        bool d = Registry(proc().mem(), addr).detach_slot(static_cast<uint32_t>(slot), beat);
        if (done) *done = d ? 1 : 0;
    });
}

int dex_registry_claim_slot(uint64_t addr, uint64_t life, uint64_t replay_lsn, uint32_t tli, int* slot, uint64_t* beat,
                            DexError* err) {
    if (slot) *slot = -1;
    return guarded(err, [&] {
        uint64_t b = 0;
        int s = Registry(proc().mem(), addr).claim_slot(life, replay_lsn, tli, &b);
        if (slot) *slot = s;
        if (beat) *beat = b;
    });
}

int dex_registry_standby_beat(uint64_t addr, int slot, uint64_t life, uint64_t* beat, uint64_t replay_lsn, int* ok,
                              DexError* err) {
    if (ok) *ok = 0;
    return guarded(err, [&] {
        if (!beat) throw Error(ErrorCode::kInvalid, "dex_registry_standby_beat: NULL beat");
        bool r = Registry(proc().mem(), addr).standby_beat(static_cast<uint32_t>(slot), life, *beat, replay_lsn);
        if (ok) *ok = r ? 1 : 0;
    });
}

}  // extern "C"
