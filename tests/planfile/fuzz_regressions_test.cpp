// Inputs the fuzzers (fuzz/, scripts/fuzz.sh) once crashed or hung on,
// replayed through the same calls as their fuzz target: each must now give a
// result or an svod::Error, nothing else. fuzz/regressions/<target>/ holds
// them; a target gets a test here once it has one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "svod/base/error.h"
#include "svod/package/package_format.h"
#include "svod/planfile/plan_file.h"
#include "svod/tune/tune_file.h"
#include "tests/support/temp_dir.h"

namespace svod {
namespace {

namespace fs = std::filesystem;

// (file name, contents) of each kept input of `target`.
std::vector<std::pair<std::string, std::string>> inputs_of(std::string_view target) {
  std::vector<std::pair<std::string, std::string>> inputs;
  const fs::path dir = fs::path(SVOD_SOURCE_DIR) / "fuzz" / "regressions" / target;
  if (!fs::exists(dir)) return inputs;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    inputs.emplace_back(e.path().filename().string(), s.str());
  }
  return inputs;
}

template <typename Fn>
void replay(std::string_view target, Fn&& fn) {
  const auto inputs = inputs_of(target);
  EXPECT_FALSE(inputs.empty()) << "no inputs in fuzz/regressions/" << target;
  for (const auto& [name, input] : inputs) {
    try {
      fn(input);
    } catch (const Error& e) {
      // Inputs nested 100,000 deep once overflowed the stack: they must be
      // refused for their depth, before they are parsed.
      if (name.find("nesting_") != std::string::npos) {
        EXPECT_NE(std::string(e.what()).find("JSON nesting exceeds the limit of 256 levels"), std::string::npos)
            << name << ": " << e.what();
      }
      continue;
    }
    EXPECT_EQ(name.find("nesting_"), std::string::npos) << name << " was accepted";
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

// As fuzz/fuzz_package.cpp: the bytes as a package, then as a manifest.
TEST(FuzzRegressions, Packages) {
  replay("package", [&](const std::string& text) {
    try {
      const PackageReader reader(std::as_bytes(std::span(text.data(), text.size())), "fuzz");
      if (reader.find(kManifestSection) != nullptr) (void)read_manifest(reader.text(kManifestSection), "fuzz");
    } catch (const Error&) {
    }
    (void)read_manifest(text, "fuzz");
  });
}

// The kept deep inputs nest arrays; the same depth of objects (half a
// megabyte each, so made here rather than kept) is refused alike.
TEST(FuzzRegressions, DeepObjects) {
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "{\"\":";
  deep += "1" + std::string(100000, '}');
  test::TempDir dir;
  dir.write("k.c", "void k(float* o) { o[0] = 1; }");
  const auto expect_refused = [](auto&& fn) {
    try {
      fn();
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("JSON nesting exceeds the limit of 256 levels"), std::string::npos)
          << e.what();
    }
  };
  expect_refused([&] { parse_plan_text("{\"svod_plan\": " + deep + "}", dir.path(), "fuzz.json"); });
  expect_refused([&] { parse_tune_file(dir.write("tune.json", "{\"svod_tune\": " + deep + "}")); });
  expect_refused([&] { read_manifest("{\"format\": " + deep + "}", "fuzz"); });
}

}  // namespace
}  // namespace svod
