#include "svod/base/plugin.h"

#include <dlfcn.h>
#include <link.h>

#include <fmt/format.h>

#include "svod/base/env.h"
#include "svod/base/file_read.h"

namespace svod::detail {

std::filesystem::path runtime_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&runtime_folder), &info) == 0 || info.dli_fname == nullptr) return {};
  return std::filesystem::path(info.dli_fname).parent_path();
}

std::vector<std::string> plugin_candidates(EnvVar env_var, const char* file_name) {
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

void* open_first_library(const std::vector<std::string>& candidates, std::string& path, std::string& tried) {
  for (const std::string& candidate : candidates) {
    const char* separator = tried.empty() ? "" : ", ";
    if (candidate.starts_with('/') && !std::filesystem::exists(candidate)) {
      tried += fmt::format("{}{} (no such file)", separator, candidate);
      continue;
    }
    if (void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      // The real file behind the handle (the soname the loader resolved).
      link_map* map = nullptr;
      const bool named = dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name;
      path = named ? map->l_name : candidate;
      return handle;
    }
    const char* why = dlerror();
    tried += fmt::format("{}{} ({})", separator, candidate, why ? why : "not found");
  }
  return nullptr;
}

}  // namespace svod::detail
