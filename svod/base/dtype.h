// svod::DType — the element types of buffers and kernel parameters.
//
// Names, sizes, the C type a kernel declares, the numpy descriptor used in
// .npy files, and exact conversions for the two 16-bit float formats, which
// the host has no arithmetic for: IEEE binary16 (f16) and bfloat16 (bf16).
// load_as_double/store_from_double read and write one element of any type,
// for buffer initialisation and result comparison rather than hot loops.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace svod {

enum class DType { Bool, I8, U8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64 };

inline constexpr std::array<DType, 13> kAllDTypes = {
    DType::Bool, DType::I8,  DType::U8,  DType::I16,  DType::U16, DType::I32, DType::U32,
    DType::I64,  DType::U64, DType::F16, DType::BF16, DType::F32, DType::F64};

// Bytes per element; Bool is one byte holding 0 or 1.
constexpr size_t size_of(DType t) noexcept {
  switch (t) {
    case DType::Bool:
    case DType::I8:
    case DType::U8:
      return 1;
    case DType::I16:
    case DType::U16:
    case DType::F16:
    case DType::BF16:
      return 2;
    case DType::I32:
    case DType::U32:
    case DType::F32:
      return 4;
    case DType::I64:
    case DType::U64:
    case DType::F64:
      return 8;
  }
  return 0;
}

// The bytes of `count` elements of `t`, or nullopt when that is more than a
// size_t holds. Every byte size derived from an element count goes through it.
constexpr std::optional<size_t> byte_size(DType t, size_t count) noexcept {
  size_t bytes = 0;
  if (__builtin_mul_overflow(count, size_of(t), &bytes)) return std::nullopt;
  return bytes;
}

// The element count of a shape (1 for no dimensions, 0 with a 0 anywhere),
// or nullopt when the product is more than a size_t holds.
std::optional<size_t> element_count(std::span<const size_t> shape) noexcept;

constexpr bool is_float(DType t) noexcept {
  return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64;
}
// Bool is neither an integer nor a float.
constexpr bool is_integer(DType t) noexcept { return t >= DType::I8 && t <= DType::U64; }
// True for the types that hold negative values: signed integers and floats.
constexpr bool is_signed(DType t) noexcept {
  return t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64 || is_float(t);
}

// "bool", "i8", "u8", …, "f16", "bf16", "f32", "f64".
std::string_view to_string(DType t) noexcept;

// Accepts the to_string names and the numpy names ("int32", "float16",
// "bfloat16", …); anything else throws Error(Validation) listing them.
DType parse_dtype(std::string_view text);

// The type a C or C++ kernel declares for the element: "bool", "int8_t", …,
// "_Float16", "__bf16", "float", "double" (clang has both 16-bit types).
std::string_view c_type_name(DType t) noexcept;

// The numpy array-protocol descriptor of a little-endian element ("<f4",
// "|b1"). numpy has no bfloat16, so BF16 throws Error(Unsupported); store such
// data as "<u2" (its bit patterns) or convert it to f32.
std::string_view numpy_descr(DType t);
// The inverse, accepting '<', '|' or '=' as the byte order; big-endian
// descriptors throw Error(Unsupported), unknown ones Error(Validation).
DType parse_numpy_descr(std::string_view descr);

// Exact 16-bit float conversions. Narrowing rounds to nearest, ties to even;
// values past the largest finite number become infinity, values below the
// smallest subnormal half become (signed) zero. A NaN stays a NaN of the same
// sign with its top payload bits kept and the quiet bit set, so it never turns
// into an infinity. Widening is exact (signalling NaNs come back quiet).
uint16_t float_to_f16(float value) noexcept;
float f16_to_float(uint16_t bits) noexcept;
uint16_t float_to_bf16(float value) noexcept;
float bf16_to_float(uint16_t bits) noexcept;
// The same narrowing straight from double: going through float first would
// round twice and can miss by one unit in the last place.
uint16_t double_to_f16(double value) noexcept;
uint16_t double_to_bf16(double value) noexcept;

// Reads the element at `p` (any alignment). Bool reads 1.0 for any nonzero
// byte; i64/u64 beyond 2^53 round to the nearest double.
double load_as_double(DType t, const void* p) noexcept;
// Writes `v` to `p` (any alignment). Floats round to nearest, ties to even.
// Integers truncate toward zero and saturate at the type's bounds; NaN
// stores 0. Bool stores 1 for any nonzero value (NaN included), else 0.
void store_from_double(DType t, void* p, double v) noexcept;

}  // namespace svod
