#include "svod/compile/cpu_compiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <exception>
#include <functional>
#include <mutex>

#include "svod/base/env.h"
#include "svod/base/error.h"
#include "svod/compile/clang_compiler.h"
#include "svod/compile/cpu_recipe.h"
#include "svod/compile/dlopen_compiler.h"
#include "svod/compile/llvm_plugin.h"
#include "svod/guard/fault_handlers.h"

namespace svod {
namespace {

// A compiler made on first use, so that the CPU device exists, and runs
// stored objects (the object cache, packages), on machines without the
// toolchain; a missing clang is reported by the first compile instead.
class DeferredCompiler final : public Compiler {
 public:
  explicit DeferredCompiler(std::function<std::shared_ptr<const Compiler>()> make) : make_(std::move(make)) {}
  const CompilerIdentity& identity() const override { return get().identity(); }
  Artifact compile(const ProgramSpec& spec) const override { return get().compile(spec); }
  std::optional<Hash128> identity_source() const override { return get().identity_source(); }
  // Every CPU compiler follows cpu_recipe.h's recipes: known without making
  // the compiler.
  std::span<const CpuRecipe> recipes() const override { return kCpuRecipes; }

 private:
  const Compiler& get() const {
    std::call_once(once_, [this] {
      try {
        compiler_ = make_();
      } catch (...) {
        error_ = std::current_exception();
      }
    });
    if (error_) std::rethrow_exception(error_);
    return *compiler_;
  }

  std::function<std::shared_ptr<const Compiler>()> make_;
  mutable std::once_flag once_;
  mutable std::shared_ptr<const Compiler> compiler_;
  mutable std::exception_ptr error_;
};

// The llvm compiler. The plugin, and libLLVM with it, is opened at
// the first compile or the first time the identity itself is needed; the
// object cache keys stored objects by identity_source() instead, so a warm
// run never opens it.
class LlvmPluginCompiler final : public Compiler {
 public:
  const CompilerIdentity& identity() const override { return plugin().identity(); }
  Artifact compile(const ProgramSpec& spec) const override {
    // The plugin's first compile installs LLVM's fault handlers (its crash
    // recovery) over the kernel fault handler; whether it succeeds or fails,
    // launches put the kernel fault handler back on top after it.
    struct NoteFirst {
      ~NoteFirst() {
        static std::once_flag once;
        std::call_once(once, note_fault_handlers_changed);
      }
    } note;
    return plugin().compile(spec);
  }

  // The plugin file (path, device, inode, size, modification time) and the
  // host CPU: the LLVM compiler targets the host, and takes no other input.
  std::optional<Hash128> identity_source() const override {
    const std::optional<std::string> file = llvm_plugin_file();
    if (!file) return std::nullopt;
    // Once opened, only the file that was opened speaks for the identity.
    if (const LlvmPluginStatus* status = llvm_plugin_if_opened(); status && status->path != *file)
      return std::nullopt;
    return host_tool_identity_source("llvm plugin", *file, {});
  }
  std::span<const CpuRecipe> recipes() const override { return kCpuRecipes; }

 private:
  static const Compiler& plugin() {
    const LlvmPluginStatus& llvm = llvm_plugin();
    if (!llvm.available())
      throw make_error(ErrorKind::DeviceUnavailable, "{} (SVOD_CPU_COMPILER=clang compiles without it)", llvm.error);
    return *llvm.compiler;
  }
};

}  // namespace

std::string_view to_string(CpuCompiler compiler) noexcept {
  switch (compiler) {
    case CpuCompiler::Clang: return "clang";
    case CpuCompiler::Llvm: return "llvm";
    case CpuCompiler::Dlopen: return "dlopen";
  }
  return "unknown";
}

CpuCompiler parse_cpu_compiler(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (CpuCompiler c : {CpuCompiler::Clang, CpuCompiler::Llvm, CpuCompiler::Dlopen})
    if (lower == to_string(c)) return c;
  throw make_error(ErrorKind::Validation, "unknown CPU compiler \"{}\": expected clang, llvm or dlopen", name);
}

std::optional<CpuCompilerChoice> requested_cpu_compiler() {
  const auto requested = env_value(EnvVar::CpuCompiler);
  if (!requested) return std::nullopt;
  try {
    return CpuCompilerChoice{parse_cpu_compiler(requested->text),
                             fmt::format("{}={}", requested->name, requested->text)};
  } catch (const Error&) {
    throw env_error(*requested, "clang, llvm or dlopen");
  }
}

CpuCompilerChoice default_cpu_compiler() {
  if (auto requested = requested_cpu_compiler()) return std::move(*requested);
  // Decided by the file, not by opening it: opening costs milliseconds that
  // a process running stored objects never needs to spend.
  if (const auto file = llvm_plugin_file())
    return {CpuCompiler::Llvm, "in-process LLVM, the fastest to compile, from " + *file};
  return {CpuCompiler::Clang, "the llvm compiler is unavailable: " + llvm_plugin().error};
}

std::shared_ptr<const Compiler> cpu_compiler(CpuCompiler which) {
  switch (which) {
    case CpuCompiler::Clang: {
      static const std::shared_ptr<const Compiler> clang =
          std::make_shared<DeferredCompiler>([] { return std::make_shared<ClangCompiler>(); });
      return clang;
    }
    case CpuCompiler::Llvm: {
      if (!llvm_plugin_file()) throw Error(ErrorKind::DeviceUnavailable, llvm_plugin().error);
      static const std::shared_ptr<const Compiler> llvm = std::make_shared<LlvmPluginCompiler>();
      return llvm;
    }
    case CpuCompiler::Dlopen: {
      static const std::shared_ptr<const Compiler> dlopen =
          std::make_shared<DeferredCompiler>([] { return std::make_shared<DlopenCompiler>(); });
      return dlopen;
    }
  }
  throw make_error(ErrorKind::Internal, "CPU compiler {} is not known", static_cast<int>(which));
}

std::shared_ptr<const Compiler> cpu_compiler_for_target(const std::string& target_cpu) {
  // A name goes to clang as one argument; this only keeps flags and odd
  // bytes out of it ("-O0", a NUL).
  const bool plain = !target_cpu.empty() && target_cpu.size() <= 64 && target_cpu.front() != '-' &&
                     std::all_of(target_cpu.begin(), target_cpu.end(), [](unsigned char c) {
                       return std::islower(c) || std::isdigit(c) || c == '-' || c == '_' || c == '.';
                     });
  if (!plain)
    throw make_error(ErrorKind::Validation,
                     "target CPU \"{}\": expected a CPU name as clang's -march takes it (\"x86-64-v3\", \"znver4\")",
                     target_cpu);
  ClangCompiler::Options options;
  options.target_cpu = target_cpu;
  auto compiler = std::make_shared<ClangCompiler>(options);
  (void)compiler->identity();
  return compiler;
}

}  // namespace svod
