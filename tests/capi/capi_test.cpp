// The C API (svod.h) driven from C++: kernels, buffers and plans through the
// C functions, and every error kind a C caller can reach, with the message
// saying what failed.
#include <svod/svod.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "svod/base/cpu_features.h"
#include "svod/base/error.h"
#include "svod/base/npy.h"
#include "svod/compile/compile_policy.h"
#include "svod/custom/custom_function.h"
#include "svod/package/package.h"
#include "tests/capi/capi_test_support.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace {

using svod::test::one_kernel_plan;
using svod::test::TempDir;
using namespace svod::test::capi;

// y = k * x over n elements; n bounded by the spec so out-of-range values are refused.
constexpr const char* kScaleSpec = R"({
  "language": "c",
  "source": "void scale(float* restrict y, const float* restrict x, long n, int k) { for (long i = 0; i < n; i++) y[i] = k * x[i]; }",
  "entry": "scale",
  "buffers": [ { "name": "y", "access": "write", "dtype": "f32" }, { "name": "x", "dtype": "f32" } ],
  "scalars": [ { "name": "n", "type": "i64", "min": 0, "max": 1024 }, { "name": "k", "type": "i32" } ]
})";

TEST(CApi, VersionMatchesTheHeader) {
  EXPECT_EQ(svod_api_version(), SVOD_API_VERSION);
  EXPECT_EQ(svod_api_version() / 1000, SVOD_API_VERSION_MAJOR);
}

TEST(CApi, ErrorKindsMirrorErrorKind) {
  EXPECT_EQ(svod_status_kind(nullptr), SVOD_OK);
  EXPECT_STREQ(svod_status_message(nullptr), "");
  svod_status_free(nullptr);
  EXPECT_STREQ(svod_error_kind_name(SVOD_OK), "ok");
  // SVOD_ERROR_* values follow svod::ErrorKind's order, one past it.
  for (int k = 0; k <= static_cast<int>(svod::kLastErrorKind); ++k) {
    EXPECT_EQ(svod_error_kind_name(static_cast<svod_error_kind>(k + 1)),
              svod::to_string(static_cast<svod::ErrorKind>(k)));
  }
  EXPECT_EQ(SVOD_ERROR_INTERNAL, static_cast<int>(svod::ErrorKind::Internal) + 1);
  EXPECT_EQ(SVOD_ERROR_KERNEL_FAULT, static_cast<int>(svod::ErrorKind::KernelFault) + 1);
  EXPECT_EQ(SVOD_ERROR_SANDBOX_VIOLATION, static_cast<int>(svod::kLastErrorKind) + 1);
}

TEST(CApi, Devices) {
  svod_device* cpu = nullptr;
  ASSERT_OK(svod_device_get("cpu", &cpu));
  EXPECT_STREQ(svod_device_name(cpu), "CPU");
  EXPECT_OK(svod_device_release(cpu));
  EXPECT_EQ(svod_device_name(nullptr), nullptr);

  svod_device* none = nullptr;
  expect_error(svod_device_get("TPU", &none), SVOD_ERROR_VALIDATION, "TPU");
  expect_error(svod_device_get("CL:99", &none), SVOD_ERROR_DEVICE_UNAVAILABLE, "CL");
  EXPECT_EQ(none, nullptr);  // out-parameters are written only on success
}

TEST(CApi, CompileWrapHostAndLaunch) {
  Device cpu;
  Program program;
  ASSERT_OK(svod_program_compile(cpu.handle, kScaleSpec, &program.handle));

  std::vector<float> x(1000), y(1000, -1.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  Buffer bx, by;
  ASSERT_OK(svod_buffer_wrap_host(x.data(), "f32", x.size(), &bx.handle));
  ASSERT_OK(svod_buffer_wrap_host(y.data(), "float32", y.size(), &by.handle));
  EXPECT_EQ(svod_buffer_count(bx.handle), 1000u);
  EXPECT_EQ(svod_buffer_bytes(bx.handle), 4000u);
  EXPECT_STREQ(svod_buffer_dtype(by.handle), "f32");
  void* data = nullptr;
  ASSERT_OK(svod_buffer_data(by.handle, &data));
  EXPECT_EQ(data, y.data());  // zero-copy

  svod_buffer* buffers[] = {by.handle, bx.handle};
  const int64_t scalars[] = {1000, 3};
  ASSERT_OK(svod_program_launch(program.handle, buffers, 2, scalars, 2));
  for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], 3.0f * i) << i;
}

TEST(CApi, AllocatedBuffersCopyToAndFromHost) {
  Device cpu;
  Program program;
  ASSERT_OK(svod_program_compile(cpu.handle, kScaleSpec, &program.handle));
  Buffer x, y;
  ASSERT_OK(svod_buffer_allocate(cpu.handle, "f32", 4, &x.handle));
  ASSERT_OK(svod_buffer_allocate(cpu.handle, "f32", 4, &y.handle));
  const float in[4] = {1, 2, 3, 4};
  ASSERT_OK(svod_buffer_copy_from_host(x.handle, in, sizeof in));
  svod_buffer* buffers[] = {y.handle, x.handle};
  const int64_t scalars[] = {4, -2};
  ASSERT_OK(svod_program_launch(program.handle, buffers, 2, scalars, 2));
  float out[4] = {};
  ASSERT_OK(svod_buffer_copy_to_host(y.handle, out, sizeof out));
  EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{-2, -4, -6, -8}));

  expect_error(svod_buffer_copy_to_host(y.handle, out, 8), SVOD_ERROR_VALIDATION, "8 bytes given, the buffer holds 16");
  expect_error(svod_buffer_allocate(cpu.handle, "f31", 4, &x.handle), SVOD_ERROR_VALIDATION, "f31");
  expect_error(svod_buffer_allocate(cpu.handle, "f32", 0, &x.handle), SVOD_ERROR_VALIDATION, "at least one element");
  expect_error(svod_buffer_allocate(cpu.handle, "f64", SIZE_MAX / 4, &x.handle), SVOD_ERROR_VALIDATION,
               "more bytes than fit in 64 bits");
  float room[2] = {};
  expect_error(svod_buffer_wrap_host(room, "f32", size_t{1} << 62, &y.handle), SVOD_ERROR_VALIDATION,
               "more bytes than fit in 64 bits");
  alignas(8) char bytes[16];
  expect_error(svod_buffer_wrap_host(bytes + 1, "f32", 2, &x.handle), SVOD_ERROR_VALIDATION, "not aligned");
}

// Each of `slices` core_id slices writes y[i] = i for i = core_id (mod slices).
constexpr const char* kStridedSpec = R"({
  "language": "c",
  "source": "void strided(float* y, int n, int slices, int core_id) { for (int i = core_id; i < n; i += slices) y[i] = i; }",
  "entry": "strided",
  "buffers": [ { "name": "y", "access": "write", "dtype": "f32", "min_count": "n" } ],
  "scalars": [ { "name": "n", "type": "i32" }, { "name": "slices", "type": "i32" },
               { "name": "core_id", "type": "i32", "min": 0, "max": 7 } ]
})";

