#include "engine/offload.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "common/gaddr.h"
#include "tree/key.h"
#include "tree/node_format.h"
#include "tree/node_layout.h"

namespace dex::memnode {

namespace {

using tree::capacity_of;
using tree::seal_node;
using tree::snapshot_valid;
using tree::used_bytes;

constexpr int kMaxHops = 64;       // nodes visited (levels plus right moves)
constexpr int kMaxAttempts = 2000; // torn / locked reads of one node before giving up

uint64_t* lock_word(uint8_t* pool, uint64_t off) { return reinterpret_cast<uint64_t*>(pool + off); }

// A validated snapshot of the node at `off` (reader protocol). False: still
// locked or torn after many attempts, or out of bounds.
bool read_node(uint8_t* pool, uint64_t pool_bytes, uint64_t off, Node& out) {
    if (off < net::kPoolReservedBytes || off % 8 != 0 || off > pool_bytes || pool_bytes - off < kNodeSize) return false;
    for (int attempt = 0; attempt < kMaxAttempts; attempt++) {
        uint64_t w = __atomic_load_n(lock_word(pool, off), __ATOMIC_ACQUIRE);
        if (!lock_held(w)) {
            std::memcpy(static_cast<void*>(&out), pool + off, kNodeSize);
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            out.lock = w;  // the body must belong to this version (checked below)
            if (snapshot_valid(out) && __atomic_load_n(lock_word(pool, off), __ATOMIC_ACQUIRE) == w) return true;
        }
        if (attempt > 16) std::this_thread::yield();
    }
    return false;
}

size_t lower_bound(const Node& n, const EntryKey& k) { return std::lower_bound(n.leaf, n.leaf + n.count, k) - n.leaf; }

void reply(std::vector<uint8_t>& resp, uint8_t status, GAddr leaf, const Node* image = nullptr) {
    net::OffloadReply r{};
    r.status = status;
    r.leaf = leaf;
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&r);
    resp.insert(resp.end(), p, p + sizeof r);
    if (image) {
        const uint8_t* q = reinterpret_cast<const uint8_t*>(image);
        resp.insert(resp.end(), q, q + kNodeSize);
    }
}

}  // namespace

void check_offload_request(uint64_t pool_bytes, const net::OffloadRequest& req) {
    if (req.kind < net::kOffloadLeaf || req.kind > net::kOffloadDelete)
        throw std::invalid_argument("OFFLOAD: unknown kind " + std::to_string(req.kind));
    if (req.kind == net::kOffloadInsert && req.journal != 0 &&
        (req.journal < net::kPoolReservedBytes || req.journal % 8 != 0 || req.journal > pool_bytes ||
         pool_bytes - req.journal < sizeof req.record))
        throw std::invalid_argument("OFFLOAD: journal slot outside the pool");
}

void execute_offload(uint8_t* pool, uint64_t pool_bytes, uint64_t client_id, const net::OffloadRequest& req,
                     std::vector<uint8_t>& resp, bool with_image) {
    check_offload_request(pool_bytes, req);
    EntryKey key;
    std::memcpy(&key, req.key, sizeof key);
    if (req.kind == net::kOffloadInsert && req.journal != 0) {
        // The insert's journal record first: whatever follows (the entry
        // published, found present, or the compute side told to split), a
        // crash can never leave the entry in the leaf without it.
        std::memcpy(pool + req.journal, req.record, sizeof req.record);
        __atomic_thread_fence(__ATOMIC_RELEASE);
    }
    const uint32_t self = req.node;
    uint64_t off = req.start;
    int expect = req.start_level;
    Node n;
    int cas_failures = 0;
    for (int hop = 0; hop < kMaxHops; hop++) {
        if (!read_node(pool, pool_bytes, off, n) || n.tree_id != req.tree_id || n.level != expect ||
            n.count > capacity_of(n.level))
            return reply(resp, net::kOffloadRestart, 0);
        GAddr next;
        if (n.is_deleted() || !(n.high.cls == kPosInf || compare_keys(key, n.high) < 0)) {
            next = n.right;  // merged away (forwarding) or B-link move right
        } else if (compare_keys(n.low, key) > 0) {
            return reply(resp, net::kOffloadRestart, 0);  // landed right of the key
        } else if (n.level > 0) {
            size_t lo = 0, hi = n.count;  // largest i with sep_i <= key
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (compare_keys(n.inner[mid].sep, key) <= 0)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo == 0) return reply(resp, net::kOffloadRestart, 0);
            next = n.inner[lo - 1].child;
            expect = n.level - 1;
        } else {
            const GAddr leaf = make_gaddr(self, off);
            if (req.kind == net::kOffloadLeaf) return reply(resp, net::kOffloadDone, leaf, with_image ? &n : nullptr);
            // Writer protocol on the local pool: CAS (v,_,0) -> (v,me,1); success
            // proves the node is still the snapshot we validated.
            const uint64_t v = n.body_version;  // full version; the lock word keeps its low bits
            uint64_t expected = make_lock_word(v, 0, false);
            const uint64_t mine = make_lock_word(v, client_id, true);
            if (!__atomic_compare_exchange_n(lock_word(pool, off), &expected, mine, false, __ATOMIC_SEQ_CST,
                                             __ATOMIC_SEQ_CST)) {
                hop--;  // changed or locked meanwhile: read it again (bounded by kMaxAttempts per read)
                if (++cas_failures > 200) return reply(resp, net::kOffloadRestart, 0);
                continue;
            }
            auto unlock_unchanged = [&] { __atomic_store_n(lock_word(pool, off), expected, __ATOMIC_RELEASE); };
            size_t pos = lower_bound(n, key);
            bool present = pos < n.count && n.leaf[pos] == key;
            if (req.kind == net::kOffloadInsert) {
                if (present) return unlock_unchanged(), reply(resp, net::kOffloadNoop, leaf);
                if (n.count >= kLeafCapacity) return unlock_unchanged(), reply(resp, net::kOffloadNeedsSmo, leaf);
                std::memmove(&n.leaf[pos + 1], &n.leaf[pos], (n.count - pos) * sizeof(EntryKey));
                n.leaf[pos] = key;
                n.count++;
            } else {
                if (!present) return unlock_unchanged(), reply(resp, net::kOffloadNoop, leaf);
                if (n.count == 1) return unlock_unchanged(), reply(resp, net::kOffloadNeedsSmo, leaf);
                std::memmove(&n.leaf[pos], &n.leaf[pos + 1], (n.count - pos - 1) * sizeof(EntryKey));
                n.count--;
            }
            // Publish: body from byte 8, then the lock word (version + 1, unlocked).
            seal_node(n, v + 1);
            std::memcpy(pool + off + 8, reinterpret_cast<const uint8_t*>(&n) + 8, used_bytes(n) - 8);
            __atomic_store_n(lock_word(pool, off), n.lock, __ATOMIC_RELEASE);
            return reply(resp, net::kOffloadDone, leaf, with_image ? &n : nullptr);
        }
        if (!next || gaddr_node(next) != self || gaddr_is_swizzled(next))
            return reply(resp, net::kOffloadRestart, 0);  // the path leaves this memory node
        off = gaddr_offset(next);
    }
    reply(resp, net::kOffloadRestart, 0);
}

}  // namespace dex::memnode
