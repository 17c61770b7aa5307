// THE definition of the insert journal (src/README.md "Crash survival: the
// insert journal"): its remote layout, the per-process writer that adds a
// record to every write-through insert, and the reader / reset used by the
// recovery that runs after a compute-server crash.
//
// Why it exists: an insert reaches remote memory before the heap WAL that
// describes its row is durable. A crash can then leave an entry whose heap
// tuple never became durable (a "stray"); once a later insert reuses that heap
// slot, the stray leads to the wrong row. Every write-through insert therefore
// first writes a record (key, heap LSN) into a lane of the journal, in the
// same ordered batch as the leaf change, so that after a crash every possible
// stray is listed and can be checked against the heap before the index
// answers again.
//
// Remote layout (all in the index's namespaces):
//   root (home node, one node-sized block):  JournalRoot
//   directory (one per memory node of the tree): kJournalLanes GAddrs, 0 = no lane yet
//   lane (allocated by its first writer): JournalLaneHeader + its records
//     (kJournalLaneBytes at first; a writer whose lane keeps filling up with
//     records whose WAL is not durable -- a bulk load -- replaces it by one
//     twice as large, up to kJournalLaneBytesMax, src/README.md "The insert
//     journal")
// A journal holds one form of record, fixed when it is created: JournalRecord
// (a 16-byte EntryKey, trees of fixed keys) or JournalByteRecord (an entry's
// bytes, trees of slotted nodes). The root records the form; lanes of the
// byte form carry their own magic, so neither form is ever parsed as the other.
// A lane belongs to one writer at a time (PostgreSQL: the PGPROC number), so
// appending needs no remote atomic: the writer knows its lane's state.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/gaddr.h"
#include "transport/remote_memory.h"
#include "tree/key.h"
#include "tree/node_capacity.h"

