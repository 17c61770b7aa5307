#include "cluster/registry.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>

#include "common/error.h"
#include "net/protocol.h"

namespace dex::cluster {

namespace {

uint64_t u64(const std::vector<uint8_t>& r, const char* what) {
    if (r.size() < 8) throw Error(ErrorCode::kProtocol, std::string(what) + ": short response from memory node");
    uint64_t v;
    std::memcpy(&v, r.data(), 8);
    return v;
}

// What this process saw last in removal_lsn and writer_hwm: the expected
// values of the batched raises' CASes (any value is safe: a wrong one only
// fails the CAS, which reports the word).
std::atomic<uint64_t> removal_guess{0};
std::atomic<uint64_t> hwm_guess{0};

// A CAS raising a word from `guess` to max(guess, lsn).
RemoteOp raise_op(GAddr w, uint64_t guess, uint64_t lsn) {
    return RemoteOp{RemoteOp::kCas, gaddr_offset(w), nullptr, 0, guess, std::max(guess, lsn), 0};
}

// After a raise_op ran: true if the word is now >= lsn; the guess learns it.
bool raised(const RemoteOp& op, uint64_t lsn, std::atomic<uint64_t>& guess) {
    const uint64_t seen = op.result;
    const bool ok = seen == op.compare || seen >= lsn;
    guess.store(seen == op.compare ? op.swap_or_add : seen, std::memory_order_relaxed);
    return ok;
}

void check_magic(const RegistryHeader& h, GAddr addr) {
    if (h.magic != kRegistryMagic)
        throw Error(ErrorCode::kCorrupt, "the dex cluster registry on memory node " +
                                             std::to_string(gaddr_node(addr)) + " is damaged");
}

}  // namespace

GAddr Registry::open(RemoteMemory& mem, uint32_t node, uint64_t ns, bool create, uint64_t floor_lsn) {
    Transport& t = mem.node(node);
    GAddr root = u64(t.rpc(net::kOpGetRoot, &ns, sizeof ns), "GET_ROOT");
    if (root || !create) return root;
    uint64_t req[2] = {ns, kRegistryBytes};
    uint64_t off = u64(t.rpc(net::kOpAlloc, req, sizeof req), "ALLOC");
    GAddr a = make_gaddr(node, off);
    std::vector<uint8_t> block(kRegistryBytes, 0);
    RegistryHeader h{};
    h.magic = kRegistryMagic;
    h.writer_hwm = floor_lsn;
    h.removal_lsn = floor_lsn;
    std::memcpy(block.data(), &h, sizeof h);
    mem.write(a, block.data(), kRegistryBytes);
    uint64_t set[3] = {ns, 0, a};
    GAddr old = u64(t.rpc(net::kOpSetRoot, set, sizeof set), "SET_ROOT");
    if (old != 0) {  // another writer made one first: use that one
        uint64_t fr[3] = {ns, off, kRegistryBytes};
        t.rpc(net::kOpFree, fr, sizeof fr);
        return old;
    }
    return a;
}

RegistryHeader Registry::read() {
    RegistryHeader h;
    mem_.read(addr_, &h, sizeof h);
    check_magic(h, addr_);
    return h;
}

uint64_t Registry::cas_writer(uint64_t expected, uint64_t life) {
    return mem_.cas(addr_ + kWriterLifeOffset, expected, life);
}

void Registry::writer_beat(uint64_t beat, uint64_t hwm, uint32_t tli) {
    uint64_t t = tli;
    mem_.write(addr_ + offsetof(RegistryHeader, writer_tli), &t, sizeof t);
    raise_hwm(hwm);
    mem_.write(addr_ + offsetof(RegistryHeader, writer_beat), &beat, sizeof beat);
}

// Raise the word at w to at least lsn; returns the value now there.
static uint64_t raise_word(RemoteMemory& mem, GAddr w, uint64_t lsn) {
    uint64_t cur = 0;
    mem.read(w, &cur, sizeof cur);
    while (cur < lsn) {
        uint64_t seen = mem.cas(w, cur, lsn);
        if (seen == cur) return lsn;
        cur = seen;
    }
    return cur;
}

uint64_t Registry::raise_hwm(uint64_t lsn) {
    const uint64_t now = raise_word(mem_, addr_ + offsetof(RegistryHeader, writer_hwm), lsn);
    hwm_guess.store(now, std::memory_order_relaxed);  // (beat_and_read's next CAS)
    return now;
}

void Registry::request_flush(uint64_t lsn) {
    (void)raise_word(mem_, addr_ + offsetof(RegistryHeader, flush_request_lsn), lsn);
}

void Registry::set_removal_lsn(uint64_t lsn) {
    // A CAS loop, not a plain write: several VACUUMs and killing scans of the
    // writer raise it concurrently, and a read-then-write could lower it.
    (void)raise_word(mem_, addr_ + offsetof(RegistryHeader, removal_lsn), lsn);
}

RegistryHeader Registry::raise_removal_and_read(uint64_t lsn) {
    // A standby that claims a slot after our read of the slots reads
    // removal_lsn after our raise (one memory node executes both in order)
    // and replays past it first. The raise and the read travel in one batch:
    // a CAS from the value this process saw last (a guess: usually right, as
    // only this server raises it), then the READ. A failed CAS that found
    // removal_lsn >= lsn already had it raised before the read just as well;
    // one below lsn is tried again from the value it reported.
    const GAddr w = addr_ + offsetof(RegistryHeader, removal_lsn);
    RegistryHeader h;
    for (;;) {
        RemoteOp ops[2] = {
            raise_op(w, removal_guess.load(std::memory_order_relaxed), lsn),
            RemoteOp{RemoteOp::kRead, gaddr_offset(addr_), &h, static_cast<uint32_t>(sizeof h), 0, 0, 0}};
        mem_.batch(gaddr_node(addr_), ops, 2);
        if (raised(ops[0], lsn, removal_guess)) break;
    }
    check_magic(h, addr_);
    return h;
}

RegistryHeader Registry::beat_and_read(uint64_t beat_from, uint64_t hwm, uint64_t lsn, bool* beat_done) {
    RegistryHeader h;
    RemoteOp ops[4] = {
        raise_op(addr_ + offsetof(RegistryHeader, writer_hwm), hwm_guess.load(std::memory_order_relaxed), hwm),
        RemoteOp{RemoteOp::kCas, gaddr_offset(addr_ + offsetof(RegistryHeader, writer_beat)), nullptr, 0, beat_from,
                 beat_from + 1, 0},
        raise_op(addr_ + offsetof(RegistryHeader, removal_lsn), removal_guess.load(std::memory_order_relaxed), lsn),
        RemoteOp{RemoteOp::kRead, gaddr_offset(addr_), &h, static_cast<uint32_t>(sizeof h), 0, 0, 0}};
    mem_.batch(gaddr_node(addr_), ops, 4);
    (void)raised(ops[0], hwm, hwm_guess);
    (void)raised(ops[2], lsn, removal_guess);
    if (beat_done) *beat_done = ops[1].result == beat_from;
    check_magic(h, addr_);
    return h;
}

bool Registry::kill_allowed(uint64_t life, uint64_t lsn) {
    // First the removal position, then the slots (raise_removal_and_read).
    const RegistryHeader h = raise_removal_and_read(lsn);
    if (h.writer_life != life || life == 0) return false;
    // A live slot refuses. An expired one does not: its standby stopped
    // answering when its lease ran out, and must claim a slot again and then
    // read removal_lsn -- after our raise -- and replay past it before it
    // answers (VACUUM's argument; src/README.md K3). A claim in progress
    // (owner set, beat still expired) reads removal_lsn after its beat CAS,
    // which comes after this read of the slots. Our own slot (a promoted
    // standby's, never renewed again) is no other server's.
    for (uint32_t i = 0; i < kMaxStandbys; i++)
        if (h.slots[i].owner != 0 && h.slots[i].owner != life && !(h.slots[i].beat & kExpired)) return false;
    return true;
}

bool Registry::expire_slot(uint32_t i, uint64_t beat) {
    if (i >= kMaxStandbys) return false;
    GAddr w = addr_ + slot_offset(i) + offsetof(StandbySlot, beat);
    return mem_.cas(w, beat, beat | kExpired) == beat;
}

bool Registry::detach_slot(uint32_t i, uint64_t beat) {
    if (i >= kMaxStandbys || (beat & (kExpired | kDetached))) return false;
    GAddr w = addr_ + slot_offset(i) + offsetof(StandbySlot, beat);
    return mem_.cas(w, beat, beat | kDetached) == beat;
}

int Registry::claim_slot(uint64_t life, uint64_t replay_lsn, uint64_t tli, uint64_t* beat) {
    RegistryHeader h = read();
    // our own slot first (a restarted worker of the same life), then a free
    // or an expired one
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < kMaxStandbys; i++) {
            const StandbySlot& s = h.slots[i];
            // (a detached slot only once expired: the primary counts it as
            // live until then, and a claim would reset its silent beat)
            bool held = (s.beat & kDetached) && !(s.beat & kExpired);
            bool take = !held && (pass == 0 ? s.owner == life : (s.owner == 0 || (s.beat & kExpired)));
            if (!take) continue;
            GAddr base = addr_ + slot_offset(i);
            if (s.owner != life && mem_.cas(base + offsetof(StandbySlot, owner), s.owner, life) != s.owner)
                continue;  // someone else took it
            uint64_t rt[2] = {replay_lsn, tli};
            mem_.write(base + offsetof(StandbySlot, replay_lsn), rt, sizeof rt);
            uint64_t fresh = (s.beat & ~(kExpired | kDetached)) + 1;
            if (mem_.cas(base + offsetof(StandbySlot, beat), s.beat, fresh) != s.beat) continue;
            *beat = fresh;
            return static_cast<int>(i);
        }
    }
    return -1;
}

