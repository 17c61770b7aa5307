#include "tree/journal.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "net/protocol.h"

namespace dex::tree {

namespace {

uint64_t alloc_bytes(RemoteMemory& mem, uint32_t node, uint64_t ns, uint64_t bytes) {
    uint64_t req[2] = {ns, bytes};
    std::vector<uint8_t> r = mem.node(node).rpc(net::kOpAlloc, req, sizeof req);
    if (r.size() < 8) throw Error(ErrorCode::kProtocol, "ALLOC: short response from memory node");
    uint64_t off;
    std::memcpy(&off, r.data(), 8);
    return off;
}

// Zero `bytes` at `a` (ALLOC does not clear reused memory).
void zero(RemoteMemory& mem, GAddr a, uint32_t bytes) {
    std::vector<uint8_t> z(bytes, 0);
    mem.write(a, z.data(), bytes);
}

// A root's (form, record_bytes) pair, or false if it names no form this code
// knows (a damaged root, or one of a later version): never guessed.
bool root_form(const JournalRoot& r, JournalForm* f) {
    if (r.form == static_cast<uint32_t>(JournalForm::kFixed) && r.record_bytes == 0) {
        *f = JournalForm::kFixed;
        return true;
    }
    if (r.form == static_cast<uint32_t>(JournalForm::kBytes) && r.record_bytes == sizeof(JournalByteRecord)) {
        *f = JournalForm::kBytes;
        return true;
    }
    return false;
}

JournalForm read_root(RemoteMemory& mem, GAddr root, JournalRoot& out) {
    mem.read(root, &out, sizeof out);
    JournalForm f;
    if (out.magic != kJournalMagic || out.nodes > kJournalMaxNodes || out.lanes != kJournalLanes ||
        !root_form(out, &f))
        throw Error(ErrorCode::kCorrupt, "insert journal at " + std::to_string(gaddr_offset(root)) +
                                             " on memory node " + std::to_string(gaddr_node(root)) +
                                             " is not a dex journal");
    return f;
}

// Where a slot's lsn lies in a record of form f (0 there: a free slot).
uint64_t record_lsn(const uint8_t* rec, JournalForm f) {
    uint64_t lsn;
    std::memcpy(&lsn, rec + (f == JournalForm::kBytes ? offsetof(JournalByteRecord, lsn) : offsetof(JournalRecord, lsn)),
                sizeof lsn);
    return lsn;
}

std::atomic<DurableLsnFn> g_durable{nullptr};

// Reads the lane at `a` (directory slot `lane` on `node`, a journal of form
// f) whole into `buf`; returns its slots. The first read is a new lane's size
// (no lane is smaller; 4 KiB for the fixed form, as ever), a grown lane's
// rest follows once its header gave its size.
uint32_t read_lane(RemoteMemory& mem, GAddr a, uint32_t node, uint32_t lane, JournalForm f, std::vector<uint8_t>& buf) {
    const uint32_t rb = record_bytes_of(f);
    const uint32_t first = lane_bytes_for(lane_min_records(f), rb);
    buf.resize(first);
    mem.read(a, buf.data(), first);
    JournalLaneHeader h;
    std::memcpy(&h, buf.data(), sizeof h);
    const uint32_t slots = lane_records(h, lane, f);
    if (!slots || gaddr_node(a) != node)
        throw Error(ErrorCode::kCorrupt, "insert journal: lane " + std::to_string(lane) + " of memory node " +
                                             std::to_string(node) + " is damaged");
    if (lane_bytes_for(slots, rb) > first) {  // a grown lane: the rest of it
        buf.resize(lane_bytes_for(slots, rb));
        mem.read(a + first, buf.data() + first, static_cast<uint32_t>(buf.size() - first));
    }
    return slots;
}

// A zeroed lane of `slots` slots of form f for directory slot `lane`.
GAddr new_lane(RemoteMemory& mem, uint32_t node, uint64_t ns, uint32_t lane, JournalForm f, uint32_t slots) {
    std::vector<uint8_t> buf(lane_bytes_for(slots, record_bytes_of(f)), 0);
    GAddr a = make_gaddr(node, alloc_bytes(mem, node, ns, buf.size()));
    JournalLaneHeader h{f == JournalForm::kBytes ? kJournalByteLaneMagic : kJournalLaneMagic, lane, slots};
    std::memcpy(buf.data(), &h, sizeof h);
    mem.write(a, buf.data(), static_cast<uint32_t>(buf.size()));
    return a;
}

}  // namespace

uint32_t lane_records(const JournalLaneHeader& h, uint32_t lane, JournalForm f) {
    if (h.lane != lane) return 0;
    if (f == JournalForm::kBytes) {
        if (h.magic != kJournalByteLaneMagic) return 0;
    } else {
        if (h.magic == kJournalMagic) return h.records == 0 ? kJournalLaneRecords : 0;  // an old fixed-size lane
        if (h.magic != kJournalLaneMagic) return 0;
    }
    return h.records >= lane_min_records(f) && h.records <= lane_max_records(f) ? h.records : 0;
}

void set_durable_lsn_source(DurableLsnFn fn) { g_durable.store(fn, std::memory_order_release); }

uint64_t durable_lsn() {
    DurableLsnFn fn = g_durable.load(std::memory_order_acquire);
    return fn ? fn() : UINT64_MAX;
}

GAddr journal_create(RemoteMemory& mem, uint32_t home, const std::vector<uint64_t>& part_ns, uint64_t life,
                     JournalForm form) {
    if (home >= part_ns.size() || !part_ns[home]) throw Error(ErrorCode::kInvalid, "journal_create: no home namespace");
    if (part_ns.size() > kJournalMaxNodes)
        throw Error(ErrorCode::kInvalid, "journal_create: more than " + std::to_string(kJournalMaxNodes) + " memory nodes");
    JournalRoot root{};
    root.magic = kJournalMagic;
    root.life = life;
    root.nodes = static_cast<uint32_t>(part_ns.size());
    root.lanes = kJournalLanes;
    if (form == JournalForm::kBytes) {  // a fixed root keeps both words 0: byte for byte as before
        root.form = static_cast<uint32_t>(JournalForm::kBytes);
        root.record_bytes = sizeof(JournalByteRecord);
    } else if (form != JournalForm::kFixed) {
        throw Error(ErrorCode::kInvalid, "journal_create: unknown record form");
    }
    for (uint32_t i = 0; i < part_ns.size(); i++) {
        if (!part_ns[i]) continue;
        GAddr d = make_gaddr(i, alloc_bytes(mem, i, part_ns[i], kJournalLanes * sizeof(GAddr)));
        zero(mem, d, kJournalLanes * sizeof(GAddr));
        root.dir[i] = d;
    }
    GAddr r = make_gaddr(home, alloc_bytes(mem, home, part_ns[home], sizeof root));
    mem.write(r, &root, sizeof root);
    return r;
}

uint64_t journal_life(RemoteMemory& mem, GAddr root) {
    JournalRoot r;
    read_root(mem, root, r);
    return r.life;
}

JournalForm journal_form(RemoteMemory& mem, GAddr root) {
    JournalRoot r;
    return read_root(mem, root, r);
}

uint64_t journal_cas_life(RemoteMemory& mem, GAddr root, uint64_t expected, uint64_t life) {
    return mem.cas(root + kJournalLifeOffset, expected, life);
}

namespace {

// The used slots of one lane (its bytes in `lane`) into c. A byte record's
// len comes from remote memory that a crash may have left torn: only 1 ..
// kJournalMaxEntryBytes is taken, so nothing is read past the record.
void collect(const std::vector<uint8_t>& lane, uint32_t slots, JournalContents& c) {
    const uint32_t rb = record_bytes_of(c.form);
    for (uint32_t s = 0; s < slots; s++) {
        const uint8_t* p = lane.data() + sizeof(JournalLaneHeader) + static_cast<size_t>(s) * rb;
        if (c.form == JournalForm::kFixed) {
            JournalRecord rec;
            std::memcpy(&rec, p, sizeof rec);
            if (rec.lsn != 0) c.records.push_back(rec);
            continue;
        }
        JournalByteRecord rec;
        std::memcpy(&rec, p, sizeof rec);
        if (rec.lsn == 0 || rec.len == 0 || rec.len > kJournalMaxEntryBytes) continue;
        c.byte_records.push_back({std::string(reinterpret_cast<const char*>(rec.entry), rec.len), rec.lsn});
    }
}

// Sorted by entry, one per entry: the one with the highest lsn (the same
// entry journaled twice is one possible stray; which lsn is kept does not
// matter to recovery, the heap check decides, but the answer is stable).
void sort_unique(std::vector<JournalByteEntry>& v) {
    // std::string compares as unsigned char: memcmp order, a proper prefix first
    std::sort(v.begin(), v.end(), [](const JournalByteEntry& a, const JournalByteEntry& b) {
        int c = a.entry.compare(b.entry);
        return c != 0 ? c < 0 : a.lsn > b.lsn;
    });
    v.erase(std::unique(v.begin(), v.end(),
                        [](const JournalByteEntry& a, const JournalByteEntry& b) { return a.entry == b.entry; }),
            v.end());
}

}  // namespace

JournalContents journal_read(RemoteMemory& mem, GAddr root) {
    JournalRoot r;
    JournalContents c;
    c.form = read_root(mem, root, r);
    c.life = r.life;
    std::vector<GAddr> dir(kJournalLanes);
    std::vector<uint8_t> lane;
    for (uint32_t i = 0; i < r.nodes; i++) {
        if (!r.dir[i]) continue;
        mem.read(r.dir[i], dir.data(), kJournalLanes * sizeof(GAddr));
        for (uint32_t l = 0; l < kJournalLanes; l++) {
            if (!dir[l]) continue;
            if (gaddr_node(dir[l]) != i)
                throw Error(ErrorCode::kCorrupt, "insert journal: lane " + std::to_string(l) + " of memory node " +
                                                     std::to_string(i) + " points to another memory node");
            const uint32_t slots = read_lane(mem, dir[l], i, l, c.form, lane);
            c.lanes.push_back(dir[l]);
            c.lane_slots.push_back(slots);
            collect(lane, slots, c);
        }
    }
    sort_unique(c.byte_records);
    std::sort(c.records.begin(), c.records.end(),
              [](const JournalRecord& a, const JournalRecord& b) { return a.key < b.key; });
    c.records.erase(std::unique(c.records.begin(), c.records.end(),
                                [](const JournalRecord& a, const JournalRecord& b) { return a.key == b.key; }),
                    c.records.end());
    return c;
}

void journal_clear(RemoteMemory& mem, const JournalContents& c) {
    for (size_t i = 0; i < c.lanes.size(); i++)
        zero(mem, c.lanes[i] + sizeof(JournalLaneHeader), c.lane_slots[i] * record_bytes_of(c.form));
}

GAddr JournalWriter::dir_slot(uint32_t node) const {
    return root_img_.dir[node] + static_cast<uint64_t>(lane_) * sizeof(GAddr);
}

void JournalWriter::load_root() {
    if (have_root_) return;
    form_ = read_root(mem_, root_, root_img_);
    have_root_ = true;
}

JournalForm JournalWriter::form() {
    load_root();
    return form_;
}

void JournalWriter::load(uint32_t node) {
    Lane& ln = lanes_[node];
    if (ln.loaded) return;
    load_root();
    if (node >= root_img_.nodes || !root_img_.dir[node] || lane_ >= kJournalLanes) {
        ln.loaded = true;  // no lane here: inserts on this node wait for durable WAL instead
        return;
    }
    const GAddr slot = dir_slot(node);
    GAddr a = 0;
    mem_.read(slot, &a, sizeof a);
    std::vector<uint8_t> buf;
    uint32_t slots;
    if (!a) {
        // First writer with this lane number on this node: a zeroed lane,
        // then the directory entry that makes recovery read it.
        if (node >= part_ns_.size() || !part_ns_[node])
            throw Error(ErrorCode::kCorrupt, "insert journal: memory node " + std::to_string(node) +
                                                 " has a directory but the tree no namespace there");
        slots = lane_min_records(form_);
        a = new_lane(mem_, node, part_ns_[node], lane_, form_, slots);
        buf.assign(lane_bytes_for(slots, record_bytes_of(form_)), 0);
        mem_.write(slot, &a, sizeof a);
    } else {
        slots = read_lane(mem_, a, node, lane_, form_, buf);
    }
    ln.addr = a;
    ln.lsn.assign(slots, 0);
    uint64_t oldest = UINT64_MAX;
    for (uint32_t s = 0; s < slots; s++) {
        const uint64_t lsn = record_lsn(buf.data() + sizeof(JournalLaneHeader) +
                                            static_cast<size_t>(s) * record_bytes_of(form_), form_);
        ln.lsn[s] = lsn;
        if (lsn < oldest) {  // continue after the previous owner: at its oldest slot
            oldest = lsn;
            ln.next = s;
        }
    }
    ln.loaded = true;
}

void JournalWriter::begin_entry() {
    for (Lane& ln : lanes_) ln.current = -1;
}

bool JournalWriter::reserve(uint64_t lsn, uint64_t durable) {
    begin_entry();
    if (lsn == 0 || lsn <= durable) return false;
    if (expect_ && form() != expected_) throw NeedDurable(lsn);  // (expect_form)
    if (lanes_.size() < part_ns_.size()) lanes_.resize(part_ns_.size());
    uint64_t need = 0;
    for (uint32_t i = 0; i < part_ns_.size(); i++) {
        if (!part_ns_[i]) continue;
        load(i);
        maybe_grow(i, durable);
        Lane& ln = lanes_[i];
        if (!ln.addr) {  // no lane: the insert itself must be durable first
            need = std::max(need, lsn);
        } else if (ln.lsn[ln.next] > durable) {
            // Full of records whose WAL is not durable: flushing up to the
            // newest frees the whole lane with the same one fsync (and lets
            // it grow, maybe_grow), not just the oldest slot.
            ln.filled = true;
            need = std::max(need, *std::max_element(ln.lsn.begin(), ln.lsn.end()));
        }
    }
    if (need) throw NeedDurable(need);
    return true;
}

uint32_t JournalWriter::batch_room(uint64_t durable, uint64_t* newest) {
    if (lanes_.size() < part_ns_.size()) lanes_.resize(part_ns_.size());
    begin_entry();  // a new run: no slot of an earlier one is held
    uint32_t room = kJournalLaneRecordsMax;
    *newest = 0;
    if (expect_ && form() != expected_) return 0;  // (expect_form) every insert waits for its WAL
    for (uint32_t i = 0; i < part_ns_.size(); i++) {
        if (!part_ns_[i]) continue;
        load(i);
        maybe_grow(i, durable);
        Lane& ln = lanes_[i];
        if (!ln.addr) {  // no lane: every journaled insert waits for durable WAL
            room = 0;
            continue;
        }
        const uint32_t slots = static_cast<uint32_t>(ln.lsn.size());
        uint32_t free = 0;
        while (free < slots && ln.lsn[(ln.next + free) % slots] <= durable) free++;
        if (free == 0) ln.filled = true;
        room = std::min(room, free);
        for (uint64_t l : ln.lsn) *newest = std::max(*newest, l);
    }
    return room;
}

int64_t JournalWriter::slot_taken(uint32_t node) const { return node < lanes_.size() ? lanes_[node].current : -1; }

bool JournalWriter::any_slot_taken() const {
    for (const Lane& ln : lanes_)
        if (ln.current >= 0) return true;
    return false;
}

void JournalWriter::resume(uint32_t node, int64_t slot) {
    if (node < lanes_.size() && lanes_[node].addr && slot >= 0 && slot < static_cast<int64_t>(lanes_[node].lsn.size()))
        lanes_[node].current = slot;
}

uint32_t JournalWriter::claim(uint32_t node) {
    Lane& ln = lanes_[node];
    if (ln.current >= 0) return static_cast<uint32_t>(ln.current);
    const uint32_t s = ln.next;
    ln.next = (s + 1) % static_cast<uint32_t>(ln.lsn.size());
    ln.current = s;
    return s;
}

uint64_t JournalWriter::slot_offset(uint32_t node, uint32_t slot) const {
    return gaddr_offset(lanes_[node].addr) + sizeof(JournalLaneHeader) +
           static_cast<uint64_t>(slot) * record_bytes_of(form_);
}

// Every check comes before the lane's state or the record buffer changes: a
// refused take leaves the writer as it was (no slot consumed, no record).
uint64_t JournalWriter::take(uint32_t node, const EntryKey& key, uint64_t lsn) {
    if (node >= lanes_.size() || !lanes_[node].addr)
        throw Error(ErrorCode::kInvalid, "insert journal: no lane reserved on memory node " + std::to_string(node));
    if (form_ != JournalForm::kFixed)
        throw Error(ErrorCode::kInvalid, "insert journal: a fixed-key record for a journal of byte entries");
    const uint32_t s = claim(node);
    lanes_[node].lsn[s] = lsn;
    rec_.key = key;
    rec_.lsn = lsn;
    bytes_taken_ = false;
    return slot_offset(node, s);
}

uint64_t JournalWriter::take(uint32_t node, const uint8_t* entry, size_t len, uint64_t lsn) {
    if (node >= lanes_.size() || !lanes_[node].addr)
        throw Error(ErrorCode::kInvalid, "insert journal: no lane reserved on memory node " + std::to_string(node));
    if (form_ != JournalForm::kBytes)
        throw Error(ErrorCode::kInvalid, "insert journal: a byte entry for a journal of fixed keys");
    if (len == 0 || len > kJournalMaxEntryBytes || !entry)
        throw Error(ErrorCode::kInvalid, "insert journal: an entry of " + std::to_string(len) +
                                             " bytes (1 to " + std::to_string(kJournalMaxEntryBytes) + ")");
    const uint32_t s = claim(node);
    lanes_[node].lsn[s] = lsn;
    brec_.lsn = lsn;
    brec_.len = static_cast<uint16_t>(len);
    std::memcpy(brec_.entry, entry, len);
    bytes_taken_ = true;
    return slot_offset(node, s);
}

std::string_view JournalWriter::record_bytes() const {
    if (bytes_taken_)
        return {reinterpret_cast<const char*>(&brec_), kJournalByteRecordHead + static_cast<size_t>(brec_.len)};
    return {reinterpret_cast<const char*>(&rec_), sizeof rec_};
}

RemoteOp JournalWriter::take_op(uint32_t node, const EntryKey& key, uint64_t lsn) {
    RemoteOp op{};
    op.kind = RemoteOp::kWrite;
    op.offset = take(node, key, lsn);
    op.buf = &rec_;
    op.len = sizeof rec_;
    return op;
}

// Writes the head and the used entry bytes only (a short entry costs its
// length on the wire, not 168 bytes); the rest of the slot is never read.
RemoteOp JournalWriter::take_op(uint32_t node, const uint8_t* entry, size_t len, uint64_t lsn) {
    RemoteOp op{};
    op.kind = RemoteOp::kWrite;
    op.offset = take(node, entry, len, lsn);
    op.buf = &brec_;
    op.len = static_cast<uint32_t>(record_bytes().size());
    return op;
}

}  // namespace dex::tree

