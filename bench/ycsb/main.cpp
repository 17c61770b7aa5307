// dex-ycsb: YCSB-style benchmark of the dex core B+-tree without PostgreSQL,
// following the DEX paper's Table 1 workloads. See bench/README.md.
//
// Process model (like PostgreSQL backends): the parent sets everything up
// (memory node, namespace, bulk load, zipfian constants, a MAP_SHARED control
// region), then forks --workers processes. Each worker opens its OWN transport
// (TCP sockets are never shared across fork) and counts into one dex::Stats in
// the shared region via dex::set_stats(), so the counters aggregate over all
// workers. Latency histograms live in per-worker slots of the same region and
// are merged by the parent. The JSON result goes to stdout, progress to stderr.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/stats.h"
#include "gen.h"
#include "json.h"
#include "local_transport.h"
#include "options.h"
#include "net/protocol.h"
#include "transport/remote_memory.h"
#include "transport/tcp_transport.h"
#include "cache/cache.h"
#include "cache/region.h"
#include "tree/btree.h"
#include "tree/offload_policy.h"

using namespace dex;
using namespace dex::bench;
using Clock = std::chrono::steady_clock;

namespace {

// ---- shared region -----------------------------------------------------------------

struct alignas(64) WorkerSlot {
    std::atomic<uint64_t> ops_done;  // progress, read by the parent while running
    uint64_t by_type[kOpTypes];
    uint64_t lookup_not_found;       // equality lookup of a loaded key found nothing
    uint64_t update_missing;         // update's delete of the old TID removed nothing
    uint64_t insert_duplicate;       // insert of a "new" key found it present
    uint64_t scan_short;             // scan returned fewer than --scan-length entries
    int64_t end_ns;                  // steady clock at the worker's last op
    int failed;
    char error[512];
    Histogram hist[kOpTypes];
};

struct Control {
    std::atomic<int> ready;
    std::atomic<int> start;
    std::atomic<int> stop;
    std::atomic<int> measuring;        // 0 during --warmup: operations are not recorded
    int64_t start_ns;
    std::atomic<uint64_t> insert_seq;  // next new-key number (insert-intensive / scan-intensive)
    Stats run_stats;                   // all workers count here (dex::set_stats)
};

// Per-record version word: bit 31 = an update holds the record, bits 0..30 =
// the version = heap block of the record's current TID.
constexpr uint32_t kRecLock = 1u << 31;

struct Shared {
    Control* ctl;
    WorkerSlot* slots;
    std::atomic<uint32_t>* rec;
    void* base;
    size_t bytes;
};

Shared map_shared(int workers, uint64_t keys) {
    size_t ctl = (sizeof(Control) + 4095) & ~size_t(4095);
    size_t slots = (sizeof(WorkerSlot) * workers + 4095) & ~size_t(4095);
    size_t rec = keys * sizeof(std::atomic<uint32_t>);
    size_t bytes = ctl + slots + rec;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap of the shared control region failed");
    Shared s;
    s.base = p;
    s.bytes = bytes;
    s.ctl = new (p) Control();
    s.slots = reinterpret_cast<WorkerSlot*>(static_cast<uint8_t*>(p) + ctl);
    for (int i = 0; i < workers; i++) new (&s.slots[i]) WorkerSlot();
    s.rec = reinterpret_cast<std::atomic<uint32_t>*>(static_cast<uint8_t*>(p) + ctl + slots);  // zero = version 0
    return s;
}

// ---- keys -----------------------------------------------------------------------------
// Record r (0 <= r < K) is the index entry (value 2r, TID (version, 1)); the
// bulk load stores version 0. New keys (inserts) are odd: the j-th insert of
// the run gets value 2*P(j)+1 for a random permutation P of [0, K) (so inserts
// land all over the key space, like YCSB's hashed insert order), and 2K + (j-K)
// once all K odd slots are used. Values are unsigned key images (key.h).

EntryKey record_key(uint64_t r, uint32_t version) { return make_key(2 * r, version, 1); }
uint64_t new_key_value(uint64_t j, uint64_t K, const Permutation& p) { return j < K ? 2 * p(j) + 1 : 2 * K + (j - K); }

// ---- memory node --------------------------------------------------------------------

pid_t g_memnode_pid = -1;
std::string g_memnode_log;
std::vector<pid_t> g_workers;

void kill_memnode() {
    if (g_memnode_pid <= 0) return;
    kill(g_memnode_pid, SIGTERM);
    for (int i = 0; i < 50; i++) {
        if (waitpid(g_memnode_pid, nullptr, WNOHANG) == g_memnode_pid) {
            g_memnode_pid = -1;
            break;
        }
        usleep(20000);
    }
    if (g_memnode_pid > 0) {
        kill(g_memnode_pid, SIGKILL);
        waitpid(g_memnode_pid, nullptr, 0);
        g_memnode_pid = -1;
    }
    if (!g_memnode_log.empty()) unlink(g_memnode_log.c_str());
}

void on_signal(int sig) {
    for (pid_t p : g_workers) kill(p, SIGKILL);
    if (g_memnode_pid > 0) kill(g_memnode_pid, SIGKILL);
    if (!g_memnode_log.empty()) unlink(g_memnode_log.c_str());
    _exit(128 + sig);
}

std::string read_file(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// Starts dex-memnode on 127.0.0.1 with port 0 (the kernel picks a free one),
// stderr into a temp log, and returns "tcp://127.0.0.1:PORT" from its
// "listening on" line.
std::string spawn_memnode(const Options& o, uint64_t pool) {
    char tmpl[] = "/tmp/dex-ycsb-memnode-XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd < 0) throw std::runtime_error("mkstemp failed");
    g_memnode_log = tmpl;
    std::vector<std::string> args = {o.spawn_path, "--listen", "127.0.0.1:0", "--memory",
                                     std::to_string(pool >> 20) + "MB", "--threads",
                                     std::to_string(o.memnode_threads)};
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(fd, 1);
        dup2(fd, 2);
        std::vector<char*> av;
        for (auto& a : args) av.push_back(const_cast<char*>(a.c_str()));
        av.push_back(nullptr);
        execv(av[0], av.data());
        std::fprintf(stderr, "exec %s: %s\n", av[0], std::strerror(errno));
        _exit(127);
    }
    close(fd);
    g_memnode_pid = pid;
    auto t0 = Clock::now();
    while (Clock::now() - t0 < std::chrono::seconds(60)) {
        std::string log = read_file(g_memnode_log);
        size_t at = log.find("listening on 127.0.0.1:");
        if (at != std::string::npos && log.find('\n', at) != std::string::npos)
            return "tcp://127.0.0.1:" + std::to_string(std::atoi(log.c_str() + at + 23));
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            g_memnode_pid = -1;
            throw std::runtime_error("dex-memnode exited during startup:\n" + log);
        }
        usleep(20000);
    }
    throw std::runtime_error("dex-memnode did not report its port within 60 s:\n" + read_file(g_memnode_log));
}

