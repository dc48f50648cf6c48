#include "svod/device/device.h"

namespace svod {

Device::~Device() = default;
Program::Program(ProgramSpec spec) : spec_(std::move(spec)) {}
Program::~Program() = default;

}  // namespace svod
