// C API (dex_capi.h), trees: open / close, bulk load, insert, delete, scans,
// checks, write-back mode, the insert journal. Thin wrappers around
// dex::tree::BTree; the process state they need is dex::cluster::ComputeProcess.
// No exception leaves this file.
#include <atomic>
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "cache/writeback_registry.h"
#include "capi/capi_internal.h"

using dex::Error;
using dex::ErrorCode;
using dex::capi::guarded;
using dex::capi::journal_recovered_elsewhere;
using dex::capi::proc;
using dex::capi::to_key;

static_assert(sizeof(DexKey) == sizeof(dex::EntryKey), "DexKey must match dex::EntryKey");
static_assert(offsetof(DexKey, value) == offsetof(dex::EntryKey, value));
static_assert(offsetof(DexKey, block) == offsetof(dex::EntryKey, block));
static_assert(offsetof(DexKey, offnum) == offsetof(dex::EntryKey, offnum));
static_assert(offsetof(DexKey, cls) == offsetof(dex::EntryKey, cls));
static_assert(offsetof(DexKey, pad) == offsetof(dex::EntryKey, pad));
static_assert(DEX_KEY_NEG_INF == dex::kNegInf && DEX_KEY_VALUE == dex::kValue && DEX_KEY_NULL == dex::kNull &&
              DEX_KEY_POS_INF == dex::kPosInf);
static_assert(DEX_ERR_NEED_WAL_FLUSH == static_cast<int>(ErrorCode::kNeedDurable));
static_assert(DEX_ERR_REMOTE == static_cast<int>(ErrorCode::kRemote) &&
              DEX_ERR_LOST_MEMORY == static_cast<int>(ErrorCode::kLostMemory) &&
              DEX_ERR_INVALID == static_cast<int>(ErrorCode::kInvalid));

namespace {

Error lost_memory(const std::string& name, dex::Transport& t, uint64_t inc, uint64_t expected) {
    return Error(ErrorCode::kLostMemory,
                 "index \"" + name + "\" lost its remote memory (memory node " + t.address() +
                     " restarted: incarnation " + std::to_string(inc) + ", expected " + std::to_string(expected) +
                     ")",
                 "REINDEX INDEX " + name);
}

void fill_info(DexTreeInfo* out, const dex::tree::TreeInfo& i) {
    if (!out) return;
    out->entries = i.entries;
    out->leaves = i.leaves;
    out->inner_nodes = i.inner_nodes;
    out->height = i.height;
    out->root = i.root;
}

Error byte_journal(const std::string& name) {
    return Error(ErrorCode::kInvalid, "index \"" + name + "\": its insert journal holds byte entries "
                                      "(dex_journal_read_bytes / dex_journal_finish_bytes)");
}

}  // namespace

// ---- DexTree ---------------------------------------------------------------------

void DexTree::validate() {
    dex::Transport& t = proc().client().node(node);
    uint64_t inc = t.incarnation();
    if (inc != incarnation) throw lost_memory(name, t, inc, incarnation);
}

namespace {
Error wrong_layout(const std::string& name, bool bytes) {
    return Error(ErrorCode::kInvalid, "index \"" + name + "\" has " +
                                          (bytes ? "byte-string entries" : "16-byte keys") + ": operation of the other layout");
}
}  // namespace

template <class T>
T& DexTree::open_tree(std::unique_ptr<T>& t) {
    int want = proc().op_timeout_ms();
    if (!t) {
        t = std::make_unique<T>(proc().mem(), static_cast<uint32_t>(node), ns, proc().tree_options());
        if (!part_ns.empty()) t->set_placement(part_ns, placement_level);
        op_timeout_ms = 0;
        attach_journal();
    }
    // Scans and bulk loads hold references to the tree: adjust it in place.
    if (want > 0 && want != op_timeout_ms) {
        t->set_op_timeout(want);
        op_timeout_ms = want;
    }
    return *t;
}

dex::tree::SlottedTree& DexTree::st() {
    if (layout != DEX_LAYOUT_BYTES) throw wrong_layout(name, false);
    return open_tree(stree);
}

