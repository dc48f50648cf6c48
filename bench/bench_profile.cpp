// What profiling costs: the 1,000-op chain of empty kernels (each op writes
// one shared 1-element buffer, so the plan runs them one after another)
// executed without an observer, with a Profiler (two clock reads and two
// stores per op), and the Profiler's own work per op without a plan around it.
// Target: at most 100 ns per op with profiling on; no measurable difference
// when off (the plan pays one null check per op). Counters "time_per_op" are
// wall time per op; compare medians (--benchmark_repetitions) on a loaded
// machine, and CPU time alongside wall time.
#include <benchmark/benchmark.h>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/plan/execution_plan.h"
#include "svod/profile/profile.h"

namespace svod {
namespace {

constexpr int kOps = 1000;

std::shared_ptr<const Program> empty_kernel() {
  ProgramSpec spec;
  spec.entry = "empty";
  spec.source = "void empty(int* c) { (void)c; }";
  spec.buffers = {BufferParam{"c", Access::ReadWrite, DType::I32}};
  static auto program = cpu_device()->compile(spec);
  return program;
}

ExecutionPlan chain_plan() {
  auto device = cpu_device();
  ExecutionPlanBuilder b;
  const size_t shared = b.add_buffer(device->allocate(DType::I32, 1));
  for (int i = 0; i < kOps; ++i) b.add_op(KernelOp{empty_kernel(), {shared}, {}, {}});
  return b.build();
}

void set_per_op(benchmark::State& state) {
  state.counters["time_per_op"] =
      benchmark::Counter(kOps, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_ChainProfilingOff(benchmark::State& state) {
  ExecutionPlan plan = chain_plan();
  for (auto _ : state) plan.execute();
  set_per_op(state);
}

void BM_ChainProfilingOn(benchmark::State& state) {
  ExecutionPlan plan = chain_plan();
  Profiler profiler(plan);
  for (auto _ : state) {
    profiler.execute(plan);
    // Keeping every run would grow without bound over millions of
    // iterations; a fresh profiler every 1,000 runs bounds it, off the clock.
    if (profiler.profile().runs.size() == 1000) {
      state.PauseTiming();
      profiler = Profiler(plan);
      state.ResumeTiming();
    }
  }
  set_per_op(state);
}

// The observer calls alone, as the plan makes them for one run.
void BM_ProfilerCallsPerRun(benchmark::State& state) {
  ExecutionPlan plan = chain_plan();
  Profiler profiler(plan);
  for (auto _ : state) {
    profiler.begin_run();
    for (size_t op = 0; op < kOps; ++op) {
      profiler.op_started(op);
      profiler.op_finished(op);
    }
    profiler.end_run();
    if (profiler.profile().runs.size() == 1000) {
      state.PauseTiming();
      profiler = Profiler(plan);
      state.ResumeTiming();
    }
  }
  set_per_op(state);
}

BENCHMARK(BM_ChainProfilingOff)->UseRealTime();
BENCHMARK(BM_ChainProfilingOn)->UseRealTime();
BENCHMARK(BM_ProfilerCallsPerRun)->UseRealTime();

}  // namespace
}  // namespace svod
