// Timing stability of benchmark_kernel: on a kernel of about 1 ms, five
// measurements in a row (each one benchmark_kernel call) give five medians;
// the spread is max/min of those medians. Reported for the default
// configuration (1 warm-up, 3 timed runs) and for 10 timed runs, as counters
// `spread` (the median of the per-iteration spreads is what to quote) and
// `median_us`.
#include <benchmark/benchmark.h>

#include <algorithm>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/tune/benchmark.h"

namespace {

struct Spin {
  std::shared_ptr<svod::CpuDevice> cpu = svod::cpu_device();
  std::shared_ptr<const svod::Program> program;
  svod::Buffer counter = cpu->allocate(svod::DType::I64, 1);
  int64_t iterations = 0;  // loop trips for about 1 ms

  Spin() {
    svod::ProgramSpec spec;
    spec.entry = "spin";
    spec.source =
        "void spin(long* restrict counter, long n) {\n"
        "  for (long i = 0; i < n; i++) __asm__ volatile(\"\");\n"
        "  counter[0] += 1;\n}\n";
    spec.buffers = {{"counter", svod::Access::ReadWrite}};
    spec.scalars = {{"n", svod::ScalarType::I64}};
    program = cpu->compile(spec);
    // Calibrate: time 10^6 trips (best of five) and scale to 1 ms.
    svod::BenchmarkConfig c;
    c.min_runs = 5;
    const double ns = svod::benchmark_kernel(*program, args(1'000'000), c).stats.min;
    iterations = static_cast<int64_t>(1e6 * 1e6 / ns);
  }
  svod::KernelArgs args(int64_t n) { return {{counter}, {n}}; }
};

Spin& spin() {
  static Spin s;
  return s;
}

void BM_BenchmarkKernelSpread(benchmark::State& state) {
  Spin& s = spin();
  svod::warmup_thread_pool();
  svod::BenchmarkConfig config;
  config.min_runs = static_cast<int>(state.range(0));
  double spread = 0, median = 0;
  for (auto _ : state) {
    std::vector<double> medians;
    for (int repeat = 0; repeat < 5; ++repeat)
      medians.push_back(svod::benchmark_kernel(*s.program, s.args(s.iterations), config).stats.median);
    const auto [lo, hi] = std::minmax_element(medians.begin(), medians.end());
    spread = *hi / *lo;
    median = svod::summarize(medians).median;
  }
  state.counters["spread"] = spread;
  state.counters["median_us"] = median / 1e3;
}
BENCHMARK(BM_BenchmarkKernelSpread)->Arg(3)->Arg(10)->Iterations(1)->Repetitions(5)->Unit(benchmark::kMillisecond);

}  // namespace
