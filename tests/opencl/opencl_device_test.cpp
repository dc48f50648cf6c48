// The OpenCL device on whatever platform the ICD loader finds (PoCL in CI):
// work-group reductions, build logs, binaries in the object cache, launch
// sizes, scalars, sub-buffer alignment, events and their callbacks. What
// every device must do is in tests/device/device_conformance_test.cpp.
// Every test skips when the machine has no OpenCL platform.
#include <gtest/gtest.h>

#if SVOD_HAVE_OPENCL

#include <numeric>
#include <thread>

#include <unistd.h>

#include "svod/base/error.h"
#include "svod/cache/object_cache.h"
#include "svod/compile/clang_compiler.h"
#include "svod/backends/cpu/cpu_device.h"
#include "svod/backends/opencl/opencl_device.h"
#include "svod/backends/opencl/opencl_internal.h"  // OpenClEvent::on_complete
#include "svod/guard/kernels_in_flight.h"
#include "svod/registry/registry.h"
#include "tests/cache/cache_test_support.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

class OpenCl : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      device_ = std::static_pointer_cast<OpenClDevice>(open_device("CL:0"));
    } catch (const Error& e) {
      ASSERT_EQ(e.kind(), ErrorKind::DeviceUnavailable) << e.what();
      GTEST_SKIP() << "no OpenCL device: " << e.what();
    }
  }

  OpenClDevice& cl() { return *device_; }
  Buffer upload(const std::vector<float>& values) {
    Buffer host = cpu_device()->allocate(DType::F32, values.size());
    std::copy(values.begin(), values.end(), host.span<float>().begin());
    Buffer device = cl().allocate(DType::F32, values.size());
    cl().copy(device, host);
    return device;
  }
  template <typename T = float>
  std::vector<T> download(const Buffer& device) {
    Buffer host = cpu_device()->allocate(device.dtype(), device.count());
    cl().copy(host, device);
    auto s = host.span<T>();
    return {s.begin(), s.end()};
  }

  std::shared_ptr<OpenClDevice> device_;
};

ProgramSpec opencl_spec(std::string source, std::string entry) {
  ProgramSpec spec;
  spec.language = kOpenClLanguage;
  spec.source = std::move(source);
  spec.entry = std::move(entry);
  return spec;
}

using test::kind_of;

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(i % 97) - 3.0f;
  return v;
}

TEST_F(OpenCl, DeviceDescribesItself) {
  EXPECT_EQ(cl().name(), "CL:0");
  EXPECT_FALSE(cl().details().name.empty());
  EXPECT_GE(cl().details().compute_units, 1u);
  EXPECT_GE(cl().details().base_alignment, 1u);
}

// The compiler's identity (part of cache keys) and the device's details are
// read with the same queries: they name the same platform and device.
TEST_F(OpenCl, CompilerIdentityNamesTheDevice) {
  const CompilerIdentity& identity = cl().compiler().identity();
  EXPECT_FALSE(cl().details().platform.empty());
  EXPECT_EQ(identity.path, cl().details().platform);
  EXPECT_EQ(identity.target_cpu, cl().details().name);
  EXPECT_EQ(identity.version.rfind(cl().details().version + "; driver ", 0), 0u) << identity.version;
  EXPECT_GT(identity.version.size(), cl().details().version.size() + std::string("; driver ").size());
}

