#include "svod/base/dtype.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "svod/base/error.h"

namespace svod {
namespace {

bool f16_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0; }
bool bf16_is_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x007f) != 0; }
float bits_to_float(uint32_t bits) { return std::bit_cast<float>(bits); }

template <typename Fn>
void expect_error(ErrorKind kind, Fn&& fn, std::initializer_list<std::string_view> fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (auto fragment : fragments) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
          << "message \"" << e.what() << "\" lacks \"" << fragment << "\"";
    }
  }
}

TEST(DType, Sizes) {
  EXPECT_EQ(size_of(DType::Bool), 1u);
  EXPECT_EQ(size_of(DType::I8), 1u);
  EXPECT_EQ(size_of(DType::U8), 1u);
  EXPECT_EQ(size_of(DType::I16), 2u);
  EXPECT_EQ(size_of(DType::U16), 2u);
  EXPECT_EQ(size_of(DType::F16), 2u);
  EXPECT_EQ(size_of(DType::BF16), 2u);
  EXPECT_EQ(size_of(DType::I32), 4u);
  EXPECT_EQ(size_of(DType::U32), 4u);
  EXPECT_EQ(size_of(DType::F32), 4u);
  EXPECT_EQ(size_of(DType::I64), 8u);
  EXPECT_EQ(size_of(DType::U64), 8u);
  EXPECT_EQ(size_of(DType::F64), 8u);
  static_assert(size_of(DType::F64) == 8);
}

TEST(DType, ByteSizesAndElementCountsOverflowToNullopt) {
  EXPECT_EQ(byte_size(DType::F32, 10), 40u);
  EXPECT_EQ(byte_size(DType::F32, size_t{1} << 61), size_t{1} << 63);
  EXPECT_EQ(byte_size(DType::F32, size_t{1} << 62), std::nullopt);  // 2^64 wrapped to 0
  EXPECT_EQ(byte_size(DType::U8, SIZE_MAX), SIZE_MAX);
  EXPECT_EQ(byte_size(DType::U16, SIZE_MAX / 2 + 1), std::nullopt);
  const std::vector<size_t> none, square{size_t{1} << 32, size_t{1} << 32}, big{size_t{1} << 31, size_t{1} << 32};
  EXPECT_EQ(element_count(none), 1u);
  EXPECT_EQ(element_count(square), std::nullopt);  // wrapped to 0
  EXPECT_EQ(element_count(big), size_t{1} << 63);
  const std::vector<size_t> zero_first{0, SIZE_MAX, SIZE_MAX}, zero_last{SIZE_MAX, SIZE_MAX, 0};
  EXPECT_EQ(element_count(zero_first), 0u);
  EXPECT_EQ(element_count(zero_last), 0u);
}

TEST(DType, Classification) {
  int floats = 0;
  int integers = 0;
  for (DType t : kAllDTypes) {
    EXPECT_FALSE(is_float(t) && is_integer(t)) << to_string(t);
    floats += is_float(t);
    integers += is_integer(t);
    if (is_float(t)) {
      EXPECT_TRUE(is_signed(t)) << to_string(t);
    }
  }
  EXPECT_EQ(floats, 4);
  EXPECT_EQ(integers, 8);
  EXPECT_FALSE(is_float(DType::Bool));
  EXPECT_FALSE(is_integer(DType::Bool));
  EXPECT_FALSE(is_signed(DType::Bool));
  EXPECT_TRUE(is_signed(DType::I8));
  EXPECT_TRUE(is_signed(DType::I64));
  EXPECT_FALSE(is_signed(DType::U8));
  EXPECT_FALSE(is_signed(DType::U64));
  EXPECT_TRUE(is_float(DType::BF16));
}

TEST(DType, NamesRoundTrip) {
  const char* const expected[] = {"bool", "i8",  "u8",  "i16",  "u16", "i32", "u32",
                                  "i64",  "u64", "f16", "bf16", "f32", "f64"};
  for (size_t i = 0; i < kAllDTypes.size(); ++i) {
    EXPECT_EQ(to_string(kAllDTypes[i]), expected[i]);
    EXPECT_EQ(parse_dtype(expected[i]), kAllDTypes[i]);
  }
  EXPECT_EQ(parse_dtype("float32"), DType::F32);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::BF16);
  EXPECT_EQ(parse_dtype("uint64"), DType::U64);
  EXPECT_EQ(parse_dtype("int8"), DType::I8);
}

