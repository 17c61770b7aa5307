// The insert journal's two record forms (src/tree/journal.h, src/README.md
// "Crash survival: the insert journal"): byte-entry records for trees of
// slotted nodes -- round trip on one and three memory nodes, lane growth,
// sorting and duplicates, torn or garbage slots, refused takes -- and the
// fixed form's remote bytes, which must stay exactly what they were.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tree/journal.h"
#include "tree_test_util.h"

namespace dex::testing {
namespace {

using tree::JournalForm;
using tree::JournalWriter;
using tree::NeedDurable;
constexpr uint32_t kMax = tree::kJournalMaxEntryBytes;
constexpr uint32_t kByteSlots = tree::kJournalByteLaneRecords;

// `n` in-process memory nodes, a namespace on each.
struct Nodes {
    std::vector<std::unique_ptr<memnode::Engine>> engines;
    std::unique_ptr<RemoteMemory> mem;
    std::vector<uint64_t> ns;
    explicit Nodes(int n) {
        std::vector<std::unique_ptr<Transport>> v;
        for (int i = 0; i < n; i++) {
            engines.push_back(make_engine(64 << 20));
            v.push_back(std::make_unique<InProcTransport>(*engines.back()));
        }
        mem = std::make_unique<RemoteMemory>(std::move(v));
        for (int i = 0; i < n; i++) ns.push_back(ns_create(mem->node(i)));
    }
};

const uint8_t* u8(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

// One journaled insert of `e` on `node`, as the tree does it: reserve (may
// throw NeedDurable), then the record's WRITE in a batch on that node.
void journal(RemoteMemory& m, JournalWriter& w, uint32_t node, const std::string& e, uint64_t lsn, uint64_t durable) {
    ASSERT_TRUE(w.reserve(lsn, durable));
    RemoteOp op = w.take_op(node, u8(e), e.size(), lsn);
    EXPECT_EQ(op.len, tree::kJournalByteRecordHead + e.size()) << "only the used bytes are written";
    m.batch(node, &op, 1);
}

// Distinct entries of any length 1..kMax: a 4-byte big-endian counter, then filler.
std::string entry(uint32_t k, size_t len) {
    std::string s(len, '\0');
    for (size_t i = 0; i < len; i++) s[i] = static_cast<char>(i < 4 ? k >> (24 - 8 * i) : 0xA0 + i);
    return s;
}

// The used records of a byte lane of `slots` slots, read raw.
std::vector<tree::JournalByteRecord> raw_lane(RemoteMemory& m, GAddr lane, uint32_t slots) {
    std::vector<tree::JournalByteRecord> v(slots);
    m.read(lane + sizeof(tree::JournalLaneHeader), v.data(), slots * sizeof(tree::JournalByteRecord));
    v.erase(std::remove_if(v.begin(), v.end(), [](auto& r) { return r.lsn == 0; }), v.end());
    return v;
}

// memcmp order, a proper prefix first -- written out independently of the
// journal's own comparison.
bool byte_less(const std::string& a, const std::string& b) {
    size_t n = std::min(a.size(), b.size());
    int c = std::memcmp(a.data(), b.data(), n);
    return c != 0 ? c < 0 : a.size() < b.size();
}

uint64_t listed(const tree::JournalContents& c, const std::string& e) {
    for (auto& r : c.byte_records)
        if (r.entry == e) return r.lsn;
    return 0;
}

ErrorCode code_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.code();
    }
    return ErrorCode::kOk;
}

// Entries of every interesting length and byte value go out and come back:
// journal_read lists each with its lsn, in memcmp order (bytes >= 0x80 after
// 0x7f, a proper prefix first); the root records the form; the lane is a byte
// lane of 24 slots in a new lane's 4 KiB; record_bytes() is what lands in the
// slot; journal_clear frees every slot.
TEST(JournalBytes, RoundTripOnOneNode) {
    Nodes n(1);
    GAddr root = tree::journal_create(*n.mem, 0, n.ns, 42, JournalForm::kBytes);
    EXPECT_EQ(tree::journal_form(*n.mem, root), JournalForm::kBytes);
    tree::JournalRoot img;
    n.mem->read(root, &img, sizeof img);
    EXPECT_EQ(img.form, 1u);
    EXPECT_EQ(img.record_bytes, 168u);
    JournalWriter w(*n.mem, root, 3, n.ns);
    EXPECT_EQ(w.form(), JournalForm::kBytes);
    std::vector<std::string> es = {std::string(1, '\x7f'), std::string(1, '\x80'), std::string("\x80\x00", 2),
                                   std::string(1, '\0'),   std::string(kMax, '\xff'), std::string(kMax - 1, '\xff'),
                                   entry(9, 6),            entry(9, 20),              entry(3, 151)};
    uint64_t lsn = 100;
    for (auto& e : es) {
        ASSERT_TRUE(w.reserve(++lsn, 0));
        const uint64_t off = w.take(0, u8(e), e.size(), lsn);
        std::string_view rb = w.record_bytes();
        ASSERT_EQ(rb.size(), tree::kJournalByteRecordHead + e.size());
        n.mem->write(make_gaddr(0, off), rb.data(), static_cast<uint32_t>(rb.size()));
        tree::JournalByteRecord back{};
        n.mem->read(make_gaddr(0, off), &back, sizeof back);
        EXPECT_EQ(back.lsn, lsn);
        EXPECT_EQ(back.len, e.size());
        EXPECT_EQ(std::string(reinterpret_cast<char*>(back.entry), back.len), e);
    }
    auto c = tree::journal_read(*n.mem, root);
    EXPECT_EQ(c.form, JournalForm::kBytes);
    EXPECT_EQ(c.life, 42u);
    EXPECT_TRUE(c.records.empty());
    ASSERT_EQ(c.lanes.size(), 1u);
    EXPECT_EQ(c.lane_slots, std::vector<uint32_t>{kByteSlots});
    tree::JournalLaneHeader h;
    n.mem->read(c.lanes[0], &h, sizeof h);
    EXPECT_EQ(h.magic, tree::kJournalByteLaneMagic);
    EXPECT_EQ(h.lane, 3u);
    EXPECT_EQ(h.records, kByteSlots);
    std::vector<std::string> want = es;
    std::sort(want.begin(), want.end(), byte_less);
    ASSERT_EQ(c.byte_records.size(), want.size());
    for (size_t i = 0; i < want.size(); i++) {
        EXPECT_EQ(c.byte_records[i].entry, want[i]) << "position " << i;
        size_t at = std::find(es.begin(), es.end(), want[i]) - es.begin();
        EXPECT_EQ(c.byte_records[i].lsn, 101u + at);
    }
    tree::journal_clear(*n.mem, c);
    auto cleared = tree::journal_read(*n.mem, root);
    EXPECT_TRUE(cleared.byte_records.empty());
    EXPECT_TRUE(raw_lane(*n.mem, c.lanes[0], kByteSlots).empty());
}

// Three memory nodes: a record lies in the writer's lane on the node it was
// taken for, journal_read lists them all, journal_clear empties every lane.
TEST(JournalBytes, RoundTripOnThreeNodes) {
    Nodes n(3);
    GAddr root = tree::journal_create(*n.mem, 1, n.ns, 5, JournalForm::kBytes);
    JournalWriter w(*n.mem, root, 7, n.ns);
    for (uint32_t i = 0; i < 30; i++) journal(*n.mem, w, i % 3, entry(i, 1 + (i * 37) % kMax), 1000 + i, 0);
    auto c = tree::journal_read(*n.mem, root);
    ASSERT_EQ(c.lanes.size(), 3u);
    ASSERT_EQ(c.byte_records.size(), 30u);
    for (uint32_t i = 0; i < 30; i++) EXPECT_EQ(c.byte_records[i].entry, entry(i, 1 + (i * 37) % kMax));
    for (size_t l = 0; l < 3; l++) {
        const uint32_t node = gaddr_node(c.lanes[l]);
        auto recs = raw_lane(*n.mem, c.lanes[l], c.lane_slots[l]);
        EXPECT_EQ(recs.size(), 10u);
        for (auto& r : recs) EXPECT_EQ((r.lsn - 1000) % 3, node) << "a record on the wrong memory node";
    }
    tree::journal_clear(*n.mem, c);
    auto cleared = tree::journal_read(*n.mem, root);
    EXPECT_TRUE(cleared.byte_records.empty());
    EXPECT_EQ(cleared.lanes.size(), 3u);
}

// A byte lane that filled up and is then wholly obsolete grows as a fixed one
// does: 24, 48, ... slots up to the 64 KiB lane's 390, and recovery reads the
// grown lane whole (its longest entries included).
TEST(JournalBytes, AFilledLaneGrowsOnceObsolete) {
    Nodes n(1);
    GAddr root = tree::journal_create(*n.mem, 0, n.ns, 1, JournalForm::kBytes);
    JournalWriter w(*n.mem, root, 4, n.ns);
    uint32_t k = 0;
    uint64_t lsn = 1, durable = 0;
    std::vector<uint32_t> sizes;
    for (int fill = 0; fill < 7; fill++) {
        uint32_t got = 0;
        for (;; got++) {
            try {
                journal(*n.mem, w, 0, entry(k, k % 2 ? kMax : 5), lsn, durable);
            } catch (const NeedDurable& e) {
                EXPECT_EQ(e.lsn(), lsn - 1) << "the newest record";
                durable = e.lsn();
                break;
            }
            k++;
            lsn++;
        }
        sizes.push_back(got);
        auto c = tree::journal_read(*n.mem, root);
        ASSERT_EQ(c.lane_slots.size(), 1u);
        EXPECT_EQ(c.lane_slots[0], got);
        ASSERT_EQ(c.byte_records.size(), got) << "recovery must list every record of the grown lane";
        EXPECT_EQ(listed(c, entry(k - 1, (k - 1) % 2 ? kMax : 5)), lsn - 1);
    }
    const uint32_t max = tree::kJournalByteLaneRecordsMax;
    EXPECT_EQ(max, 390u);
    EXPECT_EQ(sizes, (std::vector<uint32_t>{24, 48, 96, 192, 384, max, max}));
}

// One record per entry, the highest lsn, however often and in whichever lanes
// the entry was journaled; an insert that takes again within one reservation
// rewrites its own slot.
TEST(JournalBytes, DuplicatesAndOrder) {
    Nodes n(1);
    GAddr root = tree::journal_create(*n.mem, 0, n.ns, 1, JournalForm::kBytes);
    JournalWriter w1(*n.mem, root, 1, n.ns), w2(*n.mem, root, 2, n.ns);
    const std::string dup = "dup-entry\x01\x02\x03\x04\x05\x06";
    journal(*n.mem, w1, 0, dup, 50, 0);
    journal(*n.mem, w2, 0, dup, 70, 0);
    journal(*n.mem, w1, 0, dup, 60, 0);
    for (const char* s : {"b", "ab", "a", "\xff", "a\x01"}) journal(*n.mem, w2, 0, s, 80, 0);
    // one reservation, two takes: the second overwrites the first's slot
    ASSERT_TRUE(w1.reserve(90, 0));
    RemoteOp op = w1.take_op(0, u8(std::string("first")), 5, 90);
    n.mem->batch(0, &op, 1);
    op = w1.take_op(0, u8(std::string("again")), 5, 90);
    n.mem->batch(0, &op, 1);
    auto c = tree::journal_read(*n.mem, root);
    std::vector<std::string> got;
    for (auto& r : c.byte_records) got.push_back(r.entry);
    EXPECT_EQ(got, (std::vector<std::string>{"a", "a\x01", "ab", "again", "b", dup, "\xff"}));
    EXPECT_EQ(listed(c, dup), 70u);
    EXPECT_EQ(listed(c, "first"), 0u) << "a second take of one insert used another slot";
    EXPECT_EQ(raw_lane(*n.mem, c.lanes[0], c.lane_slots[0]).size() + raw_lane(*n.mem, c.lanes[1], c.lane_slots[1]).size(),
              9u);
}

// A slot whose len is 0 or beyond the limit (a torn write, garbage) is
// skipped, the last slot of the lane included, so recovery never reads past a
// record; a lane or root of the other form is refused, not parsed.
TEST(JournalBytes, GarbageSlotsAreIgnoredAndFormsNeverMixed) {
    Nodes n(1);
    GAddr root = tree::journal_create(*n.mem, 0, n.ns, 1, JournalForm::kBytes);
    JournalWriter w(*n.mem, root, 0, n.ns);
    std::vector<uint64_t> off;
    for (uint32_t i = 0; i < kByteSlots; i++) {
        ASSERT_TRUE(w.reserve(100 + i, 0));
        const std::string e = entry(i, 10);
        off.push_back(w.take(0, u8(e), e.size(), 100 + i));
        n.mem->write(make_gaddr(0, off.back()), w.record_bytes().data(), static_cast<uint32_t>(w.record_bytes().size()));
    }
    ASSERT_EQ(tree::journal_read(*n.mem, root).byte_records.size(), kByteSlots);
    const uint16_t bad_len[] = {uint16_t(kMax + 1), 0xFFFF, 0, 1000};
    const uint32_t bad_slot[] = {0, kByteSlots - 1, 5, 7};
    for (int i = 0; i < 4; i++)
        n.mem->write(make_gaddr(0, off[bad_slot[i]] + offsetof(tree::JournalByteRecord, len)), &bad_len[i], 2);
    uint64_t zero = 0;  // a freed slot whose len still says 10
    n.mem->write(make_gaddr(0, off[9]), &zero, 8);
    auto c = tree::journal_read(*n.mem, root);
    ASSERT_EQ(c.byte_records.size(), kByteSlots - 5);
    for (uint32_t s : {0u, kByteSlots - 1, 5u, 7u, 9u}) EXPECT_EQ(listed(c, entry(s, 10)), 0u) << "slot " << s;
    for (auto& r : c.byte_records) EXPECT_EQ(r.entry.size(), 10u);
    EXPECT_EQ(listed(c, entry(8, 10)), 108u);
    // The lane header of the fixed form in a byte journal: damaged, not read.
    tree::JournalLaneHeader fixed{tree::kJournalLaneMagic, 0, kByteSlots};
    n.mem->write(c.lanes[0], &fixed, sizeof fixed);
    EXPECT_EQ(code_of([&] { tree::journal_read(*n.mem, root); }), ErrorCode::kCorrupt);
    // A root whose form and record size disagree, or an unknown form.
    const uint32_t pairs[3][2] = {{1, 24}, {0, 168}, {2, 168}};
    for (auto& p : pairs) {
        n.mem->write(root + offsetof(tree::JournalRoot, form), p, 8);
        EXPECT_EQ(code_of([&] { tree::journal_read(*n.mem, root); }), ErrorCode::kCorrupt) << p[0] << "," << p[1];
        EXPECT_EQ(code_of([&] { tree::journal_form(*n.mem, root); }), ErrorCode::kCorrupt);
    }
}

// A take of the other form, an empty or too long entry are refused with
// kInvalid before anything changes: no slot is consumed, nothing is written,
// and the next valid take gets the slot the refused one would have.
TEST(JournalBytes, WrongFormOrLengthTakesNothing) {
    for (JournalForm form : {JournalForm::kBytes, JournalForm::kFixed}) {
        Nodes n(1);
        GAddr root = tree::journal_create(*n.mem, 0, n.ns, 1, form);
        JournalWriter w(*n.mem, root, 2, n.ns);
        ASSERT_TRUE(w.reserve(100, 0));
        const GAddr lane = tree::journal_read(*n.mem, root).lanes.at(0);
        const uint64_t slot0 = gaddr_offset(lane) + sizeof(tree::JournalLaneHeader);
        const std::string e("entry\0\x01\x02", 8);
        const std::string too_long(kMax + 1, 'x');
        std::vector<std::function<void()>> refused;
        if (form == JournalForm::kBytes) {
            refused.push_back([&] { w.take(0, K(1, 1, 1), 100); });
            refused.push_back([&] { w.take_op(0, K(1, 1, 1), 100); });
            refused.push_back([&] { w.take(0, u8(too_long), too_long.size(), 100); });
            refused.push_back([&] { w.take_op(0, u8(too_long), too_long.size(), 100); });
            refused.push_back([&] { w.take(0, u8(e), 0, 100); });
            refused.push_back([&] { w.take(0, nullptr, 5, 100); });
        } else {
            refused.push_back([&] { w.take(0, u8(e), e.size(), 100); });
            refused.push_back([&] { w.take_op(0, u8(e), e.size(), 100); });
        }
        for (size_t i = 0; i < refused.size(); i++) {
            EXPECT_EQ(code_of(refused[i]), ErrorCode::kInvalid) << "take " << i;
            EXPECT_EQ(w.slot_taken(0), -1) << "take " << i << " consumed a slot";
            EXPECT_FALSE(w.any_slot_taken());
        }
        auto c = tree::journal_read(*n.mem, root);
        EXPECT_TRUE(c.records.empty() && c.byte_records.empty());
        const uint64_t off = form == JournalForm::kBytes ? w.take(0, u8(e), e.size(), 100) : w.take(0, K(1, 1, 1), 100);
        EXPECT_EQ(off, slot0) << "a refused take moved the lane on";
        EXPECT_EQ(w.slot_taken(0), 0);
    }
}

// The fixed form, byte for byte: a root made by journal_create(default) is
// the layout every earlier dex wrote (form words 0), a root so written is
// read as the fixed form, a record is the 24 bytes {EntryKey, lsn} in a
// 4 KiB lane of 170 slots under kJournalLaneMagic, and an old fixed-size lane
// (kJournalMagic, no count) is still read whole; a byte lane in a fixed
// journal is refused.
TEST(JournalFixedForm, RemoteBytesAreUnchanged) {
    Nodes n(1);
    GAddr root = tree::journal_create(*n.mem, 0, n.ns, 77);
    uint64_t w64[4];
    n.mem->read(root, w64, sizeof w64);
    EXPECT_EQ(w64[0], 0x31304c4e524a7864ull);
    EXPECT_EQ(w64[1], 77u);
    EXPECT_EQ(w64[2], (uint64_t(1024) << 32) | 1u);  // nodes 1, lanes 1024
    EXPECT_EQ(w64[3], 0u) << "the word that was `reserved` must stay 0 in a fixed root";
    EXPECT_EQ(tree::journal_form(*n.mem, root), JournalForm::kFixed);
    EXPECT_EQ(tree::lane_records_for(4096), 170u);
    EXPECT_EQ(tree::lane_bytes_for(170), 4096u);
    EXPECT_EQ(tree::lane_records_for(65536), 2730u);

    JournalWriter w(*n.mem, root, 9, n.ns);
    EXPECT_EQ(w.form(), JournalForm::kFixed);
    ASSERT_TRUE(w.reserve(1234, 0));
    const EntryKey k = K(5, 6, 7);
    RemoteOp op = w.take_op(0, k, 1234);
    EXPECT_EQ(op.len, 24u);
    uint8_t want[24];
    std::memcpy(want, &k, 16);
    const uint64_t lsn = 1234;
    std::memcpy(want + 16, &lsn, 8);
    ASSERT_EQ(w.record_bytes().size(), 24u);
    EXPECT_EQ(std::memcmp(w.record_bytes().data(), want, 24), 0);
    n.mem->batch(0, &op, 1);
    auto c = tree::journal_read(*n.mem, root);
    ASSERT_EQ(c.lanes.size(), 1u);
    EXPECT_EQ(c.form, JournalForm::kFixed);
    EXPECT_EQ(c.lane_slots, std::vector<uint32_t>{170});
    EXPECT_EQ(op.offset, gaddr_offset(c.lanes[0]) + 16);
    uint8_t raw[24];
    n.mem->read(make_gaddr(0, op.offset), raw, 24);
    EXPECT_EQ(std::memcmp(raw, want, 24), 0);
    tree::JournalLaneHeader h;
    n.mem->read(c.lanes[0], &h, sizeof h);
    EXPECT_EQ(h.magic, tree::kJournalLaneMagic);
    EXPECT_EQ(h.records, 170u);
    ASSERT_EQ(c.records.size(), 1u);
    EXPECT_EQ(c.records[0].key, k);
    EXPECT_EQ(c.records[0].lsn, 1234u);
    EXPECT_TRUE(c.byte_records.empty());
    // The last slot of an old lane (header {kJournalMagic, lane, 0}).
    const EntryKey last = K(8, 1, 1);
    std::memcpy(want, &last, 16);
    n.mem->write(c.lanes[0] + 16 + 169 * 24, want, 24);
    tree::JournalLaneHeader old{tree::kJournalMagic, 9, 0};
    n.mem->write(c.lanes[0], &old, sizeof old);
    c = tree::journal_read(*n.mem, root);
    EXPECT_EQ(c.lane_slots, std::vector<uint32_t>{170});
    ASSERT_EQ(c.records.size(), 2u);
    EXPECT_EQ(c.records[1].key, last);
    tree::JournalLaneHeader bytes{tree::kJournalByteLaneMagic, 9, 170};
    n.mem->write(c.lanes[0], &bytes, sizeof bytes);
    EXPECT_EQ(code_of([&] { tree::journal_read(*n.mem, root); }), ErrorCode::kCorrupt);
    EXPECT_EQ(tree::lane_records(bytes, 9), 0u);
    EXPECT_EQ(tree::lane_records(bytes, 9, JournalForm::kBytes), 170u);
}

}  // namespace
}  // namespace dex::testing
