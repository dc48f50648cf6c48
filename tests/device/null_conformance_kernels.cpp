// The conformance suite's kernels in NULL's own language, nullc
// (conformance_kernels.h). nullc is C under NULL's name, so they read as the
// CPU's C kernels do; NULL brings them itself, as any device brings its
// language's, and runs the suite in nullc although it also runs C.
#include "tests/device/conformance_kernels.h"
#include "tests/device/null_device.h"

namespace svod::test {
namespace {

const bool registered = register_conformance_kernels({
    .language = kNullLanguage,
    .launch = ConformanceKernels::Launch::Slices,
    .axpb = R"(
void axpb(float* o, const float* a, const float* b, int n) {
  for (int i = 0; i < n; i++) o[i] = 2.0f * a[i] + b[i];
})",
    .total = R"(
void total(float* s, const float* a, int n) {
  float t = 0.0f;
  for (int k = 0; k < n; k++) t += a[k];
  s[0] = t;
})",
    .mark = R"(
void mark(int* o, int core_id) { o[core_id] = core_id + 1; })",
});

}  // namespace
}  // namespace svod::test
