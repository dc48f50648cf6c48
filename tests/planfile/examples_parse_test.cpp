// Every plan and tune file shipped in the repository parses, and the example
// in docs/PLAN_FORMAT.md is a plan that loads, runs and meets its expectation.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "svod/base/error.h"
#include "svod/planfile/plan_file.h"
#include "svod/tune/tune_file.h"
#include "tests/support/temp_dir.h"

namespace svod {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The JSON files under `folder` that are plan files ("svod_plan") or tune
// files ("svod_tune"); other JSON (fuzz seeds that are invalid on purpose,
// data) is skipped by that test.
struct Found {
  std::vector<fs::path> plans, tunes;
};

Found find_format_files(const std::vector<fs::path>& folders) {
  Found found;
  for (const auto& folder : folders) {
    for (const auto& entry : fs::recursive_directory_iterator(folder)) {
      if (!entry.is_regular_file() || entry.path().extension() != ".json") continue;
      const auto json = nlohmann::json::parse(read_text(entry.path()), nullptr, /*allow_exceptions=*/false);
      if (!json.is_object()) continue;
      if (json.contains("svod_plan")) found.plans.push_back(entry.path());
      if (json.contains("svod_tune")) found.tunes.push_back(entry.path());
    }
  }
  return found;
}

TEST(ShippedFiles, EveryExamplePlanAndTuneFileParses) {
  const Found found = find_format_files({SVOD_SOURCE_DIR "/examples", SVOD_SOURCE_DIR "/tests"});
  // The examples folder holds at least these; the count guards against a walk that finds nothing.
  EXPECT_GE(found.plans.size(), 4u);
  EXPECT_GE(found.tunes.size(), 2u);
  for (const auto& path : found.plans) {
    SCOPED_TRACE(path.string());
    EXPECT_NO_THROW({
      const PlanFile plan = parse_plan_file(path);
      EXPECT_FALSE(plan.buffers.empty());
    });
  }
  for (const auto& path : found.tunes) {
    SCOPED_TRACE(path.string());
    EXPECT_NO_THROW({
      const TuneFile tune = parse_tune_file(path);
      EXPECT_FALSE(tune.parameters.empty());
    });
  }
}

// The first ```json block of a Markdown file.
std::string first_json_block(const fs::path& markdown) {
  const std::string text = read_text(markdown);
  const size_t begin = text.find("```json\n");
  if (begin == std::string::npos) return {};
  const size_t body = begin + 8;
  return text.substr(body, text.find("```", body) - body);
}

TEST(ShippedFiles, ThePlanFormatExampleRunsAndMeetsItsExpectation) {
  const std::string json = first_json_block(SVOD_SOURCE_DIR "/docs/PLAN_FORMAT.md");
  ASSERT_FALSE(json.empty());
  test::TempDir dir;
  LoadedPlan loaded = load_plan(parse_plan_file(dir.write("plan.json", json)));
  loaded.execute();
  ASSERT_FALSE(loaded.outputs.empty());
  for (const auto& out : loaded.outputs) {
    if (!out.expect) continue;
    const Buffer& b = loaded.plan.buffer(out.slot);
    const OutputCheck check =
        check_output(out, b.dtype(), {static_cast<const std::byte*>(b.data()), b.bytes()});
    EXPECT_TRUE(check.passed()) << out.name;
  }
}

}  // namespace
}  // namespace svod
