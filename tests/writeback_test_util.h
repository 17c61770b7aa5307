// Shared by the write-back tests: an in-process memory node whose round
// trips are counted, and a cache handle whose write-back callbacks are the
// real ones (write_back_node, write_back_nodes).
#pragma once
#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <set>
#include <vector>

#include "cache/cache.h"
#include "cache/region.h"
#include "tree/journal.h"
#include "tree/write_back_nodes.h"
#include "tree_test_util.h"

namespace dex::testing {

// Counts the round trips that reach the memory node (a batch is one).
class CountingTransport : public InProcForwarder {
public:
    using InProcForwarder::InProcForwarder;
    void read(uint64_t o, void* d, uint32_t l) override { trips++, InProcForwarder::read(o, d, l); }
    void write(uint64_t o, const void* s, uint32_t l) override { trips++, InProcForwarder::write(o, s, l); }
    uint64_t cas(uint64_t o, uint64_t e, uint64_t d) override { return trips++, InProcForwarder::cas(o, e, d); }
    void batch(RemoteOp* ops, size_t n) override {
        trips++;
        size_t writes = 0;
        for (size_t i = 0; i < n; i++) writes += ops[i].kind == RemoteOp::kWrite;
        const bool lose = writes >= 3 && lose_publish.exchange(false);  // (a split's publish)
        InProcForwarder::batch(ops, n);
        if (lose) throw Error(ErrorCode::kTimeout, "test: the answer to a split's publish batch is lost");
    }
    std::vector<uint8_t> rpc(net::Op op, const void* p, uint32_t l) override {
        trips++;
        const int lose = op == net::kOpOffloadSplitImage || op == net::kOpOffloadBytesSplitImage
                             ? lose_split_image.exchange(0)
                         : op == net::kOpOffloadDirtySplit || op == net::kOpOffloadBytesDirtySplit
                             ? lose_dirty_split.exchange(0)
                             : 0;
        if (lose == 2) throw Error(ErrorCode::kTimeout, "test: " + net::op_label(op) + " lost before it ran");
        std::vector<uint8_t> r = InProcForwarder::rpc(op, p, l);
        if (lose == 1) throw Error(ErrorCode::kTimeout, "test: the answer to " + net::op_label(op) + " is lost");
        if (op == net::kOpOffload && after_offload) after_offload();
        if (op == net::kOpOffload && r.size() >= sizeof(net::OffloadReply) + kNodeSize &&
            corrupt_offload_image.exchange(false))
            r[sizeof(net::OffloadReply) + offsetof(Node, tree_id)] ^= 0x5a;  // the answer's leaf image
        return r;
    }
    // Whether the node announces OFFLOAD_SPLIT_IMAGE (write-back splits on
    // the memory node); off: such leaves split one-sided.
    bool offload_split_image_allowed() override { return split_image && in_.offload_split_image_allowed(); }
    bool offload_bytes_split_image_allowed() override {
        return split_image && in_.offload_bytes_split_image_allowed();
    }
    // Whether it splits dirty leaves (OFFLOAD_DIRTY_SPLIT); off: one-sided.
    bool offload_dirty_split_allowed() override { return dirty_split && in_.offload_dirty_split_allowed(); }
    bool offload_bytes_dirty_split_allowed() override {
        return dirty_split && in_.offload_bytes_dirty_split_allowed();
    }
    // Whether it takes spare siblings with its splits (kHelloSplitSpare).
    bool split_spare_allowed() override { return split_spare && in_.split_spare_allowed(); }
    uint64_t trips = 0;
    bool split_image = false;
    bool split_spare = false;
    bool dirty_split = false;
    // The next OFFLOAD_(BYTES_)DIRTY_SPLIT: 1 runs but its answer is lost, 2 is lost before it runs.
    std::atomic<int> lose_dirty_split{0};
    // The next OFFLOAD_(BYTES_)SPLIT_IMAGE: 1 runs but its answer is lost, 2 is lost before it runs.
    std::atomic<int> lose_split_image{0};
    // The next batch of three writes or more (a one-sided split's publish) runs, its answer is lost.
    std::atomic<bool> lose_publish{false};
    // Runs after the memory node served an OFFLOAD, before its answer returns.
    std::function<void()> after_offload;
    // The next OFFLOAD answer carrying a leaf image comes back with a wrong tree id.
    std::atomic<bool> corrupt_offload_image{false};
};

// The durable WAL position a test sets (tree::set_durable_lsn_source): what
// keeps dirty entries out of remote memory (W6). DurableAt sets it for one
// test and takes the source away after; the test may move g_durable meanwhile.
inline std::atomic<uint64_t> g_durable{UINT64_MAX};
inline uint64_t test_durable_lsn() { return g_durable.load(); }
struct DurableAt {
    explicit DurableAt(uint64_t lsn) {
        g_durable = lsn;
        tree::set_durable_lsn_source(test_durable_lsn);
    }
    ~DurableAt() { tree::set_durable_lsn_source(nullptr); }
};

inline std::vector<EntryKey> all_of(const std::set<EntryKey>& m) { return {m.begin(), m.end()}; }

// Inserts n keys K(rng() % range, first_block + i, 1) into t and the model
// (a duplicate must be refused by both).
template <class Rng>
void insert_random(tree::BTree& t, std::set<EntryKey>& model, int n, uint64_t range, Rng& rng, uint32_t first_block = 0) {
    for (int i = 0; i < n; i++) {
        EntryKey k = K(static_cast<int64_t>(rng() % range), first_block + static_cast<uint32_t>(i), 1);
        ASSERT_EQ(t.insert(k), model.insert(k).second);
    }
}

// The change log (TreeOptions::log_changes) a write-back calls.
inline std::vector<GAddr>& logged_nodes() {
    static std::vector<GAddr> v;
    return v;
}
inline void log_nodes(const GAddr* a, size_t n) { logged_nodes().insert(logged_nodes().end(), a, a + n); }

// A cache handle's write-back callbacks: the real write_back_node /
// write_back_nodes through `mem` (node 0). With `wait_durable`, a frame
// whose LSN is past tree::durable_lsn() is not written (as the extension's
// callbacks refuse a frame whose heap WAL is not flushed).
inline void set_write_backs(cache::Cache& h, RemoteMemory& mem, cache::CacheRegion& R, bool wait_durable = false) {
    h.set_write_back([&mem, &R, wait_durable](uint32_t f, const Node& img) {
        if (wait_durable && R.header(f).lsn.load() > tree::durable_lsn()) return false;
        tree::TreeOptions o;
        tree::NodeIO io(mem, 0, o);
        tree::write_back_node(io, R.header(f).gaddr.load(), img, tree::Deadline(10000));
        return true;
    });
    h.set_write_back_many([&mem, &R, wait_durable](const uint32_t* f, Node* imgs, size_t n, bool* ok) {
        std::vector<GAddr> a;
        std::vector<Node*> p;
        std::vector<size_t> idx;
        for (size_t i = 0; i < n; i++) {
            ok[i] = false;
            if (wait_durable && R.header(f[i]).lsn.load() > tree::durable_lsn()) continue;
            a.push_back(R.header(f[i]).gaddr.load());
            p.push_back(&imgs[i]);
            idx.push_back(i);
        }
        std::vector<bool> d = tree::write_back_nodes(mem, 0, a, p);
        for (size_t j = 0; j < idx.size(); j++) ok[idx[j]] = d[j];
    });
}

struct WbFixture {
    std::unique_ptr<memnode::Engine> engine = make_engine(64ull << 20);
    CountingTransport* t = nullptr;
    std::unique_ptr<RemoteMemory> mem;
    Region reg{4096};
    cache::Cache handle{*reg.region, 5};
    uint64_t ns = 0;
    explicit WbFixture(uint32_t frames = 4096) : reg(frames) {
        std::vector<std::unique_ptr<Transport>> v;
        auto ct = std::make_unique<CountingTransport>(*engine);
        t = ct.get();
        v.push_back(std::move(ct));
        mem = std::make_unique<RemoteMemory>(std::move(v));
        ns = ns_create(mem->node(0));
        set_write_backs(handle, *mem, *reg.region);
    }
    // An empty tree in write-back mode over the cache (T: tree::BTree or tree::SlottedTree).
    template <class T = tree::BTree>
    std::unique_ptr<T> write_back_tree() {
        tree::TreeOptions o;
        o.cache = &handle;
        auto t = std::make_unique<T>(*mem, 0, ns, o);
        t->init_empty();
        t->set_write_back(true, [] { return true; });
        return t;
    }
    std::vector<uint32_t> dirty_frames() {
        std::vector<uint32_t> v;
        reg.region->for_each_frame([&](const cache::FrameInfo& i) {
            if (i.dirty && i.gaddr != kNullGAddr) v.push_back(i.frame);
        });
        return v;
    }
};

// Flush every dirty frame; then remote memory alone (a tree without the
// cache) holds exactly `model`.
inline void expect_flushed_remote_holds(WbFixture& x, const std::set<EntryKey>& model) {
    x.handle.flush_frames(x.dirty_frames());
    EXPECT_TRUE(x.dirty_frames().empty());
    tree::BTree remote_only(*x.mem, 0, x.ns);
    EXPECT_EQ(remote_only.check().entries, model.size());
    EXPECT_EQ(scan_all(remote_only, KMin(-(1 << 21)), KMax(1 << 30), false),
              std::vector<EntryKey>(model.begin(), model.end()));
}

}  // namespace dex::testing
