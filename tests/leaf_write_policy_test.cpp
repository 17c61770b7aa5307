// Single-leaf writes and the DEX 6.1 offloading decision per transport
// (src/README.md "Offloading", should_offload_leaf_write): over TCP every
// one-sided operation is a request to the memory node's CPU, so a cached
// leaf's write is always offloaded (one request instead of re-read, lock and
// publish), whatever the latency averages say; in-process (like RDMA) the
// decision stands and, with one-sided reads looking far cheaper, the write
// goes one-sided.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "cache/cache.h"
#include "cache/region.h"
#include "common/stats.h"
#include "memnode_process.h"
#include "transport/tcp_transport.h"
#include "tree/offload_policy.h"
#include "tree_test_util.h"

namespace dex::testing {
namespace {

class LeafWritePolicy : public ::testing::TestWithParam<std::string> {};

TEST_P(LeafWritePolicy, CachedLeafWriteOffloadedExactlyWhenOneSidedUsesTheNodeCpu) {
    const bool tcp = GetParam() == "tcp";
    std::unique_ptr<memnode::Engine> engine;
    std::unique_ptr<MemnodeProcess> proc;
    std::vector<std::unique_ptr<Transport>> ts;
    if (tcp) {
        proc = std::make_unique<MemnodeProcess>();
        ASSERT_TRUE(proc->up());
        ts.push_back(std::make_unique<TcpTransport>(proc->address(), opts()));
    } else {
        engine = make_engine(64 << 20);
        ts.push_back(std::make_unique<InProcTransport>(*engine));
    }
    RemoteMemory mem(std::move(ts));
    EXPECT_EQ(mem.node(0).one_sided_uses_node_cpu(), tcp);
    const uint64_t ns = ns_create(mem.node(0));
    const size_t frames = 4096;
    size_t bytes = cache::CacheRegion::bytes_for(frames * kNodeSize);
    std::unique_ptr<char[]> rmem(new char[bytes]);
    cache::AdmissionPolicy ap;
    ap.leaf_admission = 1.0;
    cache::Cache c(*cache::CacheRegion::init(rmem.get(), bytes, ap), 5);
    // Offloads look a million times dearer than reads, and no contrary draw:
    // the policy alone would always write one-sided.
    tree::OffloadPolicy::Params never;
    never.contrary = 0;
    tree::OffloadPolicy pol(never);
    pol.set_mode(tree::OffloadMode::kAuto);
    for (int i = 0; i < 50; i++) pol.record_offload(1e6), pol.record_remote_read(1);
    tree::TreeOptions o;
    o.cache = &c;
    o.offload = &pol;
    tree::BTree t(mem, 0, ns, o);
    {
        tree::BTree::BulkLoader bl(t, 0.7);
        for (int64_t i = 0; i < 20000; i += 2) bl.add(K(i, 1, 1));
        bl.finish();
    }
    for (int64_t i = 0; i < 20000; i += 2) ASSERT_TRUE(t.contains(K(i, 1, 1)));  // every leaf cached
    const uint64_t off0 = stats().offloads.load(), cas0 = stats().remote_atomics.load();
    const uint64_t dec0 = pol.decisions();
    int n = 0;
    for (int64_t k = 1; k < 20000; k += 200, n++) ASSERT_TRUE(t.insert(K(k, 1, 1))) << k;  // one per leaf, no split
    const uint64_t offloads = stats().offloads.load() - off0, cas = stats().remote_atomics.load() - cas0;
    if (tcp) {
        EXPECT_EQ(offloads, static_cast<uint64_t>(n));
        EXPECT_EQ(cas, 0u);
        EXPECT_EQ(pol.decisions() - dec0, 0u);  // not even asked
    } else {
        EXPECT_EQ(offloads, 0u);
        EXPECT_GE(cas, static_cast<uint64_t>(n));  // each locked its leaf one-sided
        EXPECT_EQ(pol.decisions() - dec0, static_cast<uint64_t>(n));
    }
    for (int64_t k = 1; k < 20000; k += 200) EXPECT_TRUE(t.contains(K(k, 1, 1))) << k;
    EXPECT_EQ(t.check().entries, 10000u + n);
}

INSTANTIATE_TEST_SUITE_P(Transports, LeafWritePolicy, ::testing::Values("inproc", "tcp"));

}  // namespace
}  // namespace dex::testing
