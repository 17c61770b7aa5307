// The two node layouts as policies of the B-link tree (src/README.md "Slotted
// nodes", "Tree over a layout"). The tree's algorithms (btree.cpp,
// split_merge.cpp, descend_cache.cpp, ...) are written once, over these
// operations; BTreeT<FixedLayout> is the int8-style tree of 16-byte keys
// (node_layout.h), BTreeT<SlottedLayout> the byte-string tree
// (slotted_node.h). A tree knows its layout from its metapage, never from a
// node's flag: a node of the other layout is invalid (reused memory).
//
// Both policies work on `Node` images: the 1 KiB buffer that node I/O, the
// cache and the lock protocol move around. The slotted policy views it as a
// slotted::SNode (same size, same first 40 bytes, static_asserted there).
//
// Keys: `Key` owns a key (a scan's cursor, a split's separator), `KeyRef`
// borrows one (a fence or entry inside a node, a caller's argument). -inf is
// the smallest key and +inf a key above every storable one; both can be
// fences and search bounds, neither can be stored as an entry.
#pragma once
#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>

#include "tree/key.h"
#include "tree/node_format.h"
#include "tree/node_layout.h"
#include "tree/slotted_node.h"

namespace dex::tree {

std::string key_str(const EntryKey& k);

// ---- fixed: 16-byte EntryKeys, arrays of entries ----------------------------------
struct FixedLayout {
    static constexpr bool kSlotted = false;
    using Key = EntryKey;
    using KeyRef = const EntryKey&;
    // Bytes of a cached frame the descent copies before reading its header
    // and fences (the fixed header holds the fences); the entries are then
    // searched in the frame itself, racily, and validated after.
    static constexpr size_t kCopyBytes = kNodeHeaderBytes;

    static int compare(KeyRef a, KeyRef b) { return compare_keys(a, b); }
    static bool equal(KeyRef a, KeyRef b) { return compare_keys(a, b) == 0; }
    static Key neg_inf() { return neg_inf_key(); }
    static Key pos_inf() { return pos_inf_key(); }
    static bool is_pos_inf(KeyRef k) { return k.cls == kPosInf; }
    static bool storable(KeyRef k) { return k.cls == kValue || k.cls == kNull; }
    static std::string str(KeyRef k) { return key_str(k); }

    // This layout, a sane count (the checksum was checked by node I/O).
    static bool layout_ok(const Node& n) { return !is_slotted(n) && n.count <= capacity_of(n.level); }
    static KeyRef low(const Node& n) { return n.low; }
    static KeyRef high(const Node& n) { return n.high; }
    static bool low_is_neg_inf(const Node& n) { return n.low.cls == kNegInf; }
    static bool high_is_pos_inf(const Node& n) { return n.high.cls == kPosInf; }
    static KeyRef entry(const Node& n, size_t i) { return n.leaf[i]; }
    static KeyRef sep(const Node& n, size_t i) { return n.inner[i].sep; }
    static GAddr child(const Node& n, size_t i) { return n.inner[i].child; }
    static void set_child(Node& n, size_t i, GAddr c) { n.inner[i].child = c; }