dex::tree::BTree& DexTree::bt() {
    if (layout != DEX_LAYOUT_FIXED) throw wrong_layout(name, true);
    return open_tree(tree);
}

void DexTree::attach_journal() {
    if (!tree && !stree) return;
    journal.reset();
    const std::vector<uint64_t>& parts = tree ? tree->namespaces() : stree->namespaces();
    if (journal_root) {
        journal = std::make_unique<dex::tree::JournalWriter>(proc().mem(), journal_root, journal_lane, parts);
        journal->expect_form(layout == DEX_LAYOUT_BYTES ? dex::tree::JournalForm::kBytes : dex::tree::JournalForm::kFixed);
    }
    if (tree) tree->set_journal(journal.get());
    if (stree) stree->set_journal(journal.get());
}

void DexTree::check_part(uint32_t j) {
    if (j == static_cast<uint32_t>(node) || j >= part_ns.size() || !part_ns[j]) return;
    dex::Transport& t = proc().mem().node(j);
    uint64_t inc = t.incarnation();
    if (inc != part_inc[j]) throw lost_memory(name, t, inc, part_inc[j]);
}

DexTree::NodeCheckScope::NodeCheckScope(DexTree* t) {
    if (t->part_ns.empty()) return;
    proc().mem().set_node_check([t](uint32_t j) { t->check_part(j); });
    armed = true;
}

DexTree::NodeCheckScope::~NodeCheckScope() {
    if (armed) proc().mem().set_node_check(nullptr);
}

