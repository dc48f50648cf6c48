// A program that uses an installed svod: compile a kernel from C source, load
// it, run it on host buffers and check the result.
#include <cstdio>

#include "svod/registry/registry.h"

int main() {
  auto cpu = svod::open_device("CPU");

  svod::ProgramSpec spec;
  spec.entry = "scale";
  spec.source = "void scale(float* restrict y, const float* restrict x, long n, int k) {\n"
                "  for (long i = 0; i < n; i++) y[i] = k * x[i];\n}\n";
  spec.buffers = {{"y", svod::Access::Write}, {"x", svod::Access::Read}};
  spec.scalars = {{"n", svod::ScalarType::I64}, {"k", svod::ScalarType::I32}};
  auto program = cpu->compile(spec);

  const int n = 1000;
  svod::Buffer y = cpu->allocate(svod::DType::F32, n), x = cpu->allocate(svod::DType::F32, n);
  for (int i = 0; i < n; ++i) x.span<float>()[i] = static_cast<float>(i);
  svod::Buffer buffers[] = {y, x};
  int64_t scalars[] = {n, 3};
  program->launch(buffers, scalars);

  for (int i = 0; i < n; ++i) {
    if (y.span<float>()[i] != 3.0f * i) {
      std::printf("consumer: y[%d] = %g, expected %g\n", i, y.span<float>()[i], 3.0 * i);
      return 1;
    }
  }
  std::printf("consumer: scale kernel ok (y[999] = %g)\n", y.span<float>()[n - 1]);
  return 0;
}
