// The order-preserving byte strings of tree/key_bytes.h: every encoding's
// memcmp order against a reference order, prefixes, DESC inversion and
// multi-column concatenation. (SQL types against btree's own comparisons:
// sql/dex_key_bytes.sql.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tree/key_bytes.h"

namespace {

using Bytes = std::vector<uint8_t>;

void *grow(void *old, size_t newcap) {
    void *p = std::realloc(old, newcap);
    if (!p) std::abort();
    return p;
}

// Runs fill on a fresh buffer and returns its bytes.
template <typename F>
Bytes encode(F fill) {
    DexKeyBuf b = {nullptr, 0, 0, grow};
    fill(&b);
    Bytes out(b.data, b.data + b.len);
    std::free(b.data);
    return out;
}

int sign(int c) { return c < 0 ? -1 : c > 0 ? 1 : 0; }

int cmp(const Bytes &a, const Bytes &b) {
    return dex_kb_compare(a.data(), a.size(), b.data(), b.size());
}

// memcmp, then length: bytea's and "C" text's order
int ref_string_cmp(const std::string &a, const std::string &b) {
    return sign(a.compare(b) < 0 ? -1 : a.compare(b) > 0 ? 1 : 0);
}

Bytes str(const std::string &s) {
    return encode([&](DexKeyBuf *b) { dex_kb_string(b, s.data(), s.size()); });
}

Bytes inverted(Bytes v) {
    for (auto &c : v) c = static_cast<uint8_t>(~c);
    return v;
}

const std::vector<std::string> kStrings = {
    std::string(),
    std::string("\0", 1),
    std::string("\0\0", 2),
    std::string("\0\x01", 2),
    std::string("\0\xff", 2),
    "\x01",
    "\x01\x01",
    "a",
    std::string("a\0", 2),
    std::string("a\0\0", 3),
    std::string("a\0b", 3),
    "a\x01",
    "a\xfe",
    "a\xff",
    "a\xff\xff",
    "ab",
    "abc",
    "b",
    "\xfe",
    "\xff",
    std::string("\xff\0", 2),
    "\xff\xff",
    "\xff\xff\xff",
};

TEST(KeyBytesString, EscapesZeroAndTerminates) {
    EXPECT_EQ(str(""), (Bytes{0x00, 0x00}));
    EXPECT_EQ(str(std::string("a\0b", 3)), (Bytes{'a', 0x00, 0xFF, 'b', 0x00, 0x00}));
    EXPECT_EQ(str(std::string("\0", 1)), (Bytes{0x00, 0xFF, 0x00, 0x00}));
    EXPECT_EQ(str("\xff"), (Bytes{0xFF, 0x00, 0x00}));
    // long strings grow the buffer across the escape's reservation
    std::string big(1000, '\0');
    EXPECT_EQ(str(big).size(), 2002u);
}

TEST(KeyBytesString, OrderIsMemcmpThenLengthPairwise) {
    size_t checked = 0;
    for (const auto &a : kStrings)
        for (const auto &b : kStrings) {
            EXPECT_EQ(sign(cmp(str(a), str(b))), ref_string_cmp(a, b))
                << testing::PrintToString(a) << " vs " << testing::PrintToString(b);
            checked++;
        }
    EXPECT_EQ(checked, kStrings.size() * kStrings.size());
}

TEST(KeyBytesString, InvertedReversesOrderIncludingPrefixes) {
    for (const auto &a : kStrings)
        for (const auto &b : kStrings)
            EXPECT_EQ(sign(cmp(inverted(str(a)), inverted(str(b)))), -ref_string_cmp(a, b))
                << testing::PrintToString(a) << " vs " << testing::PrintToString(b);
    // the case the terminator choice is about: a prefix sorts last under DESC
    EXPECT_GT(cmp(inverted(str("a")), inverted(str("ab"))), 0);
    EXPECT_GT(cmp(inverted(str("a")), inverted(str(std::string("a\0", 2)))), 0);
}

TEST(KeyBytesString, NoEncodingIsAPrefixOfAnother) {
    for (const auto &a : kStrings)
        for (const auto &b : kStrings) {
            if (a == b) continue;
            Bytes ea = str(a), eb = str(b);
            bool prefix = ea.size() <= eb.size() && std::equal(ea.begin(), ea.end(), eb.begin());
            EXPECT_FALSE(prefix) << testing::PrintToString(a) << " is a prefix of " << testing::PrintToString(b);
        }
}

// ---- fixed images ---------------------------------------------------------

TEST(KeyBytesFixed, Int64IsBigEndianOfTheKeyImage) {
    EXPECT_EQ(encode([](DexKeyBuf *b) { dex_kb_int64(b, 0); }),
              (Bytes{0x80, 0, 0, 0, 0, 0, 0, 0}));
    EXPECT_EQ(encode([](DexKeyBuf *b) { dex_kb_int64(b, -1); }),
              (Bytes{0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}));
    std::vector<int64_t> v = {std::numeric_limits<int64_t>::min(), -65536, -256, -255, -1, 0, 1,
                              255, 256, 65536, std::numeric_limits<int64_t>::max()};
    for (int64_t x : v)
        for (int64_t y : v) {
            int want = x < y ? -1 : x > y ? 1 : 0;
            EXPECT_EQ(sign(cmp(encode([&](DexKeyBuf *b) { dex_kb_int64(b, x); }),
                               encode([&](DexKeyBuf *b) { dex_kb_int64(b, y); }))),
                      want) << x << " vs " << y;
        }
}

TEST(KeyBytesFixed, FloatsInBtreeOrder) {
    using L = std::numeric_limits<double>;
    // ascending groups; members of a group are equal in SQL
    std::vector<std::vector<double>> groups = {
        {-L::infinity()}, {-L::max()}, {-1.0}, {-L::denorm_min()}, {0.0, -0.0},
        {L::denorm_min()}, {1.0}, {L::max()}, {L::infinity()},
        {L::quiet_NaN(), -L::quiet_NaN(), L::signaling_NaN()}};
    auto enc = [](double d) { return encode([&](DexKeyBuf *b) { dex_kb_float8(b, d); }); };
    for (size_t i = 0; i < groups.size(); i++)
        for (size_t j = 0; j < groups.size(); j++)
            for (double x : groups[i])
                for (double y : groups[j])
                    EXPECT_EQ(sign(cmp(enc(x), enc(y))), i < j ? -1 : i > j ? 1 : 0) << x << " vs " << y;
}

// ---- interval and timetz --------------------------------------------------

__int128 span(int64_t time, int32_t day, int32_t month) {
    return static_cast<__int128>(time) +
           (static_cast<__int128>(month) * 30 + day) * static_cast<__int128>(86400000000LL);
}

Bytes interval(int64_t time, int32_t day, int32_t month) {
    return encode([&](DexKeyBuf *b) { dex_kb_interval(b, time, day, month); });
}

TEST(KeyBytesInterval, SpanIsExactAndOrdered) {
    using I32 = std::numeric_limits<int32_t>;
    using I64 = std::numeric_limits<int64_t>;
    struct Iv { int64_t t; int32_t d, m; };
    std::vector<Iv> v = {{0, 0, 0}, {0, 30, 0}, {0, 0, 1}, {86400000000LL * 30, 0, 0}, {-1, 0, 0}, {1, 0, 0},
                         {0, -1, 0}, {0, 0, -1}, {I64::max(), I32::max(), I32::max()},
                         {I64::min(), I32::min(), I32::min()}, {I64::max(), I32::min(), I32::min()},
                         {I64::min(), I32::max(), I32::max()}, {0, I32::max(), 0}, {0, 0, I32::min()}};
    std::mt19937_64 rng(15);
    for (int i = 0; i < 300; i++)
        v.push_back({static_cast<int64_t>(rng()) >> (rng() % 64), static_cast<int32_t>(rng()) >> (rng() % 32),
                     static_cast<int32_t>(rng()) >> (rng() % 32)});
    // the 16 bytes are the 128-bit span, sign-flipped, big-endian
    for (const auto &x : v) {
        unsigned __int128 u = static_cast<unsigned __int128>(span(x.t, x.d, x.m)) ^
                              (static_cast<unsigned __int128>(1) << 127);
        Bytes want;
        for (int s = 120; s >= 0; s -= 8) want.push_back(static_cast<uint8_t>(u >> s));
        EXPECT_EQ(interval(x.t, x.d, x.m), want) << x.t << " " << x.d << " " << x.m;
    }
    for (const auto &x : v)
        for (const auto &y : v) {
            __int128 a = span(x.t, x.d, x.m), b = span(y.t, y.d, y.m);
            ASSERT_EQ(sign(cmp(interval(x.t, x.d, x.m), interval(y.t, y.d, y.m))), a < b ? -1 : a > b ? 1 : 0);
        }
    EXPECT_EQ(interval(0, 0, 1), interval(0, 30, 0));  // '1 month' = '30 days'
    EXPECT_EQ(interval(86400000000LL, 0, 0), interval(0, 1, 0));  // '24 hours' = '1 day'
}

TEST(KeyBytesTimetz, UtcTimeThenZone) {
    auto enc = [](int64_t t, int32_t z) { return encode([&](DexKeyBuf *b) { dex_kb_timetz(b, t, z); }); };
    const int64_t h = 3600000000LL;
    // 12:00+02 (zone -7200) is 10:00 UTC; 11:00+01 (zone -3600) too: same instant, ordered by zone
    EXPECT_LT(cmp(enc(12 * h, -7200), enc(11 * h, -3600)), 0);
    EXPECT_LT(cmp(enc(11 * h, -3600), enc(10 * h, 0)), 0);
    EXPECT_LT(cmp(enc(10 * h, 0), enc(10 * h + 1, 0)), 0);
    EXPECT_LT(cmp(enc(15 * h, 0), enc(0, 57599)), 0);  // 00:00-15:59:59 is 15:59:59 UTC
    EXPECT_GT(cmp(enc(16 * h, 0), enc(0, 57599)), 0);
    EXPECT_EQ(cmp(enc(5 * h, 3600), enc(5 * h, 3600)), 0);
}

// ---- numeric ---------------------------------------------------------------

Bytes numeric(const char *text) {
    return encode([&](DexKeyBuf *b) { ASSERT_EQ(dex_kb_numeric_text(b, text), 0) << text; });
}

TEST(KeyBytesNumeric, OrderAndScaleFreeEquality) {
    // ascending groups of equal values, as numeric_cmp orders them
    std::vector<std::vector<const char *>> groups = {
        {"-Infinity"},
        {"-100000000000000000000000000000000000000000"},
        {"-1000", "-1000.000"},
        {"-999.99"},
        {"-123.4567"},
        {"-123.456", "-123.4560"},
        {"-10"},
        {"-9.9999999999999999999"},
        {"-1.5"},
        {"-1.05"},
        {"-1", "-1.0", "-1.00"},
        {"-0.1"},
        {"-0.01", "-0.010"},
        {"-0.000000000000000000001"},
        {"0", "0.0", "0.00000", "-0", "-0.0"},
        {"0.000000000000000000001"},
        {"0.001", "0.0010", "0.001000"},
        {"0.01"},
        {"0.0101"},
        {"0.011"},
        {"0.1"},
        {"1", "1.0", "1.00", "01"},
        {"1.000000000000000000001"},
        {"1.05"},
        {"1.5"},
        {"9"},
        {"9.5"},
        {"10", "10.0"},
        {"10.01"},
        {"99"},
        {"99.99"},
        {"100"},
        {"101"},
        {"110"},
        {"123456789012345678901234567890"},
        {"1000000000000000000000000000000"},
        {"Infinity"},
        {"NaN"},
    };
    size_t pairs = 0;
    for (size_t i = 0; i < groups.size(); i++)
        for (size_t j = 0; j < groups.size(); j++)
            for (const char *x : groups[i])
                for (const char *y : groups[j]) {
                    EXPECT_EQ(sign(cmp(numeric(x), numeric(y))), i < j ? -1 : i > j ? 1 : 0)
                        << x << " vs " << y;
                    pairs++;
                }
    EXPECT_GT(pairs, 1500u);
    // 1.00 -> class, exponent 1, pair "10" -> 11, end
    EXPECT_EQ(numeric("1.00"), (Bytes{DEX_KB_NUM_POS, 0x80, 0, 0, 1, 11, 0x00}));
    EXPECT_EQ(numeric("NaN"), (Bytes{DEX_KB_NUM_NAN}));
}

TEST(KeyBytesNumeric, RejectsWhatIsNotPlainDecimal) {
    DexKeyBuf b = {nullptr, 0, 0, grow};
    for (const char *bad : {"", "-", "1e5", "1.2.3", ".5", "abc", "--1", "1 "})
        EXPECT_EQ(dex_kb_numeric_text(&b, bad), -1) << bad;
    std::free(b.data);
}

// ---- multi-column keys ----------------------------------------------------

// (s text ASC, t text DESC NULLS FIRST, n int8 ASC NULLS LAST): std::nullopt-like via flags
struct Row {
    bool s_null;
    std::string s;
    bool t_null;
    std::string t;
    bool n_null;
    int64_t n;
};

Bytes row_key(const Row &r) {
    return encode([&](DexKeyBuf *b) {
        size_t at = dex_kb_column_begin(b, r.s_null, 0);
        if (!r.s_null) dex_kb_string(b, r.s.data(), r.s.size());
        dex_kb_column_end(b, at, 0);
        at = dex_kb_column_begin(b, r.t_null, 1);
        if (!r.t_null) dex_kb_string(b, r.t.data(), r.t.size());
        dex_kb_column_end(b, at, 1);
        at = dex_kb_column_begin(b, r.n_null, 0);
        if (!r.n_null) dex_kb_int64(b, r.n);
        dex_kb_column_end(b, at, 0);
    });
}

// NULLS LAST/FIRST as given, DESC reverses only the value order
int col_cmp(bool an, bool bn, int value_cmp, bool nulls_first, bool desc) {
    if (an || bn) {
        if (an && bn) return 0;
        return (an ? -1 : 1) * (nulls_first ? 1 : -1);
    }
    return desc ? -value_cmp : value_cmp;
}

int ref_row_cmp(const Row &a, const Row &b) {
    int c = col_cmp(a.s_null, b.s_null, ref_string_cmp(a.s, b.s), false, false);
    if (c) return c;
    c = col_cmp(a.t_null, b.t_null, ref_string_cmp(a.t, b.t), true, true);
    if (c) return c;
    return col_cmp(a.n_null, b.n_null, a.n < b.n ? -1 : a.n > b.n ? 1 : 0, false, false);
}

TEST(KeyBytesMultiColumn, ConcatenationOrdersLikeTheColumns) {
    const std::vector<std::string> vals = {"", std::string("\0", 1), "a", std::string("a\0", 2), "ab", "\xff"};
    std::vector<Row> rows;
    for (int sn = 0; sn < 2; sn++)
        for (const auto &s : vals) {
            if (sn && &s != &vals[0]) continue;
            for (int tn = 0; tn < 2; tn++)
                for (const auto &t : vals) {
                    if (tn && &t != &vals[0]) continue;
                    for (int nn = 0; nn < 2; nn++)
                        for (int64_t n : {int64_t{-1}, int64_t{0}, int64_t{7}}) {
                            if (nn && n != -1) continue;
                            rows.push_back({sn == 1, s, tn == 1, t, nn == 1, n});
                        }
                }
        }
    size_t pairs = 0;
    for (const auto &a : rows)
        for (const auto &b : rows) {
            ASSERT_EQ(sign(cmp(row_key(a), row_key(b))), ref_row_cmp(a, b))
                << testing::PrintToString(a.s) << "/" << testing::PrintToString(a.t) << "/" << a.n << " vs "
                << testing::PrintToString(b.s) << "/" << testing::PrintToString(b.t) << "/" << b.n;
            pairs++;
        }
    EXPECT_EQ(pairs, rows.size() * rows.size());
    EXPECT_GT(rows.size(), 150u);
}

TEST(KeyBytesMultiColumn, HeadersLeaveRoomForBounds) {
    // -inf / +inf bounds can be 0x00 / 0xFF: no column starts with either
    EXPECT_GT(DEX_KB_NULL_FIRST, 0x00);
    EXPECT_LT(DEX_KB_NULL_FIRST, DEX_KB_VALUE);
    EXPECT_LT(DEX_KB_VALUE, DEX_KB_NULL_LAST);
    EXPECT_LT(DEX_KB_NULL_LAST, 0xFF);
}

}  // namespace

