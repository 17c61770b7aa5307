// C API (dex_capi.h), trees of byte-string entries (DEX_LAYOUT_BYTES,
// src/README.md "Tree over a layout"): the counterparts of capi_tree.cpp's
// key functions over dex::tree::SlottedTree. Entries cross the boundary as
// (pointer, length) views; what the core returns is copied into the handle
// (scan or tree) and stays valid until the next call on it.
// No exception leaves this file.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "capi/capi_internal.h"

using dex::Error;
using dex::ErrorCode;
using dex::capi::guarded;
using dex::capi::journal_recovered_elsewhere;
using dex::capi::proc;
using dex::tree::SlottedTree;

namespace {

std::string entry_of(const uint8_t* p, uint32_t len) { return std::string(reinterpret_cast<const char*>(p), len); }

// Copies of n entries (the core keeps owning keys across its restarts).
std::vector<std::string> entries_of(const DexBytes* e, int n) {
    std::vector<std::string> v;
    v.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; i++) {
        if (!e[i].data && e[i].len) throw Error(ErrorCode::kInvalid, "entry " + std::to_string(i) + " is NULL");
        v.push_back(entry_of(e[i].data, e[i].len));
    }
    return v;
}

// C views of strings owned by the caller's handle.
void views_of(const std::vector<std::string>& v, std::vector<DexBytes>& out) {
    out.resize(v.size());
    for (size_t i = 0; i < v.size(); i++)
        out[i] = DexBytes{reinterpret_cast<const uint8_t*>(v[i].data()), static_cast<uint32_t>(v[i].size())};
}

}  // namespace

