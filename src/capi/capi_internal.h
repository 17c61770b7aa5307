// Shared by the C API's translation units (capi_*.cpp), not part of the C
// API: the exception barrier, the handle types behind the opaque C structs,
// and the process's ComputeProcess (src/cluster/compute_process.h), which
// holds every piece of process state the C API works with.
#pragma once
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "capi/dex_capi.h"
#include "cluster/compute_process.h"
#include "common/error.h"
#include "tree/btree.h"
#include "tree/journal.h"
#include "tree/key.h"

namespace dex::capi {

inline cluster::ComputeProcess& proc() { return cluster::ComputeProcess::instance(); }

inline void copy_str(char* dst, size_t cap, const std::string& s) {
    size_t n = s.size() < cap - 1 ? s.size() : cap - 1;
    std::memcpy(dst, s.data(), n);
    dst[n] = '\0';
}

inline int fail(DexError* err, int code, const std::string& msg, const std::string& hint = {}) {
    if (err) {
        err->code = code;
        copy_str(err->message, sizeof err->message, msg);
        copy_str(err->hint, sizeof err->hint, hint);
    }
    return code;
}

// Runs f(); turns every exception into a DEX_ERR_* code with *err filled in.
// No exception leaves the C API.
template <class F>
int guarded(DexError* err, F&& f) {
    if (err) {
        err->code = DEX_OK;
        err->message[0] = '\0';
        err->hint[0] = '\0';
        err->need_lsn = 0;
    }
    try {
        f();
        return DEX_OK;
    } catch (const tree::NeedDurable& e) {
        if (err) err->need_lsn = e.lsn();
        return fail(err, DEX_ERR_NEED_WAL_FLUSH, e.what());
    } catch (const Error& e) {
        int code = static_cast<int>(e.code());
        if (code <= 0 || code > DEX_ERR_REMOTE) code = DEX_ERR_REMOTE;
        return fail(err, code, e.what(), e.hint());
    } catch (const std::bad_alloc&) {
        return fail(err, DEX_ERR_REMOTE, "dex: out of local memory");
    } catch (const std::exception& e) {
        return fail(err, DEX_ERR_REMOTE, std::string("dex internal error: ") + e.what());
    } catch (...) {
        return fail(err, DEX_ERR_REMOTE, "dex internal error: unknown exception");
    }
}

// dex_journal_finish*: the journal's life moved on under this recovery.
inline Error journal_recovered_elsewhere(const std::string& name) {
    return Error(ErrorCode::kInvalid,
                 "index \"" + name + "\": its insert journal was recovered meanwhile by another compute server",
                 "Only one PostgreSQL primary may use a dex index; stop the other one.");
}

inline EntryKey to_key(const DexKey* k) {
    EntryKey e;
    std::memcpy(&e, k, sizeof e);
    return e;
}

// A malloc()ed array of n T for the caller to dex_free() (room for at least
// one, so an empty result is still a valid pointer).
template <class T>
T* malloc_array(size_t n) {
    auto* arr = static_cast<T*>(std::malloc((n == 0 ? 1 : n) * sizeof(T)));
    if (!arr) throw std::bad_alloc();
    return arr;
}

// DexLeafStamp::seen_at_ns <-> steady_clock (0: unknown). The clock is the
// same in every process of the machine, and a stamp never leaves its backend.
inline uint64_t stamp_ns(std::chrono::steady_clock::time_point t) {
    if (t == std::chrono::steady_clock::time_point{}) return 0;
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}
inline uint64_t stamp_now() { return stamp_ns(std::chrono::steady_clock::now()); }
inline std::chrono::steady_clock::time_point stamp_time(uint64_t ns) {
    if (ns == 0) return {};
    return std::chrono::steady_clock::time_point(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::nanoseconds(ns)));
}

}  // namespace dex::capi

