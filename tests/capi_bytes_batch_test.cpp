// A byte-string tree's batched inserts through the C API against a real
// dex-memnode over TCP (OFFLOAD_BYTES_BATCH in a TCP frame; the in-process
// cases are tests/insert_batch_bytes_test.cpp): a warm batch of 256 entries
// costs a round trip or two, journaled entries stop at the byte lane's
// first 24 slots with NEED_WAL_FLUSH and nothing after them changed, and
// with offloading off the same batch goes one entry at a time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "capi/dex_capi.h"
#include "memnode_process.h"

namespace {

using dex::testing::MemnodeOptions;
using dex::testing::MemnodeProcess;
using Entry = std::string;

Entry entry(int i) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "text-key-%08d", i);
    return Entry(buf) + std::string("\x00\x00\x00\x01\x00\x01", 6);  // + a heap TID (1,1)
}

TEST(CApiBytes, InsertBatchOverTcp) {
    MemnodeProcess node(MemnodeOptions{.port = 0, .die_with_parent = false, .quiet_stdout = false});
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
    ASSERT_EQ(dex_tree_open(0, ns, inc, "idx_text", &t, &err), DEX_OK) << err.message;
    ASSERT_EQ(dex_tree_set_layout(t, DEX_LAYOUT_BYTES, &err), DEX_OK) << err.message;
    ASSERT_EQ(dex_tree_init_empty(t, &err), DEX_OK) << err.message;
    DexBulk* b = nullptr;
    ASSERT_EQ(dex_bulk_begin(t, 0.5, &b, &err), DEX_OK) << err.message;
    for (int i = 0; i < 20000; i++) {
        Entry e = entry(4 * i);  // multiples of 4; the batches add 4i+1, 4i+2, 4i+3
        ASSERT_EQ(dex_bulk_add_bytes(b, reinterpret_cast<const uint8_t*>(e.data()), static_cast<uint32_t>(e.size()),
                                     &err),
                  DEX_OK)
            << err.message;
    }
    ASSERT_EQ(dex_bulk_finish(b, &err), DEX_OK) << err.message;

    std::vector<Entry> keys;
    auto batch = [&](int offset, int from, int n, uint64_t lsn, uint64_t durable, int* done) {
        keys.clear();
        for (int i = 0; i < 256; i++) keys.push_back(entry(4 * (i * 73 % 20000) + offset));
        std::sort(keys.begin(), keys.end());
        std::vector<DexBytes> v;
        std::vector<uint64_t> lsns;
        for (int i = from; i < from + n; i++) {
            v.push_back(DexBytes{reinterpret_cast<const uint8_t*>(keys[i].data()), static_cast<uint32_t>(keys[i].size())});
            lsns.push_back(lsn ? lsn + i : 0);
        }
        return dex_tree_insert_batch_bytes(t, v.data(), lsns.data(), n, durable, done, &err);
    };
    DexStatsSnapshot s0{}, s1{};
    int done = -1;
    ASSERT_EQ(batch(1, 0, 256, 0, 0, &done), DEX_OK) << err.message;  // warms the inner nodes
    EXPECT_EQ(done, 256);
    dex_stats_read(&s0);
    ASSERT_EQ(batch(2, 0, 256, 0, 0, &done), DEX_OK) << err.message;
    dex_stats_read(&s1);
    EXPECT_EQ(done, 256);
    EXPECT_EQ(s1.batched_inserts - s0.batched_inserts, 256u);
    EXPECT_EQ(s1.offloads - s0.offloads, 256u);
    EXPECT_LE(s1.round_trips - s0.round_trips, 2u);
    std::printf("[ batch ] 256 byte entries over TCP: %llu round trips\n",
                static_cast<unsigned long long>(s1.round_trips - s0.round_trips));

    // Journaled (WAL not durable): a new byte lane holds 24 records.
    uint64_t root = 0;
    ASSERT_EQ(dex_journal_create(t, 9, &root, &err), DEX_OK) << err.message;
    ASSERT_EQ(dex_tree_set_journal(t, root, 4, &err), DEX_OK) << err.message;
    ASSERT_EQ(batch(3, 0, 256, 1000, 10, &done), DEX_ERR_NEED_WAL_FLUSH) << err.message;
    EXPECT_EQ(done, 24);
    EXPECT_GE(err.need_lsn, 1000u + 255);
    const uint64_t need = err.need_lsn;
    {  // the memory node wrote each of the prefix's records (they travelled in the batch)
        DexBytes* rec = nullptr;
        int nrec = 0;
        ASSERT_EQ(dex_journal_read_bytes(t, &rec, &nrec, nullptr, &err), DEX_OK) << err.message;
        std::vector<Entry> listed;
        for (int i = 0; i < nrec; i++) listed.emplace_back(reinterpret_cast<const char*>(rec[i].data), rec[i].len);
        dex_free(rec);
        EXPECT_EQ(listed, std::vector<Entry>(keys.begin(), keys.begin() + 24));
    }
    DexTreeInfo info{};
    ASSERT_EQ(dex_tree_check(t, &info, &err), DEX_OK) << err.message;
    EXPECT_EQ(info.entries, 20000u + 2 * 256 + 24) << "nothing after the journaled prefix";
    ASSERT_EQ(batch(3, 24, 232, 1000, need, &done), DEX_OK) << err.message;  // now durable
    EXPECT_EQ(done, 232);

    dex_set_offload_mode(DEX_OFFLOAD_OFF);  // one at a time, same result
    ASSERT_EQ(dex_tree_set_journal(t, 0, 0, &err), DEX_OK) << err.message;
    dex_stats_read(&s0);
    ASSERT_EQ(batch(1, 0, 256, 0, 0, &done), DEX_OK) << err.message;  // there already
    ASSERT_EQ(batch(0, 0, 256, 0, 0, &done), DEX_OK) << err.message;  // there already
    dex_stats_read(&s1);
    EXPECT_EQ(done, 256);
    EXPECT_EQ(s1.batched_inserts, s0.batched_inserts);
    EXPECT_GT(s1.round_trips - s0.round_trips, 256u);

    ASSERT_EQ(dex_tree_check(t, &info, &err), DEX_OK) << err.message;
    EXPECT_EQ(info.entries, 20000u + 3 * 256);

    dex_tree_close(t);
    ASSERT_EQ(dex_ns_drop(0, ns, nullptr, &err), DEX_OK) << err.message;
    dex_set_offload_mode(DEX_OFFLOAD_AUTO);
    dex_cache_detach();
    ASSERT_EQ(dex_cache_attach(nullptr, 0, 0, &err), DEX_OK);
    dex_stats_attach(nullptr, 0);
    dex_disconnect_all();
}

}  // namespace
