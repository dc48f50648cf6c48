// The in-process LLVM compiler inside libsvod_llvm.so: C through libclang-cpp
// and LLVM IR through LLVM's own pipeline, both straight to a relocatable ELF
// object in memory (no processes, no files), loaded by svod's ELF loader like
// the clang process's objects.
//
// The C front end runs the clang driver once, with ClangCompiler's flags, to
// get the exact cc1 command line that `clang -c` would run (target CPU and
// features of this host, resource directory, system include paths); every
// compile then parses that into a fresh CompilerInvocation. LLVM IR goes
// through a target machine for the same CPU and features. Each compile owns
// its LLVMContext and compiler instance, so any number of threads compile at
// once.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "svod/program/program_spec.h"

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

  const LlvmTarget& target() const noexcept { return target_; }
  // "Debian clang version 19.1.7 (...)"
  static std::string version();

  // C source to an ELF object. Throws Error(Compile) with clang's diagnostics.
  std::vector<std::byte> compile(const ProgramSpec& spec) const;

 private:
  std::vector<std::string> cc1_args_;  // after "-cc1", input and output excluded
  LlvmTarget target_;
};

// LLVM IR text to an ELF object: parse, verify, O2 with loop and SLP
// vectorisation and unrolling, emit. Throws Error(Compile) on parse errors,
// verification failures and backend errors.
std::vector<std::byte> compile_llvm_ir(const ProgramSpec& spec, const LlvmTarget& target);

// Registers the host's target with LLVM, once per process.
void initialise_native_target();

}  // namespace svod::detail
