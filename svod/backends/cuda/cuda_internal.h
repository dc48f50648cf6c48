// Private to svod/backends/cuda/: what the backend's files share and
// cuda_device.h keeps out of the public header. That is the storage, program,
// event and queue classes, the graph cache, the device's driver state
// (CudaDevice::state(): driver table, context, stream, staging buffers) and
// the launch-size helpers. cuda_device.cpp holds the device, its memory,
// loading and copies; cuda_queue.cpp programs, events and the queue;
// cuda_graph.cpp the graph cache.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "svod/backends/cuda/cuda_api.h"
#include "svod/backends/cuda/cuda_device.h"
#include "svod/backends/cuda/kernel_params.h"
#include "svod/program/launch_layout.h"

namespace svod {

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
  using Program::launch;
  void launch(const LaunchArgs& call) const override;
  // Runs the kernel once and returns its device time (CUDA events around it).
  std::chrono::nanoseconds time_launch(const LaunchArgs& call) const override;

  // The spec's launch sizes for these caller scalars: blocks in `global`,
  // threads per block in `local`.
  LaunchDims dims(std::span<const int64_t> scalars) const { return layout().dims(scalars); }
  // Checks the arguments (counts, bounds, buffer sizes and devices) and
  // packs the kernel parameters; Error(Validation) naming what is wrong.
  void prepare(std::span<const Buffer> buffers, std::span<const int64_t> scalars, CudaKernelParams& out) const;

  cu::CUfunction function() const noexcept { return function_; }

 private:
  friend class CudaQueue;
  // Launches on the stream without waiting (arguments already prepared).
  void enqueue(CudaKernelParams& params, const LaunchDims& dims) const;

  CudaDevice* device_;
  cu::CUmodule module_;
  cu::CUfunction function_;
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
  EventPtr launch(const Program& program, const LaunchArgs& call, std::span<const EventPtr> waits = {}) override;
  EventPtr copy(const Buffer& dst, const Buffer& src, std::span<const EventPtr> waits = {}) override;
  EventPtr record(std::span<const EventPtr> waits = {}) override;
  void finish() override;

 private:
  void wait_for(std::span<const EventPtr> waits);

  CudaDevice* device_;
};

namespace detail {

// Launch sizes as the driver takes them (grid x, y, z, then block x, y, z):
// each must be in [1, 2^32), else Error(Validation) naming `program`.
std::array<unsigned, 6> driver_dims(const LaunchDims& dims, const std::string& program);
// "a grid of AxBxC blocks of XxYxZ threads", for messages.
std::string dims_text(const LaunchDims& dims);

class CudaDeviceState;

// The instantiated CUDA graphs of one device, most recently used first, each
// kept with the shape it was built for (programs and edges) and the
// parameters and sizes its nodes hold now; see CudaDevice::run_graph.
class CudaGraphCache {
 public:
  explicit CudaGraphCache(const CudaDeviceState& state);
  ~CudaGraphCache();
  CudaGraphCache(const CudaGraphCache&) = delete;
  CudaGraphCache& operator=(const CudaGraphCache&) = delete;

  // Runs `kernels` (checked, their parameters packed into `params`, the
  // context current) as one graph on the device's stream and waits for it.
  // A kept graph of the same shape has only its changed nodes updated; else
  // a new one is built and instantiated.
  void run(std::span<const KernelLaunch> kernels, std::span<CudaKernelParams> params);
  CudaGraphStats stats() const;
  // Destroys every graph; the device's state calls it before it releases
  // the context.
  void clear();

 private:
  struct Entry;
  // Updates the nodes of `entry` whose parameters or sizes changed; false
  // when the executable graph refused a change.
  bool update(Entry& entry, std::span<const KernelLaunch> kernels, std::span<CudaKernelParams> params);
  std::unique_ptr<Entry> build(std::span<const KernelLaunch> kernels, std::span<CudaKernelParams> params);

  const CudaDeviceState& state_;
  mutable std::mutex mutex_;
  std::list<std::unique_ptr<Entry>> entries_;
  CudaGraphStats stats_;
};

// What cuda_device.h keeps opaque (CudaDevice::state()): the driver, the
// device's primary context and stream, the pinned staging halves, the graph
// cache and the queue over the stream. It retains the context and creates
// the stream when made, and releases everything when destroyed.
class CudaDeviceState {
 public:
  // Opens device `index` for `owner`; Error(DeviceUnavailable) when the
  // driver is unusable (cuda_api.h), there is no such device, or its context
  // or stream cannot be made.
  CudaDeviceState(CudaDevice& owner, size_t index);
  ~CudaDeviceState();
  CudaDeviceState(const CudaDeviceState&) = delete;
  CudaDeviceState& operator=(const CudaDeviceState&) = delete;

  // Makes the device's context current on the calling thread.
  void make_current() const { api.cuCtxSetCurrent(context); }
  // Waits for the stream; Error(Execution) "<what> failed on CUDA:i: <status>".
  void wait_stream(std::string_view what) const;
  // True for a buffer in the device's memory (not its pinned host memory).
  bool owns(const Buffer& buffer) const noexcept;
  // The device address of a buffer of this device at its offset;
  // Error(Validation) when the buffer is elsewhere.
  cu::CUdeviceptr pointer_of(const Buffer& buffer, std::string_view what) const;
  // Copies between device memory and pageable host memory through the
  // staging halves in chunks, overlapping the host-side copy of one chunk
  // with the DMA transfer of the other, and waits for them.
  void upload(cu::CUdeviceptr dst, const void* src, size_t bytes);
  void download(void* dst, cu::CUdeviceptr src, size_t bytes);

  const CudaDevice& owner;
  const CudaDriverApi& api;
  cu::CUdevice device = 0;
  cu::CUcontext context = nullptr;
  cu::CUstream stream = nullptr;
  CudaGraphCache graphs{*this};
  CudaQueue queue;

 private:
  // Allocates the two staging halves and their events on first use
  // (staging_mutex_ held).
  void ensure_staging();

  // Two pinned staging halves, each with an event marking when its last
  // transfer finished; one transfer at a time uses them.
  std::mutex staging_mutex_;
  std::array<void*, 2> staging_{};
  std::array<cu::CUevent, 2> staging_done_{};
};

}  // namespace detail
}  // namespace svod