namespace dex::tree {

constexpr uint64_t kJournalMagic = 0x31304c4e524a7864ull;  // "dxJRNL01"
constexpr uint32_t kJournalLanes = 1024;                   // writers per memory node with a lane
constexpr uint32_t kJournalLaneBytes = 4096;               // a new lane
constexpr uint32_t kJournalLaneBytesMax = 64 * 1024;       // the largest a lane grows to
// Lanes written by dex before lanes could grow carry kJournalMagic and are
// kJournalLaneBytes long; grown-capable lanes carry this magic and their
// record count.
constexpr uint64_t kJournalLaneMagic = 0x32454e414c4a7864ull;  // "dxJLANE2"
// Lanes of a journal of byte records (never read as a fixed lane).
constexpr uint64_t kJournalByteLaneMagic = 0x42454e414c4a7864ull;  // "dxJLANEB"

constexpr uint32_t kJournalMaxNodes = 32;                  // = DEX_MAX_MEMNODES

#pragma pack(push, 1)
// One journaled insert: the entry and the end of the heap WAL record that made
// its row (lsn 0 = free slot). The record is obsolete once WAL up to lsn is durable.
struct JournalRecord {
    EntryKey key;
    uint64_t lsn;
};
static_assert(sizeof(JournalRecord) == 24);

// The byte form: one journaled entry of a slotted tree (key column bytes and
// heap TID, src/README.md "Slotted nodes"), `len` bytes of `entry` used (1 ..
// DEX_SLOTTED_MAX_ENTRY_BYTES), lsn 0 = free slot. lsn comes first so that a
// writer may write only the used prefix (kJournalByteRecordHead + len bytes):
// bytes past len are whatever an earlier record left and are never read.
constexpr uint32_t kJournalMaxEntryBytes = DEX_SLOTTED_MAX_ENTRY_BYTES;
struct JournalByteRecord {
    uint64_t lsn;
    uint16_t len;
    uint8_t pad[6];  // 0
    uint8_t entry[kJournalMaxEntryBytes];
};
#pragma pack(pop)
static_assert(sizeof(JournalByteRecord) == 168);
constexpr uint32_t kJournalByteRecordHead = offsetof(JournalByteRecord, entry);
static_assert(kJournalByteRecordHead == 16 && offsetof(JournalByteRecord, len) == 8);

// Which record a journal holds. Stored in JournalRoot::form (0 in every root
// written before the byte form existed: those are fixed).
enum class JournalForm : uint32_t { kFixed = 0, kBytes = 1 };

struct JournalLaneHeader {
    uint64_t magic;    // kJournalLaneMagic (kJournalMagic: an old fixed-size lane;
                       // kJournalByteLaneMagic: a lane of byte records)
    uint32_t lane;     // which directory slot owns it
    uint32_t records;  // slots that follow (0 in an old lane: kJournalLaneRecords)
};
static_assert(sizeof(JournalLaneHeader) == 16);
constexpr uint32_t record_bytes_of(JournalForm f) {
    return f == JournalForm::kBytes ? sizeof(JournalByteRecord) : sizeof(JournalRecord);
}
// Lanes of both forms span the same bytes (kJournalLaneBytes growing to
// kJournalLaneBytesMax), so a writer's remote memory does not depend on the form.
constexpr uint32_t lane_records_for(uint32_t bytes, uint32_t record_bytes = sizeof(JournalRecord)) {
    return static_cast<uint32_t>((bytes - sizeof(JournalLaneHeader)) / record_bytes);
}
constexpr uint32_t kJournalLaneRecords = lane_records_for(kJournalLaneBytes);        // 170
constexpr uint32_t kJournalLaneRecordsMax = lane_records_for(kJournalLaneBytesMax);  // 2730
constexpr uint32_t kJournalByteLaneRecords = lane_records_for(kJournalLaneBytes, sizeof(JournalByteRecord));  // 24
constexpr uint32_t kJournalByteLaneRecordsMax =
    lane_records_for(kJournalLaneBytesMax, sizeof(JournalByteRecord));  // 390
static_assert(kJournalLaneRecords == 170 && kJournalLaneRecordsMax == 2730, "the fixed form's lanes are unchanged");
constexpr uint32_t lane_bytes_for(uint32_t records, uint32_t record_bytes = sizeof(JournalRecord)) {
    return static_cast<uint32_t>(sizeof(JournalLaneHeader) + records * record_bytes);
}
// Slots a new lane of this form has, and the most a lane grows to.
constexpr uint32_t lane_min_records(JournalForm f) {
    return f == JournalForm::kBytes ? kJournalByteLaneRecords : kJournalLaneRecords;
}
constexpr uint32_t lane_max_records(JournalForm f) {
    return f == JournalForm::kBytes ? kJournalByteLaneRecordsMax : kJournalLaneRecordsMax;
}
// Slots of the lane with this header, 0 if it is no lane of directory slot
// `lane` in a journal of form `f`.
uint32_t lane_records(const JournalLaneHeader& h, uint32_t lane, JournalForm f = JournalForm::kFixed);

struct JournalRoot {
    uint64_t magic;
    // Id of the compute-server life (PostgreSQL: a random id chosen when shared
    // memory is initialized) that last recovered this journal: a writer of
    // another life must recover it before the index is used.
    uint64_t life;
    uint32_t nodes;  // entries of dir in use
    uint32_t lanes;  // kJournalLanes
    // The record form (JournalForm) and its record size: both 0 in a fixed
    // journal (as in every root written before the byte form; a fixed root
    // is byte for byte what it was), {kBytes, 168} in a byte journal. A root
    // with any other pair is refused as damaged, so no reader guesses.
    uint32_t form;
    uint32_t record_bytes;
    GAddr dir[kJournalMaxNodes];  // lane directory on memory node i (0: none)
};
static_assert(sizeof(JournalRoot) <= 1024);
static_assert(offsetof(JournalRoot, form) == 24 && offsetof(JournalRoot, dir) == 32, "the root's layout is unchanged");
constexpr uint64_t kJournalLifeOffset = 8;

// An insert cannot record itself before the heap WAL up to `lsn` is durable
// (its lane is full of records that are not, or it has no lane): the caller
// flushes WAL up to lsn and retries the whole operation (nothing was changed).
class NeedDurable : public Error {
public:
    explicit NeedDurable(uint64_t lsn)
        : Error(ErrorCode::kNeedDurable, "dex: heap WAL must be flushed first"), lsn_(lsn) {}
    uint64_t lsn() const { return lsn_; }

private:
    uint64_t lsn_;
};

// How far the compute server's log (PostgreSQL: WAL) is durable, for code
// that cannot be told by its caller (a dirty cached leaf written back on
// eviction must not carry entries whose heap WAL is not durable). Set once per
// process by the C API; without a source everything counts as durable. The
// function must not throw or call back into dex.
using DurableLsnFn = uint64_t (*)();
void set_durable_lsn_source(DurableLsnFn fn);
uint64_t durable_lsn();

// Allocates the root and one directory per memory node of `part_ns` (ns per
// node id, 0 = not a part), all zeroed, the root's life set to `life` and its
// form to `form`, and returns the root's address (on `home`).
GAddr journal_create(RemoteMemory& mem, uint32_t home, const std::vector<uint64_t>& part_ns, uint64_t life,
                     JournalForm form = JournalForm::kFixed);
uint64_t journal_life(RemoteMemory& mem, GAddr root);
JournalForm journal_form(RemoteMemory& mem, GAddr root);
// CAS of the root's life word; returns the value found (== expected: done).
uint64_t journal_cas_life(RemoteMemory& mem, GAddr root, uint64_t expected, uint64_t life);

// One record of a byte journal as recovery sees it.
struct JournalByteEntry {
    std::string entry;  // 1 .. kJournalMaxEntryBytes bytes
    uint64_t lsn;
};

// Everything the journal holds, for recovery.
struct JournalContents {
    uint64_t life = 0;
    JournalForm form = JournalForm::kFixed;
    std::vector<GAddr> lanes;             // every allocated lane, on every node
    std::vector<uint32_t> lane_slots;     // ... and its number of slots
    // kFixed: every used slot (lsn != 0), sorted by key, duplicates removed.
    std::vector<JournalRecord> records;
    // kBytes: every used slot whose len is 1 .. kJournalMaxEntryBytes (any
    // other len is a torn or damaged slot: skipped, never read past), sorted
    // by entry bytes (memcmp order, a proper prefix first), one per entry
    // (the highest lsn).
    std::vector<JournalByteEntry> byte_records;
};
JournalContents journal_read(RemoteMemory& mem, GAddr root);
// Marks every slot of every lane free (after the records were dealt with).
void journal_clear(RemoteMemory& mem, const JournalContents& c);

// The journal as one writer (one lane on every memory node) sees it. Not
// thread-safe; one per tree handle per process.
class JournalWriter {
public:
    JournalWriter(RemoteMemory& mem, GAddr root, uint32_t lane, std::vector<uint64_t> part_ns)
        : mem_(mem), root_(root), lane_(lane), part_ns_(std::move(part_ns)) {}

