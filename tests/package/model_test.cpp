// Model: a packaged plan run by name — inputs and outputs listed with their
// shapes, an input's shape setting a variable dimension, and every wrong
// binding refused by name before anything runs.
#include <gtest/gtest.h>

#include <cstring>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/package/model.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using test::expect_error;

// y[i] = x[i] * w[i] + 1 for i < n: x an input of [n] floats (n in [1, 8]),
// w a constant, y the output of [n].
std::vector<std::byte> scale_package() {
  const auto scale = cpu_device()->compile(test::c_kernel(
      "scale", "void scale(float* y, const float* x, const float* w, long long n) { for (long long i = 0; i < n; ++i) y[i] = x[i] * w[i] + 1; }",
      {{"y", Access::Write, DType::F32}, {"x", Access::Read, DType::F32}, {"w", Access::Read, DType::F32}},
      {ScalarParam{"n", ScalarType::I64}}));
  ExecutionPlanBuilder b;
  const size_t x = b.add_buffer(cpu_device()->allocate(DType::F32, 8), "x");
  Buffer weights = cpu_device()->allocate(DType::F32, 8);
  for (size_t i = 0; i < 8; ++i) weights.span<float>()[i] = float(i) + 0.5f;
  const size_t w = b.add_buffer(std::move(weights), "w");
  const size_t y = b.add_buffer(cpu_device()->allocate(DType::F32, 8), "y");
  b.add_variable(Variable{"n", 1, 8}, 8);
  b.add_op(KernelOp{scale, {y, x, w}, {Expr::parse("n")}, {}});
  const ExecutionPlan plan = b.build();
  SaveOptions save;
  save.inputs.push_back(PlanPort{"x", std::string("x"), std::nullopt, {std::string("n")}});
  save.outputs = std::vector<PlanPort>{PlanPort{"y", std::string("y"), std::nullopt, {std::string("n")}}};
  return pack_plan(plan, save);
}

std::span<const std::byte> bytes_of(const std::vector<float>& v) { return std::as_bytes(std::span(v)); }

std::vector<float> floats_of(const std::vector<std::byte>& bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

void expect_message(const Error& e, std::string_view part) {
  EXPECT_EQ(e.kind(), ErrorKind::Validation) << e.what();
  EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
}

TEST(Model, ListsItsInputsAndOutputsWithVariableDimensions) {
  const auto bytes = scale_package();
  Model model(load_package(std::span<const std::byte>(bytes)));
  const auto inputs = model.inputs();
  ASSERT_EQ(inputs.size(), 1u);
  EXPECT_EQ(inputs[0].name, "x");
  EXPECT_EQ(inputs[0].dtype, DType::F32);
  EXPECT_EQ(inputs[0].shape, std::vector<size_t>{8});
  EXPECT_EQ(inputs[0].dim_variables, std::vector<std::string>{"n"});
  const auto outputs = model.outputs();
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].name, "y");
  ASSERT_TRUE(model.manifest());
  EXPECT_EQ(model.manifest()->inputs.size(), 1u);
}

TEST(Model, AnInputsShapeSetsItsVariableDimension) {
  const auto bytes = scale_package();
  Model model(load_package(std::span<const std::byte>(bytes)));
  const std::vector<float> x = {1, 2, 3};
  const size_t shape[] = {3};
  model.set_input("x", DType::F32, shape, bytes_of(x));
  EXPECT_EQ(model.variables().at("n"), 3);
  EXPECT_EQ(model.output("y").shape, std::vector<size_t>{3});
  model.run();
  EXPECT_EQ(floats_of(model.read_output("y")), (std::vector<float>{1 * 0.5f + 1, 2 * 1.5f + 1, 3 * 2.5f + 1}));

  // Bound once, an input keeps its data for later runs.
  model.set_variable("n", 2);
  const Error e = expect_error([&] { model.run(); });
  expect_message(e, "variable \"n\" was set to 2, and input \"x\"'s shape makes it 3");
  const size_t two[] = {2};
  model.set_input("x", DType::F32, two, bytes_of({4, 5}));
  model.run();
  EXPECT_EQ(floats_of(model.read_output("y")), (std::vector<float>{4 * 0.5f + 1, 5 * 1.5f + 1}));
}

TEST(Model, WrongBindingsAreRefusedByNameAndNothingRuns) {
  const auto bytes = scale_package();
  Model model(load_package(std::span<const std::byte>(bytes)));
  expect_message(expect_error([&] { model.run(); }), "input \"x\" is not bound");
  const std::vector<float> x = {1, 2, 3, 4};
  const size_t four[] = {4};
  expect_message(expect_error([&] { model.set_input("z", DType::F32, four, bytes_of(x)); }),
                 "no input named \"z\" (the inputs: \"x\")");
  expect_message(expect_error([&] { model.set_input("x", DType::I32, four, bytes_of(x)); }),
                 "i32 data for an input of f32");
  const size_t matrix[] = {2, 2};
  expect_message(expect_error([&] { model.set_input("x", DType::F32, matrix, bytes_of(x)); }),
                 "a shape of 2 dimensions [2, 2] for an input of shape [n]");
  const size_t nine[] = {9};
  expect_message(expect_error([&] { model.set_input("x", DType::F32, nine, bytes_of(x)); }),
                 "variable \"n\", which lies in [1, 8], not 9");
  const size_t three[] = {3};
  expect_message(expect_error([&] { model.set_input("x", DType::F32, three, bytes_of(x)); }),
                 "16 bytes of data for shape [3]");
  expect_message(expect_error([&] { model.set_variable("n", 0); }), "n");
  expect_message(expect_error([&] { model.set_variable("m", 1); }), "no variable named \"m\"");
  std::vector<std::byte> small(4);
  expect_message(expect_error([&] { model.read_output("y", small); }), "output \"y\": 4 bytes to read into");
  expect_message(expect_error([&] { model.read_output("q"); }), "no output named \"q\"");
  // None of it changed the variables.
  EXPECT_EQ(model.variables().at("n"), 8);
}

TEST(Model, AnOutputBufferOfTheCallersIsWrittenByTheRun) {
  const auto bytes = scale_package();
  Model model(load_package(std::span<const std::byte>(bytes)));
  Buffer mine = cpu_device()->allocate(DType::F32, 8);
  model.bind_output("y", mine);
  const size_t one[] = {1};
  model.set_input("x", DType::F32, one, bytes_of({2}));
  model.run();
  EXPECT_EQ(mine.span<float>()[0], 2.0f);
}

}  // namespace
}  // namespace svod
