// Node operations of the two layouts that are too long to inline (tree/layout.h).
#include "tree/layout.h"

#include <cstdio>

namespace dex::tree {

bool FixedLayout::split(Node& n, size_t pos, KeyRef k, GAddr c, Node& r, Key& sep) {
    init(r, n.tree_id, n.level);
    r.right = n.right;
    r.high = n.high;
    const size_t total = n.count + 1, mid = total / 2;
    if (n.is_leaf()) {
        EntryKey all[kLeafCapacity + 1];
        std::memcpy(all, n.leaf, pos * sizeof(EntryKey));
        all[pos] = k;
        std::memcpy(all + pos + 1, n.leaf + pos, (n.count - pos) * sizeof(EntryKey));
        r.count = static_cast<uint16_t>(total - mid);
        std::memcpy(r.leaf, all + mid, r.count * sizeof(EntryKey));
        std::memcpy(n.leaf, all, mid * sizeof(EntryKey));
        sep = all[mid];
    } else {
        InnerEntry all[kInnerCapacity + 1];
        std::memcpy(all, n.inner, pos * sizeof(InnerEntry));
        all[pos] = InnerEntry{k, c};
        std::memcpy(all + pos + 1, n.inner + pos, (n.count - pos) * sizeof(InnerEntry));
        r.count = static_cast<uint16_t>(total - mid);
        std::memcpy(r.inner, all + mid, r.count * sizeof(InnerEntry));
        std::memcpy(n.inner, all, mid * sizeof(InnerEntry));
        sep = all[mid].sep;
    }
    n.count = static_cast<uint16_t>(mid);
    r.low = sep;
    n.high = sep;
    return true;
}

bool SlottedLayout::split(Node& n, size_t pos, KeyRef k, GAddr c, Node& r, Key& sep) {
    Node left;
    if (!slotted::split_insert(s(n), pos, k, c, s(left), s(r), sep)) return false;
    // split_insert leaves the left half's right link to the caller, and
    // neither half carries the lock word: n's own (held) is kept.
    left.lock = n.lock;
    left.checksum = n.checksum;
    left.body_version = n.body_version;
    left.right = n.right;
    std::memcpy(static_cast<void*>(&n), &left, sizeof(Node));
    return true;
}

bool SlottedLayout::absorb(Node& l, const Node& r) {
    const slotted::SNode& sl = s(l);
    const slotted::SNode& sr = s(r);
    // Build into a copy: l stays unchanged if anything does not fit.
    Node m;
    std::memcpy(static_cast<void*>(&m), &l, sizeof(Node));
    slotted::SNode& sm = s(m);
    if (!slotted::set_fences(sm, slotted::low(sl), high(r), slotted::high_is_inf(sr))) return false;
    for (size_t i = 0; i < sr.count; i++)
        if (!slotted::insert_leaf(sm, sm.count, slotted::key(sr, i))) return false;
    m.right = r.right;
    std::memcpy(static_cast<void*>(&l), &m, sizeof(Node));
    return true;
}

std::string SlottedLayout::str(KeyRef k) {
    if (k.empty()) return "-inf";
    if (is_pos_inf(k)) return "+inf";
    std::string out = "x'";
    char b[3];
    for (unsigned char ch : k) {
        std::snprintf(b, sizeof b, "%02x", ch);
        out += b;
    }
    return out + "'";
}

}  // namespace dex::tree
