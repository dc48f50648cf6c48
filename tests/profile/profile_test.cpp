// Profiles: aggregation on known timings, Chrome trace and JSON export of a
// real parallel plan, and SVOD_DEBUG output of the real svod binary.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "svod/base/error.h"
#include "svod/base/thread_pool.h"
#include "svod/backends/cpu/cpu_device.h"
#include "svod/profile/profile.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using Json = nlohmann::json;

OpDescription op(std::string name, std::optional<double> flops, std::optional<double> bytes) {
  OpDescription d;
  d.name = std::move(name);
  d.title = d.name;
  d.kind = OpKind::Kernel;
  d.device = "CPU";
  d.flops = flops;
  d.bytes = bytes;
  return d;
}

// Runs of three ops (two calls of "mm", one of "add") with durations in us.
PlanProfile synthetic(const std::vector<std::array<int64_t, 3>>& durations_us) {
  PlanProfile p;
  p.ops = {op("mm", 2e6, 1e6), op("add", std::nullopt, 3e3), op("mm", 2e6, 1e6)};
  int64_t t = 0;
  for (const auto& run : durations_us) {
    RunProfile r;
    r.start_ns = t;
    for (int64_t d : run) {
      r.ops.push_back(OpSpan{t, t + d * 1000, 1});
      t += d * 1000;
    }
    r.end_ns = t;
    p.runs.push_back(r);
  }
  return p;
}

TEST(Profile, AggregatesKnownTimingsPerKernel) {
  const PlanProfile p = synthetic({{100, 10, 300}, {200, 30, 400}, {500, 20, 600}});
  const auto rows = aggregate(p);
  ASSERT_EQ(rows.size(), 2u);
  // Sorted by total: mm (100+300+200+400+500+600 us) before add (60 us).
  EXPECT_EQ(rows[0].name, "mm");
  EXPECT_EQ(rows[0].calls, 6u);
  EXPECT_DOUBLE_EQ(rows[0].total_us, 2100);
  EXPECT_DOUBLE_EQ(rows[0].min_us, 100);
  EXPECT_DOUBLE_EQ(rows[0].median_us, 350);
  EXPECT_DOUBLE_EQ(rows[0].max_us, 600);
  EXPECT_NEAR(rows[0].share, 2100.0 / 2160.0, 1e-12);
  // 6 calls of 2e6 flops in 2.1 ms; 6e6 bytes in 2.1 ms.
  ASSERT_TRUE(rows[0].gflops && rows[0].gbps);
  EXPECT_NEAR(*rows[0].gflops, 12e6 / 2100e3, 1e-12);
  EXPECT_NEAR(*rows[0].gbps, 6e6 / 2100e3, 1e-12);
  EXPECT_EQ(rows[1].name, "add");
  EXPECT_EQ(rows[1].calls, 3u);
  EXPECT_DOUBLE_EQ(rows[1].total_us, 60);
  EXPECT_DOUBLE_EQ(rows[1].median_us, 20);
  EXPECT_FALSE(rows[1].gflops);
  EXPECT_NEAR(*rows[1].gbps, 9e3 / 60e3, 1e-12);

  const auto per_op = aggregate_ops(p);
  ASSERT_EQ(per_op.size(), 3u);
  EXPECT_DOUBLE_EQ(per_op[2].min_us, 300);
  EXPECT_DOUBLE_EQ(per_op[2].median_us, 400);

  const std::string table = render_table(rows);
  EXPECT_LT(table.find("mm"), table.find("add")) << table;
  EXPECT_NE(table.find("97.2%"), std::string::npos) << table;
}

TEST(Profile, ProfilerRecordsEveryOpOfEveryRun) {
  Profiler profiler({op("a", 1, 1), op("b", 1, 1)});
  for (int r = 0; r < 2; ++r) {
    profiler.begin_run();
    profiler.op_started(1);
    profiler.op_finished(1);
    profiler.op_started(0);
    profiler.op_finished(0);
    profiler.end_run();
  }
  const PlanProfile& p = profiler.profile();
  ASSERT_EQ(p.runs.size(), 2u);
  for (const auto& run : p.runs) {
    ASSERT_EQ(run.ops.size(), 2u);
    EXPECT_LE(run.start_ns, run.ops[1].start_ns);
    EXPECT_LE(run.ops[1].end_ns, run.ops[0].start_ns);
    EXPECT_LE(run.ops[0].end_ns, run.end_ns);
    EXPECT_GT(run.ops[0].thread, 0u);
  }
}