TEST(CApi, ViewsAndLaunchSizesPerLaunch) {
  Device cpu;
  Program program;
  ASSERT_OK(svod_program_compile(cpu.handle, kStridedSpec, &program.handle));
  Buffer bytes, view;
  ASSERT_OK(svod_buffer_allocate(cpu.handle, "u8", 64, &bytes.handle));
  ASSERT_OK(svod_buffer_view(bytes.handle, 16, "f32", 8, &view.handle));
  EXPECT_EQ(svod_buffer_count(view.handle), 8u);
  EXPECT_STREQ(svod_buffer_dtype(view.handle), "f32");
  svod_buffer* buffers[] = {view.handle};
  const int64_t scalars[] = {8, 4};
  const int64_t global[] = {4, 1, 1};
  ASSERT_OK(svod_program_launch_sized(program.handle, buffers, 1, scalars, 2, global, nullptr));
  float out[16] = {};
  ASSERT_OK(svod_buffer_copy_to_host(bytes.handle, out, sizeof out));
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], i >= 4 && i < 12 ? i - 4 : 0) << i;
  // u8 storage serves the f32 parameter directly.
  svod_buffer* raw[] = {bytes.handle};
  const int64_t all[] = {16, 1};
  ASSERT_OK(svod_program_launch_sized(program.handle, raw, 1, all, 2, nullptr, nullptr));

  const int64_t too_many[] = {9, 1, 1};
  expect_error(svod_program_launch_sized(program.handle, buffers, 1, scalars, 2, too_many, nullptr),
               SVOD_ERROR_VALIDATION, "9 core_id slices would pass core_id = 8");
  const int64_t two_d[] = {2, 2, 1};
  expect_error(svod_program_launch_sized(program.handle, buffers, 1, scalars, 2, two_d, nullptr),
               SVOD_ERROR_VALIDATION, "dimensions 1 and 2 must be 1");
  const int64_t zero[] = {1, 0, 1};
  expect_error(svod_program_launch_sized(program.handle, buffers, 1, scalars, 2, nullptr, zero),
               SVOD_ERROR_VALIDATION, "local_size[1] is 0");
  Buffer odd;
  ASSERT_OK(svod_buffer_view(bytes.handle, 2, "u8", 32, &odd.handle));
  svod_buffer* misaligned[] = {odd.handle};
  expect_error(svod_program_launch_sized(program.handle, misaligned, 1, scalars, 2, nullptr, nullptr),
               SVOD_ERROR_VALIDATION, "not aligned to the declared f32's 4 bytes");
  svod_buffer* out_view = nullptr;
  expect_error(svod_buffer_view(bytes.handle, 60, "f32", 2, &out_view), SVOD_ERROR_VALIDATION,
               "a view of 2 f32 elements (8 bytes) at byte offset 60 leaves the buffer of 64 bytes");
  expect_error(svod_buffer_view(nullptr, 0, "f32", 1, &out_view), SVOD_ERROR_VALIDATION, "base is NULL");
  expect_error(svod_buffer_view(bytes.handle, 0, "f32", 0, &out_view), SVOD_ERROR_VALIDATION, "at least one element");
}

TEST(CApi, LaunchChecksCountsHandlesAndScalars) {
  Device cpu;
  Program program;
  ASSERT_OK(svod_program_compile(cpu.handle, kScaleSpec, &program.handle));
  Buffer x, y;
  ASSERT_OK(svod_buffer_allocate(cpu.handle, "f32", 16, &x.handle));
  ASSERT_OK(svod_buffer_allocate(cpu.handle, "f32", 16, &y.handle));
  svod_buffer* buffers[] = {y.handle, x.handle};
  const int64_t scalars[] = {16, 2};

  expect_error(svod_program_launch(program.handle, buffers, 1, scalars, 2), SVOD_ERROR_VALIDATION,
               "takes 2 buffers, got 1");
  expect_error(svod_program_launch(program.handle, buffers, 2, scalars, 1), SVOD_ERROR_VALIDATION, "scalar");
  svod_buffer* with_null[] = {y.handle, nullptr};
  expect_error(svod_program_launch(program.handle, with_null, 2, scalars, 2), SVOD_ERROR_VALIDATION,
               "buffers[1] is NULL");
  expect_error(svod_program_launch(program.handle, nullptr, 2, scalars, 2), SVOD_ERROR_VALIDATION, "buffers is NULL");
  expect_error(svod_program_launch(program.handle, buffers, 2, nullptr, 2), SVOD_ERROR_VALIDATION, "scalars is NULL");
  // n is declared in [0, 1024]; k is an i32.
  const int64_t too_many[] = {2000, 2};
  expect_error(svod_program_launch(program.handle, buffers, 2, too_many, 2), SVOD_ERROR_VALIDATION, "2000");
  const int64_t too_wide[] = {16, int64_t{1} << 40};
  expect_error(svod_program_launch(program.handle, buffers, 2, too_wide, 2), SVOD_ERROR_VALIDATION,
               std::to_string(int64_t{1} << 40));
  // The error names the function it came from.
  expect_error(svod_program_launch(program.handle, buffers, 1, scalars, 2), SVOD_ERROR_VALIDATION,
               "svod_program_launch: ");
}

TEST(CApi, LaunchChecksBufferDtypesAgainstTheSpec) {
  Device cpu;
  Program program;
  ASSERT_OK(svod_program_compile(cpu.handle, kScaleSpec, &program.handle));
  Buffer x, y, ints;
  ASSERT_OK(svod_buffer_allocate(cpu.handle, "f32", 16, &x.handle));
  ASSERT_OK(svod_buffer_allocate(cpu.handle, "f32", 16, &y.handle));
  ASSERT_OK(svod_buffer_allocate(cpu.handle, "i32", 16, &ints.handle));
  const int64_t scalars[] = {16, 2};
  svod_buffer* wrong[] = {ints.handle, x.handle};  // y is declared f32
  expect_error(svod_program_launch(program.handle, wrong, 2, scalars, 2), SVOD_ERROR_VALIDATION,
               "buffer 0 (\"y\"): dtype i32 does not match the declared f32");
  std::vector<int32_t> got(16, -1);
  ASSERT_OK(svod_buffer_copy_to_host(ints.handle, got.data(), got.size() * sizeof(int32_t)));
  EXPECT_EQ(got, std::vector<int32_t>(16, 0));  // nothing ran
  svod_buffer* right[] = {y.handle, x.handle};
  EXPECT_OK(svod_program_launch(program.handle, right, 2, scalars, 2));
}

#if defined(__x86_64__)
// A kernel that faults fails its launch with SVOD_ERROR_KERNEL_FAULT (issue
// 35); the host goes on and launches again.
TEST(CApi, AFaultingKernelIsAKernelFaultStatus) {
  Device cpu;
  Program bad, scale;
  ASSERT_OK(svod_program_compile(cpu.handle, R"({"language": "c", "entry": "bad",
      "source": "void bad(float* y) { *(volatile float*)0 = y[0]; }",
      "buffers": [{"name": "y", "access": "write", "dtype": "f32"}]})",
                                 &bad.handle));
  ASSERT_OK(svod_program_compile(cpu.handle, kScaleSpec, &scale.handle));
  Buffer x, y;
  ASSERT_OK(svod_buffer_allocate(cpu.handle, "f32", 16, &x.handle));
  ASSERT_OK(svod_buffer_allocate(cpu.handle, "f32", 16, &y.handle));
  svod_buffer* one[] = {y.handle};
  for (int i = 0; i < 3; ++i)
    expect_error(svod_program_launch(bad.handle, one, 1, nullptr, 0), SVOD_ERROR_KERNEL_FAULT,
                 "kernel fault: SIGSEGV (invalid memory access) at address 0x0");
  EXPECT_STREQ(svod_error_kind_name(SVOD_ERROR_KERNEL_FAULT), "kernel fault");
  svod_buffer* both[] = {y.handle, x.handle};
  const int64_t scalars[] = {16, 2};
  EXPECT_OK(svod_program_launch(scale.handle, both, 2, scalars, 2));
}
#endif

