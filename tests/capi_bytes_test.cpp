// C API of byte-string trees (DEX_LAYOUT_BYTES) end to end against a real
// dex-memnode process over TCP: the layout switch and its errors, bulk load,
// single and batched inserts, prefix-bounded scans both ways, deletes,
// dead-entry removal by scan stamp, the bottom-up give-up and leaf read.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "capi/dex_capi.h"
#include "memnode_process.h"

namespace {

using dex::testing::MemnodeOptions;
using dex::testing::MemnodeProcess;
using Entry = std::string;

Entry entry(const char* prefix, int i) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%06d", prefix, i);
    return Entry(buf) + std::string("\x00\x00\x00\x01\x00\x01", 6);  // + a heap TID (1,1)
}
const uint8_t* u8(const Entry& e) { return reinterpret_cast<const uint8_t*>(e.data()); }
uint32_t len(const Entry& e) { return static_cast<uint32_t>(e.size()); }

// lo / hi nullptr: open ends.
std::vector<Entry> scan(DexTree* t, const Entry* lo, const Entry* hi, bool backward, DexLeafStamp* stamp = nullptr) {
    std::vector<Entry> out;
    DexError err;
    DexScan* s = nullptr;
    EXPECT_EQ(dex_scan_begin_bytes(t, lo ? u8(*lo) : nullptr, lo ? len(*lo) : 0, hi ? u8(*hi) : nullptr,
                                   hi ? len(*hi) : 0, backward ? 1 : 0, &s, &err),
              DEX_OK)
        << err.message;
    if (!s) return out;
    for (;;) {
        const DexBytes* e = nullptr;
        int n = -1;
        EXPECT_EQ(dex_scan_next_bytes(s, &e, &n, &err), DEX_OK) << err.message;
        if (n <= 0) break;
        if (stamp && out.empty()) dex_scan_stamp(s, stamp);
        for (int i = 0; i < n; i++) out.emplace_back(reinterpret_cast<const char*>(e[i].data), e[i].len);
    }
    dex_scan_end(s);
    return out;
}

