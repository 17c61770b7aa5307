#include "cluster/compute_process.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <new>
#include <random>

#include "common/error.h"
#include "tree/btree.h"
#include "tree/journal.h"
#include "tree/write_back_nodes.h"

namespace dex::cluster {

ComputeProcess& ComputeProcess::instance() {
    static ComputeProcess* p = new ComputeProcess();  // never destroyed (see the header)
    return *p;
}

ComputeProcess::ComputeProcess(MemnodeClient::Factory factory) : client_(std::move(factory)) {
    cache_.set_hooks([this](GAddr g) { return admit_check(g); },
                     [this](uint32_t f, const Node& img) { return write_back_frame(f, img); },
                     [this](const uint32_t* f, Node* imgs, size_t n, bool* ok) { write_back_frames(f, imgs, n, ok); });
}

// ---- shared node cache ------------------------------------------------------------

void ComputeProcess::attach_cache(void* mem, uint64_t cache_bytes, bool initialize) {
    cache_.reset();
    client_.set_region(nullptr, 0);
    if (!mem || cache_bytes == 0) return;
    if (initialize)
        cache_.create(mem, cache_bytes, cache::SharedCache::random_generation());
    else
        cache_.attach(mem, cache_bytes);
    client_.set_region(cache_.block(), cache_.block_bytes());
    client_.register_region_everywhere();
}

void ComputeProcess::sync_node(int node, uint64_t inc) {
    if (!cache_.header() || node < 0) return;
    cache_.sync_node(static_cast<uint32_t>(node), inc);
}

void ComputeProcess::sync_tree_nodes(int home, uint64_t home_inc, const std::vector<uint64_t>& part_ns,
                                     const std::vector<uint64_t>& part_inc) {
    sync_node(home, home_inc);  // no frame of another incarnation is read
    cache::SharedCacheHeader* sh = cache_.header();
    if (!sh) return;
    for (uint32_t j = 0; j < part_ns.size(); j++) {
        if (!part_ns[j] || j == static_cast<uint32_t>(home) || j >= cache::IncarnationTable::kMaxNodes) continue;
        if (sh->incarnations.recorded(j) == part_inc[j]) continue;
        uint64_t inc = 0;
        try {
            inc = mem().node(j).incarnation();
        } catch (const Error& e) {
            if (e.code() == ErrorCode::kInterrupted) throw;
            continue;
        }
        if (inc == part_inc[j]) sync_node(static_cast<int>(j), inc);
    }
}

void ComputeProcess::drop_tree(int node, uint64_t ns) {
    if (!cache_.header() || node < 0) return;
    cache_.drop_tree(tree::tree_id_for(static_cast<uint32_t>(node), ns));
}

void ComputeProcess::forget_nodes(const uint64_t* nodes, size_t n) {
    cache::Cache* c = cache_.process_cache();
    if (!c || !nodes) return;
    for (size_t i = 0; i < n; i++) tree::drop_cached_node(*c, nodes[i]);
    c->give_back_free();  // the replaying process never admits: frames go back to everyone
}

bool ComputeProcess::admit_check(GAddr g) {
    cache::SharedCacheHeader* sh = cache_.header();
    if (!sh) return false;
    return sh->incarnations.admit_ok(g, [this](uint32_t node) { return mem().node(node).incarnation(); });
}

void ComputeProcess::write_back_frames(const uint32_t* frames, Node* imgs, size_t n, bool* ok) {
    try {
        cache::CacheRegion* region = cache_.region();
        const uint64_t durable = tree::durable_lsn();
        std::map<uint32_t, std::vector<size_t>> by_node;
        std::vector<GAddr> addr(n);
        for (size_t i = 0; i < n; i++) {
            addr[i] = region->header(frames[i]).gaddr.load(std::memory_order_acquire);
            if (addr[i] == kNullGAddr || !admit_check(addr[i])) {
                ok[i] = true;  // gone (a restarted memory node): dropped, as write_back_frame does
                continue;
            }
            if (region->header(frames[i]).lsn.load(std::memory_order_relaxed) > durable) continue;
            by_node[gaddr_node(addr[i])].push_back(i);
        }
        for (auto& [node, idx] : by_node) {
            std::vector<GAddr> a(idx.size());
            std::vector<Node*> img(idx.size());
            for (size_t k = 0; k < idx.size(); k++) {
                a[k] = addr[idx[k]];
                img[k] = &imgs[idx[k]];
            }
            std::vector<bool> done =
                tree::write_back_nodes(mem(), node, a, img, change_log_.load(std::memory_order_acquire));
            for (size_t k = 0; k < idx.size(); k++) ok[idx[k]] = done[k];
        }
    } catch (...) {
        // what is not marked written stays dirty
    }
}

bool ComputeProcess::write_back_frame(uint32_t f, const Node& img) {
    try {
        cache::CacheRegion* region = cache_.region();
        GAddr g = region->header(f).gaddr.load(std::memory_order_acquire);
        if (g == kNullGAddr) return true;
        // A frame of a restarted memory node: the tree is lost anyway (and the
        // address may belong to someone else now): drop it.
        if (!admit_check(g)) return true;
        // Its entries' heap WAL must be durable first (src/README.md "Crash
        // survival"): not yet -> it stays dirty; flushers flush WAL first.
        if (region->header(f).lsn.load(std::memory_order_relaxed) > tree::durable_lsn()) return false;
        tree::TreeOptions o;
        o.op_timeout_ms = op_timeout_ms() > 0 ? op_timeout_ms() : 30000;
        o.log_changes = change_log_.load(std::memory_order_acquire);  // standbys' caches (Locks::publish)
        // A flush's two round trips -- the remote lock CASed at the frame's
        // version (or at the newer one an earlier single write-back left,
        // which the failed CAS reports), then the publish batch -- since
        // this server is the leaf's only writer and its frame the newest
        // image (W2, W3). A leaf found locked (a dead connection's lock)
        // goes the remote-lock protocol's way: read, lock, publish.
        Node copy;
        std::memcpy(static_cast<void*>(&copy), &img, kNodeSize);
        std::vector<Node*> one{&copy};
        if (tree::write_back_nodes(mem(), gaddr_node(g), {g}, one, o.log_changes)[0]) return true;
        // Under the frame's latch: a short wait (tree::kLatchedWriteBackMs);
        // a live holder's lock leaves the frame dirty for a later write-back.
        tree::NodeIO io(mem(), gaddr_node(g), o);
        tree::write_back_node(io, g, img, tree::Deadline(std::min(o.op_timeout_ms, tree::kLatchedWriteBackMs)));
        return true;
    } catch (...) {
        return false;
    }
}

// ---- write-back mode --------------------------------------------------------------

bool ComputeProcess::register_dirty(int* slot, int node, uint64_t ns, GAddr word, uint64_t incarnation,
                                    const std::string& index_name) {
    cache::SharedCacheHeader* sh = cache_.header();
    if (!sh) return false;
    if (*slot < 0)
        *slot = sh->writeback.find_or_add(node, ns, word, incarnation,
                                          tree::tree_id_for(static_cast<uint32_t>(node), ns));
    if (*slot < 0) return false;
    sh->writeback.register_dirty(*slot, sh->generation, mem(), index_name);
    return true;
}

void ComputeProcess::check_owner_word(GAddr word, const std::string& index_name) {
    cache::WritebackRegistry::check_owner_word(mem(), word, cache_.generation(), index_name);
}

uint64_t ComputeProcess::read_owner_word(GAddr word) {
    uint64_t w = 0;
    mem().read(word, &w, 8);
    return w;
}

bool ComputeProcess::release_owner_word(GAddr word, uint64_t expected) {
    return mem().cas(word, expected, 0) == expected;
}

void ComputeProcess::flush_tree(int node, uint64_t ns, GAddr word) {
    cache::SharedCacheHeader* sh = cache_.header();
    if (!word || !sh) return;
    int slot = sh->writeback.find(node, ns, word);
    if (slot >= 0) cache_.flush(slot, mem());
}

void ComputeProcess::flush_tree_for_write_through(int node, uint64_t ns, GAddr word, bool was_write_back) {
    cache::SharedCacheHeader* sh = cache_.header();
    if (!word || !sh) return;
    // Frames another backend left dirty are written back before we write
    // through -- each only once its entries' heap WAL is durable.
    int slot = sh->writeback.find(node, ns, word);
    if (slot < 0 || !(was_write_back || sh->writeback.registered(slot))) return;
    uint64_t need = cache_.dirty_lsn_max(tree::tree_id_for(static_cast<uint32_t>(node), ns), false);
    if (need > tree::durable_lsn()) throw tree::NeedDurable(need);
    cache_.flush(slot, mem());
}

uint64_t ComputeProcess::flush_all() { return cache_.flush(-1, mem()); }

// ---- namespaces ---------------------------------------------------------------------

uint64_t ComputeProcess::create_namespace(int node, const uint8_t* tag, uint64_t* incarnation) {
    uint64_t inc = 0;
    uint64_t id = client_.ns_create(node, tag, &inc);
    // Namespace ids restart after a memory node restart: no frame of an
    // earlier tree with this id may survive.
    sync_node(node, inc);
    drop_tree(node, id);
    if (incarnation) *incarnation = inc;
    return id;
}

uint64_t ComputeProcess::drop_namespace(int node, uint64_t ns) {
    if (cache::SharedCacheHeader* sh = cache_.header()) sh->writeback.forget(node, ns);
    // Its memory goes back to the pool and may hold the next tree's nodes.
    drop_tree(node, ns);
    uint64_t freed = client_.ns_drop(node, ns);
    drop_tree(node, ns);
    return freed;
}

// ---- offloading, trees, statistics ------------------------------------------------

tree::OffloadPolicy* ComputeProcess::offload_policy() {
    pid_t me = getpid();
    if (!offload_ || offload_pid_ != me) {
        std::random_device rd;
        offload_ = new tree::OffloadPolicy(tree::OffloadPolicy::Params{},
                                           (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(me));
        offload_pid_ = me;
    }
    offload_->set_mode(offload_mode_);
    return offload_;
}

void ComputeProcess::set_offload_mode(tree::OffloadMode mode) {
    offload_mode_ = mode;
    if (offload_ && offload_pid_ == getpid()) offload_->set_mode(mode);
}

tree::TreeOptions ComputeProcess::tree_options() {
    tree::TreeOptions o;
    o.cache = cache_.process_cache();  // nullptr: no cache in this process
    if (o.cache) o.offload = offload_policy();  // offloading decides on cache misses
    o.log_changes = change_log_.load(std::memory_order_acquire);
    o.log_position = log_position_.load(std::memory_order_acquire);
    return o;
}

void ComputeProcess::attach_stats(void* mem, bool initialize) {
    if (!mem) {
        set_stats(nullptr);
        return;
    }
    if (initialize) new (mem) Stats();
    shared_stats_ = static_cast<Stats*>(mem);
    set_stats(shared_stats_);
}

void ComputeProcess::stats_private(bool on) { set_stats(on ? nullptr : shared_stats_); }

}  // namespace dex::cluster
