#include <fmt/format.h>

#include "svod/base/error.h"
#include "svod/base/thread_pool.h"
#include "svod/compile/clang_compiler.h"
#include "tools/svod/commands.h"

namespace svod::cli {

int info() {
  fmt::print("svod {}\n", SVOD_VERSION);
  try {
    ClangCompiler clang;
    const CompilerIdentity& id = clang.identity();
    fmt::print("toolchain: {}\n  version: {}\n  target:  {} (cpu {}, {} features)\n", id.path, id.version,
               id.target_triple, id.target_cpu, id.target_features.size());
    fmt::print("devices:\n  CPU  backend clang (clang process, svod ELF loader)\n");
  } catch (const Error& e) {
    fmt::print("toolchain: none ({})\ndevices: none usable\n", e.what());
  }
  fmt::print("threads: {} (SVOD_THREADS)\n", thread_count());
  return 0;
}

}  // namespace svod::cli
