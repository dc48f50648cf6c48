// Expr::substitute: fixing some variables of an expression to constants.
#include <gtest/gtest.h>

#include "svod/program/expr.h"

namespace svod {
namespace {

TEST(ExprSubstitute, ReplacesNamedVariablesAndKeepsTheOthers) {
  const Expr e = Expr::parse("(N + TILE - 1) / TILE");
  const Expr fixed = e.substitute({{"TILE", 4}});
  EXPECT_EQ(fixed.text(), "(N + 4 - 1) / 4");
  ASSERT_EQ(fixed.variables(), std::vector<std::string>{"N"});
  EXPECT_EQ(fixed.evaluate({10}), 3);
}

TEST(ExprSubstitute, FoldsToAConstantAndParenthesisesNegativeValues) {
  const Expr e = Expr::parse("max(A, 2) * B");
  const Expr fixed = e.substitute({{"A", 5}, {"B", -3}});
  EXPECT_TRUE(fixed.is_constant());
  EXPECT_EQ(fixed.constant_value(), -15);
  EXPECT_EQ(fixed.text(), "max(5, 2) * (-3)");
}

TEST(ExprSubstitute, MatchesWholeNamesOnly) {
  const Expr e = Expr::parse("T + TT + T2");
  const Expr fixed = e.substitute({{"T", 1}});
  EXPECT_EQ(fixed.text(), "1 + TT + T2");
  EXPECT_EQ(fixed.variables(), (std::vector<std::string>{"TT", "T2"}));
  EXPECT_EQ(Expr::constant(7).substitute({{"T", 1}}).constant_value(), 7);
}

}  // namespace
}  // namespace svod
