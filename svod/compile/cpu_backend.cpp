#include "svod/compile/cpu_backend.h"

#include <algorithm>
#include <cctype>
#include <exception>
#include <functional>
#include <mutex>

#include "svod/base/env.h"
#include "svod/base/error.h"
#include "svod/compile/clang_compiler.h"
#include "svod/compile/dlopen_compiler.h"
#include "svod/compile/llvm_plugin.h"

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

}  // namespace

std::string_view to_string(CpuBackend backend) noexcept {
  switch (backend) {
    case CpuBackend::Clang: return "clang";
    case CpuBackend::Llvm: return "llvm";
    case CpuBackend::Dlopen: return "dlopen";
  }
  return "unknown";
}

CpuBackend parse_cpu_backend(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (CpuBackend b : {CpuBackend::Clang, CpuBackend::Llvm, CpuBackend::Dlopen})
    if (lower == to_string(b)) return b;
  throw make_error(ErrorKind::Validation, "unknown CPU backend \"{}\": expected clang, llvm or dlopen", name);
}

CpuBackendChoice default_cpu_backend() {
  if (auto requested = env_string("SVOD_CPU_BACKEND")) {
    try {
      return {parse_cpu_backend(*requested), "SVOD_CPU_BACKEND=" + *requested};
    } catch (const Error& e) {
      throw make_error(ErrorKind::Validation, "SVOD_CPU_BACKEND: {}", e.what());
    }
  }
  const LlvmPluginStatus& llvm = llvm_plugin();
  if (llvm.available()) return {CpuBackend::Llvm, "in-process LLVM, the fastest to compile, loaded from " + llvm.path};
  return {CpuBackend::Clang, "the llvm backend is unavailable: " + llvm.error};
}

std::shared_ptr<const Compiler> cpu_compiler(CpuBackend backend) {
  switch (backend) {
    case CpuBackend::Clang: {
      static const std::shared_ptr<const Compiler> clang =
          std::make_shared<DeferredCompiler>([] { return std::make_shared<ClangCompiler>(); });
      return clang;
    }
    case CpuBackend::Llvm: {
      const LlvmPluginStatus& llvm = llvm_plugin();
      if (!llvm.available()) throw Error(ErrorKind::DeviceUnavailable, llvm.error);
      return llvm.compiler;
    }
    case CpuBackend::Dlopen: {
      static const std::shared_ptr<const Compiler> dlopen =
          std::make_shared<DeferredCompiler>([] { return std::make_shared<DlopenCompiler>(); });
      return dlopen;
    }
  }
  throw make_error(ErrorKind::Internal, "CPU backend {} has no compiler", static_cast<int>(backend));
}

}  // namespace svod