    // Before an insert whose row's heap WAL ends at `lsn` while WAL is durable
    // up to `durable`: true if the insert must be journaled (lsn > durable).
    // Makes sure the lane on every memory node of the tree has a slot whose
    // previous record is obsolete; otherwise throws NeedDurable. Loads (first
    // call) or allocates the lanes: remote operations, no locks held.
    bool reserve(uint64_t lsn, uint64_t durable);
    // A new insert: it has taken no slot yet (reserve() starts with this).
    void begin_entry();

    // Batched inserts (BTree::insert_batch) reserve for a run of inserts at
    // once: how many inserts in a row can be journaled while WAL is durable up
    // to `durable` -- the fewest consecutive slots, from the next one, whose
    // records are obsolete, over every memory node of the tree (0 if one has
    // no lane). *newest: the highest LSN any lane holds (flushing that far
    // frees every slot). Loads or allocates the lanes: remote operations.
    uint32_t batch_room(uint64_t durable, uint64_t* newest);
    // The slot the insert in progress took on `node` (-1: none) -- and, for
    // an insert of a batch that goes on one at a time after its batched
    // attempt, taking that same slot up again (take() then reuses it).
    int64_t slot_taken(uint32_t node) const;
    // Has the insert in progress taken a slot on any memory node (written its
    // record there, or sent it with an offloaded insert)?
    bool any_slot_taken() const;
    void resume(uint32_t node, int64_t slot);
    // Takes the next slot on memory node `node` for (key, lsn) -- or, if this
    // insert (since reserve()) took one there already, the same slot again: an
    // insert may write its record more than once (an offload that answered
    // "needs a split", a restarted descent) but reserve() vouched for one
    // slot per node only. Returns the slot's pool offset on that node; the
    // record's bytes are record().
    // A journal of the byte form refuses it (kInvalid), taking nothing.
    uint64_t take(uint32_t node, const EntryKey& key, uint64_t lsn);
    const JournalRecord& record() const { return rec_; }
    // A WRITE of the record just taken (for an ordered batch on `node`).
    RemoteOp take_op(uint32_t node, const EntryKey& key, uint64_t lsn);

