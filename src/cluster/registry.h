// THE definition of the cluster registry (src/README.md "Hot standbys"): the
// remote block through which the compute servers of one PostgreSQL cluster
// -- its primary and its hot standbys -- coordinate what WAL alone cannot
// tell them about the shared remote trees.
//
// It lives on the first memory node of dex.memnodes, in a namespace of its
// own (tagged by the cluster, so a standby finds it), at the namespace's root
// word. One writer -- the primary's life -- beats in it; every hot standby
// that reads dex indexes holds a slot in it and beats too:
//   - a standby reports how far it has replayed; the primary removes index
//     entries (VACUUM) only once every live standby has replayed past the
//     WAL that made them removable, and keeps an insert journaled until every
//     live standby has replayed its row (so a promoted standby can recover
//     the journal against its own heap);
//   - a standby answers dex queries only while its lease (renewed by its
//     beats) is valid: the primary stops waiting for a standby only after
//     that standby must have stopped answering;
//   - the writer's life, timeline and high-water mark tell a cluster coming
//     up (crash restart, promotion, backup restore, point-in-time recovery,
//     a copied data directory) whether its heap can own the trees.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/gaddr.h"
#include "transport/remote_memory.h"

namespace dex::cluster {

constexpr uint64_t kRegistryMagic = 0x31304745527864ull;  // "dxREG01"
constexpr uint32_t kMaxStandbys = 62;
constexpr uint32_t kRegistryBytes = 4096;
constexpr uint32_t kMaxAdopted = 32;
// writer_life of a cluster whose trees another cluster adopted (pg_upgrade).
constexpr uint64_t kWriterMoved = ~0ull;

// A standby's slot. `owner` 0: free. The standby renews it with a CAS on
// `beat`; the primary expires a standby that stayed silent too long by a CAS
// setting kExpired on the beat value it saw, so exactly one of the two wins:
// a standby whose renewal fails has been expired and must register again.
// The primary detaches a standby whose replay lags too far (it would hold
// back the primary's journal, write-backs and VACUUM) by a CAS setting
// kDetached: that makes the standby's next renewal fail, so its lease runs
// out, but the slot still counts as live -- its standby may answer until
// then -- until its beat, standing still, gets it expired like any silent
// standby's. Nobody claims a detached slot before that.
struct StandbySlot {
    uint64_t owner;       // the standby's life id (random per shared-memory init)
    uint64_t beat;        // renewal counter; bit 63: expired, bit 62: detached by the primary
    uint64_t replay_lsn;  // how far it has replayed (written before each renewal)
    uint64_t tli;         // its replay timeline
};
static_assert(sizeof(StandbySlot) == 32);
constexpr uint64_t kExpired = 1ull << 63;
constexpr uint64_t kDetached = 1ull << 62;

struct RegistryHeader {
    uint64_t magic;
    uint64_t writer_life;   // the primary life that writes the trees (0: none yet)
    uint64_t writer_beat;   // incremented by its every beat
    // The trees depend only on the writer's WAL up to max(writer_hwm,
    // removal_lsn): its beats publish writer_hwm (<= the removal_lsn they
    // raised first); its backends, needing more between beats, raise only
    // removal_lsn (src/README.md K7). A new writer's WAL must cover both.
    uint64_t writer_hwm;
    uint64_t removal_lsn;   // highest WAL position a removal or write-back waited for
    uint64_t writer_tli;    // the writer's timeline
    // A hot standby's scan of a write-back index waits until the writer has
    // written back every entry change logged before this (raised by the
    // standby, CAS max): the writer's dex worker flushes at its next beat
    // instead of at its next dex.writeback_interval. A hint, never required.
    uint64_t flush_request_lsn;
    uint64_t reserved;
    StandbySlot slots[kMaxStandbys];
    // pg_upgrade (src/README.md "Hot standbys", Upgrades). In the registry of
    // the cluster that was upgraded: writer_life = kWriterMoved and moved_to =
    // the system identifier of the cluster that took its trees over -- none of
    // its servers may write or read them again (moved_to alone: that cluster
    // claimed them and is fencing). In the new cluster's registry:
    // the system identifiers whose namespaces it owns besides its own
    // (0-terminated; an upgrade of an upgraded cluster adds its ancestors).
    uint64_t moved_to;
    uint64_t adopted[kMaxAdopted];
};
static_assert(sizeof(RegistryHeader) <= kRegistryBytes);
constexpr uint64_t kWriterLifeOffset = 8;
constexpr uint64_t kSlotsOffset = 64;
static_assert(offsetof(RegistryHeader, slots) == kSlotsOffset);
constexpr uint64_t slot_offset(uint32_t i) { return kSlotsOffset + uint64_t(i) * sizeof(StandbySlot); }

class Registry {
public:
    // The registry block at `addr` (from find_or_create).
    Registry(RemoteMemory& mem, GAddr addr) : mem_(mem), addr_(addr) {}

