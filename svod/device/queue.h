// Queue and Event: how work is submitted to a device, the same way for every
// device.
//
// A Queue belongs to one device and runs what is submitted to it in
// submission order: kernel launches with explicit launch sizes, and copies.
// Each submission may name events it must wait for and returns an Event that
// completes with it. A queue waits on the device for the events of queues it
// shares events with (can_wait_on: OpenCL queues of one context, any CUDA
// streams of the process) and on the host for any other event, so callers
// never need to know which. Events of queues that run their work on the
// calling thread (HostQueue: the CPU, host functions) are null: the work has
// finished when the call returns.
//
// Devices hand out their queue with Device::queue(); runners (plans, the
// executor) work only through this interface, so a new device brings its own
// Queue and Event and needs no change to them.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "svod/device/buffer.h"
#include "svod/device/launch_args.h"

namespace svod {

class Device;
class Program;

// One submitted command, or a point in a queue's timeline. Shared: the
// runner, waiting queues and callers may each hold it.
class Event {
 public:
  virtual ~Event();
  // Blocks until the command finished; Error(Execution) when it failed.
  virtual void wait() const = 0;
  // Device time from the command's start to its end; waits first.
  // Error(Unsupported) for events that carry no timing.
  virtual std::chrono::nanoseconds duration() const;
};

using EventPtr = std::shared_ptr<const Event>;

// How a runner lets work on one queue wait for work on another.
enum class SyncStrategy {
  BlockingHostWait,  // the host waits for a predecessor on another queue before submitting
  DeviceEvents,      // queues wait on each other's events where they can (can_wait_on)
};
std::string_view to_string(SyncStrategy strategy) noexcept;

class Queue {
 public:
  virtual ~Queue();
  virtual Device& device() const noexcept = 0;

  // True when submissions run on the calling thread and have finished when
  // the call returns (their events are null). Runners call such work
  // directly instead of going through launch().
  virtual bool runs_inline() const noexcept { return false; }
  // True when this queue can wait on events of `other` without the host.
  virtual bool can_wait_on(const Queue& other) const noexcept { return &other == this; }

  // Launches `program` (a program of this queue's device) on `args` after
  // `waits`. Arguments are checked first (Error(Validation)); nothing is
  // submitted when a check fails.
  virtual EventPtr launch(const Program& program, const LaunchArgs& args, std::span<const EventPtr> waits = {}) = 0;
  // dst <- src (equal byte sizes) after `waits`. Host memory involved must
  // stay untouched until the returned event completes.
  virtual EventPtr copy(const Buffer& dst, const Buffer& src, std::span<const EventPtr> waits = {}) = 0;
  // An event that completes once everything submitted before it and
  // `waits` completed; work submitted after it also waits for `waits`.
  virtual EventPtr record(std::span<const EventPtr> waits = {}) = 0;
  // Makes submitted work start without waiting for more submissions.
  virtual void flush() {}
  // Waits for everything submitted so far.
  virtual void finish() = 0;
};

// The queue of devices whose work runs on the host: everything runs on the
// calling thread, through Program::launch and Device::copy.
class HostQueue final : public Queue {
 public:
  explicit HostQueue(Device& device) : device_(&device) {}
  Device& device() const noexcept override { return *device_; }
  bool runs_inline() const noexcept override { return true; }
  EventPtr launch(const Program& program, const LaunchArgs& args, std::span<const EventPtr> waits = {}) override;
  EventPtr copy(const Buffer& dst, const Buffer& src, std::span<const EventPtr> waits = {}) override;
  EventPtr record(std::span<const EventPtr> waits = {}) override;
  void finish() override {}

 private:
  Device* device_;
};

// Waits on the host for each event that is not null.
void wait_all(std::span<const EventPtr> events);

// One kernel of a whole-graph submission (Device::submit_graph): its
// arguments, with `args.dims` always set (a graph's sizes are resolved), and
// the earlier kernels of the graph it waits for.
struct KernelLaunch {
  std::shared_ptr<const Program> program;
  LaunchArgs args;
  std::span<const size_t> after;
};

}  // namespace svod