// n elements written, declared with min_count: launches whose buffers hold
// fewer, or whose count is more bytes than 64 bits hold, never run.
constexpr const char* kFillSpec = R"({
  "language": "c",
  "source": "void fill(float* restrict y, long n) { for (long i = 0; i < n; i++) y[i] = 1.0f; }",
  "entry": "fill",
  "buffers": [ { "name": "y", "access": "write", "dtype": "f32", "min_count": "n" } ],
  "scalars": [ { "name": "n", "type": "i64" } ]
})";

TEST(CApi, MinCountInTheSpecGuardsLaunches) {
  Device cpu;
  Program program;
  ASSERT_OK(svod_program_compile(cpu.handle, kFillSpec, &program.handle));
  std::vector<float> memory(32, 0.0f);
  Buffer y;
  ASSERT_OK(svod_buffer_wrap_host(memory.data() + 16, "f32", 16, &y.handle));
  svod_buffer* buffers[] = {y.handle};
  const int64_t past_the_end[] = {17};
  expect_error(svod_program_launch(program.handle, buffers, 1, past_the_end, 1), SVOD_ERROR_VALIDATION,
               "buffer 0 (\"y\") holds 64 bytes but the launch needs 68");
  const int64_t wraps[] = {int64_t{1} << 62};
  expect_error(svod_program_launch(program.handle, buffers, 1, wraps, 1), SVOD_ERROR_VALIDATION,
               "program \"fill\": buffer 0 (\"y\") needs 2^62 f32 elements (min_count \"n\"): more bytes than fit in 64 "
               "bits");
  EXPECT_EQ(memory, std::vector<float>(32, 0.0f));  // nothing written, before or in the buffer
  const int64_t all[] = {16};
  ASSERT_OK(svod_program_launch(program.handle, buffers, 1, all, 1));
  EXPECT_EQ(memory[15], 0.0f);
  EXPECT_EQ(memory[31], 1.0f);

  // min_count names only the program's scalars (not core_id), as integers or expressions.
  std::string spec = kFillSpec;
  const std::string field = R"("min_count": "n")";
  auto with = [&](const std::string& text) {
    std::string s = spec;
    return s.replace(s.find(field), field.size(), text);
  };
  Program other;
  expect_error(svod_program_compile(cpu.handle, with(R"("min_count": "m")").c_str(), &other.handle),
               SVOD_ERROR_VALIDATION, "buffers[0].min_count: unknown variable \"m\"");
  expect_error(svod_program_compile(cpu.handle, with(R"("min_count": [1])").c_str(), &other.handle),
               SVOD_ERROR_VALIDATION, "buffers[0].min_count: expected an integer or an expression string");
  ASSERT_OK(svod_program_compile(cpu.handle, with(R"("min_count": 20)").c_str(), &other.handle));
  expect_error(svod_program_launch(other.handle, buffers, 1, all, 1), SVOD_ERROR_VALIDATION,
               "holds 64 bytes but the launch needs 80");
}

TEST(CApi, CoreIdSlicesStayWithinItsBounds) {
  Device cpu;
  Program program;
  ASSERT_OK(svod_program_compile(cpu.handle, R"({
    "language": "c",
    "source": "void mark(int* restrict o, int n, int core_id) { o[core_id] = 1; }",
    "entry": "mark",
    "buffers": [ { "name": "o", "access": "write", "dtype": "i32" } ],
    "scalars": [ { "name": "n", "type": "i64" }, { "name": "core_id", "type": "i32", "min": 0, "max": 3 } ],
    "global_size": ["n"]
  })", &program.handle));
  Buffer o;
  ASSERT_OK(svod_buffer_allocate(cpu.handle, "i32", 4, &o.handle));
  svod_buffer* buffers[] = {o.handle};
  const int64_t five[] = {5};
  expect_error(svod_program_launch(program.handle, buffers, 1, five, 1), SVOD_ERROR_VALIDATION,
               "5 core_id slices would pass core_id = 4, outside its bounds [0, 3]");
  const int64_t four[] = {4};
  EXPECT_OK(svod_program_launch(program.handle, buffers, 1, four, 1));
}

TEST(CApi, LaunchFromManyThreads) {
  Device cpu;
  Program program;
  ASSERT_OK(svod_program_compile(cpu.handle, kScaleSpec, &program.handle));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<float> x(64, 1.0f), y(64);
      Buffer bx, by;
      if (svod_buffer_wrap_host(x.data(), "f32", 64, &bx.handle) ||
          svod_buffer_wrap_host(y.data(), "f32", 64, &by.handle)) {
        ++failures;
        return;
      }
      svod_buffer* buffers[] = {by.handle, bx.handle};
      for (int i = 0; i < 200; ++i) {
        const int64_t scalars[] = {64, t + i};
        svod_status* s = svod_program_launch(program.handle, buffers, 2, scalars, 2);
        if (s || y[63] != static_cast<float>(t + i)) ++failures;
        svod_status_free(s);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(CApi, BadSpecsNameTheField) {
  Device cpu;
  svod_program* program = nullptr;
  expect_error(svod_program_compile(cpu.handle, "{ \"language\": ", &program), SVOD_ERROR_VALIDATION,
               "not valid JSON");
  expect_error(svod_program_compile(cpu.handle, "[]", &program), SVOD_ERROR_VALIDATION, "expected an object");
  expect_error(svod_program_compile(cpu.handle, R"({"language": "c", "source": "void k(void) {}", "buffers": []})",
                                    &program),
               SVOD_ERROR_VALIDATION, "missing field \"entry\"");
  expect_error(svod_program_compile(cpu.handle,
                                    R"({"language": "c", "source": "void k(float* a) {}", "entry": "k",
                                        "buffers": [{"name": "a", "access": "rw"}]})",
                                    &program),
               SVOD_ERROR_VALIDATION, "buffers[0].access");
  expect_error(svod_program_compile(cpu.handle,
                                    R"({"language": "c", "source": "void k(void) {}", "entry": "k", "buffers": [],
                                        "global_size": ["N"]})",
                                    &program),
               SVOD_ERROR_VALIDATION, "unknown variable \"N\"");
  expect_error(svod_program_compile(cpu.handle,
                                    R"({"language": "c", "source": "void k(void) {}", "entry": "k", "buffers": [],
                                        "device": "CL:0"})",
                                    &program),
               SVOD_ERROR_VALIDATION, "compiling for CPU");
  expect_error(svod_program_compile(cpu.handle,
                                    R"({"language": "c", "source_file": "/nonexistent/k.c", "entry": "k",
                                        "buffers": []})",
                                    &program),
               SVOD_ERROR_IO, "/nonexistent/k.c");
  EXPECT_EQ(program, nullptr);
}

TEST(CApi, CompileErrorsCarryTheCompilerLog) {
  Device cpu;
  svod_program* program = nullptr;
  expect_error(svod_program_compile(cpu.handle,
                                    R"({"language": "c", "entry": "k", "buffers": [{"name": "a", "access": "write"}],
                                        "source": "void k(float* a) { a[0] = not_declared_anywhere; }"})",
                                    &program),
               SVOD_ERROR_COMPILE, "undeclared identifier 'not_declared_anywhere'");
  expect_error(svod_program_compile(cpu.handle,
                                    R"({"language": "c", "entry": "missing", "buffers": [],
                                        "source": "void present(void) {}"})",
                                    &program),
               SVOD_ERROR_UNDEFINED_SYMBOL, "missing");
}

