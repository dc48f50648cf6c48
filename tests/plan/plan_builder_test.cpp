// ExecutionPlanBuilder: everything it must refuse, and the graph it builds.
#include <gtest/gtest.h>

#include "svod/plan/execution_plan.h"
#include "tests/plan/plan_test_support.h"

namespace svod {
namespace {

using test::expect_error;
using test::host_buffer;
using Preds = std::vector<size_t>;

CustomOp call(std::string name, std::vector<size_t> buffers, Attrs attrs = {}) {
  return CustomOp{std::move(name), std::move(buffers), std::move(attrs)};
}

class PlanBuilder : public ::testing::Test {
 protected:
  void SetUp() override { test::register_access_functions(); }
};

TEST_F(PlanBuilder, EmptyPlanBuildsAndRuns) {
  ExecutionPlan plan = ExecutionPlanBuilder().build();
  EXPECT_EQ(plan.op_count(), 0u);
  EXPECT_EQ(plan.buffer_count(), 0u);
  plan.execute();
  plan.execute_sequential();
}

TEST_F(PlanBuilder, DependencyErrorsNameTheOps) {
  {
    ExecutionPlanBuilder b;
    b.add_op(CopyOp{}, {.id = "a", .after_ids = {"c"}});
    b.add_op(CopyOp{}, {.id = "b", .after_ids = {"a"}});
    b.add_op(CopyOp{}, {.id = "c", .after_ids = {"b"}});
    b.add_buffer(host_buffer(DType::F32, 1));
    expect_error(ErrorKind::Validation, [&] { b.build(); },
                 {"cycle", "op 0 (a) → op 2 (c) → op 1 (b) → op 0 (a)"});
  }
  {
    ExecutionPlanBuilder b;
    b.add_buffer(host_buffer(DType::F32, 1));
    b.add_op(CopyOp{}, {.id = "self", .after_ids = {"self"}});
    expect_error(ErrorKind::Validation, [&] { b.build(); }, {"op 0 (self) depends on itself"});
  }
  {
    ExecutionPlanBuilder b;
    b.add_buffer(host_buffer(DType::F32, 1));
    b.add_op(CopyOp{});
    b.add_op(CopyOp{}, {.after = {1}});
    expect_error(ErrorKind::Validation, [&] { b.build(); }, {"op 1 depends on itself"});
  }
  {
    ExecutionPlanBuilder b;
    b.add_buffer(host_buffer(DType::F32, 1));
    b.add_op(CopyOp{}, {.id = "x", .after_ids = {"nope"}});
    expect_error(ErrorKind::Validation, [&] { b.build(); }, {"op 0 (x)", "unknown op id \"nope\""});
  }
  {
    ExecutionPlanBuilder b;
    b.add_buffer(host_buffer(DType::F32, 1));
    b.add_op(CopyOp{}, {.after = {4}});
    expect_error(ErrorKind::Validation, [&] { b.build(); }, {"op 0", "op index 4"});
  }
  {
    ExecutionPlanBuilder b;
    b.add_buffer(host_buffer(DType::F32, 1));
    b.add_op(CopyOp{}, {.id = "twin"});
    b.add_op(CopyOp{}, {.id = "twin"});
    expect_error(ErrorKind::Validation, [&] { b.build(); }, {"ops 0 and 1", "\"twin\""});
  }
}

TEST_F(PlanBuilder, BufferErrors) {
  {
    ExecutionPlanBuilder b;
    b.add_buffer(host_buffer(DType::F32, 4));
    b.add_op(CopyOp{0, 3}, {.id = "cp"});
    expect_error(ErrorKind::Validation, [&] { b.build(); }, {"op 0 (cp) copy buffer 0 <- buffer 3", "buffer 3", "1 buffers"});
  }
  {
    ExecutionPlanBuilder b;
    b.add_buffer(host_buffer(DType::F32, 4), "big");
    b.add_buffer(host_buffer(DType::F32, 3), "small");
    b.add_op(CopyOp{0, 1});
    expect_error(ErrorKind::Validation, [&] { b.build(); }, {"op 0 copy big <- small", "\"big\"", "16 bytes", "12", "equal"});
  }
  {
    ExecutionPlanBuilder b;
    b.add_buffer(host_buffer(DType::F32, 4));
    b.add_view(0, 8, 12, DType::F32, "tail");
    expect_error(ErrorKind::Validation, [&] { b.build(); }, {"buffer 1 (\"tail\") as a view of buffer 0", "leaves"});
  }
  {
    ExecutionPlanBuilder b;
    b.add_buffer(host_buffer(DType::F32, 4));
    b.add_buffer(Buffer{});
    b.add_op(ViewOp{1, 0, 12, 8, DType::F32}, {.id = "v"});
    expect_error(ErrorKind::Validation, [&] { b.build(); }, {"buffer 1 as a view of buffer 0", "leaves"});
  }
  {
    ExecutionPlanBuilder b;
    b.add_buffer(host_buffer(DType::F32, 4));
    b.add_buffer(host_buffer(DType::F32, 4));
    b.add_op(ViewOp{1, 0, 0, 8, DType::F32});
    expect_error(ErrorKind::Validation, [&] { b.build(); }, {"op 0 view", "must be an empty slot"});
  }
  {
    ExecutionPlanBuilder b;
    b.add_buffer(Buffer{}, "hole");
    expect_error(ErrorKind::Validation, [&] { b.build(); }, {"buffer 0 (\"hole\") is empty"});
  }
  {
    ExecutionPlanBuilder b;
    b.add_buffer(host_buffer(DType::F32, 4));
    b.add_output(2);
    expect_error(ErrorKind::Validation, [&] { b.build(); }, {"output 0 is buffer 2"});
  }
  {
    ExecutionPlanBuilder b;
    b.add_buffer(host_buffer(DType::F32, 4), "same");
    b.add_buffer(host_buffer(DType::F32, 4), "other");
    b.add_buffer(host_buffer(DType::F32, 4), "same");
    expect_error(ErrorKind::Validation, [&] { b.build(); }, {"buffers 0 and 2 are both named \"same\""});
  }
  {
    ExecutionPlanBuilder b;
    b.add_buffer(host_buffer(DType::F32, 4), "o");
    b.add_buffer(host_buffer(DType::F32, 4));
    b.add_output(0);
    b.add_output(1);
    b.add_output(0);
    expect_error(ErrorKind::Validation, [&] { b.build(); }, {"buffer 0 (\"o\") is declared as an output twice"});
  }
}

TEST_F(PlanBuilder, KernelErrors) {
  auto program = test::add_const_kernel();
  auto build = [&](std::vector<size_t> buffers, std::vector<Expr> scalars, DType dtype = DType::F32) {
    ExecutionPlanBuilder b;
    b.add_buffer(host_buffer(dtype, 4));
    b.add_buffer(host_buffer(dtype, 4));
    b.add_variable(Variable{"N", 1, 4}, 4);
    b.add_op(KernelOp{program, std::move(buffers), std::move(scalars), {}}, {.id = "k"});
    return b.build();
  };
  const std::vector<Expr> good{Expr::parse("N"), Expr::constant(1)};
  build({0, 1}, good);
  expect_error(ErrorKind::Validation, [&] { build({0}, good); }, {"op 0 (k) kernel add_const", "takes 2 buffers", "passes 1"});
  expect_error(ErrorKind::Validation, [&] { build({0, 1}, {Expr::constant(1)}); },
               {"op 0 (k) kernel add_const", "takes 2 scalars", "passes 1"});
  expect_error(ErrorKind::Validation, [&] { build({0, 5}, good); }, {"op 0 (k) kernel add_const", "argument 1 is buffer 5"});
  expect_error(ErrorKind::Validation, [&] { build({0, 1}, good, DType::I32); }, {"parameter \"in\" is f32", "i32"});
  expect_error(ErrorKind::Validation, [&] { build({0, 1}, {Expr::parse("M"), Expr::constant(1)}); },
               {"op 0 (k) kernel add_const", "\"M\"", "neither a plan variable nor a fixed variable"});
  // Initial values are checked at build time, like every later run.
  auto set = test::set_kernel();
  ExecutionPlanBuilder b;
  b.add_buffer(host_buffer(DType::F32, 16));
  b.add_variable(Variable{"N"}, 11);
  b.add_op(KernelOp{set, {0}, {Expr::parse("N"), Expr::constant(1)}, {}});
  expect_error(ErrorKind::Validation, [&] { b.build(); }, {"op 0", "n = 11", "outside"});
  expect_error(ErrorKind::Validation, [&] {
    ExecutionPlanBuilder c;
    c.add_variable(Variable{"N", 0, 3}, 5);
    c.build();
  }, {"N = 5"});
}

TEST_F(PlanBuilder, CustomFunctionErrors) {
  auto build = [&](CustomOp op) {
    ExecutionPlanBuilder b;
    b.add_buffer(host_buffer(DType::F32, 4));
    b.add_buffer(host_buffer(DType::F32, 4));
    b.add_buffer(host_buffer(DType::I32, 4));
    b.add_op(std::move(op), {.id = "f"});
    return b.build();
  };
  build(call("all_reduce", {0, 1}, {{"op", "sum"}}));
  expect_error(ErrorKind::Validation, [&] { build(call("no_such_fn", {0})); },
               {"op 0 (f)", "unknown custom function \"no_such_fn\"", "all_reduce"});
  expect_error(ErrorKind::Validation, [&] { build(call("all_reduce", {0, 1})); }, {"op 0", "missing attribute \"op\""});
  expect_error(ErrorKind::Validation, [&] { build(call("all_reduce", {0, 1}, {{"op", "sum"}, {"scale", 2.0}})); },
               {"unknown attribute \"scale\""});
  expect_error(ErrorKind::Validation, [&] { build(call("all_reduce", {0, 1}, {{"op", "mean"}})); }, {"\"mean\""});
  expect_error(ErrorKind::Validation, [&] { build(call("all_reduce", {0, 1}, {{"op", int64_t{1}}})); },
               {"must be a string"});
  expect_error(ErrorKind::Validation, [&] { build(call("all_reduce", {0, 2}, {{"op", "max"}})); },
               {"buffer 1 holds 4 i32", "buffer 0 holds 4 f32"});
  expect_error(ErrorKind::Validation, [&] { build(call("all_reduce", {0, 7}, {{"op", "max"}})); },
               {"argument 1 is buffer 7"});
  expect_error(ErrorKind::Validation, [&] { build(call("fill", {0})); }, {"missing attribute \"value\""});
}

TEST_F(PlanBuilder, HazardEdgesOverViewsOfOneArena) {
  // Arena of 16 floats: A = [0,4), B = [4,8), C = [2,6) overlaps both, D = [8,16).
  ExecutionPlanBuilder b;
  const size_t arena = b.add_buffer(host_buffer(DType::F32, 16), "arena");
  const size_t a = b.add_view(arena, 0, 16, DType::F32, "A");
  const size_t bb = b.add_view(arena, 16, 16, DType::F32, "B");
  const size_t c = b.add_view(arena, 8, 16, DType::F32, "C");
  const size_t d = b.add_view(arena, 32, 32, DType::F32, "D");
  const size_t other = b.add_buffer(host_buffer(DType::F32, 4), "other");
  b.add_op(call("test_write", {a}));        // 0
  b.add_op(call("test_write", {bb}));       // 1: disjoint from 0 (adjacent)
  b.add_op(call("test_read", {c}));         // 2: RAW on 0 and 1
  b.add_op(call("test_read", {a}));         // 3: RAW on 0; readers share
  b.add_op(call("test_write", {d}));        // 4: disjoint from all
  b.add_op(call("test_write", {c}));        // 5: WAW 0,1; WAR 2,3
  b.add_op(call("test_readwrite", {a}));    // 6: after 5 (covers [2,4)); 3 reached through 5
  b.add_op(call("test_read", {other}));     // 7: another storage
  b.add_op(call("test_read", {arena}));     // 8: the whole arena: last writers 4, 5 and 6, and writer 1 of [6,8)
  ExecutionPlan plan = b.build();
  const auto& p = plan.predecessors();
  EXPECT_EQ(p[0], Preds{});
  EXPECT_EQ(p[1], Preds{});
  EXPECT_EQ(p[2], (Preds{0, 1}));
  EXPECT_EQ(p[3], (Preds{0}));
  EXPECT_EQ(p[4], Preds{});
  EXPECT_EQ(p[5], (Preds{0, 1, 2, 3}));
  EXPECT_EQ(p[6], (Preds{0, 3, 5}));
  EXPECT_EQ(p[7], Preds{});
  EXPECT_EQ(p[8], (Preds{1, 4, 5, 6}));
  EXPECT_EQ(plan.topological_order(), (std::vector<size_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST_F(PlanBuilder, CopiesAndKernelsDeclareTheirAccess) {
  ExecutionPlanBuilder b;
  const size_t x = b.add_buffer(host_buffer(DType::F32, 4));
  const size_t y = b.add_buffer(host_buffer(DType::F32, 4));
  const size_t z = b.add_buffer(host_buffer(DType::F32, 4));
  b.add_op(CopyOp{y, x});  // 0: reads x, writes y
  b.add_op(KernelOp{test::add_const_kernel(), {x, z}, {Expr::constant(4), Expr::constant(1)}, {}});  // 1
  b.add_op(KernelOp{test::add_const_kernel(), {y, x}, {Expr::constant(4), Expr::constant(1)}, {}});  // 2
  ExecutionPlan plan = b.build();
  EXPECT_EQ(plan.predecessors()[1], Preds{});        // both only read x
  EXPECT_EQ(plan.predecessors()[2], (Preds{0, 1}));  // RAW on y, WAR on x
}

TEST_F(PlanBuilder, DeclaredEdgesDecideWhichConflictingOpGoesFirst) {
  // Op 0 is added first but declared to run after op 1; their write conflict
  // follows that order instead of creating a cycle.
  ExecutionPlanBuilder b;
  const size_t x = b.add_buffer(host_buffer(DType::F32, 4));
  b.add_op(call("test_write", {x}), {.id = "late", .after_ids = {"early"}});
  b.add_op(call("test_write", {x}), {.id = "early"});
  ExecutionPlan plan = b.build();
  EXPECT_EQ(plan.predecessors()[0], Preds{1});
  EXPECT_EQ(plan.predecessors()[1], Preds{});
  EXPECT_EQ(plan.topological_order(), (std::vector<size_t>{1, 0}));
  EXPECT_EQ(plan.op_id(0), "late");
}

TEST_F(PlanBuilder, OrderIsDeterministic) {
  auto make = [] {
    ExecutionPlanBuilder b;
    std::vector<size_t> bufs;
    for (int i = 0; i < 6; ++i) bufs.push_back(b.add_buffer(host_buffer(DType::F32, 4)));
    // Diamond 0 -> {1, 2} -> 3 by hazards, plus independent 4 and a declared 5 after 4.
    b.add_op(call("test_write", {bufs[0]}));
    b.add_op(call("test_readwrite", {bufs[0], bufs[1]}));
    b.add_op(call("test_read", {bufs[0], bufs[2]}));
    b.add_op(call("test_write", {bufs[0]}));
    b.add_op(call("test_write", {bufs[4]}), {.id = "four"});
    b.add_op(call("test_write", {bufs[5]}), {.after_ids = {"four"}});
    return b.build();
  };
  ExecutionPlan first = make();
  for (int i = 0; i < 5; ++i) {
    ExecutionPlan again = make();
    EXPECT_EQ(again.predecessors(), first.predecessors());
    EXPECT_EQ(again.topological_order(), first.topological_order());
  }
  EXPECT_EQ(first.topological_order(), (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(first.predecessors()[3], (Preds{1, 2}));
}

TEST_F(PlanBuilder, NamesAndAccessors) {
  ExecutionPlanBuilder b;
  b.add_buffer(host_buffer(DType::F32, 4), "in");
  const size_t out = b.add_buffer(host_buffer(DType::F32, 4), "out");
  b.add_output(out);
  b.add_variable(Variable{"N", 0, 10}, 3);
  b.add_op(CopyOp{out, 0}, {.id = "copy"});
  ExecutionPlan plan = b.build();
  EXPECT_EQ(plan.find_buffer("out"), out);
  EXPECT_EQ(plan.find_buffer("missing"), std::nullopt);
  EXPECT_EQ(plan.outputs(), std::vector<size_t>{out});
  EXPECT_EQ(plan.variable("N"), 3);
  EXPECT_TRUE(std::holds_alternative<CopyOp>(plan.op(0)));
  expect_error(ErrorKind::Validation, [&] { plan.buffer(9); }, {"buffer 9"});
}

// What a saved plan reads back: views (from add_view and from view ops), the
// variables with their bounds and current values, each op's options.
TEST_F(PlanBuilder, ViewsVariablesAndOpOptionsReadBack) {
  ExecutionPlanBuilder b;
  const size_t arena = b.add_buffer(host_buffer(DType::F32, 8), "arena");
  const size_t tail = b.add_view(arena, 16, 16, DType::I32, "tail");
  const size_t head = b.add_buffer(Buffer{}, "head");
  b.add_op(ViewOp{head, tail, 4, 8, DType::U8}, {.id = "v", .after_ids = {}, .after = {}, .label = {}});
  b.add_op(CopyOp{head, head}, {.id = {}, .after_ids = {"v"}, .after = {0}, .label = "self"});
  b.add_variable(Variable{"N", 1, 10}, 3);
  b.add_variable(Variable{"B", -2, 2}, 0);
  ExecutionPlan plan = b.build();
  EXPECT_FALSE(plan.view(arena));
  const auto t = plan.view(tail);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->base, arena);
  EXPECT_EQ(t->byte_offset, 16u);
  EXPECT_EQ(t->bytes, 16u);
  EXPECT_EQ(t->dtype, DType::I32);
  const auto h = plan.view(head);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->base, tail);
  EXPECT_EQ(h->byte_offset, 4u);
  EXPECT_EQ(h->dtype, DType::U8);
  plan.execute_with_vars({{"N", 7}});
  const std::vector<PlanVariable> vars = plan.variables();
  ASSERT_EQ(vars.size(), 2u);
  EXPECT_EQ(vars[0].variable.name, "B");
  EXPECT_EQ(vars[0].variable.min, -2);
  EXPECT_EQ(vars[1].variable.name, "N");
  EXPECT_EQ(vars[1].variable.max, 10);
  EXPECT_EQ(vars[1].value, 7);
  EXPECT_EQ(plan.op_options(1).label, "self");
  EXPECT_EQ(plan.op_options(1).after_ids, std::vector<std::string>{"v"});
  EXPECT_EQ(plan.op_options(1).after, std::vector<size_t>{0});
  expect_error(ErrorKind::Validation, [&] { plan.view(5); }, {"buffer 5"});
  expect_error(ErrorKind::Validation, [&] { plan.op_options(2); }, {"op 2"});
}

}  // namespace
}  // namespace svod
