#include "svod/program/expr.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "svod/base/error.h"

namespace svod {
namespace {

int64_t eval(std::string_view text, std::initializer_list<int64_t> values = {}) {
  return Expr::parse(text).evaluate(values);
}

// Runs `fn`, expecting Error(Validation) whose message contains every fragment.
template <typename Fn>
void expect_validation(Fn&& fn, std::initializer_list<std::string_view> fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected Error(Validation)";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Validation) << e.what();
    for (auto fragment : fragments) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
          << "message \"" << e.what() << "\" lacks \"" << fragment << "\"";
    }
  }
}

void expect_parse_error(std::string_view text, std::initializer_list<std::string_view> fragments) {
  SCOPED_TRACE(std::string(text));
  expect_validation([&] { Expr::parse(text); }, fragments);
}

// A 7 MB expression used to be echoed whole in its error (issue 40): messages
// show a long one by its start, the part around the fault and its length.
TEST(Expr, ALongExpressionIsShownInPartInItsErrors) {
  std::string text = "1";
  for (int i = 0; i < 1'000'000; ++i) text += " + n";
  text += " + )";
  try {
    Expr::parse(text);
    FAIL() << "parsed";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_LT(what.size(), 400u) << what.size();
    EXPECT_NE(what.find("expression \"1 + n + n"), std::string::npos) << what;
    EXPECT_NE(what.find(" + n + n + ... + n + n"), std::string::npos) << what;
    EXPECT_NE(what.find(" + n + )\" (4000005 characters): expected an operand at position 4000004"),
              std::string::npos)
        << what;
  }
  const std::string literal = "1" + std::string(100'000, '9');
  try {
    Expr::parse(literal);
    FAIL() << "parsed";
  } catch (const Error& e) {
    EXPECT_LT(std::string(e.what()).size(), 400u) << e.what();
    EXPECT_NE(std::string(e.what()).find("does not fit in int64"), std::string::npos) << e.what();
  }
  // A short one is shown whole, as before.
  expect_parse_error("n +", {"expression \"n +\": expected an operand at position 3"});
}

TEST(Expr, DefaultIsConstantZero) {
  Expr e;
  EXPECT_TRUE(e.is_constant());
  EXPECT_EQ(e.constant_value(), 0);
  EXPECT_EQ(e.evaluate({}), 0);
  EXPECT_EQ(e.text(), "0");
  EXPECT_TRUE(e.variables().empty());
}

TEST(Expr, Constants) {
  EXPECT_EQ(Expr::constant(42).constant_value(), 42);
  EXPECT_EQ(Expr::constant(-7).text(), "-7");
  EXPECT_EQ(eval("0"), 0);
  EXPECT_EQ(eval("  17 "), 17);
  EXPECT_EQ(eval("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(eval("-9223372036854775808"), INT64_MIN);
  EXPECT_EQ(eval("- 9223372036854775808"), INT64_MIN);
  EXPECT_EQ(eval("007"), 7);
}

TEST(Expr, ConstantFolding) {
  auto e = Expr::parse("(1024 + 255) / 256 * max(2, 3) - min(4, -4)");
  EXPECT_TRUE(e.is_constant());
  EXPECT_EQ(e.constant_value(), 4 * 3 + 4);
  EXPECT_EQ(e.text(), "(1024 + 255) / 256 * max(2, 3) - min(4, -4)");
  EXPECT_TRUE(Expr::parse("-(-(3))").is_constant());
  EXPECT_EQ(Expr::parse("-(-(3))").constant_value(), 3);
  // Steps that cannot be folded stay and fail when evaluated.
  auto bad = Expr::parse("1 / 0");
  EXPECT_FALSE(bad.is_constant());
  expect_validation([&] { bad.evaluate({}); }, {"\"1 / 0\"", "division by zero"});
  EXPECT_FALSE(Expr::parse("-(-9223372036854775808)").is_constant());
}

TEST(Expr, Precedence) {
  EXPECT_EQ(eval("2 + 3 * 4"), 14);
  EXPECT_EQ(eval("2 * 3 + 4"), 10);
  EXPECT_EQ(eval("20 - 6 / 3"), 18);
  EXPECT_EQ(eval("20 - 7 % 4"), 17);
  EXPECT_EQ(eval("(2 + 3) * 4"), 20);
  EXPECT_EQ(eval("N + M * K", {1, 2, 3}), 7);
  EXPECT_EQ(eval("(N + M) * K", {1, 2, 3}), 9);
  EXPECT_EQ(eval("N * M + K", {2, 3, 4}), 10);
  EXPECT_EQ(eval("-N * 3", {2}), -6);
  EXPECT_EQ(eval("3 - -N", {2}), 5);
  EXPECT_EQ(eval("-2 * -3"), 6);
}

TEST(Expr, LeftAssociativity) {
  EXPECT_EQ(eval("10 - 3 - 2"), 5);
  EXPECT_EQ(eval("100 / 10 / 5"), 2);
  EXPECT_EQ(eval("100 % 7 % 3"), 2);
  EXPECT_EQ(eval("64 / 4 * 2"), 32);
  EXPECT_EQ(eval("a - b - c", {10, 3, 2}), 5);
  EXPECT_EQ(eval("a / b / c", {100, 10, 5}), 2);
  EXPECT_EQ(eval("a / b * c", {64, 4, 2}), 32);
  EXPECT_EQ(eval("a - (b - c)", {10, 3, 2}), 9);
}

TEST(Expr, DivisionTruncatesTowardZero) {
  EXPECT_EQ(eval("N / 2", {-7}), -3);
  EXPECT_EQ(eval("N % 2", {-7}), -1);
  EXPECT_EQ(eval("N / -2", {7}), -3);
  EXPECT_EQ(eval("N % -2", {7}), 1);
  EXPECT_EQ(eval("N / M", {-7, -2}), 3);
  EXPECT_EQ(eval("N % M", {INT64_MIN, -1}), 0);
  EXPECT_EQ(eval("-7 / 2"), -3);
  // Powers of two run as shifts; they must truncate the same way.
  EXPECT_EQ(eval("(N + 255) / 256", {-1000}), -2);
  EXPECT_EQ(eval("N % 8", {-13}), -5);
  EXPECT_EQ(eval("N / 4", {INT64_MIN}), INT64_MIN / 4);
  EXPECT_EQ(eval("N % 4", {INT64_MIN}), 0);
  EXPECT_EQ(eval("N / 4611686018427387904", {INT64_MIN}), -2);
  EXPECT_EQ(eval("N % 4611686018427387904", {INT64_MAX}), (int64_t{1} << 62) - 1);
  EXPECT_EQ(eval("N / 1", {-5}), -5);
  for (int64_t n = -40; n <= 40; ++n) {
    EXPECT_EQ(eval("N / 8", {n}), n / 8) << n;
    EXPECT_EQ(eval("N % 8", {n}), n % 8) << n;
    EXPECT_EQ(eval("N / -8", {n}), n / -8) << n;
  }
  // Small operands take a 32-bit divide, large ones a 64-bit one.
  EXPECT_EQ(eval("N / M", {INT32_MIN, -1}), int64_t{2147483648});
  EXPECT_EQ(eval("N % M", {INT32_MIN, -1}), 0);
  EXPECT_EQ(eval("N / M", {int64_t{1} << 40, 3}), (int64_t{1} << 40) / 3);
  EXPECT_EQ(eval("N % M", {-(int64_t{1} << 40) - 1, 7}), (-(int64_t{1} << 40) - 1) % 7);
}

TEST(Expr, UnaryMinus) {
  EXPECT_EQ(eval("-N", {5}), -5);
  EXPECT_EQ(eval("--N", {5}), 5);
  EXPECT_EQ(eval("- - - N", {5}), -5);
  EXPECT_EQ(eval("-(N + 1)", {5}), -6);
  EXPECT_EQ(eval("-min(N, 3)", {5}), -3);
}

TEST(Expr, MinMax) {
  EXPECT_EQ(eval("min(N, 1024)", {5000}), 1024);
  EXPECT_EQ(eval("min(N, 1024)", {5}), 5);
  EXPECT_EQ(eval("max(1, N / 2)", {1}), 1);
  EXPECT_EQ(eval("max(1, N / 2)", {9}), 4);
  EXPECT_EQ(eval("min(max(N, 8), max(M, 16))", {1, 1}), 8);
  EXPECT_EQ(eval("min(max(N, 8), max(M, 16))", {100, 20}), 20);
  EXPECT_EQ(eval("max(min(a, b), min(b, c))", {3, 7, 5}), 5);
  EXPECT_EQ(eval("min ( N , 3 ) * 2", {10}), 6);
  EXPECT_EQ(eval("max(-N, N)", {-4}), 4);
}

TEST(Expr, TypicalLaunchExpressions) {
  auto grid = Expr::parse("(N+255)/256");
  EXPECT_FALSE(grid.is_constant());
  EXPECT_EQ(grid.evaluate({1}), 1);
  EXPECT_EQ(grid.evaluate({256}), 1);
  EXPECT_EQ(grid.evaluate({257}), 2);
  EXPECT_EQ(grid.evaluate({1 << 20}), 4096);
  EXPECT_EQ(eval("N*4", {3}), 12);
  EXPECT_EQ(eval("N % 8", {13}), 5);
  EXPECT_EQ(eval("2 * N", {21}), 42);
  EXPECT_EQ(eval("batch_size*seq_len_2 + _x", {3, 5, 1}), 16);
}

TEST(Expr, VariablesInFirstAppearanceOrder) {
  auto e = Expr::parse("M * (N + M) - K / N");
  EXPECT_EQ(e.variables(), (std::vector<std::string>{"M", "N", "K"}));
  EXPECT_EQ(e.evaluate({2, 3, 10}), 2 * 5 - 10 / 3);
  EXPECT_TRUE(Expr::parse("3").variables().empty());
  // Extra values are ignored.
  EXPECT_EQ(Expr::parse("N").evaluate({4, 99}), 4);
}

TEST(Expr, TooFewValues) {
  auto e = Expr::parse("N + M");
  expect_validation([&] { e.evaluate({1}); }, {"\"N + M\"", "2 variable", "N, M", "got 1"});
  std::vector<int64_t> none;
  expect_validation([&] { e.evaluate(none); }, {"got 0"});
}

TEST(Expr, ConstantValueOfNonConstant) {
  expect_validation([] { Expr::parse("N * 2 + N").constant_value(); },
                    {"\"N * 2 + N\"", "not a constant", "N"});
}

TEST(Expr, BindTo) {
  const std::vector<std::string> names = {"K", "N", "M", "unused"};
  auto a = Expr::parse("(N+255)/256").bind_to(names);
  auto b = Expr::parse("M * N - K").bind_to(names);
  auto c = Expr::parse("7").bind_to(names);
  EXPECT_EQ(a.variables(), names);
  EXPECT_EQ(b.variables(), names);
  EXPECT_EQ(c.variables(), names);
  EXPECT_EQ(a.text(), "(N+255)/256");
  const std::vector<int64_t> values = {5, 1000, 3, -1};
  EXPECT_EQ(a.evaluate(values), (1000 + 255) / 256);
  EXPECT_EQ(b.evaluate(values), 3 * 1000 - 5);
  EXPECT_EQ(c.evaluate(values), 7);
  // Bound expressions check the count against all bound names.
  expect_validation([&] { a.evaluate({1, 2}); }, {"got 2"});
  // Binding again renumbers once more.
  const std::vector<std::string> other = {"M", "K", "N"};
  EXPECT_EQ(b.bind_to(other).evaluate({3, 5, 1000}), 3 * 1000 - 5);
}

TEST(Expr, BindToMissingName) {
  const std::vector<std::string> names = {"N", "K"};
  expect_validation([&] { Expr::parse("N * M").bind_to(names); },
                    {"\"N * M\"", "variable \"M\"", "N, K"});
  expect_validation([&] { Expr::parse("N").bind_to({}); }, {"variable \"N\"", "none"});
}

TEST(Expr, AdditionOverflow) {
  auto e = Expr::parse("N + M");
  EXPECT_EQ(e.evaluate({INT64_MAX - 1, 1}), INT64_MAX);
  expect_validation(
      [&] {
        e.evaluate({INT64_MAX, 1});
      },
      {"\"N + M\"", "9223372036854775807 + 1", "overflows int64"});
  expect_validation([&] { e.evaluate({INT64_MIN, -1}); }, {"overflows"});
  expect_validation([&] { eval("N + 1", {INT64_MAX}); }, {"\"N + 1\"", "overflows"});
  expect_validation([] { eval("9223372036854775807 + 1"); }, {"overflows"});
}

TEST(Expr, SubtractionOverflow) {
  expect_validation(
      [] {
        eval("N - M", {INT64_MIN, 1});
      },
      {"\"N - M\"", "-9223372036854775808 - 1", "overflows int64"});
  expect_validation([] { eval("N - M", {0, INT64_MIN}); }, {"overflows"});
  expect_validation([] { eval("N - 1", {INT64_MIN}); }, {"overflows"});
  EXPECT_EQ(eval("N - M", {-1, INT64_MIN}), INT64_MAX);
}

TEST(Expr, MultiplicationOverflow) {
  expect_validation([] { eval("N * 4", {int64_t{1} << 62}); },
                    {"\"N * 4\"", "4611686018427387904 * 4", "overflows int64"});
  expect_validation([] { eval("N * M", {INT64_MIN, -1}); }, {"overflows"});
  expect_validation([] { eval("N * M", {int64_t{1} << 32, int64_t{1} << 31}); }, {"overflows"});
  EXPECT_EQ(eval("N * M", {int64_t{1} << 31, int64_t{1} << 31}), int64_t{1} << 62);
}

TEST(Expr, NegationOverflow) {
  expect_validation([] { eval("-N", {INT64_MIN}); },
                    {"\"-N\"", "-(-9223372036854775808)", "overflows int64"});
  expect_validation([] { eval("-(-9223372036854775808)"); }, {"overflows"});
  EXPECT_EQ(eval("-N", {INT64_MAX}), -INT64_MAX);
}

TEST(Expr, DivisionByZero) {
  expect_validation([] { eval("N / M", {5, 0}); }, {"\"N / M\"", "division by zero", "5 / 0"});
  expect_validation([] { eval("N / 0", {5}); }, {"division by zero"});
  expect_validation([] { eval("N / (M - 2)", {5, 2}); }, {"division by zero"});
}

TEST(Expr, ModuloByZero) {
  expect_validation([] { eval("N % M", {5, 0}); }, {"\"N % M\"", "modulo by zero", "5 % 0"});
  expect_validation([] { eval("N % 0", {5}); }, {"modulo by zero"});
}

TEST(Expr, MinDividedByMinusOne) {
  expect_validation(
      [] {
        eval("N / M", {INT64_MIN, -1});
      },
      {"\"N / M\"", "-9223372036854775808 / -1", "overflows int64"});
  expect_validation([] { eval("N / -1", {INT64_MIN}); }, {"overflows"});
  EXPECT_EQ(eval("N / -1", {INT64_MAX}), -INT64_MAX);
}

TEST(Expr, ParseErrors) {
  expect_parse_error("", {"expression \"\"", "expected an operand at position 0", "the end"});
  expect_parse_error("   ", {"expected an operand at position 3"});
  expect_parse_error("(N+", {"expression \"(N+\": expected an operand at position 3"});
  expect_parse_error("N +", {"expected an operand at position 3"});
  expect_parse_error("N *", {"expected an operand"});
  expect_parse_error("-", {"expected an operand at position 1"});
  // Trailing garbage.
  expect_parse_error("N N", {"expected an operator or the end at position 2", "found 'N'"});
  expect_parse_error("2N", {"expected an operator or the end at position 1"});
  expect_parse_error("N + 1 2", {"position 6"});
  // Unbalanced parentheses.
  expect_parse_error("(N + 1", {"expected ')' at position 6", "the end"});
  expect_parse_error("((N)", {"expected ')' at position 4"});
  expect_parse_error("N + 1)", {"unmatched ')' at position 5"});
  expect_parse_error(")", {"expected an operand at position 0", "found ')'"});
  expect_parse_error("()", {"expected an operand at position 1"});
  // Functions.
  expect_parse_error("foo(1, 2)", {"unknown function \"foo\" at position 0", "min and max"});
  expect_parse_error("N + ceil (N)", {"unknown function \"ceil\" at position 4"});
  expect_parse_error("min(1 2)", {"expected ',' at position 6", "found '2'"});
  expect_parse_error("max(1)", {"expected ',' at position 5", "found ')'"});
  expect_parse_error("min(1, 2, 3)", {"expected ')' at position 8", "found ','"});
  expect_parse_error("min", {"expected '(' at position 3"});
  expect_parse_error("min + 1", {"expected '(' at position 4"});
  expect_parse_error("max(,1)", {"expected an operand at position 4"});
  // Bad characters.
  expect_parse_error("N $ 2", {"expected an operator or the end at position 2", "found '$'"});
  expect_parse_error("$", {"expected an operand at position 0", "found '$'"});
  expect_parse_error("N ^ 2", {"found '^'"});
  expect_parse_error("1.5", {"position 1", "found '.'"});
  expect_parse_error("N +\x01", {"position 3", "byte 0x01"});
  expect_parse_error("N, M", {"found ','"});
  // Literals beyond int64.
  expect_parse_error("9223372036854775808",
                     {"integer literal 9223372036854775808 at position 0 does not fit in int64"});
  expect_parse_error("N + 99999999999999999999", {"99999999999999999999 at position 4"});
  expect_parse_error("-9223372036854775809", {"literal -9223372036854775809", "position 1"});
}

TEST(Expr, NestingLimits) {
  const int kDeep = 200;
  const std::string deep_parens = std::string(kDeep, '(') + "N" + std::string(kDeep, ')');
  EXPECT_EQ(Expr::parse(deep_parens).evaluate({3}), 3);
  const std::string too_deep = std::string(1000, '(') + "N" + std::string(1000, ')');
  expect_parse_error(too_deep, {"nested too deeply"});
  expect_parse_error(std::string(1000, '-') + "N", {"nested too deeply"});
  // Right-nested sums need one stack slot per level.
  std::string right = "N";
  for (int i = 0; i < 40; ++i) right = "N + (" + right + ")";
  EXPECT_EQ(Expr::parse(right).evaluate({1}), 41);
  for (int i = 0; i < 40; ++i) right = "N + (" + right + ")";
  expect_parse_error(right, {"nested too deeply", "stack slots"});
}

// ---- randomized comparison against an __int128 reference ----

struct Node {
  enum Kind { Lit, Var, Neg, Bin, Min, Max } kind;
  char op = 0;
  int64_t value = 0;
  int var = 0;
  std::vector<Node> kids;
};

const char* const kVarNames[] = {"a", "b", "c", "N"};

Node random_node(std::mt19937_64& rng, int depth) {
  Node n;
  const int choice = depth >= 5 ? static_cast<int>(rng() % 2) : static_cast<int>(rng() % 8);
  switch (choice) {
    case 0: {
      n.kind = Node::Lit;
      const int scale = static_cast<int>(rng() % 3);
      n.value = scale == 0   ? static_cast<int64_t>(rng() % 20)
                : scale == 1 ? static_cast<int64_t>(rng() % 100000)
                             : static_cast<int64_t>(rng() >> 2);
      break;
    }
    case 1:
      n.kind = Node::Var;
      n.var = static_cast<int>(rng() % 4);
      break;
    case 2:
      n.kind = Node::Neg;
      n.kids.push_back(random_node(rng, depth + 1));
      break;
    case 3:
      n.kind = Node::Min;
      break;
    case 4:
      n.kind = Node::Max;
      break;
    default:
      n.kind = Node::Bin;
      n.op = "+-*/%"[rng() % 5];
      break;
  }
  if (n.kind == Node::Min || n.kind == Node::Max || n.kind == Node::Bin) {
    n.kids.push_back(random_node(rng, depth + 1));
    n.kids.push_back(random_node(rng, depth + 1));
  }
  return n;
}

// Fully parenthesised, except where precedence makes it unnecessary at random.
std::string render(const Node& n, std::mt19937_64& rng) {
  switch (n.kind) {
    case Node::Lit:
      return n.value < 0 ? "(" + std::to_string(n.value) + ")" : std::to_string(n.value);
    case Node::Var:
      return kVarNames[n.var];
    case Node::Neg:
      return "-(" + render(n.kids[0], rng) + ")";
    case Node::Min:
      return "min(" + render(n.kids[0], rng) + ", " + render(n.kids[1], rng) + ")";
    case Node::Max:
      return "max(" + render(n.kids[0], rng) + "," + render(n.kids[1], rng) + ")";
    case Node::Bin: {
      std::string lhs = render(n.kids[0], rng);
      // The left operand of a binary operator may drop its parentheses when it is
      // itself a binary operation of the same or higher precedence (left associativity).
      const bool lhs_bare = n.kids[0].kind != Node::Bin ||
                            (std::string("*/%").find(n.kids[0].op) != std::string::npos) ||
                            (std::string("+-").find(n.op) != std::string::npos);
      if (!(lhs_bare && rng() % 2)) lhs = "(" + lhs + ")";
      return lhs + " " + n.op + " (" + render(n.kids[1], rng) + ")";
    }
  }
  return "";
}

// nullopt when a step has no int64 result (overflow, division by zero).
std::optional<int64_t> reference(const Node& n, const int64_t* vars) {
  auto fits = [](__int128 v) -> std::optional<int64_t> {
    if (v < INT64_MIN || v > INT64_MAX) return std::nullopt;
    return static_cast<int64_t>(v);
  };
  switch (n.kind) {
    case Node::Lit:
      return n.value;
    case Node::Var:
      return vars[n.var];
    case Node::Neg: {
      auto a = reference(n.kids[0], vars);
      if (!a) return std::nullopt;
      return fits(-static_cast<__int128>(*a));
    }
    default:
      break;
  }
  auto a = reference(n.kids[0], vars);
  if (!a) return std::nullopt;
  auto b = reference(n.kids[1], vars);
  if (!b) return std::nullopt;
  const __int128 x = *a;
  const __int128 y = *b;
  if (n.kind == Node::Min) return std::min(*a, *b);
  if (n.kind == Node::Max) return std::max(*a, *b);
  switch (n.op) {
    case '+':
      return fits(x + y);
    case '-':
      return fits(x - y);
    case '*':
      return fits(x * y);
    case '/':
      return y == 0 ? std::nullopt : fits(x / y);
    case '%':
      return y == 0 ? std::nullopt : fits(x % y);
  }
  return std::nullopt;
}

TEST(Expr, RandomizedAgainstReference) {
  std::mt19937_64 rng(20240611);
  const std::vector<std::string> all_names = {"a", "b", "c", "N"};
  int evaluated = 0;
  int failed = 0;
  for (int round = 0; round < 3000; ++round) {
    const Node tree = random_node(rng, 0);
    const std::string text = render(tree, rng);
    SCOPED_TRACE(text);
    const Expr parsed = Expr::parse(text);
    const Expr bound = parsed.bind_to(all_names);
    for (int trial = 0; trial < 8; ++trial) {
      int64_t vars[4];
      for (auto& v : vars) {
        switch (rng() % 4) {
          case 0:
            v = static_cast<int64_t>(rng() % 17) - 8;
            break;
          case 1:
            v = static_cast<int64_t>(rng() % 2000001) - 1000000;
            break;
          case 2:
            v = static_cast<int64_t>(rng());
            break;
          default:
            v = (rng() % 2) ? INT64_MIN : INT64_MAX;
            break;
        }
      }
      const auto want = reference(tree, vars);
      if (want) {
        ++evaluated;
        EXPECT_EQ(bound.evaluate(std::span<const int64_t>(vars, 4)), *want);
      } else {
        ++failed;
        EXPECT_THROW(bound.evaluate(std::span<const int64_t>(vars, 4)), Error);
      }
      // The unbound expression sees the same values through its own order.
      std::vector<int64_t> own;
      for (const auto& name : parsed.variables()) {
        own.push_back(
            vars[std::find(all_names.begin(), all_names.end(), name) - all_names.begin()]);
      }
      if (want) {
        EXPECT_EQ(parsed.evaluate(own), *want);
      } else {
        EXPECT_THROW(parsed.evaluate(own), Error);
      }
    }
  }
  // Both outcomes must be well represented for the comparison to mean much.
  EXPECT_GT(evaluated, 3000);
  EXPECT_GT(failed, 1000);
}

}  // namespace
}  // namespace svod
