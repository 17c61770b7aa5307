#include "tree/node_io.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

#include "common/stats.h"

namespace dex::tree {

std::string hex_addr(GAddr a) {
    char b[48];
    std::snprintf(b, sizeof b, "%u:0x%llx", gaddr_node(a), static_cast<unsigned long long>(gaddr_offset(a)));
    return b;
}

std::string key_str(const EntryKey& k) {
    switch (k.cls) {
        case kNegInf: return "-inf";
        case kPosInf: return "+inf";
        case kNull: return "(NULL,(" + std::to_string(k.block) + "," + std::to_string(k.offnum) + "))";
        case kValue:
            return "(" + std::to_string(key_to_int64(k.value)) + ",(" + std::to_string(k.block) + "," +
                   std::to_string(k.offnum) + "))";
        default: return "(class " + std::to_string(k.cls) + "?)";
    }
}

void Deadline::check(const char* what) const {
    if (expired())
        throw Error(ErrorCode::kTimeout,
                    std::string(what) + " did not complete within dex.op_timeout (" + std::to_string(ms_) + " ms)",
                    "The memory node may be overloaded, or a remote lock is held by a live but stuck client.");
}

void backoff(int attempt) {
    if (interrupt_requested())
        throw Error(ErrorCode::kInterrupted, "canceling wait for remote index node");
    if (attempt < 3) {
        std::this_thread::yield();
        return;
    }
    int shift = std::min(attempt - 3, 7);
    std::this_thread::sleep_for(std::chrono::microseconds(8 << shift));  // 8 us .. ~1 ms
}

RemoteOp write_node_op(GAddr a, const Node& n) {
    RemoteOp op{};
    op.kind = RemoteOp::kWrite;
    op.offset = gaddr_offset(a);
    op.buf = const_cast<Node*>(&n);
    op.len = static_cast<uint32_t>(used_bytes(n));
    return op;
}

bool NodeIO::client_alive(GAddr a, uint64_t owner) {
    uint64_t req = owner;
    std::vector<uint8_t> r = transport(a).rpc(net::kOpClientAlive, &req, sizeof req);
    if (r.size() < 8) throw Error(ErrorCode::kProtocol, "CLIENT_ALIVE: short response");
    uint64_t v;
    std::memcpy(&v, r.data(), 8);
    return v != 0;
}

void NodeIO::steal(GAddr a, uint64_t word) {
    Transport& t = transport(a);
    uint64_t ver = lock_version(word);
    uint64_t mine = make_lock_word(ver, t.client_id(), true);
    InterruptHold hold;
    if (t.cas(gaddr_offset(a), word, mine) != word) return;  // someone else moved first
    Stats::add(stats().lock_steals);
    // The body is the old or the new one (a WRITE is applied whole): re-read it
    // and publish max(lock version, body version) + 1.
    Node n;
    read_raw(a, n);
    bool ok = body_intact(n);
    if (!ok) {
        try {
            t.cas(gaddr_offset(a), mine, make_lock_word(ver, 0, false));
        } catch (...) {
        }
        throw Error(ErrorCode::kCorrupt, "node " + hex_addr(a) +
                                             ": checksum mismatch after taking over the lock of dead client " +
                                             std::to_string(lock_owner(word)));
    }
    uint64_t nv = n.body_version + 1;  // the old body (version v) or the new one (v + 1)
    seal_node(n, nv);
    uint64_t unlocked = n.lock;
    RemoteOp ops[2]{};
    ops[0].kind = RemoteOp::kWrite;
    ops[0].offset = gaddr_offset(a) + 8;
    ops[0].buf = reinterpret_cast<uint8_t*>(&n) + 8;
    ops[0].len = static_cast<uint32_t>(used_bytes(n) - 8);
    ops[1].kind = RemoteOp::kWrite;
    ops[1].offset = gaddr_offset(a);
    ops[1].buf = &unlocked;
    ops[1].len = 8;
    t.batch(ops, 2);
}

NodeIO::Read NodeIO::read(GAddr a, Node& out, const Deadline& dl, bool wait_if_locked) {
    uint64_t seen_word = 0;
    auto seen_since = std::chrono::steady_clock::now();
    int bad = 0, attempt = 0;
    const auto grace = std::chrono::milliseconds(opts_.lock_grace_ms);
    for (;;) {
        read_raw(a, out);
        uint64_t w = out.lock;
        if (!lock_held(w)) {
            if (snapshot_valid(out)) return Read::kOk;
            if (++bad >= 24) return Read::kBad;
        } else {
            if (!wait_if_locked) return Read::kBusy;
            auto now = std::chrono::steady_clock::now();
            if (w != seen_word) {
                seen_word = w;
                seen_since = now;
            } else if (now - seen_since >= grace) {
                if (!client_alive(a, lock_owner(w))) {
                    steal(a, w);
                    seen_word = 0;
                    continue;
                }
                seen_since = now;
            }
        }
        Stats::add(stats().restarts);
        if (dl.expired()) {
            // Name the node and, if it stayed locked, its live holder: a lock
            // held this long is a bug (or a stuck client) to find.
            const std::string what = "waiting for remote index node " + hex_addr(a) +
                                     (lock_held(w) ? " (locked by client " + std::to_string(lock_owner(w)) + ")"
                                                   : std::string(" (unreadable image)"));
            dl.check(what.c_str());
        }
        backoff(attempt++);
    }
}

Locks::~Locks() {
    if (held_count_ == 0) return;
    for (auto& ln : nodes_) {
        if (!ln.held) continue;
        try {
            // Only through the connection that holds it. Had it been lost, a
            // release through a new connection could overtake a write still
            // queued on the old one (a publish the server executes late):
            // instead, the memory node sees the old client dead once all its
            // requests are done, and a waiter takes the lock over.
            Transport& t = io_.transport(ln.addr);
            if (t.connected_client_id() == lock_owner(ln.held_word))
                t.cas(gaddr_offset(ln.addr), ln.held_word, make_lock_word(ln.version, 0, false));
        } catch (...) {
            // Connection gone: the memory node sees the client dead, others steal the lock.
        }
        ln.held = false;
    }
    held_count_ = 0;
    hold_.reset();
}

void Locks::check_connection(const LockedNode& ln) {
    Transport& t = io_.transport(ln.addr);
    if (t.connected_client_id() != lock_owner(ln.held_word))
        throw Error(ErrorCode::kUnreachable,
                    "lost the connection to memory node " + t.address() +
                        " while holding a remote lock: the operation was abandoned before writing (a waiter "
                        "takes the lock over)");
}

LockedNode* Locks::try_lock(GAddr a, const Node& snap, std::chrono::steady_clock::time_point read_at, RemoteOp* also,
                           size_t n_also, bool* sent) {
    if (sent) *sent = false;
    if (lock_held(snap.lock)) return nullptr;
    // A snapshot older than a second may predate 2^24 publishes of the node
    // (the lock word keeps 24 version bits): read it again instead (ABA).
    if (std::chrono::steady_clock::now() - read_at > std::chrono::seconds(1)) return nullptr;
    uint64_t v = snap.body_version;  // full version; the lock word keeps its low bits
    if (!hold_) hold_.emplace();
    Transport& t = io_.transport(a);
    uint64_t want = make_lock_word(v, t.client_id(), true);
    uint64_t expected = make_lock_word(v, 0, false);
    uint64_t old;
    if (n_also == 0) {
        old = t.cas(gaddr_offset(a), expected, want);
    } else {
        // One round trip: the CAS, then the caller's ops (a batch runs in order).
        std::vector<RemoteOp> ops;
        ops.reserve(n_also + 1);
        ops.push_back(RemoteOp{RemoteOp::kCas, gaddr_offset(a), nullptr, 0, expected, want, 0});
        ops.insert(ops.end(), also, also + n_also);
        t.batch(ops.data(), ops.size());
        if (sent) *sent = true;
        old = ops[0].result;
        for (size_t i = 0; i < n_also; i++) also[i].result = ops[i + 1].result;
    }
    if (old != expected) {
        if (held_count_ == 0) hold_.reset();
        return nullptr;
    }
    nodes_.emplace_back();
    LockedNode& ln = nodes_.back();
    ln.addr = a;
    ln.version = v;
    ln.held_word = want;
    ln.held = true;
    std::memcpy(&ln.node, &snap, kNodeSize);
    ++held_count_;
    return &ln;
}

void Locks::on_release() {
    if (--held_count_ == 0) hold_.reset();
}

void Locks::unlock(LockedNode* ln) {
    if (!ln || !ln->held) return;
    check_connection(*ln);
    io_.transport(ln->addr).cas(gaddr_offset(ln->addr), ln->held_word, make_lock_word(ln->version, 0, false));
    ln->held = false;
    on_release();
}

void Locks::publish(const std::vector<LockedNode*>& nodes, const std::vector<RemoteOp>& before,
                    const std::vector<GAddr>& created, RemoteOp* after, GAddr after_addr) {
    std::vector<RemoteOp> ops(before);
    // Memory node of each op: `before` ops go to the first node's memory node.
    std::vector<GAddr> op_addr(before.size(), nodes.size() ? (*nodes.begin())->addr : 0);
    // Every lock must still be held through the connection that took it: a
    // write through a newer connection after the old one died could land
    // after a waiter took the lock over (and published).
    for (LockedNode* ln : nodes) check_connection(*ln);
    if (TreeOptions::ChangeLog log = io_.options().log_changes) {
        std::vector<GAddr> changed(created);
        for (LockedNode* ln : nodes) changed.push_back(ln->addr);
        log(changed.data(), changed.size());
    }
    std::vector<uint64_t> words;
    words.reserve(nodes.size());
    for (LockedNode* ln : nodes) {
        seal_node(ln->node, ln->version + 1);
        words.push_back(ln->node.lock);
    }
    for (LockedNode* ln : nodes) {
        RemoteOp op{};
        op.kind = RemoteOp::kWrite;
        op.offset = gaddr_offset(ln->addr) + 8;
        op.buf = reinterpret_cast<uint8_t*>(&ln->node) + 8;
        op.len = static_cast<uint32_t>(used_bytes(ln->node) - 8);
        ops.push_back(op);
        op_addr.push_back(ln->addr);
    }
    size_t i = 0;
    for (LockedNode* ln : nodes) {
        RemoteOp op{};
        op.kind = RemoteOp::kWrite;
        op.offset = gaddr_offset(ln->addr);
        op.buf = &words[i++];
        op.len = 8;
        ops.push_back(op);
        op_addr.push_back(ln->addr);
    }
    if (after) {
        ops.push_back(*after);
        op_addr.push_back(after_addr);
    }
    // Every node of one publish normally lives on one memory node (a split's
    // new sibling is placed next to the node it splits from; merges stay inside
    // one subtree). If not, the ops go as consecutive batches, one per memory
    // node, in the same order (each completes before the next is sent).
    size_t b = 0;
    while (b < ops.size()) {
        uint32_t node = gaddr_node(op_addr[b]);
        size_t e = b + 1;
        while (e < ops.size() && gaddr_node(op_addr[e]) == node) e++;
        io_.mem().batch(node, ops.data() + b, e - b);
        b = e;
    }
    if (after) after->result = ops.back().result;
    for (LockedNode* ln : nodes) {
        if (ln->held) {
            ln->held = false;
            on_release();
        }
    }
}

}  // namespace dex::tree
