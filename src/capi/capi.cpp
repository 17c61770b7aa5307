// C API (dex_capi.h): a process-global client over the memory nodes and thin
// wrappers around dex::tree::BTree. No exception leaves this file.
#include "capi/dex_capi.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <random>
#include <set>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <map>
#include <mutex>
#include <new>
#include <tuple>
#include <string>
#include <vector>

#include "cache/cache.h"
#include "cache/region.h"
#include "cache/spinlock.h"
#include "cluster/registry.h"
#include "common/error.h"
#include "common/stats.h"
#include "net/protocol.h"
#include "transport/remote_memory.h"
#include "transport/transport_factory.h"
#include "tree/btree.h"
#include "tree/journal.h"
#include "tree/key.h"
#include "tree/offload_policy.h"

using dex::Error;
using dex::ErrorCode;

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
static_assert(sizeof(DexNsInfo) == sizeof(dex::net::NsInfo) && DEX_NS_TAG_LEN == dex::net::kNamespaceTagLen);
static_assert(sizeof(DexStatsSnapshot) == dex::Stats::kCount * sizeof(uint64_t),
              "DexStatsSnapshot is one uint64_t per counter of common/stats_list.h");

namespace {

struct Client {
    std::mutex mu;
    std::vector<std::string> addrs;
    dex::TransportOptions opts;
    dex::RemoteMemory mem{std::vector<std::unique_ptr<dex::Transport>>{}};
};

Client& client() {
    static Client* c = new Client();  // never destroyed: backends exit without running our destructors safely
    return *c;
}

std::atomic<int (*)(void)> g_interrupt_fn{nullptr};
bool interrupt_trampoline() {
    int (*fn)(void) = g_interrupt_fn.load(std::memory_order_acquire);
    return fn != nullptr && fn() != 0;
}

void copy_str(char* dst, size_t cap, const std::string& s) {
    size_t n = s.size() < cap - 1 ? s.size() : cap - 1;
    std::memcpy(dst, s.data(), n);
    dst[n] = '\0';
}

int fail(DexError* err, int code, const std::string& msg, const std::string& hint = {}) {
    if (err) {
        err->code = code;
        copy_str(err->message, sizeof err->message, msg);
        copy_str(err->hint, sizeof err->hint, hint);
    }
    return code;
}

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
    } catch (const dex::tree::NeedDurable& e) {
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

std::string trim(const std::string& s) {
    size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::vector<std::string> parse_memnodes(const char* list) {
    std::vector<std::string> out;
    std::string s = list ? list : "";
    if (trim(s).empty()) return out;
    size_t start = 0;
    for (;;) {
        size_t comma = s.find(',', start);
        std::string item = trim(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (item.empty())
            throw Error(ErrorCode::kInvalid, "empty entry in dex.memnodes \"" + s + "\"",
                        "Separate memory nodes with single commas.");
        size_t scheme = item.find("://");
        if (scheme == std::string::npos || !dex::transport_scheme_supported(item.substr(0, scheme)))
            throw Error(ErrorCode::kInvalid,
                        "unsupported transport \"" + item + "\" in dex.memnodes: use tcp:// or rdma://",
                        "Write each memory node as tcp://host:port or rdma://host:port.");
        std::string hp = item.substr(scheme + 3);
        size_t colon = hp.rfind(':');
        bool ok = colon != std::string::npos && colon > 0 && colon + 1 < hp.size() && colon + 6 >= hp.size();
        if (ok)
            for (size_t i = colon + 1; i < hp.size(); i++)
                if (hp[i] < '0' || hp[i] > '9') ok = false;
        if (ok) {
            long port = std::strtol(hp.c_str() + colon + 1, nullptr, 10);
            ok = port > 0 && port < 65536;
        }
        if (!ok)
            throw Error(ErrorCode::kInvalid, "invalid memory node address \"" + item + "\" in dex.memnodes",
                        "Write each memory node as tcp://host:port or rdma://host:port.");
        out.push_back(item);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}

dex::Transport& node_transport(int node) {
    if (node < 0) throw Error(ErrorCode::kInvalid, "invalid memory node number " + std::to_string(node));
    return client().mem.node(static_cast<uint32_t>(node));
}

uint64_t u64_of(const std::vector<uint8_t>& r, const char* what) {
    if (r.size() < 8) throw Error(ErrorCode::kProtocol, std::string(what) + ": short response from memory node");
    uint64_t v;
    std::memcpy(&v, r.data(), 8);
    return v;
}

dex::EntryKey to_key(const DexKey* k) {
    dex::EntryKey e;
    std::memcpy(&e, k, sizeof e);
    return e;
}

void fill_info(DexTreeInfo* out, const dex::tree::TreeInfo& i) {
    if (!out) return;
    out->entries = i.entries;
    out->leaves = i.leaves;
    out->inner_nodes = i.inner_nodes;
    out->height = i.height;
    out->root = i.root;
}

// ---- node cache ---------------------------------------------------------------
//
// Shared block: CacheShared header | CacheRegion. The header records, per
// memory node number, the incarnation the cached frames of that node belong
// to. Frames are keyed by GAddr, and a restarted memory node reuses addresses
// (and namespace ids, hence tree ids): before a process reads through the cache
// for a node, it makes sure the recorded incarnation is the one it is connected
// to, purging the node's frames first if not (src/README.md "Node cache").

constexpr uint32_t kCacheMaxNodes = 1024;
constexpr uint64_t kCacheSharedMagic = 0x6465782d63617069ull;  // "dex-capi"

// Write-back mode registry (src/README.md "Write-back mode"): one entry per
// tree whose remote dirty-owner word may hold this cache's generation.
constexpr uint32_t kWbMaxTrees = 512;
struct WbEntry {
    std::atomic<uint32_t> lock;        // spinlock (a remote op on the owner word is done under it)
    std::atomic<uint32_t> registered;  // 1: the owner word holds our generation; dirty frames may exist
    int32_t node;
    uint64_t ns;
    uint64_t word;                     // GAddr of the owner word; 0 = free / namespace dropped
    uint64_t incarnation;
};

struct CacheShared {
    uint64_t magic;
    uint64_t cache_bytes;
    uint64_t generation;               // random, chosen when the region is initialized
    std::atomic<uint32_t> wb_lock;     // serializes adding registry entries
    std::atomic<uint32_t> wb_used;
    WbEntry wb[kWbMaxTrees];
    std::atomic<uint32_t> purge_lock;  // serializes purges (spinlock)
    // Incarnation whose frames the cache may hold for node i; 0 = none / purge
    // in progress.
    std::atomic<uint64_t> incarnation[kCacheMaxNodes];
};

size_t cache_header_bytes() { return (sizeof(CacheShared) + 63) & ~size_t(63); }

struct CacheState {
    CacheShared* shared = nullptr;
    dex::cache::CacheRegion* region = nullptr;
    void* block = nullptr;     // the whole shared block (header + region), for register_region()
    size_t block_bytes = 0;
    dex::cache::Cache* cache = nullptr;  // this process's handle (created lazily, per pid)
    pid_t pid = 0;
    dex::cache::AdmissionPolicy policy;
};

CacheState& cstate() {
    static CacheState* s = new CacheState();  // never destroyed (see client())
    return *s;
}

// Lets a transport that can use it (rdma://) register the shared cache block
// once per process, so node transfers into / out of it skip a copy.
void register_cache_region(dex::Transport& t) {
    CacheState& s = cstate();
    t.register_region(s.block, s.block ? s.block_bytes : 0);
}

// Is an image of `g` just admitted still from the incarnation the cache holds
// for its node? (A read that returned just before the node restarted can be
// admitted after another process purged the node; this catches it.)
bool admit_check(dex::GAddr g) {
    CacheState& s = cstate();
    uint32_t node = dex::gaddr_node(g);
    if (!s.shared || node >= kCacheMaxNodes) return false;
    try {
        uint64_t have = s.shared->incarnation[node].load(std::memory_order_seq_cst);
        return have != 0 && have == client().mem.node(node).incarnation();
    } catch (...) {
        return false;
    }
}

// The cache's WriteBack callback: write a dirty frame's image with the remote
// lock protocol. Runs under the frame's lock; never throws.
bool write_back_frame(uint32_t f, const dex::Node& img) {
    try {
        CacheState& s = cstate();
        dex::GAddr g = s.region->header(f).gaddr.load(std::memory_order_acquire);
        if (g == dex::kNullGAddr) return true;
        // A frame of a restarted memory node: the tree is lost anyway (and the
        // address may belong to someone else now): drop it.
        if (!admit_check(g)) return true;
        // Its entries' heap WAL must be durable first (src/README.md "Crash
        // survival"): not yet -> it stays dirty; flushers flush WAL first.
        if (s.region->header(f).lsn.load(std::memory_order_relaxed) > dex::tree::durable_lsn()) return false;
        dex::tree::TreeOptions o;
        o.op_timeout_ms = client().opts.op_timeout_ms > 0 ? client().opts.op_timeout_ms : 30000;
        dex::tree::NodeIO io(client().mem, dex::gaddr_node(g), o);
        dex::tree::write_back_node(io, g, img, dex::tree::Deadline(o.op_timeout_ms));
        return true;
    } catch (...) {
        return false;
    }
}

dex::cache::Cache* process_cache() {
    CacheState& s = cstate();
    if (!s.region) return nullptr;
    pid_t me = getpid();
    if (s.cache && s.pid == me) return s.cache;
    // A forked child inherits the parent's handle object: it is not ours (the
    // postmaster never allocates frames, so abandoning it loses nothing).
    auto* c = new dex::cache::Cache(*s.region);
    c->set_policy(s.policy);
    c->set_admit_check(admit_check);
    c->set_write_back(write_back_frame);
    s.cache = c;
    s.pid = me;
    return c;
}

// This process's offloading decision model (src/README.md "Offloading"),
// created per pid like the cache handle: its moving averages are per backend.
struct OffloadState {
    dex::tree::OffloadPolicy* policy = nullptr;
    pid_t pid = 0;
    dex::tree::OffloadMode mode = dex::tree::OffloadMode::kAuto;  // dex.offload's default
};
OffloadState& ostate() {
    static OffloadState* s = new OffloadState();  // never destroyed (see client())
    return *s;
}
std::atomic<void (*)(const uint64_t*, size_t)> g_change_log{nullptr};
dex::Stats* g_shared_stats = nullptr;  // what dex_stats_attach installed (this process)

dex::tree::OffloadPolicy* process_offload_policy() {
    OffloadState& s = ostate();
    pid_t me = getpid();
    if (!s.policy || s.pid != me) {
        std::random_device rd;
        s.policy = new dex::tree::OffloadPolicy(dex::tree::OffloadPolicy::Params{},
                                                (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(me));
        s.pid = me;
    }
    s.policy->set_mode(s.mode);
    return s.policy;
}

struct PurgeLock {
    std::atomic<uint32_t>& w;
    explicit PurgeLock(std::atomic<uint32_t>& word) : w(word) {
        unsigned spin = 0;
        uint32_t z = 0;
        while (!w.compare_exchange_weak(z, 1, std::memory_order_acquire)) {
            z = 0;
            dex::cache::spin_backoff(spin);
        }
    }
    ~PurgeLock() { w.store(0, std::memory_order_release); }
};

// Before reading node `node`'s data through the cache while connected to
// incarnation `inc`: drop frames left from any other incarnation.
void cache_sync_node(int node, uint64_t inc) {
    CacheState& s = cstate();
    if (!s.shared || node < 0) return;
    if (static_cast<uint32_t>(node) >= kCacheMaxNodes)
        throw Error(ErrorCode::kInvalid, "memory node number " + std::to_string(node) +
                                             " is too large for the node cache (at most " +
                                             std::to_string(kCacheMaxNodes) + " memory nodes)");
    std::atomic<uint64_t>& rec = s.shared->incarnation[node];
    if (rec.load(std::memory_order_acquire) == inc) return;
    dex::cache::Cache* c = process_cache();
    PurgeLock lk(s.shared->purge_lock);
    if (rec.load(std::memory_order_acquire) == inc) return;
    // 0 first: a concurrent admission from the old incarnation either installed
    // its frame before this store (the scan below sees it) or reads 0 in its
    // admit check and drops the frame itself.
    rec.store(0, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const uint32_t n = static_cast<uint32_t>(node);
    // Frames on that node, and frames of trees homed there (their tree ids,
    // derived from the home namespace id, come back after the restart).
    size_t left = c->invalidate_if([n](const dex::cache::FrameInfo& i) {
        return dex::gaddr_node(i.gaddr) == n || (i.tree_id >> 24) == (n & 0xFF);
    });
    if (left != 0)
        throw Error(ErrorCode::kRemote, "node cache: could not drop " + std::to_string(left) +
                                            " cached nodes of a restarted memory node");
    rec.store(inc, std::memory_order_seq_cst);
}

// Drop every cached frame of the tree homed in namespace ns on `node`, on any
// memory node (a tree spans several).
void cache_drop_tree(int node, uint64_t ns) {
    CacheState& s = cstate();
    if (!s.shared || node < 0) return;
    dex::cache::Cache* c = process_cache();
    const uint32_t tid = dex::tree::tree_id_for(static_cast<uint32_t>(node), ns);
    c->invalidate_if([tid](const dex::cache::FrameInfo& i) { return i.tree_id == tid; });
}

// ---- write-back registry -------------------------------------------------------

// Registry entry of a tree, or -1 (never had dirty frames here).
int wb_slot_find(int node, uint64_t ns, uint64_t word) {
    CacheShared* sh = cstate().shared;
    if (!sh || !word) return -1;
    uint32_t used = sh->wb_used.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < used; i++)
        if (sh->wb[i].node == node && sh->wb[i].ns == ns && sh->wb[i].word == word) return static_cast<int>(i);
    return -1;
}

// Find or add (-1: registry full, the tree then writes through).
int wb_slot_for(int node, uint64_t ns, uint64_t word, uint64_t inc) {
    CacheShared* sh = cstate().shared;
    if (!sh || !word) return -1;
    int found = wb_slot_find(node, ns, word);
    if (found >= 0) return found;
    uint32_t used;
    PurgeLock lk(sh->wb_lock);
    used = sh->wb_used.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < used; i++)
        if (sh->wb[i].node == node && sh->wb[i].ns == ns && sh->wb[i].word == word) return static_cast<int>(i);
    if (used >= kWbMaxTrees) return -1;  // full: this tree writes through
    WbEntry& e = sh->wb[used];
    e.node = node;
    e.ns = ns;
    e.word = word;
    e.incarnation = inc;
    e.registered.store(0, std::memory_order_relaxed);
    sh->wb_used.store(used + 1, std::memory_order_release);
    return static_cast<int>(used);
}

Error lost_dirty(const std::string& name) {
    return Error(ErrorCode::kLostMemory,
                 "index \"" + name +
                     "\" lost its remote memory (dirty nodes of write-back mode were lost in a crash: the compute "
                     "server instance that held them is gone)",
                 "REINDEX INDEX " + name);
}

// Make sure the owner word of entry `slot` holds our generation (CAS 0 -> gen).
void wb_register(int slot, const std::string& name) {
    CacheShared* sh = cstate().shared;
    WbEntry& e = sh->wb[slot];
    if (e.registered.load(std::memory_order_seq_cst)) return;
    PurgeLock lk(e.lock);
    if (e.registered.load(std::memory_order_seq_cst) || !e.word) return;
    uint64_t old = client().mem.cas(e.word, 0, sh->generation);
    if (old != 0 && old != sh->generation) throw lost_dirty(name);
    e.registered.store(1, std::memory_order_seq_cst);
}

// Write back every dirty frame (of entry `only`, or of all trees) and set the
// owner words of trees left without dirty frames back to 0.
uint64_t wb_flush(int only) {
    CacheState& s = cstate();
    if (!s.shared || !s.region) return 0;
    CacheShared* sh = s.shared;
    uint32_t used = sh->wb_used.load(std::memory_order_acquire);
    if (used == 0) return 0;  // no tree ever registered: no frame can be dirty
    dex::cache::Cache* c = process_cache();
    auto selected = [&](uint32_t i) { return only < 0 || static_cast<uint32_t>(only) == i; };
    // 1. From now on a clean frame that becomes dirty registers again (and so
    //    keeps its word set); frames already dirty are written by the scan.
    for (uint32_t i = 0; i < used; i++) {
        if (!selected(i)) continue;
        PurgeLock lk(sh->wb[i].lock);
        sh->wb[i].registered.store(0, std::memory_order_seq_cst);
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);
    // 2. Write back.
    std::vector<uint32_t> frames;
    uint32_t tid = only >= 0 ? dex::tree::tree_id_for(static_cast<uint32_t>(sh->wb[only].node), sh->wb[only].ns) : 0;
    s.region->for_each_frame([&](const dex::cache::FrameInfo& i) {
        if (!i.dirty || i.gaddr == dex::kNullGAddr) return;
        if (only >= 0 && i.tree_id != tid) return;
        frames.push_back(i.frame);
    });
    uint64_t written = 0;
    for (uint32_t f : frames)
        if (c->flush_frame(f)) written++;
    // 3. Trees with frames that are still dirty (a failed write-back) keep their word.
    std::set<uint32_t> still;  // tree ids
    s.region->for_each_frame([&](const dex::cache::FrameInfo& i) {
        if (i.dirty && i.gaddr != dex::kNullGAddr) still.insert(i.tree_id);
    });
    for (uint32_t i = 0; i < used; i++) {
        if (!selected(i)) continue;
        WbEntry& e = sh->wb[i];
        PurgeLock lk(e.lock);
        if (!e.word) continue;
        if (still.count(dex::tree::tree_id_for(static_cast<uint32_t>(e.node), e.ns))) {
            e.registered.store(1, std::memory_order_seq_cst);
            continue;
        }
        if (e.registered.load(std::memory_order_seq_cst)) continue;  // dirtied again meanwhile
        try {
            if (client().mem.node(static_cast<uint32_t>(e.node)).incarnation() != e.incarnation) continue;
            uint64_t zero = 0;
            client().mem.write(e.word, &zero, 8);
        } catch (...) {
            e.registered.store(1, std::memory_order_seq_cst);  // not cleared: stays "possibly dirty"
            throw;
        }
    }
    return written;
}

// Highest heap-WAL position carried by a dirty frame of tree `tid` (0: none;
// any tree: all = true).
uint64_t dirty_lsn_max(uint32_t tid, bool all = false) {
    CacheState& s = cstate();
    uint64_t m = 0;
    if (!s.region) return 0;
    if (cstate().shared && cstate().shared->wb_used.load(std::memory_order_acquire) == 0) return 0;  // never dirty
    s.region->for_each_frame([&](const dex::cache::FrameInfo& i) {
        if (!i.dirty || i.gaddr == dex::kNullGAddr || (!all && i.tree_id != tid)) return;
        m = std::max(m, s.region->header(i.frame).lsn.load(std::memory_order_relaxed));
    });
    return m;
}

// The namespace is being dropped: forget its entry (its word is freed memory).
void wb_forget(int node, uint64_t ns) {
    CacheShared* sh = cstate().shared;
    if (!sh) return;
    uint32_t used = sh->wb_used.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < used; i++) {
        WbEntry& e = sh->wb[i];
        if (e.node != node || e.ns != ns) continue;
        PurgeLock lk(e.lock);
        e.word = 0;
        e.registered.store(0, std::memory_order_seq_cst);
    }
}

}  // namespace

struct DexTree {
    int node = 0;             // home memory node (root word, upper levels)
    uint64_t ns = 0;          // home namespace
    uint64_t incarnation = 0; // home node's incarnation at build time
    // Several memory nodes: namespace and build-time incarnation per memory
    // node (index = memory node id; ns 0 = not used by this tree).
    std::vector<uint64_t> part_ns, part_inc;
    int placement_level = dex::tree::kDefaultPlacementLevel;
    std::string name;
    int op_timeout_ms = 0;
    std::unique_ptr<dex::tree::BTree> tree;
    std::unique_ptr<dex::tree::JournalWriter> journal;  // insert journal (0: none)
    uint64_t journal_root = 0;
    uint32_t journal_lane = 0;
    uint64_t owner_word = 0;    // write-back mode: GAddr of the dirty-owner word (0: none)
    bool word_checked = false;  // owner word seen free or ours
    bool wb = false;
    int wb_slot = -1;

    // The node's incarnation must still be the one the tree was built in. Cheap
    // while connected; a reconnect (inside any operation) re-reads it, so we
    // check before and after every operation.
    void validate() {
        dex::Transport& t = node_transport(node);
        uint64_t inc = t.incarnation();
        if (inc != incarnation)
            throw Error(ErrorCode::kLostMemory,
                        "index \"" + name + "\" lost its remote memory (memory node " + t.address() +
                            " restarted: incarnation " + std::to_string(inc) + ", expected " +
                            std::to_string(incarnation) + ")",
                        "REINDEX INDEX " + name);
    }
    dex::tree::BTree& bt() {
        int want = client().opts.op_timeout_ms;
        if (!tree) {
            dex::tree::TreeOptions o;
            o.cache = process_cache();  // nullptr: no cache in this process
            if (o.cache) o.offload = process_offload_policy();  // offloading decides on cache misses
            o.log_changes = g_change_log.load(std::memory_order_acquire);
            tree = std::make_unique<dex::tree::BTree>(client().mem, static_cast<uint32_t>(node), ns, o);
            if (!part_ns.empty()) tree->set_placement(part_ns, placement_level);
            op_timeout_ms = 0;
            attach_journal();
        }
        // Scans and bulk loads hold references to the BTree: adjust it in place.
        if (want > 0 && want != op_timeout_ms) {
            tree->set_op_timeout(want);
            op_timeout_ms = want;
        }
        return *tree;
    }
    void attach_journal() {
        if (!tree) return;
        journal.reset();
        if (journal_root)
            journal = std::make_unique<dex::tree::JournalWriter>(client().mem, journal_root, journal_lane,
                                                                 tree->namespaces());
        tree->set_journal(journal.get());
    }
    // A memory node other than the home node, first touched in this
    // operation: it must still be the incarnation the tree was built in.
    void check_part(uint32_t j) {
        if (j == static_cast<uint32_t>(node) || j >= part_ns.size() || !part_ns[j]) return;
        dex::Transport& t = client().mem.node(j);
        uint64_t inc = t.incarnation();
        if (inc != part_inc[j])
            throw Error(ErrorCode::kLostMemory,
                        "index \"" + name + "\" lost its remote memory (memory node " + t.address() +
                            " restarted: incarnation " + std::to_string(inc) + ", expected " +
                            std::to_string(part_inc[j]) + ")",
                        "REINDEX INDEX " + name);
    }
    // Before reading through the cache: frames of every other part node must
    // be of the incarnation we expect. Only nodes whose cache record is not
    // already that one are contacted (a dead node costs nothing here; the
    // lazy check fails the query only if it needs that node).
    void sync_parts() {
        CacheState& s = cstate();
        if (!s.shared) return;
        for (uint32_t j = 0; j < part_ns.size(); j++) {
            if (!part_ns[j] || j == static_cast<uint32_t>(node) || j >= kCacheMaxNodes) continue;
            if (s.shared->incarnation[j].load(std::memory_order_acquire) == part_inc[j]) continue;
            uint64_t inc = 0;
            try {
                inc = client().mem.node(j).incarnation();
            } catch (const Error& e) {
                if (e.code() == ErrorCode::kInterrupted) throw;
                continue;
            }
            if (inc == part_inc[j]) cache_sync_node(static_cast<int>(j), inc);
        }
    }
    struct NodeCheckScope {
        explicit NodeCheckScope(DexTree* t) {
            if (t->part_ns.empty()) return;
            client().mem.set_node_check([t](uint32_t j) { t->check_part(j); });
            armed = true;
        }
        ~NodeCheckScope() {
            if (armed) client().mem.set_node_check(nullptr);
        }
        bool armed = false;
    };
    template <class F>
    void run(F&& f) {
        validate();
        cache_sync_node(node, incarnation);  // no frame of another incarnation is read
        sync_parts();
        NodeCheckScope scope(this);
        f(bt());
        validate();
    }
};

struct DexBulk {
    DexTree* tree = nullptr;
    std::unique_ptr<dex::tree::BTree::BulkLoader> loader;
};

struct DexScan {
    DexTree* tree = nullptr;
    std::unique_ptr<dex::tree::BTree::Scan> scan;
    std::vector<dex::EntryKey> buf;
};

extern "C" {

int dex_configure(const char* memnodes, const char* token, int connect_timeout_ms, int op_timeout_ms,
                  DexError* err) {
    return guarded(err, [&] {
        Client& c = client();
        std::lock_guard<std::mutex> g(c.mu);
        std::vector<std::string> addrs = parse_memnodes(memnodes);
        dex::TransportOptions o;
        if (connect_timeout_ms > 0) o.connect_timeout_ms = connect_timeout_ms;
        if (op_timeout_ms > 0) o.op_timeout_ms = op_timeout_ms;
        o.token = token ? token : "";
        bool opts_changed = o.connect_timeout_ms != c.opts.connect_timeout_ms ||
                            o.op_timeout_ms != c.opts.op_timeout_ms || o.token != c.opts.token;
        for (size_t i = 0; i < addrs.size(); i++) {
            bool keep = !opts_changed && i < c.addrs.size() && c.addrs[i] == addrs[i] && i < c.mem.node_count();
            if (keep) {
                try {
                    c.mem.node(static_cast<uint32_t>(i));
                } catch (const Error&) {
                    keep = false;
                }
            }
            if (!keep) {
                c.mem.replace_node(static_cast<uint32_t>(i), dex::make_transport(addrs[i], o));
                register_cache_region(c.mem.node(static_cast<uint32_t>(i)));
            }
        }
        for (size_t i = addrs.size(); i < c.mem.node_count(); i++) c.mem.replace_node(static_cast<uint32_t>(i), nullptr);
        c.addrs = std::move(addrs);
        c.opts = o;
    });
}

int dex_memnode_count(void) { return static_cast<int>(client().addrs.size()); }

const char* dex_memnode_address(int node) {
    Client& c = client();
    if (node < 0 || static_cast<size_t>(node) >= c.addrs.size()) return nullptr;
    return c.addrs[static_cast<size_t>(node)].c_str();
}

void dex_set_interrupt_check(int (*fn)(void)) {
    g_interrupt_fn.store(fn, std::memory_order_release);
    dex::set_interrupt_check(fn ? &interrupt_trampoline : nullptr);
}

size_t dex_stats_shmem_size(void) { return sizeof(dex::Stats); }

void dex_stats_attach(void* mem, int initialize) {
    if (!mem) {
        dex::set_stats(nullptr);
        return;
    }
    if (initialize) new (mem) dex::Stats();
    g_shared_stats = static_cast<dex::Stats*>(mem);
    dex::set_stats(g_shared_stats);
}

void dex_stats_read(DexStatsSnapshot* out) {
    if (!out) return;
    dex::Stats& s = dex::stats();
#define DEX_STATS_READ(name, description) out->name = s.name.load(std::memory_order_relaxed);
    DEX_STATS_COUNTERS(DEX_STATS_READ)
#undef DEX_STATS_READ
}

void dex_stats_reset(void) { dex::stats().reset(); }

void dex_stats_private(int on) { dex::set_stats(on ? nullptr : g_shared_stats); }

size_t dex_cache_shmem_size(uint64_t cache_bytes) {
    if (cache_bytes == 0) return 0;
    try {
        return cache_header_bytes() + dex::cache::CacheRegion::bytes_for(cache_bytes);
    } catch (...) {
        return 0;
    }
}

int dex_cache_attach(void* mem, uint64_t cache_bytes, int initialize, DexError* err) {
    return guarded(err, [&] {
        CacheState& s = cstate();
        s.shared = nullptr;
        s.region = nullptr;
        s.cache = nullptr;  // a handle on an earlier region (shared memory re-initialized) is dropped
        s.pid = 0;
        s.block = nullptr;
        s.block_bytes = 0;
        if (!mem || cache_bytes == 0) return;
        auto* sh = static_cast<CacheShared*>(mem);
        char* rmem = static_cast<char*>(mem) + cache_header_bytes();
        if (initialize) {
            size_t bytes = dex::cache::CacheRegion::bytes_for(cache_bytes);
            dex::cache::CacheRegion* r = dex::cache::CacheRegion::init(rmem, bytes, s.policy);
            sh->magic = kCacheSharedMagic;
            sh->cache_bytes = cache_bytes;
            sh->purge_lock.store(0, std::memory_order_relaxed);
            {
                std::random_device rd;
                uint64_t gen = 0;
                while (gen == 0)
                    gen = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                          static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
                sh->generation = gen;
            }
            sh->wb_lock.store(0, std::memory_order_relaxed);
            sh->wb_used.store(0, std::memory_order_relaxed);
            for (auto& e : sh->wb) {
                e.lock.store(0, std::memory_order_relaxed);
                e.registered.store(0, std::memory_order_relaxed);
                e.node = -1;
                e.ns = 0;
                e.word = 0;
                e.incarnation = 0;
            }
            for (auto& inc : sh->incarnation) inc.store(0, std::memory_order_relaxed);
            std::atomic_thread_fence(std::memory_order_seq_cst);
            s.region = r;
        } else {
            if (sh->magic != kCacheSharedMagic || sh->cache_bytes != cache_bytes)
                throw Error(ErrorCode::kInvalid, "node cache: no cache of this size in shared memory");
            s.region = dex::cache::CacheRegion::attach(rmem);
        }
        s.shared = sh;
        s.block = mem;
        s.block_bytes = cache_header_bytes() + dex::cache::CacheRegion::bytes_for(cache_bytes);
        Client& c = client();
        std::lock_guard<std::mutex> g(c.mu);
        for (size_t i = 0; i < c.mem.node_count(); i++) {
            try {
                register_cache_region(c.mem.node(static_cast<uint32_t>(i)));
            } catch (const Error&) {
            }
        }
    });
}

void dex_cache_set_policy(double leaf_admission, int cache_leaves) {
    CacheState& s = cstate();
    s.policy.leaf_admission = leaf_admission < 0 ? 0 : leaf_admission > 1 ? 1 : leaf_admission;
    s.policy.cache_leaves = cache_leaves != 0;
    if (s.cache && s.pid == getpid()) s.cache->set_policy(s.policy);
}

void dex_cache_detach(void) {
    try {
        CacheState& s = cstate();
        if (s.cache && s.pid == getpid()) delete s.cache;  // returns our free frames
        s.cache = nullptr;
        s.pid = 0;
    } catch (...) {
    }
}

int dex_cache_enabled(void) { return cstate().region != nullptr; }

int dex_cache_census(DexCacheCensusRow** rows, int* n, DexError* err) {
    if (rows) *rows = nullptr;
    if (n) *n = 0;
    return guarded(err, [&] {
        if (!rows || !n) throw Error(ErrorCode::kInvalid, "dex_cache_census: NULL argument");
        CacheState& s = cstate();
        if (!s.region) return;
        std::map<std::tuple<int, uint32_t, int>, DexCacheCensusRow> agg;
        s.region->for_each_frame([&](const dex::cache::FrameInfo& i) {
            if (i.state != dex::cache::FrameState::kHot && i.state != dex::cache::FrameState::kCooling) return;
            if (i.gaddr == dex::kNullGAddr) return;
            int node = static_cast<int>(dex::gaddr_node(i.gaddr));
            auto& r = agg[std::make_tuple(node, i.tree_id, static_cast<int>(i.level))];
            r.node = node;
            r.tree_id = i.tree_id;
            r.level = i.level;
            r.frames++;
            if (i.state == dex::cache::FrameState::kCooling) r.cooling++;
            if (i.dirty) r.dirty++;
        });
        auto* arr = static_cast<DexCacheCensusRow*>(std::malloc((agg.empty() ? 1 : agg.size()) * sizeof(DexCacheCensusRow)));
        if (!arr) throw std::bad_alloc();
        size_t k = 0;
        for (auto& [key, r] : agg) arr[k++] = r;
        *rows = arr;
        *n = static_cast<int>(k);
    });
}

void dex_disconnect_all(void) {
    try {
        Client& c = client();
        std::lock_guard<std::mutex> g(c.mu);
        for (size_t i = 0; i < c.mem.node_count(); i++) {
            try {
                c.mem.node(static_cast<uint32_t>(i)).disconnect();
            } catch (...) {
            }
        }
    } catch (...) {
    }
}

int dex_memnode_stats(int node, DexNodeStats* out, DexError* err) {
    return guarded(err, [&] {
        auto r = node_transport(node).rpc(dex::net::kOpStats, nullptr, 0);
        if (r.size() < sizeof(dex::net::NodeStats))
            throw Error(ErrorCode::kProtocol, "STATS: short response from memory node");
        dex::net::NodeStats s;
        std::memcpy(&s, r.data(), sizeof s);
        if (out) {
            out->incarnation = s.incarnation;
            out->pool_bytes = s.pool_bytes;
            out->used_bytes = s.used_bytes;
            out->connections = s.connections;
            out->requests = s.requests;
            out->offloads = s.offloads;
            out->namespaces = s.namespaces;
        }
    });
}

int dex_memnode_incarnation(int node, uint64_t* incarnation, DexError* err) {
    return guarded(err, [&] {
        uint64_t inc = node_transport(node).incarnation();
        if (incarnation) *incarnation = inc;
    });
}

int dex_ns_create(int node, const uint8_t tag[DEX_NS_TAG_LEN], uint64_t* ns, uint64_t* incarnation, DexError* err) {
    return guarded(err, [&] {
        uint8_t t[DEX_NS_TAG_LEN] = {};
        if (tag) std::memcpy(t, tag, DEX_NS_TAG_LEN);
        dex::Transport& tr = node_transport(node);
        uint64_t inc = tr.incarnation();
        uint64_t id = u64_of(tr.rpc(dex::net::kOpNsCreate, t, sizeof t), "NS_CREATE");
        if (tr.incarnation() != inc)
            throw Error(ErrorCode::kLostMemory, "memory node " + tr.address() + " restarted while creating a namespace");
        // Namespace ids restart after a memory node restart: no frame of an
        // earlier tree with this id may survive.
        cache_sync_node(node, inc);
        cache_drop_tree(node, id);
        if (ns) *ns = id;
        if (incarnation) *incarnation = inc;
    });
}

int dex_ns_drop(int node, uint64_t ns, uint64_t* bytes_freed, DexError* err) {
    return guarded(err, [&] {
        wb_forget(node, ns);
        // Its memory goes back to the pool and may hold the next tree's nodes.
        cache_drop_tree(node, ns);
        uint64_t freed = u64_of(node_transport(node).rpc(dex::net::kOpNsDrop, &ns, 8), "NS_DROP");
        cache_drop_tree(node, ns);
        if (bytes_freed) *bytes_freed = freed;
    });
}

// One NS_LIST page from `start` appended to `all`; returns where the next page
// starts (0: that was the last). A reply that does not add up is an error:
// nothing is ever dropped silently.
static uint64_t ns_list_page(dex::Transport& tr, uint64_t start, std::vector<dex::net::NsInfo>& all) {
    auto r = tr.rpc(dex::net::kOpNsList, &start, sizeof start);
    uint32_t cnt = 0;
    if (r.size() >= 4) std::memcpy(&cnt, r.data(), 4);
    if (r.size() < 4 || cnt > dex::net::kNsListPage || r.size() != 4 + size_t(cnt) * sizeof(dex::net::NsInfo) + 8)
        throw Error(ErrorCode::kProtocol, "NS_LIST: malformed response of " + std::to_string(r.size()) +
                                              " bytes from memory node " + tr.address());
    uint64_t next;
    std::memcpy(&next, r.data() + r.size() - 8, 8);
    for (uint32_t i = 0; i < cnt; i++) {
        dex::net::NsInfo info;
        std::memcpy(&info, r.data() + 4 + i * sizeof info, sizeof info);
        if (info.ns < start)
            throw Error(ErrorCode::kProtocol, "NS_LIST: memory node " + tr.address() + " answered out of order");
        start = info.ns + 1;
        all.push_back(info);
    }
    // The next page must move forward, or a confused node would keep us here forever.
    if (next != 0 && (next < start || cnt == 0))
        throw Error(ErrorCode::kProtocol, "NS_LIST: memory node " + tr.address() + " sent no progress");
    return next;
}

int dex_ns_list(int node, DexNsInfo** out, int* n, DexError* err) {
    if (out) *out = nullptr;
    if (n) *n = 0;
    return guarded(err, [&] {
        dex::Transport& tr = node_transport(node);
        std::vector<dex::net::NsInfo> all;
        uint64_t start = 0;
        do {
            start = ns_list_page(tr, start, all);
        } while (start != 0);
        if (all.size() > static_cast<size_t>(INT_MAX))
            throw Error(ErrorCode::kRemote, "NS_LIST: memory node " + tr.address() + " holds more namespaces than fit in an int");
        auto* arr = static_cast<DexNsInfo*>(std::malloc((all.empty() ? 1 : all.size()) * sizeof(DexNsInfo)));
        if (!arr) throw std::bad_alloc();
        for (size_t i = 0; i < all.size(); i++) {
            arr[i].ns = all[i].ns;
            arr[i].root = all[i].root;
            arr[i].bytes_allocated = all[i].bytes_allocated;
            std::memcpy(arr[i].tag, all[i].tag, DEX_NS_TAG_LEN);
        }
        if (out)
            *out = arr;
        else
            std::free(arr);
        if (n) *n = static_cast<int>(all.size());
    });
}

void dex_free(void* p) { std::free(p); }

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

void dex_set_offload_mode(int mode) {
    OffloadState& s = ostate();
    s.mode = mode == DEX_OFFLOAD_ON ? dex::tree::OffloadMode::kOn
             : mode == DEX_OFFLOAD_OFF ? dex::tree::OffloadMode::kOff
                                       : dex::tree::OffloadMode::kAuto;
    if (s.policy && s.pid == getpid()) s.policy->set_mode(s.mode);
}

uint32_t dex_tree_id(int home, uint64_t ns) { return dex::tree::tree_id_for(static_cast<uint32_t>(home), ns); }

int dex_tree_placement(DexTree* tree, int* placement_level, uint64_t* nodes_on, uint64_t* subtrees_on, int max,
                       DexError* err) {
    return guarded(err, [&] {
        if (!tree || !nodes_on || !subtrees_on || max <= 0) throw Error(ErrorCode::kInvalid, "dex_tree_placement: NULL argument");
        if (tree->owner_word && cstate().shared) {
            int slot = wb_slot_find(tree->node, tree->ns, tree->owner_word);
            if (slot >= 0) wb_flush(slot);
        }
        dex::tree::TreeInfo i;
        tree->run([&](dex::tree::BTree& b) { i = b.check(); });
        if (placement_level) *placement_level = i.placement_level;
        for (int k = 0; k < max; k++) {
            nodes_on[k] = static_cast<size_t>(k) < i.nodes_on.size() ? i.nodes_on[k] : 0;
            subtrees_on[k] = static_cast<size_t>(k) < i.subtrees_on.size() ? i.subtrees_on[k] : 0;
        }
    });
}

void dex_tree_close(DexTree* tree) { delete tree; }

int dex_tree_validate(DexTree* tree, DexError* err) {
    return guarded(err, [&] {
        if (!tree) throw Error(ErrorCode::kInvalid, "NULL tree handle");
        tree->validate();
    });
}

int dex_tree_init_empty(DexTree* tree, DexError* err) {
    return guarded(err, [&] {
        if (!tree) throw Error(ErrorCode::kInvalid, "NULL tree handle");
        tree->run([](dex::tree::BTree& b) { b.init_empty(); });
    });
}

int dex_bulk_begin(DexTree* tree, double fill_factor, DexBulk** out, DexError* err) {
    if (out) *out = nullptr;
    return guarded(err, [&] {
        if (!tree || !out) throw Error(ErrorCode::kInvalid, "dex_bulk_begin: NULL argument");
        auto b = std::make_unique<DexBulk>();
        b->tree = tree;
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
        if (!bulk || !bulk->loader) throw Error(ErrorCode::kInvalid, "dex_bulk_finish: NULL argument");
        bulk->tree->run([&](dex::tree::BTree&) { bulk->loader->finish(); });
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

int dex_tree_check(DexTree* tree, DexTreeInfo* info, DexError* err) {
    return guarded(err, [&] {
        if (!tree) throw Error(ErrorCode::kInvalid, "NULL tree handle");
        // check() reads remote memory: write this tree's dirty frames first.
        if (tree->owner_word && cstate().shared) {
            int slot = wb_slot_find(tree->node, tree->ns, tree->owner_word);
            if (slot >= 0) wb_flush(slot);
        }
        dex::tree::TreeInfo i;
        tree->run([&](dex::tree::BTree& b) { i = b.check(); });
        fill_info(info, i);
    });
}

int dex_tree_compact(DexTree* tree, uint64_t* freed, DexError* err) {
    return guarded(err, [&] {
        if (!tree) throw Error(ErrorCode::kInvalid, "NULL tree handle");
        uint64_t n = 0;
        // compact() judges leaves by their remote images: write this tree's
        // dirty frames first (the merges themselves handle later changes).
        if (tree->owner_word && cstate().shared) {
            int slot = wb_slot_find(tree->node, tree->ns, tree->owner_word);
            if (slot >= 0) wb_flush(slot);
        }
        tree->run([&](dex::tree::BTree& b) { n = b.compact(); });
        if (freed) *freed = n;
    });
}

int dex_tree_info(DexTree* tree, DexTreeInfo* info, DexError* err) {
    return guarded(err, [&] {
        if (!tree) throw Error(ErrorCode::kInvalid, "NULL tree handle");
        dex::tree::TreeInfo i;
        tree->run([&](dex::tree::BTree& b) { i = b.info(); });
        fill_info(info, i);
    });
}

}  // extern "C"

int dex_ns_alloc_word(int node, uint64_t ns, uint64_t* addr, DexError* err) {
    if (addr) *addr = 0;
    return guarded(err, [&] {
        uint64_t req[2] = {ns, dex::kNodeSize};
        uint64_t off = u64_of(node_transport(node).rpc(dex::net::kOpAlloc, req, sizeof req), "ALLOC");
        dex::GAddr g = dex::make_gaddr(static_cast<uint32_t>(node), off);
        uint64_t zero = 0;
        client().mem.write(g, &zero, 8);
        if (addr) *addr = g;
    });
}

int dex_tree_set_write_back(DexTree* tree, int on, uint64_t owner_word, DexError* err) {
    return guarded(err, [&] {
        if (!tree) throw Error(ErrorCode::kInvalid, "NULL tree handle");
        CacheState& s = cstate();
        tree->owner_word = owner_word;
        if (owner_word && !tree->word_checked) {
            tree->validate();
            uint64_t w = 0;
            client().mem.read(owner_word, &w, 8);
            uint64_t gen = s.shared ? s.shared->generation : 0;
            if (w != 0 && w != gen) throw lost_dirty(tree->name);
            tree->word_checked = true;
        }
        bool want = on && owner_word && s.region != nullptr;
        if (!want && owner_word && s.shared) {
            // Leaving write-back mode (or never in it here): frames another
            // backend left dirty are written back before we write through --
            // each only once its entries' heap WAL is durable.
            int slot = wb_slot_find(tree->node, tree->ns, owner_word);
            if (slot >= 0 && (tree->wb || s.shared->wb[slot].registered.load(std::memory_order_seq_cst))) {
                uint64_t need = dirty_lsn_max(dex::tree::tree_id_for(static_cast<uint32_t>(tree->node), tree->ns));
                if (need > dex::tree::durable_lsn()) throw dex::tree::NeedDurable(need);
                wb_flush(slot);
            }
        }
        if (want != tree->wb || !tree->tree) {
            dex::tree::BTree& b = tree->bt();
            if (want) {
                DexTree* t = tree;
                b.set_write_back(true, [t]() {
                    if (t->wb_slot < 0) t->wb_slot = wb_slot_for(t->node, t->ns, t->owner_word, t->incarnation);
                    if (t->wb_slot < 0) return false;
                    wb_register(t->wb_slot, t->name);
                    return true;
                });
            } else {
                b.set_write_back(false, {});
            }
            tree->wb = want;
        }
    });
}

void dex_set_durable_lsn_fn(uint64_t (*fn)(void)) { dex::tree::set_durable_lsn_source(fn); }

void dex_set_change_log_fn(void (*fn)(const uint64_t*, size_t)) { g_change_log.store(fn, std::memory_order_release); }

void dex_cache_forget_nodes(const uint64_t* nodes, size_t n) {
    try {
        dex::cache::Cache* c = process_cache();
        if (!c || !nodes) return;
        for (size_t i = 0; i < n; i++) dex::tree::drop_cached_node(*c, nodes[i]);
        c->give_back_free();  // the replaying process never admits: frames go back to everyone
    } catch (...) {
    }
}

int dex_journal_create(DexTree* tree, uint64_t life, uint64_t* root, DexError* err) {
    if (root) *root = 0;
    return guarded(err, [&] {
        if (!tree || !root) throw Error(ErrorCode::kInvalid, "dex_journal_create: NULL argument");
        tree->run([&](dex::tree::BTree& b) {
            *root = dex::tree::journal_create(client().mem, b.node_id(), b.namespaces(), life);
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
        tree->run([&](dex::tree::BTree&) { *life = dex::tree::journal_life(client().mem, tree->journal_root); });
    });
}

int dex_journal_read(DexTree* tree, DexKey** keys, int* n, uint64_t* life, DexError* err) {
    if (keys) *keys = nullptr;
    if (n) *n = 0;
    return guarded(err, [&] {
        if (!tree || !keys || !n || !tree->journal_root) throw Error(ErrorCode::kInvalid, "dex_journal_read: no journal");
        dex::tree::JournalContents c;
        tree->run([&](dex::tree::BTree&) { c = dex::tree::journal_read(client().mem, tree->journal_root); });
        auto* arr = static_cast<DexKey*>(std::malloc((c.records.empty() ? 1 : c.records.size()) * sizeof(DexKey)));
        if (!arr) throw std::bad_alloc();
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
        tree->run([&](dex::tree::BTree& b) {
            dex::tree::JournalContents c = dex::tree::journal_read(client().mem, tree->journal_root);
            if (c.life != old_life)
                throw Error(ErrorCode::kInvalid,
                            "index \"" + tree->name + "\": its insert journal was recovered meanwhile by another "
                            "compute server",
                            "Only one PostgreSQL primary may use a dex index; stop the other one.");
            uint64_t d = 0;
            if (n > 0) {
                std::vector<dex::EntryKey> v(static_cast<size_t>(n));
                std::memcpy(v.data(), strays, v.size() * sizeof(dex::EntryKey));
                d = b.remove(v.data(), v.size());
            }
            dex::tree::journal_clear(client().mem, c);
            uint64_t seen = dex::tree::journal_cas_life(client().mem, tree->journal_root, old_life, new_life);
            if (seen != old_life)
                throw Error(ErrorCode::kInvalid,
                            "index \"" + tree->name + "\": its insert journal was recovered meanwhile by another "
                            "compute server",
                            "Only one PostgreSQL primary may use a dex index; stop the other one.");
            if (removed) *removed = d;
        });
    });
}

static_assert(DEX_MAX_STANDBYS == dex::cluster::kMaxStandbys && DEX_SLOT_EXPIRED == dex::cluster::kExpired);
static_assert(sizeof(DexStandbySlot) == sizeof(dex::cluster::StandbySlot));

int dex_registry_open(int node, uint64_t ns, int create, uint64_t floor_lsn, uint64_t* addr, DexError* err) {
    if (addr) *addr = 0;
    return guarded(err, [&] {
        if (!addr || node < 0) throw Error(ErrorCode::kInvalid, "dex_registry_open: invalid arguments");
        *addr = dex::cluster::Registry::open(client().mem, static_cast<uint32_t>(node), ns, create != 0, floor_lsn);
    });
}

int dex_registry_read(uint64_t addr, DexRegistryState* out, DexError* err) {
    return guarded(err, [&] {
        if (!out || !addr) throw Error(ErrorCode::kInvalid, "dex_registry_read: no registry");
        dex::cluster::RegistryHeader h = dex::cluster::Registry(client().mem, addr).read();
        out->writer_life = h.writer_life;
        out->writer_beat = h.writer_beat;
        out->writer_hwm = h.writer_hwm;
        out->removal_lsn = h.removal_lsn;
        out->writer_tli = h.writer_tli;
        std::memcpy(out->slots, h.slots, sizeof out->slots);
    });
}

int dex_registry_cas_writer(uint64_t addr, uint64_t expected, uint64_t life, uint64_t* seen, DexError* err) {
    return guarded(err, [&] {
        uint64_t v = dex::cluster::Registry(client().mem, addr).cas_writer(expected, life);
        if (seen) *seen = v;
    });
}

int dex_registry_writer_beat(uint64_t addr, uint64_t beat, uint64_t hwm, uint32_t tli, DexError* err) {
    return guarded(err, [&] { dex::cluster::Registry(client().mem, addr).writer_beat(beat, hwm, tli); });
}

int dex_registry_set_removal_lsn(uint64_t addr, uint64_t lsn, DexError* err) {
    return guarded(err, [&] { dex::cluster::Registry(client().mem, addr).set_removal_lsn(lsn); });
}

int dex_registry_raise_hwm(uint64_t addr, uint64_t lsn, DexError* err) {
    return guarded(err, [&] { dex::cluster::Registry(client().mem, addr).raise_hwm(lsn); });
}

int dex_registry_expire_slot(uint64_t addr, int slot, uint64_t beat, int* done, DexError* err) {
    return guarded(err, [&] {
        bool d = dex::cluster::Registry(client().mem, addr).expire_slot(static_cast<uint32_t>(slot), beat);
        if (done) *done = d ? 1 : 0;
    });
}

int dex_registry_claim_slot(uint64_t addr, uint64_t life, uint64_t replay_lsn, uint32_t tli, int* slot, uint64_t* beat,
                            DexError* err) {
    if (slot) *slot = -1;
    return guarded(err, [&] {
        uint64_t b = 0;
        int s = dex::cluster::Registry(client().mem, addr).claim_slot(life, replay_lsn, tli, &b);
        if (slot) *slot = s;
        if (beat) *beat = b;
    });
}

int dex_registry_standby_beat(uint64_t addr, int slot, uint64_t life, uint64_t* beat, uint64_t replay_lsn, int* ok,
                              DexError* err) {
    if (ok) *ok = 0;
    return guarded(err, [&] {
        if (!beat) throw Error(ErrorCode::kInvalid, "dex_registry_standby_beat: NULL beat");
        bool r = dex::cluster::Registry(client().mem, addr).standby_beat(static_cast<uint32_t>(slot), life, *beat,
                                                                        replay_lsn);
        if (ok) *ok = r ? 1 : 0;
    });
}

int dex_cache_flush(uint64_t* written, DexError* err) {
    if (written) *written = 0;
    return guarded(err, [&] {
        uint64_t w = wb_flush(-1);
        if (written) *written = w;
    });
}

uint64_t dex_cache_dirty_lsn(void) {
    try {
        return dirty_lsn_max(0, true);
    } catch (...) {
        return 0;
    }
}

uint64_t dex_cache_generation(void) {
    CacheShared* sh = cstate().shared;
    return sh ? sh->generation : 0;
}
