// OFFLOAD_KILL on the memory node (net/protocol.h; src/README.md "Dead-entry
// hints"): a write-through tree's removal of entries a scan judged dead, in
// one round trip where the compute side's takes two or three (lock with a
// read, publish). The scan's judgement holds for the image it read, so the
// leaf must still be at that version -- its lock word CASed at it is the
// proof, as the compute side's lock_at_version is -- and an equal entry
// inserted after a VACUUM cycle reused the TID is never removed.
#include <cstring>
#include <stdexcept>
#include <string>

#include "engine/offload.h"
#include "engine/offload_split.h"
#include "tree/layout.h"
#include "tree/node_format.h"

namespace dex::memnode {

namespace {

void kill_reply(std::vector<uint8_t>& resp, uint8_t status, GAddr leaf, uint32_t removed, const Node* image) {
    net::OffloadReply r{};
    r.status = status;
    r.leaf = leaf;
    const net::OffloadKillTail tail{removed, 0};
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&r);
    resp.insert(resp.end(), p, p + sizeof r);
    p = reinterpret_cast<const uint8_t*>(&tail);
    resp.insert(resp.end(), p, p + sizeof tail);
    if (image) {
        p = reinterpret_cast<const uint8_t*>(image);
        resp.insert(resp.end(), p, p + kNodeSize);
    }
}

template <class L>
typename L::Key entry_of(const std::pair<const uint8_t*, uint16_t>& e) {
    if constexpr (L::kSlotted) {
        return typename L::Key(reinterpret_cast<const char*>(e.first), e.second);
    } else {
        EntryKey k;
        std::memcpy(&k, e.first, sizeof k);  // (parse_offload_kill: 16 bytes)
        return k;
    }
}

template <class L>
void kill(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id, const net::OffloadKillView& v,
          std::vector<uint8_t>& resp) {
    const net::OffloadKillHeader& h = v.h;
    const GAddr leaf = make_gaddr(h.node, h.leaf);
    Node n;
    if (!read_pool_node(pool, pool_bytes, h.leaf, n)) return kill_reply(resp, net::kOffloadRestart, leaf, 0, nullptr);
    if (n.tree_id != h.tree_id || n.level != 0 || tree::is_slotted(n) != L::kSlotted || !L::layout_ok(n) ||
        n.is_deleted() || (h.version != 0 && n.body_version != h.version))
        return kill_reply(resp, net::kOffloadNoop, leaf, 0, nullptr);  // changed (or not such a leaf): judged stale
    const uint64_t ver = n.body_version;
    uint64_t expected = make_lock_word(ver, 0, false);
    if (!__atomic_compare_exchange_n(lock_word(pool, h.leaf), &expected, make_lock_word(ver, client_id, true),
                                     false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        return kill_reply(resp, net::kOffloadRestart, leaf, 0, nullptr);  // locked or changed since the read
    uint32_t removed = 0;
    for (const auto& e : v.entries) {
        const typename L::Key k = entry_of<L>(e);
        const size_t pos = L::lower_bound(n, k);
        if (pos < n.count && L::equal(L::entry(n, pos), k)) {
            L::erase(n, pos);
            removed++;
        }
    }
    if (removed == 0) {
        __atomic_store_n(lock_word(pool, h.leaf), expected, __ATOMIC_RELEASE);  // unchanged
        return kill_reply(resp, net::kOffloadDone, leaf, 0, nullptr);
    }
    tree::seal_node(n, ver + 1);
    publish_node(pool, h.leaf, n);
    kill_reply(resp, net::kOffloadDone, leaf, removed, &n);
}

}  // namespace

net::OffloadKillView check_offload_kill(uint64_t pool_bytes, const uint8_t* payload, size_t len) {
    net::OffloadKillView v;
    if (const char* why = net::parse_offload_kill(payload, len, v)) throw std::invalid_argument(why);
    if (!sibling_block_ok(pool_bytes, v.h.leaf)) throw std::invalid_argument("OFFLOAD_KILL: leaf outside the pool");
    return v;
}

void execute_offload_kill(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id, const net::OffloadKillView& v,
                          std::vector<uint8_t>& resp) {
    if (v.h.slotted)
        kill<tree::SlottedLayout>(pool, pool_bytes, client_id, v, resp);
    else
        kill<tree::FixedLayout>(pool, pool_bytes, client_id, v, resp);
}

}  // namespace dex::memnode
