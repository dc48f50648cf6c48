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
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "svod/compile/compiler.h"
#include "svod/backends/cuda/cuda_api.h"
#include "svod/backends/cuda/kernel_params.h"
#include "svod/device/device.h"
#include "svod/device/device_kind.h"
#include "svod/program/launch_layout.h"

namespace svod {

class CudaDevice;
class NvrtcCompiler;

// Device memory; host_data() is null.
class CudaStorage final : public Storage {
 public:
  CudaStorage(CudaDevice& device, size_t bytes, cu::CUdeviceptr pointer);
  ~CudaStorage() override;
  cu::CUdeviceptr pointer() const noexcept { return pointer_; }

 private:
  cu::CUdeviceptr pointer_;
};

// Page-locked host memory (cuMemHostAlloc, portable): host-visible, so CPU
// kernels and host code use it like any host buffer, and copies between it
// and device memory go straight to the DMA engines without staging.
class CudaPinnedStorage final : public Storage {
 public:
  CudaPinnedStorage(CudaDevice& device, size_t bytes, void* host);
  ~CudaPinnedStorage() override;
};

class CudaProgram final : public Program {
 public:
  CudaProgram(CudaDevice& device, ProgramSpec spec, cu::CUmodule module, cu::CUfunction function);
  ~CudaProgram() override;

  Device& device() const noexcept override;
  // Launches on the device's stream and waits for the kernel to finish.
  void launch(std::span<const Buffer> buffers, std::span<const int64_t> scalars,
              const LaunchDims* dims = nullptr) const override;
  // Runs the kernel once and returns its device time (CUDA events around it).
  std::chrono::nanoseconds time_launch(std::span<const Buffer> buffers, std::span<const int64_t> scalars,
                                       const LaunchDims* dims = nullptr) const override;

  // The spec's launch sizes for these caller scalars: blocks in `global`,
  // threads per block in `local`.
  LaunchDims dims(std::span<const int64_t> scalars) const { return layout_.dims(scalars); }
  // Checks the arguments (counts, bounds, buffer sizes and devices) and
  // packs the kernel parameters; Error(Validation) naming what is wrong.
  void prepare(std::span<const Buffer> buffers, std::span<const int64_t> scalars, CudaKernelParams& out) const;

  cu::CUfunction function() const noexcept { return function_; }
  const LaunchLayout& layout() const noexcept { return layout_; }

 private:
  friend class CudaQueue;
  // Launches on the stream without waiting (arguments already prepared).
  void enqueue(CudaKernelParams& params, const LaunchDims& dims) const;

  CudaDevice* device_;
  cu::CUmodule module_;
  cu::CUfunction function_;
  LaunchLayout layout_;
};

// Two CUevents recorded around one command on a stream: waiting, device-side
// waits (cuStreamWaitEvent) and timing all use them.
class CudaEvent final : public Event {
 public:
  // Creates both events (timing enabled) on `device`'s context.
  explicit CudaEvent(const CudaDevice& device);
  ~CudaEvent() override;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  void wait() const override;
  std::chrono::nanoseconds duration() const override;
  cu::CUevent start() const noexcept { return start_; }
  cu::CUevent end() const noexcept { return end_; }

 private:
  const CudaDevice* device_;
  cu::CUevent start_ = nullptr;
  cu::CUevent end_ = nullptr;
};

// The device's stream as a svod Queue: launches and copies are asynchronous
// and each records a CudaEvent; waits on CUDA events of any device become
// cuStreamWaitEvent, other events are waited for by the host. Copies that
// involve pageable host memory or another device go through
// CudaDevice::copy, synchronously.
class CudaQueue final : public Queue {
 public:
  explicit CudaQueue(CudaDevice& device) : device_(&device) {}
  Device& device() const noexcept override;
  bool can_wait_on(const Queue& other) const noexcept override;
  EventPtr launch(const Program& program, std::span<const Buffer> buffers, std::span<const int64_t> scalars,
                  const LaunchDims* dims = nullptr, std::span<const EventPtr> waits = {}) override;
  EventPtr copy(const Buffer& dst, const Buffer& src, std::span<const EventPtr> waits = {}) override;
  EventPtr record(std::span<const EventPtr> waits = {}) override;
  void finish() override;

 private:
  void wait_for(std::span<const EventPtr> waits);

  CudaDevice* device_;
};

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

class CudaDevice final : public Device {
 public:
  // Opens device `index`; use open_device("CUDA:i"), which shares one
  // instance per process, rather than calling this.
  explicit CudaDevice(size_t index);
  ~CudaDevice() override;

  std::string name() const override;
  // Zero-filled device memory.
  Buffer allocate(DType dtype, size_t count) override;
  // Zero-filled pinned host memory (see CudaPinnedStorage).
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
  Queue& queue() override { return queue_; }
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

  const CudaDeviceDetails& details() const noexcept { return details_; }
  size_t index() const noexcept { return index_; }

  // The driver this device was opened with.
  const detail::CudaDriverApi& api() const noexcept { return *api_; }
  // Makes this device's context current on the calling thread.
  void make_current() const;
  cu::CUstream stream() const noexcept { return stream_; }
  // The device address of a buffer of this device at its offset;
  // Error(Validation) when the buffer is elsewhere.
  cu::CUdeviceptr pointer_of(const Buffer& buffer, std::string_view what) const;
  bool owns(const Buffer& buffer) const noexcept;

 private:
  struct GraphEntry;
  void check_spec(const ProgramSpec& spec) const override;
  // Allocates the two pinned staging halves and their events on first use
  // (staging_mutex_ held).
  void ensure_staging();
  void upload(cu::CUdeviceptr dst, const void* src, size_t bytes);
  void download(void* dst, cu::CUdeviceptr src, size_t bytes);
  void wait_stream(std::string_view what) const;

  const detail::CudaDriverApi* api_;
  size_t index_;
  cu::CUdevice device_ = 0;
  cu::CUcontext context_ = nullptr;
  cu::CUstream stream_ = nullptr;
  CudaDeviceDetails details_;

  mutable std::mutex compiler_mutex_;
  mutable std::shared_ptr<const NvrtcCompiler> compiler_;

  // Two pinned staging halves, each with an event marking when its last
  // transfer finished; one transfer at a time uses them.
  std::mutex staging_mutex_;
  std::array<void*, 2> staging_{};
  std::array<cu::CUevent, 2> staging_done_{};

  mutable std::mutex graph_mutex_;
  std::list<std::unique_ptr<GraphEntry>> graphs_;  // most recently used first
  CudaGraphStats graph_stats_;

  CudaQueue queue_{*this};
};

// The devices present ("CUDA:i" and a description); Error(DeviceUnavailable)
// when there is no usable driver (see cuda_api.h) or no device.
std::vector<DeviceInfo> enumerate_cuda_devices();

// The "CUDA" kind for the device registry.
DeviceKind cuda_device_kind();

}  // namespace svod
