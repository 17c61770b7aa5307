// RemoteMemory: the set of memory nodes, addressed by GAddr. Routes each
// operation to the Transport of the node named in the address, so the tree
// works with global addresses only and never with connections.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/gaddr.h"
#include "transport/transport.h"

namespace dex {

class RemoteMemory {
public:
    explicit RemoteMemory(std::vector<std::unique_ptr<Transport>> nodes) : nodes_(std::move(nodes)) {}

    size_t node_count() const { return nodes_.size(); }
    Transport& node(uint32_t id) {  // throws kInvalid for an unknown id
        if (id >= nodes_.size() || !nodes_[id]) unknown_node(id);
        if (check_ && id < 64 && !(checked_ & (1ull << id))) first_use(id);
        return *nodes_[id];
    }

    // Lazy per-node check for a tree spread over several memory nodes: while
    // set, `fn(id)` runs before the first operation on node `id` (ids < 64)
    // since the check was set, e.g. to compare the node's incarnation with the
    // one the tree was built in. A query that never touches a lost node thus
    // never fails because of it. `fn` may throw; it may call node() itself.
    using NodeCheck = std::function<void(uint32_t)>;
    void set_node_check(NodeCheck fn) {
        check_ = std::move(fn);
        checked_ = 0;
    }

    void read(GAddr a, void* dst, uint32_t len) { node(gaddr_node(a)).read(gaddr_offset(a), dst, len); }
    void write(GAddr a, const void* src, uint32_t len) { node(gaddr_node(a)).write(gaddr_offset(a), src, len); }
    uint64_t cas(GAddr a, uint64_t expected, uint64_t desired) {
        return node(gaddr_node(a)).cas(gaddr_offset(a), expected, desired);
    }
    uint64_t faa(GAddr a, uint64_t add) { return node(gaddr_node(a)).faa(gaddr_offset(a), add); }
    // All ops must target one node (`node_id`); offsets in ops are pool offsets.
    void batch(uint32_t node_id, RemoteOp* ops, size_t n) { node(node_id).batch(ops, n); }

    void replace_node(uint32_t id, std::unique_ptr<Transport> t);
    void add_node(std::unique_ptr<Transport> t) { nodes_.push_back(std::move(t)); }

private:
    [[noreturn]] void unknown_node(uint32_t id);
    void first_use(uint32_t id) {
        checked_ |= 1ull << id;  // first: fn may use node(id)
        try {
            check_(id);
        } catch (...) {
            checked_ &= ~(1ull << id);
            throw;
        }
    }
    std::vector<std::unique_ptr<Transport>> nodes_;
    NodeCheck check_;
    uint64_t checked_ = 0;
};

}  // namespace dex
