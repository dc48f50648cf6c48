// The CPU device: launch checks, core_id fan-out, concurrency, buffers and
// copies. The kernels of every language feature run on each CPU compiler in
// tests/compile/cpu_compiler_kernels_test.cpp.
#include "svod/backends/cpu/cpu_device.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <numeric>
#include <set>
#include <string>
#include <thread>

#include "svod/base/error.h"
#include "svod/base/thread_pool.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using test::c_kernel;
using test::expect_error;

class CpuDeviceTest : public ::testing::Test {
 protected:
  std::shared_ptr<CpuDevice> cpu = cpu_device();

  Buffer floats(std::vector<float> values) {
    Buffer b = cpu->allocate(DType::F32, values.size());
    std::copy(values.begin(), values.end(), b.span<float>().begin());
    return b;
  }
};

// The CPU ABI through the trap trampoline: 64 words (the most), all past the
// sixth on the stack, each arriving whole and in its place.
TEST_F(CpuDeviceTest, SixtyFourArgumentsArriveInOrder) {
  std::string params = "long* restrict o, long* restrict last";
  std::string sum = "0";
  std::vector<ScalarParam> scalars;
  for (int i = 0; i < 62; ++i) {
    params += fmt::format(", long s{}", i);
    sum += fmt::format(" + s{} * {}", i, i + 1);
    scalars.push_back({fmt::format("s{}", i), ScalarType::I64, std::nullopt, std::nullopt});
  }
  const std::string source = "void k(" + params + ") { last[0] = s61; o[0] = " + sum + "; }";
  auto p = cpu->compile(
      c_kernel("k", source, {{"o", Access::Write, DType::I64}, {"last", Access::Write, DType::I64}}, scalars));
  Buffer o = cpu->allocate(DType::I64, 1), last = cpu->allocate(DType::I64, 1);
  Buffer buffers[] = {o, last};
  std::vector<int64_t> values;
  int64_t expected = 0;
  for (int i = 0; i < 62; ++i) {
    values.push_back((int64_t{1} << 40) + i * 7919);
    expected += values.back() * (i + 1);
  }
  p->launch(buffers, values);
  EXPECT_EQ(o.span<int64_t>()[0], expected);
  EXPECT_EQ(last.span<int64_t>()[0], values[61]);
}

TEST_F(CpuDeviceTest, CoreIdCountFromAnExpressionAndNestedInParallelWork) {
  ProgramSpec spec = c_kernel("fill", "void fill(int* restrict o, int n, int core_id) { o[core_id] = n - core_id; }",
                              {{"o", Access::Write, DType::I32, Expr::parse("n")}}, {{"n", ScalarType::I32, 1, 4096}, {"core_id"}});
  spec.global_size[0] = Expr::parse("n");
  auto p = cpu->compile(spec);
  // Launch from several pool tasks at once: the fan-out nests inside the outer parallel loop.
  std::vector<Buffer> outs;
  for (int t = 0; t < 8; ++t) outs.push_back(cpu->allocate(DType::I32, 100 + t));
  parallel_for(outs.size(), [&](size_t t) {
    Buffer bufs[] = {outs[t]};
    int64_t s[] = {static_cast<int64_t>(100 + t)};
    p->launch(bufs, s);
  });
  for (size_t t = 0; t < outs.size(); ++t)
    for (int i = 0; i < 100 + int(t); ++i) ASSERT_EQ(outs[t].span<int32_t>()[i], 100 + int(t) - i);
}

