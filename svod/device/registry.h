// DeviceRegistry: opens devices from strings ("CPU", "CL:0", "CL:1") and
// shares each one across the process.
//
// A device kind ("CPU", "CL") is a factory plus an enumerator. Each backend
// folder provides its kind and registry.cpp lists the built-in ones, so a new
// backend touches its folder and one line there. Opening a device creates it
// at most once per process: every device string has its own once-cell, built
// outside the registry's lock, so two threads opening the same device get the
// same object while different devices are created in parallel. A creation that
// throws leaves the cell empty (the next open tries again) and reports why.
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
};

// A row of list_devices(): an available device, or a kind that has none
// (`available` false, `description` says why).
struct DeviceListing {
  std::string name;
  std::string description;
  bool available = true;
};

class DeviceRegistry {
 public:
  // A registry holding the built-in kinds (CPU, and CL when built with OpenCL).
  DeviceRegistry();
  ~DeviceRegistry();
  DeviceRegistry(const DeviceRegistry&) = delete;
  DeviceRegistry& operator=(const DeviceRegistry&) = delete;

  // Adds a kind; Error(Validation) when the name is empty, has ':' or is
  // taken. The name is upper-cased.
  void register_kind(DeviceKind kind);

  // The device named by `spec`: "KIND" or "KIND:INDEX", the kind case-
  // insensitive, "KIND" meaning index 0. Errors: Validation for a malformed
  // string or unknown kind (listing the kinds), DeviceUnavailable for a kind
  // svod knows but this build lacks ("CL" built without OpenCL headers), a
  // kind with no device at that index (saying how many it has) or whose
  // driver is missing, and whatever the kind's creation throws.
  std::shared_ptr<Device> open(std::string_view spec);

  // Canonical name of a device string ("cl" -> "CL:0", "CPU:0" -> "CPU"),
  // without opening it; Error(Validation) as open().
  std::string canonical_name(std::string_view spec) const;

  std::vector<std::string> kinds() const;  // in registration order
  // Every device of every kind, in kind order then index order.
  std::vector<DeviceListing> list_devices() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The CPU kind: the host device of create_cpu_device().
DeviceKind cpu_device_kind();

// The process's registry.
DeviceRegistry& device_registry();

// device_registry().open(spec).
std::shared_ptr<Device> open_device(std::string_view spec);

}  // namespace svod
