// What the C API adds to a launch: svod_program_launch and Program::launch of
// the same empty kernel (two buffers and a scalar, every check), side by side.
#include <svod/svod.h>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>

#include "svod/backends/cpu/cpu_device.h"

namespace {

constexpr const char* kSpec = R"({
  "language": "c", "entry": "empty",
  "source": "void empty(float* restrict a, const float* restrict b, int n) {}",
  "buffers": [ { "name": "a", "access": "write" }, { "name": "b" } ],
  "scalars": [ { "name": "n", "type": "i32" } ]
})";

void check(svod_status* status) {
  if (status == nullptr) return;
  std::fprintf(stderr, "bench_capi: %s\n", svod_status_message(status));
  std::abort();
}

void BM_CApiLaunchEmpty(benchmark::State& state) {
  svod_device* cpu = nullptr;
  svod_program* program = nullptr;
  svod_buffer *a = nullptr, *b = nullptr;
  check(svod_device_get("CPU", &cpu));
  check(svod_program_compile(cpu, kSpec, &program));
  check(svod_buffer_allocate(cpu, "f32", 16, &a));
  check(svod_buffer_allocate(cpu, "f32", 16, &b));
  svod_buffer* buffers[] = {a, b};
  const int64_t scalars[] = {16};
  for (auto _ : state) check(svod_program_launch(program, buffers, 2, scalars, 1));
  check(svod_buffer_release(b));
  check(svod_buffer_release(a));
  check(svod_program_release(program));
  check(svod_device_release(cpu));
}
BENCHMARK(BM_CApiLaunchEmpty);

void BM_ProgramLaunchEmpty(benchmark::State& state) {
  auto cpu = svod::cpu_device();
  svod::ProgramSpec spec;
  spec.entry = "empty";
  spec.source = "void empty(float* restrict a, const float* restrict b, int n) {}";
  spec.buffers = {{"a", svod::Access::Write}, {"b"}};
  spec.scalars = {{"n", svod::ScalarType::I32}};
  auto program = cpu->compile(spec);
  svod::Buffer buffers[] = {cpu->allocate(svod::DType::F32, 16), cpu->allocate(svod::DType::F32, 16)};
  const int64_t scalars[] = {16};
  for (auto _ : state) program->launch(buffers, scalars);
}
BENCHMARK(BM_ProgramLaunchEmpty);

}  // namespace
