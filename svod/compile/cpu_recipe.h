// How CPU kernels are optimised: the recipes every CPU compiler follows, the
// clang process (and the dlopen compiler) through its command line
// (ClangCompiler::object_flags) and the in-process LLVM compiler through the
// same flags for its front end and the same pass pipeline, code generator
// level and floating-point options for the rest, so that the clang process
// and the in-process compiler build the same code for every recipe.
//
// A program is compiled by the default recipe unless its spec names another
// (ProgramSpec::recipe), which is what per-kernel variants are: the same
// source compiled by another recipe of this closed set, chosen by measurement
// (svod/tune/variants.h). The default reaches each compiler's identity
// through its flags; another recipe reaches the object cache's key through
// the spec, so an object of one recipe is never taken for another's.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace svod {

struct CpuRecipe {
  // How the recipe is named where people read it and where specs, plan files
  // and packages name it ("O3").
  std::string_view name;
  // Clang's -O level: LLVM's pass pipeline of that level and its code
  // generator's (2: Default, 3: Aggressive, as clang maps them).
  int opt_level;
  // Floating-point arithmetic may be reassociated and contracted into fused
  // multiply-adds across statements, and the sign of a zero may change:
  // -ffp-contract=fast -fassociative-math -fno-signed-zeros. Results may then
  // differ from the exact recipes' in their last bits (a long sum summed in
  // another order), so such a recipe is used only where the caller allows a
  // tolerance. Never finite-math or no-NaN assumptions: generated kernels
  // rely on -inf masks and NaN propagating.
  bool reassociate = false;

  // Exact: never changes a result bit against the default.
  constexpr bool exact() const noexcept { return !reassociate; }
  // The flags that give clang this recipe: {"-O3"}, or with reassociation
  // {"-O3", "-ffp-contract=fast", "-fassociative-math", "-fno-signed-zeros"}.
  std::vector<std::string> clang_flags() const {
    std::vector<std::string> flags = {"-O" + std::to_string(opt_level)};
    if (reassociate) flags.insert(flags.end(), {"-ffp-contract=fast", "-fassociative-math", "-fno-signed-zeros"});
    return flags;
  }
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

// Every recipe a program may name, the default first. O2 unrolls less, which
// keeps some large tiles in registers and the instruction cache; O3_reassoc
// lets a serial float reduction (a dot product, a sum) vectorise, which an
// exact recipe may not: the one dot product of a small dense head ran 4 to 6
// times faster, within 2e-6.
inline constexpr std::array<CpuRecipe, 3> kCpuRecipes = {
    kDefaultCpuRecipe,
    CpuRecipe{"O2", 2},
    CpuRecipe{"O3_reassoc", 3, true},
};

// The position in kCpuRecipes of the recipe `name` names: 0, the default,
// for an empty name. Error(Validation) naming the recipes for any other name.
size_t cpu_recipe_index(std::string_view name);
// kCpuRecipes[cpu_recipe_index(name)].
const CpuRecipe& find_cpu_recipe(std::string_view name);

// "O3, O2, O3_reassoc", for messages and help.
std::string cpu_recipe_names();

}  // namespace svod
