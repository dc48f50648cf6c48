// CUDA figures: NVRTC compile latency per small kernel (no GPU needed), and
// on a GPU the launch overhead per kernel launched directly, per node of a
// replayed CUDA graph, and host<->device copy bandwidth (pinned and pageable).
// GPU benchmarks report an error line and skip when no CUDA device opens.
//
//   build/release/bench/cuda_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <atomic>
#include <memory>
#include <string>

#include "svod/base/error.h"
#include "svod/backends/cpu/cpu_device.h"
#include "svod/backends/cuda/cuda_device.h"
#include "svod/backends/cuda/nvrtc_compiler.h"
#include "svod/registry/registry.h"
#include "svod/executor/executor.h"

namespace svod {
namespace {

ProgramSpec small_kernel(int variant) {
  ProgramSpec spec;
  spec.language = kCudaLanguage;
  spec.entry = "axpy";
  // The variant makes every source distinct, as a compiler emitting many
  // kernels would.
  spec.source = R"(extern "C" __global__ void axpy(float* y, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = )" + std::to_string(variant) + R"(.5f * x[i] + y[i];
})";
  spec.buffers = {{"y", Access::ReadWrite}, {"x"}};
  spec.scalars = {{"n", ScalarType::I32}};
  return spec;
}

void nvrtc_compile(benchmark::State& state, const char* target) {
  std::unique_ptr<NvrtcCompiler> compiler;
  try {
    compiler = std::make_unique<NvrtcCompiler>(target);
  } catch (const Error& e) {
    state.SkipWithError(e.what());
    return;
  }
  int variant = 0;
  for (auto _ : state) benchmark::DoNotOptimize(compiler->compile(small_kernel(variant++)));
}
BENCHMARK_CAPTURE(nvrtc_compile, ptx_compute_90, "compute_90")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(nvrtc_compile, cubin_sm_90, "sm_90")->Unit(benchmark::kMillisecond)->UseRealTime();

std::shared_ptr<CudaDevice> gpu(benchmark::State& state) {
  try {
    return std::static_pointer_cast<CudaDevice>(open_device("CUDA:0"));
  } catch (const Error& e) {
    state.SkipWithError(e.what());
    return nullptr;
  }
}

ProgramSpec empty_kernel() {
  ProgramSpec spec;
  spec.language = kCudaLanguage;
  spec.entry = "touch";
  spec.source = R"(extern "C" __global__ void touch(float* x, int n) { if (threadIdx.x == 0 && n < 0) x[0] = 1.0f; })";
  spec.buffers = {{"x", Access::ReadWrite}};
  spec.scalars = {{"n", ScalarType::I32}};
  spec.local_size = {Expr::constant(32), Expr::constant(1), Expr::constant(1)};
  return spec;
}

// One launch and the wait for it, per iteration.
void cuda_launch_direct(benchmark::State& state) {
  auto device = gpu(state);
  if (!device) return;
  auto program = device->compile(empty_kernel());
  const Buffer x = device->allocate(DType::F32, 32);
  const Buffer args[] = {x};
  const int64_t scalars[] = {1};
  program->launch(args, scalars);
  for (auto _ : state) program->launch(args, scalars);
}
BENCHMARK(cuda_launch_direct)->UseRealTime();

// A chain of N kernels on one buffer, run through the executor: as one CUDA
// graph (replayed every iteration), or with an observer attached, which makes
// the executor launch node by node. Reported per node.
void cuda_chain(benchmark::State& state, bool as_graph) {
  auto device = gpu(state);
  if (!device) return;
  auto program = device->compile(empty_kernel());
  const Buffer x = device->allocate(DType::F32, 32);
  const auto nodes = static_cast<size_t>(state.range(0));
  ExecutionGraph graph;
  for (size_t i = 0; i < nodes; ++i) graph.add_kernel(program, {{x}, {1}});
  struct Quiet : PlanObserver {
    void op_started(size_t) noexcept override {}
    void op_finished(size_t) noexcept override {}
  } quiet;
  GraphRunOptions options;
  if (!as_graph) options.observer = &quiet;
  global_executor().execute(graph, options);
  for (auto _ : state) global_executor().execute(graph, options);
  state.counters["per_node"] = benchmark::Counter(static_cast<double>(nodes),
                                                  benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK_CAPTURE(cuda_chain, graph_replay, true)->Arg(1)->Arg(16)->Arg(128)->UseRealTime();
BENCHMARK_CAPTURE(cuda_chain, node_by_node, false)->Arg(16)->UseRealTime();

void cuda_copy(benchmark::State& state, bool to_device, bool pinned) {
  auto device = gpu(state);
  if (!device) return;
  const size_t bytes = size_t{64} << 20;
  const Buffer on_device = device->allocate(DType::U8, bytes);
  const Buffer on_host = pinned ? device->allocate_host(DType::U8, bytes) : cpu_device()->allocate(DType::U8, bytes);
  for (auto _ : state) {
    if (to_device) device->copy(on_device, on_host);
    else device->copy(on_host, on_device);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}
BENCHMARK_CAPTURE(cuda_copy, h2d_pinned, true, true)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(cuda_copy, d2h_pinned, false, true)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(cuda_copy, h2d_pageable_staged, true, false)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(cuda_copy, d2h_pageable_staged, false, false)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace svod
