#include "svod/compile/llvm_plugin.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <fmt/format.h>

#include <atomic>

#include "svod/base/log.h"
#include "svod/base/plugin.h"
#include "svod/compile/llvm/plugin_api.h"

namespace svod {
namespace {

LlvmPluginStatus open_plugin() {
  LlvmPluginStatus status;
  std::string tried;
  for (const std::string& path : llvm_plugin_candidates()) {
    // Never closed: LLVM keeps process-wide state (registered targets,
    // options) that must outlive every compiler and every static destructor.
    auto factory = reinterpret_cast<detail::LlvmPluginFactory>(
        detail::open_plugin_symbol(path, RTLD_NOW | RTLD_LOCAL, detail::kLlvmPluginFactoryName, tried));
    if (factory == nullptr) continue;
    std::string error;
    std::shared_ptr<const Compiler> compiler(factory(detail::kLlvmPluginAbi, &error));
    if (!compiler) {
      tried += fmt::format("\n  {}: {}", path, error);
      continue;
    }
    status.compiler = std::move(compiler);
    status.path = path;
    if (debug_level() >= 1) log_debug("llvm compiler: {} ({})", path, status.compiler->identity().describe());
    return status;
  }
  status.error = fmt::format("{} is not usable here:{}", detail::kLlvmPluginFileName, tried);
  return status;
}

}  // namespace

std::vector<std::string> llvm_plugin_candidates() {
  return detail::plugin_candidates(EnvVar::LlvmPlugin, detail::kLlvmPluginFileName);
}

namespace {
std::atomic<const LlvmPluginStatus*> opened{nullptr};
}  // namespace

const LlvmPluginStatus& llvm_plugin() {
  static const LlvmPluginStatus status = open_plugin();
  opened.store(&status, std::memory_order_release);
  return status;
}

const LlvmPluginStatus* llvm_plugin_if_opened() noexcept { return opened.load(std::memory_order_acquire); }

std::optional<std::string> llvm_plugin_file() {
  for (std::string& path : llvm_plugin_candidates()) {
    struct stat status {};
    if (::stat(path.c_str(), &status) == 0 && S_ISREG(status.st_mode)) return std::move(path);
  }
  return std::nullopt;
}

}  // namespace svod
