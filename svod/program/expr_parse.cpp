// Expr's parser: the grammar in expr.h read by recursive descent into postfix
// code, constants folded on the way; and substitute(), which rewrites the text
// and parses it again.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <climits>

#include "svod/base/error.h"
#include "svod/program/expr_internal.h"

namespace svod {

namespace {

using Op = detail::ExprOp;
using detail::div_checked;
using detail::mod_checked;
using detail::quoted;
using detail::stack_form;

constexpr int kMaxNesting = 256;  // parser recursion, far above any real launch expression

bool is_binary(Op op) { return op >= Op::Add && op <= Op::Max; }
Op immediate_form(Op op) {
  return static_cast<Op>(static_cast<uint8_t>(op) - static_cast<uint8_t>(Op::Add) +
                         static_cast<uint8_t>(Op::AddK));
}

bool apply_checked(Op op, int64_t a, int64_t b, int64_t* out) {
  switch (stack_form(op)) {
    case Op::Add:
      return !__builtin_add_overflow(a, b, out);
    case Op::Sub:
      return !__builtin_sub_overflow(a, b, out);
    case Op::Mul:
      return !__builtin_mul_overflow(a, b, out);
    case Op::Div:
      return div_checked(a, b, out);
    case Op::Mod:
      return mod_checked(a, b, out);
    case Op::Min:
      *out = std::min(a, b);
      return true;
    case Op::Max:
      *out = std::max(a, b);
      return true;
    default:
      return false;
  }
}

}  // namespace

namespace detail {

// Recursive descent over the grammar in expr.h, emitting postfix code and
// folding constants as it goes.
class ExprParser {
 public:
  explicit ExprParser(std::string_view text) : text_(text) { expr_.text_ = std::string(text); }

  Expr parse() {
    parse_sum(0);
    skip_space();
    if (pos_ < text_.size()) {
      if (text_[pos_] == ')') fail(pos_, "unmatched ')'");
      fail_expected("an operator or the end");
    }
    finish();
    return std::move(expr_);
  }

 private:
  void parse_sum(int depth) {
    parse_product(depth);
    for (;;) {
      skip_space();
      if (pos_ >= text_.size()) return;
      const char c = text_[pos_];
      if (c != '+' && c != '-') return;
      ++pos_;
      parse_product(depth);
      emit_binary(c == '+' ? Op::Add : Op::Sub);
    }
  }

  void parse_product(int depth) {
    parse_unary(depth);
    for (;;) {
      skip_space();
      if (pos_ >= text_.size()) return;
      const char c = text_[pos_];
      Op op;
      if (c == '*') {
        op = Op::Mul;
      } else if (c == '/') {
        op = Op::Div;
      } else if (c == '%') {
        op = Op::Mod;
      } else {
        return;
      }
      ++pos_;
      parse_unary(depth);
      emit_binary(op);
    }
  }

  void parse_unary(int depth) {
    check_depth(depth);
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == '-') {
      ++pos_;
      skip_space();
      // A minus directly on a literal is part of it, so INT64_MIN is writable.
      if (pos_ < text_.size() && is_digit(text_[pos_])) {
        emit_const(read_literal(/*negative=*/true));
        return;
      }
      parse_unary(depth + 1);
      emit_neg();
      return;
    }
    parse_primary(depth);
  }

  void parse_primary(int depth) {
    skip_space();
    if (pos_ >= text_.size()) fail_expected("an operand");
    const char c = text_[pos_];
    if (is_digit(c)) {
      emit_const(read_literal(/*negative=*/false));
      return;
    }
    if (c == '(') {
      ++pos_;
      parse_sum(depth + 1);
      expect(')');
      return;
    }
    if (!is_ident_start(c)) fail_expected("an operand");

    const size_t start = pos_;
    while (pos_ < text_.size() && is_ident_char(text_[pos_])) ++pos_;
    const std::string_view name = text_.substr(start, pos_ - start);
    skip_space();
    const bool call = pos_ < text_.size() && text_[pos_] == '(';
    if (name == "min" || name == "max") {
      expect('(');
      parse_sum(depth + 1);
      expect(',');
      parse_sum(depth + 1);
      expect(')');
      emit_binary(name == "min" ? Op::Min : Op::Max);
      return;
    }
    if (call) {
      fail(start, fmt::format("unknown function \"{}\"", name), " (the functions are min and max)");
    }
    emit_var(name);
  }

  int64_t read_literal(bool negative) {
    const size_t start = pos_;
    const uint64_t limit = negative ? uint64_t{1} << 63 : uint64_t{INT64_MAX};
    uint64_t value = 0;
    bool too_large = false;
    while (pos_ < text_.size() && is_digit(text_[pos_])) {
      const uint64_t digit = static_cast<uint64_t>(text_[pos_] - '0');
      if (value > (limit - digit) / 10) too_large = true;
      if (!too_large) value = value * 10 + digit;
      ++pos_;
    }
    if (too_large) {
      fail(start,
           fmt::format("integer literal {}{}{}", negative ? "-" : "", text_.substr(start, std::min<size_t>(pos_ - start, 40)),
                       pos_ - start > 40 ? "..." : ""),
           " does not fit in int64");
    }
    // Two's complement negation; for 2^63 this yields INT64_MIN as intended.
    return negative ? static_cast<int64_t>(~value + 1) : static_cast<int64_t>(value);
  }