// Reading encodings back (index-only scans): spans end exactly where the
// value does, ASC and DESC, with a following byte present; strings decode to
// what was encoded; malformed bytes give 0, never a shorter value.
TEST(KeyBytesReadBack, StringSpanAndDecodeRoundTrip) {
    std::mt19937 rng(7);
    for (int iter = 0; iter < 2000; iter++) {
        std::string s(rng() % 12, '\0');
        for (auto &c : s) c = static_cast<char>(rng() % 4 == 0 ? 0 : rng() % 256);
        for (uint8_t inv : {uint8_t{0}, uint8_t{0xFF}}) {
            Bytes e = encode([&](DexKeyBuf *b) { dex_kb_string(b, s.data(), s.size()); });
            if (inv) e = inverted(e);
            size_t span = e.size();
            e.push_back(0x02);  // what follows: the next column's header
            ASSERT_EQ(dex_kb_string_span(e.data(), e.size(), inv), span);
            std::vector<uint8_t> out(span);
            size_t n = dex_kb_string_decode(e.data(), span, inv, out.data());
            ASSERT_EQ(std::string(out.begin(), out.begin() + n), s);
        }
    }
}

TEST(KeyBytesReadBack, MalformedStringsHaveNoSpan) {
    const uint8_t unterminated[] = {'a', 'b', 0x00};
    const uint8_t bad_escape[] = {'a', 0x00, 0x07, 0x00, 0x00};
    EXPECT_EQ(dex_kb_string_span(unterminated, sizeof unterminated, 0), 0u);
    EXPECT_EQ(dex_kb_string_span(bad_escape, sizeof bad_escape, 0), 0u);
}