namespace dex::tree {

// Why a lane grows: a writer whose lane fills up with records whose WAL is not
// durable flushes WAL once per lane's worth of journaled inserts (a bulk load
// in one transaction: one fsync per 170 rows with the first size). Only once
// the lane was found full and every record in it is obsolete (WAL durable
// past its newest, as right after the flush that full lane asked for) is it
// replaced: nothing in it can be a stray any more, so recovery needs none of
// its records. Order: the new lane is written whole (zeroed, header) before
// the directory points to it; a crash in between leaves the old, obsolete
// lane in the directory and the new one unreferenced in the namespace (freed
// with it). The old lane is freed after the switch. Only this writer (its
// PGPROC number) uses the directory slot, so no other process races it.
void JournalWriter::maybe_grow(uint32_t node, uint64_t durable) {
    Lane& ln = lanes_[node];
    if (!ln.filled || !ln.addr || ln.current >= 0) return;
    const uint32_t slots = static_cast<uint32_t>(ln.lsn.size());
    if (slots >= lane_max_records(form_)) return;
    for (uint64_t l : ln.lsn)
        if (l > durable) return;
    const uint32_t grown = std::min(lane_max_records(form_), 2 * slots);
    const GAddr fresh = new_lane(mem_, node, part_ns_[node], lane_, form_, grown);
    mem_.write(dir_slot(node), &fresh, sizeof fresh);
    const GAddr old = ln.addr;
    ln.addr = fresh;
    ln.lsn.assign(grown, 0);
    ln.next = 0;
    ln.filled = false;
    uint64_t req[3] = {part_ns_[node], gaddr_offset(old), lane_bytes_for(slots, record_bytes_of(form_))};
    try {
        mem_.node(node).rpc(net::kOpFree, req, sizeof req);
    } catch (const Error&) {
        // The old lane stays allocated in the index's namespace until the
        // index is dropped: a leak of a few KiB, not a reason to fail.
    }
}

}  // namespace dex::tree
