// The insert journal of byte-string trees through the C API (dex_capi.h
// "insert journal"), against a real dex-memnode process over TCP:
// dex_journal_create makes a byte-form journal for a DEX_LAYOUT_BYTES tree;
// dex_tree_insert_bytes journals an entry whose lsn is not durable, or
// answers DEX_ERR_NEED_WAL_FLUSH (changing nothing) when the lane is full;
// recovery reads the entries (dex_journal_read_bytes) and deletes the strays
// (dex_journal_finish_bytes); the fixed-key recovery functions refuse a byte
// journal; a byte-string tree with a fixed-form journal (an index built
// before byte entries were journaled) waits for durable WAL instead of failing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "capi/dex_capi.h"
#include "memnode_process.h"
#include "tree/journal.h"

namespace {

using dex::testing::MemnodeOptions;
using dex::testing::MemnodeProcess;
using Entry = std::string;

constexpr int kLaneSlots = static_cast<int>(dex::tree::kJournalByteLaneRecords);  // a new byte lane: 24

Entry entry(int i) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "key-%06d", i);
    return Entry(buf) + std::string("\x00\x00\x00\x02\x00\x03", 6);  // + a heap TID (2,3)
}
const uint8_t* u8(const Entry& e) { return reinterpret_cast<const uint8_t*>(e.data()); }
uint32_t len(const Entry& e) { return static_cast<uint32_t>(e.size()); }

struct BytesTree {
    MemnodeProcess node{MemnodeOptions{.port = 0, .die_with_parent = false, .quiet_stdout = false}};
    DexTree* t = nullptr;
    uint64_t ns = 0, inc = 0;
    DexError err{};
    BytesTree() {
        EXPECT_EQ(dex_configure(node.address().c_str(), "", 2000, 5000, &err), DEX_OK) << err.message;
        uint8_t tag[DEX_NS_TAG_LEN] = {};
        std::memcpy(tag, "jbytes", 6);
        EXPECT_EQ(dex_ns_create(0, tag, &ns, &inc, &err), DEX_OK) << err.message;
        t = open_bytes();
        EXPECT_EQ(dex_tree_init_empty(t, &err), DEX_OK) << err.message;
    }
    DexTree* open_bytes() {
        DexTree* h = nullptr;
        EXPECT_EQ(dex_tree_open(0, ns, inc, "jbidx", &h, &err), DEX_OK) << err.message;
        EXPECT_EQ(dex_tree_set_layout(h, DEX_LAYOUT_BYTES, &err), DEX_OK) << err.message;
        return h;
    }
    ~BytesTree() {
        dex_tree_close(t);
        dex_disconnect_all();
        dex_configure("", "", 0, 0, &err);
    }
    bool has(const Entry& e) {
        DexScan* s = nullptr;
        EXPECT_EQ(dex_scan_begin_bytes(t, u8(e), len(e), u8(e), len(e), 0, &s, &err), DEX_OK) << err.message;
        const DexBytes* out = nullptr;
        int n = 0;
        EXPECT_EQ(dex_scan_next_bytes(s, &out, &n, &err), DEX_OK) << err.message;
        dex_scan_end(s);
        return n == 1;
    }
    // The journal's entries and life.
    std::vector<Entry> read(uint64_t* life) {
        DexBytes* es = nullptr;
        int n = -1;
        EXPECT_EQ(dex_journal_read_bytes(t, &es, &n, life, &err), DEX_OK) << err.message;
        std::vector<Entry> v;
        for (int i = 0; i < n; i++) v.emplace_back(reinterpret_cast<const char*>(es[i].data), es[i].len);
        dex_free(es);
        return v;
    }
};

