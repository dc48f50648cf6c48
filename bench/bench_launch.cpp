// Dispatch cost of the CPU path: Program::launch of an empty kernel (checks
// included), the pre-validated CpuProgram::run that plans use, and a direct C
// call of the same loaded entry as the floor; and what a host buffer costs to
// allocate, with and without its guard page.
#include <benchmark/benchmark.h>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/guard/guarded_memory.h"
#include "svod/program/cpu_abi.h"

namespace {

struct EmptyKernel {
  std::shared_ptr<svod::CpuDevice> cpu = svod::cpu_device();
  std::shared_ptr<const svod::CpuProgram> program;
  svod::Buffer a = cpu->allocate(svod::DType::F32, 16), b = cpu->allocate(svod::DType::F32, 16);

  EmptyKernel() {
    svod::ProgramSpec spec;
    spec.entry = "empty";
    spec.source = "void empty(float* restrict a, const float* restrict b, int n, long long m) {}";
    spec.buffers = {{"a", svod::Access::Write, svod::DType::F32, svod::Expr::parse("n")}, {"b"}};
    spec.scalars = {{"n", svod::ScalarType::I32, 0, 16}, {"m", svod::ScalarType::I64}};
    program = std::dynamic_pointer_cast<const svod::CpuProgram>(cpu->compile(spec));
  }
};

EmptyKernel& kernel() {
  static EmptyKernel k;
  return k;
}

void BM_ProgramLaunchEmpty(benchmark::State& state) {
  auto& k = kernel();
  svod::Buffer buffers[] = {k.a, k.b};
  int64_t scalars[] = {16, int64_t{1} << 40};
  for (auto _ : state) k.program->launch(buffers, scalars);
}
BENCHMARK(BM_ProgramLaunchEmpty);

void BM_CpuProgramRunEmpty(benchmark::State& state) {
  auto& k = kernel();
  uint64_t args[] = {reinterpret_cast<uint64_t>(k.a.data()), reinterpret_cast<uint64_t>(k.b.data()), 16, 1ull << 40};
  for (auto _ : state) k.program->run(args, 1);
}
BENCHMARK(BM_CpuProgramRunEmpty);

void BM_DirectCallEmpty(benchmark::State& state) {
  auto& k = kernel();
  auto fn = reinterpret_cast<void (*)(float*, const float*, int, long long)>(k.program->entry());
  float* a = k.a.span<float>().data();
  const float* b = k.b.span<float>().data();
  for (auto _ : state) {
    benchmark::DoNotOptimize(fn);
    fn(a, b, 16, 1ll << 40);
  }
}
BENCHMARK(BM_DirectCallEmpty);

// Fan-out cost: an empty kernel split into one core_id slice per pool thread.
void BM_ProgramLaunchCoreIdSlices(benchmark::State& state) {
  auto cpu = svod::cpu_device();
  svod::ProgramSpec spec;
  spec.entry = "slice";
  spec.source = "void slice(float* restrict a, int core_id) {}";
  spec.buffers = {{"a", svod::Access::Write}};
  spec.scalars = {{"core_id", svod::ScalarType::I32}};
  spec.global_size[0] = svod::Expr::constant(state.range(0));
  auto program = cpu->compile(spec);
  svod::Buffer a = cpu->allocate(svod::DType::F32, 1);
  svod::Buffer buffers[] = {a};
  for (auto _ : state) program->launch(buffers, {});
}
BENCHMARK(BM_ProgramLaunchCoreIdSlices)->Arg(2)->Arg(16);

}  // namespace

// What a host buffer costs to allocate and free: fenced (the default: a
// mapping ending at a guard page) against SVOD_GUARD_PAGES=0 (malloc for small
// buffers, a plain mapping from 1 MiB up). Args: bytes, fenced.
void BM_AllocateHostBuffer(benchmark::State& state) {
  auto cpu = svod::cpu_device();
  const auto bytes = static_cast<size_t>(state.range(0));
  const bool was = svod::fence_host_memory();
  svod::set_fence_host_memory(state.range(1) != 0);
  for (auto _ : state) benchmark::DoNotOptimize(cpu->allocate(svod::DType::U8, bytes));
  svod::set_fence_host_memory(was);
}
BENCHMARK(BM_AllocateHostBuffer)->ArgsProduct({{64, 65536, 1 << 20}, {0, 1}});
