// Kernel speed: a 1M-element float add loaded by svod against the same loop
// compiled by the same clang with the same flags into this binary
// (bench/native_add.c, see bench/CMakeLists.txt). Both should reach the same
// GB/s; the counters report bytes moved per second.
#include <benchmark/benchmark.h>

#include "svod/backends/cpu/cpu_device.h"

extern "C" void native_add(float* restrict_o, const float* a, const float* b, int n);

namespace {

constexpr int kN = 1 << 20;
constexpr double kBytes = 3.0 * kN * sizeof(float);

struct Data {
  std::shared_ptr<svod::CpuDevice> cpu = svod::cpu_device();
  svod::Buffer o = cpu->allocate(svod::DType::F32, kN), a = cpu->allocate(svod::DType::F32, kN),
               b = cpu->allocate(svod::DType::F32, kN);
  Data() {
    for (int i = 0; i < kN; ++i) a.span<float>()[i] = float(i), b.span<float>()[i] = 1.0f;
  }
};

Data& data() {
  static Data d;
  return d;
}

void BM_SvodAdd1M(benchmark::State& state) {
  auto& d = data();
  svod::ProgramSpec spec;
  spec.entry = "add";
  spec.source = "void add(float* restrict o, const float* restrict a, const float* restrict b, int n) {\n"
                "  for (int i = 0; i < n; i++) o[i] = a[i] + b[i];\n}\n";
  spec.buffers = {{"o", svod::Access::Write}, {"a"}, {"b"}};
  spec.scalars = {{"n", svod::ScalarType::I32}};
  auto program = d.cpu->compile(spec);
  svod::Buffer buffers[] = {d.o, d.a, d.b};
  int64_t scalars[] = {kN};
  for (auto _ : state) program->launch(buffers, scalars);
  state.counters["GB/s"] = benchmark::Counter(kBytes * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SvodAdd1M)->Repetitions(5)->ReportAggregatesOnly(true)->UseRealTime();

void BM_NativeAdd1M(benchmark::State& state) {
  auto& d = data();
  float* o = d.o.span<float>().data();
  for (auto _ : state) {
    native_add(o, d.a.span<float>().data(), d.b.span<float>().data(), kN);
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] = benchmark::Counter(kBytes * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_NativeAdd1M)->Repetitions(5)->ReportAggregatesOnly(true)->UseRealTime();

}  // namespace
