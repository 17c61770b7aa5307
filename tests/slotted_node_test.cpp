// Slotted nodes (tree/slotted_node.h): every operation against a reference
// std::set of byte strings, the split bound of node_capacity.h with the
// longest entries and fences, separators, checksums and torn images.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "tree/slotted_node.h"

namespace {

using namespace dex::tree::slotted;
using dex::GAddr;
using dex::kNodeSize;

std::string random_key(std::mt19937_64& rng, size_t max_len) {
    // Few distinct bytes and short lengths: many shared prefixes and proper prefixes.
    std::uniform_int_distribution<size_t> len(1, max_len);
    std::uniform_int_distribution<int> byte(0, 3);
    std::string s(len(rng), '\0');
    for (char& c : s) c = static_cast<char>(byte(rng) * 85);  // 0x00, 0x55, 0xAA, 0xFF
    return s;
}

std::vector<std::string> keys_of(const SNode& n) {
    std::vector<std::string> out;
    for (size_t i = 0; i < n.count; i++) out.emplace_back(key(n, i));
    return out;
}

// What every image must satisfy: valid layout, sorted strictly, inside its fences.
void expect_sane(const SNode& n) {
    ASSERT_TRUE(layout_valid(n));
    for (size_t i = 0; i < n.count; i++) {
        EXPECT_TRUE(covers(n, key(n, i))) << "entry " << i << " outside its fences";
        if (i > 0) {
            EXPECT_LT(compare(key(n, i - 1), key(n, i)), 0) << "entries out of order at " << i;
        }
    }
    size_t referenced = n.low_len + (high_is_inf(n) ? 0 : n.high_len);
    for (size_t i = 0; i < n.count; i++) referenced += key(n, i).size();
    EXPECT_EQ(referenced + n.garbage, kNodeSize - n.heap_top) << "heap bytes unaccounted for";
}

TEST(SlottedNode, ComparesAsMemcmpWithProperPrefixFirst) {
    EXPECT_LT(compare("", std::string(1, '\0')), 0);
    EXPECT_LT(compare("ab", "abc"), 0);
    EXPECT_LT(compare(std::string("a\x7f"), std::string("a\x80")), 0);  // unsigned bytes
    EXPECT_LT(compare(std::string("a\xff"), std::string("b")), 0);
    EXPECT_EQ(compare("abc", "abc"), 0);
    EXPECT_GT(compare(std::string(1, '\xff'), "\x01\x02"), 0);
}

TEST(SlottedNode, LeafInsertsAndErasesMatchAReferenceSet) {
    std::mt19937_64 rng(7);
    SNode n;
    init(n, 42, 0);
    std::set<std::string> ref;
    size_t refused = 0, compactions_needed = 0;
    for (int step = 0; step < 20000; step++) {
        std::string k = random_key(rng, 24);
        if (rng() % 3 == 0 && !ref.empty()) {  // erase an existing entry
            auto it = ref.begin();
            std::advance(it, rng() % ref.size());
            size_t pos = lower_bound(n, *it);
            ASSERT_LT(pos, n.count);
            ASSERT_EQ(key(n, pos), *it);
            erase(n, pos);
            ref.erase(it);
        } else if (!ref.count(k)) {
            size_t pos = lower_bound(n, k);
            bool contiguous_short = n.heap_top - (kHeaderBytes + (n.count + 1) * kLeafSlotBytes) < k.size();
            bool fits = free_bytes(n) >= entry_cost(n, k.size());
            ASSERT_EQ(insert_leaf(n, pos, k), fits) << "insert must succeed exactly when the bytes are free";
            if (fits) {
                ref.insert(k);
                compactions_needed += contiguous_short;
            } else {
                refused++;
            }
        }
        expect_sane(n);
        ASSERT_EQ(keys_of(n), std::vector<std::string>(ref.begin(), ref.end()));
    }
    EXPECT_GT(refused, 100u) << "the node never filled: the test did not reach its limits";
    EXPECT_GT(compactions_needed, 10u) << "no insert needed a compaction: fragmentation untested";
}

TEST(SlottedNode, SealedImageValidatesAndAnyChangedByteIsCaught) {
    std::mt19937_64 rng(11);
    SNode n;
    init(n, 7, 0);
    ASSERT_TRUE(set_fences(n, "b", "y", false));
    for (int i = 0; i < 30; i++) {
        std::string k = "c" + random_key(rng, 10);
        std::vector<std::string> have = keys_of(n);
        if (!std::binary_search(have.begin(), have.end(), k)) insert_leaf(n, lower_bound(n, k), k);
    }
    seal(n, 1234);
    ASSERT_TRUE(snapshot_valid(n));
    ASSERT_GT(n.count, 20u);
    const size_t slot_end = kHeaderBytes + n.count * kLeafSlotBytes;
    for (size_t off = 16; off < kNodeSize; off++) {
        if (off >= slot_end && off < n.heap_top) continue;  // free space carries nothing
        SNode t = n;
        reinterpret_cast<uint8_t*>(&t)[off] ^= 0x10;
        EXPECT_FALSE(snapshot_valid(t)) << "a flipped bit at byte " << off << " went unnoticed";
    }
    SNode locked = n;
    locked.lock |= dex::kLockBit;
    EXPECT_FALSE(snapshot_valid(locked));
}

TEST(SlottedNode, GarbageImagesAreRejectedWithoutReadingOutOfBounds) {
    // A torn read can produce any header: layout_valid must bound every piece
    // before the checksum reads it. (Out-of-bounds reads would show under
    // ASan/valgrind; here every accepted layout is re-checked by hand.)
    std::mt19937_64 rng(3);
    size_t accepted = 0;
    for (int round = 0; round < 200000; round++) {
        SNode n;
        auto* b = reinterpret_cast<uint8_t*>(&n);
        for (size_t i = 0; i < sizeof(SNode); i++) b[i] = static_cast<uint8_t>(rng());
        n.flags |= kSlotted;
        n.level = static_cast<uint8_t>(rng() % 3);
        n.count = static_cast<uint16_t>(rng() % 8);
        n.heap_top = static_cast<uint16_t>(kNodeSize - rng() % 400);
        // Offsets near the heap and lengths near the limit, so that some
        // images pass and the bounds are tested at their edges.
        auto near_heap = [&] { return static_cast<uint16_t>(n.heap_top - 16 + rng() % (kNodeSize - n.heap_top + 32)); };
        auto some_len = [&] { return static_cast<uint16_t>(rng() % 64 == 0 ? rng() % 200 : rng() % 24); };
        n.garbage = static_cast<uint16_t>(rng() % (kNodeSize - n.heap_top + 16));
        n.low_off = near_heap(), n.low_len = some_len();
        n.high_off = near_heap(), n.high_len = some_len();
        for (size_t i = 0; i < n.count; i++) {
            if (n.level == 0)
                const_cast<LeafSlot*>(leaf_slots(n))[i] = LeafSlot{near_heap(), some_len()};
            else
                const_cast<InnerSlot*>(inner_slots(n))[i] = InnerSlot{GAddr(rng()), near_heap(), some_len(), 0};
        }
        if (!layout_valid(n)) continue;
        accepted++;
        ASSERT_LE(kHeaderBytes + n.count * n.slot_bytes(), n.heap_top);
        for (size_t i = 0; i < n.count; i++) {
            Bytes k = key(n, i);
            ASSERT_GE(reinterpret_cast<const uint8_t*>(k.data()), b + n.heap_top);
            ASSERT_LE(reinterpret_cast<const uint8_t*>(k.data()) + k.size(), b + kNodeSize);
        }
        (void)checksum(n);
        EXPECT_FALSE(snapshot_valid(n));  // random bytes never carry a matching checksum
    }
    EXPECT_GT(accepted, 1000u) << "too few images passed: the bounds were not exercised";
}

// Fill a node of `level` with entries of exactly `len` bytes until it refuses,
// then split with one more: both halves must take everything (the bound of
// node_capacity.h), in order, with the separator between them.
void split_full_node(uint8_t level, size_t len, size_t fence_len, std::mt19937_64& rng) {
    SNode n;
    init(n, 9, level);
    // fence_len 0: the widest node, -inf .. +inf.
    std::string lo(fence_len, '\x01'), hi(fence_len, '\xfe');
    const bool hi_inf = fence_len == 0;
    ASSERT_TRUE(set_fences(n, lo, hi, hi_inf));
    std::set<std::string> ref;
    GAddr next_child = 100;
    for (;;) {
        std::string k = std::string(1, '\x02') + random_key(rng, len);
        k.resize(len, '\x55');
        if (ref.count(k)) continue;
        size_t pos = lower_bound(n, k);
        bool ok = level == 0 ? insert_leaf(n, pos, k) : insert_inner(n, pos, k, next_child);
        if (!ok) {
            SNode left, right;
            std::string sep;
            ASSERT_TRUE(split_insert(n, pos, k, next_child, left, right, sep))
                << "a full node of " << n.count << " entries of " << len << " bytes did not split";
            ref.insert(k);
            expect_sane(left);
            expect_sane(right);
            ASSERT_GT(left.count, 0u);
            ASSERT_GT(right.count, 0u);
            EXPECT_EQ(left.count + right.count, ref.size());
            std::vector<std::string> both = keys_of(left), r = keys_of(right);
            both.insert(both.end(), r.begin(), r.end());
            EXPECT_EQ(both, std::vector<std::string>(ref.begin(), ref.end()));
            EXPECT_EQ(low(left), lo);
            EXPECT_EQ(high(left), sep);
            EXPECT_EQ(low(right), sep);
            EXPECT_EQ(high_is_inf(right), hi_inf);
            if (!hi_inf) {
                EXPECT_EQ(high(right), hi);
            }
            EXPECT_LT(compare(key(left, left.count - 1), sep), 0);
            EXPECT_LE(compare(sep, key(right, 0)), 0);
            if (level > 0) {
                EXPECT_EQ(key(right, 0), sep) << "inner: sep_0 == low fence";
                for (size_t i = 0; i < right.count; i++) EXPECT_NE(child(right, i), 0u);
            }
            return;
        }
        ref.insert(k);
        next_child++;
    }
}

TEST(SlottedNode, AFullNodeAlwaysSplitsIntoTwoThatFit) {
    std::mt19937_64 rng(5);
    for (uint8_t level : {0, 1})
        for (size_t len : {size_t(8), size_t(14), size_t(37), size_t(100), kMaxEntryBytes - 1, kMaxEntryBytes})
            for (size_t fence : {size_t(0), size_t(20), kMaxEntryBytes})
                for (int rep = 0; rep < 5; rep++) {
                    SCOPED_TRACE("level " + std::to_string(level) + " len " + std::to_string(len) + " fence " +
                                 std::to_string(fence));
                    split_full_node(level, len, fence, rng);
                }
}

TEST(SlottedNode, SplitsOfMixedLengthsKeepEveryEntry) {
    // Random lengths up to the limit, the new entry anywhere, 2000 splits.
    std::mt19937_64 rng(17);
    for (int rep = 0; rep < 2000; rep++) {
        SNode n;
        uint8_t level = rng() % 2;
        init(n, 1, level);
        std::string lo(rng() % (kMaxEntryBytes + 1), '\x01');
        ASSERT_TRUE(set_fences(n, lo, "", true));
        std::set<std::string> ref;
        for (;;) {
            std::string k = std::string(1, '\x02') + random_key(rng, kMaxEntryBytes - 1);
            if (ref.count(k)) continue;
            size_t pos = lower_bound(n, k);
            if (level == 0 ? insert_leaf(n, pos, k) : insert_inner(n, pos, k, 1 + ref.size())) {
                ref.insert(k);
                continue;
            }
            SNode left, right;
            std::string sep;
            ASSERT_TRUE(split_insert(n, pos, k, 1 + ref.size(), left, right, sep));
            ref.insert(k);
            expect_sane(left);
            expect_sane(right);
            EXPECT_TRUE(high_is_inf(right));
            EXPECT_EQ(left.count + right.count, ref.size());
            break;
        }
    }
}

TEST(SlottedNode, LeafSeparatorsAreTheShortestDistinguishingPrefix) {
    SNode n, left, right;
    init(n, 1, 0);
    std::string sep;
    // Two groups, "aa" + 60 x + c and "ab" + 60 y + c, inserted alternately
    // until the node is full: a cut inside a group needs a 63-byte
    // separator, the cut between the groups two bytes ("ab").
    std::vector<std::string> ks;
    for (int i = 0; i < 20; i++) {
        ks.push_back("aa" + std::string(60, 'x') + char('a' + i));
        ks.push_back("ab" + std::string(60, 'y') + char('a' + i));
    }
    size_t inserted = 0;
    for (const std::string& k : ks) inserted += insert_leaf(n, lower_bound(n, k), k);
    ASSERT_LT(inserted, ks.size()) << "the node should be full";
    std::string extra = "ab" + std::string(60, 'y') + "zz";
    ASSERT_TRUE(split_insert(n, lower_bound(n, extra), extra, 0, left, right, sep));
    EXPECT_EQ(sep, "ab") << "separator " << sep.size() << " bytes long";
    EXPECT_LT(compare(key(left, left.count - 1), sep), 0);
    EXPECT_LE(compare(sep, key(right, 0)), 0);
}

TEST(SlottedNode, InnerChildIndexFindsTheCoveringChild) {
    SNode n;
    init(n, 1, 1);
    std::vector<std::string> seps = {"", "b", "bb", "c", std::string("c\x00", 2), "d"};
    for (size_t i = 0; i < seps.size(); i++) ASSERT_TRUE(insert_inner(n, i, seps[i], 10 + i));
    auto covering = [&](const std::string& k) { return child(n, child_index(n, k)); };
    EXPECT_EQ(covering("a"), 10u);
    EXPECT_EQ(covering("b"), 11u);
    EXPECT_EQ(covering("ba"), 11u);
    EXPECT_EQ(covering("bb"), 12u);
    EXPECT_EQ(covering("c"), 13u);
    EXPECT_EQ(covering(std::string("c\x00", 2)), 14u);
    EXPECT_EQ(covering("zzz"), 15u);
    EXPECT_EQ(child_index(n, "b", true), 0) << "lt: the child left of an exact separator";
}

TEST(SlottedNode, RefusesEntriesAndFencesOverTheLimit) {
    SNode n, left, right;
    init(n, 1, 0);
    std::string longest(kMaxEntryBytes, 'k'), too_long(kMaxEntryBytes + 1, 'k');
    EXPECT_TRUE(insert_leaf(n, 0, longest));
    EXPECT_FALSE(insert_leaf(n, 0, too_long));
    EXPECT_FALSE(set_fences(n, too_long, "", true));
    std::string sep;
    EXPECT_FALSE(split_insert(n, 0, too_long, 0, left, right, sep));
    EXPECT_EQ(n.count, 1u);
    EXPECT_EQ(kMaxEntryBytes, 152u) << "1 KiB nodes: src/README.md states this limit";
}

}  // namespace
