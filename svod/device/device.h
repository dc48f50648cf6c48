// Device and Program: where kernels run. A Device allocates buffers, compiles
// and loads programs, and copies; a Program is one loaded kernel, callable
// many times and from many threads at once.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>

#include "svod/device/buffer.h"
#include "svod/program/launch_layout.h"
#include "svod/program/program_spec.h"

namespace svod {

class Program;

class Device {
 public:
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
};

class Program {
 public:
  explicit Program(ProgramSpec spec);
  virtual ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  const ProgramSpec& spec() const noexcept { return spec_; }
  virtual Device& device() const noexcept = 0;

  // Runs the kernel to completion. `buffers` in declared order; `scalars` for
  // every declared scalar except core_id, in declared order. Counts, sizes,
  // devices and bounds are checked before anything runs.
  virtual void launch(std::span<const Buffer> buffers, std::span<const int64_t> scalars) const = 0;

  // Runs the kernel once, like launch(), and returns how long it ran: by the
  // device's own events where it has them (OpenCL, CUDA), else by the host's
  // monotonic clock around launch(). For benchmarks and tuning.
  virtual std::chrono::nanoseconds time_launch(std::span<const Buffer> buffers,
                                               std::span<const int64_t> scalars) const;

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