// ---- per-process tree handle ----------------------------------------------------------

struct Handle {
    std::unique_ptr<RemoteMemory> mem;
    std::unique_ptr<tree::BTree> tree;
};

Handle open_tree(const Options& o, const std::string& url, LocalPool* pool, uint64_t ns,
                 cache::Cache* node_cache = nullptr) {
    std::vector<std::unique_ptr<Transport>> v;
    if (pool)
        v.push_back(std::make_unique<LocalTransport>(*pool));
    else
        v.push_back(std::make_unique<TcpTransport>(url, TransportOptions{}));
    Handle h;
    h.mem = std::make_unique<RemoteMemory>(std::move(v));
    tree::TreeOptions topts;
    topts.cache = node_cache;
    if (node_cache && o.offload != "off") {
        static tree::OffloadPolicy policy;  // per process: workers are forked after setup
        policy.set_mode(o.offload == "on" ? tree::OffloadMode::kOn : tree::OffloadMode::kAuto);
        topts.offload = &policy;
    }
    h.tree = std::make_unique<tree::BTree>(*h.mem, 0, ns, topts);
    return h;
}

uint64_t rpc_u64(Transport& t, net::Op op, const void* p, uint32_t len) {
    std::vector<uint8_t> r = t.rpc(op, p, len);
    uint64_t v = 0;
    if (r.size() >= 8) std::memcpy(&v, r.data(), 8);
    return v;
}

int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

// ---- worker --------------------------------------------------------------------------

struct Plan {
    Mix mix;
    uint64_t K;
    const Zipfian* zipf;       // null for uniform
    const Permutation* scramble;  // null: --hot-keys clustered
    const Permutation* ins_perm;
    cache::CacheRegion* region;  // the node cache (MAP_SHARED, built before fork), or null
};

