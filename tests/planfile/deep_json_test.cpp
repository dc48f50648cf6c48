// JSON nested far deeper than any plan (100,000 levels once overflowed the
// stack while a plan was checked) is refused before parsing, with a
// Validation error naming the file and the limit; nesting up to the limit
// goes on to the usual field checks.
#include <gtest/gtest.h>

#include <string>

#include "svod/base/error.h"
#include "svod/base/json_depth.h"
#include "svod/planfile/plan_file.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using test::expect_error;
using test::TempDir;

constexpr size_t kDeep = 100000;

constexpr std::string_view kPlan = R"({
  "svod_plan": 1,
  "buffers": { "x": { "dtype": "f32", "count": 8, "init": { "arange": { "start": 0, "step": 1 } } } },
  "ops": [ { "custom": "fill", "buffers": ["x"], "attrs": { "value": 0.5 } } ],
  "outputs": { "x": { "expect": { "values": [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5] } } }
})";

void expect_too_deep(const Error& e, const std::string& where, std::string_view position) {
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_EQ(std::string(e.what()),
            where + ": JSON nesting exceeds the limit of 256 levels (" + std::string(position) + ")");
}

TEST(DeepJson, PlanTextNestedTooDeepIsRefused) {
  TempDir dir;
  // The version field a hundred thousand arrays deep (it used to be printed
  // in the version error, recursively).
  const std::string deep_arrays = "{\"svod_plan\": " + test::nested_arrays(kDeep) + "}";
  expect_too_deep(expect_error([&] { parse_plan_text(deep_arrays, dir.path(), "deep.json"); }), "deep.json",
                  "line 1, column 270");
  const std::string deep_objects = "{\"svod_plan\": 1,\n\"description\": " + test::nested_objects(kDeep) + "}";
  expect_too_deep(expect_error([&] { parse_plan_text(deep_objects, dir.path(), "deep.json"); }), "deep.json",
                  "line 2, column 1291");
  // Unclosed: refused for its depth all the same.
  expect_too_deep(expect_error([&] { parse_plan_text(std::string(kDeep, '['), dir.path(), "open.json"); }),
                  "open.json", "line 1, column 257");
}

TEST(DeepJson, PlanFileAndProgramTextNestedTooDeepAreRefused) {
  TempDir dir;
  const auto path = dir.write("deep.json", "{\"svod_plan\": " + test::nested_arrays(kDeep) + "}");
  expect_too_deep(expect_error([&] { parse_plan_file(path); }), path.string(), "line 1, column 270");
  const std::string program = "{\"language\": \"c\", \"defines\": " + test::nested_objects(kDeep) + "}";
  expect_too_deep(expect_error([&] { parse_program_text(program, dir.path(), "spec"); }), "spec",
                  "line 1, column 1305");
}

TEST(DeepJson, NestingUpToTheLimitGoesOnToTheFieldChecks) {
  TempDir dir;
  // 1 (the plan) + 255 = 256 levels: past the depth check, refused as a field.
  const std::string at_limit = "{\"svod_plan\": 1, \"description\": " + test::nested_arrays(kMaxJsonDepth - 1) + "}";
  Error e = expect_error([&] { parse_plan_text(at_limit, dir.path(), "limit.json"); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(std::string(e.what()).find("limit.json: description: expected a string, got an array"), std::string::npos)
      << e.what();
  const std::string over = "{\"svod_plan\": 1, \"description\": " + test::nested_arrays(kMaxJsonDepth) + "}";
  expect_too_deep(expect_error([&] { parse_plan_text(over, dir.path(), "over.json"); }), "over.json",
                  "line 1, column 288");
  // Brackets inside strings are text, however many.
  const std::string in_string = std::string(kPlan).replace(kPlan.find("\"svod_plan\""), 0,
                                                           "\"description\": \"" + std::string(kDeep, '[') + "\", ");
  EXPECT_EQ(parse_plan_text(in_string, dir.path(), "s.json").buffers.size(), 1u);
}

TEST(DeepJson, RealPlansStillParseAndLoad) {
  TempDir dir;
  const PlanFile file = parse_plan_file(dir.write("plan.json", kPlan));
  ASSERT_EQ(file.buffers.size(), 1u);
  EXPECT_EQ(file.outputs.size(), 1u);
  LoadedPlan loaded = load_plan(file);
  loaded.execute();
  for (const auto& example : {"examples/features/plan.json", "examples/mlp/plan.json"}) {
    EXPECT_NO_THROW(parse_plan_file(std::filesystem::path(SVOD_SOURCE_DIR) / example)) << example;
  }
}

}  // namespace
}  // namespace svod
