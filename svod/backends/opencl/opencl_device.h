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
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "svod/compile/compiler.h"
#include "svod/device/device.h"
#include "svod/backends/opencl/cl_handle.h"
#include "svod/backends/opencl/opencl_compiler.h"
#include "svod/device/queue.h"
#include "svod/device/device_kind.h"
#include "svod/program/launch_layout.h"

// The OpenCL handle types, declared as the Khronos headers declare them so
// that this header does not pull in <CL/cl.h>.
struct _cl_event;
struct _cl_mem;
struct _cl_kernel;
struct _cl_program;
struct _cl_context;
struct _cl_command_queue;
struct _cl_device_id;

namespace svod {

class OpenClDevice;

// A shared reference to one enqueued command (clRetainEvent/clReleaseEvent),
// with the context it belongs to (queues of that context wait on it on the
// device).
class OpenClEvent final : public Event {
 public:
  OpenClEvent() = default;
  // Takes the reference.
  explicit OpenClEvent(_cl_event* owned, _cl_context* context = nullptr) noexcept
      : event_(owned), context_(context) {}
  OpenClEvent(const OpenClEvent& other);
  OpenClEvent& operator=(const OpenClEvent& other);
  OpenClEvent(OpenClEvent&& other) noexcept : event_(other.event_), context_(other.context_) {
    other.event_ = nullptr;
  }
  OpenClEvent& operator=(OpenClEvent&& other) noexcept;
  ~OpenClEvent() override;

  bool valid() const noexcept { return event_ != nullptr; }
  _cl_event* handle() const noexcept { return event_; }
  _cl_context* context() const noexcept { return context_; }

  // Blocks until the command finished; Error(Execution) when it failed.
  void wait() const override;
  // Device time from the command's start to its end, read from the queue's
  // profiling counters; waits first.
  std::chrono::nanoseconds duration() const override;
  // Calls fn(ok) once, when the command finished (ok false when it failed),
  // on a thread of the OpenCL runtime: fn must return quickly and call no
  // blocking OpenCL function.
  void on_complete(std::function<void(bool ok)> fn) const;

 private:
  _cl_event* event_ = nullptr;
  _cl_context* context_ = nullptr;
};

// Device memory; host_data() is null. Views at nonzero offsets use
// sub-buffers, created once per offset and kept with the storage.
class OpenClStorage final : public Storage {
 public:
  OpenClStorage(OpenClDevice& device, size_t bytes, detail::ClHandle<_cl_mem*> memory);

  _cl_mem* memory() const noexcept { return memory_.get(); }
  // The cl_mem that starts at byte `offset` (the storage itself for 0).
  _cl_mem* memory_at(size_t offset);

 private:
  detail::ClHandle<_cl_mem*> memory_;
  std::mutex mutex_;
  // Released before memory_ (declared after it).
  std::map<size_t, detail::ClHandle<_cl_mem*>> sub_buffers_;
};

class OpenClProgram final : public Program {
 public:
  OpenClProgram(OpenClDevice& device, ProgramSpec spec, detail::ClHandle<_cl_program*> program,
                detail::ClHandle<_cl_kernel*> kernel);

  Device& device() const noexcept override;
  // Enqueues the kernel and waits for it.
  void launch(std::span<const Buffer> buffers, std::span<const int64_t> scalars,
              const LaunchDims* dims = nullptr) const override;

  // Runs the kernel once and returns its device time (profiling counters).
  std::chrono::nanoseconds time_launch(std::span<const Buffer> buffers, std::span<const int64_t> scalars,
                                       const LaunchDims* dims = nullptr) const override;

  // The launch sizes the spec gives for these caller scalars.
  LaunchDims dims(std::span<const int64_t> scalars) const { return layout_.dims(scalars); }
  const LaunchLayout& layout() const noexcept { return layout_; }

 private:
  friend class OpenClQueue;
  // Enqueues the kernel on the device's queue after `waits` (events of this
  // device's context) and returns its event without waiting: the one launch
  // path, behind OpenClQueue::launch and launch(). Arguments are checked
  // first (Error(Validation)); nothing is enqueued when a check fails.
  OpenClEvent enqueue(std::span<const Buffer> buffers, std::span<const int64_t> scalars,
                      std::span<_cl_event* const> waits, const LaunchDims* dims) const;

