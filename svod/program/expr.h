// svod::Expr — integer expressions for launch dimensions and sizes.
//
// A ProgramSpec states sizes such as `(N+255)/256` or `min(N, 1024)` over named
// variables. Such a text is parsed once into a short postfix program (constants
// folded) and then evaluated on every launch, so evaluation allocates nothing,
// a constant costs a load and a compare, and every step is checked: overflow,
// division or modulo by zero and INT64_MIN / -1 raise Error(Validation) naming
// the expression instead of producing a wrong grid.
//
// Grammar: integer literals (decimal, int64), identifiers [A-Za-z_][A-Za-z0-9_]*,
// + - * / % with the usual precedence and left associativity, unary minus,
// parentheses, min(a, b) and max(a, b). `min` and `max` are reserved names.
// Arithmetic is int64. `/` truncates toward zero and `%` takes the sign of the
// dividend, exactly as in C (-7 / 2 == -3, -7 % 2 == -1); INT64_MIN % -1 is 0.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace svod {

namespace detail {
class ExprParser;
enum class ExprOp : uint8_t;  // the instruction set, defined in expr_internal.h
}  // namespace detail

class Expr {
 public:
  // The constant 0.
  Expr();

  // Parses `text`; throws Error(Validation) naming the text, the 0-based
  // character position and what was expected there.
  static Expr parse(std::string_view text);
  static Expr constant(int64_t value);

  bool is_constant() const noexcept { return code_.empty(); }
  // Throws Error(Validation) when the expression depends on a variable.
  int64_t constant_value() const;

  // Distinct variable names in order of first appearance, or, after bind_to,
  // the names it was bound to.
  const std::vector<std::string>& variables() const noexcept { return variables_; }

  // values[i] is the value of variables()[i]; extra values are ignored.
  // Throws Error(Validation) when values.size() < variables().size() or when
  // a step overflows, divides by zero or computes INT64_MIN / -1.
  int64_t evaluate(std::span<const int64_t> values) const {
    if (values.size() < variables_.size()) [[unlikely]] {
      throw_too_few_values(values.size());
    }
    if (code_.empty()) return constant_;
    return run(values.data());
  }
  int64_t evaluate(std::initializer_list<int64_t> values) const {
    return evaluate(std::span<const int64_t>(values.begin(), values.size()));
  }

  // The same expression with its variable slots renumbered to index `names`,
  // so many expressions can be evaluated against one array of values. Throws
  // Error(Validation) naming the variable when it is not in `names`.
  Expr bind_to(std::span<const std::string> names) const;

  // The same expression with the variables named in `values` replaced by
  // those constants and folded; other variables stay. The text shows the
  // values ("(N+TILE-1)/TILE" with TILE=4 becomes "(N+4-1)/4"), so specs that
  // differ only in them also differ in their text and cache keys. The tuner
  // uses it to fix a kernel's tuning parameters in its launch sizes.
  Expr substitute(const std::map<std::string, int64_t, std::less<>>& values) const;

  // The text the expression was parsed from (or the decimal constant).
  const std::string& text() const noexcept { return text_; }

  // Deepest evaluation stack a parsed expression may need; deeper nesting is
  // rejected at parse time so evaluation can use a fixed array.
  static constexpr int kMaxStackDepth = 64;

 private:
  friend class detail::ExprParser;

  using Op = detail::ExprOp;
  struct Instr {
    Op op;
    int64_t imm;  // the constant, the variable slot, or the immediate operand
  };

  int64_t run(const int64_t* values) const;
  [[noreturn]] void throw_too_few_values(size_t given) const;
  [[noreturn]] void throw_arithmetic(Op op, int64_t lhs, int64_t rhs) const;

  std::string text_;
  std::vector<std::string> variables_;
  std::vector<Instr> code_;  // postfix; empty means the constant `constant_`
  int64_t constant_ = 0;
};

}  // namespace svod
