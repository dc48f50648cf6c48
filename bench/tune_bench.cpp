// Tuning throughput on examples/tune_matmul (512 x 512 f32 matmul, the
// full tune.json): candidates evaluated per second by `svod tune`'s search
// (worker processes, parallel compiles through the caches, checked and timed
// candidates), against compiling and timing the same candidates one after
// another in this process (no check, no isolation). Compiles start from an
// empty object cache in each case. Needs the svod tool built beside the
// benchmarks (SVOD_BINARY_DIR/svod).
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>

#include "svod/cache/object_cache.h"
#include "svod/registry/registry.h"
#include "svod/planfile/plan_file.h"
#include "svod/tune/tuner.h"

namespace {

namespace fs = std::filesystem;

const fs::path kTuneFile = fs::path(SVOD_SOURCE_DIR) / "examples/tune_matmul/tune.json";

// A fresh object cache directory, the process's object cache from now on.
fs::path fresh_cache(const char* tag) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("svod-tune-bench-{}-{}", tag, ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  svod::set_object_cache(std::make_shared<svod::ObjectCache>(svod::ObjectCacheConfig{.directory = dir}));
  return dir;
}

// The points the search evaluated, for the sequential baseline.
std::vector<svod::TunePoint> g_points;

void BM_TuneSearch(benchmark::State& state) {
  const svod::TuneFile file = svod::parse_tune_file(kTuneFile);
  const fs::path cache = fresh_cache("search");
  svod::TuneOptions options;
  // The workers are other processes: their cache is named in their own
  // environment (env(1)), not in this process's.
  options.worker_command = {"env", "SVOD_CACHE_DIR=" + cache.string(), (fs::path(SVOD_BINARY_DIR) / "svod").string(),
                            "tune", "--worker"};
  for (auto _ : state) {
    const svod::TuneReport report = svod::tune(file, options);
    state.counters["candidates"] = double(report.candidates.size());
    state.counters["candidates_per_s"] = double(report.candidates.size()) / report.seconds;
    state.counters["speedup_of_best"] = report.speedup(report.best);
    g_points.clear();
    for (const auto& c : report.candidates) g_points.push_back(c.point);
  }
  fs::remove_all(cache);
}
BENCHMARK(BM_TuneSearch)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

void BM_SequentialCompileAndTime(benchmark::State& state) {
  if (g_points.empty()) {
    state.SkipWithError("runs after BM_TuneSearch, on the candidates it evaluated");
    return;
  }
  const svod::TuneFile file = svod::parse_tune_file(kTuneFile);
  const fs::path cache = fresh_cache("sequential");
  svod::PlanFile plan = file.plan;
  plan.outputs.clear();
  svod::LoadedPlan loaded = svod::load_plan(plan, svod::LoadOptions{file.vars});
  const svod::PlanFileOp& op = file.plan.ops[file.op];
  svod::KernelArgs args;
  for (const auto& name : op.buffers) args.buffers.push_back(loaded.plan.buffer(*loaded.plan.find_buffer(name)));
  const auto vars = svod::plan_variable_values(file);
  for (const auto& e : op.scalars) {
    std::vector<int64_t> values;
    for (const auto& name : e.variables()) values.push_back(vars.at(name));
    args.scalars.push_back(e.evaluate(values));
  }
  auto device = svod::open_device(file.plan.device);
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    std::optional<std::chrono::nanoseconds> best;
    for (const auto& point : g_points) {
      auto program = device->compile(svod::candidate_spec(file, point));
      svod::BenchmarkConfig config = file.benchmark;
      config.best_known = best;
      const auto r = svod::benchmark_kernel(*program, args, config);
      const auto median = std::chrono::nanoseconds(int64_t(r.stats.median));
      if (!best || median < *best) best = median;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.counters["candidates"] = double(g_points.size());
    state.counters["candidates_per_s"] = double(g_points.size()) / seconds;
  }
  fs::remove_all(cache);
}
BENCHMARK(BM_SequentialCompileAndTime)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
