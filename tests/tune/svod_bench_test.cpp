// `svod bench` as a user runs it: the real binary on the shipped example
// plans, its table, its JSON and its errors (--plot: svod_bench_roofline_test.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "svod/base/subprocess.h"
#include "tests/support/temp_dir.h"

namespace svod {
namespace {

ProcessResult svod_bench(std::vector<std::string> args) {
  args.insert(args.begin(), {SVOD_BINARY_DIR "/svod", "bench"});
  return run_process(args, "", std::chrono::minutes(2));
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
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
  for (const char* row : {"op 0 (fill_x) custom fill", "op 1 (scale) kernel scale", "op 2 (add) kernel add",
                          "op 3 copy x <- src", "op 4 custom all_reduce", "total (sum of medians)"})
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
  EXPECT_EQ(doc["ops"][1]["title"], "op 1 (scale) kernel scale");
  EXPECT_EQ(doc["ops"][1]["kind"], "kernel");
  // scale: flops and bytes come from the program's expressions.
  EXPECT_TRUE(doc["ops"][1].contains("gflops"));
  EXPECT_TRUE(doc["ops"][1].contains("gbps"));
  EXPECT_FALSE(doc["ops"][0].contains("gflops"));

  // The trace holds every call of every op: one warm-up and five timed runs each.
  std::ifstream trace_in(trace);
  const auto events = nlohmann::json::parse(trace_in)["traceEvents"];
  std::map<std::string, int> calls;
  for (const auto& e : events)
    if (e["ph"] == "X" && e["cat"] != "plan") ++calls[e["args"]["title"].get<std::string>()];
  EXPECT_EQ(calls.size(), 5u);
  for (const auto& [title, n] : calls) EXPECT_EQ(n, 6) << title;
}

TEST(SvodBench, PlansThatCannotRunExitWith2AndOneLine) {
  ProcessResult r = svod_bench({"/nonexistent/plan.json"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.substr(0, r.err.find(':', 6)), "svod bench");
  EXPECT_NE(r.err.find("error (io)"), std::string::npos) << r.err;

  r = svod_bench({SVOD_SOURCE_DIR "/examples/features/plan.json", "--var", "N"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--var N: expected NAME=VALUE"), std::string::npos) << r.err;

  r = svod_bench({SVOD_SOURCE_DIR "/examples/features/plan.json", "--cpu-compiler", "gcc"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--cpu-compiler gcc: expected clang, llvm or dlopen"), std::string::npos) << r.err;
}

// --- ranks: the collective plans of tests/planfile/data (under mpirun: tests/comm/mpi)

constexpr const char* kCollectivePlan = SVOD_SOURCE_DIR "/tests/planfile/data/collective.json";
constexpr const char* kGatherPlan = SVOD_SOURCE_DIR "/tests/planfile/data/collective4.json";

TEST(SvodBenchRanks, LocalRanksTimeEveryOpAndOnlyRankZeroPrintsAndWrites) {
  test::TempDir dir;
  const std::string json = (dir / "bench.json").string();
  // collective4.json's sizes fit 4 ranks only.
  ProcessResult r = svod_bench({kGatherPlan, "--ranks", "4", "--runs", "3", "--min-time-ms", "0", "--json", json});
  ASSERT_TRUE(r.ok()) << r.out << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out.find("ranks: 4 (local), this is rank 0\n"), 0u) << r.out;
  EXPECT_EQ(count(r.out, "total (sum of medians)"), 1u) << r.out;
  EXPECT_EQ(r.out.find("[rank"), std::string::npos) << r.out;
  std::ifstream in(json);
  const auto doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["ranks"].get<int>(), 4);
  ASSERT_EQ(doc["ops"].size(), 4u);
  // The collectives are timed, exactly --runs times on every rank.
  for (size_t op = 1; op < 4; ++op) {
    EXPECT_EQ(doc["ops"][op]["kind"], "collective") << doc["ops"][op].dump();
    EXPECT_EQ(doc["ops"][op]["runs"].get<int>(), 3) << doc["ops"][op].dump();
    EXPECT_GT(doc["ops"][op]["median_ns"].get<double>(), 0);
  }

  // --all-ranks: every rank's table, each line prefixed, rank 0's first.
  r = svod_bench({kCollectivePlan, "--ranks", "2", "--all-ranks", "--runs", "2", "--min-time-ms", "0"});
  ASSERT_TRUE(r.ok()) << r.out << r.err;
  EXPECT_NE(r.out.find("[rank 1] ranks: 2 (local), this is rank 1\n"), std::string::npos) << r.out;
  EXPECT_EQ(count(r.out, "] total (sum of medians)"), 2u) << r.out;
  // Two all_reduces a rank, each timed twice.
  const std::regex all_reduce_row(R"(collective all_reduce +2 )");
  EXPECT_EQ(std::distance(std::sregex_iterator(r.out.begin(), r.out.end(), all_reduce_row), std::sregex_iterator()), 4)
      << r.out;
  EXPECT_LT(r.out.rfind("[rank 0]"), r.out.find("[rank 1]")) << r.out;
}

TEST(SvodBenchRanks, OneRankTimesCollectivesToo) {
  // Without --ranks a plan runs as one rank: its collectives are timed on it.
  ProcessResult r = svod_bench({kCollectivePlan, "--runs", "2", "--min-time-ms", "0"});
  ASSERT_TRUE(r.ok()) << r.out << r.err;
  EXPECT_EQ(r.out.find("ranks: "), std::string::npos) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\nop 3 collective broadcast +2 )"))) << r.out;
  // A plan made for 4 ranks does not load as one.
  r = svod_bench({kGatherPlan});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("holds 8 elements but must hold 1 ranks x 2"), std::string::npos) << r.err;
}

TEST(SvodBenchRanks, AFailedRankFailsEveryOtherRankNamingIt) {
  ProcessResult r = svod_bench({SVOD_SOURCE_DIR "/tests/planfile/data/collective_failed_rank.json", "--ranks", "4"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("[rank 1] svod bench: error (validation): "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("scalar r = 1 is outside its bounds"), std::string::npos) << r.err;
  for (int k : {0, 2, 3}) {
    EXPECT_NE(r.err.find("[rank " + std::to_string(k) + "] svod bench: error (execution): "), std::string::npos)
        << r.err;
  }
  EXPECT_EQ(count(r.err, "because rank 1 failed"), 3u) << r.err;

  // A rank count the plan's sizes do not fit: every rank says so.
  r = svod_bench({kGatherPlan, "--ranks", "2"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_EQ(count(r.err, "holds 8 elements but must hold 2 ranks x 2"), 2u) << r.err;
}

TEST(SvodBenchRanks, RankCountsOutsideTheLimitsAndRanksUnderMpirunAreRefused) {
  for (const char* ranks : {"0", "1025"}) {
    ProcessResult r = svod_bench({kCollectivePlan, "--ranks", ranks});
    EXPECT_NE(r.exit_code, 0) << ranks;
    EXPECT_NE(r.err.find("--ranks"), std::string::npos) << ranks << r.err;
  }
  // A process an MPI launcher started is one rank of its job: --ranks is refused
  // before MPI is started (the variable is one OpenMPI's mpirun sets).
  ProcessResult r = run_process({"env", "OMPI_COMM_WORLD_SIZE=2", SVOD_BINARY_DIR "/svod", "bench", kCollectivePlan,
                                 "--ranks", "2"},
                                "", std::chrono::minutes(1));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("svod bench: error (validation): --ranks 2: this process was started by an MPI launcher"),
            std::string::npos)
      << r.err;
  r = svod_bench({"--help"});
  EXPECT_NE(r.out.find("--ranks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--all-ranks"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace svod
