// Test helper: compiles C source to a relocatable object in memory with
// clang-19 (source on stdin, object on stdout), as the clang CPU compiler does.
// Results are memoised per (source, flags) because several tests share kernels.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace svod::test {

struct CompileOptions {
  bool pic = true;
  std::string target;               // empty: the host; e.g. "aarch64-none-elf"
  std::vector<std::string> flags;   // extra flags, e.g. -fno-builtin
};

// Throws std::runtime_error with clang's diagnostics when compilation fails.
const std::vector<std::byte>& compile_c(std::string_view source, const CompileOptions& options = {});

// Convenience for AArch64 cross-compiles (-ffreestanding, no -march=native).
const std::vector<std::byte>& compile_c_aarch64(std::string_view source, bool pic,
                                                std::vector<std::string> flags = {});

}  // namespace svod::test