    // The registry in namespace `ns` on memory node `node` (its root word),
    // creating the block if `create` (the writer does; readers only look).
    // A new block starts with writer_hwm and removal_lsn at `floor_lsn`: a
    // registry made again after its memory node lost its memory cannot know
    // what the lost one recorded, so its creator (the primary) starts both at
    // its own durable WAL end -- a standby then replays that far before it
    // answers, and a server claiming the trees must have that WAL.
    // Returns 0 if it does not exist and create is false.
    static GAddr open(RemoteMemory& mem, uint32_t node, uint64_t ns, bool create, uint64_t floor_lsn = 0);

    RegistryHeader read();
    GAddr address() const { return addr_; }

    // Writer: CAS writer_life expected -> life; returns the value found.
    uint64_t cas_writer(uint64_t expected, uint64_t life);
    // Writer: one beat (life must be ours: checked by the caller's CAS).
    // The high-water mark only rises (raise_hwm).
    void writer_beat(uint64_t beat, uint64_t hwm, uint32_t tli);
    // Raise writer_hwm to at least lsn (CAS loop: several processes of the
    // writer may publish); returns the value now there.
    uint64_t raise_hwm(uint64_t lsn);
    // Standby: raise flush_request_lsn to at least lsn (CAS loop).
    void request_flush(uint64_t lsn);
    // Writer: raise removal_lsn to at least lsn (CAS loop: VACUUMs and
    // killing scans of the writer raise it concurrently).
    void set_removal_lsn(uint64_t lsn);
    // Dead-entry hints (src/README.md "Dead-entry hints"): may the writer
    // `life` remove entries whose removal its WAL up to `lsn` justifies,
    // without waiting? Raises removal_lsn to lsn first (a standby that
    // registers later replays past it), then true only if `life` is the
    // writer and no live (unexpired) standby slot is held: a live standby's
    // snapshots may still need the entries; an expired one answers nothing
    // until it has claimed a slot again and replayed past removal_lsn.
    bool kill_allowed(uint64_t life, uint64_t lsn);
    // Raise removal_lsn to at least lsn, then read the block -- in one batch,
    // in that order (kill_allowed's first step; the writer's beat, so that
    // the standby slots it counts are read after its raise: K7).
    RegistryHeader raise_removal_and_read(uint64_t lsn);
    // Writer with a valid lease, its beats after the first of a claim (the
    // timeline unchanged): one beat in one batch (one round trip, where
    // writer_beat + raise_removal_and_read take four or five). In order:
    // raise writer_hwm to `hwm` -- the hwm the *previous* beat computed: the
    // registry's copy trails by a beat, which is safe because a new writer
    // must cover max(writer_hwm, removal_lsn) and removal_lsn >= every hwm
    // published -- then CAS writer_beat `beat_from` -> beat_from + 1, raise
    // removal_lsn to `lsn`, read the block. The raises are CASes from the
    // value this process saw last (a guess, as raise_removal_and_read's): a
    // wrong guess leaves that word where it was for this beat (the read
    // shows it; the next beat tries from what it reported). *beat_done: the
    // beat CAS took (false: another process beat; fall back to writer_beat).
    RegistryHeader beat_and_read(uint64_t beat_from, uint64_t hwm, uint64_t lsn, bool* beat_done);
    // Writer: expire slot i if its beat is still `beat` (CAS). True if done.
    bool expire_slot(uint32_t i, uint64_t beat);
    // Writer: detach slot i if its beat is still `beat` (CAS; see
    // StandbySlot). True if done.
    bool detach_slot(uint32_t i, uint64_t beat);

    // pg_upgrade. The new cluster fences the old one's registry: CAS moved_to
    // 0 -> sysid (the first adopter keeps it), then CAS writer_life expected
    // -> kWriterMoved. True if this call (or an earlier one for the same
    // sysid) moved it; false if the writer is not `expected_life` (retry with
    // the one seen) or another cluster claimed moved_to.
    bool fence_moved(uint64_t expected_life, uint64_t sysid);
    // The new cluster records a system identifier it adopted (idempotent; a
    // CAS on the first free entry). False if the list is full.
    bool add_adopted(uint64_t sysid);

    // Standby: take a free or expired slot (or its own, unless detached and
    // not expired yet); returns the slot index, or -1 if every slot is held
    // by a live standby. *beat receives
    // the slot's (unexpired) beat value to renew from.
    int claim_slot(uint64_t life, uint64_t replay_lsn, uint64_t tli, uint64_t* beat);
    // Standby: report replay_lsn, then renew (CAS beat -> beat + 1). False:
    // the primary expired the slot (or it is not ours any more): claim again.
    bool standby_beat(uint32_t i, uint64_t life, uint64_t& beat, uint64_t replay_lsn);

private:
    RemoteMemory& mem_;
    GAddr addr_;
};

}  // namespace dex::cluster