extern "C" {

int dex_bulk_add_bytes(DexBulk* bulk, const uint8_t* entry, uint32_t len, DexError* err) {
    return guarded(err, [&] {
        if (!bulk || !entry || !bulk->sloader) throw Error(ErrorCode::kInvalid, "dex_bulk_add_bytes: NULL argument");
        bulk->sloader->add(SlottedTree::KeyRef(reinterpret_cast<const char*>(entry), len));
    });
}

int dex_tree_insert_bytes(DexTree* tree, const uint8_t* entry, uint32_t len, uint64_t lsn, uint64_t durable,
                          DexError* err) {
    return guarded(err, [&] {
        if (!tree || !entry) throw Error(ErrorCode::kInvalid, "dex_tree_insert_bytes: NULL argument");
        std::string k = entry_of(entry, len);
        tree->run_bytes([&](SlottedTree& t) { t.insert(k, lsn, durable); });
    });
}

int dex_tree_insert_nosplit_bytes(DexTree* tree, const uint8_t* entry, uint32_t len, uint64_t lsn, uint64_t durable,
                                  DexLeafStamp* full, DexError* err) {
    if (full) *full = DexLeafStamp{0, 0, 0, 0xFFFFFFFFu, 0, 0};
    SlottedTree::LeafFull lf;
    int rc = guarded(err, [&] {
        if (!tree || !entry || !full) throw Error(ErrorCode::kInvalid, "dex_tree_insert_nosplit_bytes: NULL argument");
        std::string k = entry_of(entry, len);
        tree->run_bytes([&](SlottedTree& t) { t.insert(k, lsn, durable, &lf); });
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

int dex_tree_insert_batch_bytes(DexTree* tree, const DexBytes* entries, const uint64_t* lsns, int n,
                                uint64_t durable, int* done, DexError* err) {
    if (done) *done = 0;
    size_t d = 0;
    // *done is written on every way out, errors included: the caller resumes there.
    int rc = guarded(err, [&] {
        if (!tree || !done || (n > 0 && (!entries || !lsns)))
            throw Error(ErrorCode::kInvalid, "dex_tree_insert_batch_bytes: NULL argument");
        if (n <= 0) return;
        std::vector<std::string> v = entries_of(entries, n);
        tree->run_bytes([&](SlottedTree& t) { t.insert_batch(v.data(), lsns, v.size(), durable, &d); });
    });
    if (done) *done = static_cast<int>(d);
    return rc;
}

int dex_tree_read_leaf_bytes(DexTree* tree, const DexLeafStamp* stamp, const DexBytes** out, int* n, DexError* err) {
    if (out) *out = nullptr;
    if (n) *n = 0;
    return guarded(err, [&] {
        if (!tree || !stamp || !out || !n) throw Error(ErrorCode::kInvalid, "dex_tree_read_leaf_bytes: NULL argument");
        tree->run_bytes([&](SlottedTree& t) {
            t.read_leaf(stamp->leaf, stamp->version, tree->leaf_buf, stamp->frame, stamp->frame_version);
        });
        views_of(tree->leaf_buf, tree->leaf_views);
        *out = tree->leaf_views.data();
        *n = static_cast<int>(tree->leaf_views.size());
    });
}

int dex_tree_delete_bytes(DexTree* tree, const DexBytes* entries, int n, uint64_t* deleted, DexError* err) {
    if (deleted) *deleted = 0;
    return guarded(err, [&] {
        if (!tree || (n > 0 && !entries)) throw Error(ErrorCode::kInvalid, "dex_tree_delete_bytes: NULL argument");
        if (n <= 0) return;
        std::vector<std::string> v = entries_of(entries, n);
        uint64_t d = 0;
        tree->run_bytes([&](SlottedTree& t) { d = t.remove(v.data(), v.size()); });
        if (deleted) *deleted = d;
    });
}

int dex_tree_kill_bytes(DexTree* tree, const DexLeafStamp* stamp, const DexBytes* entries, int n, int flags,
                        uint64_t hold_lsn, uint64_t* removed, DexError* err) {
    if (removed) *removed = 0;
    return guarded(err, [&] {
        if (!tree || !stamp || (n > 0 && !entries))
            throw Error(ErrorCode::kInvalid, "dex_tree_kill_bytes: NULL argument");
        if (n <= 0) return;
        std::vector<std::string> v = entries_of(entries, n);
        uint64_t d = 0;
        tree->run_bytes([&](SlottedTree& t) {
            d = t.remove_if_unchanged(stamp->leaf, stamp->version, v.data(), v.size(),
                                      (flags & DEX_KILL_BOTTOM_UP) != 0,
                                      dex::capi::stamp_time(stamp->seen_at_ns), stamp->frame,
                                      stamp->frame_version, hold_lsn,
                                      (flags & DEX_KILL_PRESENT) != 0);
        });
        if (removed) *removed = d;
    });
}

int dex_scan_begin_bytes(DexTree* tree, const uint8_t* lo, uint32_t lo_len, const uint8_t* hi, uint32_t hi_len,
                         int backward, DexScan** out, DexError* err) {
    if (out) *out = nullptr;
    return guarded(err, [&] {
        if (!tree || !out) throw Error(ErrorCode::kInvalid, "dex_scan_begin_bytes: NULL argument");
        std::string l = lo ? entry_of(lo, lo_len) : dex::tree::SlottedLayout::neg_inf();
        std::string h = hi ? entry_of(hi, hi_len) : dex::tree::SlottedLayout::pos_inf();
        auto s = std::make_unique<DexScan>();
        s->tree = tree;
        tree->run_bytes([&](SlottedTree& t) { s->sscan = t.scan(l, h, backward != 0); });
        *out = s.release();
    });
}

int dex_scan_next_bytes(DexScan* scan, const DexBytes** entries, int* n, DexError* err) {
    if (entries) *entries = nullptr;
    if (n) *n = 0;
    return guarded(err, [&] {
        if (!scan || !scan->sscan || !entries || !n)
            throw Error(ErrorCode::kInvalid, "dex_scan_next_bytes: NULL argument");
        bool more = false;
        scan->tree->run_bytes([&](SlottedTree&) { more = scan->sscan->next(scan->sbuf); });
        if (!more) scan->sbuf.clear();
        views_of(scan->sbuf, scan->sviews);
        *entries = scan->sviews.data();
        *n = static_cast<int>(scan->sviews.size());
    });
}

// ---- insert journal of a byte-string tree ------------------------------------
// (dex_journal_create makes it in the byte form; a tree built before that has
// a fixed-form journal that never holds one of its entries: both read here.)

int dex_journal_read_bytes(DexTree* tree, DexBytes** entries, int* n, uint64_t* life, DexError* err) {
    if (entries) *entries = nullptr;
    if (n) *n = 0;
    if (life) *life = 0;
    return guarded(err, [&] {
        if (!tree || !entries || !n || !tree->journal_root)
            throw Error(ErrorCode::kInvalid, "dex_journal_read_bytes: no journal");
        dex::tree::JournalContents c;
        tree->run_bytes([&](SlottedTree&) { c = dex::tree::journal_read(proc().mem(), tree->journal_root); });
        // One block for the caller's single dex_free(): the views, then the bytes they point to.
        size_t bytes = 0;
        for (const auto& r : c.byte_records) bytes += r.entry.size();
        const size_t head = c.byte_records.size() * sizeof(DexBytes);
        auto* block = static_cast<uint8_t*>(std::malloc(std::max<size_t>(head + bytes, 1)));
        if (!block) throw std::bad_alloc();
        auto* views = reinterpret_cast<DexBytes*>(block);
        uint8_t* p = block + head;
        for (size_t i = 0; i < c.byte_records.size(); i++) {
            const std::string& e = c.byte_records[i].entry;
            std::memcpy(p, e.data(), e.size());
            views[i] = DexBytes{p, static_cast<uint32_t>(e.size())};
            p += e.size();
        }
        *entries = views;
        *n = static_cast<int>(c.byte_records.size());
        if (life) *life = c.life;
    });
}

int dex_journal_finish_bytes(DexTree* tree, uint64_t old_life, uint64_t new_life, const DexBytes* strays, int n,
                             uint64_t* removed, DexError* err) {
    if (removed) *removed = 0;
    return guarded(err, [&] {
        if (!tree || !tree->journal_root || (n > 0 && !strays))
            throw Error(ErrorCode::kInvalid, "dex_journal_finish_bytes: no journal");
        std::vector<std::string> v = entries_of(strays, std::max(n, 0));
        std::sort(v.begin(), v.end());  // (std::string compares as memcmp: the tree's order)
        v.erase(std::unique(v.begin(), v.end()), v.end());
        tree->run_bytes([&](SlottedTree& t) {
            dex::tree::JournalContents c = dex::tree::journal_read(proc().mem(), tree->journal_root);
            if (c.life != old_life) throw journal_recovered_elsewhere(tree->name);
            const uint64_t d = v.empty() ? 0 : t.remove(v.data(), v.size());
            dex::tree::test_point("journal:strays-removed");  // the journal still lists them, at the old life
            dex::tree::journal_clear(proc().mem(), c);
            const uint64_t seen = dex::tree::journal_cas_life(proc().mem(), tree->journal_root, old_life, new_life);
            if (seen != old_life) throw journal_recovered_elsewhere(tree->name);
            if (removed) *removed = d;
        });
    });
}

}  // extern "C"
