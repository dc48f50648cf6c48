#include "svod/device/device.h"

#include "svod/base/error.h"

namespace svod {

Device::Device() : host_queue_(std::make_unique<HostQueue>(*this)) {}
Device::~Device() = default;

bool Device::direct_copy(const Buffer&, const Buffer&) const noexcept { return false; }

bool Device::submit_graph(std::span<const GraphLaunch>) { return false; }
Program::Program(ProgramSpec spec) : spec_(std::move(spec)) {}
Program::~Program() = default;

std::chrono::nanoseconds Program::time_launch(std::span<const Buffer> buffers, std::span<const int64_t> scalars,
                                             const LaunchDims* dims) const {
  const auto start = std::chrono::steady_clock::now();
  launch(buffers, scalars, dims);
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
}

void Program::run_bound(const uint64_t*, int64_t) const {
  throw make_error(ErrorKind::Unsupported, "program \"{}\" on {} takes no pre-bound host arguments",
                   spec().display_name(), device().name());
}

void check_launch_buffer(const ProgramSpec& spec, const LaunchLayout& layout, size_t index, const Buffer& buffer,
                         const int64_t* abi) {
  if (!buffer.valid())
    throw make_error(ErrorKind::Validation, "program \"{}\": buffer {} (\"{}\") is empty", spec.display_name(), index,
                     spec.buffers[index].name);
  if (auto need = layout.min_bytes(index, abi); need && buffer.bytes() < *need)
    throw make_error(ErrorKind::Validation, "program \"{}\": buffer {} (\"{}\") holds {} bytes but the launch needs {}",
                     spec.display_name(), index, spec.buffers[index].name, buffer.bytes(), *need);
}

}  // namespace svod