bool Registry::standby_beat(uint32_t i, uint64_t life, uint64_t& beat, uint64_t replay_lsn) {
    if (i >= kMaxStandbys) return false;
    GAddr base = addr_ + slot_offset(i);
    uint64_t owner = 0;
    mem_.read(base + offsetof(StandbySlot, owner), &owner, sizeof owner);
    if (owner != life) return false;
    mem_.write(base + offsetof(StandbySlot, replay_lsn), &replay_lsn, sizeof replay_lsn);
    if (mem_.cas(base + offsetof(StandbySlot, beat), beat, beat + 1) != beat) return false;
    beat++;
    return true;
}

bool Registry::fence_moved(uint64_t expected_life, uint64_t sysid) {
    RegistryHeader h = read();
    // moved_to is claimed by CAS before writer_life moves: of two clusters
    // upgraded from this one and fencing at once, exactly one gets the trees
    // (a plain write could be overwritten by the loser after the winner's CAS).
    if (h.moved_to != 0 && h.moved_to != sysid) return false;
    if (h.writer_life == kWriterMoved) return h.moved_to == sysid;
    if (h.writer_life != expected_life) return false;
    GAddr m = addr_ + offsetof(RegistryHeader, moved_to);
    uint64_t claimed = mem_.cas(m, 0, sysid);
    if (claimed != 0 && claimed != sysid) return false;
    uint64_t seen = mem_.cas(addr_ + kWriterLifeOffset, expected_life, kWriterMoved);
    // moved_to is ours, so whoever set kWriterMoved did it for us
    return seen == expected_life || seen == kWriterMoved;
}

bool Registry::add_adopted(uint64_t sysid) {
    if (sysid == 0) return true;
    RegistryHeader h = read();
    for (uint32_t i = 0; i < kMaxAdopted; i++) {
        uint64_t cur = h.adopted[i];
        if (cur == sysid) return true;
        if (cur != 0) continue;
        GAddr w = addr_ + offsetof(RegistryHeader, adopted) + uint64_t(i) * sizeof(uint64_t);
        uint64_t seen = mem_.cas(w, 0, sysid);
        if (seen == 0 || seen == sysid) return true;
        h.adopted[i] = seen;  // another adopter took this entry: look further
    }
    return false;
}

}  // namespace dex::cluster
