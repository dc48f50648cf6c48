// The CUDA device ("CUDA:0", "CUDA:1", ...): buffers in device memory
// (cuMemAlloc), programs in CUDA C compiled by NVRTC to a cubin for the
// device's architecture and loaded as modules, launches and copies on one
// stream per device, CUDA events for timing, and CUDA graphs for plans made
// only of kernels.
//
// The driver is opened at run time (cuda_api.h): without it, or with only the
// toolkit's stub library, or with no GPU, opening a device is
// Error(DeviceUnavailable) saying which.
//
// Launch sizes follow svod's rule for GPU-style backends (as OpenCL here):
// ProgramSpec.global_size is the grid (blocks per dimension) and local_size
// the block (threads per block). Kernel arguments follow the CPU ABI: every
// buffer parameter in declared order as a device pointer (a view passes its
// base address plus its byte offset), then every scalar as int32_t (i32) or
// int64_t (i64); see kernel_params.h. The kernel's C++ signature must match
// the spec: the driver cannot check it.
//
// Every call makes the device's primary context current on the calling
// thread first, so any thread may use the device. Launches on one device
// share its stream and so run in submission order.
//
// This header declares the device and what it reports; the driver's handles,
// the staging buffers, the graph cache and the storage, program, event and
// queue classes are the backend's own (cuda_internal.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "svod/compile/compiler.h"
#include "svod/device/device.h"
#include "svod/device/device_kind.h"
#include "svod/device/native_stream.h"

namespace svod {

class NvrtcCompiler;

namespace detail {
class CudaDeviceState;
}  // namespace detail

struct CudaDeviceDetails {
  std::string name;  // "NVIDIA H200"
  int compute_major = 0;
  int compute_minor = 0;
  int multiprocessors = 0;
  int max_threads_per_block = 0;
  uint64_t global_memory = 0;
  int driver_version = 0;  // 1000 * major + 10 * minor
};

struct CudaGraphStats {
  uint64_t instantiations = 0;  // graphs built and instantiated
  uint64_t launches = 0;        // graph launches (replays included)
  uint64_t node_updates = 0;    // kernel nodes whose parameters or sizes changed between launches
};

// Also a NativeStream (svod/device/native_stream.h): its stream, for NCCL.
class CudaDevice final : public Device, public NativeStream {
 public:
  // Opens device `index`; use open_device("CUDA:i"), which shares one
  // instance per process, rather than calling this.
  explicit CudaDevice(size_t index);
  ~CudaDevice() override;

  std::string name() const override;
  // Zero-filled device memory.
  Buffer allocate(DType dtype, size_t count) override;
  // Zero-filled pinned (page-locked) host memory: host-visible, and copies
  // between it and device memory need no staging.
  Buffer allocate_host(DType dtype, size_t count) override;
  // CUDA C, compiled by NVRTC to a cubin for this device's architecture
  // (compile errors are Error(Compile) with NVRTC's log). The compiler is
  // made on first use: Error(DeviceUnavailable) when NVRTC is not installed.
  std::span<const Language> languages() const noexcept override;
  const Compiler& compiler() const override;
  // Loads a cubin or PTX as a module and finds the entry; a missing entry is
  // Error(UndefinedSymbol).
  std::shared_ptr<const Program> load(const ProgramSpec& spec, const Artifact& artifact) override;
  // Cubins load where they were built for this device's architecture.
  std::string artifact_mismatch(const CompilerIdentity& made_by) const override;
  // Synchronous copy between this device's memory and the host, within this
  // device, or (through host memory) with any other device. Pageable host
  // memory is staged through pinned buffers in chunks, overlapping the
  // host-side copy with the DMA transfer.
  void copy(const Buffer& dst, const Buffer& src) override;
  void synchronize() override;
  Queue& queue() override;
  // Copies within this device's memory, or between it and host memory.
  bool direct_copy(const Buffer& dst, const Buffer& src) const noexcept override;
  // The whole-graph hook: run_graph over the kernels.
  bool submit_graph(std::span<const KernelLaunch> kernels) override;

  // Runs `kernels` (all CudaPrograms of this device) as one CUDA graph whose
  // edges are their `after` lists, and waits for it. The instantiated graph
  // is kept, keyed by the programs and edges: a later run of the same shape
  // only updates the nodes whose parameters or launch sizes changed
  // (cuGraphExecKernelNodeSetParams) and replays it. Arguments are checked
  // before anything runs.
  void run_graph(std::span<const KernelLaunch> kernels);
  CudaGraphStats graph_stats() const;

  // NativeStream: the device's one stream; waits poll an event recorded on it.
  void* enter_stream() override;
  void* device_address(const Buffer& buffer) const noexcept override;
  void wait_stream(std::string_view what, const std::function<void()>& poll) override;

  const CudaDeviceDetails& details() const noexcept { return details_; }
  size_t index() const noexcept { return index_; }

  // The driver state (context, stream, staging buffers, graph cache, queue):
  // an opaque handle here, defined in cuda_internal.h for the backend's files.
  detail::CudaDeviceState& state() const noexcept { return *state_; }

 private:
  void check_spec(const ProgramSpec& spec) const override;

  size_t index_;
  std::unique_ptr<detail::CudaDeviceState> state_;
  CudaDeviceDetails details_;

  mutable std::mutex compiler_mutex_;
  mutable std::shared_ptr<const NvrtcCompiler> compiler_;
};

// The devices present ("CUDA:i" and a description); Error(DeviceUnavailable)
// when there is no usable driver (see cuda_api.h) or no device.
std::vector<DeviceInfo> enumerate_cuda_devices();

// The "CUDA" kind for the device registry.
DeviceKind cuda_device_kind();

}  // namespace svod
