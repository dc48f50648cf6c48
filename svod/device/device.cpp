#include "svod/device/device.h"

namespace svod {

Device::~Device() = default;
Program::Program(ProgramSpec spec) : spec_(std::move(spec)) {}
Program::~Program() = default;

std::chrono::nanoseconds Program::time_launch(std::span<const Buffer> buffers, std::span<const int64_t> scalars) const {
  const auto start = std::chrono::steady_clock::now();
  launch(buffers, scalars);
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
}

}  // namespace svod