    // Position of the first leaf entry >= k.
    static size_t lower_bound(const Node& n, KeyRef k) {
        return std::lower_bound(n.leaf, n.leaf + n.count, k) - n.leaf;
    }
    // Largest i < count with sep_i <= k (lt: sep_i < k); -1 if none. On a
    // cached frame this reads racily; the caller validates afterwards.
    static int child_index(const Node& n, size_t count, KeyRef k, bool lt) {
        size_t lo = 0, hi = count;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            int c = compare_keys(n.inner[mid].sep, k);
            if (lt ? c < 0 : c <= 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        return static_cast<int>(lo) - 1;
    }

    static void init(Node& n, uint32_t tree_id, uint8_t level) {
        std::memset(static_cast<void*>(&n), 0, sizeof(Node));
        n.tree_id = tree_id;
        n.level = level;
        n.low = neg_inf_key();
        n.high = pos_inf_key();
    }
    static bool set_fences(Node& n, KeyRef lo, KeyRef hi) {
        n.low = lo;
        n.high = hi;
        return true;
    }
    // Would one more entry k fit?
    static bool leaf_fits(const Node& n, KeyRef) { return n.count < kLeafCapacity; }
    static bool insert_entry(Node& n, size_t pos, KeyRef k) {
        if (n.count >= kLeafCapacity) return false;
        std::memmove(&n.leaf[pos + 1], &n.leaf[pos], (n.count - pos) * sizeof(EntryKey));
        n.leaf[pos] = k;
        n.count++;
        return true;
    }
    static bool insert_sep(Node& n, size_t pos, KeyRef s, GAddr c) {
        if (n.count >= kInnerCapacity) return false;
        std::memmove(&n.inner[pos + 1], &n.inner[pos], (n.count - pos) * sizeof(InnerEntry));
        n.inner[pos] = InnerEntry{s, c};
        n.count++;
        return true;
    }
    static void erase(Node& n, size_t pos) {
        if (n.is_leaf())
            std::memmove(&n.leaf[pos], &n.leaf[pos + 1], (n.count - pos - 1) * sizeof(EntryKey));
        else
            std::memmove(&n.inner[pos], &n.inner[pos + 1], (n.count - pos - 1) * sizeof(InnerEntry));
        n.count--;
    }
    // The full node n takes (k, c) at pos: n becomes the left half (low
    // fence, tree id, level kept; high fence = sep; the caller sets its right
    // link), r the right half (low fence = sep, n's old high fence and right
    // link). Leaves split at the middle entry, which is also the separator.
    static bool split(Node& n, size_t pos, KeyRef k, GAddr c, Node& r, Key& sep);
    // The left leaf l absorbs its right neighbour r (one of them is empty):
    // entries, high fence and right link. False (l unchanged) if they do not fit.
    static bool absorb(Node& l, const Node& r) {
        if (l.count + r.count > kLeafCapacity) return false;
        std::memcpy(&l.leaf[l.count], r.leaf, r.count * sizeof(EntryKey));
        l.count = static_cast<uint16_t>(l.count + r.count);
        l.high = r.high;
        l.right = r.right;
        return true;
    }
    // Bulk load: the separator between the last key of one leaf and the
    // first of the next (fixed keys: that key itself).
    static Key separator(KeyRef, KeyRef right_first) { return right_first; }
    // Bulk load: may leaf n take k and still keep its fill factor (and room
    // for a high fence)? `fill` entries (fixed) or body bytes (slotted).
    static size_t leaf_fill(double ff) { return std::max<size_t>(1, static_cast<size_t>(kLeafCapacity * ff)); }
    static bool leaf_takes(const Node& n, KeyRef, size_t fill) { return n.count < fill; }
    // Bulk load: entries per inner node when every separator is at most
    // `longest` bytes (fixed: the capacity at the fill factor).
    static size_t inner_fill(double ff, size_t) {
        return std::max<size_t>(2, static_cast<size_t>(kInnerCapacity * ff));
    }
    static size_t key_bytes(KeyRef) { return sizeof(EntryKey); }
};

// ---- slotted: byte strings, slot array + entry heap --------------------------------
struct SlottedLayout {
    static constexpr bool kSlotted = true;
    using Key = std::string;
    using KeyRef = std::string_view;
    // Fences and entries are in the heap: the descent copies the whole frame,
    // validates it, and searches the copy (never racy offsets into a frame).
    static constexpr size_t kCopyBytes = kNodeSize;
    // Above every storable entry (at most kMaxEntryBytes long): longer, and
    // all 0xFF. The high fence of a rightmost node reads as this.
    static constexpr size_t kPosInfBytes = slotted::kMaxEntryBytes + 1;
    static KeyRef pos_inf_ref() {
        static const std::string inf(kPosInfBytes, '\xff');
        return inf;
    }

    static slotted::SNode& s(Node& n) { return reinterpret_cast<slotted::SNode&>(n); }
    static const slotted::SNode& s(const Node& n) { return reinterpret_cast<const slotted::SNode&>(n); }

    static int compare(KeyRef a, KeyRef b) { return slotted::compare(a, b); }
    static bool equal(KeyRef a, KeyRef b) { return a == b; }
    static Key neg_inf() { return Key(); }
    static Key pos_inf() { return Key(pos_inf_ref()); }
    static bool is_pos_inf(KeyRef k) { return k.size() == kPosInfBytes && k == pos_inf_ref(); }
    static bool storable(KeyRef k) { return !k.empty() && k.size() <= slotted::kMaxEntryBytes; }
    static std::string str(KeyRef k);

    static bool layout_ok(const Node& n) { return is_slotted(n) && slotted::layout_valid(s(n)); }
    static KeyRef low(const Node& n) { return slotted::low(s(n)); }
    static KeyRef high(const Node& n) { return slotted::high_is_inf(s(n)) ? pos_inf_ref() : slotted::high(s(n)); }
    static bool low_is_neg_inf(const Node& n) { return s(n).low_len == 0; }
    static bool high_is_pos_inf(const Node& n) { return slotted::high_is_inf(s(n)); }
    static KeyRef entry(const Node& n, size_t i) { return slotted::key(s(n), i); }
    static KeyRef sep(const Node& n, size_t i) { return slotted::key(s(n), i); }
    static GAddr child(const Node& n, size_t i) { return slotted::child(s(n), i); }
    static void set_child(Node& n, size_t i, GAddr c) {
        reinterpret_cast<slotted::InnerSlot*>(s(n).raw)[i].child = c;
    }