TEST(DType, ParseErrors) {
  for (const char* bad : {"", "f33", "F32", "float", " f32", "i32 ", "int"}) {
    SCOPED_TRACE(bad);
    expect_error(ErrorKind::Validation, [&] { parse_dtype(bad); },
                 {"unknown element type",
                  "bool, i8, u8, i16, u16, i32, u32, i64, u64, f16, bf16, "
                  "f32, f64"});
  }
  expect_error(ErrorKind::Validation, [] { parse_dtype("f33"); }, {"\"f33\""});
}

TEST(DType, CTypeNames) {
  EXPECT_EQ(c_type_name(DType::Bool), "bool");
  EXPECT_EQ(c_type_name(DType::I32), "int32_t");
  EXPECT_EQ(c_type_name(DType::U8), "uint8_t");
  EXPECT_EQ(c_type_name(DType::F16), "_Float16");
  EXPECT_EQ(c_type_name(DType::BF16), "__bf16");
  EXPECT_EQ(c_type_name(DType::F32), "float");
  EXPECT_EQ(c_type_name(DType::F64), "double");
}

TEST(DType, NumpyDescr) {
  EXPECT_EQ(numpy_descr(DType::F32), "<f4");
  EXPECT_EQ(numpy_descr(DType::Bool), "|b1");
  EXPECT_EQ(numpy_descr(DType::F16), "<f2");
  EXPECT_EQ(numpy_descr(DType::I8), "|i1");
  EXPECT_EQ(numpy_descr(DType::U64), "<u8");
  for (DType t : kAllDTypes) {
    if (t == DType::BF16) continue;
    EXPECT_EQ(parse_numpy_descr(numpy_descr(t)), t) << to_string(t);
  }
  EXPECT_EQ(parse_numpy_descr("=i4"), DType::I32);
  EXPECT_EQ(parse_numpy_descr("|u1"), DType::U8);
  expect_error(ErrorKind::Unsupported, [] { numpy_descr(DType::BF16); }, {"bf16", "<u2"});
  expect_error(ErrorKind::Unsupported, [] { parse_numpy_descr(">f4"); }, {"big-endian"});
  expect_error(ErrorKind::Validation, [] { parse_numpy_descr("<c8"); }, {"\"<c8\""});
  expect_error(ErrorKind::Validation, [] { parse_numpy_descr("f4"); }, {"unknown numpy type"});
  expect_error(ErrorKind::Validation, [] { parse_numpy_descr(""); }, {"unknown numpy type"});
}

// ---- f16 ----

TEST(F16, ExhaustiveRoundTrip) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float f = f16_to_float(h);
    const uint16_t back = float_to_f16(f);
    if (f16_is_nan(h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << bits;
      ASSERT_TRUE(f16_is_nan(back)) << std::hex << bits;
      ASSERT_EQ(back & 0x8000, h & 0x8000) << std::hex << bits;
      ASSERT_EQ(back | 0x0200, h | 0x0200) << "payload kept, quiet bit set: " << std::hex << bits;
    } else {
      ASSERT_EQ(back, h) << std::hex << bits;
      ASSERT_EQ(double_to_f16(f), h) << std::hex << bits;
    }
  }
}

