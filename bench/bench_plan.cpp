// Execution-plan overheads and host parallelism.
//
//  * Chain: 1,000 empty kernels that all write one 1-element buffer, so the
//    hazards order them; compared with calling the kernel 1,000 times
//    directly, the difference is the plan's cost per op.
//  * Independent: 1,000 empty kernels, each with its own buffer, run in parallel.
//  * Speedup: 8 independent kernels of about 1 ms each, execute() versus
//    execute_sequential(); reported as the counter "speedup".
// Figures: "time_per_op" counters are wall time per op (seconds, SI-prefixed).
// Run on an otherwise idle machine: the speedup needs two free cores.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/plan/execution_plan.h"

namespace svod {
namespace {

constexpr int kOps = 1000;

ProgramSpec spec_of(std::string entry, std::string source, std::vector<BufferParam> buffers,
                    std::vector<ScalarParam> scalars = {}) {
  ProgramSpec spec;
  spec.entry = std::move(entry);
  spec.source = std::move(source);
  spec.buffers = std::move(buffers);
  spec.scalars = std::move(scalars);
  return spec;
}

std::shared_ptr<const CpuProgram> empty_kernel() {
  static auto program = std::dynamic_pointer_cast<const CpuProgram>(cpu_device()->compile(
      spec_of("empty", "void empty(int* c) { (void)c; }", {BufferParam{"c", Access::ReadWrite, DType::I32}})));
  return program;
}

// A dependent chain of floating-point steps the compiler cannot shorten.
std::shared_ptr<const Program> busy_kernel() {
  static auto program = cpu_device()->compile(
      spec_of("busy",
              "void busy(float* out, int iters) { float a = out[0];"
              " for (int i = 0; i < iters; ++i) a = a * 0.999f + 1.0f; out[0] = a; }",
              {BufferParam{"out", Access::ReadWrite, DType::F32}}, {ScalarParam{"iters"}}));
  return program;
}

ExecutionPlan empty_plan(bool shared_buffer) {
  auto device = cpu_device();
  ExecutionPlanBuilder b;
  size_t shared = b.add_buffer(device->allocate(DType::I32, 1));
  for (int i = 0; i < kOps; ++i) {
    const size_t buf = shared_buffer ? shared : b.add_buffer(device->allocate(DType::I32, 1));
    b.add_op(KernelOp{empty_kernel(), {buf}, {}, {}});
  }
  return b.build();
}

void set_per_op(benchmark::State& state) {
  state.counters["time_per_op"] =
      benchmark::Counter(kOps, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_ChainDirectCalls(benchmark::State& state) {
  auto program = empty_kernel();
  Buffer c = cpu_device()->allocate(DType::I32, 1);
  uint64_t args[1] = {reinterpret_cast<uint64_t>(c.data())};
  for (auto _ : state)
    for (int i = 0; i < kOps; ++i) program->run(args, 1);
  set_per_op(state);
}
BENCHMARK(BM_ChainDirectCalls)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_ChainPlan(benchmark::State& state) {
  ExecutionPlan plan = empty_plan(true);
  const bool sequential = state.range(0) != 0;
  for (auto _ : state) plan.execute({.sequential = sequential});
  set_per_op(state);
}
BENCHMARK(BM_ChainPlan)->Arg(0)->Arg(1)->ArgName("sequential")->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_IndependentPlan(benchmark::State& state) {
  ExecutionPlan plan = empty_plan(false);
  const bool sequential = state.range(0) != 0;
  for (auto _ : state) plan.execute({.sequential = sequential});
  set_per_op(state);
}
BENCHMARK(BM_IndependentPlan)->Arg(0)->Arg(1)->ArgName("sequential")->Unit(benchmark::kMicrosecond)->UseRealTime();

// Iterations of busy_kernel that take about a millisecond here.
int64_t iterations_per_ms() {
  static const int64_t iters = [] {
    auto device = cpu_device();
    Buffer out = device->allocate(DType::F32, 1);
    const int64_t probe = 1'000'000;
    busy_kernel()->launch(std::vector<Buffer>{out}, std::vector<int64_t>{probe});
    auto start = std::chrono::steady_clock::now();
    busy_kernel()->launch(std::vector<Buffer>{out}, std::vector<int64_t>{probe});
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return static_cast<int64_t>(static_cast<double>(probe) / ms);
  }();
  return iters;
}

void BM_EightOneMsKernels(benchmark::State& state) {
  auto device = cpu_device();
  ExecutionPlanBuilder b;
  b.add_variable(Variable{"ITERS", 1, INT32_MAX}, iterations_per_ms());
  for (int i = 0; i < 8; ++i)
    b.add_op(KernelOp{busy_kernel(), {b.add_buffer(device->allocate(DType::F32, 1))}, {Expr::parse("ITERS")}, {}});
  ExecutionPlan plan = b.build();
  // Best of the iterations for each mode: on a shared machine a run that
  // lost its core to another process says nothing about the plan.
  double sequential_s = 1e30, parallel_s = 1e30;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    plan.execute_sequential();
    auto t1 = std::chrono::steady_clock::now();
    plan.execute();
    auto t2 = std::chrono::steady_clock::now();
    sequential_s = std::min(sequential_s, std::chrono::duration<double>(t1 - t0).count());
    parallel_s = std::min(parallel_s, std::chrono::duration<double>(t2 - t1).count());
  }
  state.counters["best_sequential_ms"] = sequential_s * 1e3;
  state.counters["best_parallel_ms"] = parallel_s * 1e3;
  state.counters["speedup"] = sequential_s / parallel_s;
}
BENCHMARK(BM_EightOneMsKernels)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();

}  // namespace
}  // namespace svod
