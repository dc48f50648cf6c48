// ClHandle: sole ownership of one OpenCL object (a program, kernel, memory
// object or command queue), released with its clRelease* call when the
// handle goes away, on every path. Declared over the handle types alone, so
// headers that hold handles need not include <CL/cl.h>.
#pragma once

#include <utility>

struct _cl_mem;
struct _cl_kernel;
struct _cl_program;
struct _cl_command_queue;

namespace svod::detail {

// clReleaseProgram and friends through the loaded ICD table.
void cl_release(_cl_program* handle) noexcept;
void cl_release(_cl_kernel* handle) noexcept;
void cl_release(_cl_mem* handle) noexcept;
void cl_release(_cl_command_queue* handle) noexcept;

template <typename T>
class ClHandle {
 public:
  ClHandle() = default;
  explicit ClHandle(T handle) noexcept : handle_(handle) {}  // takes the reference
  ClHandle(ClHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  ClHandle& operator=(ClHandle&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  ClHandle(const ClHandle&) = delete;
  ClHandle& operator=(const ClHandle&) = delete;
  ~ClHandle() { reset(); }

  T get() const noexcept { return handle_; }
  explicit operator bool() const noexcept { return handle_ != nullptr; }
  void reset() noexcept {
    if (handle_) cl_release(handle_);
    handle_ = nullptr;
  }

 private:
  T handle_ = nullptr;
};

}  // namespace svod::detail
