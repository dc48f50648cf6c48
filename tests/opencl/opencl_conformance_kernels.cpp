// The conformance suite's kernels in OpenCL C (conformance_kernels.h).
#include "svod/backends/opencl/opencl_compiler.h"
#include "tests/device/conformance_kernels.h"

namespace svod::test {
namespace {

const bool registered = register_conformance_kernels({
    .language = kOpenClLanguage,
    .launch = ConformanceKernels::Launch::Grid,
    .axpb = R"(
__kernel void axpb(__global float* o, __global const float* a, __global const float* b, int n) {
  int i = get_global_id(0);
  if (i < n) o[i] = 2.0f * a[i] + b[i];
})",
    .total = R"(
__kernel void total(__global float* s, __global const float* a, int n) {
  if (get_global_id(0) != 0) return;
  float t = 0.0f;
  for (int k = 0; k < n; k++) t += a[k];
  s[0] = t;
})",
    .mark = R"(
__kernel void mark(__global int* o) {
  int i = get_global_id(0);
  o[i] = i + 1;
})",
});

}  // namespace
}  // namespace svod::test
