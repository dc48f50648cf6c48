#include "svod/comm/reduce.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "svod/base/error.h"

namespace svod {

std::string_view to_string(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Prod:
      return "prod";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::Max:
      return "max";
  }
  return "?";
}

ReduceOp parse_reduce_op(std::string_view text) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max})
    if (text == to_string(op)) return op;
  throw make_error(ErrorKind::Validation, "unknown reduction \"{}\" (expected sum, prod, min or max)", text);
}

namespace detail {

ChunkRange chunk_range(size_t count, int ranks, int rank) noexcept {
  const size_t n = static_cast<size_t>(ranks), r = static_cast<size_t>(rank);
  const size_t base = count / n, extra = count % n;
  return {r * base + (r < extra ? r : extra), base + (r < extra ? 1 : 0)};
}

namespace {

// Element types with no host arithmetic of their own.
struct BoolByte {
  uint8_t byte;  // any nonzero byte is true
};
struct F16Bits {
  uint16_t bits;
};
struct BF16Bits {
  uint16_t bits;
};

// Storage type T, accumulated as Acc.
template <typename T>
struct Accumulator {
  using type = T;
  static type load(T v) { return v; }
  static T store(type v) { return v; }
};
template <>
struct Accumulator<BoolByte> {
  using type = bool;
  static bool load(BoolByte v) { return v.byte != 0; }
  static BoolByte store(bool v) { return {static_cast<uint8_t>(v)}; }
};
template <>
struct Accumulator<F16Bits> {
  using type = float;
  static float load(F16Bits v) { return f16_to_float(v.bits); }
  static F16Bits store(float v) { return {float_to_f16(v)}; }
};
template <>
struct Accumulator<BF16Bits> {
  using type = float;
  static float load(BF16Bits v) { return bf16_to_float(v.bits); }
  static BF16Bits store(float v) { return {float_to_bf16(v)}; }
};

// Integers wrap: the arithmetic runs on an unsigned type at least as wide as
// unsigned int (narrower ones would promote to int and could overflow it).
template <typename T>
using Wide = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <typename A>
A combine(ReduceOp op, A a, A b) {
  if constexpr (std::is_same_v<A, bool>) {
    return (op == ReduceOp::Sum || op == ReduceOp::Max) ? (a || b) : (a && b);
  } else if constexpr (std::is_floating_point_v<A>) {
    switch (op) {
      case ReduceOp::Sum:
        return a + b;
      case ReduceOp::Prod:
        return a * b;
      case ReduceOp::Min:
        return std::isnan(a) ? a : (std::isnan(b) || b < a) ? b : a;
      case ReduceOp::Max:
        return std::isnan(a) ? a : (std::isnan(b) || b > a) ? b : a;
    }
    return a;
  } else {
    switch (op) {
      case ReduceOp::Sum:
        return static_cast<A>(static_cast<Wide<A>>(a) + static_cast<Wide<A>>(b));
      case ReduceOp::Prod:
        return static_cast<A>(static_cast<Wide<A>>(a) * static_cast<Wide<A>>(b));
      case ReduceOp::Min:
        return b < a ? b : a;
      case ReduceOp::Max:
        return b > a ? b : a;
    }
    return a;
  }
}

// One pass per op so that the inner loop has no switch (and vectorises for
// the plain types).
template <typename T, ReduceOp Op>
void reduce_typed(std::span<const void* const> inputs, std::span<void* const> outputs, size_t count) {
  using Acc = Accumulator<T>;
  using A = typename Acc::type;
  // Blocks small enough for L1: every element of an output is written after
  // all inputs' elements at that index were read, so outputs may alias inputs.
  constexpr size_t kBlock = 512;
  A acc[kBlock];
  T* o = static_cast<T*>(outputs[0]);
  for (size_t start = 0; start < count; start += kBlock) {
    const size_t n = count - start < kBlock ? count - start : kBlock;
    const T* first = static_cast<const T*>(inputs[0]) + start;
    for (size_t i = 0; i < n; ++i) acc[i] = Acc::load(first[i]);
    for (size_t k = 1; k < inputs.size(); ++k) {
      const T* in = static_cast<const T*>(inputs[k]) + start;
      for (size_t i = 0; i < n; ++i) acc[i] = combine<A>(Op, acc[i], Acc::load(in[i]));
    }
    for (size_t i = 0; i < n; ++i) o[start + i] = Acc::store(acc[i]);
    for (size_t k = 1; k < outputs.size(); ++k) std::memcpy(static_cast<T*>(outputs[k]) + start, o + start, n * sizeof(T));
  }
}

template <typename T>
void reduce_op(ReduceOp op, std::span<const void* const> inputs, std::span<void* const> out, size_t count) {
  switch (op) {
    case ReduceOp::Sum:
      return reduce_typed<T, ReduceOp::Sum>(inputs, out, count);
    case ReduceOp::Prod:
      return reduce_typed<T, ReduceOp::Prod>(inputs, out, count);
    case ReduceOp::Min:
      return reduce_typed<T, ReduceOp::Min>(inputs, out, count);
    case ReduceOp::Max:
      return reduce_typed<T, ReduceOp::Max>(inputs, out, count);
  }
}

}  // namespace

void reduce_in_rank_order(DType dtype, ReduceOp op, std::span<const void* const> inputs,
                          std::span<void* const> out, size_t count) {
  if (inputs.empty() || out.empty()) throw make_error(ErrorKind::Internal, "reduce_in_rank_order: no inputs or outputs");
  if (inputs.size() == 1) {
    for (void* o : out)
      if (o != inputs[0] && count > 0) std::memmove(o, inputs[0], count * size_of(dtype));
    return;
  }
  switch (dtype) {
    case DType::Bool:
      return reduce_op<BoolByte>(op, inputs, out, count);
    case DType::I8:
      return reduce_op<int8_t>(op, inputs, out, count);
    case DType::U8:
      return reduce_op<uint8_t>(op, inputs, out, count);
    case DType::I16:
      return reduce_op<int16_t>(op, inputs, out, count);
    case DType::U16:
      return reduce_op<uint16_t>(op, inputs, out, count);
    case DType::I32:
      return reduce_op<int32_t>(op, inputs, out, count);
    case DType::U32:
      return reduce_op<uint32_t>(op, inputs, out, count);
    case DType::I64:
      return reduce_op<int64_t>(op, inputs, out, count);
    case DType::U64:
      return reduce_op<uint64_t>(op, inputs, out, count);
    case DType::F16:
      return reduce_op<F16Bits>(op, inputs, out, count);
    case DType::BF16:
      return reduce_op<BF16Bits>(op, inputs, out, count);
    case DType::F32:
      return reduce_op<float>(op, inputs, out, count);
    case DType::F64:
      return reduce_op<double>(op, inputs, out, count);
  }
}

}  // namespace detail
}  // namespace svod