TEST(CApi, NullPointersGiveStatuses) {
  Device cpu;
  svod_device* device = nullptr;
  svod_buffer* buffer = nullptr;
  svod_program* program = nullptr;
  svod_plan* plan = nullptr;
  void* data = nullptr;
  float host[4] = {};
  expect_error(svod_device_get(nullptr, &device), SVOD_ERROR_VALIDATION, "svod_device_get: name is NULL");
  expect_error(svod_device_get("CPU", nullptr), SVOD_ERROR_VALIDATION, "out is NULL");
  expect_error(svod_device_release(nullptr), SVOD_ERROR_VALIDATION, "device is NULL");
  expect_error(svod_buffer_allocate(nullptr, "f32", 1, &buffer), SVOD_ERROR_VALIDATION, "device is NULL");
  expect_error(svod_buffer_allocate(cpu.handle, nullptr, 1, &buffer), SVOD_ERROR_VALIDATION, "dtype is NULL");
  expect_error(svod_buffer_allocate(cpu.handle, "f32", 1, nullptr), SVOD_ERROR_VALIDATION, "out is NULL");
  expect_error(svod_buffer_wrap_host(nullptr, "f32", 1, &buffer), SVOD_ERROR_VALIDATION, "data is NULL");
  expect_error(svod_buffer_copy_from_host(nullptr, host, 16), SVOD_ERROR_VALIDATION, "buffer is NULL");
  expect_error(svod_buffer_copy_to_host(nullptr, host, 16), SVOD_ERROR_VALIDATION, "buffer is NULL");
  expect_error(svod_buffer_data(nullptr, &data), SVOD_ERROR_VALIDATION, "buffer is NULL");
  expect_error(svod_buffer_release(nullptr), SVOD_ERROR_VALIDATION, "buffer is NULL");
  EXPECT_EQ(svod_buffer_count(nullptr), 0u);
  EXPECT_EQ(svod_buffer_dtype(nullptr), nullptr);
  expect_error(svod_program_compile(nullptr, kScaleSpec, &program), SVOD_ERROR_VALIDATION, "device is NULL");
  expect_error(svod_program_compile(cpu.handle, nullptr, &program), SVOD_ERROR_VALIDATION, "spec_json is NULL");
  expect_error(svod_program_launch(nullptr, nullptr, 0, nullptr, 0), SVOD_ERROR_VALIDATION, "program is NULL");
  expect_error(svod_program_release(nullptr), SVOD_ERROR_VALIDATION, "program is NULL");
  expect_error(svod_plan_load(nullptr, nullptr, &plan), SVOD_ERROR_VALIDATION, "path is NULL");
  expect_error(svod_plan_load_package(nullptr, 16, nullptr, &plan), SVOD_ERROR_VALIDATION,
               "svod_plan_load_package: data is NULL");
  expect_error(svod_plan_load_package(host, sizeof host, nullptr, nullptr), SVOD_ERROR_VALIDATION, "out is NULL");
  expect_error(svod_plan_load_package_file(nullptr, nullptr, &plan), SVOD_ERROR_VALIDATION,
               "svod_plan_load_package_file: path is NULL");
  expect_error(svod_plan_load_package_file("x.svodpkg", nullptr, nullptr), SVOD_ERROR_VALIDATION, "out is NULL");
  expect_error(svod_plan_set_var(nullptr, "N", 1), SVOD_ERROR_VALIDATION, "plan is NULL");
  expect_error(svod_plan_buffer(nullptr, "x", &buffer), SVOD_ERROR_VALIDATION, "plan is NULL");
  expect_error(svod_plan_bind(nullptr, "x", nullptr), SVOD_ERROR_VALIDATION, "plan is NULL");
  expect_error(svod_plan_execute(nullptr), SVOD_ERROR_VALIDATION, "plan is NULL");
  expect_error(svod_plan_release(nullptr), SVOD_ERROR_VALIDATION, "plan is NULL");

  Buffer real;
  ASSERT_OK(svod_buffer_allocate(cpu.handle, "f32", 4, &real.handle));
  expect_error(svod_buffer_copy_from_host(real.handle, nullptr, 16), SVOD_ERROR_VALIDATION, "src is NULL");
  expect_error(svod_buffer_copy_to_host(real.handle, nullptr, 16), SVOD_ERROR_VALIDATION, "dst is NULL");
  expect_error(svod_buffer_data(real.handle, nullptr), SVOD_ERROR_VALIDATION, "out is NULL");
}

TEST(CApi, DoubleReleaseIsDetected) {
  svod_device* device = nullptr;
  ASSERT_OK(svod_device_get("CPU", &device));
  svod_buffer* buffer = nullptr;
  ASSERT_OK(svod_buffer_allocate(device, "i32", 8, &buffer));
  svod_program* program = nullptr;
  ASSERT_OK(svod_program_compile(device, kScaleSpec, &program));

  EXPECT_OK(svod_buffer_release(buffer));
  expect_error(svod_buffer_release(buffer), SVOD_ERROR_VALIDATION, "not a live handle");
  EXPECT_OK(svod_program_release(program));
  expect_error(svod_program_release(program), SVOD_ERROR_VALIDATION, "not a live handle");
  EXPECT_OK(svod_device_release(device));
  expect_error(svod_device_release(device), SVOD_ERROR_VALIDATION, "not a live handle");
  // A pointer svod never handed out, or one of another handle type.
  int not_a_handle = 0;
  expect_error(svod_plan_release(reinterpret_cast<svod_plan*>(&not_a_handle)), SVOD_ERROR_VALIDATION,
               "not a live handle");
  svod_device* live = nullptr;
  ASSERT_OK(svod_device_get("CPU", &live));
  expect_error(svod_buffer_release(reinterpret_cast<svod_buffer*>(live)), SVOD_ERROR_VALIDATION, "not a live handle");
  EXPECT_OK(svod_device_release(live));
}

TEST(CApi, DeviceBuffersCopyButHaveNoHostAddress) {
  svod_device* cl = nullptr;
  Status opened(svod_device_get("CL:0", &cl));
  if (opened.status) GTEST_SKIP() << opened;
  Buffer buffer;
  ASSERT_OK(svod_buffer_allocate(cl, "i32", 4, &buffer.handle));
  const int32_t in[4] = {1, -2, 3, -4};
  int32_t out[4] = {};
  ASSERT_OK(svod_buffer_copy_from_host(buffer.handle, in, sizeof in));
  ASSERT_OK(svod_buffer_copy_to_host(buffer.handle, out, sizeof out));
  EXPECT_EQ(std::vector<int32_t>(out, out + 4), std::vector<int32_t>(in, in + 4));
  void* data = nullptr;
  expect_error(svod_buffer_data(buffer.handle, &data), SVOD_ERROR_UNSUPPORTED, "");
  EXPECT_OK(svod_device_release(cl));
}

const std::string kMlpDir = SVOD_SOURCE_DIR "/examples/mlp/";

// Runs a plan of the MLP example and returns its "probs", checked against the
// example's expected output.
std::vector<float> run_mlp(svod_plan* plan) {
  EXPECT_OK(svod_plan_execute(plan));
  Buffer probs;
  EXPECT_OK(svod_plan_buffer(plan, "probs", &probs.handle));
  EXPECT_EQ(svod_buffer_count(probs.handle), 640u);
  std::vector<float> got(640);
  EXPECT_OK(svod_buffer_copy_to_host(probs.handle, got.data(), got.size() * sizeof(float)));
  const svod::NpyArray expected = svod::read_npy(kMlpDir + "expected_probs.npy");
  EXPECT_EQ(expected.count(), got.size());
  const size_t size = svod::size_of(expected.dtype);
  for (size_t i = 0; i < got.size() && i < expected.count(); ++i) {
    const double want = svod::load_as_double(expected.dtype, expected.data.data() + i * size);
    EXPECT_NEAR(got[i], want, 1e-6 + 1e-4 * std::fabs(want)) << i;
  }
  return got;
}