TEST(CApiBytes, LayoutBulkInsertScanDeleteKill) {
    auto node = std::make_unique<MemnodeProcess>(MemnodeOptions{.port = 0, .die_with_parent = false, .quiet_stdout = false});
    DexError err;
    ASSERT_EQ(dex_configure(node->address().c_str(), "", 2000, 5000, &err), DEX_OK) << err.message;
    uint8_t tag[DEX_NS_TAG_LEN] = {};
    std::memcpy(tag, "capi-bytes", 10);
    uint64_t ns = 0, inc = 0;
    ASSERT_EQ(dex_ns_create(0, tag, &ns, &inc, &err), DEX_OK) << err.message;
    DexTree* t = nullptr;
    ASSERT_EQ(dex_tree_open(0, ns, inc, "idx_text", &t, &err), DEX_OK) << err.message;
    ASSERT_EQ(dex_tree_set_layout(t, 7, &err), DEX_ERR_INVALID);
    ASSERT_EQ(dex_tree_set_layout(t, DEX_LAYOUT_BYTES, &err), DEX_OK) << err.message;
    ASSERT_EQ(dex_tree_init_empty(t, &err), DEX_OK) << err.message;
    // The other layout's functions are refused, and the layout is fixed now.
    DexKey k{};
    k.cls = DEX_KEY_VALUE;
    EXPECT_EQ(dex_tree_insert(t, &k, 0, 0, &err), DEX_ERR_INVALID);
    EXPECT_NE(std::string(err.message).find("byte-string"), std::string::npos) << err.message;
    EXPECT_EQ(dex_tree_set_layout(t, DEX_LAYOUT_FIXED, &err), DEX_ERR_INVALID);

    std::set<Entry> model;
    DexBulk* b = nullptr;
    ASSERT_EQ(dex_bulk_begin(t, 0.9, &b, &err), DEX_OK) << err.message;
    for (int i = 0; i < 4000; i += 2) {
        Entry e = entry("alice.", i);
        ASSERT_EQ(dex_bulk_add_bytes(b, u8(e), len(e), &err), DEX_OK) << err.message;
        model.insert(e);
    }
    ASSERT_EQ(dex_bulk_finish(b, &err), DEX_OK) << err.message;
    for (int i = 1; i < 400; i += 2) {
        Entry e = entry("alice.", i);
        ASSERT_EQ(dex_tree_insert_bytes(t, u8(e), len(e), 0, 0, &err), DEX_OK) << err.message;
        model.insert(e);
    }
    std::vector<Entry> batch;
    std::vector<DexBytes> views;
    for (int i = 0; i < 300; i++) batch.push_back(entry("bob.", i));
    for (const Entry& e : batch) views.push_back(DexBytes{u8(e), len(e)});
    std::vector<uint64_t> lsns(batch.size(), 0);
    int done = -1;
    ASSERT_EQ(dex_tree_insert_batch_bytes(t, views.data(), lsns.data(), static_cast<int>(views.size()), 0, &done, &err),
              DEX_OK)
        << err.message;
    EXPECT_EQ(done, 300);
    model.insert(batch.begin(), batch.end());
    DexTreeInfo info{};
    ASSERT_EQ(dex_tree_check(t, &info, &err), DEX_OK) << err.message;
    EXPECT_EQ(info.entries, model.size());

    // Everything, both ways.
    EXPECT_EQ(scan(t, nullptr, nullptr, false), std::vector<Entry>(model.begin(), model.end()));
    EXPECT_EQ(scan(t, nullptr, nullptr, true), std::vector<Entry>(model.rbegin(), model.rend()));
    // Every entry beginning with "bob.": [P, P || 0xFF x 8].
    Entry lo = "bob.", hi = "bob." + std::string(8, '\xff');
    auto bobs = scan(t, &lo, &hi, false);
    EXPECT_EQ(bobs, batch);
    // A bound between entries: "alice.000100" .. "alice.000105" + 0xFF x 8.
    Entry l2 = "alice.000100", h2 = "alice.000105" + std::string(8, '\xff');
    auto six = scan(t, &l2, &h2, true);
    ASSERT_EQ(six.size(), 6u);
    EXPECT_EQ(six.front(), entry("alice.", 105));

    // Delete a sorted batch (one absent).
    std::vector<Entry> del = {entry("alice.", 2), entry("alice.", 3), entry("carol.", 1)};
    std::vector<DexBytes> dv;
    for (const Entry& e : del) dv.push_back(DexBytes{u8(e), len(e)});
    uint64_t deleted = 0;
    ASSERT_EQ(dex_tree_delete_bytes(t, dv.data(), 3, &deleted, &err), DEX_OK) << err.message;
    EXPECT_EQ(deleted, 2u);
    model.erase(del[0]);
    model.erase(del[1]);

    // Dead-entry removal at the version a scan read; a second try with the
    // same (now old) stamp removes nothing.
    DexLeafStamp stamp{};
    Entry l3 = "bob.", h3 = "bob.000000" + std::string(8, '\xff');
    auto first = scan(t, &l3, &h3, false, &stamp);
    ASSERT_EQ(first.size(), 1u);
    ASSERT_NE(stamp.leaf, 0u);
    DexBytes kv{u8(first[0]), len(first[0])};
    uint64_t removed = 0;
    ASSERT_EQ(dex_tree_kill_bytes(t, &stamp, &kv, 1, 0, 0, &removed, &err), DEX_OK) << err.message;
    EXPECT_EQ(removed, 1u);
    model.erase(first[0]);
    ASSERT_EQ(dex_tree_kill_bytes(t, &stamp, &kv, 1, 0, 0, &removed, &err), DEX_OK) << err.message;
    EXPECT_EQ(removed, 0u);

    // Bottom-up: inserting ascending "zed." entries fills the rightmost leaf
    // until one would split it: DEX_LEAF_FULL, nothing changed, and the leaf
    // can be read at that version.
    int rc = DEX_OK;
    DexLeafStamp full{};
    int n = 0;
    for (; n < 200 && rc == DEX_OK; n++) {
        Entry e = entry("zed.", n);
        rc = dex_tree_insert_nosplit_bytes(t, u8(e), len(e), 0, 0, &full, &err);
        if (rc == DEX_OK) model.insert(e);
    }
    ASSERT_EQ(rc, DEX_LEAF_FULL) << err.message;
    const DexBytes* leaf = nullptr;
    int m = 0;
    ASSERT_EQ(dex_tree_read_leaf_bytes(t, &full, &leaf, &m, &err), DEX_OK) << err.message;
    ASSERT_GT(m, 1);
    Entry last(reinterpret_cast<const char*>(leaf[m - 1].data), leaf[m - 1].len);
    EXPECT_EQ(last, *model.rbegin());

    ASSERT_EQ(dex_tree_check(t, &info, &err), DEX_OK) << err.message;
    EXPECT_EQ(info.entries, model.size());
    EXPECT_EQ(scan(t, nullptr, nullptr, false), std::vector<Entry>(model.begin(), model.end()));
    // Entries that cannot be stored.
    Entry too_long(DEX_SLOTTED_MAX_ENTRY_BYTES + 1, 'x');
    EXPECT_EQ(dex_tree_insert_bytes(t, u8(too_long), len(too_long), 0, 0, &err), DEX_ERR_INVALID);
    dex_tree_close(t);
}

}  // namespace
