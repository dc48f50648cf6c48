// How a plan's ops are described and titled for tables, traces and reports
// (svod/plan/op_description.h), one op of each kind, and a program called on
// its own.
#include "svod/plan/op_description.h"

#include <gtest/gtest.h>

#include "tests/plan/plan_test_support.h"

namespace svod {
namespace {

using test::host_buffer;

TEST(OpDescription, EachKindOfOpIsTitledByItsNameKindAndWhatItRuns) {
  test::register_access_functions();
  ExecutionPlanBuilder b;
  const size_t in = b.add_buffer(host_buffer(DType::F32, 4), "in");
  const size_t out = b.add_buffer(host_buffer(DType::F32, 4), "out");
  const size_t tail = b.add_buffer(Buffer{});
  b.add_op(KernelOp{test::add_const_kernel(), {in, out}, {Expr::constant(4), Expr::constant(1)}, {}}, {.id = "add"});
  b.add_op(CopyOp{in, out}, {.label = "back"});
  b.add_op(CustomOp{"test_read", {in}, {}});
  b.add_op(ViewOp{tail, in, 8, 8, DType::F32});
  b.add_op(CollectiveOp{.kind = CollectiveKind::AllReduce, .buffers = {out}});
  const ExecutionPlan plan = b.build();

  const std::vector<OpDescription> ops = describe_ops(plan);
  ASSERT_EQ(ops.size(), 5u);
  EXPECT_EQ(ops[0].title, "op 0 (add) kernel add_const");
  EXPECT_EQ(ops[1].title, "op 1 (back) copy in <- out");
  EXPECT_EQ(ops[2].title, "op 2 custom test_read");
  EXPECT_EQ(ops[3].title, "op 3 view");
  EXPECT_EQ(ops[4].title, "op 4 collective all_reduce");
  const OpKind kinds[] = {OpKind::Kernel, OpKind::Copy, OpKind::Custom, OpKind::View, OpKind::Collective};
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(ops[i].kind, kinds[i]) << ops[i].title;
    EXPECT_EQ(ops[i].title, plan.op_title(i));
  }
  EXPECT_EQ(ops[0].id, "add");
  EXPECT_EQ(ops[1].id, "");  // a label is no id
  EXPECT_EQ(ops[0].device, "CPU");
  EXPECT_EQ(ops[2].device, "host");
}

TEST(OpDescription, AProgramCalledOnItsOwnIsAKernelWithNoPlan) {
  const auto program = test::add_const_kernel();
  const OpDescription d = describe_call(*program);
  EXPECT_EQ(d.title, "kernel add_const");
  EXPECT_EQ(d.name, "add_const");
  EXPECT_EQ(d.kind, OpKind::Kernel);
  EXPECT_EQ(d.device, "CPU");
  EXPECT_EQ(d.id, "");
  EXPECT_TRUE(d.buffers.empty());
  EXPECT_FALSE(d.flops.has_value());
  EXPECT_FALSE(d.bytes.has_value());
}

}  // namespace
}  // namespace svod
