#include "tree/node_format.h"

#include <cstring>

#include "tree/slotted_node.h"

namespace dex::tree {

namespace {

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

}  // namespace

// Multiply-xorshift mix of 8-byte words; order dependent.
uint64_t hash_words(const uint8_t* p, size_t len) {
    uint64_t h = 0x6a09e667f3bcc908ull ^ (len * 0x9e3779b97f4a7c15ull);
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        std::memcpy(&w, p + i, 8);
        w *= 0xbf58476d1ce4e5b9ull;
        w ^= w >> 31;
        h = rotl(h ^ w, 27) * 0x94d049bb133111ebull + 0x632be59bd9b4e019ull;
    }
    if (i < len) {
        uint64_t w = 0;
        std::memcpy(&w, p + i, len - i);
        h = rotl(h ^ (w * 0xbf58476d1ce4e5b9ull), 27) * 0x94d049bb133111ebull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

uint64_t node_checksum(const Node& n) {
    const uint8_t* base = reinterpret_cast<const uint8_t*>(&n);
    return hash_words(base + 16, used_bytes(n) - 16);
}

namespace {
const slotted::SNode& as_slotted(const Node& n) { return reinterpret_cast<const slotted::SNode&>(n); }
}  // namespace

bool body_intact(const Node& n) {
    if (is_slotted(n)) return slotted::layout_valid(as_slotted(n)) && slotted::checksum(as_slotted(n)) == n.checksum;
    if (n.level > 32 || n.count > capacity_of(n.level)) return false;
    return node_checksum(n) == n.checksum;
}

bool snapshot_valid(const Node& n) {
    if (lock_held(n.lock)) return false;
    if (!versions_match(n.body_version, n.lock)) return false;
    return body_intact(n);
}

void seal_node(Node& n, uint64_t version) {
    if (is_slotted(n)) {
        slotted::seal(reinterpret_cast<slotted::SNode&>(n), version);
        return;
    }
    n.body_version = version;
    n.checksum = node_checksum(n);
    n.lock = make_lock_word(version, 0, false);
}

}  // namespace dex::tree