TEST_F(OpenCl, WorkGroupReductionMatchesTheCpu) {
  constexpr int kN = 4096, kLocal = 128;
  std::vector<float> x(kN);
  for (int i = 0; i < kN; ++i) x[i] = static_cast<float>(i % 17);  // small integers: sums are exact
  ProgramSpec spec = opencl_spec(
      "__kernel void block_sum(__global float* partial, __global const float* x, int n) {\n"
      "  __local float tile[LOCAL];\n"
      "  int l = get_local_id(0), i = get_global_id(0);\n"
      "  tile[l] = i < n ? x[i] : 0.0f;\n"
      "  barrier(CLK_LOCAL_MEM_FENCE);\n"
      "  for (int s = LOCAL / 2; s > 0; s >>= 1) {\n"
      "    if (l < s) tile[l] += tile[l + s];\n"
      "    barrier(CLK_LOCAL_MEM_FENCE);\n"
      "  }\n"
      "  if (l == 0) partial[get_group_id(0)] = tile[0];\n"
      "}\n",
      "block_sum");
  spec.defines = {{"LOCAL", std::to_string(kLocal)}};
  spec.buffers = {{"partial", Access::Write}, {"x"}};
  spec.scalars = {{"n", ScalarType::I32}};
  spec.global_size[0] = Expr::parse("(n+127)/128");
  spec.local_size[0] = Expr::constant(kLocal);
  auto program = cl().compile(spec);
  Buffer partial = cl().allocate(DType::F32, kN / kLocal);
  const Buffer args[] = {partial, upload(x)};
  const int64_t n[] = {kN};
  program->launch(args, n);
  const auto got = download(partial);
  for (int g = 0; g < kN / kLocal; ++g) {
    const float want = std::accumulate(x.begin() + g * kLocal, x.begin() + (g + 1) * kLocal, 0.0f);
    EXPECT_EQ(got[g], want) << g;
  }
  EXPECT_EQ(std::accumulate(got.begin(), got.end(), 0.0f), std::accumulate(x.begin(), x.end(), 0.0f));
}

