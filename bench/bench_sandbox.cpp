// What a sandboxed run costs over an in-process one (svod/sandbox/): the same
// small plan — three kernels over 1024 floats and a copy — executed in
// process and through the sandbox's helper, where each execute is one round
// trip (a request written into shared memory, the reply read back); a kernel
// big enough for threads to matter — y = 2x + 1 over 2^20 floats in 64
// core_id slices — in process on svod's pool and sandboxed on as many of the
// helper's threads; and what making a SandboxedPlan costs (starting, loading
// and locking down a helper). The pool has SVOD_THREADS threads: run
//   SVOD_THREADS=1 build/release/bench/bench_sandbox
//   SVOD_THREADS=2 build/release/bench/bench_sandbox
#include <benchmark/benchmark.h>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/base/thread_pool.h"
#include "svod/plan/execution_plan.h"
#include "svod/sandbox/sandbox.h"

namespace svod {
namespace {

ProgramSpec axpb_spec() {
  ProgramSpec spec;
  spec.entry = "axpb";
  spec.source = "void axpb(const float* x, float* y, int n) { for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i] + 1.0f; }";
  spec.buffers = {BufferParam{"x", Access::Read, DType::F32}, BufferParam{"y", Access::Write, DType::F32}};
  spec.scalars = {ScalarParam{"n"}};
  return spec;
}

ExecutionPlan small_plan() {
  auto program = cpu_device()->compile(axpb_spec());
  constexpr size_t n = 1024;
  ExecutionPlanBuilder b;
  size_t slots[5];
  for (size_t& slot : slots) slot = b.add_buffer(cpu_device()->allocate(DType::F32, n));
  for (size_t k = 0; k < 3; ++k)
    b.add_op(KernelOp{.program = program, .buffers = {slots[k], slots[k + 1]}, .scalars = {Expr::constant(n)}});
  b.add_op(CopyOp{.dst = slots[4], .src = slots[3]});
  return b.build();
}

constexpr int64_t kLargeSlices = 64, kLargePer = 16384;

ExecutionPlan large_plan() {
  ProgramSpec spec;
  spec.entry = "axpb_slices";
  spec.source =
      "void axpb_slices(const float* x, float* y, int core_id) {\n"
      "  for (int i = core_id * 16384; i < (core_id + 1) * 16384; ++i) y[i] = 2.0f * x[i] + 1.0f;\n"
      "}";
  spec.buffers = {BufferParam{"x", Access::Read, DType::F32}, BufferParam{"y", Access::Write, DType::F32}};
  spec.scalars = {ScalarParam{"core_id", ScalarType::I32, 0, kLargeSlices - 1}};
  spec.global_size[0] = Expr::constant(kLargeSlices);
  auto program = cpu_device()->compile(spec);
  ExecutionPlanBuilder b;
  const size_t x = b.add_buffer(cpu_device()->allocate(DType::F32, kLargeSlices * kLargePer));
  const size_t y = b.add_buffer(cpu_device()->allocate(DType::F32, kLargeSlices * kLargePer));
  b.add_op(KernelOp{.program = program, .buffers = {x, y}});
  return b.build();
}

void BM_Elementwise1M_InProcess(benchmark::State& state) {
  ExecutionPlan plan = large_plan();
  for (auto _ : state) plan.execute();
  state.counters["threads"] = thread_count();
}
BENCHMARK(BM_Elementwise1M_InProcess)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Elementwise1M_Sandboxed(benchmark::State& state) {
  ExecutionPlan plan = large_plan();
  SandboxedPlan sandboxed(plan);  // as many threads as the pool
  for (auto _ : state) sandboxed.execute();
  state.counters["threads"] = thread_count();
}
BENCHMARK(BM_Elementwise1M_Sandboxed)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_InProcess(benchmark::State& state) {
  ExecutionPlan plan = small_plan();
  for (auto _ : state) plan.execute(ExecuteOptions{.sequential = true});
}
BENCHMARK(BM_InProcess)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Sandboxed(benchmark::State& state) {
  ExecutionPlan plan = small_plan();
  SandboxedPlan sandboxed(plan);
  for (auto _ : state) sandboxed.execute();
}
BENCHMARK(BM_Sandboxed)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_StartSandbox(benchmark::State& state) {
  ExecutionPlan plan = small_plan();
  for (auto _ : state) {
    SandboxedPlan sandboxed(plan);
    benchmark::DoNotOptimize(sandboxed.helper_pid());
  }
}
BENCHMARK(BM_StartSandbox)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace svod
