#include <fmt/format.h>
#include <fmt/ranges.h>

#include "svod/base/env.h"
#include "svod/base/error.h"
#include "svod/base/thread_pool.h"
#include "svod/compile/clang_compiler.h"
#include "svod/compile/compile_policy.h"
#include "svod/compile/llvm_plugin.h"
#include "svod/compile/cpu_compiler.h"
#include "svod/registry/registry.h"
#include "svod/base/cpu_features.h"
#include "tools/svod/commands.h"

namespace svod::cli {

int info() {
  fmt::print("svod {}\n", SVOD_VERSION);
  try {
    ClangCompiler clang;
    const CompilerIdentity& id = clang.identity();
    fmt::print("toolchain: {}\n  version: {}\n  target:  {} (cpu {}, {} features)\n", id.path, id.version,
               id.target_triple, id.target_cpu, id.target_features.size());
  } catch (const Error& e) {
    fmt::print("toolchain: none ({})\n", e.what());
  }
  try {
    const CpuCompilerChoice choice = default_cpu_compiler();
    fmt::print("cpu compiler: {} ({})\n", to_string(choice.compiler), choice.reason);
    const LlvmPluginStatus& llvm = llvm_plugin();
    if (llvm.available()) fmt::print("  llvm:    {} ({})\n", llvm.compiler->identity().version, llvm.path);
    else if (choice.reason.find(llvm.error) == std::string::npos) fmt::print("  llvm:    unavailable: {}\n", llvm.error);
  } catch (const Error& e) {
    fmt::print("cpu compiler: none ({})\n", e.what());
  }
  try {
    fmt::print("compiling: {}\n", compile_allowed() ? "allowed" : "off (SVOD_COMPILE=0): only stored objects and packages run");
  } catch (const Error& e) {
    fmt::print("compiling: {}\n", e.what());
  }
  // What a package's recorded CPU features are checked against.
  std::vector<std::string> lacking;
  for (const auto& f : known_cpu_features())
    if (!f.present) lacking.push_back(f.name);
  fmt::print("cpu features: {} checked for packages ({}), lacking: {}\n", known_cpu_features().size(), host_arch(),
             lacking.empty() ? "none" : fmt::format("{}", fmt::join(lacking, ", ")));
  // The device kinds' own compilers (NVRTC compiles without a GPU).
  for (const auto& line : device_registry().toolchains()) fmt::print("{}\n", line);
  // Every device the registry can open, and the kinds that have none here
  // with the reason.
  fmt::print("devices:\n");
  for (const auto& d : device_registry().list_devices())
    fmt::print("  {:<6} {}{}\n", d.name, d.available ? "" : "unavailable: ", d.description);
  // Where the count comes from: SVOD_THREADS when it sets one, else the CPUs
  // this process may run on.
  try {
    const int threads = thread_count();
    fmt::print("threads: {} ({})\n", threads,
               env_int(EnvVar::Threads, 0) > 0 ? "SVOD_THREADS"
                                              : "the CPUs this process may run on; SVOD_THREADS sets another count");
  } catch (const Error& e) {
    fmt::print("threads: {}\n", e.what());
  }
  return 0;
}

}  // namespace svod::cli
