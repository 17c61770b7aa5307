// BTreeT's cursor (Scan) and bulk loader (BulkLoader): member classes
// declared in tree/btree.h, defined here, and included at its end -- every
// user of the tree gets them; btree.h stays the tree's own interface.
// Their code: btree.cpp (Scan), bulk_load.cpp (BulkLoader).
#pragma once
#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "tree/btree.h"

namespace dex::tree {

// Entries lo <= k <= hi, a leaf at a time; never holds locks between calls.
template <class L>
class BTreeT<L>::Scan {
public:
    Scan(BTreeT& t, KeyRef lo, KeyRef hi, bool backward);
    // Next batch (ascending, or descending if backward); false at the end.
    bool next(std::vector<Key>& out);
    // The leaf the last batch came from and the body_version of the
    // image it was copied from (for remove_if_unchanged; 0: none).
    GAddr leaf() const { return leaf_; }
    uint64_t leaf_version() const { return leaf_version_; }
    // A moment before that image was read (it was current after it).
    std::chrono::steady_clock::time_point leaf_seen_at() const { return leaf_seen_at_; }
    // The cache frame the last batch was copied from and its version word
    // then (0xFFFFFFFF / 0: not copied from a frame). The version only on
    // a write-back tree: it is what routes a kill to the frame
    // (remove_if_unchanged), and a write-through tree's removal is remote
    // at once -- it must take the registry gate, never a frame's hold.
    uint32_t leaf_frame() const { return leaf_frame_; }
    uint64_t leaf_frame_version() const { return t_.write_back() ? leaf_frame_version_ : 0; }
    // Write-back trees: the last batch's leaf had room for fewer than
    // kNearlyFullRoom more entries like its last one (leaf_nearly_full):
    // its dead entries are worth removing now, before inserts split it.
    bool leaf_nearly_full() const { return leaf_nearly_full_; }

private:
    BTreeT& t_;
    Key lo_, hi_;
    bool backward_;
    bool done_ = false;
    Key cursor_;         // forward: next key >= cursor; backward: keys <= / < cursor
    bool exclusive_ = false;  // backward: cursor is exclusive
    GAddr next_addr_ = 0;     // forward: right sibling to try first
    GAddr leaf_ = 0;          // the last batch's leaf
    uint64_t leaf_version_ = 0;
    std::chrono::steady_clock::time_point leaf_seen_at_{};
    uint32_t leaf_frame_ = 0xFFFFFFFFu;
    uint64_t leaf_frame_version_ = 0;
    bool leaf_nearly_full_ = false;
};

// Bottom-up load from strictly ascending keys; replaces the root on finish.
template <class L>
class BTreeT<L>::BulkLoader {
public:
    BulkLoader(BTreeT& t, double fill_factor);
    void add(KeyRef key);
    void finish();

private:
    struct Child {
        Key low;
        GAddr addr;
        int64_t seg;  // placement segment (one subtree at the placement level); -1: above it
    };
    struct Extent {
        uint64_t off = 0, left = 0;
    };
    GAddr alloc(uint32_t node);
    uint32_t segment_node();
    void emit(GAddr a, Node& n);
    void flush();
    BTreeT& t_;
    double ff_ = 0.9;
    size_t leaf_fill_, inner_fill_;
    Node cur_;
    GAddr cur_addr_ = 0;
    bool have_last_ = false;
    Key last_{};
    std::vector<Child> children_;
    std::vector<std::pair<GAddr, Node>> pending_;
    std::vector<Extent> ext_;       // per memory node
    std::vector<int64_t> free_;     // per memory node: estimated free bytes (-1: not a part)
    std::vector<uint32_t> seg_node_;  // memory node of each segment
    uint64_t seg_leaves_ = 0;       // leaves per segment (fill^placement level)
    uint64_t leaves_ = 0;
    bool finished_ = false;
};

}  // namespace dex::tree