void run_worker(int id, const Options& o, const Plan& plan, Shared sh, const std::string& url, LocalPool* pool,
                uint64_t ns) {
    WorkerSlot& me = sh.slots[id];
    // Like a PostgreSQL backend: a process-local handle on the shared region.
    std::unique_ptr<cache::Cache> node_cache;
    if (plan.region) node_cache = std::make_unique<cache::Cache>(*plan.region, o.seed * 7919 + id + 1);
    Handle h = open_tree(o, url, pool, ns, node_cache.get());
    tree::BTree& t = *h.tree;
    // Connect and learn the root outside the measurement, then count into the
    // shared Stats like a PostgreSQL backend does.
    h.mem->node(0).incarnation();
    t.refresh_root();
    set_stats(&sh.ctl->run_stats);
    Rng rng(o.seed * 1000003 + static_cast<uint64_t>(id) + 1);
    std::vector<EntryKey> buf;
    buf.reserve(256);
    const uint64_t K = plan.K;
    auto pick = [&]() -> uint64_t {
        if (!plan.zipf) return rng.below(K);
        uint64_t rank = plan.zipf->next(rng);
        return plan.scramble ? (*plan.scramble)(rank) : rank;
    };
    const int c1 = plan.mix.lookup, c2 = c1 + plan.mix.update, c3 = c2 + plan.mix.insert;

    sh.ctl->ready.fetch_add(1);
    while (!sh.ctl->start.load(std::memory_order_acquire)) usleep(100);

    uint64_t done = 0;
    while (!sh.ctl->stop.load(std::memory_order_relaxed)) {
        if (o.ops_per_worker && done >= o.ops_per_worker) break;
        int dice = static_cast<int>(rng.below(100));
        OpType op = dice < c1 ? kLookup : dice < c2 ? kUpdate : dice < c3 ? kInsert : kScan;
        const bool measuring = sh.ctl->measuring.load(std::memory_order_relaxed);
        int64_t t0 = now_ns();
        switch (op) {
            case kLookup: {
                // Equality lookup by value (what "WHERE k = v" does): all TIDs of 2r.
                uint64_t r = pick();
                tree::BTree::Scan s(t, make_key(2 * r, 0, 0), make_key(2 * r, UINT32_MAX, UINT16_MAX), false);
                if (!s.next(buf)) me.lookup_not_found++;
                break;
            }
            case kUpdate: {
                // PostgreSQL non-HOT update of a non-key column: the row gets a new
                // TID, so the index gets (key, new TID) and loses (key, old TID).
                // Insert first, then delete, so a concurrent lookup always finds
                // the key. Updates of one record are serialized by its version word.
                uint64_t r = pick();
                uint32_t v;
                for (int spin = 0;; spin++) {
                    v = sh.rec[r].load(std::memory_order_acquire);
                    if (!(v & kRecLock) && sh.rec[r].compare_exchange_weak(v, v | kRecLock)) break;
                    if (spin > 16) sched_yield();
                }
                uint32_t nv = (v + 1) & ~kRecLock;
                t.insert(record_key(r, nv));
                EntryKey old = record_key(r, v);
                if (t.remove(&old, 1) != 1) me.update_missing++;
                sh.rec[r].store(nv, std::memory_order_release);
                break;
            }
            case kInsert: {
                uint64_t j = sh.ctl->insert_seq.fetch_add(1);
                if (!t.insert(make_key(new_key_value(j, K, *plan.ins_perm), 0, 1))) me.insert_duplicate++;
                break;
            }
            case kScan: {
                uint64_t r = pick();
                tree::BTree::Scan s(t, make_key(2 * r, 0, 0), pos_inf_key(), false);
                size_t got = 0;
                while (got < static_cast<size_t>(o.scan_length) && s.next(buf)) got += buf.size();
                if (got < static_cast<size_t>(o.scan_length)) me.scan_short++;
                break;
            }
            default: break;
        }
        int64_t t1 = now_ns();
        if (!measuring) continue;  // --warmup: warms the cache and the policy, counts nothing
        me.hist[op].add(static_cast<uint64_t>(t1 - t0));
        me.by_type[op]++;
        me.end_ns = t1;
        done++;
        me.ops_done.store(done, std::memory_order_relaxed);
    }
}

// ---- verify ----------------------------------------------------------------------------

struct VerifyResult {
    bool ok = true;
    uint64_t entries = 0, expected = 0, missing = 0, unexpected = 0;
    std::string notes, first_problems;
};

VerifyResult verify(tree::BTree& t, const Shared& sh, uint64_t K, uint64_t inserts, const Permutation& ins_perm) {
    VerifyResult v;
    tree::TreeInfo ci = t.check();  // throws Error(kCorrupt) on an invariant violation
    v.notes = ci.notes;
    std::vector<uint64_t> ins;
    ins.reserve(inserts);
    for (uint64_t j = 0; j < inserts; j++) ins.push_back(new_key_value(j, K, ins_perm));
    std::sort(ins.begin(), ins.end());
    v.expected = K + inserts;
    // Expected content in key order: records (2r, TID (version, 1)) merged with
    // the inserted odd / appended values (TID (0, 1)). Compare with a full scan.
    uint64_t r = 0;
    size_t ii = 0;
    auto next_expected = [&](EntryKey& k) -> bool {
        bool have_r = r < K, have_i = ii < ins.size();
        if (!have_r && !have_i) return false;
        if (have_r && (!have_i || 2 * r < ins[ii])) {
            k = record_key(r, sh.rec[r].load() & ~kRecLock);
            r++;
        } else {
            k = make_key(ins[ii++], 0, 1);
        }
        return true;
    };
    auto problem = [&](const std::string& s) {
        v.ok = false;
        if (v.missing + v.unexpected <= 5) v.first_problems += s + "; ";
    };
    tree::BTree::Scan s(t, neg_inf_key(), pos_inf_key(), false);
    std::vector<EntryKey> got;
    EntryKey want{};
    bool have_want = next_expected(want);
    while (s.next(got)) {
        for (const EntryKey& k : got) {
            v.entries++;
            while (have_want && want < k) {
                v.missing++;
                problem("missing " + tree::key_str(want));
                have_want = next_expected(want);
            }
            if (have_want && want == k) {
                have_want = next_expected(want);
            } else {
                v.unexpected++;
                problem("unexpected " + tree::key_str(k));
            }
        }
    }
    while (have_want) {
        v.missing++;
        problem("missing " + tree::key_str(want));
        have_want = next_expected(want);
    }
    return v;
}