TEST(JournalBytesCApi, NeedWalFlushReadAndFinish) {
    BytesTree x;
    DexError& err = x.err;
    uint64_t root = 0, life = 0, removed = 0;
    ASSERT_EQ(dex_journal_create(x.t, 111, &root, &err), DEX_OK) << err.message;
    ASSERT_NE(root, 0u);
    ASSERT_EQ(dex_tree_set_journal(x.t, root, 5, &err), DEX_OK) << err.message;
    // The fixed-key functions refuse a byte journal (finish would clear it unchecked).
    DexKey* keys = nullptr;
    int nk = 0;
    EXPECT_EQ(dex_journal_read(x.t, &keys, &nk, &life, &err), DEX_ERR_INVALID);
    EXPECT_EQ(dex_journal_finish(x.t, 111, 222, nullptr, 0, &removed, &err), DEX_ERR_INVALID);

    // A durable insert records nothing; lsn 1..24 fill the lane (WAL durable up to 0).
    ASSERT_EQ(dex_tree_insert_bytes(x.t, u8(entry(9000)), len(entry(9000)), 50, 50, &err), DEX_OK) << err.message;
    for (int i = 0; i < kLaneSlots; i++)
        ASSERT_EQ(dex_tree_insert_bytes(x.t, u8(entry(2 * i)), len(entry(2 * i)), 1 + i, 0, &err), DEX_OK)
            << err.message;
    const Entry z = entry(5001);
    ASSERT_EQ(dex_tree_insert_bytes(x.t, u8(z), len(z), 500, 0, &err), DEX_ERR_NEED_WAL_FLUSH);
    EXPECT_EQ(err.need_lsn, uint64_t(kLaneSlots));  // the newest: frees the whole lane
    EXPECT_FALSE(x.has(z));
    ASSERT_EQ(dex_tree_insert_bytes(x.t, u8(z), len(z), 500, kLaneSlots, &err), DEX_OK) << err.message;
    EXPECT_TRUE(x.has(z));

    // Listed: z (the lane was replaced by a larger one after the flush), in memcmp order.
    std::vector<Entry> listed = x.read(&life);
    EXPECT_EQ(life, 111u);
    ASSERT_EQ(listed, std::vector<Entry>{z});
    // Journal three more, then recover: the first life check fails and changes nothing.
    for (int i : {7, 3, 11})
        ASSERT_EQ(dex_tree_insert_bytes(x.t, u8(entry(1000 + i)), len(entry(1000 + i)), 600 + i, 500, &err), DEX_OK)
            << err.message;
    listed = x.read(&life);
    ASSERT_EQ(listed, (std::vector<Entry>{entry(1003), entry(1007), entry(1011), z}));
    DexBytes one{u8(z), len(z)};
    EXPECT_EQ(dex_journal_finish_bytes(x.t, 999, 222, &one, 1, &removed, &err), DEX_ERR_INVALID);
    EXPECT_TRUE(x.has(z));
    EXPECT_EQ(x.read(&life).size(), 4u);
    // Strays in any order, one absent from the tree: two removed, the rest kept.
    const Entry absent = entry(7777);
    DexBytes strays[3] = {{u8(listed[3]), len(listed[3])}, {u8(absent), len(absent)}, {u8(listed[0]), len(listed[0])}};
    ASSERT_EQ(dex_journal_finish_bytes(x.t, 111, 222, strays, 3, &removed, &err), DEX_OK) << err.message;
    EXPECT_EQ(removed, 2u);
    EXPECT_FALSE(x.has(z));
    EXPECT_FALSE(x.has(entry(1003)));
    EXPECT_TRUE(x.has(entry(1007)));
    EXPECT_TRUE(x.has(entry(9000)));
    EXPECT_TRUE(x.read(&life).empty());
    EXPECT_EQ(life, 222u);
    EXPECT_EQ(dex_journal_finish_bytes(x.t, 111, 333, nullptr, 0, &removed, &err), DEX_ERR_INVALID);
    DexTreeInfo info{};
    ASSERT_EQ(dex_tree_check(x.t, &info, &err), DEX_OK) << err.message;
    EXPECT_EQ(info.entries, 1u + kLaneSlots + 1u + 3u - 2u);
}

// An index built before byte entries were journaled has a fixed-form journal
// (made through a fixed-layout handle here, as dex_journal_create did for
// every tree then): its inserts ask for durable WAL instead of failing, and
// its recovery lists nothing and still moves the life.
TEST(JournalBytesCApi, FixedFormJournalOfAnOldIndexAsksForWal) {
    BytesTree x;
    DexError& err = x.err;
    DexTree* old = nullptr;
    ASSERT_EQ(dex_tree_open(0, x.ns, x.inc, "jbidx", &old, &err), DEX_OK) << err.message;  // fixed layout
    uint64_t root = 0, life = 0, removed = 0;
    ASSERT_EQ(dex_journal_create(old, 111, &root, &err), DEX_OK) << err.message;
    dex_tree_close(old);
    ASSERT_EQ(dex_tree_set_journal(x.t, root, 5, &err), DEX_OK) << err.message;
    const Entry e = entry(1);
    ASSERT_EQ(dex_tree_insert_bytes(x.t, u8(e), len(e), 1000, 10, &err), DEX_ERR_NEED_WAL_FLUSH) << err.message;
    EXPECT_EQ(err.need_lsn, 1000u);
    EXPECT_FALSE(x.has(e));
    ASSERT_EQ(dex_tree_insert_bytes(x.t, u8(e), len(e), 1000, 1000, &err), DEX_OK) << err.message;
    EXPECT_TRUE(x.has(e));
    ASSERT_EQ(dex_tree_insert_bytes(x.t, u8(entry(2)), len(entry(2)), 0, 0, &err), DEX_OK) << err.message;  // unlogged
    EXPECT_TRUE(x.read(&life).empty());
    EXPECT_EQ(life, 111u);
    ASSERT_EQ(dex_journal_finish_bytes(x.t, 111, 222, nullptr, 0, &removed, &err), DEX_OK) << err.message;
    EXPECT_EQ(removed, 0u);
    x.read(&life);
    EXPECT_EQ(life, 222u);
    EXPECT_TRUE(x.has(e));
}

}  // namespace
