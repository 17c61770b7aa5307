// Scan::leaf_nearly_full (src/README.md "Dead-entry hints", nearly full
// leaves): a write-back scan removes fewer dead entries than
// dex.kill_min_entries only from a leaf that has room for fewer than
// kNearlyFullRoom more entries like its last one -- for the fixed layout a
// count, for slotted leaves the bytes such entries take.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "tree/btree.h"
#include "tree/slotted_node.h"

using namespace dex;

namespace {

constexpr int kRoom = tree::BTree::kNearlyFullRoom;

TEST(LeafNearlyFull, FixedLeafByCount) {
    Node n;
    std::memset(static_cast<void*>(&n), 0, sizeof n);
    n.level = 0;
    n.count = 0;
    EXPECT_FALSE(tree::BTree::leaf_nearly_full(n)) << "an empty leaf";
    n.count = static_cast<uint16_t>(kLeafCapacity - kRoom);
    EXPECT_FALSE(tree::BTree::leaf_nearly_full(n)) << "room for exactly kNearlyFullRoom more";
    n.count = static_cast<uint16_t>(kLeafCapacity - kRoom + 1);
    EXPECT_TRUE(tree::BTree::leaf_nearly_full(n));
    n.count = static_cast<uint16_t>(kLeafCapacity);
    EXPECT_TRUE(tree::BTree::leaf_nearly_full(n)) << "a full leaf";
}

// A slotted leaf holding `count` entries of `len` bytes.
Node slotted_leaf(size_t count, size_t len) {
    Node n;
    auto& s = reinterpret_cast<tree::slotted::SNode&>(n);
    tree::slotted::init(s, 42, 0);
    for (size_t i = 0; i < count; i++) {
        std::string k(len, 'a');
        std::snprintf(&k[0], len, "%08zu", i);  // ascending, distinct
        k[len - 1] = 'z';
        if (!tree::slotted::insert_leaf(s, s.count, k)) ADD_FAILURE() << "entry " << i << " did not fit";
    }
    return n;
}

TEST(LeafNearlyFull, SlottedLeafByTheBytesOfItsLastEntry) {
    for (size_t len : {12, 40}) {
        size_t fit = 0;  // entries of `len` bytes a leaf takes
        {
            Node n = slotted_leaf(0, len);
            auto& s = reinterpret_cast<tree::slotted::SNode&>(n);
            std::string k(len, 'a');
            while (tree::slotted::insert_leaf(s, s.count, k)) fit++;
        }
        ASSERT_GT(fit, static_cast<size_t>(kRoom)) << len;
        EXPECT_FALSE(tree::SlottedTree::leaf_nearly_full(slotted_leaf(fit - kRoom, len))) << len;
        EXPECT_TRUE(tree::SlottedTree::leaf_nearly_full(slotted_leaf(fit - kRoom + 1, len))) << len;
        EXPECT_TRUE(tree::SlottedTree::leaf_nearly_full(slotted_leaf(fit, len))) << len;
    }
}

}  // namespace
