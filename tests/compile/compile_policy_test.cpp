#include "svod/compile/compile_policy.h"

#include <gtest/gtest.h>

#include <chrono>

#include "svod/backends/cpu/cpu_device.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

// A kernel no cache holds: its source carries a fresh token.
ProgramSpec fresh_kernel(const std::string& entry) {
  const auto token = std::chrono::steady_clock::now().time_since_epoch().count();
  return test::c_kernel(entry, fmt::format("/* {} */ void {}(int* o) {{ o[0] = 3; }}", token, entry),
                        {{"o", Access::Write}});
}

TEST(CompilePolicy, CountsCompilesNotCacheHits) {
  auto cpu = cpu_device();
  const ProgramSpec spec = fresh_kernel("counted");
  const uint64_t before = compile_count();
  cpu->compile(spec);
  EXPECT_EQ(compile_count(), before + 1);
  cpu->compile(spec);  // the kernel cache has it
  EXPECT_EQ(compile_count(), before + 1);
}

TEST(CompilePolicy, ForbiddenCompilesNameTheProgram) {
  auto cpu = cpu_device();
  ASSERT_TRUE(compile_allowed());
  set_compile_allowed(false);
  const uint64_t before = compile_count();
  const Error e = test::expect_error([&] { cpu->compile(fresh_kernel("forbidden")); });
  set_compile_allowed(true);
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  EXPECT_NE(std::string(e.what()).find("program \"forbidden\""), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("SVOD_COMPILE=0"), std::string::npos) << e.what();
  EXPECT_EQ(compile_count(), before);
  // Allowed again, the same program compiles.
  EXPECT_NO_THROW(cpu->compile(fresh_kernel("forbidden")));
}

}  // namespace
}  // namespace svod
