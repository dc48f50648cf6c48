// derive_buffer_roles: each rule on real plans whose ops are copies and the
// built-in host functions (fill writes its buffers, all_reduce reads and
// writes them), so that nothing needs compiling.
#include <gtest/gtest.h>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/planfile/buffer_roles.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using test::expect_error;

Buffer floats(size_t count) { return cpu_device()->allocate(DType::F32, count); }

CustomOp fill(std::vector<size_t> slots) { return CustomOp{.name = "fill", .buffers = std::move(slots), .attrs = {{"value", 1.0}}, .def = {}}; }
CustomOp accumulate(size_t slot) { return CustomOp{.name = "all_reduce", .buffers = {slot}, .attrs = {{"op", std::string("sum")}}, .def = {}}; }

TEST(BufferRoles, NamesReadBack) {
  for (BufferRole role : {BufferRole::Input, BufferRole::Output, BufferRole::Constant, BufferRole::State,
                          BufferRole::Scratch})
    EXPECT_EQ(parse_buffer_role(to_string(role)), role);
  const Error e = expect_error([] { parse_buffer_role("weights"); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(std::string(e.what()).find("\"weights\""), std::string::npos) << e.what();
}

// w is only read: a constant. t is written, then read: scratch. y is written
// and read by nobody: scratch, or an output once the caller reads it.
TEST(BufferRoles, NeverWrittenIsConstantWrittenFirstIsScratchOrOutput) {
  ExecutionPlanBuilder b;
  const size_t w = b.add_buffer(floats(4), "w");
  const size_t t = b.add_buffer(floats(4), "t");
  const size_t y = b.add_buffer(floats(4), "y");
  b.add_op(CopyOp{t, w});
  b.add_op(CopyOp{y, t});
  const ExecutionPlan plan = b.build();
  auto roles = derive_buffer_roles(plan, {});
  EXPECT_EQ(roles[w], BufferRole::Constant);
  EXPECT_EQ(roles[t], BufferRole::Scratch);
  EXPECT_EQ(roles[y], BufferRole::Scratch);
  roles = derive_buffer_roles(plan, RoleRequest{.inputs = {}, .outputs = {y}, .overrides = {}});
  EXPECT_EQ(roles[y], BufferRole::Output);
  EXPECT_EQ(roles[t], BufferRole::Scratch);
}

// An accumulator read and written by one op keeps its value between runs.
TEST(BufferRoles, ReadModifyWriteIsState) {
  ExecutionPlanBuilder b;
  const size_t acc = b.add_buffer(floats(4), "acc");
  const size_t out = b.add_buffer(floats(4), "out");
  b.add_op(accumulate(acc));
  b.add_op(CopyOp{out, acc});
  const ExecutionPlan plan = b.build();
  // Named an output, state stays state: its contents must be kept.
  const auto roles = derive_buffer_roles(plan, RoleRequest{.inputs = {}, .outputs = {acc, out}, .overrides = {}});
  EXPECT_EQ(roles[acc], BufferRole::State);
  EXPECT_EQ(roles[out], BufferRole::Output);
}

// Written first, then read and written: the read sees this run's bytes.
TEST(BufferRoles, WrittenBeforeTheReadModifyWriteIsScratch) {
  ExecutionPlanBuilder b;
  const size_t acc = b.add_buffer(floats(4), "acc");
  b.add_op(fill({acc}));
  b.add_op(accumulate(acc));
  const ExecutionPlan plan = b.build();
  EXPECT_EQ(derive_buffer_roles(plan, {})[acc], BufferRole::Scratch);
}

// Bytes, not buffers: an arena whose views are each written before they are
// read is scratch; a byte of it read before any op writes it makes it state.
TEST(BufferRoles, ViewsOfOneArenaAreJudgedByteByByte) {
  for (const bool read_early : {false, true}) {
    ExecutionPlanBuilder b;
    const size_t arena = b.add_buffer(floats(8), "arena");
    const size_t lo = b.add_view(arena, 0, 16, DType::F32, "lo");
    const size_t hi = b.add_view(arena, 16, 16, DType::F32, "hi");
    const size_t whole = b.add_view(arena, 0, 32, DType::F32, "whole");
    const size_t out = b.add_buffer(floats(8), "out");
    b.add_op(fill({lo}));
    if (!read_early) b.add_op(fill({hi}));
    b.add_op(CopyOp{out, whole});  // reads hi before anything wrote it when read_early
    if (read_early) b.add_op(fill({hi}));
    const ExecutionPlan plan = b.build();
    const auto roles = derive_buffer_roles(plan, {});
    EXPECT_EQ(roles[arena], read_early ? BufferRole::State : BufferRole::Scratch) << read_early;
    EXPECT_FALSE(roles[lo] || roles[hi] || roles[whole]) << "views have no role of their own";
  }
}

TEST(BufferRoles, InputsAndOverridesWin) {
  ExecutionPlanBuilder b;
  const size_t x = b.add_buffer(floats(4), "x");
  const size_t y = b.add_buffer(floats(4), "y");
  const size_t w = b.add_buffer(floats(4), "w");
  b.add_op(CopyOp{y, x});
  const ExecutionPlan plan = b.build();
  const auto roles = derive_buffer_roles(
      plan, RoleRequest{.inputs = {x}, .outputs = {y}, .overrides = {{y, BufferRole::State}, {w, BufferRole::Scratch}}});
  EXPECT_EQ(roles[x], BufferRole::Input);
  EXPECT_EQ(roles[y], BufferRole::State);
  EXPECT_EQ(roles[w], BufferRole::Scratch);
}

TEST(BufferRoles, RolesBelongToBases) {
  ExecutionPlanBuilder b;
  const size_t arena = b.add_buffer(floats(8), "arena");
  const size_t v = b.add_view(arena, 0, 16, DType::F32, "v");
  b.add_op(fill({v}));
  const ExecutionPlan plan = b.build();
  EXPECT_EQ(base_slot(plan, v), arena);
  for (const RoleRequest& request : {RoleRequest{.inputs = {v}, .outputs = {}, .overrides = {}},
                                     RoleRequest{.inputs = {}, .outputs = {}, .overrides = {{v, BufferRole::State}}}}) {
    const Error e = expect_error([&] { derive_buffer_roles(plan, request); });
    EXPECT_EQ(e.kind(), ErrorKind::Validation);
    EXPECT_NE(std::string(e.what()).find("buffer 1 (\"v\") is a view of buffer 0"), std::string::npos) << e.what();
  }
  const Error e = expect_error([&] { derive_buffer_roles(plan, RoleRequest{.inputs = {}, .outputs = {7}, .overrides = {}}); });
  EXPECT_NE(std::string(e.what()).find("outputs: buffer 7 is out of range (2 buffers)"), std::string::npos) << e.what();
}

}  // namespace
}  // namespace svod
