// The conformance suite's kernels in CUDA C++ as NVRTC reads it
// (conformance_kernels.h): entries declared extern "C", so unmangled.
#include "svod/backends/cuda/nvrtc_compiler.h"
#include "tests/device/conformance_kernels.h"

namespace svod::test {
namespace {

const bool registered = register_conformance_kernels({
    .language = kCudaLanguage,
    .launch = ConformanceKernels::Launch::Grid,
    .axpb = R"(
extern "C" __global__ void axpb(float* o, const float* a, const float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) o[i] = 2.0f * a[i] + b[i];
})",
    .total = R"(
extern "C" __global__ void total(float* s, const float* a, int n) {
  if (blockIdx.x * blockDim.x + threadIdx.x != 0) return;
  float t = 0.0f;
  for (int k = 0; k < n; k++) t += a[k];
  s[0] = t;
})",
    .mark = R"(
extern "C" __global__ void mark(int* o) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  o[i] = i + 1;
})",
});

}  // namespace
}  // namespace svod::test