    // The byte form (a journal created with JournalForm::kBytes): the same
    // for the entry entry[0 .. len). A fixed journal, len 0 or len >
    // kJournalMaxEntryBytes throw kInvalid, taking nothing.
    uint64_t take(uint32_t node, const uint8_t* entry, size_t len, uint64_t lsn);
    RemoteOp take_op(uint32_t node, const uint8_t* entry, size_t len, uint64_t lsn);
    // The bytes to write at the slot take() returned, for either form (an
    // offloaded insert ships them opaquely to the memory node): the whole
    // JournalRecord, or the head and used entry bytes of a JournalByteRecord.
    // Valid until the next take.
    std::string_view record_bytes() const;
    // The journal's form (reads the root on first use).
    JournalForm form();
    // The form of record this writer's tree writes (a tree attached through
    // the C API says so). A journal of the other form -- a byte-string index
    // built before its layout journaled got a fixed one -- takes none of its
    // entries: reserve() then answers NeedDurable(lsn) like a lane-less
    // writer, so the insert waits for its own WAL instead of failing.
    void expect_form(JournalForm f) {
        expect_ = true;
        expected_ = f;
    }

private:
    struct Lane {
        bool loaded = false;
        GAddr addr = 0;
        uint32_t next = 0;
        int64_t current = -1;       // slot taken by the insert in progress (-1: none)
        std::vector<uint64_t> lsn;  // per slot (its size: the lane's slots)
        bool filled = false;        // was found full of records not yet durable
    };
    void load(uint32_t node);
    void load_root();
    // The slot for the insert in progress on `node` (its own, or the next one).
    uint32_t claim(uint32_t node);
    uint64_t slot_offset(uint32_t node, uint32_t slot) const;
    // The lane on `node` was full and is now wholly obsolete: replace it by
    // one twice as large (until lane_max_records of the form).
    void maybe_grow(uint32_t node, uint64_t durable);
    GAddr dir_slot(uint32_t node) const;

    RemoteMemory& mem_;
    GAddr root_;
    uint32_t lane_;
    std::vector<uint64_t> part_ns_;
    bool have_root_ = false;
    JournalRoot root_img_{};
    JournalForm form_ = JournalForm::kFixed;  // from the root (load_root)
    bool expect_ = false;                     // expect_form() was called
    JournalForm expected_ = JournalForm::kFixed;
    std::vector<Lane> lanes_;
    JournalRecord rec_{};
    JournalByteRecord brec_{};
    bool bytes_taken_ = false;  // record_bytes(): brec_ (else rec_)
};

}  // namespace dex::tree
