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
// LLVMContext and compiler instance, and borrows a target machine from a pool
// (one per concurrent compile, reused across compiles), so any number of
// threads compile at once.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "svod/compile/compiler.h"
#include "svod/program/program_spec.h"

namespace clang {
class CompilerInvocation;
}
namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
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
  // with clang's diagnostics.
  std::unique_ptr<llvm::Module> emit_ir(const ProgramSpec& spec, llvm::LLVMContext& context) const;

 private:
  std::shared_ptr<const clang::CompilerInvocation> invocation_;  // input and output left empty
  LlvmTarget target_;
};

// Target machines for one target, lent to one compile at a time: creating one
// costs more than compiling a small kernel, and one may not serve two threads
// at once.
class TargetMachinePool {
 public:
  explicit TargetMachinePool(LlvmTarget target);
  ~TargetMachinePool();

  class Lease {
   public:
    Lease(TargetMachinePool& pool, std::unique_ptr<llvm::TargetMachine> machine);
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    llvm::TargetMachine& operator*() const noexcept { return *machine_; }

   private:
    TargetMachinePool& pool_;
    std::unique_ptr<llvm::TargetMachine> machine_;
  };

  // A machine nobody is using, created when all are busy. Throws
  // Error(DeviceUnavailable) when LLVM has no such target.
  Lease acquire();
  const LlvmTarget& target() const noexcept { return target_; }

 private:
  LlvmTarget target_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<llvm::TargetMachine>> idle_;
};

// LLVM IR text to a verified module in `context`. Throws Error(Compile) on
// parse errors and verification failures.
std::unique_ptr<llvm::Module> parse_llvm_ir(const ProgramSpec& spec, llvm::LLVMContext& context);

// Optimises `module` (svod's O2 pipeline, see kPipeline in llvm_compiler.cpp)
// and emits it as an ELF object with `machine`, adding the time of each phase
// to `phases`. Throws Error(Compile) on backend errors. `backend_errors` is
// where the context's diagnostic handler collected errors.
std::vector<std::byte> optimise_and_emit(llvm::Module& module, llvm::TargetMachine& machine,
                                         const LlvmTarget& target, const std::string& backend_errors,
                                         const std::string& who, CompilePhases& phases);

// Registers the host's target with LLVM, once per process.
void initialise_native_target();

}  // namespace svod::detail