TEST(KeyBytesReadBack, NumericSpan) {
    for (const char *t : {"0", "-0.00", "1", "-1", "12345.678", "-0.000001", "100", "NaN",
                          "Infinity", "-Infinity", "99999999999999999999.5"}) {
        for (uint8_t inv : {uint8_t{0}, uint8_t{0xFF}}) {
            Bytes e = encode([&](DexKeyBuf *b) { ASSERT_EQ(dex_kb_numeric_text(b, t), 0); });
            if (inv) e = inverted(e);
            size_t span = e.size();
            e.push_back(0x00);
            e.push_back(0xFF);
            EXPECT_EQ(dex_kb_numeric_span(e.data(), e.size(), inv), span) << t;
        }
    }
    const uint8_t bad_class[] = {0x09};
    EXPECT_EQ(dex_kb_numeric_span(bad_class, 1, 0), 0u);
}

TEST(KeyBytesReadBack, Int64RoundTrip) {
    for (int64_t v : {std::numeric_limits<int64_t>::min(), int64_t{-1}, int64_t{0}, int64_t{42},
                      std::numeric_limits<int64_t>::max()}) {
        for (uint8_t inv : {uint8_t{0}, uint8_t{0xFF}}) {
            Bytes e = encode([&](DexKeyBuf *b) { dex_kb_int64(b, v); });
            if (inv) e = inverted(e);
            EXPECT_EQ(dex_kb_read_int64(e.data(), inv), v);
        }
    }
}