TEST(Profile, LongRunsKeepBoundedRecordsButCountEveryRun) {
  constexpr size_t kKeep = 3;
  Profiler profiler({op("a", 1, 1), op("b", 1, 1)}, kKeep);
  constexpr int kRuns = 20;
  for (int r = 0; r < kRuns; ++r) {
    profiler.begin_run();
    profiler.op_started(0);
    profiler.op_finished(0);
    if (r % 2 == 0) {  // b runs in every other run
      profiler.op_started(1);
      profiler.op_finished(1);
    }
    profiler.end_run();
    EXPECT_LT(profiler.profile().runs.size(), 2 * kKeep);
  }
  const PlanProfile& p = profiler.profile();
  EXPECT_EQ(p.run_count(), uint64_t{kRuns});
  EXPECT_GE(p.runs.size(), kKeep);
  const auto rows = aggregate_ops(p);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].calls, size_t{kRuns});
  EXPECT_EQ(rows[1].calls, size_t{kRuns / 2});
  EXPECT_LE(rows[0].min_us, rows[0].median_us);
  EXPECT_LE(rows[0].median_us, rows[0].max_us);
  const RunTimes times = run_times(p);
  EXPECT_EQ(times.runs, uint64_t{kRuns});
  EXPECT_LE(times.min_us, times.median_us);
  EXPECT_LE(times.median_us, times.max_us);
  EXPECT_EQ(nlohmann::json::parse(profile_json(p))["runs"], kRuns);
  // The trace numbers the kept runs as the whole sequence does.
  const std::string trace = chrome_trace(p);
  EXPECT_NE(trace.find(fmt::format("execute #{}", kRuns - 1)), std::string::npos);
  EXPECT_EQ(trace.find("execute #0\""), std::string::npos);
}

// out[0] after `iters` dependent multiply-adds: about 2 ms at 1.5M iterations.
std::shared_ptr<const Program> busy_kernel() {
  ProgramSpec spec = test::c_kernel("busy",
                                    "void busy(float* out, int iters) { float a = out[0];"
                                    " for (int i = 0; i < iters; ++i) a = a * 0.999f + 1.0f; out[0] = a; }",
                                    {BufferParam{"out", Access::ReadWrite, DType::F32}}, {ScalarParam{"iters"}});
  spec.flops = Expr::parse("2*iters");
  spec.bytes = Expr::parse("8");
  static auto program = cpu_device()->compile(spec);
  return program;
}

// Two independent busy kernels and one after both.
ExecutionPlan fork_join_plan() {
  auto device = cpu_device();
  ExecutionPlanBuilder b;
  const size_t x = b.add_buffer(device->allocate(DType::F32, 1), "x");
  const size_t y = b.add_buffer(device->allocate(DType::F32, 1), "y");
  const size_t z = b.add_buffer(device->allocate(DType::F32, 1), "z");
  const Expr iters = Expr::constant(1'500'000);
  b.add_op(KernelOp{busy_kernel(), {x}, {iters}, {}}, OpOptions{.id = "left"});
  b.add_op(KernelOp{busy_kernel(), {y}, {iters}, {}}, OpOptions{.id = "right"});
  b.add_op(KernelOp{busy_kernel(), {z}, {iters}, {}}, OpOptions{.id = "join", .after = {0, 1}});
  return b.build();
}

TEST(Profile, TraceOfAParallelPlanOverlapsIndependentOps) {
  if (thread_count() < 2) GTEST_SKIP() << "needs two threads in the pool";
  ExecutionPlan plan = fork_join_plan();
  Profiler profiler(plan);
  constexpr size_t kRuns = 20;
  for (size_t r = 0; r < kRuns; ++r) profiler.execute(plan);

  const Json trace = Json::parse(chrome_trace(profiler.profile()));
  std::map<std::pair<size_t, size_t>, Json> ops;  // (run, op) -> event
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "kernel") ops[{e["args"]["run"], e["args"]["op"]}] = e;
  }
  ASSERT_EQ(ops.size(), kRuns * 3);
  size_t overlapping = 0;
  for (size_t r = 0; r < kRuns; ++r) {
    const Json& left = ops[{r, 0}];
    const Json& right = ops[{r, 1}];
    const Json& join = ops[{r, 2}];
    const double left_end = left["ts"].get<double>() + left["dur"].get<double>();
    const double right_end = right["ts"].get<double>() + right["dur"].get<double>();
    EXPECT_GE(join["ts"].get<double>(), std::max(left_end, right_end));
    if (left["ts"].get<double>() < right_end && right["ts"].get<double>() < left_end) {
      ++overlapping;
      EXPECT_NE(left["tid"], right["tid"]);
    }
  }
  // A loaded machine may delay one worker now and then, but not in every run
  // (a sanitizer build beside another test did for five runs in a row).
  EXPECT_GT(overlapping, 0u);
}

