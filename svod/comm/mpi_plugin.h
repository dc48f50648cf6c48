// The mpi transport lives in libsvod_comm_mpi.so, which libsvod_runtime opens
// on first use: linking libmpi into the runtime would make every svod process
// load OpenMPI (and fail to start where it is not installed). This is the
// contract between the two.
#pragma once

#include <memory>
#include <string>

#include "svod/comm/communicator.h"

namespace svod {

// The MPI world communicator of this process, initialising MPI. Error(DeviceUnavailable)
// saying why when the plugin cannot be loaded (built without MPI, libmpi
// missing) or MPI fails to start.
std::unique_ptr<Communicator> open_mpi_communicator(const CommOptions& options);

namespace detail {

inline constexpr const char* kMpiPluginFileName = "libsvod_comm_mpi.so";
inline constexpr const char* kMpiPluginFactoryName = "svod_comm_mpi_create";
// Bumped whenever Communicator or CommOptions change layout (3: the
// virtual local_rank and local_size).
inline constexpr int kMpiPluginAbi = 3;
// Returns the communicator, or null with *error set.
using MpiPluginFactory = Communicator* (*)(int abi, const CommOptions* options, std::string* error);

}  // namespace detail
}  // namespace svod
