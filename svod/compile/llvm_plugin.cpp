#include "svod/compile/llvm_plugin.h"

#include <dlfcn.h>

#include <fmt/format.h>

#include <filesystem>

#include "svod/base/env.h"
#include "svod/base/log.h"
#include "svod/compile/llvm/plugin_api.h"

namespace svod {
namespace {

// The folder holding libsvod_runtime.so (this function is inside it).
std::filesystem::path runtime_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&runtime_folder), &info) == 0 || info.dli_fname == nullptr) return {};
  return std::filesystem::path(info.dli_fname).parent_path();
}

LlvmPluginStatus open_plugin() {
  LlvmPluginStatus status;
  std::string tried;
  for (const std::string& path : llvm_plugin_candidates()) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      // dlerror() names the file itself.
      const char* why = dlerror();
      tried += why != nullptr ? fmt::format("\n  {}", why) : fmt::format("\n  {}: cannot be opened", path);
      continue;
    }
    // Never closed: LLVM keeps process-wide state (registered targets,
    // options) that must outlive every compiler and every static destructor.
    auto factory = reinterpret_cast<detail::LlvmPluginFactory>(dlsym(handle, detail::kLlvmPluginFactoryName));
    if (factory == nullptr) {
      tried += fmt::format("\n  {}: exports no {}", path, detail::kLlvmPluginFactoryName);
      continue;
    }
    std::string error;
    std::shared_ptr<const Compiler> compiler(factory(detail::kLlvmPluginAbi, &error));
    if (!compiler) {
      tried += fmt::format("\n  {}: {}", path, error);
      continue;
    }
    status.compiler = std::move(compiler);
    status.path = path;
    if (debug_level() >= 1) logger().info("llvm backend: {} ({})", path, status.compiler->identity().describe());
    return status;
  }
  status.error = fmt::format("{} is not usable here:{}", detail::kLlvmPluginFileName, tried);
  return status;
}

}  // namespace

std::vector<std::string> llvm_plugin_candidates() {
  if (auto requested = env_string("SVOD_LLVM_PLUGIN")) return {*requested};
  std::vector<std::string> paths;
  if (auto folder = runtime_folder(); !folder.empty()) paths.push_back((folder / detail::kLlvmPluginFileName).string());
  const std::string installed = (std::filesystem::path(SVOD_INSTALL_LIBDIR) / detail::kLlvmPluginFileName).string();
  if (paths.empty() || paths.front() != installed) paths.push_back(installed);
  return paths;
}

const LlvmPluginStatus& llvm_plugin() {
  static const LlvmPluginStatus status = open_plugin();
  return status;
}

}  // namespace svod