  void emit_const(int64_t value) { expr_.code_.push_back({Op::Const, value}); }

  void emit_var(std::string_view name) {
    auto& vars = expr_.variables_;
    const auto it = std::find(vars.begin(), vars.end(), name);
    const auto slot = static_cast<int64_t>(it - vars.begin());
    if (it == vars.end()) vars.emplace_back(name);
    expr_.code_.push_back({Op::Var, slot});
  }

  void emit_neg() {
    auto& code = expr_.code_;
    if (code.back().op == Op::Const && code.back().imm != INT64_MIN) {
      code.back().imm = -code.back().imm;
      return;
    }
    code.push_back({Op::Neg, 0});
  }

  // Every compound operand ends in an operator, so a trailing Const is the
  // whole right operand, and a Const just before it the whole left operand.
  void emit_binary(Op op) {
    auto& code = expr_.code_;
    const size_t n = code.size();
    if (code[n - 1].op == Op::Const) {
      int64_t folded;
      if (n >= 2 && code[n - 2].op == Op::Const &&
          apply_checked(op, code[n - 2].imm, code[n - 1].imm, &folded)) {
        code.pop_back();
        code.back().imm = folded;
        return;
      }
      // A step that cannot be folded (e.g. 1/0) stays, to fail when evaluated.
      const int64_t rhs = code.back().imm;
      code.back().op = immediate_form(op);
      if ((op == Op::Div || op == Op::Mod) && rhs > 1 && (rhs & (rhs - 1)) == 0) {
        code.back().op = op == Op::Div ? Op::DivPow2 : Op::ModPow2;
        code.back().imm = std::countr_zero(static_cast<uint64_t>(rhs));
      }
      return;
    }
    code.push_back({op, 0});
  }

  void finish() {
    auto& code = expr_.code_;
    if (code.size() == 1 && code[0].op == Op::Const) {
      expr_.constant_ = code[0].imm;
      code.clear();
    }
    int depth = 0;
    int max_depth = 0;
    for (const auto& instr : code) {
      if (instr.op == Op::Const || instr.op == Op::Var) {
        max_depth = std::max(max_depth, ++depth);
      } else if (is_binary(instr.op)) {
        --depth;
      }
    }
    if (max_depth > Expr::kMaxStackDepth) {
      throw make_error(ErrorKind::Validation,
                       "expression {}: nested too deeply (needs {} stack slots, at most {})",
                       quoted(text_), max_depth, Expr::kMaxStackDepth);
    }
    code.shrink_to_fit();
  }

  void expect(char c) {
    skip_space();
    if (pos_ >= text_.size() || text_[pos_] != c) fail_expected(fmt::format("'{}'", c));
    ++pos_;
  }

  void check_depth(int depth) {
    if (depth > kMaxNesting) {
      fail(pos_, "nested too deeply", fmt::format(" (at most {} levels)", kMaxNesting));
    }
  }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  static bool is_ident_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  }
  static bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }

  [[noreturn]] void fail_expected(std::string_view what) const {
    std::string found;
    if (pos_ >= text_.size()) {
      found = "the end";
    } else if (const auto c = static_cast<unsigned char>(text_[pos_]); c >= 0x20 && c < 0x7f) {
      found = fmt::format("'{}'", static_cast<char>(c));
    } else {
      found = fmt::format("byte 0x{:02x}", c);
    }
    throw make_error(ErrorKind::Validation,
                     "expression {}: expected {} at position {}, found {}", quoted(text_, pos_), what, pos_,
                     found);
  }

  [[noreturn]] void fail(size_t pos, std::string_view what, std::string_view after = {}) const {
    throw make_error(ErrorKind::Validation, "expression {}: {} at position {}{}", quoted(text_, pos), what, pos,
                     after);
  }

  std::string_view text_;
  size_t pos_ = 0;
  Expr expr_;
};

}  // namespace detail

Expr Expr::parse(std::string_view text) { return detail::ExprParser(text).parse(); }

Expr Expr::substitute(const std::map<std::string, int64_t, std::less<>>& values) const {
  // Rewriting the text and parsing it again reuses the parser's folding and
  // keeps text() the source of the expression, as for any parsed one.
  std::string out;
  const std::string_view text = text_;
  size_t pos = 0;
  auto ident_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (c >= '0' && c <= '9');
  };
  while (pos < text.size()) {
    if (!ident_char(text[pos])) {
      out += text[pos++];
      continue;
    }
    // A run of identifier characters is a literal (starting with a digit) or a name.
    const size_t start = pos;
    while (pos < text.size() && ident_char(text[pos])) ++pos;
    const std::string_view word = text.substr(start, pos - start);
    const auto it = values.find(word);
    if (it == values.end()) {
      out += word;
    } else if (it->second < 0) {
      out += fmt::format("({})", it->second);
    } else {
      out += std::to_string(it->second);
    }
  }
  return parse(out);
}

}  // namespace svod