extern "C" {

int dex_tree_open(int node, uint64_t ns, uint64_t incarnation, const char* index_name, DexTree** out,
                  DexError* err) {
    if (out) *out = nullptr;
    return guarded(err, [&] {
        if (!out) throw Error(ErrorCode::kInvalid, "dex_tree_open: out is NULL");
        auto t = std::make_unique<DexTree>();
        t->node = node;
        t->ns = ns;
        t->incarnation = incarnation;
        t->name = index_name ? index_name : "?";
        t->validate();
        *out = t.release();
    });
}

int dex_tree_open_parts(int home, int nnodes, const uint64_t* ns, const uint64_t* incarnation, int placement_level,
                        const char* index_name, DexTree** out, DexError* err) {
    if (out) *out = nullptr;
    return guarded(err, [&] {
        if (!out || !ns || !incarnation || nnodes <= 0 || nnodes > DEX_MAX_MEMNODES || home < 0 || home >= nnodes)
            throw Error(ErrorCode::kInvalid, "dex_tree_open_parts: invalid arguments");
        if (placement_level < 1 || placement_level > dex::tree::kMaxPlacementLevel)
            throw Error(ErrorCode::kInvalid, "placement level " + std::to_string(placement_level) + " out of range");
        auto t = std::make_unique<DexTree>();
        t->node = home;
        t->ns = ns[home];
        t->incarnation = incarnation[home];
        t->part_ns.assign(ns, ns + nnodes);
        t->part_inc.assign(incarnation, incarnation + nnodes);
        t->placement_level = placement_level;
        t->name = index_name ? index_name : "?";
        t->validate();
        *out = t.release();
    });
}

uint32_t dex_tree_id(int home, uint64_t ns) { return dex::tree::tree_id_for(static_cast<uint32_t>(home), ns); }

int dex_tree_placement(DexTree* tree, int* placement_level, uint64_t* nodes_on, uint64_t* subtrees_on, int max,
                       DexError* err) {
    return guarded(err, [&] {
        if (!tree || !nodes_on || !subtrees_on || max <= 0)
            throw Error(ErrorCode::kInvalid, "dex_tree_placement: NULL argument");
        proc().flush_tree(tree->node, tree->ns, tree->owner_word);
        dex::tree::TreeInfo i;
        tree->run_any([&](auto& b) { i = b.check(); });
        if (placement_level) *placement_level = i.placement_level;
        for (int k = 0; k < max; k++) {
            nodes_on[k] = static_cast<size_t>(k) < i.nodes_on.size() ? i.nodes_on[k] : 0;
            subtrees_on[k] = static_cast<size_t>(k) < i.subtrees_on.size() ? i.subtrees_on[k] : 0;
        }
    });
}

void dex_tree_close(DexTree* tree) {
    if (!tree) return;
    try {
        if (tree->tree) tree->tree->release_spares();  // (slotted trees take no spares)
    } catch (...) {
    }
    delete tree;
}

int dex_tree_validate(DexTree* tree, DexError* err) {
    return guarded(err, [&] {
        if (!tree) throw Error(ErrorCode::kInvalid, "NULL tree handle");
        tree->validate();
    });
}

int dex_tree_set_layout(DexTree* tree, int layout, DexError* err) {
    return guarded(err, [&] {
        if (!tree) throw Error(ErrorCode::kInvalid, "NULL tree handle");
        if (layout != DEX_LAYOUT_FIXED && layout != DEX_LAYOUT_BYTES)
            throw Error(ErrorCode::kInvalid, "unknown tree layout " + std::to_string(layout));
        if (layout != tree->layout && (tree->tree || tree->stree))
            throw Error(ErrorCode::kInvalid, "dex_tree_set_layout after the tree was used");
        tree->layout = layout;
    });
}

int dex_tree_init_empty(DexTree* tree, DexError* err) {
    return guarded(err, [&] {
        if (!tree) throw Error(ErrorCode::kInvalid, "NULL tree handle");
        tree->run_any([](auto& b) { b.init_empty(); });
    });
}

int dex_bulk_begin(DexTree* tree, double fill_factor, DexBulk** out, DexError* err) {
    if (out) *out = nullptr;
    return guarded(err, [&] {
        if (!tree || !out) throw Error(ErrorCode::kInvalid, "dex_bulk_begin: NULL argument");
        auto b = std::make_unique<DexBulk>();
        b->tree = tree;
        if (tree->layout == DEX_LAYOUT_BYTES)
            tree->run_bytes([&](dex::tree::SlottedTree& st) {
                b->sloader = std::make_unique<dex::tree::SlottedTree::BulkLoader>(st, fill_factor);
            });
        else
            tree->run([&](dex::tree::BTree& bt) {
                b->loader = std::make_unique<dex::tree::BTree::BulkLoader>(bt, fill_factor);
            });
        *out = b.release();
    });
}

int dex_bulk_add(DexBulk* bulk, const DexKey* key, DexError* err) {
    return guarded(err, [&] {
        if (!bulk || !key || !bulk->loader) throw Error(ErrorCode::kInvalid, "dex_bulk_add: NULL argument");
        bulk->loader->add(to_key(key));  // mostly local; remote writes are checked at finish
    });
}

int dex_bulk_finish(DexBulk* bulk, DexError* err) {
    std::unique_ptr<DexBulk> owned(bulk);
    return guarded(err, [&] {
        if (!bulk || (!bulk->loader && !bulk->sloader))
            throw Error(ErrorCode::kInvalid, "dex_bulk_finish: NULL argument");
        bulk->tree->run_any([&](auto&) {
            if (bulk->loader)
                bulk->loader->finish();
            else
                bulk->sloader->finish();
        });
    });
}

void dex_bulk_abort(DexBulk* bulk) { delete bulk; }

int dex_tree_insert(DexTree* tree, const DexKey* key, uint64_t lsn, uint64_t durable, DexError* err) {
    return guarded(err, [&] {
        if (!tree || !key) throw Error(ErrorCode::kInvalid, "dex_tree_insert: NULL argument");
        dex::EntryKey k = to_key(key);
        tree->run([&](dex::tree::BTree& b) { b.insert(k, lsn, durable); });
    });
}

int dex_tree_insert_nosplit(DexTree* tree, const DexKey* key, uint64_t lsn, uint64_t durable, DexLeafStamp* full,
                            DexError* err) {
    if (full) *full = DexLeafStamp{0, 0, 0, 0xFFFFFFFFu, 0, 0};
    dex::tree::BTree::LeafFull lf;
    int rc = guarded(err, [&] {
        if (!tree || !key || !full) throw Error(ErrorCode::kInvalid, "dex_tree_insert_nosplit: NULL argument");
        dex::EntryKey k = to_key(key);
        tree->run([&](dex::tree::BTree& b) { b.insert(k, lsn, durable, &lf); });
    });
    if (rc != DEX_OK || lf.leaf == 0) return rc;
    full->leaf = lf.leaf;
    full->version = lf.version;
    full->frame = lf.frame;
    full->frame_version = lf.frame_version;
    full->nearly_full = 1;  // (it is full)
    // the insert held the leaf locked at that version a moment ago
    full->seen_at_ns = dex::capi::stamp_now();
    return DEX_LEAF_FULL;
}

int dex_tree_read_leaf(DexTree* tree, const DexLeafStamp* stamp, DexKey* out, int* n, DexError* err) {
    if (n) *n = 0;
    return guarded(err, [&] {
        if (!tree || !stamp || !out || !n) throw Error(ErrorCode::kInvalid, "dex_tree_read_leaf: NULL argument");
        std::vector<dex::EntryKey> v;
        tree->run([&](dex::tree::BTree& b) {
            b.read_leaf(stamp->leaf, stamp->version, v, stamp->frame, stamp->frame_version);
        });
        static_assert(sizeof(dex::EntryKey) == sizeof(DexKey), "DexKey is EntryKey's C image");
        size_t m = std::min<size_t>(v.size(), DEX_LEAF_CAPACITY);
        if (m) std::memcpy(out, v.data(), m * sizeof(DexKey));
        *n = static_cast<int>(m);
    });
}

int dex_tree_insert_batch(DexTree* tree, const DexKey* keys, const uint64_t* lsns, int n, uint64_t durable,
                          int* done, DexError* err) {
    if (done) *done = 0;
    size_t d = 0;
    // *done is written on every way out, errors included: the caller resumes there.
    int rc = guarded(err, [&] {
        if (!tree || !done || (n > 0 && (!keys || !lsns)))
            throw Error(ErrorCode::kInvalid, "dex_tree_insert_batch: NULL argument");
        if (n <= 0) return;
        std::vector<dex::EntryKey> v(static_cast<size_t>(n));
        std::memcpy(v.data(), keys, v.size() * sizeof(dex::EntryKey));
        tree->run([&](dex::tree::BTree& b) { b.insert_batch(v.data(), lsns, v.size(), durable, &d); });
    });
    if (done) *done = static_cast<int>(d);
    return rc;
}

int dex_tree_rewarm(DexTree* tree, DexError* err) {
    return guarded(err, [&] {
        if (!tree) throw Error(ErrorCode::kInvalid, "dex_tree_rewarm: NULL argument");
        tree->run_any([&](auto& b) { b.rewarm_batched(); });
    });
}

int dex_tree_replay_leaf_image(DexTree* tree, const uint8_t* image, uint32_t len, uint64_t* changed, DexError* err) {
    if (changed) *changed = 0;
    return guarded(err, [&] {
        if (!tree || !image) throw Error(ErrorCode::kInvalid, "dex_tree_replay_leaf_image: NULL argument");
        if (len != dex::kNodeSize) throw Error(ErrorCode::kCorrupt, "write-back redo: a leaf image of " + std::to_string(len) + " bytes");
        dex::Node img;
        std::memcpy(static_cast<void*>(&img), image, dex::kNodeSize);
        uint64_t c = 0;
        tree->run_any([&](auto& b) { c = b.replay_leaf_image(img); });
        if (changed) *changed = c;
    });
}

int dex_tree_delete(DexTree* tree, const DexKey* keys, int n, uint64_t* deleted, DexError* err) {
    if (deleted) *deleted = 0;
    return guarded(err, [&] {
        if (!tree || (n > 0 && !keys)) throw Error(ErrorCode::kInvalid, "dex_tree_delete: NULL argument");
        if (n <= 0) return;
        std::vector<dex::EntryKey> v(static_cast<size_t>(n));
        std::memcpy(v.data(), keys, v.size() * sizeof(dex::EntryKey));
        uint64_t d = 0;
        tree->run([&](dex::tree::BTree& b) { d = b.remove(v.data(), v.size()); });
        if (deleted) *deleted = d;
    });
}

int dex_scan_begin(DexTree* tree, const DexKey* lo, const DexKey* hi, int backward, DexScan** out, DexError* err) {
    if (out) *out = nullptr;
    return guarded(err, [&] {
        if (!tree || !lo || !hi || !out) throw Error(ErrorCode::kInvalid, "dex_scan_begin: NULL argument");
        auto s = std::make_unique<DexScan>();
        s->tree = tree;
        tree->run([&](dex::tree::BTree& b) { s->scan = b.scan(to_key(lo), to_key(hi), backward != 0); });
        *out = s.release();
    });
}

int dex_scan_next(DexScan* scan, const DexKey** entries, int* n, DexError* err) {
    if (entries) *entries = nullptr;
    if (n) *n = 0;
    return guarded(err, [&] {
        if (!scan || !scan->scan || !entries || !n) throw Error(ErrorCode::kInvalid, "dex_scan_next: NULL argument");
        bool more = false;
        scan->tree->run([&](dex::tree::BTree&) { more = scan->scan->next(scan->buf); });
        if (!more) scan->buf.clear();
        *entries = reinterpret_cast<const DexKey*>(scan->buf.data());
        *n = static_cast<int>(scan->buf.size());
    });
}

void dex_scan_end(DexScan* scan) { delete scan; }

void dex_scan_stamp(const DexScan* scan, DexLeafStamp* out) {
    if (!out) return;
    out->leaf = 0;
    out->version = 0;
    out->seen_at_ns = 0;
    out->frame = 0xFFFFFFFFu;
    out->frame_version = 0;
    out->nearly_full = 0;
    auto fill = [out](const auto& s) {
        out->leaf = s.leaf();
        out->version = s.leaf_version();
        out->seen_at_ns = dex::capi::stamp_ns(s.leaf_seen_at());
        out->frame = s.leaf_frame();
        out->frame_version = s.leaf_frame_version();
        out->nearly_full = s.leaf_nearly_full() ? 1 : 0;
    };
    if (scan && scan->scan)
        fill(*scan->scan);
    else if (scan && scan->sscan)
        fill(*scan->sscan);
}

int dex_tree_kill_futile(DexTree* tree, const DexLeafStamp* stamp, int n) {
    if (!tree || !stamp) return 0;
    bool current = true;
    DexError err{};
    guarded(&err, [&] {
        tree->run_any([&](auto& t) { current = t.stamp_current(stamp->leaf, stamp->frame, stamp->frame_version, stamp->version); });
    });
    if (current) return 0;
    dex::Stats::add(dex::stats().kills_skipped, static_cast<uint64_t>(n > 0 ? n : 0));
    return 1;
}

int dex_tree_kill(DexTree* tree, const DexLeafStamp* stamp, const DexKey* keys, int n, int flags,
                  uint64_t hold_lsn, uint64_t* removed, DexError* err) {
    if (removed) *removed = 0;
    return guarded(err, [&] {
        if (!tree || !stamp || (n > 0 && !keys)) throw Error(ErrorCode::kInvalid, "dex_tree_kill: NULL argument");
        if (n <= 0) return;
        std::vector<dex::EntryKey> v(static_cast<size_t>(n));
        std::memcpy(v.data(), keys, v.size() * sizeof(dex::EntryKey));
        uint64_t d = 0;
        tree->run([&](dex::tree::BTree& b) {
            d = b.remove_if_unchanged(stamp->leaf, stamp->version, v.data(), v.size(),
                                      (flags & DEX_KILL_BOTTOM_UP) != 0,
                                      dex::capi::stamp_time(stamp->seen_at_ns), stamp->frame,
                                      stamp->frame_version, hold_lsn,
                                      (flags & DEX_KILL_PRESENT) != 0);
        });
        if (removed) *removed = d;
    });
}

int dex_tree_check(DexTree* tree, DexTreeInfo* info, DexError* err) {
    return guarded(err, [&] {
        if (!tree) throw Error(ErrorCode::kInvalid, "NULL tree handle");
        // check() reads remote memory: write this tree's dirty frames first.
        proc().flush_tree(tree->node, tree->ns, tree->owner_word);
        dex::tree::TreeInfo i;
        tree->run_any([&](auto& b) { i = b.check(); });
        fill_info(info, i);
    });
}

int dex_tree_compact(DexTree* tree, uint64_t* freed, DexError* err) {
    return guarded(err, [&] {
        if (!tree) throw Error(ErrorCode::kInvalid, "NULL tree handle");
        uint64_t n = 0;
        // compact() judges leaves by their remote images: write this tree's
        // dirty frames first (the merges themselves handle later changes).
        proc().flush_tree(tree->node, tree->ns, tree->owner_word);
        tree->run_any([&](auto& b) { n = b.compact(); });
        if (freed) *freed = n;
    });
}

int dex_tree_info(DexTree* tree, DexTreeInfo* info, DexError* err) {
    return guarded(err, [&] {
        if (!tree) throw Error(ErrorCode::kInvalid, "NULL tree handle");
        dex::tree::TreeInfo i;
        tree->run_any([&](auto& b) { i = b.info(); });
        fill_info(info, i);
    });
}

static std::atomic<DexEntryLogFn> g_entry_log{nullptr};

void dex_set_entry_log_fn(DexEntryLogFn fn) { g_entry_log.store(fn, std::memory_order_release); }

int dex_tree_owner_word_read(DexTree* tree, uint64_t owner_word, uint64_t* value, DexError* err) {
    if (value) *value = 0;
    return guarded(err, [&] {
        if (!tree || !value || !owner_word) throw Error(ErrorCode::kInvalid, "dex_tree_owner_word_read: bad argument");
        tree->validate();
        *value = proc().read_owner_word(owner_word);
    });
}

int dex_tree_owner_word_release(DexTree* tree, uint64_t owner_word, uint64_t expected, DexError* err) {
    return guarded(err, [&] {
        if (!tree || !owner_word) throw Error(ErrorCode::kInvalid, "dex_tree_owner_word_release: bad argument");
        tree->validate();
        if (!proc().release_owner_word(owner_word, expected)) throw dex::cache::lost_dirty_error(tree->name);
        tree->word_checked = false;  // checked again by the next dex_tree_set_write_back
    });
}

int dex_tree_set_write_back(DexTree* tree, int on, uint64_t owner_word, DexError* err) {
    return guarded(err, [&] {
        if (!tree) throw Error(ErrorCode::kInvalid, "NULL tree handle");
        tree->owner_word = owner_word;
        if (owner_word && !tree->word_checked) {
            tree->validate();
            proc().check_owner_word(owner_word, tree->name);
            tree->word_checked = true;
        }
        bool want = on && owner_word && proc().cache().enabled();
        // Leaving write-back mode (or never in it here): frames another
        // backend left dirty are written back before we write through.
        if (!want) proc().flush_tree_for_write_through(tree->node, tree->ns, owner_word, tree->wb);
        if (want != tree->wb || (!tree->tree && !tree->stree)) {
            auto set = [&](auto& b) {
                if (want) {
                    DexTree* t = tree;
                    const uint32_t node = static_cast<uint32_t>(t->node);
                    const uint64_t ns = t->ns;
                    const int layout = t->layout;
                    b.set_write_back(
                        true,
                        [t]() {
                            return proc().register_dirty(&t->wb_slot, t->node, t->ns, t->owner_word, t->incarnation,
                                                         t->name);
                        },
                        [node, ns, layout](bool insert, bool through, const uint8_t* const* e,
                                           const uint32_t* lens, size_t n) {
                            if (DexEntryLogFn fn = g_entry_log.load(std::memory_order_acquire))
                                fn(node, ns, layout, insert ? 1 : 0, through ? 1 : 0, e, lens, n);
                        });
                } else {
                    b.set_write_back(false, {});
                }
            };
            if (tree->layout == DEX_LAYOUT_BYTES)
                set(tree->st());
            else
                set(tree->bt());
            tree->wb = want;
        }
    });
}

int dex_tree_is_write_back(const DexTree* tree) { return tree && tree->wb ? 1 : 0; }

// ---- insert journal ----------------------------------------------------------------

int dex_journal_create(DexTree* tree, uint64_t life, uint64_t* root, DexError* err) {
    if (root) *root = 0;
    return guarded(err, [&] {
        if (!tree || !root) throw Error(ErrorCode::kInvalid, "dex_journal_create: NULL argument");
        // The record form follows the tree's layout: a byte-string tree
        // journals its entry bytes (JournalByteRecord).
        tree->run_any([&](auto& b) {
            const auto form = std::remove_reference_t<decltype(b)>::Layout::kSlotted ? dex::tree::JournalForm::kBytes
                                                                                    : dex::tree::JournalForm::kFixed;
            *root = dex::tree::journal_create(proc().mem(), b.node_id(), b.namespaces(), life, form);
        });
    });
}

int dex_tree_set_journal(DexTree* tree, uint64_t root, uint32_t lane, DexError* err) {
    return guarded(err, [&] {
        if (!tree) throw Error(ErrorCode::kInvalid, "NULL tree handle");
        if (tree->journal_root == root && tree->journal_lane == lane && (tree->journal || !root)) return;
        tree->journal_root = root;
        tree->journal_lane = lane;
        tree->attach_journal();
    });
}

int dex_journal_life(DexTree* tree, uint64_t* life, DexError* err) {
    if (life) *life = 0;
    return guarded(err, [&] {
        if (!tree || !life || !tree->journal_root) throw Error(ErrorCode::kInvalid, "dex_journal_life: no journal");
        tree->run_any([&](auto&) { *life = dex::tree::journal_life(proc().mem(), tree->journal_root); });
    });
}

int dex_journal_read(DexTree* tree, DexKey** keys, int* n, uint64_t* life, DexError* err) {
    if (keys) *keys = nullptr;
    if (n) *n = 0;
    return guarded(err, [&] {
        if (!tree || !keys || !n || !tree->journal_root)
            throw Error(ErrorCode::kInvalid, "dex_journal_read: no journal");
        dex::tree::JournalContents c;
        // (a byte-string tree built before its layout journaled: a fixed-form
        // journal it never writes; dex_journal_read_bytes reads either form)
        tree->run_any([&](auto&) { c = dex::tree::journal_read(proc().mem(), tree->journal_root); });
        if (c.form != dex::tree::JournalForm::kFixed) throw byte_journal(tree->name);
        auto* arr = dex::capi::malloc_array<DexKey>(c.records.size());
        for (size_t i = 0; i < c.records.size(); i++) std::memcpy(&arr[i], &c.records[i].key, sizeof(DexKey));
        *keys = arr;
        *n = static_cast<int>(c.records.size());
        if (life) *life = c.life;
    });
}

int dex_journal_finish(DexTree* tree, uint64_t old_life, uint64_t new_life, const DexKey* strays, int n,
                       uint64_t* removed, DexError* err) {
    if (removed) *removed = 0;
    return guarded(err, [&] {
        if (!tree || !tree->journal_root || (n > 0 && !strays))
            throw Error(ErrorCode::kInvalid, "dex_journal_finish: no journal");
        tree->run_any([&](auto& b) {
            dex::tree::JournalContents c = dex::tree::journal_read(proc().mem(), tree->journal_root);
            if (c.form != dex::tree::JournalForm::kFixed) throw byte_journal(tree->name);  // would clear it unchecked
            if (c.life != old_life) throw journal_recovered_elsewhere(tree->name);
            uint64_t d = 0;
            if (n > 0) {
                if constexpr (std::remove_reference_t<decltype(b)>::Layout::kSlotted) {
                    throw Error(ErrorCode::kInvalid, "dex_journal_finish: 16-byte strays for a byte-string tree");
                } else {
                    std::vector<dex::EntryKey> v(static_cast<size_t>(n));
                    std::memcpy(v.data(), strays, v.size() * sizeof(dex::EntryKey));
                    d = b.remove(v.data(), v.size());
                }
            }
            dex::tree::test_point("journal:strays-removed");  // the journal still lists them, at the old life
            dex::tree::journal_clear(proc().mem(), c);
            uint64_t seen = dex::tree::journal_cas_life(proc().mem(), tree->journal_root, old_life, new_life);
            if (seen != old_life) throw journal_recovered_elsewhere(tree->name);
            if (removed) *removed = d;
        });
    });
}

}  // extern "C"
