// UnifiedExecutor (the plan runner underneath) and OpenCL queue overheads.
//
//  * ExecutorCpuChain / ExecutorCpuIndependent: 256 empty CPU kernels that
//    all touch one buffer (ordered by hazards) or each their own (parallel),
//    run by the executor; "time_per_node" is wall time per node.
//  * ExecutorTwoDevices: 128 CPU kernels and 128 OpenCL kernels in two
//    independent chains (one per device), and a ping-pong chain where every
//    node waits for one on the other device (CPU kernel, copy to CL, CL
//    kernel, copy back, ...).
//  * ExecutorTwoQueuesChain: OpenCL kernels alternating between two queues
//    of one context, with both sync strategies.
//  * OpenClLaunch: one empty kernel enqueued and waited for (round trip), or
//    256 enqueued back to back then waited for once (throughput);
//    "device_time" is the profiling counters' time per kernel.
// The OpenCL benchmarks report an error when there is no OpenCL device.
#include <benchmark/benchmark.h>

#include "svod/base/error.h"
#include "svod/backends/cpu/cpu_device.h"
#include "svod/registry/registry.h"
#include "svod/executor/executor.h"
#if SVOD_HAVE_OPENCL
#include "svod/backends/opencl/opencl_device.h"
#endif

namespace svod {
namespace {

constexpr int kNodes = 256;

std::shared_ptr<const Program> empty_cpu_kernel() {
  static auto program = [] {
    ProgramSpec spec;
    spec.entry = "empty";
    spec.source = "void empty(int* c) { (void)c; }";
    spec.buffers = {BufferParam{"c", Access::ReadWrite, DType::I32}};
    return cpu_device()->compile(spec);
  }();
  return program;
}

void run_graph(benchmark::State& state, ExecutionGraph& graph, SyncStrategy strategy = SyncStrategy::DeviceEvents) {
  UnifiedExecutor& executor = global_executor();
  executor.execute(graph, GraphRunOptions{.strategy = strategy});  // warm up: first launches, pool threads
  for (auto _ : state) executor.execute(graph, GraphRunOptions{.strategy = strategy});
  state.counters["time_per_node"] =
      benchmark::Counter(static_cast<double>(state.iterations() * graph.size()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void ExecutorCpuChain(benchmark::State& state) {
  Buffer shared = cpu_device()->allocate(DType::I32, 1);
  ExecutionGraph graph;
  for (int i = 0; i < kNodes; ++i) graph.add_kernel(empty_cpu_kernel(), {{shared}, {}});
  run_graph(state, graph);
}
BENCHMARK(ExecutorCpuChain)->UseRealTime();

void ExecutorCpuIndependent(benchmark::State& state) {
  ExecutionGraph graph;
  for (int i = 0; i < kNodes; ++i) graph.add_kernel(empty_cpu_kernel(), {{cpu_device()->allocate(DType::I32, 1)}, {}});
  run_graph(state, graph);
}
BENCHMARK(ExecutorCpuIndependent)->UseRealTime();

#if SVOD_HAVE_OPENCL

std::shared_ptr<OpenClDevice> opencl_or_skip(benchmark::State& state) {
  try {
    return std::static_pointer_cast<OpenClDevice>(open_device("CL:0"));
  } catch (const Error& e) {
    state.SkipWithError(e.what());
    return nullptr;
  }
}

std::shared_ptr<const Program> empty_cl_kernel(OpenClDevice& device) {
  ProgramSpec spec;
  spec.language = Language("opencl");
  spec.entry = "empty";
  spec.source = "__kernel void empty(__global int* c) { if (get_global_id(0) == 1u << 30) c[0] = 0; }";
  spec.buffers = {BufferParam{"c", Access::ReadWrite, DType::I32}};
  return device.compile(spec);
}

void ExecutorTwoDevicesIndependentChains(benchmark::State& state) {
  auto cl = opencl_or_skip(state);
  if (!cl) return;
  Buffer host = cpu_device()->allocate(DType::I32, 1);
  Buffer device = cl->allocate(DType::I32, 1);
  auto cl_kernel = empty_cl_kernel(*cl);
  ExecutionGraph graph;
  for (int i = 0; i < kNodes / 2; ++i) {
    graph.add_kernel(empty_cpu_kernel(), {{host}, {}});
    graph.add_kernel(cl_kernel, {{device}, {}});
  }
  run_graph(state, graph);
}
BENCHMARK(ExecutorTwoDevicesIndependentChains)->UseRealTime();

void ExecutorTwoDevicesPingPong(benchmark::State& state) {
  auto cl = opencl_or_skip(state);
  if (!cl) return;
  Buffer host = cpu_device()->allocate(DType::I32, 1);
  Buffer device = cl->allocate(DType::I32, 1);
  auto cl_kernel = empty_cl_kernel(*cl);
  ExecutionGraph graph;
  for (int i = 0; i < kNodes / 4; ++i) {
    graph.add_kernel(empty_cpu_kernel(), {{host}, {}});
    graph.add_copy(device, host);
    graph.add_kernel(cl_kernel, {{device}, {}});
    graph.add_copy(host, device);
  }
  run_graph(state, graph);
}
BENCHMARK(ExecutorTwoDevicesPingPong)->UseRealTime();

// A chain of OpenCL kernels alternating between two queues of one context:
// with DeviceEvents each waits on the previous event inside OpenCL, with
// BlockingHostWait the host waits for each before submitting the next.
void ExecutorTwoQueuesChain(benchmark::State& state) {
  auto cl = opencl_or_skip(state);
  if (!cl) return;
  OpenClDevice second(cl->index());
  Buffer device = cl->allocate(DType::I32, 1);
  auto first_kernel = empty_cl_kernel(*cl);
  auto second_kernel = empty_cl_kernel(second);
  ExecutionGraph graph;
  for (int i = 0; i < kNodes / 2; ++i) {
    graph.add_kernel(first_kernel, {{device}, {}});
    graph.add_kernel(second_kernel, {{device}, {}});
  }
  run_graph(state, graph, state.range(0) ? SyncStrategy::DeviceEvents : SyncStrategy::BlockingHostWait);
  state.SetLabel(state.range(0) ? "device events" : "blocking host wait");
}
BENCHMARK(ExecutorTwoQueuesChain)->Arg(1)->Arg(0)->UseRealTime();

void OpenClLaunchRoundTrip(benchmark::State& state) {
  auto cl = opencl_or_skip(state);
  if (!cl) return;
  auto kernel = empty_cl_kernel(*cl);
  const Buffer args[] = {cl->allocate(DType::I32, 1)};
  kernel->launch(args, {});
  std::chrono::nanoseconds device_time{0};
  for (auto _ : state) {
    const EventPtr event = cl->queue().launch(*kernel, {args});
    device_time += event->duration();  // waits
  }
  state.counters["device_time"] = benchmark::Counter(std::chrono::duration<double>(device_time).count() /
                                                     static_cast<double>(state.iterations()));
}
BENCHMARK(OpenClLaunchRoundTrip)->UseRealTime();

void OpenClLaunchThroughput(benchmark::State& state) {
  auto cl = opencl_or_skip(state);
  if (!cl) return;
  auto kernel = empty_cl_kernel(*cl);
  const Buffer args[] = {cl->allocate(DType::I32, 1)};
  kernel->launch(args, {});
  for (auto _ : state) {
    EventPtr last;
    for (int i = 0; i < kNodes; ++i) last = cl->queue().launch(*kernel, {args});
    last->wait();
  }
  state.counters["time_per_kernel"] = benchmark::Counter(static_cast<double>(state.iterations() * kNodes),
                                                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(OpenClLaunchThroughput)->UseRealTime();

#endif  // SVOD_HAVE_OPENCL

}  // namespace
}  // namespace svod
