// What expr.cpp (evaluation) and expr_parse.cpp (parsing, with constant
// folding) share: Expr's instruction set, the checked arithmetic that both
// folding and evaluation use, and how messages show an expression. Private to
// svod/program (like every *_internal.h, it is not installed).
#pragma once

#include <climits>
#include <cstdint>
#include <string>
#include <string_view>

#include "svod/program/expr.h"

namespace svod::detail {

// Postfix instructions. The `...K` forms take their right operand from `imm`
// instead of the stack: most launch expressions are a variable combined with
// constants, e.g. `(N+255)/256` runs as Var, AddK 255, DivPow2 8.
enum class ExprOp : uint8_t {
  Const,  // push imm
  Var,    // push values[imm]
  Neg,
  Add,
  Sub,
  Mul,
  Div,
  Mod,
  Min,
  Max,
  AddK,
  SubK,
  MulK,
  DivK,
  ModK,
  MinK,
  MaxK,
  DivPow2,  // x / 2^imm, for 1 <= imm <= 62: a shift instead of a slow idiv
  ModPow2,  // x % 2^imm
};

// An expression as messages show it, in quotes: whole up to kShownChars
// characters; a longer one by its start, the part around `around` when a
// position is named, and its length (a 7 MB expression was echoed whole).
std::string quoted(std::string_view text, size_t around = std::string_view::npos);

inline bool is_immediate(ExprOp op) { return op >= ExprOp::AddK && op <= ExprOp::MaxK; }
inline ExprOp stack_form(ExprOp op) {
  return is_immediate(op)
             ? static_cast<ExprOp>(static_cast<uint8_t>(op) - static_cast<uint8_t>(ExprOp::AddK) +
                                   static_cast<uint8_t>(ExprOp::Add))
             : op;
}

inline bool fits_int32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

// The checked arithmetic shared by constant folding and evaluation; false
// means the step has no int64 result.
[[gnu::always_inline]] inline bool div_checked(int64_t a, int64_t b, int64_t* out) {
  if (b == 0) return false;
  if (b == -1) {  // also keeps INT32_MIN / -1 away from the 32-bit divide below
    if (a == INT64_MIN) return false;
    *out = -a;
    return true;
  }
  // A 32-bit divide is several times faster than a 64-bit one on many x86 cores.
  *out = fits_int32(a) && fits_int32(b) ? int64_t{static_cast<int32_t>(a) / static_cast<int32_t>(b)}
                                        : a / b;
  return true;
}
[[gnu::always_inline]] inline bool mod_checked(int64_t a, int64_t b, int64_t* out) {
  if (b == 0) return false;
  // INT64_MIN % -1 traps on x86 although the remainder is plainly 0.
  if (b == -1) {
    *out = 0;
    return true;
  }
  *out = fits_int32(a) && fits_int32(b) ? int64_t{static_cast<int32_t>(a) % static_cast<int32_t>(b)}
                                        : a % b;
  return true;
}

}  // namespace svod::detail
