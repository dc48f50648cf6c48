// Helpers shared by svod's tests.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "svod/base/error.h"
#include "svod/program/program_spec.h"

// Skips the test, saying why, when `load` (opening a library svod loads at
// run time, e.g. detail::nvrtc_api()) throws Error(DeviceUnavailable):
// `library` is not installed. Any other error fails the test.
#define SVOD_SKIP_WITHOUT(load, library)                                          \
  do {                                                                            \
    try {                                                                         \
      load;                                                                       \
    } catch (const ::svod::Error& e) {                                            \
      ASSERT_EQ(e.kind(), ::svod::ErrorKind::DeviceUnavailable) << e.what();      \
      GTEST_SKIP() << library << " is not installed: " << e.what();               \
    }                                                                             \
  } while (0)

namespace svod::test {

// Sets an environment variable for the lifetime of the object, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::optional<std::string>& value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> saved_;
};

// Whether CUDA:0 opens (a GPU and its driver are there).
bool cuda_device_present();

// A plan file's text on `device` (an OpenCL device name, e.g. "CL:local"): an
// OpenCL kernel writes rank + 1 into the 64 floats of buffer "d", an
// all_reduce sums them over the ranks, and CPU buffer "h" gets the result.
std::string opencl_all_reduce_plan(std::string_view device);

// A plan file's text: one C kernel `entry`, whose source is `json_source` (its
// text as written inside a JSON string), writes buffer "y" of 4 floats.
std::string one_kernel_plan(std::string_view entry, std::string_view json_source);

// A C kernel spec with the given parameters.
ProgramSpec c_kernel(std::string entry, std::string source, std::vector<BufferParam> buffers = {},
                     std::vector<ScalarParam> scalars = {});

// Compiles and launches a kernel over 8 core_id slices on the CPU device and
// checks what it wrote: the process, the pool and the device work (after a
// kernel fault or a stop).
void expect_a_good_cpu_launch();

// JSON nested `depth` levels deep: arrays [[[ ... ]]], and objects
// {"a":{"a": ... {}}}.
std::string nested_arrays(size_t depth);
std::string nested_objects(size_t depth);

// Runs fn, which must throw svod::Error, and returns that error (a failed
// expectation and an Internal error when it throws nothing).
template <typename Fn>
Error expect_error(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected an svod::Error";
  return Error(ErrorKind::Internal, "no error was thrown");
}

// The kind of the svod::Error fn throws, with its message in *message when
// asked for (as expect_error when it throws nothing).
template <typename Fn>
ErrorKind kind_of(Fn&& fn, std::string* message = nullptr) {
  const Error error = expect_error(std::forward<Fn>(fn));
  if (message) *message = error.what();
  return error.kind();
}

}  // namespace svod::test
