// What a trapped kernel fault costs: a launch whose kernel writes through
// NULL, stopped by the fault handler and thrown as KernelFault, caught here —
// the signal delivery, the handler, the return to the launch boundary and the
// exception with its report — beside the same launch of a kernel that does
// not fault.
#include <benchmark/benchmark.h>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/base/error.h"

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

}  // namespace