TEST_F(CpuDeviceTest, ParallelSlicesUseSeveralThreadsWhenThePoolHasThem) {
  if (thread_count() < 2) GTEST_SKIP() << "one thread in the pool";
  // Each slice waits (bounded) until another slice has started: only possible if they overlap.
  ProgramSpec spec = c_kernel("meet",
                              "void meet(int* restrict flag, int core_id) {\n"
                              "  __atomic_fetch_add(&flag[0], 1, __ATOMIC_SEQ_CST);\n"
                              "  for (long spin = 0; spin < 2000000000L && __atomic_load_n(&flag[0], __ATOMIC_SEQ_CST) < 2; spin++) {}\n"
                              "  if (__atomic_load_n(&flag[0], __ATOMIC_SEQ_CST) >= 2) __atomic_fetch_add(&flag[1], 1, __ATOMIC_SEQ_CST);\n}\n",
                              {{"flag", Access::ReadWrite}}, {{"core_id"}});
  spec.global_size[0] = Expr::constant(2);
  auto p = cpu->compile(spec);
  Buffer flag = cpu->allocate(DType::I32, 2);
  Buffer bufs[] = {flag};
  p->launch(bufs, {});
  EXPECT_EQ(flag.span<int32_t>()[0], 2);
  EXPECT_EQ(flag.span<int32_t>()[1], 2);
}

TEST_F(CpuDeviceTest, ProgramsRunFromManyThreadsAtOnce) {
  auto p = cpu->compile(c_kernel("inc", "void inc(int* restrict o, int n) { for (int i = 0; i < n; i++) o[i] += 1; }",
                                 {{"o", Access::ReadWrite}}, {{"n"}}));
  std::vector<std::thread> threads;
  std::vector<Buffer> outs;
  for (int t = 0; t < 4; ++t) outs.push_back(cpu->allocate(DType::I32, 256));
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      Buffer bufs[] = {outs[t]};
      int64_t n[] = {256};
      for (int r = 0; r < 100; ++r) p->launch(bufs, n);
    });
  for (auto& th : threads) th.join();
  for (auto& o : outs) EXPECT_EQ(o.span<int32_t>()[255], 100);
}

