#include "svod/device/device.h"

#include "svod/base/error.h"

namespace svod {

Device::~Device() = default;
Program::Program(ProgramSpec spec) : spec_(std::move(spec)) {}
Program::~Program() = default;

std::chrono::nanoseconds Program::time_launch(std::span<const Buffer> buffers, std::span<const int64_t> scalars) const {
  const auto start = std::chrono::steady_clock::now();
  launch(buffers, scalars);
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
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