TEST_F(OpenCl, GlobalSizeCountsWorkGroups) {
  ProgramSpec spec = opencl_spec(
      "__kernel void ids(__global int* out) {\n"
      "  int i = get_global_id(0) + get_global_size(0) * get_global_id(1);\n"
      "  out[4 * i] = get_group_id(0); out[4 * i + 1] = get_group_id(1);\n"
      "  out[4 * i + 2] = get_local_id(0); out[4 * i + 3] = get_num_groups(0);\n"
      "}\n",
      "ids");
  spec.buffers = {{"out", Access::Write}};
  spec.global_size = {Expr::constant(3), Expr::constant(2), Expr::constant(1)};
  spec.local_size = {Expr::constant(4), Expr::constant(1), Expr::constant(1)};
  auto program = cl().compile(spec);
  Buffer out = cl().allocate(DType::I32, 4 * 12 * 2);
  const Buffer args[] = {out};
  program->launch(args, {});
  const auto got = download<int32_t>(out);
  for (int y = 0; y < 2; ++y) {
    for (int x = 0; x < 12; ++x) {
      const int i = x + 12 * y;
      EXPECT_EQ(got[4 * i], x / 4);
      EXPECT_EQ(got[4 * i + 1], y);
      EXPECT_EQ(got[4 * i + 2], x % 4);
      EXPECT_EQ(got[4 * i + 3], 3);
    }
  }
  // Explicit sizes replace the spec's.
  Buffer small = cl().allocate(DType::I32, 4 * 2);
  const Buffer small_args[] = {small};
  LaunchDims dims;
  dims.global = {1, 1, 1};
  dims.local = {2, 1, 1};
  program->launch(small_args, {}, &dims);
  const auto two = download<int32_t>(small);
  EXPECT_EQ(two[2], 0);
  EXPECT_EQ(two[6], 1);
  EXPECT_EQ(two[7], 1);
  // 2^31 work-groups in one dimension are refused before the driver sees them (PoCL divided
  // by zero from 2^32 on).
  dims.global = {1, int64_t{1} << 31, 1};
  dims.local = {1, 1, 1};
  try {
    program->launch(small_args, {}, &dims);
    FAIL() << "2^31 work-groups were launched";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Validation);
    EXPECT_NE(std::string(e.what()).find("dimension 1 has 2147483648 work-groups; OpenCL launches take at most 2^31 - 1"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(OpenCl, ScalarsAreIntAndLong) {
  ProgramSpec spec = opencl_spec(
      "__kernel void put(__global long* out, int a, long b) { out[0] = a; out[1] = b; }", "put");
  spec.buffers = {{"out", Access::Write}};
  spec.scalars = {{"a", ScalarType::I32}, {"b", ScalarType::I64}};
  auto program = cl().compile(spec);
  Buffer out = cl().allocate(DType::I64, 2);
  const Buffer args[] = {out};
  const int64_t values[] = {-7, (int64_t{1} << 40) + 5};
  program->launch(args, values);
  const auto got = download<int64_t>(out);
  EXPECT_EQ(got[0], -7);
  EXPECT_EQ(got[1], (int64_t{1} << 40) + 5);
  const int64_t too_big[] = {int64_t{1} << 33, 0};
  EXPECT_EQ(kind_of([&] { program->launch(args, too_big); }), ErrorKind::Validation);
}

TEST_F(OpenCl, BuildErrorsCarryTheBuildLog) {
  ProgramSpec spec = opencl_spec("__kernel void broken(__global float* o) { o[0] = undeclared_name; }", "broken");
  spec.name = "broken";
  spec.buffers = {{"o", Access::Write}};
  std::string message;
  EXPECT_EQ(kind_of([&] { cl().compile(spec); }, &message), ErrorKind::Compile);
  EXPECT_NE(message.find("program \"broken\" does not build for CL:0"), std::string::npos) << message;
  EXPECT_NE(message.find("undeclared_name"), std::string::npos) << message;
  // Not cached: a fixed source builds.
  spec.source = "__kernel void broken(__global float* o) { o[0] = 1.0f; }";
  EXPECT_TRUE(cl().compile(spec));
}

TEST_F(OpenCl, SpecMismatchesAreRefused) {
  ProgramSpec spec = opencl_spec("__kernel void k(__global float* o) { o[0] = 1.0f; }", "nope");
  spec.buffers = {{"o", Access::Write}};
  EXPECT_EQ(kind_of([&] { cl().compile(spec); }), ErrorKind::UndefinedSymbol);
  spec.entry = "k";
  spec.scalars = {{"n", ScalarType::I32}};
  std::string message;
  EXPECT_EQ(kind_of([&] { cl().compile(spec); }, &message), ErrorKind::Validation);
  EXPECT_NE(message.find("takes 1 arguments, the spec declares 2"), std::string::npos) << message;
  spec.scalars = {{"core_id", ScalarType::I32}};
  EXPECT_EQ(kind_of([&] { cl().compile(spec); }), ErrorKind::Validation);
  spec.scalars.clear();
  spec.language = Language::C;
  EXPECT_EQ(kind_of([&] { cl().compile(spec); }), ErrorKind::Unsupported);
}

TEST_F(OpenCl, KernelsTakeOnlyBuffersOfTheirContext) {
  ProgramSpec spec = opencl_spec("__kernel void k(__global float* o) { o[0] = 1.0f; }", "k");
  spec.buffers = {{"o", Access::Write}};
  auto program = cl().compile(spec);
  const Buffer host[] = {cpu_device()->allocate(DType::F32, 1)};
  std::string message;
  EXPECT_EQ(kind_of([&] { program->launch(host, {}); }, &message), ErrorKind::Validation);
  EXPECT_NE(message.find("is on CPU"), std::string::npos) << message;
}

// A device frees its cached blocks first thing in its destructor; a device
// that never cached anything has no cache to free, so a bad
// SVOD_BLOCK_CACHE_MB is an error where the cache is used, never a throw
// out of the destructor (which would end the process).
TEST_F(OpenCl, DeviceWithoutCachedBlocksIsDestroyedWhateverTheCacheSetting) {
  const test::ScopedEnv bad_limit("SVOD_BLOCK_CACHE_MB", "-1");
  {
    OpenClDevice unused(0);
    Buffer plain = unused.allocate(DType::F32, 16);
  }
  OpenClDevice used(0);
  try {
    used.allocate_cached(DType::F32, 16);
    ADD_FAILURE() << "a negative SVOD_BLOCK_CACHE_MB was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Validation);
    EXPECT_NE(std::string(e.what()).find("SVOD_BLOCK_CACHE_MB=\"-1\""), std::string::npos) << e.what();
  }
}

// Copies both ways, within the device and at view offsets are in the
// device conformance suite; these are OpenCL's own cases.
TEST_F(OpenCl, DeviceMemoryIsNotHostVisibleAndOverlapsAreStaged) {
  const auto values = ramp(300, 2.0f);
  Buffer a = upload(values);
  EXPECT_FALSE(a.is_host());
  EXPECT_EQ(a.storage().host_data(), nullptr);
  EXPECT_EQ(kind_of([&] { a.data(); }), ErrorKind::Unsupported);
  Buffer b = cl().allocate(DType::F32, 300);
  cl().copy(b, a);

  // Views: bytes [40, 440) of b <- the first 100 elements of a.
  cl().copy(b.view(10, 100), a.view(0, 100));
  auto got = download(b);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(got[10 + i], values[i]);
  EXPECT_EQ(got[0], values[0]);
  EXPECT_EQ(got[110], values[110]);

  // Overlapping ranges of one storage are staged, like memmove.
  cl().copy(a.view(1, 200), a.view(0, 200));
  got = download(a);
  for (int i = 0; i < 200; ++i) ASSERT_EQ(got[1 + i], values[i]);

  // A view of device memory read back into part of a host buffer.
  Buffer host = cpu_device()->allocate(DType::F32, 10);
  cl().copy(host.view(5, 5), b.view(20, 5));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(host.span<float>()[5 + i], download(b)[20 + i]);

  EXPECT_EQ(kind_of([&] { cl().copy(b, a.view(0, 10)); }), ErrorKind::Validation);
}

TEST_F(OpenCl, ViewsAtAlignedOffsetsAreKernelArguments) {
  const size_t align = cl().details().base_alignment;
  if (align % sizeof(float) != 0) GTEST_SKIP() << "alignment " << align;
  const size_t offset = align / sizeof(float);  // first aligned element after 0
  ProgramSpec spec = opencl_spec("__kernel void one(__global float* o) { o[get_global_id(0)] = 1.0f; }", "one");
  spec.buffers = {{"o", Access::Write}};
  spec.global_size[0] = Expr::constant(4);
  auto program = cl().compile(spec);
  Buffer b = cl().allocate(DType::F32, offset + 8);
  const Buffer args[] = {b.view(offset, 4)};
  program->launch(args, {});
  const auto got = download(b);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], i >= offset && i < offset + 4 ? 1.0f : 0.0f) << i;
  if (align > sizeof(float)) {
    const Buffer misaligned[] = {b.view(1, 4)};
    EXPECT_EQ(kind_of([&] { program->launch(misaligned, {}); }), ErrorKind::Unsupported);
  }
}

TEST_F(OpenCl, EventsTimeLaunchesAndOrderWork) {
  ProgramSpec spec = opencl_spec("__kernel void inc(__global int* o) { o[get_global_id(0)] += 1; }", "inc");
  spec.buffers = {{"o", Access::ReadWrite}};
  spec.global_size[0] = Expr::constant(256);
  auto program = cl().compile(spec);
  Buffer counter = cl().allocate(DType::I32, 256);
  const Buffer args[] = {counter};
  const auto took = program->time_launch({args});
  EXPECT_GE(took.count(), 0);
  // A chain of launches, each waiting on the previous event; the in-order
  // queue would order them anyway, the wait lists must be accepted.
  EventPtr last;
  for (int i = 0; i < 10; ++i) {
    const EventPtr waits[] = {last};
    last = cl().queue().launch(*program, {args}, waits);
  }
  std::atomic<bool> called{false};
  const auto& event = dynamic_cast<const OpenClEvent&>(*last);
  event.on_complete([&](bool ok) { called = ok; });
  last->wait();
  cl().synchronize();
  EXPECT_EQ(download<int32_t>(counter), std::vector<int32_t>(256, 11));
  for (int i = 0; i < 1000 && !called; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(called.load());
}

// On a device that runs kernels on host threads (PoCL) each launch is noted
// for fault reports (kernels_in_flight.h) until it finished: waited for, or
// released unwaited and then finished. None stays noted.
TEST_F(OpenCl, KernelsAreNotedInFlightUntilTheyFinish) {
  if (cl().details().type != "CPU") GTEST_SKIP() << "kernels run on the device, not on host threads";
  ProgramSpec spec = opencl_spec("__kernel void inc(__global int* o) { o[get_global_id(0)] += 1; }", "inc");
  spec.buffers = {{"o", Access::ReadWrite}};
  spec.global_size[0] = Expr::constant(64);
  auto program = cl().compile(spec);
  const Buffer args[] = {cl().allocate(DType::I32, 64)};
  EXPECT_EQ(for_each_kernel_in_flight(nullptr, nullptr), 0u);
  program->launch(args, {});
  EXPECT_EQ(for_each_kernel_in_flight(nullptr, nullptr), 0u);
  for (int i = 0; i < 300; ++i) cl().queue().launch(*program, {args});  // more than the table holds, none waited
  cl().synchronize();
  for (int i = 0; i < 1000 && for_each_kernel_in_flight(nullptr, nullptr) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the last ones are forgotten by PoCL's callbacks
  EXPECT_EQ(for_each_kernel_in_flight(nullptr, nullptr), 0u);
  EXPECT_EQ(download<int32_t>(args[0]), std::vector<int32_t>(64, 301));
}

TEST_F(OpenCl, OneProgramLaunchedFromManyThreads) {
  ProgramSpec spec = opencl_spec(
      "__kernel void fill(__global int* o, int v) { o[get_global_id(0)] = v; }", "fill");
  spec.buffers = {{"o", Access::Write}};
  spec.scalars = {{"v", ScalarType::I32}};
  spec.global_size[0] = Expr::constant(64);
  auto program = cl().compile(spec);
  constexpr int kThreads = 4;
  std::vector<Buffer> outs;
  for (int t = 0; t < kThreads; ++t) outs.push_back(cl().allocate(DType::I32, 64));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        const Buffer args[] = {outs[t]};
        const int64_t v[] = {t * 100 + round};
        program->launch(args, v);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(download<int32_t>(outs[t]), std::vector<int32_t>(64, t * 100 + 19));
}

TEST_F(OpenCl, ProgramsAreCachedPerSpec) {
  ProgramSpec spec = opencl_spec("__kernel void k(__global float* o) { o[0] = VALUE; }", "k");
  spec.buffers = {{"o", Access::Write}};
  spec.defines = {{"VALUE", "2.5f"}};
  auto first = cl().compile(spec);
  EXPECT_EQ(cl().compile(spec).get(), first.get());
  Buffer out = cl().allocate(DType::F32, 1);
  const Buffer args[] = {out};
  first->launch(args, {});
  EXPECT_EQ(download(out)[0], 2.5f);
  spec.defines = {{"VALUE", "bad value"}};
  EXPECT_EQ(kind_of([&] { cl().compile(spec); }), ErrorKind::Validation);
}

// Programs go through the compiler path: the first compile builds from
// source and stores the device binary; another device object (a fresh kernel
// cache scope) loads that binary from disk without building from source, and
// bytes the device refuses are a Load error (which the cache path answers by
// compiling afresh).
TEST_F(OpenCl, BinariesGoThroughTheObjectCache) {
  test::TempDir dir;
  test::ScopedObjectCache scoped(test::object_cache_in(dir.path()));
  ProgramSpec spec = opencl_spec(
      "__kernel void twice(__global float* o, __global const float* a) { int i = get_global_id(0); o[i] = 2 * a[i]; }",
      "twice");
  spec.buffers = {{"o", Access::Write}, {"a"}};
  spec.global_size[0] = Expr::constant(4);
  spec.local_size[0] = Expr::constant(8);
  spec.defines = {{"BINARY_CACHE_TEST", std::to_string(::getpid())}};  // unique per process: a cold entry
  cl().compile(spec);
  ObjectCacheStats stats = object_cache()->stats();
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.writes, 1u);
  EXPECT_EQ(cl().compiler().identity().name, "opencl");

  OpenClDevice second(cl().index());
  auto program = second.compile(spec);
  stats = object_cache()->stats();
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.writes, 1u);  // loaded, not rebuilt and stored again
  std::vector<float> values(32);
  std::iota(values.begin(), values.end(), 1.0f);
  Buffer a = upload(values);
  Buffer o = cl().allocate(DType::F32, 32);
  const Buffer args[] = {o, a};
  program->launch(args, {});
  EXPECT_EQ(download(o)[31], 64.0f);

  Artifact junk{kOpenClBinary, std::vector<std::byte>(64, std::byte{7})};
  EXPECT_EQ(kind_of([&] { second.load(spec, junk); }), ErrorKind::Load);
  EXPECT_EQ(kind_of([&] { second.load(spec, Artifact{ArtifactKind::ElfObject, {}}); }), ErrorKind::Load);
}

}  // namespace
}  // namespace svod

#else

TEST(OpenCl, NotBuilt) { GTEST_SKIP() << "svod was built without OpenCL headers"; }

#endif
