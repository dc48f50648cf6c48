// Expr's evaluation (a stack machine over the postfix code expr_parse.cpp
// makes), its constants, bind_to and the errors of both.
#include "svod/program/expr.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "svod/base/error.h"
#include "svod/program/expr_internal.h"

namespace svod {

namespace detail {

constexpr size_t kShownChars = 120;
std::string quoted(std::string_view text, size_t around) {
  if (text.size() <= kShownChars) return fmt::format("\"{}\"", text);
  constexpr size_t kPiece = kShownChars / 2;
  std::string shown(text.substr(0, kPiece));
  size_t end = kPiece;
  if (around != std::string_view::npos && around > kPiece) {
    const size_t from = std::max(std::min(around - kPiece / 2, text.size() - kPiece), kPiece);
    shown += from > kPiece ? "..." : "";
    shown += text.substr(from, kPiece);
    end = from + kPiece;
  }
  return fmt::format("\"{}{}\" ({} characters)", shown, end < text.size() ? "..." : "", text.size());
}

}  // namespace detail

namespace {

using Op = detail::ExprOp;
using detail::div_checked;
using detail::mod_checked;
using detail::quoted;
using detail::stack_form;

std::string_view symbol(Op op) {
  switch (stack_form(op)) {
    case Op::Add:
      return "+";
    case Op::Sub:
      return "-";
    case Op::Mul:
      return "*";
    case Op::Div:
      return "/";
    case Op::Mod:
      return "%";
    case Op::Min:
      return "min";
    case Op::Max:
      return "max";
    default:
      return "-";
  }
}

// Truncating division by 2^k: an arithmetic shift rounds toward minus
// infinity, so negative dividends first get 2^k - 1 added.
[[gnu::always_inline]] inline int64_t div_pow2(int64_t a, int64_t k) {
  const int64_t bias = (a >> 63) & ((int64_t{1} << k) - 1);
  return (a + bias) >> k;
}
[[gnu::always_inline]] inline int64_t mod_pow2(int64_t a, int64_t k) {
  return a - div_pow2(a, k) * (int64_t{1} << k);
}

std::string join_names(std::span<const std::string> names) {
  if (names.empty()) return "none";
  return fmt::format("{}", fmt::join(names.begin(), names.end(), ", "));
}

}  // namespace

Expr::Expr() : text_("0") {}

Expr Expr::constant(int64_t value) {
  Expr e;
  e.text_ = std::to_string(value);
  e.constant_ = value;
  return e;
}

int64_t Expr::constant_value() const {
  if (!is_constant()) {
    std::vector<std::string> used;
    for (const auto& instr : code_) {
      if (instr.op != Op::Var) continue;
      const std::string& name = variables_[static_cast<size_t>(instr.imm)];
      if (std::find(used.begin(), used.end(), name) == used.end()) used.push_back(name);
    }
    throw make_error(ErrorKind::Validation, "expression {} is not a constant: it depends on {}",
                     quoted(text_), join_names(used));
  }
  return constant_;
}

Expr Expr::bind_to(std::span<const std::string> names) const {
  Expr bound = *this;
  for (auto& instr : bound.code_) {
    if (instr.op != Op::Var) continue;
    const std::string& name = variables_[static_cast<size_t>(instr.imm)];
    const auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) {
      throw make_error(ErrorKind::Validation,
                       "expression {}: variable \"{}\" is not among the bound names ({})",
                       quoted(text_), name, join_names(names));
    }
    instr.imm = it - names.begin();
  }
  bound.variables_.assign(names.begin(), names.end());
  return bound;
}