// The MLP example plan, run through the C API, matches its expected output.
TEST(CApi, MlpPlan) {
  Plan plan;
  ASSERT_OK(svod_plan_load((kMlpDir + "plan.json").c_str(), nullptr, &plan.handle));
  run_mlp(plan.handle);
}

// The MLP example packed ahead of time loads from memory and from a file,
// compiles nothing and gives the plan's outputs exactly.
TEST(CApi, MlpPackage) {
  Plan from_plan;
  ASSERT_OK(svod_plan_load((kMlpDir + "plan.json").c_str(), nullptr, &from_plan.handle));
  const std::vector<float> want = run_mlp(from_plan.handle);
  const std::vector<std::byte> bytes = svod::pack_plan(kMlpDir + "plan.json");
  TempDir dir;
  const std::string path = (dir / "mlp.svodpkg").string();
  svod::write_package(path, bytes);

  const uint64_t compiles = svod::compile_count();
  Plan from_memory;
  {
    std::vector<std::byte> copy = bytes;
    ASSERT_OK(svod_plan_load_package(copy.data(), copy.size(), nullptr, &from_memory.handle));
    std::fill(copy.begin(), copy.end(), std::byte{0});  // the bytes are only read during the call
  }
  EXPECT_EQ(run_mlp(from_memory.handle), want);
  Plan from_file;
  ASSERT_OK(svod_plan_load_package_file(path.c_str(), nullptr, &from_file.handle));
  EXPECT_EQ(run_mlp(from_file.handle), want);
  EXPECT_EQ(svod::compile_count(), compiles);
}

// svod_plan_load_package_with_flags: a package whose CPU objects need
// features this CPU lacks is refused under SVOD_PACKAGE_REFUSE_CPU_MISMATCH
// (UNSUPPORTED naming them) and compiled from its sources without it; bits
// the library does not know are VALIDATION.
TEST(CApi, PackageFlagsRefuseObjectsForAnotherCpu) {
  if (svod::host_arch() != "x86_64") GTEST_SKIP() << "an x86-64 CPU name";
  svod::PackOptions options;
  options.target_cpu = "sapphirerapids";
  const std::vector<std::byte> bytes = svod::pack_plan(kMlpDir + "plan.json", options);
  const svod::PackageManifest m =
      svod::read_manifest(svod::PackageReader(bytes, "spr").text(svod::kManifestSection), "spr");
  if (svod::missing_cpu_features(m.cpu->target_features).empty())
    GTEST_SKIP() << "this CPU has every feature of sapphirerapids that svod checks";
  TempDir dir;
  const std::string path = (dir / "spr.svodpkg").string();
  svod::write_package(path, bytes);

  svod_plan* none = nullptr;
  expect_error(svod_plan_load_package_with_flags(bytes.data(), bytes.size(), nullptr,
                                                 SVOD_PACKAGE_REFUSE_CPU_MISMATCH, &none),
               SVOD_ERROR_UNSUPPORTED, "which this CPU lacks");
  expect_error(svod_plan_load_package_file_with_flags(path.c_str(), nullptr, SVOD_PACKAGE_REFUSE_CPU_MISMATCH, &none),
               SVOD_ERROR_UNSUPPORTED, "which this CPU lacks");
  expect_error(svod_plan_load_package_file_with_flags(path.c_str(), nullptr, 0x80, &none), SVOD_ERROR_VALIDATION,
               "flags: 0x80");
  Plan from_plan;
  ASSERT_OK(svod_plan_load((kMlpDir + "plan.json").c_str(), nullptr, &from_plan.handle));
  Plan recompiled;
  ASSERT_OK(svod_plan_load_package_file_with_flags(path.c_str(), nullptr, 0, &recompiled.handle));
  EXPECT_EQ(run_mlp(recompiled.handle), run_mlp(from_plan.handle));
}

// SVOD_PACKAGE_SANDBOX and svod_plan_sandbox: the MLP package run in the
// sandbox gives exactly what it gives in this process, also for an input
// written through the plan's buffer handle; binding caller memory is refused.
TEST(CApi, SandboxedPackageGivesTheSameOutputs) {
  const std::vector<std::byte> bytes = svod::pack_plan(kMlpDir + "plan.json");
  Plan plain;
  ASSERT_OK(svod_plan_load_package(bytes.data(), bytes.size(), nullptr, &plain.handle));
  const std::vector<float> want = run_mlp(plain.handle);
  Plan sandboxed;
  ASSERT_OK(svod_plan_load_package_with_flags(bytes.data(), bytes.size(), nullptr, SVOD_PACKAGE_SANDBOX,
                                              &sandboxed.handle));
  EXPECT_EQ(run_mlp(sandboxed.handle), want);
  EXPECT_EQ(run_mlp(sandboxed.handle), want);  // the helper stays for the next run
  expect_error(svod_plan_sandbox(sandboxed.handle, nullptr), SVOD_ERROR_VALIDATION, "sandboxed already");
  std::vector<float> x(64 * 256, 0.5f);
  Buffer wrapped;
  ASSERT_OK(svod_buffer_wrap_host(x.data(), "f32", x.size(), &wrapped.handle));
  expect_error(svod_plan_bind(sandboxed.handle, "x", wrapped.handle), SVOD_ERROR_UNSUPPORTED,
               "stay in the memory it shares with its helper");
  // The plan's own buffer handle writes into the sandbox's memory.
  for (svod_plan* plan : {sandboxed.handle, plain.handle}) {
    Buffer input;
    ASSERT_OK(svod_plan_buffer(plan, "x", &input.handle));
    ASSERT_OK(svod_buffer_copy_from_host(input.handle, x.data(), x.size() * sizeof(float)));
  }
  ASSERT_OK(svod_plan_execute(sandboxed.handle));
  ASSERT_OK(svod_plan_execute(plain.handle));
  EXPECT_EQ(plan_values(sandboxed.handle, "probs"), plan_values(plain.handle, "probs"));
}

// A plan file's kernel that opens /etc/shadow, run sandboxed: the execution
// fails with SANDBOX_VIOLATION naming the system call and the rule, and the
// next execution (with a variable that keeps the kernel from the call) runs
// in a fresh helper. Bad options are refused before anything changes.
TEST(CApi, SandboxedPlanContainsAHostileKernel) {
  TempDir dir;
  const std::string path = dir.write("plan.json", R"({
  "svod_plan": 1,
  "variables": { "BAD": { "min": 0, "max": 1, "value": 1 } },
  "buffers": { "y": { "dtype": "f32", "count": 4 } },
  "programs": {
    "peek": { "language": "c", "entry": "peek",
              "source": "int open(const char*, int, ...);\nvoid peek(float* y, long bad) { y[0] = bad ? open(\"/etc/shadow\", 0) : 7; }",
              "buffers": [ { "name": "y", "access": "write" } ],
              "scalars": [ { "name": "bad", "type": "i64" } ] }
  },
  "ops": [ { "run": "peek", "buffers": ["y"], "scalars": { "bad": "BAD" } } ]
})").string();
  Plan plan;
  ASSERT_OK(svod_plan_load(path.c_str(), nullptr, &plan.handle));
  expect_error(svod_plan_sandbox(plan.handle, "[]"), SVOD_ERROR_VALIDATION, "expected an object");
  expect_error(svod_plan_sandbox(plan.handle, R"({"wall_limit_s": -1})"), SVOD_ERROR_VALIDATION, "wall_limit_s");
  expect_error(svod_plan_sandbox(plan.handle, R"({"memory_limit": 0})"), SVOD_ERROR_VALIDATION, "memory_limit");
  expect_error(svod_plan_sandbox(plan.handle, R"({"wall": 1})"), SVOD_ERROR_VALIDATION, "unknown option \"wall\"");
  ASSERT_OK(svod_plan_sandbox(plan.handle, R"({"wall_limit_s": 10, "memory_limit": 268435456})"));
  expect_error(svod_plan_execute(plan.handle), SVOD_ERROR_SANDBOX_VIOLATION, "openat");
  expect_error(svod_plan_execute(plan.handle), SVOD_ERROR_SANDBOX_VIOLATION, "rule: no files");
  ASSERT_OK(svod_plan_set_var(plan.handle, "BAD", 0));
  ASSERT_OK(svod_plan_execute(plan.handle));
  EXPECT_EQ(plan_values(plan.handle, "y"), (std::vector<float>{7, 0, 0, 0}));
}