  OpenClDevice* device_;
  detail::ClHandle<_cl_program*> program_;
  detail::ClHandle<_cl_kernel*> kernel_;
  LaunchLayout layout_;
  // clSetKernelArg changes the kernel object, so setting arguments and
  // enqueueing is one critical section per program.
  mutable std::mutex mutex_;
};

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

// The device's in-order command queue as a svod Queue. It waits on the
// device for events of its own context and on the host for any other.
class OpenClQueue final : public Queue {
 public:
  explicit OpenClQueue(OpenClDevice& device) : device_(&device) {}
  Device& device() const noexcept override;
  bool can_wait_on(const Queue& other) const noexcept override;
  EventPtr launch(const Program& program, std::span<const Buffer> buffers, std::span<const int64_t> scalars,
                  const LaunchDims* dims = nullptr, std::span<const EventPtr> waits = {}) override;
  EventPtr copy(const Buffer& dst, const Buffer& src, std::span<const EventPtr> waits = {}) override;
  EventPtr record(std::span<const EventPtr> waits = {}) override;
  void flush() override;
  void finish() override;

 private:
  // The handles of `waits` this queue can wait on, after waiting on the host
  // for the others.
  std::vector<_cl_event*> device_waits(std::span<const EventPtr> waits) const;

  OpenClDevice* device_;
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
  const Compiler& compiler() const override { return *compiler_; }
  // Loads a binary made by an OpenClCompiler for this device (ArtifactKind::
  // OpenClBinary); Error(Load) when the device refuses it, a missing entry
  // is Error(UndefinedSymbol).
  std::shared_ptr<const Program> load(const ProgramSpec& spec, const Artifact& artifact) override;
  // Synchronous copy; see enqueue_copy for the direct cases, everything else
  // (another context, another device kind, overlapping bytes of one storage)
  // is staged through host memory.
  void copy(const Buffer& dst, const Buffer& src) override;
  void synchronize() override;

  Queue& queue() override { return queue_object_; }

  // True when one command on this device's queue performs dst <- src: host
  // to this device, this device to host, or between storages of this
  // device's context that do not overlap.
  bool direct_copy(const Buffer& dst, const Buffer& src) const noexcept override;
  // Enqueues a direct copy after `waits` and returns its event; what
  // OpenClQueue::copy does. Host memory involved must stay untouched until
  // the event completes.
  OpenClEvent enqueue_copy(const Buffer& dst, const Buffer& src, std::span<_cl_event* const> waits = {});

  // True when this device's queue can wait on events of `other` (one context).
  bool shares_context(const OpenClDevice& other) const noexcept { return context_ == other.context_; }
  const OpenClDeviceDetails& details() const noexcept { return details_; }
  size_t index() const noexcept { return index_; }

  _cl_context* context() const noexcept { return context_; }
  _cl_command_queue* command_queue() const noexcept { return queue_.get(); }
  _cl_device_id* id() const noexcept { return id_; }
  // The cl_mem of a buffer of this context at the buffer's offset;
  // Error(Validation) when the buffer is elsewhere.
  _cl_mem* memory_of(const Buffer& buffer, std::string_view what) const;

 private:
  bool owns(const Buffer& buffer) const noexcept;

  size_t index_;
  _cl_device_id* id_ = nullptr;
  _cl_context* context_ = nullptr;
  detail::ClHandle<_cl_command_queue*> queue_;
  OpenClDeviceDetails details_;
  std::unique_ptr<OpenClCompiler> compiler_;
  OpenClQueue queue_object_{*this};
};

// The devices present (name "CL:i" and a description); Error(DeviceUnavailable)
// when there is no ICD loader or no platform.
std::vector<DeviceInfo> enumerate_opencl_devices();

// The "CL" kind for the device registry.
DeviceKind opencl_device_kind();

}  // namespace svod
