// Helpers shared by the plan tests: error expectations, a few real C kernels
// compiled once per process, and test-only custom functions that declare
// reads/writes without doing work, for hazard and scheduling tests.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

#include "svod/base/error.h"
#include "svod/backends/cpu/cpu_device.h"
#include "svod/plan/execution_plan.h"

namespace svod::test {

// Runs `fn`, expecting an Error of `kind` whose message holds every fragment.
template <typename Fn>
void expect_error(ErrorKind kind, Fn&& fn, std::initializer_list<std::string_view> fragments = {}) {
  try {
    fn();
    ADD_FAILURE() << "expected Error(" << to_string(kind) << ")";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (auto fragment : fragments)
      EXPECT_NE(std::string_view(e.what()).find(fragment), std::string_view::npos)
          << "\"" << fragment << "\" not in: " << e.what();
  }
}

// Registers (once per process) custom functions "test_read", "test_write" and
// "test_readwrite" that do nothing and declare that access for all buffers.
void register_access_functions();

// Compiled once per process with the real clang:
//   add_const(const float* in, float* out, int n, int k): out[i] = in[i] + k, i < n
//   touch(int* c): c[0] += 1                         (read-write)
//   put(long long* out, int core_id): out[core_id] = core_id + 1, global_size[0] = "N"
//   put_n(long long* out, int n, int core_id): the same with global_size[0] = "n"
//   set(float* out, int n, int v): out[i] = v, i < n  (write; n at most 10)
std::shared_ptr<const Program> add_const_kernel();
std::shared_ptr<const Program> touch_kernel();
std::shared_ptr<const Program> put_kernel();
std::shared_ptr<const Program> put_n_kernel();
std::shared_ptr<const Program> set_kernel();

inline Buffer host_buffer(DType dtype, size_t count) { return cpu_device()->allocate(dtype, count); }

}  // namespace svod::test
