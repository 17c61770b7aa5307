// C API end to end against a real dex-memnode process over TCP.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "capi/dex_capi.h"
#include "memnode_process.h"
#include "tree/key.h"

namespace {

using dex::testing::MemnodeOptions;
using dex::testing::MemnodeProcess;

// A dex-memnode process on 127.0.0.1:port (0: a free one); stdout inherited,
// no PR_SET_PDEATHSIG.
MemnodeOptions node_opts(int port = 0) { return {.port = port, .die_with_parent = false, .quiet_stdout = false}; }

DexKey key(int64_t v, uint32_t block, uint16_t off) {
    DexKey k{};
    k.value = dex::key_from_int64(v);
    k.block = block;
    k.offnum = off;
    k.cls = DEX_KEY_VALUE;
    return k;
}
DexKey bound(int cls) {
    DexKey k{};
    k.cls = static_cast<uint8_t>(cls);
    return k;
}

std::vector<DexKey> scan(DexTree* t, DexKey lo, DexKey hi, bool backward) {
    std::vector<DexKey> out;
    DexError err;
    DexScan* s = nullptr;
    EXPECT_EQ(dex_scan_begin(t, &lo, &hi, backward ? 1 : 0, &s, &err), DEX_OK) << err.message;
    if (!s) return out;
    for (;;) {
        const DexKey* e = nullptr;
        int n = -1;
        EXPECT_EQ(dex_scan_next(s, &e, &n, &err), DEX_OK) << err.message;
        if (n <= 0) break;
        out.insert(out.end(), e, e + n);
    }
    dex_scan_end(s);
    return out;
}

TEST(CApi, ConfigureParsing) {
    DexError err;
    EXPECT_EQ(dex_configure(" tcp://127.0.0.1:1 ,tcp://localhost:2", "", 1000, 2000, &err), DEX_OK) << err.message;
    EXPECT_EQ(dex_memnode_count(), 2);
    EXPECT_STREQ(dex_memnode_address(0), "tcp://127.0.0.1:1");
    EXPECT_STREQ(dex_memnode_address(1), "tcp://localhost:2");
    EXPECT_EQ(dex_memnode_address(2), nullptr);
    EXPECT_EQ(dex_configure("udp://10.0.0.1:7400", "", 1000, 2000, &err), DEX_ERR_INVALID);
    EXPECT_EQ(err.code, DEX_ERR_INVALID);
    EXPECT_NE(std::string(err.message).find("use tcp:// or rdma://"), std::string::npos)
        << err.message;
    EXPECT_EQ(dex_configure("tcp://nohostport", "", 1000, 2000, &err), DEX_ERR_INVALID);
    EXPECT_EQ(dex_configure("tcp://a:1,,tcp://b:2", "", 1000, 2000, &err), DEX_ERR_INVALID);
    // A failed configure leaves the previous configuration in place.
    EXPECT_EQ(dex_memnode_count(), 2);
    EXPECT_EQ(dex_configure("", "", 1000, 2000, &err), DEX_OK);
    EXPECT_EQ(dex_memnode_count(), 0);
    uint64_t inc = 0;
    EXPECT_EQ(dex_memnode_incarnation(0, &inc, &err), DEX_ERR_INVALID);
}

TEST(CApi, UnreachableIsAnErrorNotACrash) {
    DexError err;
    ASSERT_EQ(dex_configure("tcp://127.0.0.1:1", "", 300, 500, &err), DEX_OK);
    uint64_t inc = 0;
    int rc = dex_memnode_incarnation(0, &inc, &err);
    EXPECT_EQ(rc, DEX_ERR_UNREACHABLE) << err.message;
    EXPECT_EQ(err.code, rc);
    EXPECT_GT(std::strlen(err.message), 0u);
}

TEST(CApi, EndToEndAndLostMemory) {
    auto node = std::make_unique<MemnodeProcess>(node_opts());
    ASSERT_GT(node->port(), 0);
    DexError err;
    ASSERT_EQ(dex_configure(node->address().c_str(), "", 2000, 5000, &err), DEX_OK) << err.message;

    std::vector<uint64_t> shm(dex_stats_shmem_size() / 8 + 1);
    dex_stats_attach(shm.data(), 1);
    dex_stats_reset();

    uint8_t tag[DEX_NS_TAG_LEN] = {};
    std::memcpy(tag, "capi-test", 9);
    uint64_t ns = 0, inc = 0;
    ASSERT_EQ(dex_ns_create(0, tag, &ns, &inc, &err), DEX_OK) << err.message;
    EXPECT_NE(inc, 0u);

    DexTree* t = nullptr;
    ASSERT_EQ(dex_tree_open(0, ns, inc + 1, "idx_wrong", &t, &err), DEX_ERR_LOST_MEMORY);
    EXPECT_EQ(t, nullptr);
    ASSERT_EQ(dex_tree_open(0, ns, inc, "idx", &t, &err), DEX_OK) << err.message;
    ASSERT_EQ(dex_tree_init_empty(t, &err), DEX_OK) << err.message;

    // Bulk load even values, then insert odd ones.
    DexBulk* b = nullptr;
    ASSERT_EQ(dex_bulk_begin(t, 0.9, &b, &err), DEX_OK) << err.message;
    for (int i = 0; i < 3000; i++) {
        DexKey k = key(2 * i, 1, 1);
        ASSERT_EQ(dex_bulk_add(b, &k, &err), DEX_OK) << err.message;
    }
    ASSERT_EQ(dex_bulk_finish(b, &err), DEX_OK) << err.message;
    for (int i = 0; i < 500; i++) {
        DexKey k = key(2 * i + 1, 1, 1);
        ASSERT_EQ(dex_tree_insert(t, &k, 0, 0, &err), DEX_OK) << err.message;
    }
    DexTreeInfo info{};
    ASSERT_EQ(dex_tree_check(t, &info, &err), DEX_OK) << err.message;
    EXPECT_EQ(info.entries, 3500u);
    EXPECT_GE(info.height, 2u);

    auto fw = scan(t, key(10, 0, 0), key(20, 0xFFFFFFFF, 0xFFFF), false);
    ASSERT_EQ(fw.size(), 11u);
    EXPECT_EQ(dex::key_to_int64(fw.front().value), 10);
    auto bw = scan(t, bound(DEX_KEY_NEG_INF), bound(DEX_KEY_POS_INF), true);
    ASSERT_EQ(bw.size(), 3500u);
    EXPECT_EQ(dex::key_to_int64(bw.front().value), 5998);

    std::vector<DexKey> del = {key(1, 1, 1), key(2, 1, 1), key(3, 9, 9)};
    uint64_t deleted = 0;
    ASSERT_EQ(dex_tree_delete(t, del.data(), 3, &deleted, &err), DEX_OK) << err.message;
    EXPECT_EQ(deleted, 2u);
    ASSERT_EQ(dex_tree_info(t, &info, &err), DEX_OK) << err.message;
    EXPECT_EQ(info.entries, 3498u);

    DexStatsSnapshot st{};
    dex_stats_read(&st);
    EXPECT_GT(st.index_ops, 0u);
    EXPECT_GT(st.round_trips, 0u);

    DexNodeStats ns_stats{};
    ASSERT_EQ(dex_memnode_stats(0, &ns_stats, &err), DEX_OK) << err.message;
    EXPECT_EQ(ns_stats.incarnation, inc);
    EXPECT_GT(ns_stats.used_bytes, 0u);
    DexNsInfo* list = nullptr;
    int n = 0;
    ASSERT_EQ(dex_ns_list(0, &list, &n, &err), DEX_OK) << err.message;
    bool found = false;
    for (int i = 0; i < n; i++) found |= list[i].ns == ns && list[i].root == info.root;
    dex_free(list);
    EXPECT_TRUE(found);

    // Restart the memory node on the same port: the tree lost its memory.
    int port = node->port();
    node.reset();
    node = std::make_unique<MemnodeProcess>(node_opts(port));
    ASSERT_EQ(node->port(), port);
    DexKey k = key(77, 7, 7);
    int rc = dex_tree_insert(t, &k, 0, 0, &err);
    if (rc != DEX_ERR_LOST_MEMORY) rc = dex_tree_insert(t, &k, 0, 0, &err);  // first try may see the broken connection
    EXPECT_EQ(rc, DEX_ERR_LOST_MEMORY) << err.message;
    EXPECT_NE(std::string(err.message).find("index \"idx\" lost its remote memory"), std::string::npos)
        << err.message;
    EXPECT_STREQ(err.hint, "REINDEX INDEX idx");
    EXPECT_EQ(dex_tree_validate(t, &err), DEX_ERR_LOST_MEMORY);
    dex_tree_close(t);

    dex_stats_attach(nullptr, 0);
    dex_disconnect_all();
    dex_configure("", "", 0, 0, &err);
}

// The node cache through the C API: frames keyed by GAddr must never outlive
// the memory node incarnation or the namespace they were read from.
uint64_t census_frames(int node, int64_t tree_id = -1) {
    DexCacheCensusRow* rows = nullptr;
    int n = 0;
    DexError err;
    EXPECT_EQ(dex_cache_census(&rows, &n, &err), DEX_OK) << err.message;
    uint64_t total = 0;
    for (int i = 0; i < n; i++)
        if (rows[i].node == node && (tree_id < 0 || rows[i].tree_id == static_cast<uint32_t>(tree_id)))
            total += rows[i].frames;
    dex_free(rows);
    return total;
}

TEST(CApi, CacheForgetsRestartedMemnodeAndDroppedNamespaces) {
    auto node = std::make_unique<MemnodeProcess>(node_opts());
    ASSERT_GT(node->port(), 0);
    DexError err;
    ASSERT_EQ(dex_configure(node->address().c_str(), "", 2000, 5000, &err), DEX_OK) << err.message;
    std::vector<uint64_t> shm(dex_stats_shmem_size() / 8 + 1);
    dex_stats_attach(shm.data(), 1);
    const uint64_t cache_bytes = 4 << 20;
    std::vector<uint64_t> cmem(dex_cache_shmem_size(cache_bytes) / 8 + 1);
    ASSERT_EQ(dex_cache_attach(cmem.data(), cache_bytes, 1, &err), DEX_OK) << err.message;
    ASSERT_EQ(dex_cache_enabled(), 1);
    dex_cache_set_policy(1.0, 1);  // admit every leaf

    auto build = [&](uint64_t* ns, uint64_t* inc, int64_t base, uint32_t block, int count) {
        uint8_t tag[DEX_NS_TAG_LEN] = {};
        EXPECT_EQ(dex_ns_create(0, tag, ns, inc, &err), DEX_OK) << err.message;
        DexTree* t = nullptr;
        EXPECT_EQ(dex_tree_open(0, *ns, *inc, "idx", &t, &err), DEX_OK) << err.message;
        EXPECT_EQ(dex_tree_init_empty(t, &err), DEX_OK) << err.message;
        DexBulk* b = nullptr;
        EXPECT_EQ(dex_bulk_begin(t, 0.9, &b, &err), DEX_OK) << err.message;
        for (int i = 0; i < count; i++) {
            DexKey k = key(base + i, block, 1);
            EXPECT_EQ(dex_bulk_add(b, &k, &err), DEX_OK) << err.message;
        }
        EXPECT_EQ(dex_bulk_finish(b, &err), DEX_OK) << err.message;
        return t;
    };

    // First life: keys 0..2999 (block 1), warmed into the cache by scans.
    uint64_t ns1 = 0, inc1 = 0;
    DexTree* t1 = build(&ns1, &inc1, 0, 1, 3000);
    for (int i = 0; i < 3000; i += 7) {
        auto r = scan(t1, key(i, 0, 0), key(i, 0xFFFFFFFF, 0xFFFF), false);
        ASSERT_EQ(r.size(), 1u);
    }
    EXPECT_GT(census_frames(0, static_cast<int64_t>(static_cast<uint32_t>(ns1))), 40u);
    dex_tree_close(t1);

    // Restart: the same addresses and (likely) the same namespace id come back.
    int port = node->port();
    node.reset();
    node = std::make_unique<MemnodeProcess>(node_opts(port));
    ASSERT_EQ(node->port(), port);
    uint64_t ns2 = 0, inc2 = 0;
    uint8_t tag[DEX_NS_TAG_LEN] = {};
    int rc = dex_ns_create(0, tag, &ns2, &inc2, &err);
    if (rc != DEX_OK) rc = dex_ns_create(0, tag, &ns2, &inc2, &err);  // first try may see the broken connection
    ASSERT_EQ(rc, DEX_OK) << err.message;
    EXPECT_NE(inc2, inc1);
    EXPECT_EQ(census_frames(0), 0u) << "frames of the previous incarnation survived";
    ASSERT_EQ(dex_ns_drop(0, ns2, nullptr, &err), DEX_OK) << err.message;

    // Second life: other keys in what is (likely) the same tree id and memory.
    uint64_t ns3 = 0, inc3 = 0;
    DexTree* t3 = build(&ns3, &inc3, 100000, 2, 2000);
    EXPECT_EQ(inc3, inc2);
    for (int i = 0; i < 300; i++) {
        DexKey k = key(100000 + 2000 + i, 2, 1);
        ASSERT_EQ(dex_tree_insert(t3, &k, 0, 0, &err), DEX_OK) << err.message;
    }
    for (int pass = 0; pass < 2; pass++) {
        auto all = scan(t3, bound(DEX_KEY_NEG_INF), bound(DEX_KEY_POS_INF), false);
        ASSERT_EQ(all.size(), 2300u);
        for (size_t i = 0; i < all.size(); i++) {
            EXPECT_EQ(dex::key_to_int64(all[i].value), static_cast<int64_t>(100000 + i));
            EXPECT_EQ(all[i].block, 2u);
        }
        for (int i = 0; i < 3000; i += 97) EXPECT_TRUE(scan(t3, key(i, 0, 0), key(i, 0xFFFFFFFF, 0xFFFF), false).empty());
    }
    DexTreeInfo info{};
    ASSERT_EQ(dex_tree_check(t3, &info, &err), DEX_OK) << err.message;
    EXPECT_EQ(info.entries, 2300u);
    uint32_t tid3 = static_cast<uint32_t>(ns3);
    EXPECT_GT(census_frames(0, tid3), 0u);
    DexStatsSnapshot st{};
    dex_stats_read(&st);
    EXPECT_GT(st.cache_hits, 0u);
    EXPECT_GT(st.admissions, 0u);
    dex_tree_close(t3);

    // Dropping the namespace drops its frames.
    ASSERT_EQ(dex_ns_drop(0, ns3, nullptr, &err), DEX_OK) << err.message;
    EXPECT_EQ(census_frames(0, tid3), 0u);

    dex_cache_detach();
    ASSERT_EQ(dex_cache_attach(nullptr, 0, 0, &err), DEX_OK);
    EXPECT_EQ(dex_cache_enabled(), 0);
    dex_stats_attach(nullptr, 0);
    dex_disconnect_all();
    dex_configure("", "", 0, 0, &err);
}

// dex_tree_insert_batch against a real dex-memnode over TCP, with a node
// cache and offloading on: a batch of 256 costs a round trip or two, the
// journal's prefix rule comes back as DEX_ERR_NEED_WAL_FLUSH with *done and
// need_lsn, and with offloading off the same call inserts one at a time.
TEST(CApi, InsertBatchOverTcp) {
    MemnodeProcess node(node_opts());
    ASSERT_GT(node.port(), 0);
    DexError err;
    ASSERT_EQ(dex_configure(node.address().c_str(), "", 2000, 5000, &err), DEX_OK) << err.message;
    std::vector<uint64_t> shm(dex_stats_shmem_size() / 8 + 1);
    dex_stats_attach(shm.data(), 1);
    const uint64_t cache_bytes = 4 << 20;
    std::vector<uint64_t> cmem(dex_cache_shmem_size(cache_bytes) / 8 + 1);
    ASSERT_EQ(dex_cache_attach(cmem.data(), cache_bytes, 1, &err), DEX_OK) << err.message;
    dex_cache_set_policy(0.1, 1);
    dex_set_offload_mode(DEX_OFFLOAD_ON);

    uint8_t tag[DEX_NS_TAG_LEN] = {};
    uint64_t ns = 0, inc = 0;
    ASSERT_EQ(dex_ns_create(0, tag, &ns, &inc, &err), DEX_OK) << err.message;
    DexTree* t = nullptr;
    ASSERT_EQ(dex_tree_open(0, ns, inc, "idx", &t, &err), DEX_OK) << err.message;
    ASSERT_EQ(dex_tree_init_empty(t, &err), DEX_OK) << err.message;
    DexBulk* b = nullptr;
    ASSERT_EQ(dex_bulk_begin(t, 0.5, &b, &err), DEX_OK) << err.message;
    for (int i = 0; i < 20000; i++) {
        DexKey k = key(4 * i, 1, 1);  // multiples of 4; the batches add 4i+1, 4i+2, 4i+3
        ASSERT_EQ(dex_bulk_add(b, &k, &err), DEX_OK) << err.message;
    }
    ASSERT_EQ(dex_bulk_finish(b, &err), DEX_OK) << err.message;

    auto batch = [&](int64_t offset, int n, uint64_t lsn, uint64_t durable, int* done) {
        std::vector<DexKey> keys;
        std::vector<uint64_t> lsns;
        for (int i = 0; i < n; i++) {
            keys.push_back(key(4 * (i * 73 % 20000) + offset, 1, 1));
            lsns.push_back(lsn ? lsn + i : 0);
        }
        std::sort(keys.begin(), keys.end(), [](const DexKey& x, const DexKey& y) { return x.value < y.value; });
        return dex_tree_insert_batch(t, keys.data(), lsns.data(), n, durable, done, &err);
    };
    DexStatsSnapshot s0{}, s1{};
    int done = -1;
    ASSERT_EQ(batch(1, 256, 0, 0, &done), DEX_OK) << err.message;  // warms the inner nodes
    EXPECT_EQ(done, 256);
    dex_stats_read(&s0);
    ASSERT_EQ(batch(2, 256, 0, 0, &done), DEX_OK) << err.message;
    dex_stats_read(&s1);
    EXPECT_EQ(done, 256);
    EXPECT_EQ(s1.batched_inserts - s0.batched_inserts, 256u);
    EXPECT_LE(s1.round_trips - s0.round_trips, 2u);
    std::printf("[ batch ] 256 entries over TCP: %llu round trips\n",
                static_cast<unsigned long long>(s1.round_trips - s0.round_trips));

    // Journaled (WAL not durable): one lane holds 170 records.
    uint64_t root = 0;
    ASSERT_EQ(dex_journal_create(t, 9, &root, &err), DEX_OK) << err.message;
    ASSERT_EQ(dex_tree_set_journal(t, root, 4, &err), DEX_OK) << err.message;
    ASSERT_EQ(batch(3, 256, 1000, 10, &done), DEX_ERR_NEED_WAL_FLUSH) << err.message;
    EXPECT_EQ(done, 170);
    EXPECT_GE(err.need_lsn, 1000u + 255);
    const uint64_t need = err.need_lsn;
    DexKey* rec = nullptr;
    int nrec = 0;
    ASSERT_EQ(dex_journal_read(t, &rec, &nrec, nullptr, &err), DEX_OK) << err.message;
    EXPECT_EQ(nrec, 170);
    dex_free(rec);
    {  // the rest: entries 170.. of the same sorted batch, now durable
        std::vector<DexKey> keys;
        for (int i = 0; i < 256; i++) keys.push_back(key(4 * (i * 73 % 20000) + 3, 1, 1));
        std::sort(keys.begin(), keys.end(), [](const DexKey& x, const DexKey& y) { return x.value < y.value; });
        std::vector<uint64_t> lsns(86, 2000);
        ASSERT_EQ(dex_tree_insert_batch(t, keys.data() + 170, lsns.data(), 86, need, &done, &err), DEX_OK)
            << err.message;
        EXPECT_EQ(done, 86);
    }

    dex_set_offload_mode(DEX_OFFLOAD_OFF);  // one at a time, same result
    dex_stats_read(&s0);
    ASSERT_EQ(dex_tree_set_journal(t, 0, 0, &err), DEX_OK) << err.message;
    ASSERT_EQ(batch(1, 300, 0, 0, &done), DEX_OK) << err.message;  // the first 256 are there already
    dex_stats_read(&s1);
    EXPECT_EQ(done, 300);
    EXPECT_EQ(s1.batched_inserts, s0.batched_inserts);
    EXPECT_GT(s1.round_trips - s0.round_trips, 300u);

    DexTreeInfo info{};
    ASSERT_EQ(dex_tree_check(t, &info, &err), DEX_OK) << err.message;
    EXPECT_EQ(info.entries, 20000u + 3 * 256 + 44);
    auto all = scan(t, bound(DEX_KEY_NEG_INF), bound(DEX_KEY_POS_INF), false);
    EXPECT_EQ(all.size(), info.entries);

    dex_tree_close(t);
    ASSERT_EQ(dex_ns_drop(0, ns, nullptr, &err), DEX_OK) << err.message;
    dex_set_offload_mode(DEX_OFFLOAD_AUTO);
    dex_cache_detach();
    ASSERT_EQ(dex_cache_attach(nullptr, 0, 0, &err), DEX_OK);
    dex_stats_attach(nullptr, 0);
    dex_disconnect_all();
    dex_configure("", "", 0, 0, &err);
}

}  // namespace
