// How CPU kernels are optimised: the recipe every CPU compiler follows, the
// clang process (and the dlopen compiler) through its command line
// (ClangCompiler::object_flags) and the in-process LLVM compiler through the
// same flags for its front end and the same pass pipeline and code generator
// level for the rest, so that the clang process and the in-process compiler
// build the same code. A recipe is exact: it never changes a result bit
// (no fast-math, no -ffp-contract=fast). It reaches each compiler's identity
// through its flags, so objects built with another recipe are never taken
// from the object cache.
#pragma once

#include <string>
#include <string_view>

namespace svod {

struct CpuRecipe {
  // How the recipe is named where people read it ("O3").
  std::string_view name;
  // Clang's -O level: LLVM's pass pipeline of that level and its code
  // generator's (2: Default, 3: Aggressive, as clang maps them).
  int opt_level;

  // The flag that gives clang this recipe: "-O3".
  std::string clang_flag() const { return "-O" + std::to_string(opt_level); }
};

// -O3. LLVM's O3 pipeline fully unrolls loop bodies twice as large as its O2
// pipeline does (its unroll threshold is 300, not 150): the 5x5 filter loop
// of a depthwise convolution unrolls, and the loop around it then vectorises,
// 8x faster. Every innermost loop is offered to the loop vectoriser, long
// ones included: kernels arrive unrolled into tiles, and a tile's long body
// run over a reduction vectorises across iterations, up to 6x faster than
// the SLP vectoriser alone made it. PaddleOCR's classifier through tinygrad
// ran 2.4x faster than with the in-process -O2 that left long loops to SLP,
// with the same output bits. Compiling takes longer: a quarter more CPU time
// for a corpus of generated kernels (bench_corpus), two fifths more for the
// classifier's.
inline constexpr CpuRecipe kDefaultCpuRecipe{"O3", 3};

}  // namespace svod
