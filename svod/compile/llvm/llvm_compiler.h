// The in-process LLVM compiler inside libsvod_llvm.so: C through libclang-cpp
// and LLVM IR through LLVM's own parser, both into one optimisation and code
// generation path that writes a relocatable ELF object to memory (no
// processes, no files), loaded by svod's ELF loader like the clang process's
// objects.
//
// The C front end runs the clang driver once, with ClangCompiler's flags, to
// get the exact cc1 command line that `clang -c` would run (target CPU and
// features of this host, resource directory, system include paths) and parses
// it once into a CompilerInvocation that every compile copies. Clang stops at
// unoptimised IR (-disable-llvm-passes) so that C and LLVM IR share the
// pipeline below, and its phases can be timed apart. Each compile owns its
// LLVMContext and compiler instance, and borrows an EmitPipeline (target
// machine and passes) from a pool (one per concurrent compile, reused across
// compiles), so any number of threads compile at once.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "svod/compile/compiler.h"
#include "svod/compile/cpu_recipe.h"
#include "svod/program/program_spec.h"

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace svod::detail {

// What the driver resolved for this host.
struct LlvmTarget {
  std::string triple;
  std::string cpu;
  std::vector<std::string> features;  // "+avx2", "-avx512f", ...
};

class ClangFrontend {
 public:
  // Runs the driver; throws Error(DeviceUnavailable) when it cannot build a
  // compile job (e.g. no resource directory).
  ClangFrontend();
  ~ClangFrontend();

  const LlvmTarget& target() const noexcept { return target_; }
  // "Debian clang version 19.1.7 (...)"
  static std::string version();

  // C source to an unoptimised module in `context`. Throws Error(Compile)
  // with clang's diagnostics; what clang said about a source it compiled
  // (warnings) goes to `diagnostics`.
  // The spec's recipe (ProgramSpec::recipe) decides the flags clang runs
  // with, as it decides the clang process's.
  std::unique_ptr<llvm::Module> emit_ir(const ProgramSpec& spec, llvm::LLVMContext& context,
                                        std::string& diagnostics) const;

 private:
  class Preambles;
  struct Recipe;
  // The invocation of the recipe `name` names (cpu_recipe.h), made on first
  // use.
  Recipe& recipe(std::string_view name) const;

  LlvmTarget target_;
  // Per recipe of kCpuRecipes, in its order.
  mutable std::vector<Recipe> recipes_;
};

// The optimisation and code generation machinery of one compile at a time,
// for one target and recipe (cpu_recipe.h): the target machine, the pass
// builder and analysis managers of the recipe's pipeline, and the code
// generation passes writing into a buffer. Building them anew for every compile cost a small kernel about a
// sixth of its compile time, so they are built once and reused. Nothing of a
// module outlives its compile (analysis results are cleared after each
// module, and LLVM's assembly printer resets its streamer after each), so an
// object does not depend on what was compiled before it.
class EmitPipeline {
 public:
  // Throws Error(DeviceUnavailable) when LLVM has no such target, and
  // Error(Validation) for a recipe of a level clang does not have.
  EmitPipeline(const LlvmTarget& target, const CpuRecipe& recipe);
  ~EmitPipeline();
  EmitPipeline(const EmitPipeline&) = delete;
  EmitPipeline& operator=(const EmitPipeline&) = delete;

  // Optimises `module` (the recipe's pipeline, as clang runs it) and emits
  // it as an ELF object, adding the time of each phase to `phases`. Throws Error(Compile) on LLVM's code generator's
  // errors: `codegen_errors` is where the context's diagnostic handler
  // collected them.
  std::vector<std::byte> run(llvm::Module& module, const std::string& codegen_errors, const std::string& who,
                             CompilePhases& phases);

 private:
  struct Parts;
  std::unique_ptr<Parts> parts_;
};

// Pipelines for one target and recipe, lent to one compile at a time (a target machine
// and its passes may not serve two threads at once); a new one is built when
// all are busy.
class EmitPipelinePool {
 public:
  EmitPipelinePool(LlvmTarget target, const CpuRecipe& recipe);
  ~EmitPipelinePool();

  class Lease {
   public:
    Lease(EmitPipelinePool& pool, std::unique_ptr<EmitPipeline> pipeline);
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    EmitPipeline* operator->() const noexcept { return pipeline_.get(); }

   private:
    EmitPipelinePool& pool_;
    std::unique_ptr<EmitPipeline> pipeline_;
  };

  // A pipeline nobody is using, built when all are busy. Throws
  // Error(DeviceUnavailable) when LLVM has no such target.
  Lease acquire();

 private:
  LlvmTarget target_;
  CpuRecipe recipe_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<EmitPipeline>> idle_;
};

// LLVM IR text to a verified module in `context`. Throws Error(Compile) on
// parse errors and verification failures.
std::unique_ptr<llvm::Module> parse_llvm_ir(const ProgramSpec& spec, llvm::LLVMContext& context);

// Registers the host's target with LLVM, once per process.
void initialise_native_target();

}  // namespace svod::detail