// A switch-dispatched stack machine whose top lives in `acc`, so most
// instructions touch no memory but the instruction itself.
int64_t Expr::run(const int64_t* values) const {
  int64_t stack[kMaxStackDepth];
  int64_t* next = stack;  // the first free slot below `acc`; parse() bounded the depth
  int64_t acc = 0;        // pushed once, unread, by the first instruction
  int64_t lhs;
  for (const Instr& in : code_) {
    switch (in.op) {
      case Op::Const:
        *next++ = acc;
        acc = in.imm;
        break;
      case Op::Var:
        *next++ = acc;
        acc = values[in.imm];
        break;
      case Op::Neg:
        if (acc == INT64_MIN) [[unlikely]]
          throw_arithmetic(Op::Neg, acc, 0);
        acc = -acc;
        break;
      case Op::Add: {
        lhs = *--next;
        const int64_t rhs = acc;
        if (__builtin_add_overflow(lhs, rhs, &acc)) [[unlikely]]
          throw_arithmetic(in.op, lhs, rhs);
        break;
      }
      case Op::Sub: {
        lhs = *--next;
        const int64_t rhs = acc;
        if (__builtin_sub_overflow(lhs, rhs, &acc)) [[unlikely]]
          throw_arithmetic(in.op, lhs, rhs);
        break;
      }
      case Op::Mul: {
        lhs = *--next;
        const int64_t rhs = acc;
        if (__builtin_mul_overflow(lhs, rhs, &acc)) [[unlikely]]
          throw_arithmetic(in.op, lhs, rhs);
        break;
      }
      case Op::Div: {
        lhs = *--next;
        const int64_t rhs = acc;
        if (!div_checked(lhs, rhs, &acc)) [[unlikely]]
          throw_arithmetic(in.op, lhs, rhs);
        break;
      }
      case Op::Mod: {
        lhs = *--next;
        const int64_t rhs = acc;
        if (!mod_checked(lhs, rhs, &acc)) [[unlikely]]
          throw_arithmetic(in.op, lhs, rhs);
        break;
      }
      case Op::Min:
        acc = std::min(*--next, acc);
        break;
      case Op::Max:
        acc = std::max(*--next, acc);
        break;
      case Op::AddK:
        lhs = acc;
        if (__builtin_add_overflow(lhs, in.imm, &acc)) [[unlikely]]
          throw_arithmetic(in.op, lhs, in.imm);
        break;
      case Op::SubK:
        lhs = acc;
        if (__builtin_sub_overflow(lhs, in.imm, &acc)) [[unlikely]]
          throw_arithmetic(in.op, lhs, in.imm);
        break;
      case Op::MulK:
        lhs = acc;
        if (__builtin_mul_overflow(lhs, in.imm, &acc)) [[unlikely]]
          throw_arithmetic(in.op, lhs, in.imm);
        break;
      case Op::DivK:
        lhs = acc;
        if (!div_checked(lhs, in.imm, &acc)) [[unlikely]]
          throw_arithmetic(in.op, lhs, in.imm);
        break;
      case Op::ModK:
        lhs = acc;
        if (!mod_checked(lhs, in.imm, &acc)) [[unlikely]]
          throw_arithmetic(in.op, lhs, in.imm);
        break;
      case Op::MinK:
        acc = std::min(acc, in.imm);
        break;
      case Op::MaxK:
        acc = std::max(acc, in.imm);
        break;
      case Op::DivPow2:
        acc = div_pow2(acc, in.imm);
        break;
      case Op::ModPow2:
        acc = mod_pow2(acc, in.imm);
        break;
    }
  }
  return acc;
}

void Expr::throw_too_few_values(size_t given) const {
  throw make_error(ErrorKind::Validation,
                   "expression {} needs values for {} variable(s) ({}) but got {}", quoted(text_),
                   variables_.size(), join_names(variables_), given);
}

void Expr::throw_arithmetic(Op op, int64_t lhs, int64_t rhs) const {
  const Op base = stack_form(op);
  if (base == Op::Neg) {
    throw make_error(ErrorKind::Validation, "expression {}: -({}) overflows int64", quoted(text_), lhs);
  }
  if ((base == Op::Div || base == Op::Mod) && rhs == 0) {
    throw make_error(ErrorKind::Validation, "expression {}: {} by zero ({} {} 0)", quoted(text_),
                     base == Op::Div ? "division" : "modulo", lhs, symbol(base));
  }
  throw make_error(ErrorKind::Validation, "expression {}: {} {} {} overflows int64", quoted(text_), lhs,
                   symbol(base), rhs);
}

}  // namespace svod
