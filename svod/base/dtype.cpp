#include "svod/base/dtype.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "svod/base/error.h"

namespace svod {

namespace {

struct DTypeNames {
  DType type;
  std::string_view name;
  std::string_view numpy_name;
  std::string_view c_type;
  std::string_view descr;  // empty where numpy has no such type
};

constexpr std::array<DTypeNames, 13> kNames = {{
    {DType::Bool, "bool", "bool", "bool", "|b1"},
    {DType::I8, "i8", "int8", "int8_t", "|i1"},
    {DType::U8, "u8", "uint8", "uint8_t", "|u1"},
    {DType::I16, "i16", "int16", "int16_t", "<i2"},
    {DType::U16, "u16", "uint16", "uint16_t", "<u2"},
    {DType::I32, "i32", "int32", "int32_t", "<i4"},
    {DType::U32, "u32", "uint32", "uint32_t", "<u4"},
    {DType::I64, "i64", "int64", "int64_t", "<i8"},
    {DType::U64, "u64", "uint64", "uint64_t", "<u8"},
    {DType::F16, "f16", "float16", "_Float16", "<f2"},
    {DType::BF16, "bf16", "bfloat16", "__bf16", ""},
    {DType::F32, "f32", "float32", "float", "<f4"},
    {DType::F64, "f64", "float64", "double", "<f8"},
}};

const DTypeNames& names_of(DType t) noexcept { return kNames[static_cast<size_t>(t)]; }

std::string valid_names() {
  std::string out;
  for (const auto& n : kNames) {
    if (!out.empty()) out += ", ";
    out += n.name;
  }
  return out;
}

// Rounds a double to a binary format with kExpBits exponent bits and
// kMantBits stored mantissa bits (f16: 5/10, bf16: 8/7), ties to even. Every
// float is exactly a double, so float inputs share this one careful routine.
template <int kExpBits, int kMantBits>
uint16_t narrow(double value) noexcept {
  constexpr int kBias = (1 << (kExpBits - 1)) - 1;
  constexpr int kMinExp = 1 - kBias;  // exponent of the smallest normal
  constexpr uint64_t kInf = uint64_t{(1u << kExpBits) - 1} << kMantBits;
  constexpr uint64_t kDoubleMant = (uint64_t{1} << 52) - 1;

  uint64_t x = std::bit_cast<uint64_t>(value);
  const auto sign = static_cast<uint16_t>((x >> 63) << (kExpBits + kMantBits));
  x &= ~(uint64_t{1} << 63);
  const auto exp_field = static_cast<int>(x >> 52);
  if (exp_field == 0x7ff) {
    if ((x & kDoubleMant) == 0) return static_cast<uint16_t>(sign | kInf);
    const uint64_t payload = (x & kDoubleMant) >> (52 - kMantBits);
    return static_cast<uint16_t>(sign | kInf | (uint64_t{1} << (kMantBits - 1)) | payload);
  }
  // Double subnormals lie far below half the smallest subnormal of either format.
  if (exp_field == 0) return sign;

  const int e = exp_field - 1023;
  const uint64_t m = (x & kDoubleMant) | (uint64_t{1} << 52);  // value = m * 2^(e-52)
  // The result is a whole multiple of 2^q; below the normal range q stops
  // shrinking, which is what makes the result subnormal.
  const int q = std::max(e, kMinExp) - kMantBits;
  const int shift = q - (e - 52);  // >= 52 - kMantBits > 0
  if (shift >= 64) return sign;    // below 2^(q-11): rounds to zero
  uint64_t r = m >> shift;
  const uint64_t rem = m & ((uint64_t{1} << shift) - 1);
  const uint64_t half = uint64_t{1} << (shift - 1);
  if (rem > half || (rem == half && (r & 1))) ++r;
  // Normal: r holds the implicit bit, which adds one to the biased exponent
  // (e + kBias - 1) and carries naturally when rounding reaches 2^(kMantBits+1).
  // Subnormal: r is the mantissa, and reaching 2^kMantBits gives the smallest normal.
  const uint64_t bits = e >= kMinExp ? (static_cast<uint64_t>(e + kBias - 1) << kMantBits) + r : r;
  if (bits >= kInf) return static_cast<uint16_t>(sign | kInf);
  return static_cast<uint16_t>(sign | bits);
}

template <typename T>
T load(const void* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
void store(void* p, T v) noexcept {
  std::memcpy(p, &v, sizeof(T));
}

// Truncates toward zero and clamps into T; NaN gives 0.
template <typename T>
T saturate(double v) noexcept {
  if (std::isnan(v)) return 0;
  // Both bounds are powers of two (or one less), so lo and hi + 1 are exact doubles.
  constexpr double kLo = static_cast<double>(std::numeric_limits<T>::min());
  constexpr double kHiPlusOne = static_cast<double>(std::numeric_limits<T>::max() / 2 + 1) * 2.0;
  if (v <= kLo) return std::numeric_limits<T>::min();
  if (v >= kHiPlusOne) return std::numeric_limits<T>::max();
  return static_cast<T>(std::trunc(v));
}

}  // namespace

std::string_view to_string(DType t) noexcept { return names_of(t).name; }

std::optional<size_t> element_count(std::span<const size_t> shape) noexcept {
  if (std::find(shape.begin(), shape.end(), size_t{0}) != shape.end()) return 0;  // in any order
  size_t count = 1;
  for (size_t d : shape)
    if (__builtin_mul_overflow(count, d, &count)) return std::nullopt;
  return count;
}

DType parse_dtype(std::string_view text) {
  for (const auto& n : kNames) {
    if (text == n.name || text == n.numpy_name) return n.type;
  }
  throw make_error(ErrorKind::Validation,
                   "unknown element type \"{}\": expected one of {} (or a numpy name such as "
                   "int32, float16, bfloat16)",
                   text, valid_names());
}

std::string_view c_type_name(DType t) noexcept { return names_of(t).c_type; }

std::string_view numpy_descr(DType t) {
  const auto& n = names_of(t);
  if (n.descr.empty()) {
    throw make_error(ErrorKind::Unsupported,
                     "numpy has no {} type: store the bit patterns as \"<u2\" or convert to f32",
                     n.name);
  }
  return n.descr;
}

DType parse_numpy_descr(std::string_view descr) {
  if (descr.size() >= 2 && descr[0] == '>') {
    throw make_error(ErrorKind::Unsupported,
                     "big-endian numpy type \"{}\": only little-endian data is supported", descr);
  }
  if (descr.size() >= 2 && (descr[0] == '<' || descr[0] == '|' || descr[0] == '=')) {
    const std::string_view body = descr.substr(1);
    for (const auto& n : kNames) {
      if (!n.descr.empty() && n.descr.substr(1) == body) return n.type;
    }
  }
  throw make_error(ErrorKind::Validation,
                   "unknown numpy type \"{}\": expected a little-endian bool, integer or float "
                   "such as \"<f4\", \"<i8\" or \"|b1\"",
                   descr);
}

uint16_t float_to_f16(float value) noexcept { return narrow<5, 10>(value); }
uint16_t float_to_bf16(float value) noexcept { return narrow<8, 7>(value); }
uint16_t double_to_f16(double value) noexcept { return narrow<5, 10>(value); }
uint16_t double_to_bf16(double value) noexcept { return narrow<8, 7>(value); }

float f16_to_float(uint16_t bits) noexcept {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  const uint32_t exp = (bits >> 10) & 0x1f;
  const uint32_t mant = bits & 0x3ff;
  uint32_t out;
  if (exp == 0x1f) {
    out = sign | 0x7f800000 | (mant << 13) | (mant != 0 ? 0x00400000 : 0);
  } else if (exp != 0) {
    out = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  } else {
    // Zero or subnormal: mant * 2^-24 is exact in float.
    out = sign | std::bit_cast<uint32_t>(static_cast<float>(mant) * 0x1p-24f);
  }
  return std::bit_cast<float>(out);
}

float bf16_to_float(uint16_t bits) noexcept {
  uint32_t out = static_cast<uint32_t>(bits) << 16;
  if ((out & 0x7f800000) == 0x7f800000 && (out & 0x007fffff) != 0) out |= 0x00400000;
  return std::bit_cast<float>(out);
}

double load_as_double(DType t, const void* p) noexcept {
  switch (t) {
    case DType::Bool:
      return load<uint8_t>(p) != 0 ? 1.0 : 0.0;
    case DType::I8:
      return load<int8_t>(p);
    case DType::U8:
      return load<uint8_t>(p);
    case DType::I16:
      return load<int16_t>(p);
    case DType::U16:
      return load<uint16_t>(p);
    case DType::I32:
      return load<int32_t>(p);
    case DType::U32:
      return load<uint32_t>(p);
    case DType::I64:
      return static_cast<double>(load<int64_t>(p));
    case DType::U64:
      return static_cast<double>(load<uint64_t>(p));
    case DType::F16:
      return f16_to_float(load<uint16_t>(p));
    case DType::BF16:
      return bf16_to_float(load<uint16_t>(p));
    case DType::F32:
      return load<float>(p);
    case DType::F64:
      return load<double>(p);
  }
  return 0.0;
}

void store_from_double(DType t, void* p, double v) noexcept {
  switch (t) {
    case DType::Bool:
      store<uint8_t>(p, v != 0.0 ? 1 : 0);
      return;
    case DType::I8:
      store(p, saturate<int8_t>(v));
      return;
    case DType::U8:
      store(p, saturate<uint8_t>(v));
      return;
    case DType::I16:
      store(p, saturate<int16_t>(v));
      return;
    case DType::U16:
      store(p, saturate<uint16_t>(v));
      return;
    case DType::I32:
      store(p, saturate<int32_t>(v));
      return;
    case DType::U32:
      store(p, saturate<uint32_t>(v));
      return;
    case DType::I64:
      store(p, saturate<int64_t>(v));
      return;
    case DType::U64:
      store(p, saturate<uint64_t>(v));
      return;
    case DType::F16:
      store(p, double_to_f16(v));
      return;
    case DType::BF16:
      store(p, double_to_bf16(v));
      return;
    case DType::F32:
      store(p, static_cast<float>(v));
      return;
    case DType::F64:
      store(p, v);
      return;
  }
}

}  // namespace svod
