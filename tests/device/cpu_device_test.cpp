// The CPU path end to end: C and LLVM IR compiled by real clang, loaded by
// svod's ELF loader, launched through Program::launch.
#include "svod/device/cpu/cpu_device.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <numeric>
#include <set>
#include <thread>

#include "svod/base/error.h"
#include "svod/base/thread_pool.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using test::c_kernel;

class CpuDeviceTest : public ::testing::Test {
 protected:
  std::shared_ptr<CpuDevice> cpu = create_cpu_device();

  Buffer floats(std::vector<float> values) {
    Buffer b = cpu->allocate(DType::F32, values.size());
    std::copy(values.begin(), values.end(), b.span<float>().begin());
    return b;
  }

  template <typename Fn>
  Error expect_error(Fn&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return e;
    }
    ADD_FAILURE() << "expected an svod::Error";
    return Error(ErrorKind::Internal, "no error");
  }
};

TEST_F(CpuDeviceTest, Float4VectorMathWithRestrictPointers) {
  auto p = cpu->compile(c_kernel("axpy4",
                                 "typedef float float4 __attribute__((ext_vector_type(4)));\n"
                                 "void axpy4(float4* restrict y, const float4* restrict x, int n) {\n"
                                 "  for (int i = 0; i < n; i++) y[i] = y[i] * 2.0f + x[i].wzyx;\n}\n",
                                 {{"y", Access::ReadWrite}, {"x"}}, {{"n"}}));
  Buffer y = floats({1, 2, 3, 4, 5, 6, 7, 8}), x = floats({10, 20, 30, 40, 50, 60, 70, 80});
  Buffer bufs[] = {y, x};
  int64_t n[] = {2};
  p->launch(bufs, n);
  std::vector<float> want = {42, 34, 26, 18, 90, 82, 74, 66};
  EXPECT_EQ(std::vector<float>(y.span<float>().begin(), y.span<float>().end()), want);
}

TEST_F(CpuDeviceTest, LibmCallsResolveAndCompute) {
  auto p = cpu->compile(c_kernel("mathk",
                                 "#include <math.h>\n"
                                 "void mathk(float* restrict o, const float* restrict x) {\n"
                                 "  o[0] = expf(x[0]); o[1] = sinf(x[1]); o[2] = sqrtf(x[2]); o[3] = powf(x[3], 1.5f);\n}\n",
                                 {{"o", Access::Write}, {"x"}}));
  Buffer o = cpu->allocate(DType::F32, 4), x = floats({0.5f, 1.25f, 2.0f, 3.0f});
  Buffer bufs[] = {o, x};
  p->launch(bufs, {});
  auto r = o.span<float>();
  EXPECT_FLOAT_EQ(r[0], std::exp(0.5f));
  EXPECT_FLOAT_EQ(r[1], std::sin(1.25f));
  EXPECT_FLOAT_EQ(r[2], std::sqrt(2.0f));
  EXPECT_FLOAT_EQ(r[3], std::pow(3.0f, 1.5f));
}

TEST_F(CpuDeviceTest, StaticLookupTableAndJumpTableSwitch) {
  auto p = cpu->compile(c_kernel("lut",
                                 "static const int table[8] = {3, 1, 4, 1, 5, 9, 2, 6};\n"
                                 "void lut(int* restrict o, int n) {\n"
                                 "  for (int i = 0; i < n; i++) {\n"
                                 "    int v;\n"
                                 "    switch (i % 9) {\n"
                                 "      case 0: v = 11; break; case 1: v = 22; break; case 2: v = 33; break;\n"
                                 "      case 3: v = 44; break; case 4: v = 55; break; case 5: v = 66; break;\n"
                                 "      case 6: v = 77; break; case 7: v = 88; break; default: v = 99;\n"
                                 "    }\n"
                                 "    o[i] = v * 100 + table[i % 8];\n"
                                 "  }\n}\n",
                                 {{"o", Access::Write}}, {{"n"}}));
  Buffer o = cpu->allocate(DType::I32, 40);
  Buffer bufs[] = {o};
  int64_t n[] = {40};
  p->launch(bufs, n);
  const int table[8] = {3, 1, 4, 1, 5, 9, 2, 6};
  for (int i = 0; i < 40; ++i) EXPECT_EQ(o.span<int32_t>()[i], (i % 9 + 1) * 11 * 100 + table[i % 8]) << i;
}

