// Compile latency of a small kernel through the clang process (source on
// stdin, object on stdout), and of compile + ELF load together.
#include <benchmark/benchmark.h>

#include "svod/compile/clang_compiler.h"
#include "svod/backends/cpu/cpu_device.h"

namespace {

svod::ProgramSpec small_kernel(int64_t variant) {
  svod::ProgramSpec spec;
  spec.entry = "saxpy";
  spec.source = "void saxpy(float* restrict y, const float* restrict x, int n) {\n"
                "  for (int i = 0; i < n; i++) y[i] = " + std::to_string(variant) + ".0f * x[i] + y[i];\n}\n";
  spec.buffers = {{"y", svod::Access::ReadWrite}, {"x"}};
  spec.scalars = {{"n", svod::ScalarType::I32}};
  return spec;
}

void BM_ClangProcessCompile(benchmark::State& state) {
  svod::ClangCompiler clang;
  int64_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(clang.compile(small_kernel(++i)));
}
BENCHMARK(BM_ClangProcessCompile)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();

void BM_ClangCompileAndLoad(benchmark::State& state) {
  auto cpu = svod::cpu_device();
  svod::ClangCompiler clang;
  int64_t i = 0;
  for (auto _ : state) {
    auto spec = small_kernel(++i);
    benchmark::DoNotOptimize(cpu->load(spec, clang.compile(spec)));
  }
}
BENCHMARK(BM_ClangCompileAndLoad)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();

}  // namespace