// svod_plan_load_with_flags(SVOD_PACKAGE_SANDBOX): a plan file's sources
// compiled confined and its kernels run sandboxed. The MLP gives exactly what
// it gives in this process; a source that #includes a file outside the
// toolchain is refused at load naming it (and nothing of it); another flag is
// refused.
TEST(CApi, PlanFileLoadedSandboxedCompilesConfined) {
  Plan plain;
  ASSERT_OK(svod_plan_load((kMlpDir + "plan.json").c_str(), nullptr, &plain.handle));
  Plan sandboxed;
  ASSERT_OK(svod_plan_load_with_flags((kMlpDir + "plan.json").c_str(), nullptr, SVOD_PACKAGE_SANDBOX,
                                      &sandboxed.handle));
  EXPECT_EQ(run_mlp(sandboxed.handle), run_mlp(plain.handle));
  expect_error(svod_plan_sandbox(sandboxed.handle, nullptr), SVOD_ERROR_VALIDATION, "sandboxed already");

  TempDir dir;
  const std::string path =
      dir.write("plan.json",
                one_kernel_plan("leak", R"(static const char secret[] = {\n#include \"/etc/passwd\"\n};\n)"
                                        R"(void leak(float* y) { y[0] = secret[0]; })"))
          .string();
  svod_plan* none = nullptr;
  {
    const Status refused(svod_plan_load_with_flags(path.c_str(), nullptr, SVOD_PACKAGE_SANDBOX, &none));
    EXPECT_EQ(refused.kind(), SVOD_ERROR_SANDBOX_VIOLATION) << refused;
    EXPECT_NE(refused.message().find("#include \"/etc/passwd\""), std::string::npos) << refused;
    EXPECT_EQ(refused.message().find("root:"), std::string::npos) << refused;
    EXPECT_EQ(none, nullptr);
  }
  expect_error(svod_plan_load_with_flags((kMlpDir + "plan.json").c_str(), nullptr, SVOD_PACKAGE_REFUSE_CPU_MISMATCH,
                                         &none),
               SVOD_ERROR_VALIDATION, "holds bits a plan file's load does not take (0x1)");
}

// A plan with a variable: y = 2 * x over the first N elements.
constexpr const char* kScalePlan = R"({
  "svod_plan": 1,
  "variables": { "N": { "min": 1, "max": 8, "value": 8 } },
  "buffers": {
    "x": { "dtype": "f32", "count": 8, "init": { "arange": { "start": 1, "step": 1 } } },
    "y": { "dtype": "f32", "count": 8 }
  },
  "programs": {
    "scale": { "language": "c", "entry": "scale",
               "source": "void scale(float* y, const float* x, long n) { for (long i = 0; i < n; i++) y[i] = 2 * x[i]; }",
               "buffers": [ { "name": "y", "access": "write" }, { "name": "x" } ],
               "scalars": [ { "name": "n", "type": "i64" } ] }
  },
  "ops": [ { "run": "scale", "buffers": ["y", "x"], "scalars": { "n": "N" } } ]
})";

TEST(CApi, PlanVariablesAndBinding) {
  TempDir dir;
  const std::string path = dir.write("plan.json", kScalePlan).string();
  Plan plan;
  ASSERT_OK(svod_plan_load(path.c_str(), R"({"N": 2})", &plan.handle));
  ASSERT_OK(svod_plan_execute(plan.handle));
  EXPECT_EQ(plan_values(plan.handle, "y"), (std::vector<float>{2, 4, 0, 0, 0, 0, 0, 0}));

  ASSERT_OK(svod_plan_set_var(plan.handle, "N", 3));
  ASSERT_OK(svod_plan_execute(plan.handle));
  EXPECT_EQ(plan_values(plan.handle, "y"), (std::vector<float>{2, 4, 6, 0, 0, 0, 0, 0}));

  // Caller memory bound in place of x: the plan reads it directly.
  std::vector<float> x = {10, 20, 30, 40, 50, 60, 70, 80};
  Buffer wrapped;
  ASSERT_OK(svod_buffer_wrap_host(x.data(), "f32", x.size(), &wrapped.handle));
  ASSERT_OK(svod_plan_bind(plan.handle, "x", wrapped.handle));
  ASSERT_OK(svod_plan_set_var(plan.handle, "N", 8));
  ASSERT_OK(svod_plan_execute(plan.handle));
  EXPECT_EQ(plan_values(plan.handle, "y"), (std::vector<float>{20, 40, 60, 80, 100, 120, 140, 160}));
  EXPECT_EQ(plan_values(plan.handle, "x"), x);

  // A buffer handle taken from the plan outlives it.
  Buffer y;
  ASSERT_OK(svod_plan_buffer(plan.handle, "y", &y.handle));
  EXPECT_OK(svod_plan_release(plan.handle));
  plan.handle = nullptr;
  float out[8];
  ASSERT_OK(svod_buffer_copy_to_host(y.handle, out, sizeof out));
  EXPECT_EQ(out[7], 160.0f);
}

TEST(CApi, PlanErrors) {
  TempDir dir;
  const std::string path = dir.write("plan.json", kScalePlan).string();
  svod_plan* none = nullptr;
  expect_error(svod_plan_load((dir / "missing.json").c_str(), nullptr, &none), SVOD_ERROR_IO, "missing.json");
  const std::string broken = dir.write("broken.json", R"({"svod_plan": 1, "buffers": {}, "ops": []})").string();
  expect_error(svod_plan_load(broken.c_str(), nullptr, &none), SVOD_ERROR_VALIDATION, "at least one buffer");
  expect_error(svod_plan_load(path.c_str(), "{\"N\": ", &none), SVOD_ERROR_VALIDATION, "vars_json is not valid JSON");
  expect_error(svod_plan_load(path.c_str(), R"({"N": 1e999})", &none), SVOD_ERROR_VALIDATION,
               "vars_json is not valid JSON");  // a number no double holds
  expect_error(svod_plan_load(path.c_str(), "[1]", &none), SVOD_ERROR_VALIDATION, "expected an object");
  expect_error(svod_plan_load(path.c_str(), R"({"N": 1.5})", &none), SVOD_ERROR_VALIDATION, "vars_json.N");
  expect_error(svod_plan_load(path.c_str(), R"({"M": 1})", &none), SVOD_ERROR_VALIDATION, "no variable named \"M\"");
  expect_error(svod_plan_load(path.c_str(), R"({"N": 9})", &none), SVOD_ERROR_VALIDATION, "N");
  EXPECT_EQ(none, nullptr);

  Plan plan;
  ASSERT_OK(svod_plan_load(path.c_str(), nullptr, &plan.handle));
  expect_error(svod_plan_set_var(plan.handle, "M", 1), SVOD_ERROR_VALIDATION, "(it has: N)");
  expect_error(svod_plan_set_var(plan.handle, "N", 0), SVOD_ERROR_VALIDATION, "N");
  svod_buffer* buffer = nullptr;
  expect_error(svod_plan_buffer(plan.handle, "z", &buffer), SVOD_ERROR_VALIDATION, "no buffer named \"z\"");
  float small[4];
  Buffer wrong_size;
  ASSERT_OK(svod_buffer_wrap_host(small, "f32", 4, &wrong_size.handle));
  expect_error(svod_plan_bind(plan.handle, "x", wrong_size.handle), SVOD_ERROR_VALIDATION, "");
  ASSERT_OK(svod_plan_execute(plan.handle));  // the failed calls changed nothing
  EXPECT_EQ(plan_values(plan.handle, "y")[7], 16.0f);
}