TEST(Profile, TraceAndJsonAreValidAndComplete) {
  ExecutionPlan plan = fork_join_plan();
  Profiler profiler(plan);
  constexpr size_t kRuns = 3;
  for (size_t r = 0; r < kRuns; ++r) profiler.execute(plan, ExecuteOptions{.sequential = r == 1});

  const Json trace = Json::parse(chrome_trace(profiler.profile()));
  ASSERT_TRUE(trace["traceEvents"].is_array());
  std::set<std::pair<size_t, size_t>> seen;
  std::set<std::pair<int, int>> tracks, named;
  size_t runs = 0;
  for (const auto& e : trace["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("tid") && e.contains("name")) << e;
    if (e["ph"] == "M") {
      if (e["name"] == "thread_name") named.emplace(e["pid"], e["tid"]);
      EXPECT_TRUE(e["args"]["name"].is_string());
      continue;
    }
    ASSERT_EQ(e["ph"], "X") << e;
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    EXPECT_GE(e["ts"].get<double>(), 0.0);
    tracks.emplace(e["pid"], e["tid"]);
    if (e["cat"] == "plan") {
      ++runs;
      continue;
    }
    EXPECT_EQ(e["name"], "busy");
    const auto& args = e["args"];
    seen.emplace(args["run"], args["op"]);
    EXPECT_EQ(args["kind"], "kernel");
    EXPECT_EQ(args["device"], "CPU");
    EXPECT_EQ(args["flops"].get<double>(), 3e6);
    EXPECT_EQ(args["bytes"].get<double>(), 8.0);
    EXPECT_EQ(args["buffers"].size(), 1u);
    EXPECT_FALSE(args["id"].get<std::string>().empty());
  }
  EXPECT_EQ(runs, kRuns);
  EXPECT_EQ(seen.size(), kRuns * 3);
  for (const auto& track : tracks) EXPECT_TRUE(named.count(track)) << track.first << "/" << track.second;

  const Json json = Json::parse(profile_json(profiler.profile()));
  EXPECT_EQ(json["runs"], kRuns);
  ASSERT_EQ(json["kernels"].size(), 1u);
  EXPECT_EQ(json["kernels"][0]["name"], "busy");
  EXPECT_EQ(json["kernels"][0]["calls"], kRuns * 3);
  EXPECT_DOUBLE_EQ(json["kernels"][0]["share"].get<double>(), 1.0);
  EXPECT_GT(json["kernels"][0]["gflops"].get<double>(), 0.0);
  ASSERT_EQ(json["ops"].size(), 3u);
  EXPECT_EQ(json["ops"][2]["id"], "join");
  EXPECT_EQ(json["ops"][2]["calls"], kRuns);

  const auto path = std::filesystem::temp_directory_path() / fmt::format("svod-profile-{}.json", ::getpid());
  write_chrome_trace(profiler.profile(), path);
  std::ifstream in(path);
  EXPECT_EQ(Json::parse(in)["traceEvents"].size(), trace["traceEvents"].size());
  std::filesystem::remove(path);
  EXPECT_THROW(write_chrome_trace(profiler.profile(), "/nonexistent-dir/t.json"), Error);
}

// SVOD_DEBUG through the real binary: stderr of `svod run` on a one-kernel plan.
class SvodDebug : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / fmt::format("svod-debug-{}", ::getpid());
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "plan.json") << R"J({
  "svod_plan": 1,
  "buffers": { "out": { "dtype": "f32", "count": 64 }, "a": { "dtype": "f32", "count": 64, "init": { "fill": 1 } } },
  "programs": {
    "twice": { "language": "c", "entry": "twice",
               "source": "void twice(float* o, const float* a, int n) { for (int i = 0; i < n; i++) o[i] = 2 * a[i]; }",
               "buffers": [ { "name": "o", "access": "write" }, { "name": "a" } ],
               "scalars": [ { "name": "n", "type": "i32" } ], "bytes": "8*n" }
  },
  "ops": [ { "id": "twice", "run": "twice", "buffers": ["out", "a"], "scalars": { "n": "64" } } ]
})J";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // stderr of `svod run` with SVOD_DEBUG=level and the object cache in `cache_name`
  // (by default a fresh one per level).
  std::string run_at(int level, std::string cache_name = {}) {
    if (cache_name.empty()) cache_name = fmt::format("cache-{}", level);
    const auto cache = dir_ / cache_name;
    const auto err = dir_ / "stderr.txt";
    const std::string command = fmt::format(
        "SVOD_DEBUG={} SVOD_CPU_COMPILER=clang SVOD_CACHE_DIR='{}' '{}' run --repeat 2 '{}' > /dev/null 2> '{}'", level,
        cache.string(), SVOD_BINARY_DIR "/svod", (dir_ / "plan.json").string(), err.string());
    const int status = std::system(command.c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << command;
    std::ifstream in(err);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::filesystem::path dir_;
};

TEST_F(SvodDebug, LevelZeroPrintsNothing) { EXPECT_EQ(run_at(0), ""); }

TEST_F(SvodDebug, LevelOnePrintsCompilesAndCacheLookups) {
  const std::string err = run_at(1);
  EXPECT_NE(err.find("svod: compile twice compiler=clang"), std::string::npos) << err;
  EXPECT_NE(err.find("kernel cache: compiled "), std::string::npos) << err;
  EXPECT_NE(err.find("(twice) in "), std::string::npos) << err;
  EXPECT_EQ(err.find("launch twice"), std::string::npos) << err;
  EXPECT_EQ(err.find("source of twice"), std::string::npos) << err;
}

// The lines for program `twice` that say how the kernel cache served it.
std::vector<std::string> cache_lines(const std::string& err) {
  std::vector<std::string> lines;
  for (size_t at = err.find("svod: kernel cache: "); at != std::string::npos;
       at = err.find("svod: kernel cache: ", at + 1)) {
    lines.push_back(err.substr(at, err.find('\n', at) - at));
  }
  return lines;
}

TEST_F(SvodDebug, TheSecondProcessReportsADiskCacheHitNotACompile) {
  const std::vector<std::string> first = cache_lines(run_at(1, "shared-cache"));
  ASSERT_EQ(first.size(), 1u);
  EXPECT_NE(first[0].find("kernel cache: compiled "), std::string::npos) << first[0];
  EXPECT_NE(first[0].find("(twice) in "), std::string::npos) << first[0];
  EXPECT_NE(first[0].find(" ms"), std::string::npos) << first[0];

  const std::string err = run_at(1, "shared-cache");
  const std::vector<std::string> second = cache_lines(err);
  ASSERT_EQ(second.size(), 1u) << err;
  EXPECT_NE(second[0].find("kernel cache: disk hit, loaded "), std::string::npos) << second[0];
  EXPECT_NE(second[0].find("(twice) in "), std::string::npos) << second[0];
  EXPECT_NE(second[0].find(" ms"), std::string::npos) << second[0];
  // Nothing was compiled: the clang compiler logs every compile it runs.
  EXPECT_EQ(err.find("svod: compile twice"), std::string::npos) << err;
}

TEST_F(SvodDebug, LevelTwoAddsEveryLaunchWithItsRate) {
  const std::string err = run_at(2);
  EXPECT_NE(err.find("svod: compile twice"), std::string::npos) << err;
  size_t launches = 0;
  for (size_t at = err.find("svod: launch twice on CPU, 1 slice: "); at != std::string::npos;
       at = err.find("svod: launch twice on CPU, 1 slice: ", at + 1)) {
    ++launches;
    const std::string line = err.substr(at, err.find('\n', at) - at);
    EXPECT_NE(line.find(" us, "), std::string::npos) << line;
    EXPECT_NE(line.find(" GB/s"), std::string::npos) << line;
  }
  EXPECT_EQ(launches, 2u) << err;  // --repeat 2
}

TEST_F(SvodDebug, LevelFourPrintsSourceAndDisassembly) {
  const std::string err = run_at(4);
  EXPECT_NE(err.find("source of twice"), std::string::npos) << err;
  EXPECT_NE(err.find("disassembly of twice"), std::string::npos) << err;
  EXPECT_NE(err.find("<twice>:"), std::string::npos) << err;
}

}  // namespace
}  // namespace svod