// Narrow images (DEX_META_NARROW): each width keeps the signed order of the
// values in its type's range, round-trips, and is the type's own width.
TEST(KeyBytesNarrow, OrderAndRoundTripPerWidth) {
    struct Case { int width; int64_t min; int64_t max; };
    const Case cases[] = {
        {1, 0, 1},                                              // bool
        {2, std::numeric_limits<int16_t>::min(), std::numeric_limits<int16_t>::max()},
        {4, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()},
        {4, 0, int64_t{0xFFFFFFFF}},                            // oid
    };
    for (const Case &c : cases) {
        std::vector<int64_t> vals = {c.min, c.min + 1, c.max - 1, c.max};
        if (c.min < 0 && c.max > 0) vals.insert(vals.end(), {int64_t{-1}, int64_t{0}, int64_t{1}});
        std::sort(vals.begin(), vals.end());
        vals.erase(std::unique(vals.begin(), vals.end()), vals.end());
        std::vector<Bytes> enc;
        for (int64_t v : vals) {
            Bytes e = encode([&](DexKeyBuf *b) { dex_kb_image_narrow(b, v, c.width, c.min); });
            ASSERT_EQ(e.size(), size_t(c.width)) << v;
            EXPECT_EQ(dex_kb_read_image_narrow(e.data(), c.width, c.min, 0), v);
            EXPECT_EQ(dex_kb_read_image_narrow(inverted(e).data(), c.width, c.min, 0xFF), v);
            enc.push_back(e);
        }
        for (size_t i = 0; i + 1 < enc.size(); i++) {
            EXPECT_LT(enc[i], enc[i + 1]) << "width " << c.width << " at " << vals[i];
            EXPECT_GT(inverted(enc[i]), inverted(enc[i + 1]));
        }
    }
}