TEST_F(CpuDeviceTest, StaticMutableStateAndHelperFunction) {
  auto p = cpu->compile(c_kernel("count",
                                 "static int calls;\nstatic int history[4] = {7, 7, 7, 7};\n"
                                 "int helper_square(int v) { return v * v; }\n"
                                 "void count(int* restrict o) {\n"
                                 "  history[calls % 4] = helper_square(calls);\n"
                                 "  calls++;\n  o[0] = calls;\n"
                                 "  for (int i = 0; i < 4; i++) o[1 + i] = history[i];\n}\n",
                                 {{"o", Access::Write}}));
  Buffer o = cpu->allocate(DType::I32, 5);
  Buffer bufs[] = {o};
  for (int i = 0; i < 3; ++i) p->launch(bufs, {});
  auto r = o.span<int32_t>();
  EXPECT_EQ(r[0], 3);
  EXPECT_EQ(r[1], 0);
  EXPECT_EQ(r[2], 1);
  EXPECT_EQ(r[3], 4);
  EXPECT_EQ(r[4], 7);
}

TEST_F(CpuDeviceTest, SixtyFourBitScalarsAboveTwoToThe31) {
  auto p = cpu->compile(c_kernel("wide",
                                 "void wide(long long* restrict o, long long big, int small, long long neg) {\n"
                                 "  o[0] = big; o[1] = small; o[2] = neg; o[3] = big / 3;\n}\n",
                                 {{"o", Access::Write}},
                                 {{"big", ScalarType::I64}, {"small", ScalarType::I32}, {"neg", ScalarType::I64}}));
  Buffer o = cpu->allocate(DType::I64, 4);
  Buffer bufs[] = {o};
  const int64_t big = (int64_t{1} << 40) + 12345;
  int64_t s[] = {big, -7, -(int64_t{1} << 35)};
  p->launch(bufs, s);
  auto r = o.span<int64_t>();
  EXPECT_EQ(r[0], big);
  EXPECT_EQ(r[1], -7);
  EXPECT_EQ(r[2], -(int64_t{1} << 35));
  EXPECT_EQ(r[3], big / 3);
}

TEST_F(CpuDeviceTest, Int128DivisionThroughLibgcc) {
  auto p = cpu->compile(c_kernel("div128",
                                 "void div128(unsigned long long* restrict o, const unsigned long long* restrict a) {\n"
                                 "  unsigned __int128 n = ((unsigned __int128)a[0] << 64) | a[1];\n"
                                 "  unsigned __int128 d = ((unsigned __int128)a[2] << 64) | a[3];\n"
                                 "  unsigned __int128 q = n / d, m = n % d;\n"
                                 "  o[0] = (unsigned long long)(q >> 64); o[1] = (unsigned long long)q;\n"
                                 "  o[2] = (unsigned long long)(m >> 64); o[3] = (unsigned long long)m;\n}\n",
                                 {{"o", Access::Write}, {"a"}}));
  Buffer o = cpu->allocate(DType::U64, 4), a = cpu->allocate(DType::U64, 4);
  auto in = a.span<uint64_t>();
  in[0] = 0x0123456789abcdefull, in[1] = 0xfedcba9876543210ull, in[2] = 3, in[3] = 0x1111111111111111ull;
  Buffer bufs[] = {o, a};
  p->launch(bufs, {});
  unsigned __int128 n = (static_cast<unsigned __int128>(in[0]) << 64) | in[1];
  unsigned __int128 d = (static_cast<unsigned __int128>(in[2]) << 64) | in[3];
  unsigned __int128 q = n / d, m = n % d;
  auto r = o.span<uint64_t>();
  EXPECT_EQ(r[0], static_cast<uint64_t>(q >> 64));
  EXPECT_EQ(r[1], static_cast<uint64_t>(q));
  EXPECT_EQ(r[2], static_cast<uint64_t>(m >> 64));
  EXPECT_EQ(r[3], static_cast<uint64_t>(m));
}

TEST_F(CpuDeviceTest, Float16Arithmetic) {
  auto p = cpu->compile(c_kernel("half",
                                 "void half(_Float16* restrict o, const _Float16* restrict a, const float* restrict f) {\n"
                                 "  o[0] = a[0] + a[1]; o[1] = a[0] * a[1]; o[2] = (_Float16)f[0];\n}\n",
                                 {{"o", Access::Write}, {"a"}, {"f"}}));
  Buffer o = cpu->allocate(DType::F16, 3), a = cpu->allocate(DType::F16, 2), f = floats({65504.0f * 4});
  a.span<uint16_t>()[0] = float_to_f16(1.5f);
  a.span<uint16_t>()[1] = float_to_f16(2.25f);
  Buffer bufs[] = {o, a, f};
  p->launch(bufs, {});
  EXPECT_EQ(f16_to_float(o.span<uint16_t>()[0]), 3.75f);
  EXPECT_EQ(f16_to_float(o.span<uint16_t>()[1]), 3.375f);
  EXPECT_TRUE(std::isinf(f16_to_float(o.span<uint16_t>()[2])));
}