    static size_t lower_bound(const Node& n, KeyRef k) { return slotted::lower_bound(s(n), k); }
    // Always on a validated private copy (kCopyBytes), so count is n.count.
    static int child_index(const Node& n, size_t, KeyRef k, bool lt) { return slotted::child_index(s(n), k, lt); }

    static void init(Node& n, uint32_t tree_id, uint8_t level) { slotted::init(s(n), tree_id, level); }
    static bool set_fences(Node& n, KeyRef lo, KeyRef hi) {
        return slotted::set_fences(s(n), lo, is_pos_inf(hi) ? KeyRef() : hi, is_pos_inf(hi));
    }
    static bool leaf_fits(const Node& n, KeyRef k) {
        return k.size() <= slotted::kMaxEntryBytes && slotted::free_bytes(s(n)) >= slotted::entry_cost(s(n), k.size());
    }
    static bool insert_entry(Node& n, size_t pos, KeyRef k) { return slotted::insert_leaf(s(n), pos, k); }
    static bool insert_sep(Node& n, size_t pos, KeyRef sp, GAddr c) { return slotted::insert_inner(s(n), pos, sp, c); }
    static void erase(Node& n, size_t pos) { slotted::erase(s(n), pos); }
    static bool split(Node& n, size_t pos, KeyRef k, GAddr c, Node& r, Key& sep);
    static bool absorb(Node& l, const Node& r);
    // The shortest prefix of right_first above left_last (suffix truncation).
    static Key separator(KeyRef left_last, KeyRef right_first) {
        size_t d = 0;
        while (d < left_last.size() && d < right_first.size() && left_last[d] == right_first[d]) d++;
        return Key(right_first.substr(0, std::min(right_first.size(), d + 1)));
    }
    // Bulk load: body bytes a leaf fills up to; room for a high fence of the
    // longest entry is always kept beside them.
    static size_t leaf_fill(double ff) {
        return std::max<size_t>(slotted::kLeafSlotBytes + slotted::kMaxEntryBytes,
                                static_cast<size_t>((slotted::kBodyBytes - slotted::kMaxEntryBytes) * ff));
    }
    static bool leaf_takes(const Node& n, KeyRef k, size_t fill) {
        const slotted::SNode& sn = s(n);
        size_t used = slotted::kBodyBytes - slotted::free_bytes(sn);  // slots, entries, fences
        size_t cost = slotted::entry_cost(sn, k.size());
        return n.count == 0 || (used + cost <= fill && slotted::free_bytes(sn) >= cost + slotted::kMaxEntryBytes);
    }
    // Entries per inner node such that `per` separators of at most `longest`
    // bytes and two fences that long always fit the body at the fill factor.
    static size_t inner_fill(double ff, size_t longest) {
        size_t body = static_cast<size_t>(slotted::kBodyBytes * ff);
        size_t per = body > 2 * longest ? (body - 2 * longest) / (slotted::kInnerSlotBytes + longest) : 0;
        per = std::min(per, static_cast<size_t>(slotted::kMaxInnerSlots * ff));
        // Never below 2 (a level must shrink); two entries always fit.
        return std::max<size_t>(2, per);
    }
    static size_t key_bytes(KeyRef k) { return k.size(); }
};

// Image `src` (a leaf) split at `sep`: its entries below sep into `lo`
// (src's low fence, high fence sep, right link `right`), the others into `hi`
// (low fence sep, src's high fence and right link); neither sealed. False if
// a half does not fit (a byte-string separator longer than the fence it
// replaces, in a full leaf). The split of a dirty write-back leaf uses it on
// both sides: the compute server's one-sided split and the memory node's
// OFFLOAD_DIRTY_SPLIT (src/README.md "Splitting a dirty leaf").
template <class L>
bool split_image_at(const Node& src, typename L::KeyRef sep, GAddr right, Node& lo, Node& hi) {
    L::init(lo, src.tree_id, 0);
    L::init(hi, src.tree_id, 0);
    if (!L::set_fences(lo, L::low(src), sep) || !L::set_fences(hi, sep, L::high(src))) return false;
    lo.right = right;
    hi.right = src.right;
    const size_t cut = L::lower_bound(src, sep);
    for (size_t i = 0; i < src.count; i++) {
        Node& dst = i < cut ? lo : hi;
        if (!L::insert_entry(dst, i < cut ? i : i - cut, L::entry(src, i))) return false;
    }
    return true;
}

}  // namespace dex::tree
