// Inputs the fuzzers (fuzz/, scripts/fuzz.sh) once crashed or hung on,
// replayed through the same calls as their fuzz target: each must now give a
// result or an svod::Error, nothing else. fuzz/regressions/<target>/ holds
// them; a target gets a test here once it has one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "svod/base/error.h"
#include "svod/planfile/plan_file.h"
#include "svod/tune/tune_file.h"
#include "tests/planfile/temp_dir.h"

namespace svod {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> inputs_of(std::string_view target) {
  std::vector<std::string> inputs;
  const fs::path dir = fs::path(SVOD_SOURCE_DIR) / "fuzz" / "regressions" / target;
  if (!fs::exists(dir)) return inputs;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    inputs.push_back(s.str());
  }
  return inputs;
}

template <typename Fn>
void replay(std::string_view target, Fn&& fn) {
  const std::vector<std::string> inputs = inputs_of(target);
  EXPECT_FALSE(inputs.empty()) << "no inputs in fuzz/regressions/" << target;
  for (const std::string& input : inputs) {
    try {
      fn(input);
    } catch (const Error&) {
    }
  }
}

TEST(FuzzRegressions, PlanFiles) {
  test::TempDir dir;
  dir.write("k.c", "void k(float* o) { o[0] = 1; }");
  replay("plan_file", [&](const std::string& text) { parse_plan_text(text, dir.path(), "fuzz.json"); });
}

TEST(FuzzRegressions, TuneFiles) {
  test::TempDir dir;
  replay("tune_file", [&](const std::string& text) { parse_tune_file(dir.write("tune.json", text)); });
}

}  // namespace
}  // namespace svod