TEST(F16, KnownValues) {
  EXPECT_EQ(f16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_float(0xc000), -2.0f);
  EXPECT_EQ(f16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_float(0x03ff), 1023 * std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_float(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(f16_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(f16_to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f16_to_float(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(f16_to_float(0x8000)));
  EXPECT_EQ(float_to_f16(0.0f), 0x0000);
  EXPECT_EQ(float_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_f16(0.1f), 0x2e66);
  EXPECT_EQ(float_to_f16(-3.5f), 0xc300);
}

TEST(F16, RoundsToNearestTiesToEven) {
  const float ulp = std::ldexp(1.0f, -10);  // spacing of f16 values in [1, 2)
  // 1 + ulp/2 lies halfway between 1 (even) and 1 + ulp (odd).
  EXPECT_EQ(float_to_f16(1.0f + ulp / 2), 0x3c00);
  // 1 + 3 ulp/2 lies halfway between 1 + ulp (odd) and 1 + 2 ulp (even).
  EXPECT_EQ(float_to_f16(1.0f + 3 * ulp / 2), 0x3c02);
  EXPECT_EQ(float_to_f16(1.0f + ulp / 2 + std::ldexp(1.0f, -20)), 0x3c01);
  EXPECT_EQ(float_to_f16(1.0f + ulp / 2 - std::ldexp(1.0f, -20)), 0x3c00);
  EXPECT_EQ(float_to_f16(-(1.0f + 3 * ulp / 2)), 0xbc02);
  // Rounding up carries into the exponent: 2 - ulp/4 becomes 2.
  EXPECT_EQ(float_to_f16(2.0f - ulp / 4), 0x4000);
}

TEST(F16, Overflow) {
  EXPECT_EQ(float_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(65519.99f), 0x7bff);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);  // halfway to 2^16, odd neighbour: up to inf
  EXPECT_EQ(float_to_f16(-65520.0f), 0xfc00);
  EXPECT_EQ(float_to_f16(1e6f), 0x7c00);
  EXPECT_EQ(float_to_f16(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(float_to_f16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_f16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(double_to_f16(1e300), 0x7c00);
}

TEST(F16, Subnormals) {
  const float tiny = std::ldexp(1.0f, -24);  // smallest f16 subnormal
  EXPECT_EQ(float_to_f16(tiny), 0x0001);
  EXPECT_EQ(float_to_f16(tiny / 2), 0x0000);            // tie, to even zero
  EXPECT_EQ(float_to_f16(tiny / 2 * 1.0001f), 0x0001);  // just above the tie
  EXPECT_EQ(float_to_f16(-tiny / 2), 0x8000);
  EXPECT_EQ(float_to_f16(3 * tiny / 2), 0x0002);  // tie between 1 and 2: even
  EXPECT_EQ(float_to_f16(5 * tiny / 2), 0x0002);  // tie between 2 and 3: even
  EXPECT_EQ(float_to_f16(1023 * tiny), 0x03ff);
  EXPECT_EQ(float_to_f16(1023.5f * tiny), 0x0400);  // rounds up into the normals
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(float_to_f16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(float_to_f16(-std::numeric_limits<float>::denorm_min()), 0x8000);
  EXPECT_EQ(double_to_f16(std::numeric_limits<double>::denorm_min()), 0x0000);
}

TEST(F16, NaN) {
  const uint16_t quiet = float_to_f16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(f16_is_nan(quiet));
  // A NaN whose payload sits only in bits that f16 drops must stay a NaN.
  const uint16_t low_payload = float_to_f16(bits_to_float(0x7f800001));
  EXPECT_TRUE(f16_is_nan(low_payload));
  EXPECT_EQ(low_payload, 0x7e00);
  EXPECT_EQ(float_to_f16(bits_to_float(0xff800001)), 0xfe00);
  EXPECT_EQ(float_to_f16(bits_to_float(0x7fc02000)), 0x7e01);  // top payload bits kept
  EXPECT_TRUE(std::isnan(f16_to_float(0x7c01)));
  EXPECT_TRUE(std::isnan(f16_to_float(0xfe00)));
  EXPECT_TRUE(f16_is_nan(double_to_f16(std::nan(""))));
}

// Narrowing from double rounds once: via float it would round twice.
TEST(F16, DoubleRoundsOnce) {
  const double x = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  EXPECT_EQ(float_to_f16(static_cast<float>(x)), 0x3c00);  // float rounding hits the tie
  EXPECT_EQ(double_to_f16(x), 0x3c01);
  EXPECT_EQ(double_to_f16(65519.999999), 0x7bff);
  EXPECT_EQ(double_to_f16(65520.0), 0x7c00);
}

// For random floats in range, the result is a nearest f16, the even one on ties.
TEST(F16, RandomNearest) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = rng();
    // Concentrate on the f16 range: exponents 2^-26 .. 2^16.
    bits = (bits & 0x807fffff) | ((101 + rng() % 43) << 23);
    const float f = bits_to_float(bits);
    const uint16_t h = float_to_f16(f);
    const double err = std::fabs(static_cast<double>(f16_to_float(h)) - f);
    if ((h & 0x7fff) == 0x7c00) {
      ASSERT_GE(std::fabs(f), 65520.0f) << f;
      continue;
    }
    // The neighbours of h that are finite f16 values with the same sign.
    for (int step : {-1, 1}) {
      const int nb = (h & 0x7fff) + step;
      if (nb < 0 || nb >= 0x7c00) continue;
      const auto n = static_cast<uint16_t>((h & 0x8000) | nb);
      const double nerr = std::fabs(static_cast<double>(f16_to_float(n)) - f);
      ASSERT_LE(err, nerr) << f;
      if (err == nerr) {
        ASSERT_EQ(h & 1, 0) << "tie must go to even: " << f;
      }
    }
#ifdef __FLT16_MANT_DIG__
    ASSERT_EQ(h, std::bit_cast<uint16_t>(static_cast<_Float16>(f))) << f;
#endif
  }
}

// ---- bf16 ----

TEST(BF16, ExhaustiveRoundTrip) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float f = bf16_to_float(h);
    const uint16_t back = float_to_bf16(f);
    if (bf16_is_nan(h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << bits;
      ASSERT_TRUE(bf16_is_nan(back)) << std::hex << bits;
      ASSERT_EQ(back | 0x0040, h | 0x0040) << std::hex << bits;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(f), bits << 16) << std::hex << bits;
      ASSERT_EQ(back, h) << std::hex << bits;
      ASSERT_EQ(double_to_bf16(f), h) << std::hex << bits;
    }
  }
}

TEST(BF16, RoundsToNearestTiesToEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  // bf16 keeps the top 16 bits of a float; the lower 16 decide the rounding.
  EXPECT_EQ(float_to_bf16(bits_to_float(0x3f808000)), 0x3f80);  // tie, even stays
  EXPECT_EQ(float_to_bf16(bits_to_float(0x3f818000)), 0x3f82);  // tie, odd goes up
  EXPECT_EQ(float_to_bf16(bits_to_float(0x3f808001)), 0x3f81);
  EXPECT_EQ(float_to_bf16(bits_to_float(0x3f807fff)), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(float_to_bf16(bits_to_float(0xbf818000)), 0xbf82);
  EXPECT_EQ(float_to_bf16(bits_to_float(0x3fffffff)), 0x4000);  // carry into the exponent
  EXPECT_EQ(float_to_bf16(3.140625f), 0x4049);
}

TEST(BF16, OverflowAndSubnormals) {
  EXPECT_EQ(float_to_bf16(bits_to_float(0x7f7f7fff)), 0x7f7f);
  EXPECT_EQ(float_to_bf16(bits_to_float(0x7f7f8000)), 0x7f80);  // tie above the max: inf
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(double_to_bf16(1e300), 0x7f80);
  EXPECT_EQ(float_to_bf16(bits_to_float(0x00010000)), 0x0001);
  EXPECT_EQ(float_to_bf16(bits_to_float(0x00008000)), 0x0000);  // tie, to even zero
  EXPECT_EQ(float_to_bf16(bits_to_float(0x00008001)), 0x0001);
  EXPECT_EQ(float_to_bf16(bits_to_float(0x00018000)), 0x0002);
  EXPECT_EQ(float_to_bf16(bits_to_float(0x007fffff)), 0x0080);  // up into the normals
  EXPECT_EQ(float_to_bf16(bits_to_float(0x80000001)), 0x8000);
  EXPECT_EQ(bf16_to_float(0x0001), bits_to_float(0x00010000));
}

TEST(BF16, NaNNeverBecomesInfinity) {
  for (uint32_t low : {0x00000001u, 0x00007fffu, 0x00008000u, 0x0000ffffu, 0x003fffffu}) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      const uint16_t h = float_to_bf16(bits_to_float(sign | 0x7f800000u | low));
      EXPECT_TRUE(bf16_is_nan(h)) << std::hex << low;
      EXPECT_EQ(h & 0x8000, sign >> 16);
    }
  }
  EXPECT_EQ(float_to_bf16(bits_to_float(0x7f800001)), 0x7fc0);
  EXPECT_EQ(float_to_bf16(bits_to_float(0x7fff0000)), 0x7fff);
  EXPECT_TRUE(bf16_is_nan(float_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(bf16_to_float(0x7f81)));
  EXPECT_TRUE(bf16_is_nan(double_to_bf16(-std::nan(""))));
}

TEST(BF16, RandomAgainstBitFormula) {
  std::mt19937 rng(11);
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t x = rng();
    const float f = bits_to_float(x);
    const uint16_t h = float_to_bf16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(bf16_is_nan(h));
      continue;
    }
    // The usual integer trick: add half an ulp minus one, plus one if odd.
    const auto want = static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
    ASSERT_EQ(h, want) << std::hex << x;
  }
}

// ---- load_as_double / store_from_double ----

double roundtrip(DType t, double v) {
  alignas(8) unsigned char buf[9] = {};
  store_from_double(t, buf + 1, v);  // deliberately misaligned
  return load_as_double(t, buf + 1);
}

TEST(DTypeValues, RoundTripsExactValues) {
  for (DType t : kAllDTypes) {
    SCOPED_TRACE(std::string(to_string(t)));
    EXPECT_EQ(roundtrip(t, 0.0), 0.0);
    EXPECT_EQ(roundtrip(t, 1.0), 1.0);
    if (t != DType::Bool) {
      EXPECT_EQ(roundtrip(t, 100.0), 100.0);
    }
    if (is_signed(t)) {
      EXPECT_EQ(roundtrip(t, -5.0), -5.0);
    }
  }
  EXPECT_EQ(roundtrip(DType::F64, 0.1), 0.1);
  EXPECT_EQ(roundtrip(DType::F32, 0.1), static_cast<double>(0.1f));
  EXPECT_EQ(roundtrip(DType::F16, 0.1), static_cast<double>(f16_to_float(0x2e66)));
  EXPECT_EQ(roundtrip(DType::BF16, 3.140625), 3.140625);
  EXPECT_EQ(roundtrip(DType::I64, -9007199254740992.0), -9007199254740992.0);
  EXPECT_EQ(roundtrip(DType::U32, 4294967295.0), 4294967295.0);
}

TEST(DTypeValues, IntegersTruncateAndSaturate) {
  EXPECT_EQ(roundtrip(DType::I32, 2.9), 2.0);
  EXPECT_EQ(roundtrip(DType::I32, -2.9), -2.0);
  EXPECT_EQ(roundtrip(DType::I8, 127.9), 127.0);
  EXPECT_EQ(roundtrip(DType::I8, 200.0), 127.0);
  EXPECT_EQ(roundtrip(DType::I8, -128.7), -128.0);
  EXPECT_EQ(roundtrip(DType::I8, -1000.0), -128.0);
  EXPECT_EQ(roundtrip(DType::U8, 255.5), 255.0);
  EXPECT_EQ(roundtrip(DType::U8, 256.0), 255.0);
  EXPECT_EQ(roundtrip(DType::U8, -0.5), 0.0);
  EXPECT_EQ(roundtrip(DType::U8, -7.0), 0.0);
  EXPECT_EQ(roundtrip(DType::U16, 1e9), 65535.0);
  EXPECT_EQ(roundtrip(DType::I16, -1e9), -32768.0);
  EXPECT_EQ(roundtrip(DType::U32, -1.0), 0.0);
  EXPECT_EQ(roundtrip(DType::I32, std::numeric_limits<double>::infinity()), 2147483647.0);
  EXPECT_EQ(roundtrip(DType::I32, std::nan("")), 0.0);

  unsigned char buf[8];
  store_from_double(DType::I64, buf, 1e30);
  int64_t i64;
  std::memcpy(&i64, buf, 8);
  EXPECT_EQ(i64, std::numeric_limits<int64_t>::max());
  store_from_double(DType::I64, buf, -1e30);
  std::memcpy(&i64, buf, 8);
  EXPECT_EQ(i64, std::numeric_limits<int64_t>::min());
  store_from_double(DType::I64, buf, 9223372036854775808.0);  // 2^63, just out of range
  std::memcpy(&i64, buf, 8);
  EXPECT_EQ(i64, std::numeric_limits<int64_t>::max());
  store_from_double(DType::I64, buf, 9223372036854774784.0);  // largest double below 2^63
  std::memcpy(&i64, buf, 8);
  EXPECT_EQ(i64, 9223372036854774784);
  uint64_t u64;
  store_from_double(DType::U64, buf, 18446744073709551616.0);  // 2^64
  std::memcpy(&u64, buf, 8);
  EXPECT_EQ(u64, std::numeric_limits<uint64_t>::max());
  store_from_double(DType::U64, buf, 9223372036854775808.0);
  std::memcpy(&u64, buf, 8);
  EXPECT_EQ(u64, uint64_t{1} << 63);
}

TEST(DTypeValues, Bool) {
  EXPECT_EQ(roundtrip(DType::Bool, 0.0), 0.0);
  EXPECT_EQ(roundtrip(DType::Bool, -0.0), 0.0);
  EXPECT_EQ(roundtrip(DType::Bool, 0.25), 1.0);
  EXPECT_EQ(roundtrip(DType::Bool, -3.0), 1.0);
  EXPECT_EQ(roundtrip(DType::Bool, std::nan("")), 1.0);
  const unsigned char two = 2;
  EXPECT_EQ(load_as_double(DType::Bool, &two), 1.0);
}

TEST(DTypeValues, FloatsRoundAndKeepSpecials) {
  EXPECT_EQ(roundtrip(DType::F16, 65520.0), std::numeric_limits<double>::infinity());
  EXPECT_EQ(roundtrip(DType::F16, 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)),
            1.0 + std::ldexp(1.0, -10));
  EXPECT_EQ(roundtrip(DType::F32, 1e300), std::numeric_limits<double>::infinity());
  EXPECT_EQ(roundtrip(DType::BF16, -1e300), -std::numeric_limits<double>::infinity());
  for (DType t : {DType::F16, DType::BF16, DType::F32, DType::F64}) {
    EXPECT_TRUE(std::isnan(roundtrip(t, std::nan("")))) << to_string(t);
    EXPECT_TRUE(std::signbit(roundtrip(t, -0.0))) << to_string(t);
  }
}

}  // namespace
}  // namespace svod
