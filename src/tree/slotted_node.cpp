// Slotted nodes: see slotted_node.h and src/README.md "Slotted nodes".
#include "tree/slotted_node.h"

#include <algorithm>
#include <vector>

#include "tree/node_format.h"

namespace dex::tree::slotted {

namespace {

LeafSlot* leaf_slots_w(SNode& n) { return reinterpret_cast<LeafSlot*>(n.raw); }
InnerSlot* inner_slots_w(SNode& n) { return reinterpret_cast<InnerSlot*>(n.raw); }
uint8_t* base_w(SNode& n) { return reinterpret_cast<uint8_t*>(&n); }

size_t slot_end(const SNode& n, size_t count) { return kHeaderBytes + count * n.slot_bytes(); }

bool piece_in_heap(const SNode& n, uint16_t off, uint16_t len) {
    return len <= kMaxEntryBytes && off >= n.heap_top && size_t(off) + len <= kNodeSize;
}

// Copy len bytes to the bottom of the heap; the caller checked the room.
uint16_t heap_put(SNode& n, Bytes b) {
    n.heap_top = static_cast<uint16_t>(n.heap_top - b.size());
    if (!b.empty()) std::memcpy(base_w(n) + n.heap_top, b.data(), b.size());
    return n.heap_top;
}

// Contiguous room between the slot array (grown by `more_slots`) and the heap.
size_t contiguous(const SNode& n, size_t more_slots) {
    size_t end = slot_end(n, n.count + more_slots);
    return n.heap_top >= end ? n.heap_top - end : 0;
}

// Make room for one more slot and `len` heap bytes, compacting if the free
// space is there but fragmented. False: it is not there.
bool make_room(SNode& n, size_t len) {
    if (free_bytes(n) < entry_cost(n, len)) return false;
    if (contiguous(n, 1) < len) compact(n);
    return contiguous(n, 1) >= len;
}

}  // namespace

size_t lower_bound(const SNode& n, Bytes k) {
    size_t lo = 0, hi = n.count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (compare(key(n, mid), k) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int child_index(const SNode& n, Bytes k, bool lt) {
    size_t lo = 0, hi = n.count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = compare(key(n, mid), k);
        if (lt ? c < 0 : c <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return static_cast<int>(lo) - 1;
}

bool layout_valid(const SNode& n) {
    if (!(n.flags & kSlotted) || n.level > 32) return false;
    if (n.heap_top < kHeaderBytes || n.heap_top > kNodeSize) return false;
    if (slot_end(n, n.count) > n.heap_top) return false;
    if (n.garbage > kNodeSize - n.heap_top) return false;
    if (!piece_in_heap(n, n.low_off, n.low_len)) return false;
    if (!high_is_inf(n) && !piece_in_heap(n, n.high_off, n.high_len)) return false;
    for (size_t i = 0; i < n.count; i++) {
        uint16_t off = n.is_leaf() ? leaf_slots(n)[i].off : inner_slots(n)[i].off;
        uint16_t len = n.is_leaf() ? leaf_slots(n)[i].len : inner_slots(n)[i].len;
        if (!piece_in_heap(n, off, len)) return false;
    }
    return true;
}

uint64_t checksum(const SNode& n) {
    // Only called on layout_valid nodes (or ones being sealed), so both
    // ranges are inside the node.
    const uint8_t* b = base(n);
    uint64_t head = hash_words(b + 16, slot_end(n, n.count) - 16);
    uint64_t heap = hash_words(b + n.heap_top, kNodeSize - n.heap_top);
    return head ^ (heap * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull);
}

bool snapshot_valid(const SNode& n) {
    if (lock_held(n.lock) || !versions_match(n.body_version, n.lock)) return false;
    return layout_valid(n) && checksum(n) == n.checksum;
}

void seal(SNode& n, uint64_t version) {
    n.body_version = version;
    n.checksum = checksum(n);
    n.lock = make_lock_word(version, 0, false);
}

void init(SNode& n, uint32_t tree_id, uint8_t level) {
    std::memset(static_cast<void*>(&n), 0, sizeof(SNode));
    n.tree_id = tree_id;
    n.level = level;
    n.flags = kSlotted | kHighPosInf;
    n.heap_top = kNodeSize;
    n.low_off = n.high_off = kNodeSize;
}

bool set_fences(SNode& n, Bytes lo, Bytes hi, bool hi_inf) {
    if (lo.size() > kMaxEntryBytes || (!hi_inf && hi.size() > kMaxEntryBytes)) return false;
    size_t need = lo.size() + (hi_inf ? 0 : hi.size());
    size_t old = n.low_len + (high_is_inf(n) ? 0 : n.high_len);
    if (free_bytes(n) + old < need) return false;
    // The old fences become garbage (compact() keeps only what is referenced).
    n.garbage = static_cast<uint16_t>(n.garbage + old);
    n.low_len = 0;
    n.high_len = 0;
    n.flags |= kHighPosInf;
    if (contiguous(n, 0) < need) compact(n);
    n.low_off = heap_put(n, lo);
    n.low_len = static_cast<uint16_t>(lo.size());
    if (hi_inf) {
        n.high_off = kNodeSize;
    } else {
        n.high_off = heap_put(n, hi);
        n.high_len = static_cast<uint16_t>(hi.size());
        n.flags &= static_cast<uint8_t>(~kHighPosInf);
    }
    return true;
}

bool insert_leaf(SNode& n, size_t pos, Bytes k) {
    if (!n.is_leaf() || pos > n.count || k.size() > kMaxEntryBytes || !make_room(n, k.size())) return false;
    LeafSlot* s = leaf_slots_w(n);
    std::memmove(s + pos + 1, s + pos, (n.count - pos) * sizeof(LeafSlot));
    s[pos] = LeafSlot{heap_put(n, k), static_cast<uint16_t>(k.size())};
    n.count++;
    return true;
}

bool insert_inner(SNode& n, size_t pos, Bytes sep, GAddr c) {
    if (n.is_leaf() || pos > n.count || sep.size() > kMaxEntryBytes || !make_room(n, sep.size())) return false;
    InnerSlot* s = inner_slots_w(n);
    std::memmove(static_cast<void*>(s + pos + 1), s + pos, (n.count - pos) * sizeof(InnerSlot));
    s[pos] = InnerSlot{c, heap_put(n, sep), static_cast<uint16_t>(sep.size()), 0};
    n.count++;
    return true;
}

void erase(SNode& n, size_t pos) {
    if (pos >= n.count) return;
    if (n.is_leaf()) {
        LeafSlot* s = leaf_slots_w(n);
        n.garbage = static_cast<uint16_t>(n.garbage + s[pos].len);
        std::memmove(s + pos, s + pos + 1, (n.count - pos - 1) * sizeof(LeafSlot));
    } else {
        InnerSlot* s = inner_slots_w(n);
        n.garbage = static_cast<uint16_t>(n.garbage + s[pos].len);
        std::memmove(static_cast<void*>(s + pos), s + pos + 1, (n.count - pos - 1) * sizeof(InnerSlot));
    }
    n.count--;
    std::memset(n.raw + n.count * n.slot_bytes(), 0, n.slot_bytes());  // a clean slot array end
}

void compact(SNode& n) {
    SNode old;
    std::memcpy(static_cast<void*>(&old), &n, sizeof(SNode));
    n.heap_top = kNodeSize;
    n.garbage = 0;
    n.low_off = heap_put(n, low(old));
    if (!high_is_inf(old)) n.high_off = heap_put(n, high(old));
    for (size_t i = 0; i < n.count; i++) {
        uint16_t off = heap_put(n, key(old, i));
        if (n.is_leaf())
            leaf_slots_w(n)[i].off = off;
        else
            inner_slots_w(n)[i].off = off;
    }
    // Zero the space between the slots and the heap: an image carries no
    // stale bytes (the checksum does not cover them, remote readers never
    // look, but a node dump should not show old keys).
    size_t end = slot_end(n, n.count);
    std::memset(base_w(n) + end, 0, n.heap_top - end);
}

bool split_insert(const SNode& n, size_t pos, Bytes k, GAddr c, SNode& left, SNode& right, std::string& sep) {
    if (k.size() > kMaxEntryBytes || pos > n.count || &left == &n || &right == &n) return false;
    struct Item {
        Bytes key;
        GAddr child;
    };
    std::vector<Item> all;
    all.reserve(n.count + 1);
    for (size_t i = 0; i < n.count; i++) {
        if (i == pos) all.push_back({k, c});
        all.push_back({key(n, i), n.is_leaf() ? 0 : child(n, i)});
    }
    if (pos == n.count) all.push_back({k, c});
    const size_t m = all.size();
    if (m < 2) return false;

    // Bytes of entries before each split point: half j takes all[0..j).
    std::vector<size_t> before(m + 1, 0);
    for (size_t j = 0; j < m; j++) before[j + 1] = before[j] + entry_cost(n, all[j].key.size());
    const size_t total = before[m];
    auto larger_half = [&](size_t j) { return std::max(before[j], total - before[j]); };
    // Leaves: the shortest prefix of all[j] above all[j - 1] (left_last <
    // sep <= right_first). Inner nodes: all[j] itself (it stays as sep_0).
    auto sep_len = [&](size_t j) {
        if (!n.is_leaf()) return all[j].key.size();
        Bytes a = all[j - 1].key, b = all[j].key;
        size_t d = 0;
        while (d < a.size() && d < b.size() && a[d] == b[d]) d++;
        return std::min(b.size(), d + 1);
    };
    // The most balanced point always fits (the argument of node_capacity.h).
    size_t s = 1;
    for (size_t j = 2; j < m; j++)
        if (larger_half(j) < larger_half(s)) s = j;
    // Leaves: within a window of an eighth of the body around the balance,
    // take the point with the shortest separator (suffix truncation picks
    // where to cut, as nbtree's split interval does): shorter separators mean
    // more children per inner node. A candidate must still fit with its fences.
    if (n.is_leaf()) {
        const size_t window = larger_half(s) + kBodyBytes / 8;
        size_t best = s;
        for (size_t j = 1; j < m; j++) {
            if (larger_half(j) > window) continue;
            size_t l = sep_len(j);
            bool fits = before[j] + low(n).size() + l <= kBodyBytes &&
                        total - before[j] + l + (high_is_inf(n) ? 0 : high(n).size()) <= kBodyBytes;
            if (!fits) continue;
            if (l < sep_len(best) || (l == sep_len(best) && larger_half(j) < larger_half(best))) best = j;
        }
        s = best;
    }
    sep.assign(all[s].key.data(), sep_len(s));

    const uint8_t flags = static_cast<uint8_t>(n.flags & ~kNodeDeleted);
    for (SNode* h : {&left, &right}) {
        init(*h, n.tree_id, n.level);
        h->flags = static_cast<uint8_t>(flags | kHighPosInf);
    }
    if (!set_fences(left, low(n), sep, false) || !set_fences(right, sep, high(n), high_is_inf(n))) return false;
    right.right = n.right;
    for (size_t j = 0; j < m; j++) {
        SNode& h = j < s ? left : right;
        bool ok = n.is_leaf() ? insert_leaf(h, h.count, all[j].key) : insert_inner(h, h.count, all[j].key, all[j].child);
        if (!ok) return false;
    }
    return true;
}

}  // namespace dex::tree::slotted
