#include "transport/remote_memory.h"

#include <string>

#include "common/error.h"

namespace dex {

void RemoteMemory::unknown_node(uint32_t id) {
    throw Error(ErrorCode::kInvalid, "memory node " + std::to_string(id) + " is not configured",
                    "Check dex.memnodes: it must list the memory node this index was built on.");
}

void RemoteMemory::replace_node(uint32_t id, std::unique_ptr<Transport> t) {
    if (id >= nodes_.size()) nodes_.resize(id + 1);
    nodes_[id] = std::move(t);
}

}  // namespace dex
