// What BTreeT::check() and info() report about a tree.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/gaddr.h"

namespace dex::tree {

struct TreeInfo {
    uint64_t entries = 0;
    uint64_t leaves = 0;
    uint64_t inner_nodes = 0;
    uint32_t height = 0;           // 1 = the root is a leaf
    GAddr root = 0;
    uint64_t missing_downlinks = 0;  // check(): nodes reachable only via a right link (interrupted split)
    std::string notes;               // check(): tolerated transient states
    // check(): placement (indexed by memory node id)
    int placement_level = 0;
    std::vector<uint64_t> nodes_on;     // tree nodes per memory node
    std::vector<uint64_t> subtrees_on;  // subtrees rooted at placement_level (or the root, if lower)
};

}  // namespace dex::tree
