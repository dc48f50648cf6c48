// The clang-process compiler: C and LLVM IR to a relocatable ELF object by
// spawning clang with the source on stdin and the object on stdout — no
// temporary files. Clang is found via SVOD_CLANG, then clang-19, then clang.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "svod/compile/compiler.h"
#include "svod/compile/cpu_recipe.h"

namespace svod {

class ClangCompiler final : public Compiler {
 public:
  struct Options {
    std::optional<std::string> clang;  // path or name; default: find_clang()
    std::chrono::milliseconds timeout{120'000};
    std::vector<std::string> extra_flags;
    // The CPU the objects are for, as clang's -march takes it: "native"
    // (this machine's) or a CPU or family name ("x86-64-v3", "znver4"), for
    // objects meant for other machines (packages).
    std::string target_cpu = "native";
  };

  ClangCompiler();
  explicit ClangCompiler(Options options);

  // The flags an object is built with: the recipe's optimisation
  // (cpu_recipe.h; the default's are the ones in the identity) for the CPU
  // `target_cpu` names (Options::target_cpu; "native" is this one),
  // freestanding, position-independent with GOT calls (-fno-plt), no errno
  // from math, no stack protector, no unwind tables.
  static std::vector<std::string> object_flags(const CpuRecipe& recipe = kDefaultCpuRecipe,
                                               std::string_view target_cpu = "native");

  // SVOD_CLANG, else clang-19, else clang on PATH. Throws DeviceUnavailable
  // with how to install one when none is found.
  static std::string find_clang();

  const std::string& clang_path() const noexcept { return clang_; }

  // Runs clang (`argv`) with the spec's source on stdin (C after a `#line`
  // naming ProgramSpec::diagnostic_file_name()) and returns its output;
  // a timeout is Error(Timeout), a crash or failure Error(Compile) with clang's
  // diagnostics. `doing` names the step in messages ("compiling", "building").
  // What clang printed when it succeeded (warnings) goes to `diagnostics`.
  // Shared by every compiler that spawns clang.
  static std::string run_clang(const std::vector<std::string>& argv, const ProgramSpec& spec, std::string_view doing,
                               std::chrono::milliseconds timeout, std::string& diagnostics);
  // SVOD_DEBUG logging of a finished compile (level 1) and its source (level 3).
  static void log_compile(const ProgramSpec& spec, std::string_view compiler,
                          std::chrono::steady_clock::time_point start, size_t bytes);
  // Resolved on first use by asking clang for its target CPU and features:
  // for the host CPU the features its driver passes on (`clang -###`); for a
  // named CPU, whose features the driver leaves to LLVM, the ones clang's
  // code generator records in a function's "target-features". A CPU name
  // clang does not know is Error(Validation) listing the names it knows.
  const CompilerIdentity& identity() const override;
  Artifact compile(const ProgramSpec& spec) const override;
  // The clang binary (the file behind the link), the flags and the host CPU:
  // a warm run need not run `clang -###`.
  std::optional<Hash128> identity_source() const override;
  std::span<const CpuRecipe> recipes() const override { return kCpuRecipes; }

  // The command line that compiles `spec` (clang, its flags, the source on
  // stdin and the object on stdout), and the text it reads on stdin: for
  // compilers that run clang elsewhere (the sandbox's confined compile).
  std::vector<std::string> command(const ProgramSpec& spec) const;
  static std::string input(const ProgramSpec& spec);

 private:
  std::string clang_;
  Options options_;
  mutable std::once_flag identity_once_;
  mutable CompilerIdentity identity_;
};

}  // namespace svod