TEST_F(CpuDeviceTest, LlvmIrKernel) {
  ProgramSpec spec = c_kernel("scale",
                              "define void @scale(ptr noalias %o, ptr noalias %x, i32 %k) {\n"
                              "  %v = load float, ptr %x\n  %kf = sitofp i32 %k to float\n"
                              "  %r = fmul float %v, %kf\n  store float %r, ptr %o\n  ret void\n}\n",
                              {{"o", Access::Write}, {"x"}}, {{"k"}});
  spec.language = Language::LlvmIr;
  auto p = cpu->compile(spec);
  Buffer o = cpu->allocate(DType::F32, 1), x = floats({2.5f});
  Buffer bufs[] = {o, x};
  int64_t k[] = {-4};
  p->launch(bufs, k);
  EXPECT_EQ(o.span<float>()[0], -10.0f);
}

TEST_F(CpuDeviceTest, MillionElementAddMatchesReference) {
  const int n = 1 << 20;
  ProgramSpec spec = c_kernel("add",
                              "void add(float* restrict o, const float* restrict a, const float* restrict b, int n) {\n"
                              "  for (int i = 0; i < n; i++) o[i] = a[i] + b[i];\n}\n",
                              {{"o", Access::Write, DType::F32, Expr::parse("n")},
                               {"a", Access::Read, DType::F32, Expr::parse("n")},
                               {"b", Access::Read, DType::F32, Expr::parse("n")}},
                              {{"n", ScalarType::I32, 0, std::nullopt}});
  auto p = cpu->compile(spec);
  Buffer o = cpu->allocate(DType::F32, n), a = cpu->allocate(DType::F32, n), b = cpu->allocate(DType::F32, n);
  for (int i = 0; i < n; ++i) a.span<float>()[i] = std::sin(float(i)), b.span<float>()[i] = float(i) * 0.5f;
  Buffer bufs[] = {o, a, b};
  int64_t s[] = {n};
  p->launch(bufs, s);
  for (int i = 0; i < n; ++i) ASSERT_EQ(o.span<float>()[i], a.span<float>()[i] + b.span<float>()[i]) << i;
}

TEST_F(CpuDeviceTest, CoreIdSlicesEachRunOnce) {
  const int slices = 64;
  ProgramSpec spec = c_kernel("slices", "void slices(int* restrict hits, int scale, int core_id) { hits[core_id] += scale + core_id; }",
                              {{"hits", Access::ReadWrite}}, {{"scale"}, {"core_id"}});
  spec.global_size[0] = Expr::constant(slices);
  auto p = cpu->compile(spec);
  Buffer hits = cpu->allocate(DType::I32, slices);
  Buffer bufs[] = {hits};
  int64_t s[] = {1000};
  p->launch(bufs, s);
  for (int i = 0; i < slices; ++i) EXPECT_EQ(hits.span<int32_t>()[i], 1000 + i);
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

TEST_F(CpuDeviceTest, MissingEntryNamesTheSymbol) {
  Error e = expect_error([&] { cpu->compile(c_kernel("not_there", "void other(int* o) { o[0] = 1; }", {{"o"}})); });
  EXPECT_EQ(e.kind(), ErrorKind::UndefinedSymbol);
  EXPECT_NE(std::string(e.what()).find("not_there"), std::string::npos) << e.what();
}

TEST_F(CpuDeviceTest, UndefinedExternalSymbolIsReported) {
  Error e = expect_error([&] {
    cpu->compile(c_kernel("k", "void svod_no_such_function(void);\nvoid k(int* o) { svod_no_such_function(); }", {{"o"}}));
  });
  EXPECT_EQ(e.kind(), ErrorKind::UndefinedSymbol);
  EXPECT_NE(std::string(e.what()).find("svod_no_such_function"), std::string::npos) << e.what();
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

TEST_F(CpuDeviceTest, CopyChecksSizes) {
  Buffer a = floats({1, 2, 3}), b = cpu->allocate(DType::F32, 3), c = cpu->allocate(DType::F32, 4);
  cpu->copy(b, a);
  EXPECT_EQ(b.span<float>()[2], 3.0f);
  EXPECT_EQ(expect_error([&] { cpu->copy(c, a); }).kind(), ErrorKind::Validation);
}

}  // namespace
}  // namespace svod
