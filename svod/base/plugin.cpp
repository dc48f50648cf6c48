#include "svod/base/plugin.h"

#include <dlfcn.h>

#include <fmt/format.h>

#include "svod/base/env.h"
#include "svod/base/file_read.h"

namespace svod::detail {

std::filesystem::path runtime_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&runtime_folder), &info) == 0 || info.dli_fname == nullptr) return {};
  return std::filesystem::path(info.dli_fname).parent_path();
}

std::vector<std::string> plugin_candidates(const char* env_var, const char* file_name) {
  if (auto requested = env_string(env_var)) return {*requested};
  std::vector<std::string> paths;
  if (auto folder = runtime_folder(); !folder.empty()) paths.push_back((folder / file_name).string());
  const std::string installed = (std::filesystem::path(SVOD_INSTALL_LIBDIR) / file_name).string();
  if (paths.empty() || paths.front() != installed) paths.push_back(installed);
  return paths;
}

void* open_plugin_symbol(const std::string& path, int flags, const char* symbol, std::string& tried) {
  // dlopen() would wait for a writer on a FIFO: only a regular file is tried.
  if (const RegularFile file = try_open_regular_file(path); file.not_regular()) {
    tried += fmt::format("\n  {}: is {}, not a regular file", path, file_type_name(file.status.st_mode));
    return nullptr;
  }
  void* handle = dlopen(path.c_str(), flags);
  if (handle == nullptr) {
    // dlerror() names the file itself.
    const char* why = dlerror();
    tried += why != nullptr ? fmt::format("\n  {}", why) : fmt::format("\n  {}: cannot be opened", path);
    return nullptr;
  }
  void* found = dlsym(handle, symbol);
  if (found == nullptr) tried += fmt::format("\n  {}: exports no {}", path, symbol);
  return found;
}

}  // namespace svod::detail
