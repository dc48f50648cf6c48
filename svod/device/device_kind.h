// DeviceKind: what a backend hands the registry (svod/registry/registry.h)
// so that its devices can be listed and opened by name ("CL:0").
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "svod/device/device.h"

namespace svod {

// One device a kind can open, for listings: its name ("CL:0") and a line
// saying what it is.
struct DeviceInfo {
  std::string name;
  std::string description;
};

struct DeviceKind {
  std::string name;  // upper case, no ':' ("CPU", "CL")
  // False for a kind with a single device named by the kind alone ("CPU";
  // "CPU:0" is accepted as the same device).
  bool indexed = true;
  // The devices present, index i opened as "NAME:i". Throws
  // Error(DeviceUnavailable) when the driver or platform itself is missing.
  std::function<std::vector<DeviceInfo>()> enumerate;
  // Creates device `index` (< enumerate().size()); may throw any Error.
  std::function<std::shared_ptr<Device>(size_t index)> create;
  // Optional: the names of the compilers a device of this kind can be opened
  // with instead of its default (the CPU's "clang", "llvm", "dlopen"), and
  // how to create device `index` with one of them.
  std::vector<std::string> compilers;
  std::function<std::shared_ptr<Device>(size_t index, std::string_view compiler)> create_with_compiler;
  // Optional: one line about the toolchain this kind compiles with, for
  // `svod info`, found without opening a device ("nvrtc: 12.8 (path)").
  std::function<std::string()> toolchain;
};

}  // namespace svod
