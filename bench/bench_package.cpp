// Ahead-of-time packages (svod/package) against plan files.
//
//  * ColdStart/plan and ColdStart/package: one `svod run` process of the MLP
//    example (examples/mlp), from process start to checked output (exit 0
//    means every expectation held). The plan gets an empty object-cache
//    directory each time, so it compiles every program; the package runs
//    with SVOD_CACHE=0 (nothing to compile). The ratio of the two medians is
//    the cold-start speedup.
//  * LoadFromMemory: load_package() of the MLP package from bytes in memory
//    (parse, checks, digests, loading four objects, the buffers), in-process.
// Each repetition is one run (one process, one load), so the reported medians
// are medians of single runs. Run: build/release/bench/bench_package
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "svod/base/subprocess.h"
#include "svod/package/package.h"

namespace svod {
namespace {

namespace fs = std::filesystem;

const fs::path kPlan = fs::path(SVOD_SOURCE_DIR) / "examples/mlp/plan.json";
const std::string kCli = std::string(SVOD_BINARY_DIR) + "/svod";

// The MLP package in a temporary file, removed at exit.
struct PackageFile {
  fs::path path = fs::temp_directory_path() / fmt::format("svod_bench_mlp_{}.svodpkg", ::getpid());
  PackageFile() { write_package(path, pack_plan(kPlan)); }
  ~PackageFile() {
    std::error_code ignored;
    fs::remove(path, ignored);
  }
};

const fs::path& packaged() {
  static const PackageFile file;
  return file.path;
}

void run_cli(benchmark::State& state, std::vector<std::string> argv) {
  const ProcessResult r = run_process(argv, "", std::chrono::seconds(120));
  if (!r.ok()) state.SkipWithError(("svod run failed: " + r.err).c_str());
}

void BM_ColdStartPlan(benchmark::State& state) {
  static std::atomic<int> counter{0};
  for (auto _ : state) {
    state.PauseTiming();
    const fs::path cache = fs::temp_directory_path() / fmt::format("svod_bench_cache_{}_{}", ::getpid(), counter++);
    state.ResumeTiming();
    run_cli(state, {"env", "SVOD_CACHE_DIR=" + cache.string(), kCli, "run", kPlan.string()});
    state.PauseTiming();
    fs::remove_all(cache);
    state.ResumeTiming();
  }
}
// One run per repetition: the medians over repetitions are the figures.
BENCHMARK(BM_ColdStartPlan)
    ->Name("ColdStart/plan")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true)
    ->UseRealTime();

void BM_ColdStartPackage(benchmark::State& state) {
  const std::string package = packaged().string();
  for (auto _ : state) run_cli(state, {"env", "SVOD_CACHE=0", kCli, "run", package});
}
BENCHMARK(BM_ColdStartPackage)
    ->Name("ColdStart/package")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(15)
    ->ReportAggregatesOnly(true)
    ->UseRealTime();

void BM_LoadFromMemory(benchmark::State& state) {
  static const std::vector<std::byte> bytes = pack_plan(kPlan);
  for (auto _ : state) {
    LoadedPackage package = load_package(std::span<const std::byte>(bytes));
    benchmark::DoNotOptimize(package);
  }
  state.counters["package_bytes"] = static_cast<double>(bytes.size());
}
BENCHMARK(BM_LoadFromMemory)
    ->Name("LoadFromMemory/mlp")
    ->Unit(benchmark::kMicrosecond)
    ->Iterations(1)
    ->Repetitions(300)
    ->ReportAggregatesOnly(true)
    ->UseRealTime();

}  // namespace
}  // namespace svod
