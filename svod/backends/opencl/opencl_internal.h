// Private to svod/backends/opencl/: what the backend's files share and
// opencl_device.h keeps out of the public header. That is the storage,
// program, event and queue classes and the device's OpenCL state
// (OpenClDevice::state(): device id, context, command queue, compiler and
// queue). opencl_device.cpp holds the device, its memory, loading and
// copies; opencl_queue.cpp programs, events and the queue.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "svod/backends/opencl/cl_handle.h"
#include "svod/backends/opencl/opencl_compiler.h"
#include "svod/backends/opencl/opencl_device.h"
#include "svod/device/queue.h"

// The OpenCL handle types, declared as the Khronos headers declare them so
// that this header does not pull in <CL/cl.h>.
struct _cl_event;
struct _cl_mem;
struct _cl_kernel;
struct _cl_program;
struct _cl_context;
struct _cl_command_queue;
struct _cl_device_id;
struct _cl_platform_id;

namespace svod {

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
  OpenClEvent(OpenClEvent&& other) noexcept
      : event_(other.event_), context_(other.context_), in_flight_(other.in_flight_.exchange(-1)) {
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
  // The kernels_in_flight.h slot of the kernel this event completes, which
  // this event forgets when a wait sees it finish or, at its release, once it
  // has finished (copies do not carry it).
  void forget_when_finished(int in_flight_slot) noexcept { in_flight_.store(in_flight_slot); }

 private:
  // Forgets the in-flight slot now when the command finished, else when it does.
  void release_in_flight() noexcept;

  _cl_event* event_ = nullptr;
  _cl_context* context_ = nullptr;
  mutable std::atomic<int> in_flight_{-1};
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
  using Program::launch;
  void launch(const LaunchArgs& call) const override;

  // Runs the kernel once and returns its device time (profiling counters).
  std::chrono::nanoseconds time_launch(const LaunchArgs& call) const override;

 private:
  friend class OpenClQueue;
  // Enqueues the kernel on the device's queue after `waits` (events of this
  // device's context) and returns its event without waiting: the one launch
  // path, behind OpenClQueue::launch and launch(). Arguments are checked
  // first (Error(Validation)); nothing is enqueued when a check fails.
  OpenClEvent enqueue(const LaunchArgs& call, std::span<_cl_event* const> waits) const;

  OpenClDevice* device_;
  detail::ClHandle<_cl_program*> program_;
  detail::ClHandle<_cl_kernel*> kernel_;
  // "program "k" (entry k) on CL:0" for kernels_in_flight.h when the device
  // runs kernels on host threads (PoCL); empty otherwise.
  std::string in_flight_note_;
  // clSetKernelArg changes the kernel object, so setting arguments and
  // enqueueing is one critical section per program.
  mutable std::mutex mutex_;
};

// The device's in-order command queue as a svod Queue. It waits on the
// device for events of its own context and on the host for any other.
class OpenClQueue final : public Queue {
 public:
  explicit OpenClQueue(OpenClDevice& device) : device_(&device) {}
  Device& device() const noexcept override;
  bool can_wait_on(const Queue& other) const noexcept override;
  EventPtr launch(const Program& program, const LaunchArgs& call, std::span<const EventPtr> waits = {}) override;
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

namespace detail {

// What opencl_device.h keeps opaque (OpenClDevice::state()): the device id,
// its platform's context, the device's command queue, the compiler for it
// and the svod queue over the command queue. Made when the device opens; on
// destruction it waits for the command queue and releases it (contexts live
// for the process).
class OpenClDeviceState {
 public:
  // Opens device `id` of `platform` for `owner`; Error(DeviceUnavailable)
  // when the platform's context or the command queue cannot be made.
  OpenClDeviceState(OpenClDevice& owner, _cl_platform_id* platform, _cl_device_id* id);
  ~OpenClDeviceState();
  OpenClDeviceState(const OpenClDeviceState&) = delete;
  OpenClDeviceState& operator=(const OpenClDeviceState&) = delete;

  // The storage behind `buffer` when it is memory of this device's context
  // (this device or another of its platform), else null.
  OpenClStorage* storage_of(const Buffer& buffer) const noexcept;
  // The cl_mem of a buffer of this context at the buffer's offset;
  // Error(Validation) when the buffer is elsewhere.
  _cl_mem* memory_of(const Buffer& buffer, std::string_view what) const;
  // Enqueues a direct copy (OpenClDevice::direct_copy) after `waits` and
  // returns its event; what OpenClQueue::copy does. Host memory involved
  // must stay untouched until the event completes.
  OpenClEvent enqueue_copy(const Buffer& dst, const Buffer& src, std::span<_cl_event* const> waits = {});

  const OpenClDevice& owner;
  _cl_device_id* const id;
  // One per platform, shared by its devices (their queues wait on each
  // other's events).
  _cl_context* const context;
  ClHandle<_cl_command_queue*> command_queue;
  OpenClCompiler compiler;
  OpenClQueue queue;
};

}  // namespace detail
}  // namespace svod
