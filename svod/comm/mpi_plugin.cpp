#include "svod/comm/mpi_plugin.h"

#include <dlfcn.h>

#include <filesystem>
#include <vector>

#include "svod/base/env.h"
#include "svod/base/error.h"

namespace svod {
namespace {

// The folder holding libsvod_runtime.so (this function is inside it).
// (compile/llvm_plugin.cpp finds its plugin the same way; the two could share
// one helper in base/.)
std::filesystem::path runtime_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&runtime_folder), &info) == 0 || info.dli_fname == nullptr) return {};
  return std::filesystem::path(info.dli_fname).parent_path();
}

std::vector<std::string> candidates() {
  if (auto requested = env_string("SVOD_COMM_MPI_PLUGIN")) return {*requested};
  std::vector<std::string> paths;
  if (auto folder = runtime_folder(); !folder.empty()) paths.push_back((folder / detail::kMpiPluginFileName).string());
  const std::string installed = (std::filesystem::path(SVOD_INSTALL_LIBDIR) / detail::kMpiPluginFileName).string();
  if (paths.empty() || paths.front() != installed) paths.push_back(installed);
  return paths;
}

}  // namespace

std::unique_ptr<Communicator> open_mpi_communicator(const CommOptions& options) {
  std::string tried;
  for (const std::string& path : candidates()) {
    // RTLD_GLOBAL: OpenMPI opens its own components with dlopen, and they
    // resolve libmpi's symbols from the global scope. Never closed: MPI can
    // be initialised only once per process.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      tried += fmt::format("\n  {}", why != nullptr ? why : path + ": cannot be opened");
      continue;
    }
    auto factory = reinterpret_cast<detail::MpiPluginFactory>(dlsym(handle, detail::kMpiPluginFactoryName));
    if (factory == nullptr) {
      tried += fmt::format("\n  {}: exports no {}", path, detail::kMpiPluginFactoryName);
      continue;
    }
    std::string error;
    std::unique_ptr<Communicator> comm(factory(detail::kMpiPluginAbi, &options, &error));
    if (!comm) throw make_error(ErrorKind::DeviceUnavailable, "mpi communicator ({}): {}", path, error);
    return comm;
  }
  throw make_error(ErrorKind::DeviceUnavailable,
                   "the mpi communicator needs {} (svod built with MPI: libopenmpi-dev), which is not usable here:{}",
                   detail::kMpiPluginFileName, tried);
}

}  // namespace svod