// An open index (dex_tree_open*): which namespaces and incarnations it was
// built in, its BTree (made on first use, with this process's cache, offload
// policy and change log), its journal lane and its write-back state.
struct DexTree {
    int node = 0;              // home memory node (root word, upper levels)
    uint64_t ns = 0;           // home namespace
    uint64_t incarnation = 0;  // home node's incarnation at build time
    // Several memory nodes: namespace and build-time incarnation per memory
    // node (index = memory node id; ns 0 = not used by this tree).
    std::vector<uint64_t> part_ns, part_inc;
    int placement_level = dex::tree::kDefaultPlacementLevel;
    std::string name;
    int op_timeout_ms = 0;
    // DEX_LAYOUT_FIXED (16-byte keys: tree) or DEX_LAYOUT_BYTES (byte-string
    // entries: stree), fixed for the handle's life (dex_tree_set_layout
    // before the first operation).
    int layout = DEX_LAYOUT_FIXED;
    std::unique_ptr<dex::tree::BTree> tree;
    std::unique_ptr<dex::tree::SlottedTree> stree;
    std::unique_ptr<dex::tree::JournalWriter> journal;  // insert journal (0: none)
    uint64_t journal_root = 0;
    uint32_t journal_lane = 0;
    uint64_t owner_word = 0;    // write-back mode: GAddr of the dirty-owner word (0: none)
    bool word_checked = false;  // owner word seen free or ours
    bool wb = false;
    int wb_slot = -1;
    // dex_tree_read_leaf_bytes: the entries it returned and their C views.
    std::vector<std::string> leaf_buf;
    std::vector<DexBytes> leaf_views;

    // The home node's incarnation must still be the one the tree was built
    // in. Cheap while connected; a reconnect (inside any operation) re-reads
    // it, so run() checks before and after every operation.
    void validate();
    dex::tree::BTree& bt();           // Error(kInvalid) if the tree has byte-string entries
    dex::tree::SlottedTree& st();     // Error(kInvalid) if it has 16-byte keys
    void attach_journal();
    // A memory node other than the home node, first touched in this
    // operation: it must still be the incarnation the tree was built in.
    void check_part(uint32_t j);
    // One tree operation: incarnation checks, cache synchronization with the
    // memory nodes' incarnations, the lazy per-node check, f(bt()).
    template <class F>
    void run(F&& f) {
        checked([&] { f(bt()); });
    }
    // run() for a byte-string tree.
    template <class F>
    void run_bytes(F&& f) {
        checked([&] { f(st()); });
    }
    // run() of an operation both layouts have: f(auto& tree).
    template <class F>
    void run_any(F&& f) {
        if (layout == DEX_LAYOUT_BYTES)
            run_bytes(std::forward<F>(f));
        else
            run(std::forward<F>(f));
    }

private:
    template <class G>
    void checked(G&& g) {
        validate();
        dex::capi::proc().sync_tree_nodes(node, incarnation, part_ns, part_inc);
        NodeCheckScope scope(this);
        g();
        validate();
    }
    // The tree object of this handle's layout, made on first use (with this
    // process's cache, offload policy and change log), its op timeout current.
    template <class T>
    T& open_tree(std::unique_ptr<T>& t);
    struct NodeCheckScope {
        explicit NodeCheckScope(DexTree* t);
        ~NodeCheckScope();
        bool armed = false;
    };
};

struct DexBulk {
    DexTree* tree = nullptr;
    std::unique_ptr<dex::tree::BTree::BulkLoader> loader;         // fixed layout
    std::unique_ptr<dex::tree::SlottedTree::BulkLoader> sloader;  // byte strings
};

struct DexScan {
    DexTree* tree = nullptr;
    std::unique_ptr<dex::tree::BTree::Scan> scan;  // fixed layout
    std::vector<dex::EntryKey> buf;
    std::unique_ptr<dex::tree::SlottedTree::Scan> sscan;  // byte strings: the batch and its C views
    std::vector<std::string> sbuf;
    std::vector<DexBytes> sviews;
};