// ---- JSON (json.h) -----------------------------------------------------------------------

std::string lat_json(const Histogram& h) {
    return Obj()
        .u("count", h.n)
        .num("mean", h.n ? static_cast<double>(h.sum_ns) / h.n / 1e3 : 0)
        .num("p50", h.percentile(0.50) / 1e3)
        .num("p99", h.percentile(0.99) / 1e3)
        .num("p999", h.percentile(0.999) / 1e3)
        .num("max", static_cast<double>(h.max_ns) / 1e3)
        .done();
}

// ---- main ----------------------------------------------------------------------------------

// The pool a memory node (or the local buffer) gets: the index size
// estimate -- leaves at `fill`, ~3% inner nodes -- with room for inserts and
// updates splitting leaves. The local buffer is MAP_NORESERVE (costs only
// what is touched): at least 1 GiB. A spawned memnode pre-faults its whole
// pool: at least 256 MiB.
uint64_t pool_bytes(const Options& o) {
    if (o.memory) return o.memory;
    const bool local = o.mode == "local";
    uint64_t est = static_cast<uint64_t>(static_cast<double>(o.keys) / (kLeafCapacity * o.fill) * 1.05 * kNodeSize);
    return std::max<uint64_t>(local ? (1ull << 30) : (256ull << 20), ((est * 4) >> 20 << 20) + (64ull << 20));
}

// The namespace and its bulk-loaded tree (the load's counters go to their own Stats).
struct Loaded {
    uint64_t ns = 0;
    tree::TreeInfo info;
    double seconds = 0;
    uint64_t round_trips = 0;
};

Loaded load_index(const Options& o, const std::string& url, LocalPool* lpool) {
    Stats load_stats;
    set_stats(&load_stats);
    Loaded l;
    {
        Handle h = open_tree(o, url, lpool, 0);
        uint8_t tag[net::kNamespaceTagLen] = {0};
        std::snprintf(reinterpret_cast<char*>(tag), sizeof tag, "dex-ycsb pid %d", static_cast<int>(getpid()));
        l.ns = rpc_u64(h.mem->node(0), net::kOpNsCreate, tag, sizeof tag);
        h.tree = std::make_unique<tree::BTree>(*h.mem, 0, l.ns);
        logf("namespace %" PRIu64 " on %s; bulk loading %" PRIu64 " keys (fill %.2f)", l.ns, url.c_str(), o.keys,
             o.fill);
        auto l0 = Clock::now();
        tree::BTree::BulkLoader bl(*h.tree, o.fill);
        for (uint64_t r = 0; r < o.keys; r++) {
            bl.add(record_key(r, 0));
            if ((r + 1) % 2000000 == 0) logf("  loaded %" PRIu64 " keys", r + 1);
        }
        bl.finish();
        l.seconds = std::chrono::duration<double>(Clock::now() - l0).count();
        l.info = h.tree->info();
        logf("loaded in %.2f s: height %u, %" PRIu64 " leaves, %" PRIu64 " inner nodes, %.1f MiB", l.seconds,
             l.info.height, l.info.leaves, l.info.inner_nodes,
             static_cast<double>((l.info.leaves + l.info.inner_nodes) * kNodeSize) / (1 << 20));
        // h (and its socket) is closed here: nothing network-related crosses fork.
    }
    set_stats(nullptr);
    l.round_trips = load_stats.round_trips.load();
    return l;
}

// The node cache: one CacheRegion in MAP_SHARED memory made before fork (as
// PostgreSQL's main shared memory is), sized --cache-ratio x index size.
struct NodeCache {
    void* mem = nullptr;
    size_t mem_bytes = 0, bytes = 0;
    cache::CacheRegion* region = nullptr;
};

