// DeviceRegistry: opens devices from strings ("CPU", "CL:0", "CL:1") and
// shares each one across the process; resolve() turns a rank's "CL:local"
// into one of them.
//
// A device kind ("CPU", "CL"; svod/device/device_kind.h) is a factory plus an
// enumerator. Each backend folder under svod/backends/ provides its kind and
// registry.cpp lists the built-in ones, so a new backend is its folder and
// one line there; nothing above this layer names a backend. Opening a device creates it
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

#include "svod/device/device_kind.h"

namespace svod {

// A row of list_devices(): an available device, or a kind that has none
// (`available` false, `description` says why).
struct DeviceListing {
  std::string name;
  std::string description;
  bool available = true;
};

class DeviceRegistry {
 public:
  // A registry holding the built-in kinds (CPU, CUDA, and CL when built with
  // OpenCL).
  DeviceRegistry();
  ~DeviceRegistry();
  DeviceRegistry(const DeviceRegistry&) = delete;
  DeviceRegistry& operator=(const DeviceRegistry&) = delete;

  // Adds a kind; Error(Validation) when the name is empty, has ':' or is
  // taken. The name is upper-cased.
  void register_kind(DeviceKind kind);

  // The device named by `spec`: "KIND" or "KIND:INDEX", the kind case-
  // insensitive, "KIND" meaning index 0. "KIND:local" names a rank's device
  // and is refused here (Validation): resolve() it first. Errors: Validation
  // for a malformed string or unknown kind (listing the kinds),
  // DeviceUnavailable for a kind
  // svod knows but this build lacks ("CL" built without OpenCL headers), a
  // kind with no device at that index (saying how many it has) or whose
  // driver is missing, and whatever the kind's creation throws.
  std::shared_ptr<Device> open(std::string_view spec);
  // The device named by `spec` opened with the compiler named `compiler`
  // (one of its kind's DeviceKind::compilers, any letter case), shared like
  // open(spec); an empty name is open(spec). Error(Validation) when the kind
  // offers no such compiler (naming the ones it has).
  std::shared_ptr<Device> open(std::string_view spec, std::string_view compiler);

  // Canonical name of a device string ("cl" -> "CL:0", "CPU:0" -> "CPU"),
  // without opening it; Error(Validation) as open().
  std::string canonical_name(std::string_view spec) const;

  // The device that `spec` names for a rank whose index among the ranks of
  // its machine is `local_rank` (Communicator::local_rank): "KIND:local"
  // ("local" in any letter case) is "KIND:i", i = local_rank % the number of
  // KIND devices this machine has ("CPU:local" is "CPU"), so that one plan
  // gives each rank of a machine its own device, round robin. Every other
  // spec is returned as it is (open() checks it). Errors for "KIND:local":
  // DeviceUnavailable when the machine has no KIND device (or its driver is
  // missing), Validation for an unknown kind or a negative local_rank, each
  // naming `spec`.
  std::string resolve(std::string_view spec, int local_rank) const;

  std::vector<std::string> kinds() const;  // in registration order
  // The toolchain line of every kind that has one (DeviceKind::toolchain),
  // in kind order.
  std::vector<std::string> toolchains() const;
  // Every device of every kind, in kind order then index order.
  std::vector<DeviceListing> list_devices() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The CPU kind: the host device of cpu_device().
DeviceKind cpu_device_kind();

// The process's registry.
DeviceRegistry& device_registry();

// device_registry().open(spec).
std::shared_ptr<Device> open_device(std::string_view spec);
// The same, a CPU device opened with the compiler `cpu_compiler` ("llvm",
// "clang" or "dlopen"; empty: the default one): how plans and the tuner's
// workers honour a compiler chosen for them (LoadOptions::cpu_compiler).
// Devices of other kinds ignore it.
std::shared_ptr<Device> open_device(std::string_view spec, std::string_view cpu_compiler);

// device_registry().resolve(spec, local_rank): the one place where
// "CUDA:local" and "CL:local" become a concrete device. Plans and packages
// loaded with a communicator use its local_rank() (without one: 0), keeping
// the name as written in the plan (and so in packages and plan digests).
std::string resolve_device_name(std::string_view spec, int local_rank);

}  // namespace svod
