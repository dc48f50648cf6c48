// Which CPU compilers this build has: clang and dlopen always, llvm when its
// plugin was built (LLVM 19.1 and clang-cpp found at configure time).
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "svod/compile/cpu_compiler.h"

#ifndef SVOD_LLVM_PLUGIN_BUILT
#define SVOD_LLVM_PLUGIN_BUILT 0
#endif
// Whether the plugin holds LLVM and Clang itself (SVOD_LLVM_STATIC) rather
// than linking libLLVM.so and libclang-cpp.so.
#ifndef SVOD_LLVM_STATIC_BUILT
#define SVOD_LLVM_STATIC_BUILT 0
#endif

// Skips the current test when the build has no llvm plugin.
#define SVOD_REQUIRE_LLVM_PLUGIN() \
  if (!SVOD_LLVM_PLUGIN_BUILT) GTEST_SKIP() << "built without LLVM: no libsvod_llvm.so"

namespace svod::test {

inline std::vector<CpuCompiler> cpu_compilers_built() {
  if (SVOD_LLVM_PLUGIN_BUILT) return {CpuCompiler::Clang, CpuCompiler::Llvm, CpuCompiler::Dlopen};
  return {CpuCompiler::Clang, CpuCompiler::Dlopen};
}

}  // namespace svod::test
