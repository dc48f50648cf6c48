#include "svod/comm/mpi_plugin.h"

#include <dlfcn.h>

#include "svod/base/error.h"
#include "svod/base/plugin.h"

namespace svod {

std::unique_ptr<Communicator> open_mpi_communicator(const CommOptions& options) {
  std::string tried;
  for (const std::string& path : detail::plugin_candidates(EnvVar::CommMpiPlugin, detail::kMpiPluginFileName)) {
    // RTLD_GLOBAL: OpenMPI opens its own components with dlopen, and they
    // resolve libmpi's symbols from the global scope. Never closed: MPI can
    // be initialised only once per process.
    auto factory = reinterpret_cast<detail::MpiPluginFactory>(
        detail::open_plugin_symbol(path, RTLD_NOW | RTLD_GLOBAL, detail::kMpiPluginFactoryName, tried));
    if (factory == nullptr) continue;
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
