// The kernels of the device conformance suite (device_conformance_test.cpp)
// in one language. The suite runs the same checks on every device with each
// kernel in the device's own language, and knows no language itself: the
// test folder that knows a language registers its kernels, in a file named
// <something>_conformance_kernels.cpp (tests/opencl/, tests/cuda/, NULL's
// beside this file). tests/CMakeLists.txt builds every such file, whichever
// folder holds it, into this folder's test binary, where the suite runs, so
// a new device's folder adds its kernels with no edit here.
#pragma once

#include <span>
#include <string>

#include "svod/program/program_spec.h"

namespace svod::test {

struct ConformanceKernels {
  // How the kernels spread their work.
  enum class Launch {
    // Over work-items in groups (CUDA's blocks, OpenCL's work-groups), each
    // working out its index i from its ids; the suite launches axpb in groups
    // of 64, as many as cover n, and mark in groups of 4. The kernels take
    // device memory only.
    Grid,
    // On host threads (C): one call of axpb covers all of [0, n), total runs
    // once, and mark takes i from a last parameter `int core_id`, one
    // core_id slice per index.
    Slices,
  };

  Language language;
  Launch launch;
  // Each kernel's source, whose entry has the kernel's name. The buffers are
  // the language's pointers to global memory (float* and int* below), n an
  // int of at least 1.
  //   axpb(float* o, const float* a, const float* b, int n):
  //     o[i] = 2.0f * a[i] + b[i] for each i < n; work-items past n do
  //     nothing.
  std::string axpb;
  //   total(float* s, const float* a, int n): s[0] = a[0] + ... + a[n-1],
  //     summed in that order by one work-item (with i == 0 on a grid).
  std::string total;
  //   mark(int* o): o[i] = i + 1 for each work-item or slice i.
  std::string mark;
};

// Registers the suite's kernels in `kernels.language`, from a namespace-scope
// initializer (hence the bool). Error(Validation) when that language has
// kernels already: one folder knows each language.
bool register_conformance_kernels(ConformanceKernels kernels);

// The kernels in the first of `languages` (a device's, its own first) that
// has any. Error(Unsupported) naming `languages` and the languages with
// kernels when none of them has.
const ConformanceKernels& conformance_kernels_for(std::span<const Language> languages);

}  // namespace svod::test