// JSON nested 100,000 deep (which once overflowed the stack) is a VALIDATION
// status saying where and that the nesting exceeds the limit: in vars_json,
// in a plan file, in a package's plan and in a program spec. Nothing is
// handed out; nesting up to the limit gets the usual checks.
TEST(CApi, JsonNestedTooDeepIsValidation) {
  TempDir dir;
  const std::string path = dir.write("plan.json", kScalePlan).string();
  const std::string limit = "JSON nesting exceeds the limit of 256 levels";
  svod_plan* none = nullptr;
  expect_error(svod_plan_load(path.c_str(), svod::test::nested_arrays(100000).c_str(), &none), SVOD_ERROR_VALIDATION,
               "vars_json: " + limit + " (line 1, column 257)");
  expect_error(svod_plan_load(path.c_str(), ("{\"N\": " + svod::test::nested_objects(100000) + "}").c_str(), &none),
               SVOD_ERROR_VALIDATION, "vars_json: " + limit + " (line 1, column 1282)");
  const std::vector<std::byte> bytes = svod::pack_plan(path);
  expect_error(svod_plan_load_package(bytes.data(), bytes.size(), svod::test::nested_arrays(100000).c_str(), &none),
               SVOD_ERROR_VALIDATION, "vars_json: " + limit);
  const std::string deep_plan = dir.write("deep.json", "{\"svod_plan\": " + svod::test::nested_arrays(100000) + "}").string();
  expect_error(svod_plan_load(deep_plan.c_str(), nullptr, &none), SVOD_ERROR_VALIDATION,
               deep_plan + ": " + limit + " (line 1, column 270)");
  EXPECT_EQ(none, nullptr);
  Device cpu;
  svod_program* no_program = nullptr;
  const std::string spec = "{\"language\": \"c\", \"defines\": " + svod::test::nested_objects(100000) + "}";
  expect_error(svod_program_compile(cpu.handle, spec.c_str(), &no_program), SVOD_ERROR_VALIDATION,
               "program spec: " + limit);
  EXPECT_EQ(no_program, nullptr);
  // 1 + 255 levels: parsed, then refused as a value.
  expect_error(svod_plan_load(path.c_str(), ("{\"N\": " + svod::test::nested_arrays(255) + "}").c_str(), &none),
               SVOD_ERROR_VALIDATION, "vars_json.N: expected a 64-bit integer");
  Plan plan;
  ASSERT_OK(svod_plan_load(path.c_str(), R"({"N": 2})", &plan.handle));
}

// A packaged plan keeps its variables: defaults from `svod pack --var`,
// overridden by vars_json, and settable afterwards.
TEST(CApi, PackageVariables) {
  TempDir dir;
  const std::string plan_path = dir.write("plan.json", kScalePlan).string();
  const std::vector<std::byte> bytes = svod::pack_plan(plan_path, svod::PackOptions{{{"N", 1}}});
  Plan packed;
  ASSERT_OK(svod_plan_load_package(bytes.data(), bytes.size(), nullptr, &packed.handle));
  ASSERT_OK(svod_plan_execute(packed.handle));
  EXPECT_EQ(plan_values(packed.handle, "y"), (std::vector<float>{2, 0, 0, 0, 0, 0, 0, 0}));
  Plan plan;
  ASSERT_OK(svod_plan_load_package(bytes.data(), bytes.size(), R"({"N": 2})", &plan.handle));
  ASSERT_OK(svod_plan_execute(plan.handle));
  EXPECT_EQ(plan_values(plan.handle, "y"), (std::vector<float>{2, 4, 0, 0, 0, 0, 0, 0}));
  ASSERT_OK(svod_plan_set_var(plan.handle, "N", 3));
  ASSERT_OK(svod_plan_execute(plan.handle));
  EXPECT_EQ(plan_values(plan.handle, "y"), (std::vector<float>{2, 4, 6, 0, 0, 0, 0, 0}));
  expect_error(svod_plan_set_var(plan.handle, "N", 9), SVOD_ERROR_VALIDATION, "N");
  svod_plan* none = nullptr;
  expect_error(svod_plan_load_package(bytes.data(), bytes.size(), R"({"N": 0})", &none), SVOD_ERROR_VALIDATION, "N");
  expect_error(svod_plan_load_package(bytes.data(), bytes.size(), "[", &none), SVOD_ERROR_VALIDATION,
               "vars_json is not valid JSON");
  EXPECT_EQ(none, nullptr);
}

// Damaged packages give LOAD statuses naming the section at fault, and
// bytes that are no package at all a VALIDATION status; nothing is handed out.
TEST(CApi, DamagedPackages) {
  const std::vector<std::byte> bytes = svod::pack_plan(kMlpDir + "plan.json");
  const svod::PackageReader reader(bytes, "mlp");
  svod_plan* none = nullptr;
  for (const char* name : {"manifest", "plan", "init/w1", "program/layer1"}) {
    const svod::PackageSection& section = reader.get(name);
    std::vector<std::byte> bad = bytes;
    bad[section.offset + section.bytes.size() / 2] ^= std::byte{0x10};
    expect_error(svod_plan_load_package(bad.data(), bad.size(), nullptr, &none), SVOD_ERROR_LOAD,
                 fmt::format("(\"{}\"): digest mismatch", name));
  }
  expect_error(svod_plan_load_package(bytes.data(), bytes.size() - 1, nullptr, &none), SVOD_ERROR_LOAD, "truncated");
  std::vector<std::byte> wrong_version = bytes;
  wrong_version[8] = std::byte{9};  // a version no svod has written yet
  expect_error(svod_plan_load_package(wrong_version.data(), wrong_version.size(), nullptr, &none), SVOD_ERROR_LOAD,
               "header");
  const std::string text = "{\"svod_plan\": 1}";
  expect_error(svod_plan_load_package(text.data(), text.size(), nullptr, &none), SVOD_ERROR_VALIDATION,
               "svod_plan_load_package: package in memory: header: not an svod package");
  expect_error(svod_plan_load_package(text.data(), 0, nullptr, &none), SVOD_ERROR_VALIDATION, "not an svod package");
  TempDir dir;
  expect_error(svod_plan_load_package_file((dir / "missing.svodpkg").c_str(), nullptr, &none), SVOD_ERROR_IO,
               "missing.svodpkg");
  expect_error(svod_plan_load_package_file((kMlpDir + "plan.json").c_str(), nullptr, &none), SVOD_ERROR_VALIDATION,
               "plan.json: header: not an svod package");
  std::vector<std::byte> bad = bytes;
  bad[reader.get("plan").offset] ^= std::byte{1};
  const std::string path = (dir / "bad.svodpkg").string();
  svod::write_package(path, bad);
  expect_error(svod_plan_load_package_file(path.c_str(), nullptr, &none), SVOD_ERROR_LOAD,
               "(\"plan\"): digest mismatch");
  EXPECT_EQ(none, nullptr);
}

float plan_value(svod_plan* plan, const char* name, size_t index) { return plan_values(plan, name).at(index); }

