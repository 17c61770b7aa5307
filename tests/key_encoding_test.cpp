// The float image of tree/key_encoding.h: btree's float order over edge values,
// as unsigned key values and as the int64 the glue hands around.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "tree/key_encoding.h"

namespace {

using Lim = std::numeric_limits<double>;

double with_bits(uint64_t bits) {
    double d;
    std::memcpy(&d, &bits, sizeof(d));
    return d;
}

// Strictly ascending in btree's float order (float8_cmp_internal).
const std::vector<double> kAscending = {
    -Lim::infinity(),
    -Lim::max(),
    -1e300,
    -static_cast<double>(std::numeric_limits<float>::max()),
    -1.5,
    -1.0,
    -Lim::min(),
    -Lim::denorm_min(),
    0.0,
    Lim::denorm_min(),
    Lim::min(),
    static_cast<double>(std::numeric_limits<float>::denorm_min()),
    1.0,
    1.0 + Lim::epsilon(),
    1.5,
    static_cast<double>(std::numeric_limits<float>::max()),
    1e300,
    Lim::max(),
    Lim::infinity(),
    Lim::quiet_NaN(),
};

TEST(KeyEncodingFloat, EdgeValuesAscend) {
    for (size_t i = 0; i + 1 < kAscending.size(); i++) {
        uint64_t a = dex_key_from_float8(kAscending[i]);
        uint64_t b = dex_key_from_float8(kAscending[i + 1]);
        EXPECT_LT(a, b) << kAscending[i] << " vs " << kAscending[i + 1];
        // the int64 the glue uses orders the same way (signed)
        EXPECT_LT(DEX_KEY_TO_INT64(a), DEX_KEY_TO_INT64(b)) << kAscending[i];
    }
}

TEST(KeyEncodingFloat, AgreesWithNumericOrderPairwise) {
    for (double x : kAscending)
        for (double y : kAscending) {
            if (std::isnan(x) || std::isnan(y))
                continue;
            uint64_t a = dex_key_from_float8(x), b = dex_key_from_float8(y);
            EXPECT_EQ(x < y, a < b) << x << " " << y;
            EXPECT_EQ(x == y, a == b) << x << " " << y;
        }
}

TEST(KeyEncodingFloat, SignedZerosAreOneValue) {
    EXPECT_EQ(dex_key_from_float8(-0.0), dex_key_from_float8(0.0));
    EXPECT_EQ(dex_key_from_float8(0.0), DEX_KEY_FLOAT8_SIGN);  // 0.0 is the middle
    EXPECT_EQ(DEX_KEY_TO_INT64(dex_key_from_float8(0.0)), 0);
}

TEST(KeyEncodingFloat, AllNaNsAreOneValueAboveInfinity) {
    const uint64_t nans[] = {
        UINT64_C(0x7FF8000000000000),  // quiet
        UINT64_C(0x7FF0000000000001),  // signalling, smallest payload
        UINT64_C(0x7FFFFFFFFFFFFFFF),  // largest payload
        UINT64_C(0xFFF8000000000000),  // negative quiet
        UINT64_C(0xFFFFFFFFFFFFFFFF),  // negative, largest payload
    };
    uint64_t want = dex_key_from_float8(Lim::quiet_NaN());
    for (uint64_t bits : nans) {
        double d = with_bits(bits);
        ASSERT_TRUE(std::isnan(d));
        EXPECT_EQ(dex_key_from_float8(d), want) << std::hex << bits;
    }
    EXPECT_GT(want, dex_key_from_float8(Lim::infinity()));
    EXPECT_LT(DEX_KEY_TO_INT64(want), INT64_MAX);  // room above: no int64 overflow
    EXPECT_GT(DEX_KEY_TO_INT64(dex_key_from_float8(-Lim::infinity())), INT64_MIN);
}

TEST(KeyEncodingFloat, Float4WidensToTheSameImage) {
    // a float4 column stores the image of its value widened to double, so a
    // float8 argument equal to it (btfloat48cmp) finds it
    const float values[] = {-std::numeric_limits<float>::infinity(), -3.25f, -0.0f, 0.0f,
                            std::numeric_limits<float>::denorm_min(), 0.1f,
                            std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity()};
    for (float f : values)
        EXPECT_EQ(dex_key_from_float8(static_cast<double>(f)),
                  dex_key_from_float8(static_cast<double>(static_cast<float>(static_cast<double>(f)))));
    // 0.1f widened is not 0.1: the images differ, as float48eq says
    EXPECT_NE(dex_key_from_float8(static_cast<double>(0.1f)), dex_key_from_float8(0.1));
    EXPECT_LT(dex_key_from_float8(0.1), dex_key_from_float8(static_cast<double>(0.1f)));
}

TEST(KeyEncodingFloat, BitTransformIsAConstantExpression) {
    static_assert(DEX_KEY_FROM_FLOAT8_BITS(UINT64_C(0)) == DEX_KEY_FLOAT8_SIGN);
    static_assert(DEX_KEY_FROM_FLOAT8_BITS(UINT64_C(0x8000000000000001)) ==
                  UINT64_C(0x7FFFFFFFFFFFFFFE));
    SUCCEED();
}

}  // namespace

// Index-only scans give a column back from its key (extension/dexkeys.c,
// dex_image_datum): every returnable type's image is its value as an int64
// (int2/4/8, oid, bool, time, date with ±infinity at INT32_MIN/MAX,
// timestamp(tz) with ±infinity at INT64_MIN/MAX), so the key value must give
// that int64 back bit for bit, at the extremes too, and keep its order.
TEST(KeyEncodingInt64, RoundTripIsTheIdentityAtTheExtremes) {
    const std::vector<int64_t> ascending = {
        std::numeric_limits<int64_t>::min(),      // timestamp -infinity, int8 min
        std::numeric_limits<int64_t>::min() + 1,
        -211813488000000000LL,                    // MIN_TIMESTAMP (4714-11-24 BC)
        std::numeric_limits<int32_t>::min(),      // date -infinity, int4 min
        std::numeric_limits<int16_t>::min(),
        -1,
        0,                                        // false, time 00:00
        1,                                        // true
        std::numeric_limits<int16_t>::max(),
        std::numeric_limits<int32_t>::max(),      // date infinity, int4 max
        4294967295LL,                             // oid max
        86400000000LL,                            // time 24:00:00
        9223371331200000000LL - 1,                // END_TIMESTAMP - 1: last finite timestamp
        std::numeric_limits<int64_t>::max() - 1,
        std::numeric_limits<int64_t>::max(),      // timestamp infinity, int8 max
    };
    for (size_t i = 0; i < ascending.size(); i++) {
        int64_t v = ascending[i];
        EXPECT_EQ(DEX_KEY_TO_INT64(DEX_KEY_FROM_INT64(v)), v) << v;
        if (i > 0) {
            EXPECT_LT(DEX_KEY_FROM_INT64(ascending[i - 1]), DEX_KEY_FROM_INT64(v)) << v;
        }
    }
}

// Why float4/float8 are not returnable: the image forgets what SQL calls
// equal but IEEE spells differently, so no decoder can give -0 or a NaN's
// payload back (btree returns -0 for a stored -0).
TEST(KeyEncodingFloat, ImageIsNotInvertible) {
    EXPECT_EQ(dex_key_from_float8(-0.0), dex_key_from_float8(0.0));
    EXPECT_EQ(dex_key_from_float8(with_bits(UINT64_C(0x7FF8000000000001))),
              dex_key_from_float8(with_bits(UINT64_C(0xFFF8000000000000))));
}
