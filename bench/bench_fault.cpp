// What a trapped kernel fault costs: a launch whose kernel writes through
// NULL, stopped by the fault handler and thrown as KernelFault, caught here —
// the signal delivery, the handler, the return to the launch boundary and the
// exception with its report — beside the same launch of a kernel that does
// not fault; a kernel that calls _exit() and is stopped at the call; and how
// long a spinning kernel takes to stop once its StopScope is asked to.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/base/error.h"
#include "svod/guard/kernel_stop.h"

namespace {

std::shared_ptr<const svod::Program> compile(const char* entry, const char* source) {
  svod::ProgramSpec spec;
  spec.entry = entry;
  spec.source = source;
  spec.buffers = {{"o", svod::Access::Write, svod::DType::F32}};
  return svod::cpu_device()->compile(spec);
}

void BM_LaunchThatFaults(benchmark::State& state) {
  auto program = compile("null_write", "void null_write(float* o) { *(volatile float*)0 = o[0]; }");
  svod::Buffer buffers[] = {svod::cpu_device()->allocate(svod::DType::F32, 16)};
  for (auto _ : state) {
    try {
      program->launch(buffers, {});
    } catch (const svod::KernelFault& e) {
      benchmark::DoNotOptimize(e.info().address);
    }
  }
}
BENCHMARK(BM_LaunchThatFaults);

void BM_LaunchThatDoesNotFault(benchmark::State& state) {
  auto program = compile("one_write", "void one_write(float* o) { *(volatile float*)o = o[1]; }");
  svod::Buffer buffers[] = {svod::cpu_device()->allocate(svod::DType::F32, 16)};
  for (auto _ : state) program->launch(buffers, {});
}
BENCHMARK(BM_LaunchThatDoesNotFault);

void BM_LaunchThatCallsExit(benchmark::State& state) {
  auto program = compile("leaves", "void _exit(int); void leaves(float* o) { o[0] = 1; _exit(0); }");
  svod::Buffer buffers[] = {svod::cpu_device()->allocate(svod::DType::F32, 16)};
  for (auto _ : state) {
    try {
      program->launch(buffers, {});
    } catch (const svod::KernelFault& e) {
      benchmark::DoNotOptimize(e.info().cause.data());
    }
  }
}
BENCHMARK(BM_LaunchThatCallsExit);

// From the request to the launch's exception: the signalling thread's wake-up,
// the signal, the handler and the exception. Timed by hand per iteration.
void BM_StopASpinningKernel(benchmark::State& state) {
  auto program = compile("spin", "void spin(volatile float* o) { while (o[0] == 0.0f) { } }");
  svod::Buffer buffers[] = {svod::cpu_device()->allocate(svod::DType::F32, 16)};
  for (auto _ : state) {
    svod::StopScope scope;
    const svod::EnterStopScope entered(scope);
    std::atomic<std::chrono::steady_clock::time_point> asked{};
    std::thread stopper([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      asked = std::chrono::steady_clock::now();
      scope.request(svod::ErrorKind::Execution, "the benchmark asked");
    });
    try {
      program->launch(buffers, {});
    } catch (const svod::Error&) {
    }
    const auto stopped = std::chrono::steady_clock::now();
    stopper.join();
    state.SetIterationTime(std::chrono::duration<double>(stopped - asked.load()).count());
  }
}
BENCHMARK(BM_StopASpinningKernel)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
