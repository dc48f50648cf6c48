// The clang-process compiler: C and LLVM IR to a relocatable ELF object by
// spawning clang with the source on stdin and the object on stdout — no
// temporary files. Clang is found via SVOD_CLANG, then clang-19, then clang.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "svod/compile/compiler.h"

namespace svod {

class ClangCompiler final : public Compiler {
 public:
  struct Options {
    std::optional<std::string> clang;  // path or name; default: find_clang()
    std::chrono::milliseconds timeout{120'000};
    std::vector<std::string> extra_flags;
  };

  ClangCompiler();
  explicit ClangCompiler(Options options);

  // The flags every object is built with: freestanding, -O2 for the host CPU,
  // position-independent with GOT calls (-fno-plt), no errno from math, no
  // stack protector, no unwind tables.
  static const std::vector<std::string>& object_flags();

  // SVOD_CLANG, else clang-19, else clang on PATH. Throws DeviceUnavailable
  // with how to install one when none is found.
  static std::string find_clang();

  const std::string& clang_path() const noexcept { return clang_; }
  // Resolved on first use by asking clang for its target CPU and features.
  const CompilerIdentity& identity() const override;
  Artifact compile(const ProgramSpec& spec) const override;

 private:
  std::vector<std::string> command(const ProgramSpec& spec) const;

  std::string clang_;
  Options options_;
  mutable std::once_flag identity_once_;
  mutable CompilerIdentity identity_;
};

}  // namespace svod
