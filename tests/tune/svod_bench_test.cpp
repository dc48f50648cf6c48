// `svod bench` as a user runs it: the real binary on the shipped example
// plans, its table, its JSON and its errors (--plot: svod_bench_roofline_test.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "svod/base/subprocess.h"
#include "tests/planfile/temp_dir.h"

namespace svod {
namespace {

ProcessResult svod_bench(std::vector<std::string> args) {
  args.insert(args.begin(), {SVOD_BINARY_DIR "/svod", "bench"});
  return run_process(args, "", std::chrono::minutes(2));
}

TEST(SvodBench, TimesEveryOpOfAPlanAndWritesJson) {
  test::TempDir dir;
  const std::string json = (dir / "bench.json").string();
  const std::string trace = (dir / "trace.json").string();
  ProcessResult r = svod_bench({SVOD_SOURCE_DIR "/examples/features/plan.json", "--runs", "5", "--max-runs", "50",
                                "--min-time-ms", "0", "--json", json, "--profile", trace});
  ASSERT_TRUE(r.ok()) << r.err;
  EXPECT_EQ(r.err, "");
  // One row per op, kernels with their rates.
  for (const char* row : {"ops[0] (fill_x) custom fill", "ops[1] (scale) run scale", "ops[2] (add) run add",
                          "ops[3] copy x <- src", "ops[4] custom all_reduce", "total (sum of medians)"})
    EXPECT_NE(r.out.find(row), std::string::npos) << row << " missing from:\n" << r.out;

  std::ifstream in(json);
  const auto doc = nlohmann::json::parse(in);
  ASSERT_EQ(doc["ops"].size(), 5u);
  double shares = 0;
  for (const auto& op : doc["ops"]) {
    EXPECT_EQ(op["runs"].get<int>(), 5) << op.dump();  // --min-time-ms 0: exactly --runs
    EXPECT_EQ(op["samples_ns"].size(), 5u);
    EXPECT_GT(op["median_ns"].get<double>(), 0);
    EXPECT_LE(op["min_ns"].get<double>(), op["median_ns"].get<double>());
    shares += op["median_ns"].get<double>();
  }
  EXPECT_GT(shares, 0);
  // scale: flops and bytes come from the program's expressions.
  EXPECT_TRUE(doc["ops"][1].contains("gflops"));
  EXPECT_TRUE(doc["ops"][1].contains("gbps"));
  EXPECT_FALSE(doc["ops"][0].contains("gflops"));

  // The trace holds every call of every op: one warm-up and five timed runs each.
  std::ifstream trace_in(trace);
  const auto events = nlohmann::json::parse(trace_in)["traceEvents"];
  std::map<std::string, int> calls;
  for (const auto& e : events)
    if (e["ph"] == "X" && e["cat"] != "plan") ++calls[e["args"]["label"].get<std::string>()];
  EXPECT_EQ(calls.size(), 5u);
  for (const auto& [label, n] : calls) EXPECT_EQ(n, 6) << label;
}

TEST(SvodBench, PlansThatCannotRunExitWith2AndOneLine) {
  ProcessResult r = svod_bench({"/nonexistent/plan.json"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.substr(0, r.err.find(':', 6)), "svod bench");
  EXPECT_NE(r.err.find("error (io)"), std::string::npos) << r.err;

  r = svod_bench({SVOD_SOURCE_DIR "/examples/features/plan.json", "--var", "N"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--var N: expected NAME=VALUE"), std::string::npos) << r.err;

  r = svod_bench({SVOD_SOURCE_DIR "/examples/features/plan.json", "--backend", "gcc"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--backend gcc: expected clang, llvm or dlopen"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace svod