// A plan spanning the CPU and CL:0: its variables (which size its OpenCL
// launches) are set when it is loaded or between executions.
TEST(CApi, CrossDevicePlan) {
  svod_device* cl = nullptr;
  Status opened(svod_device_get("CL:0", &cl));
  if (opened.status) GTEST_SKIP() << opened;
  EXPECT_OK(svod_device_release(cl));
  const char* path = SVOD_SOURCE_DIR "/examples/cross_device/plan.json";
  Plan plan;
  ASSERT_OK(svod_plan_load(path, nullptr, &plan.handle));
  ASSERT_OK(svod_plan_execute(plan.handle));
  EXPECT_EQ(plan_value(plan.handle, "total", 0), 11119616.0f);  // the sum of 2 i^2 + 1 for i < 256
  ASSERT_OK(svod_plan_set_var(plan.handle, "N", 64));
  ASSERT_OK(svod_plan_execute(plan.handle));
  EXPECT_EQ(plan_value(plan.handle, "total", 0), 170752.0f);  // for i < 64

  Plan small;
  ASSERT_OK(svod_plan_load(path, R"({"N": 64})", &small.handle));
  ASSERT_OK(svod_plan_execute(small.handle));
  EXPECT_EQ(plan_value(small.handle, "total", 0), 170752.0f);  // for i < 64
  Buffer d_out;
  ASSERT_OK(svod_plan_buffer(small.handle, "d_out", &d_out.handle));
  void* data = nullptr;
  expect_error(svod_buffer_data(d_out.handle, &data), SVOD_ERROR_UNSUPPORTED, "CL:0");
  float out[256];
  ASSERT_OK(svod_buffer_copy_to_host(d_out.handle, out, sizeof out));
  EXPECT_EQ(out[63], 2.0f * 63 * 63 + 1);
}

// A run that fails while executing returns EXECUTION; the plan is then
// poisoned and refuses to run again.
TEST(CApi, FailedRunsPoisonThePlan) {
  svod::register_custom_function(
      "capi_test_fail",
      {[](std::span<const svod::Buffer>, const svod::Attrs&, const svod::VariableValues&) {
         throw std::runtime_error("the host function gave up");
       },
       [](std::span<const svod::Buffer> buffers, const svod::Attrs&) {
         return std::vector<svod::Access>(buffers.size(), svod::Access::ReadWrite);
       }});
  TempDir dir;
  const std::string path = dir.write("plan.json", R"({
    "svod_plan": 1,
    "buffers": { "a": { "dtype": "i32", "count": 4 } },
    "ops": [ { "custom": "capi_test_fail", "buffers": ["a"] } ]
  })").string();
  Plan plan;
  ASSERT_OK(svod_plan_load(path.c_str(), nullptr, &plan.handle));
  expect_error(svod_plan_execute(plan.handle), SVOD_ERROR_EXECUTION, "the host function gave up");
  expect_error(svod_plan_execute(plan.handle), SVOD_ERROR_PLAN_POISONED, "");
  svod::unregister_custom_function("capi_test_fail");
}

TEST(CApi, PlanDoubleRelease) {
  TempDir dir;
  const std::string path = dir.write("plan.json", kScalePlan).string();
  svod_plan* plan = nullptr;
  ASSERT_OK(svod_plan_load(path.c_str(), nullptr, &plan));
  EXPECT_OK(svod_plan_release(plan));
  expect_error(svod_plan_release(plan), SVOD_ERROR_VALIDATION, "not a live handle");
}

}  // namespace

// ---- Running a plan by name (1.8) ----

// y = x * 2 + 1 over n elements: x an input of [n] floats, n in [1, 8].
constexpr const char* kNamedPlan = R"({"svod_plan": 1,
  "variables": {"n": {"min": 1, "max": 8, "value": 8}},
  "buffers": {
    "x": {"dtype": "f32", "shape": ["n"], "role": "input"},
    "y": {"dtype": "f32", "shape": ["n"], "role": "output"}
  },
  "programs": {"affine": {"language": "c", "entry": "affine",
    "source": "void affine(float* y, const float* x, long long n) { for (long long i = 0; i < n; ++i) y[i] = x[i] * 2 + 1; }",
    "buffers": [{"name": "y", "access": "write", "dtype": "f32"}, {"name": "x", "dtype": "f32"}],
    "scalars": [{"name": "n", "type": "i64"}]}},
  "ops": [{"run": "affine", "buffers": ["y", "x"], "scalars": {"n": "n"}}],
  "outputs": {"y": {}}
})";

TEST(CApi, APlanRunsByNameWithAVariableDimension) {
  TempDir dir;
  const auto path = dir.write("plan.json", kNamedPlan);
  Plan plan;
  ASSERT_OK(svod_plan_load(path.c_str(), nullptr, &plan.handle));
  ASSERT_EQ(svod_plan_input_count(plan.handle), 1u);
  ASSERT_EQ(svod_plan_output_count(plan.handle), 1u);
  EXPECT_EQ(svod_plan_input_count(nullptr), 0u);
  const char* name = nullptr;
  const char* dtype = nullptr;
  size_t rank = 0;
  ASSERT_OK(svod_plan_input_info(plan.handle, 0, &name, &dtype, &rank));
  EXPECT_STREQ(name, "x");
  EXPECT_STREQ(dtype, "f32");
  EXPECT_EQ(rank, 1u);
  int64_t size = 0;
  const char* variable = nullptr;
  ASSERT_OK(svod_plan_input_dim(plan.handle, 0, 0, &size, &variable));
  EXPECT_EQ(size, 8);
  EXPECT_STREQ(variable, "n");
  expect_error(svod_plan_input_dim(plan.handle, 0, 1, &size, &variable), SVOD_ERROR_VALIDATION,
               "input \"x\" has 1 dimensions, not 2");
  expect_error(svod_plan_output_info(plan.handle, 1, &name, &dtype, &rank), SVOD_ERROR_VALIDATION,
               "output 1 is out of range");

  // Nothing runs before the input is set.
  expect_error(svod_plan_execute(plan.handle), SVOD_ERROR_VALIDATION, "input \"x\" is not bound");
  const float x[3] = {1, 2, 3};
  const int64_t shape[1] = {3};
  expect_error(svod_plan_set_input(plan.handle, "q", x, sizeof x, "f32", shape, 1), SVOD_ERROR_VALIDATION,
               "no input named \"q\"");
  expect_error(svod_plan_set_input(plan.handle, "x", x, sizeof x, "i32", shape, 1), SVOD_ERROR_VALIDATION,
               "i32 data for an input of f32");
  const int64_t too_long[1] = {9};
  expect_error(svod_plan_set_input(plan.handle, "x", x, sizeof x, "f32", too_long, 1), SVOD_ERROR_VALIDATION,
               "variable \"n\", which lies in [1, 8], not 9");
  ASSERT_OK(svod_plan_set_input(plan.handle, "x", x, sizeof x, "f32", shape, 1));
  ASSERT_OK(svod_plan_output_dim(plan.handle, 0, 0, &size, &variable));
  EXPECT_EQ(size, 3);
  ASSERT_OK(svod_plan_execute(plan.handle));
  float y[3] = {};
  expect_error(svod_plan_get_output(plan.handle, "y", y, sizeof y - 1), SVOD_ERROR_VALIDATION,
               "output \"y\": 11 bytes to read into, the output has 12");
  ASSERT_OK(svod_plan_get_output(plan.handle, "y", y, sizeof y));
  EXPECT_EQ(y[0], 3.0f);
  EXPECT_EQ(y[1], 5.0f);
  EXPECT_EQ(y[2], 7.0f);
}
