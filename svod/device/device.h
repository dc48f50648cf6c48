// Device and Program: where kernels run. A Device allocates buffers, compiles
// and loads programs, and copies; a Program is one loaded kernel, callable
// many times and from many threads at once.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>

#include "svod/device/buffer.h"
#include "svod/device/queue.h"
#include "svod/program/launch_layout.h"
#include "svod/program/program_spec.h"

namespace svod {

class Program;

class Device {
 public:
  Device();
  virtual ~Device();
  virtual std::string name() const = 0;  // "CPU", "CUDA:0", "CL:0"
  virtual Buffer allocate(DType dtype, size_t count) = 0;
  // Compiles and loads a kernel; throws Compile/Load/Validation errors.
  virtual std::shared_ptr<const Program> compile(const ProgramSpec& spec) = 0;
  // Copies src into dst (equal byte sizes). Either may live on this device or
  // on the host.
  virtual void copy(const Buffer& dst, const Buffer& src) = 0;
  // Waits for all work submitted to this device.
  virtual void synchronize() {}

  // The queue this device's launches and direct copies go to (queue.h). The
  // default is a HostQueue: work runs on the calling thread.
  virtual Queue& queue() { return *host_queue_; }
  // True when queue().copy(dst, src) moves the bytes in one command of this
  // device (between host memory and this device, or within its memory);
  // other copies go through copy(), which may stage them.
  virtual bool direct_copy(const Buffer& dst, const Buffer& src) const noexcept;
  // Optional whole-graph submission: runs `kernels` (programs of this
  // device, each after its `after` list) as one submission and waits for
  // it. Returns false, running nothing, where the device has no such path.
  virtual bool submit_graph(std::span<const GraphLaunch> kernels);

 private:
  std::unique_ptr<HostQueue> host_queue_;
};

class Program {
 public:
  explicit Program(ProgramSpec spec);
  virtual ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  const ProgramSpec& spec() const noexcept { return spec_; }
  virtual Device& device() const noexcept = 0;

  // Runs the kernel to completion: the one launch of every device (queues
  // submit without waiting). `buffers` in declared order; `scalars` for
  // every declared scalar except core_id, in declared order. `dims`, when
  // given, replaces the launch sizes the spec gives for these scalars (plans
  // pass sizes over their variables); on the CPU global[0] is the number of
  // core_id slices. Counts, sizes, devices and bounds are checked before
  // anything runs.
  virtual void launch(std::span<const Buffer> buffers, std::span<const int64_t> scalars,
                      const LaunchDims* dims = nullptr) const = 0;

  // Runs the kernel once, like launch(), and returns how long it ran: by the
  // device's own events where it has them (OpenCL, CUDA), else by the host's
  // monotonic clock around launch(). For benchmarks and tuning.
  virtual std::chrono::nanoseconds time_launch(std::span<const Buffer> buffers, std::span<const int64_t> scalars,
                                               const LaunchDims* dims = nullptr) const;

  // The pre-bound host path, for programs that run on the calling thread
  // with the CPU ABI (cpu_abi.h): a caller that checked everything once (a
  // plan) keeps the argument words (buffer addresses, then every ABI scalar)
  // and calls run_bound(args, slices) with no further checks.
  virtual bool binds_host_arguments() const noexcept { return false; }
  // Error(Unsupported) unless binds_host_arguments().
  virtual void run_bound(const uint64_t* args, int64_t slices) const;

 private:
  ProgramSpec spec_;
};

// For devices that pass buffers by handle (OpenCL, CUDA): checks buffer
// `index` of a launch of `spec` — that it is not empty and holds what the
// launch needs for these ABI scalars. Error(Validation) naming the program
// and the buffer.
void check_launch_buffer(const ProgramSpec& spec, const LaunchLayout& layout, size_t index, const Buffer& buffer,
                         const int64_t* abi);

}  // namespace svod
