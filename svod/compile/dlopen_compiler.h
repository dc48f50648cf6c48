// The dlopen compiler: C or LLVM IR to a shared library, built and
// linked by a clang process (source on stdin, the library written into a
// private mkdtemp folder that is removed before compile() returns). The
// library is opened with dlopen by the CPU device, so the system's dynamic
// loader, not svod's ELF loader, links it: the fallback for code the ELF
// loader does not take, and the same path as kernels built elsewhere.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "svod/compile/clang_compiler.h"

namespace svod {

class DlopenCompiler final : public Compiler {
 public:
  struct Options {
    std::optional<std::string> clang;  // path or name; default: ClangCompiler::find_clang()
    std::chrono::milliseconds timeout{120'000};
  };

  DlopenCompiler();
  explicit DlopenCompiler(Options options);

  // ClangCompiler::object_flags(recipe) for a shared library: -shared,
  // linked with libm, and default visibility so that the entry can be found
  // by dlsym.
  static std::vector<std::string> library_flags(const CpuRecipe& recipe = kDefaultCpuRecipe);

  // Target CPU and features as the clang process resolves them; the name
  // "dlopen" and library_flags(), so its artifacts never mix with objects.
  const CompilerIdentity& identity() const override;
  Artifact compile(const ProgramSpec& spec) const override;
  std::optional<Hash128> identity_source() const override;
  std::span<const CpuRecipe> recipes() const override { return kCpuRecipes; }

 private:
  ClangCompiler clang_;  // finds clang and resolves the target
  Options options_;
  mutable std::once_flag identity_once_;
  mutable CompilerIdentity identity_;
};

}  // namespace svod