NodeCache make_node_cache(const Options& o, const tree::TreeInfo& info) {
    NodeCache c;
    if (o.mode != "inner-only" && o.mode != "dex") return c;
    c.bytes = static_cast<size_t>(o.cache_ratio * static_cast<double>((info.leaves + info.inner_nodes) * kNodeSize));
    c.mem_bytes = cache::CacheRegion::bytes_for(c.bytes);
    c.mem = mmap(nullptr, c.mem_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (c.mem == MAP_FAILED) throw std::runtime_error("mmap of the node cache region failed");
    cache::AdmissionPolicy pol;
    pol.cache_leaves = o.mode == "dex";
    pol.leaf_admission = o.leaf_admission;
    c.region = cache::CacheRegion::init(c.mem, c.mem_bytes, pol);
    logf("node cache: %u frames (%.1f MiB = %.3f x index), %s", c.region->frame_count(),
         static_cast<double>(c.bytes) / (1 << 20), o.cache_ratio,
         pol.cache_leaves ? "inner nodes + leaves with probability --leaf-admission" : "inner nodes only");
    return c;
}

void fork_workers(const Options& o, const Plan& plan, Shared& sh, const std::string& url, LocalPool* lpool,
                  uint64_t ns) {
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    for (int i = 0; i < o.workers; i++) {
        pid_t p = fork();
        if (p < 0) throw std::runtime_error("fork failed");
        if (p == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            signal(SIGINT, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            g_memnode_pid = -1;
            int rc = 0;
            try {
                run_worker(i, o, plan, sh, url, lpool, ns);
            } catch (const std::exception& e) {
                std::snprintf(sh.slots[i].error, sizeof sh.slots[i].error, "%s", e.what());
                sh.slots[i].failed = 1;
                rc = 1;
            }
            std::fflush(nullptr);
            _exit(rc);
        }
        g_workers.push_back(p);
    }
}

// The local buffer's access counters when the measured part began.
struct LocalBase {
    uint64_t reads = 0, writes = 0, atomics = 0, rpcs = 0;
};

// Start when every worker is connected (throws if one fails first), warm up
// if asked, then measure until --seconds passed (or every worker finished its
// --ops), a progress line a second; every counter starts from the measured part.
void drive_workers(const Options& o, Shared& sh, LocalPool* lpool, LocalBase& base) {
    auto wait_ready = Clock::now();
    while (sh.ctl->ready.load() < o.workers) {
        bool dead = false;
        for (pid_t p : g_workers)
            if (waitpid(p, nullptr, WNOHANG) == p) dead = true;
        if (dead || Clock::now() - wait_ready > std::chrono::seconds(60)) {
            for (pid_t p : g_workers) kill(p, SIGKILL);
            std::string err;
            for (int i = 0; i < o.workers; i++)
                if (sh.slots[i].failed) err += std::string(" worker ") + std::to_string(i) + ": " + sh.slots[i].error;
            throw std::runtime_error("workers failed to start:" + err);
        }
        usleep(1000);
    }
    auto restart_counters = [&] {
        sh.ctl->run_stats.reset();
        if (lpool) {
            auto& c = lpool->shared().counters;
            base = {c.reads.load(), c.writes.load(), c.atomics.load(), c.rpcs.load()};
        }
    };
    restart_counters();
    logf("running %s / %s / %s with %d workers for %s", o.workload.c_str(), o.dist.c_str(), o.mode.c_str(),
         o.workers,
         o.ops_per_worker ? (std::to_string(o.ops_per_worker) + " ops each").c_str()
                          : (jnum(o.seconds) + " s").c_str());
    sh.ctl->measuring.store(o.warmup > 0 ? 0 : 1);
    sh.ctl->start_ns = now_ns();
    sh.ctl->start.store(1, std::memory_order_release);
    if (o.warmup > 0) {
        // Run the workload unmeasured, then restart every counter: the timed
        // part sees a warm cache and a settled offloading policy.
        // (A worker that fails meanwhile is reported by the loop below.)
        auto until = Clock::now() + std::chrono::duration<double>(o.warmup);
        while (Clock::now() < until) usleep(20000);
        restart_counters();
        logf("  warm-up of %s s done", jnum(o.warmup).c_str());
        sh.ctl->start_ns = now_ns();
        sh.ctl->measuring.store(1, std::memory_order_release);
    }
    auto t_start = Clock::now();
    auto t_next = t_start + std::chrono::seconds(1);
    uint64_t last_ops = 0;
    std::vector<int> status(o.workers, -1);
    int alive = o.workers;
    while (alive > 0) {
        for (int i = 0; i < o.workers; i++) {
            if (status[i] != -1) continue;
            int st;
            if (waitpid(g_workers[i], &st, WNOHANG) == g_workers[i]) {
                status[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                alive--;
                if (status[i] != 0) sh.ctl->stop.store(1);  // one failure ends the run
            }
        }
        auto now = Clock::now();
        if (!o.ops_per_worker && now - t_start >= std::chrono::duration<double>(o.seconds)) sh.ctl->stop.store(1);
        if (now >= t_next) {
            uint64_t ops = 0;
            for (int i = 0; i < o.workers; i++) ops += sh.slots[i].ops_done.load(std::memory_order_relaxed);
            logf("  t=%.0fs ops=%" PRIu64 " (%.0f ops/s)", std::chrono::duration<double>(now - t_start).count(), ops,
                 static_cast<double>(ops - last_ops));
            last_ops = ops;
            t_next += std::chrono::seconds(1);
        }
        usleep(2000);
    }
    g_workers.clear();
    std::string errors;
    for (int i = 0; i < o.workers; i++)
        if (status[i] != 0)
            errors += "worker " + std::to_string(i) + " exit " + std::to_string(status[i]) + ": " +
                      (sh.slots[i].failed ? sh.slots[i].error : "(no message)") + "; ";
    if (!errors.empty()) throw std::runtime_error(errors);
}

// The workers' slots summed up.
struct Totals {
    std::unique_ptr<Histogram> all = std::make_unique<Histogram>();
    std::unique_ptr<Histogram[]> per = std::make_unique<Histogram[]>(kOpTypes);
    uint64_t by_type[kOpTypes] = {0};
    uint64_t not_found = 0, upd_missing = 0, ins_dup = 0, scan_short = 0;
    uint64_t ops = 0;
    double seconds = 0, throughput = 0;
};

void aggregate(const Options& o, const Shared& sh, Totals& t) {
    t.all->clear();
    for (int k = 0; k < kOpTypes; k++) t.per[k].clear();
    int64_t end_ns = sh.ctl->start_ns;
    for (int i = 0; i < o.workers; i++) {
        WorkerSlot& w = sh.slots[i];
        for (int k = 0; k < kOpTypes; k++) {
            t.by_type[k] += w.by_type[k];
            t.per[k].merge(w.hist[k]);
            t.all->merge(w.hist[k]);
        }
        t.not_found += w.lookup_not_found;
        t.upd_missing += w.update_missing;
        t.ins_dup += w.insert_duplicate;
        t.scan_short += w.scan_short;
        end_ns = std::max(end_ns, w.end_ns);
    }
    t.ops = t.all->n;
    t.seconds = static_cast<double>(end_ns - sh.ctl->start_ns) / 1e9;
    t.throughput = t.seconds > 0 ? static_cast<double>(t.ops) / t.seconds : 0;
}

// After the run (not counted): the tree's size, and with --verify its check
// and exact content; the namespace dropped.
struct After {
    tree::TreeInfo info;
    VerifyResult verify;
    uint64_t inserts = 0;
};

After inspect_after(const Options& o, const Shared& sh, const std::string& url, LocalPool* lpool, uint64_t ns,
                    const Permutation& ins_perm) {
    After a;
    a.inserts = sh.ctl->insert_seq.load();
    Handle h = open_tree(o, url, lpool, ns);
    a.info = h.tree->info();
    if (o.verify) {
        logf("verifying (check + full scan against the expected %" PRIu64 " entries)", o.keys + a.inserts);
        a.verify = verify(*h.tree, sh, o.keys, a.inserts, ins_perm);
        logf("verify %s: %" PRIu64 " entries, %" PRIu64 " missing, %" PRIu64 " unexpected %s",
             a.verify.ok ? "OK" : "FAILED", a.verify.entries, a.verify.missing, a.verify.unexpected,
             a.verify.first_problems.c_str());
    }
    if (o.mode != "local") rpc_u64(h.mem->node(0), net::kOpNsDrop, &ns, 8);
    return a;
}

// Everything a result records, for print_result.
struct Run {
    explicit Run(const Options& opts) : o(opts) {}
    const Options& o;
    Mix mix{};
    std::string url;
    uint64_t pool = 0;
    LocalPool* lpool = nullptr;
    LocalBase base;
    Loaded load;
    NodeCache cache;
    Totals totals;
    After after;
};

std::string config_json(const Run& r) {
    const Options& o = r.o;
    const bool local = o.mode == "local";
    return Obj()
        .str("argv", o.argv_line)
        .str("workload", o.workload)
        .str("mode", o.mode)
        .str("dist", o.dist)
        .num("theta", o.dist == "zipfian" ? o.theta : 0)
        .str("hot_keys", o.dist != "zipfian" ? "n/a" : (o.clustered ? "clustered" : "scrambled"))
        .u("keys", o.keys)
        .u("workers", static_cast<uint64_t>(o.workers))
        .num("seconds", o.ops_per_worker ? 0 : o.seconds)
        .num("warmup_seconds", o.warmup)
        .u("ops_per_worker", o.ops_per_worker)
        .num("cache_ratio", o.cache_ratio)
        .num("leaf_admission", o.mode == "dex" ? o.leaf_admission : 0.0)
        .num("fill", o.fill)
        .u("scan_length", static_cast<uint64_t>(o.scan_length))
        .u("seed", o.seed)
        .str("memnode", local ? "local://" : r.url)
        .b("spawned_memnode", !local && !o.spawn_path.empty())
        .u("memory_bytes", local || !o.spawn_path.empty() ? r.pool : 0)
        .u("memnode_threads", local || o.spawn_path.empty() ? 0 : static_cast<uint64_t>(o.memnode_threads))
        .raw("mix_percent", Obj().u("lookup", r.mix.lookup).u("update", r.mix.update).u("insert", r.mix.insert)
                                .u("scan", r.mix.scan).done())
        .str("key_scheme", "record r = entry (value 2r, TID (version, 1)), loaded with version 0; "
                           "inserts add odd values 2*P(j)+1, P a random permutation of [0,K)")
        .b("verify", o.verify)
        .str("host", host_name())
        .u("cores", static_cast<uint64_t>(sysconf(_SC_NPROCESSORS_ONLN)))
        .str("date", utc_now())
        .done();
}

std::string per_op_json(const Run& r, const Stats& st) {
    const uint64_t total = r.totals.ops;
    auto per_op = [&](const std::atomic<uint64_t>& c) { return total ? static_cast<double>(c.load()) / total : 0.0; };
    Obj po;
    po.b("counters_are_remote", r.o.mode != "local")
        .num("index_ops", per_op(st.index_ops))
        .num("remote_reads", per_op(st.remote_reads))
        .num("remote_writes", per_op(st.remote_writes))
        .num("remote_atomics", per_op(st.remote_atomics))
        .num("remote_rpcs", per_op(st.remote_rpcs))
        .num("offloads", per_op(st.offloads))
        .num("round_trips", per_op(st.round_trips))
        .num("bytes_read", per_op(st.bytes_read))
        .num("bytes_written", per_op(st.bytes_written))
        .num("restarts", per_op(st.restarts));
    if (r.lpool) {
        auto& c = r.lpool->shared().counters;
        auto d = [&](uint64_t now, uint64_t base) { return total ? static_cast<double>(now - base) / total : 0.0; };
        po.raw("local_accesses", Obj()
                                     .num("reads", d(c.reads.load(), r.base.reads))
                                     .num("writes", d(c.writes.load(), r.base.writes))
                                     .num("atomics", d(c.atomics.load(), r.base.atomics))
                                     .num("rpcs", d(c.rpcs.load(), r.base.rpcs))
                                     .done());
    }
    return po.done();
}

// The result as one JSON object on stdout.
void print_result(const Run& r, const Stats& st) {
    const Options& o = r.o;
    const Totals& t = r.totals;
    const uint64_t hits = st.cache_hits.load(), misses = st.cache_misses.load();
    const tree::TreeInfo &info0 = r.load.info, &info1 = r.after.info;
    auto nodes0 = info0.leaves + info0.inner_nodes, nodes1 = info1.leaves + info1.inner_nodes;
    Obj idx;
    idx.u("height", info0.height)
        .u("nodes_after_load", nodes0)
        .u("bytes_after_load", nodes0 * kNodeSize)
        .u("leaves_after_load", info0.leaves)
        .u("nodes_after_run", nodes1)
        .u("bytes_after_run", nodes1 * kNodeSize)
        .u("entries_after_run", info1.entries);
    Obj types;
    for (int k = 0; k < kOpTypes; k++) types.u(kOpNames[k], t.by_type[k]);
    Obj run;
    run.num("seconds", t.seconds)
        .u("ops", t.ops)
        .num("throughput_ops_per_sec", t.throughput)
        .raw("ops_by_type", types.done())
        .u("lookup_not_found", t.not_found)
        .u("update_missing_old_entry", t.upd_missing)
        .u("insert_duplicate", t.ins_dup)
        .u("scan_short", t.scan_short)
        .u("new_keys_inserted", r.after.inserts);
    Obj cache;
    cache.u("frames", r.cache.region ? r.cache.region->frame_count() : 0)
        .u("bytes", r.cache.bytes)
        .str("policy", o.mode == "dex" ? "inner + leaves p=0.1" : o.mode == "inner-only" ? "inner only" : "none")
        .u("hits", hits)
        .u("misses", misses)
        .num("hit_ratio", hits + misses ? double(hits) / double(hits + misses) : 0)
        .u("admissions", st.admissions.load())
        .u("evictions", st.evictions.load())
        .u("coolings", st.coolings.load());
    Obj lat;
    lat.raw("all", lat_json(*t.all));
    for (int k = 0; k < kOpTypes; k++)
        if (t.per[k].n) lat.raw(kOpNames[k], lat_json(t.per[k]));
    const VerifyResult& vr = r.after.verify;
    Obj ver;
    ver.b("ran", o.verify);
    if (o.verify)
        ver.b("ok", vr.ok).u("entries", vr.entries).u("expected", vr.expected).u("missing", vr.missing)
            .u("unexpected", vr.unexpected).str("problems", vr.first_problems).str("check_notes", vr.notes);
    const double load_s = r.load.seconds;
    Obj out;
    out.str("benchmark", "dex-ycsb")
        .raw("config", config_json(r))
        .raw("load", Obj().num("seconds", load_s).num("keys_per_sec", load_s > 0 ? o.keys / load_s : 0)
                          .num("remote_round_trips", static_cast<double>(r.load.round_trips)).done())
        .raw("index", idx.done())
        .raw("run", run.done())
        .raw("per_op", per_op_json(r, st))
        .raw("cache", cache.done())
        .raw("latency_us", lat.done())
        .raw("verify", ver.done());
    std::printf("%s\n", out.done().c_str());
    std::fflush(stdout);
}

int run(const Options& o) {
    Run r(o);
    workload_mix(o.workload, r.mix);
    const uint64_t K = o.keys;
    const bool local = o.mode == "local";
    r.pool = pool_bytes(o);

    Shared sh = map_shared(o.workers, K);
    std::unique_ptr<LocalPool> lpool;
    r.url = o.memnode;
    if (local) {
        lpool = std::make_unique<LocalPool>(r.pool);
        r.lpool = lpool.get();
        r.url = "local://";
        logf("mode local: shared local buffer of %" PRIu64 " MiB, no network", r.pool >> 20);
    } else if (!o.spawn_path.empty()) {
        r.url = spawn_memnode(o, r.pool);
        logf("spawned %s (pid %d, %" PRIu64 " MiB, %d threads) at %s", o.spawn_path.c_str(), g_memnode_pid,
             r.pool >> 20, o.memnode_threads, r.url.c_str());
    }

    // Zipfian constants once, here, before fork.
    std::unique_ptr<Zipfian> zipf;
    Permutation scramble(K, o.seed ^ 0x5ca1ab1eull), ins_perm(K, o.seed ^ 0x1a5e27ull);
    if (o.dist == "zipfian") {
        auto z0 = Clock::now();
        zipf = std::make_unique<Zipfian>(K, o.theta);
        logf("zipfian theta %.3f: zeta(%" PRIu64 ") = %.4f (%.2f s)", o.theta, K, zipf->zetan(),
             std::chrono::duration<double>(Clock::now() - z0).count());
    }

    r.load = load_index(o, r.url, r.lpool);
    r.cache = make_node_cache(o, r.load.info);
    Plan plan{r.mix, K, zipf.get(), o.clustered ? nullptr : &scramble, &ins_perm, r.cache.region};
    fork_workers(o, plan, sh, r.url, r.lpool, r.load.ns);
    drive_workers(o, sh, r.lpool, r.base);

    aggregate(o, sh, r.totals);
    const Stats& st = sh.ctl->run_stats;
    const uint64_t hits = st.cache_hits.load(), misses = st.cache_misses.load();
    logf("done: %" PRIu64 " ops in %.2f s = %.0f ops/s; %.2f remote reads/op, p50 %.1f us, p99 %.1f us",
         r.totals.ops, r.totals.seconds, r.totals.throughput,
         r.totals.ops ? static_cast<double>(st.remote_reads.load()) / r.totals.ops : 0.0,
         r.totals.all->percentile(0.5) / 1e3, r.totals.all->percentile(0.99) / 1e3);
    if (r.cache.region)
        logf("node cache: hit ratio %.4f (%" PRIu64 " hits, %" PRIu64 " misses), %" PRIu64 " admissions, %" PRIu64
             " evictions",
             hits + misses ? double(hits) / double(hits + misses) : 0.0, hits, misses, st.admissions.load(),
             st.evictions.load());

    r.after = inspect_after(o, sh, r.url, r.lpool, r.load.ns, ins_perm);
    print_result(r, st);
    munmap(sh.base, sh.bytes);
    if (r.cache.mem) munmap(r.cache.mem, r.cache.mem_bytes);
    return o.verify && !r.after.verify.ok ? kExitVerify : 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o = parse_args(argc, argv);
    int rc;
    try {
        rc = run(o);
    } catch (const Error& e) {
        std::fprintf(stderr, "dex-ycsb: error: %s%s%s\n", e.what(), e.hint().empty() ? "" : "\nHINT: ",
                     e.hint().c_str());
        rc = 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "dex-ycsb: error: %s\n", e.what());
        rc = 1;
    }
    for (pid_t p : g_workers) {
        kill(p, SIGKILL);
        waitpid(p, nullptr, 0);
    }
    kill_memnode();
    return rc;
}