TEST_F(CpuDeviceTest, LaunchErrorsComeBeforeAnythingRuns) {
  ProgramSpec spec = c_kernel("guarded", "void guarded(int* restrict o, int n) { for (int i = 0; i < n; i++) o[i] = 1; }",
                              {{"o", Access::Write, DType::I32, Expr::parse("n")}}, {{"n", ScalarType::I32, 0, 100}});
  auto p = cpu->compile(spec);
  Buffer small = cpu->allocate(DType::I32, 10);
  Buffer bufs[] = {small};

  int64_t too_many[] = {20};
  Error e = expect_error([&] { p->launch(bufs, too_many); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(std::string(e.what()).find("holds 40 bytes but the launch needs 80"), std::string::npos) << e.what();

  int64_t out_of_bounds[] = {101};
  e = expect_error([&] { p->launch(bufs, out_of_bounds); });
  EXPECT_NE(std::string(e.what()).find("n = 101 is outside its bounds [0, 100]"), std::string::npos) << e.what();

  int64_t ok[] = {5};
  e = expect_error([&] { p->launch({}, ok); });
  EXPECT_NE(std::string(e.what()).find("takes 1 buffers, got 0"), std::string::npos) << e.what();
  e = expect_error([&] { p->launch(bufs, {}); });
  EXPECT_NE(std::string(e.what()).find("takes 1 scalars"), std::string::npos) << e.what();
  Buffer none[] = {Buffer()};
  EXPECT_EQ(expect_error([&] { p->launch(none, ok); }).kind(), ErrorKind::Validation);
  for (int32_t v : small.span<int32_t>()) EXPECT_EQ(v, 0);  // nothing ran

  p->launch(bufs, ok);
  EXPECT_EQ(small.span<int32_t>()[4], 1);
  EXPECT_EQ(small.span<int32_t>()[5], 0);
}

TEST_F(CpuDeviceTest, ScalarsOutsideTheirTypeRangeAreRefused) {
  auto p = cpu->compile(c_kernel("s32", "void s32(int* restrict o, int v) { o[0] = v; }", {{"o", Access::Write}}, {{"v"}}));
  Buffer o = cpu->allocate(DType::I32, 1);
  Buffer bufs[] = {o};
  int64_t big[] = {int64_t{1} << 31};
  EXPECT_EQ(expect_error([&] { p->launch(bufs, big); }).kind(), ErrorKind::Validation);
  int64_t lowest[] = {INT32_MIN};
  p->launch(bufs, lowest);
  EXPECT_EQ(o.span<int32_t>()[0], INT32_MIN);
}

TEST_F(CpuDeviceTest, ParallelLaunchWithoutCoreIdIsAnError) {
  ProgramSpec spec = c_kernel("flat", "void flat(int* o) { o[0] = 1; }", {{"o", Access::Write}});
  spec.global_size[0] = Expr::constant(4);
  auto p = cpu->compile(spec);
  Buffer o = cpu->allocate(DType::I32, 1);
  Buffer bufs[] = {o};
  Error e = expect_error([&] { p->launch(bufs, {}); });
  EXPECT_NE(std::string(e.what()).find("core_id"), std::string::npos) << e.what();
  EXPECT_EQ(o.span<int32_t>()[0], 0);
}

TEST_F(CpuDeviceTest, MinCountWhoseBytesOverflowIsRefusedBeforeTheKernelWrites) {
  // o[n - 1] with n = 2^62: 2^64 bytes of f32, which wrapped to 0 and let the
  // kernel write just before the array.
  ProgramSpec spec = c_kernel("last", "void last(float* o, long long n) { o[n - 1] = 7.0f; }",
                              {{"o", Access::Write, DType::F32, Expr::parse("n")}}, {{"n", ScalarType::I64}});
  spec.name = "last";
  auto p = cpu->compile(spec);
  Buffer all = cpu->allocate(DType::F32, 8);
  Buffer bufs[] = {all.view(4, 4)};  // the floats before it belong to `all`
  int64_t huge[] = {int64_t{1} << 62};
  Error e = expect_error([&] { p->launch(bufs, huge); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(std::string(e.what()).find("program \"last\": buffer 0 (\"o\") needs 2^62 f32 elements (min_count \"n\"): "
                                       "more bytes than fit in 64 bits"),
            std::string::npos)
      << e.what();
  for (float v : all.span<float>()) EXPECT_EQ(v, 0.0f);  // nothing written
  int64_t four[] = {4};
  p->launch(bufs, four);
  EXPECT_EQ(all.span<float>()[7], 7.0f);
}

TEST_F(CpuDeviceTest, BuffersOfAnotherDtypeThanDeclaredAreRefused) {
  auto p = cpu->compile(c_kernel("f", "void f(float* o, unsigned short* h) { o[0] = 1.0f; h[0] = 1; }",
                                 {{"o", Access::Write, DType::F32}, {"h", Access::Write, DType::BF16}}));
  Buffer ints = cpu->allocate(DType::I32, 1), floats_ = cpu->allocate(DType::F32, 1);
  Buffer bf16 = cpu->allocate(DType::BF16, 1), u16 = cpu->allocate(DType::U16, 1), f16 = cpu->allocate(DType::F16, 1);
  Buffer wrong[] = {ints, bf16};
  Error e = expect_error([&] { p->launch(wrong, {}); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(std::string(e.what()).find("program \"f\": buffer 0 (\"o\"): dtype i32 does not match the declared f32"),
            std::string::npos)
      << e.what();
  Buffer wrong16[] = {floats_, f16};
  EXPECT_EQ(expect_error([&] { p->launch(wrong16, {}); }).kind(), ErrorKind::Validation);
  EXPECT_EQ(ints.span<int32_t>()[0], 0);
  EXPECT_EQ(floats_.span<float>()[0], 0.0f);
  Buffer bits[] = {floats_, u16};  // bf16 takes its u16 bit patterns
  p->launch(bits, {});
  EXPECT_EQ(u16.span<uint16_t>()[0], 1);
  Buffer right[] = {floats_, bf16};
  p->launch(right, {});
  EXPECT_EQ(floats_.span<float>()[0], 1.0f);
}

TEST_F(CpuDeviceTest, SliceCountsAreCheckedAgainstCoreIdBoundsAndType) {
  ProgramSpec spec = c_kernel("mark", "void mark(int* restrict o, int n, int core_id) { o[core_id] = 1; }",
                              {{"o", Access::Write, DType::I32}}, {{"n", ScalarType::I64}, {"core_id", ScalarType::I32, 0, 3}});
  spec.global_size[0] = Expr::parse("n");
  auto p = cpu->compile(spec);
  Buffer o = cpu->allocate(DType::I32, 4);
  Buffer bufs[] = {o};
  int64_t five[] = {5};
  Error e = expect_error([&] { p->launch(bufs, five); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(std::string(e.what()).find("5 core_id slices would pass core_id = 4, outside its bounds [0, 3]"),
            std::string::npos)
      << e.what();
  // Sizes a plan passes are checked the same way.
  LaunchDims dims;
  dims.global[0] = 5;
  EXPECT_EQ(expect_error([&] { p->launch(bufs, five, &dims); }).kind(), ErrorKind::Validation);
  for (int32_t v : o.span<int32_t>()) EXPECT_EQ(v, 0);
  int64_t four[] = {4};
  p->launch(bufs, four);
  for (int32_t v : o.span<int32_t>()) EXPECT_EQ(v, 1);

  // An i32 core_id without a max: 2^31 slices would reach core_id = 2^31,
  // which wraps negative.
  spec.scalars[1].max.reset();
  auto unbounded = cpu->compile(spec);
  int64_t past[] = {(int64_t{1} << 31) + 1};
  e = expect_error([&] { unbounded->launch(bufs, past); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(std::string(e.what()).find("would pass core_id = 2147483648, outside its bounds [0, 2147483647]"),
            std::string::npos)
      << e.what();
}

TEST_F(CpuDeviceTest, BuffersAreAlignedViewsShareStorage) {
  Buffer base = cpu->allocate(DType::F32, 100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(base.data()) % 64, 0u);
  Buffer tail = base.view(60, 40);
  EXPECT_EQ(tail.storage_id(), base.storage_id());
  EXPECT_EQ(tail.byte_offset(), 240u);
  EXPECT_TRUE(tail.overlaps(base));
  EXPECT_FALSE(tail.overlaps(base.view(0, 60)));
  EXPECT_NE(cpu->allocate(DType::F32, 1).storage_id(), base.storage_id());
  EXPECT_EQ(expect_error([&] { base.view(90, 11); }).kind(), ErrorKind::Validation);
  auto p = cpu->compile(c_kernel("one", "void one(float* o) { o[0] = 1.0f; }", {{"o", Access::Write}}));
  Buffer bufs[] = {tail};
  p->launch(bufs, {});
  EXPECT_EQ(base.span<float>()[60], 1.0f);
  EXPECT_EQ(base.span<float>()[59], 0.0f);
}

TEST_F(CpuDeviceTest, AllocationsWhoseBytesOverflowAreRefused) {
  // 2^62 f32 elements would be 2^64 bytes, which wraps to 0.
  Error e = expect_error([&] { cpu->allocate(DType::F32, size_t{1} << 62); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(std::string(e.what()).find("4611686018427387904 f32 elements is too large: more bytes than fit in 64 bits"),
            std::string::npos)
      << e.what();
  EXPECT_EQ(checked_byte_size(DType::F64, 3), 24u);
  EXPECT_EQ(expect_error([&] { checked_byte_size(DType::U16, SIZE_MAX / 2 + 1); }).kind(), ErrorKind::Validation);
}

TEST_F(CpuDeviceTest, CopyChecksSizes) {
  Buffer a = floats({1, 2, 3}), b = cpu->allocate(DType::F32, 3), c = cpu->allocate(DType::F32, 4);
  cpu->copy(b, a);
  EXPECT_EQ(b.span<float>()[2], 3.0f);
  EXPECT_EQ(expect_error([&] { cpu->copy(c, a); }).kind(), ErrorKind::Validation);
}

}  // namespace
}  // namespace svod
