// The OpenCL device ("CL:0", "CL:1", ...): buffers in device memory (cl_mem),
// programs in OpenCL C compiled to device binaries by OpenClCompiler (through
// the kernel cache and the object cache on disk), launches and copies on one
// in-order, profiling-enabled command queue per device, and events that let
// other work wait for them or time them. Devices are numbered across all
// platforms in the order the ICD loader lists them; the devices of one
// platform share one context, so their queues can wait on each other's events.
//
// Launch sizes follow svod's convention for every GPU-style backend (CUDA
// too): ProgramSpec.global_size is the number of work-
// groups in each dimension (CUDA's grid) and local_size the work-items per
// group (CUDA's block), so the OpenCL global work size is global_size *
// local_size. get_group_id(d) runs over [0, global_size[d]).
//
// Kernel arguments follow the CPU ABI: every buffer parameter in declared
// order (as __global pointers), then every scalar as cl_int (i32) or cl_long
// (i64). A buffer view at a nonzero offset is passed as a sub-buffer, so its
// offset must be a multiple of the device's base address alignment.
//
// This header declares the device and what it reports; the OpenCL handles,
// the compiler and the storage, program, event and queue classes are the
// backend's own (opencl_internal.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "svod/compile/compiler.h"
#include "svod/device/device.h"
#include "svod/device/device_kind.h"

namespace svod {

namespace detail {
class OpenClDeviceState;
}  // namespace detail

struct OpenClDeviceDetails {
  std::string platform;  // platform name
  std::string name;      // device name
  std::string version;   // "OpenCL 3.0 PoCL ..."
  std::string type;      // "CPU", "GPU", "accelerator", "other"
  uint32_t compute_units = 0;
  size_t max_work_group_size = 0;
  size_t base_alignment = 0;  // bytes; sub-buffer offsets are multiples of it
  uint64_t global_memory = 0;
};

class OpenClDevice final : public Device {
 public:
  // Opens device `index` of the enumeration; use open_device("CL:i"), which
  // shares one instance per process, rather than calling this.
  explicit OpenClDevice(size_t index);
  ~OpenClDevice() override;

  std::string name() const override;
  // Zero-filled device memory.
  Buffer allocate(DType dtype, size_t count) override;
  // OpenCL C, compiled by this device's OpenClCompiler to device binaries
  // (build failures are Error(Compile) carrying the build log).
  std::span<const Language> languages() const noexcept override;
  const Compiler& compiler() const override;
  // Loads a binary made by an OpenClCompiler for this device
  // (kOpenClBinary); Error(Load) when the device refuses it, a missing
  // entry is Error(UndefinedSymbol).
  std::shared_ptr<const Program> load(const ProgramSpec& spec, const Artifact& artifact) override;
  // Synchronous copy; the direct cases (see direct_copy) are one command on
  // the queue, everything else (another context, another device kind,
  // overlapping bytes of one storage) is staged through host memory.
  void copy(const Buffer& dst, const Buffer& src) override;
  void synchronize() override;

  Queue& queue() override;

  // True when one command on this device's queue performs dst <- src: host
  // to this device, this device to host, or between storages of this
  // device's context that do not overlap.
  bool direct_copy(const Buffer& dst, const Buffer& src) const noexcept override;

  const OpenClDeviceDetails& details() const noexcept { return details_; }
  size_t index() const noexcept { return index_; }

  // The OpenCL state (device id, context, command queue, compiler, queue):
  // an opaque handle here, defined in opencl_internal.h for the backend's
  // files.
  detail::OpenClDeviceState& state() const noexcept { return *state_; }

 private:
  size_t index_;
  OpenClDeviceDetails details_;
  std::unique_ptr<detail::OpenClDeviceState> state_;
};

// The devices present (name "CL:i" and a description); Error(DeviceUnavailable)
// when there is no ICD loader or no platform.
std::vector<DeviceInfo> enumerate_opencl_devices();

// The "CL" kind for the device registry.
DeviceKind opencl_device_kind();

}  // namespace svod
