// Every foundation kernel (tests/cpu/cpu_device_test.cpp) on each CPU
// compiler — clang process, in-process LLVM, dlopen — with the same expected
// results, C and LLVM IR alike; plus compile errors and identities per compiler.
#include <gtest/gtest.h>

#include <cmath>

#include "svod/base/error.h"
#include "svod/backends/cpu/cpu_device.h"
#include "tests/support/cpu_compilers_built.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using test::c_kernel;

class CpuCompilerKernels : public ::testing::TestWithParam<CpuCompiler> {
 protected:
  std::shared_ptr<CpuDevice> cpu = cpu_device(GetParam());

  Buffer floats(const std::vector<float>& values) {
    Buffer b = cpu->allocate(DType::F32, values.size());
    std::copy(values.begin(), values.end(), b.span<float>().begin());
    return b;
  }

  Error compile_error(const ProgramSpec& spec) {
    try {
      cpu->compile(spec);
    } catch (const Error& e) {
      return e;
    }
    ADD_FAILURE() << "expected " << spec.display_name() << " not to compile";
    return Error(ErrorKind::Internal, "compiled");
  }
};

TEST_P(CpuCompilerKernels, IdentityNamesTheCompiler) {
  const CompilerIdentity& id = cpu->compiler().identity();
  EXPECT_EQ(id.name, to_string(GetParam()));
  EXPECT_FALSE(id.target_cpu.empty());
  EXPECT_FALSE(id.target_features.empty());
  for (CpuCompiler other : test::cpu_compilers_built()) {
    if (other == GetParam()) continue;
    EXPECT_NE(cpu_device(other)->compiler().identity().hash(), id.hash()) << to_string(other);
  }
}

// What the compiler says about a source it compiles comes back with the
// object, naming the source as the spec does (`svod compile` prints it); a
// clean source says nothing.
TEST_P(CpuCompilerKernels, WarningsComeBackWithTheObject) {
  ProgramSpec spec = c_kernel("shifty", "void shifty(int* o) { o[0] = 1 << 40; }\n", {{"o", Access::Write}});
  spec.source_name = "kernels/shifty.c";
  const Artifact warned = cpu->compiler().compile(spec);
  EXPECT_FALSE(warned.bytes.empty());
  EXPECT_NE(warned.diagnostics.find("kernels/shifty.c:1:"), std::string::npos) << warned.diagnostics;
  EXPECT_NE(warned.diagnostics.find("warning: shift count >= width of type"), std::string::npos)
      << warned.diagnostics;
  const Artifact clean =
      cpu->compiler().compile(c_kernel("quiet", "void quiet(int* o) { o[0] = 1; }\n", {{"o", Access::Write}}));
  EXPECT_EQ(clean.diagnostics, "");
}

TEST_P(CpuCompilerKernels, Float4VectorMath) {
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

TEST_P(CpuCompilerKernels, LibmThroughMathHeader) {
  auto p = cpu->compile(c_kernel("mathk",
                                 "#include <math.h>\n#include <stdint.h>\n"
                                 "void mathk(float* restrict o, const float* restrict x) {\n"
                                 "  int32_t k = 3;\n"
                                 "  o[0] = expf(x[0]); o[1] = sinf(x[1]); o[2] = sqrtf(x[2]); o[3] = powf(x[3], 1.5f) * k;\n}\n",
                                 {{"o", Access::Write}, {"x"}}));
  Buffer o = cpu->allocate(DType::F32, 4), x = floats({0.5f, 1.25f, 2.0f, 3.0f});
  Buffer bufs[] = {o, x};
  p->launch(bufs, {});
  auto r = o.span<float>();
  EXPECT_FLOAT_EQ(r[0], std::exp(0.5f));
  EXPECT_FLOAT_EQ(r[1], std::sin(1.25f));
  EXPECT_FLOAT_EQ(r[2], std::sqrt(2.0f));
  EXPECT_FLOAT_EQ(r[3], std::pow(3.0f, 1.5f) * 3);
}

TEST_P(CpuCompilerKernels, LookupTableAndJumpTableSwitch) {
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

TEST_P(CpuCompilerKernels, StaticMutableStateAndHelperFunction) {
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
  EXPECT_EQ(std::vector<int32_t>(r.begin(), r.end()), (std::vector<int32_t>{3, 0, 1, 4, 7}));
}

TEST_P(CpuCompilerKernels, SixtyFourBitScalars) {
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
  EXPECT_EQ(std::vector<int64_t>(r.begin(), r.end()), (std::vector<int64_t>{big, -7, -(int64_t{1} << 35), big / 3}));
}

TEST_P(CpuCompilerKernels, Int128Division) {
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
  const unsigned __int128 n = (static_cast<unsigned __int128>(in[0]) << 64) | in[1];
  const unsigned __int128 d = (static_cast<unsigned __int128>(in[2]) << 64) | in[3];
  const unsigned __int128 q = n / d, m = n % d;
  auto r = o.span<uint64_t>();
  EXPECT_EQ(r[0], static_cast<uint64_t>(q >> 64));
  EXPECT_EQ(r[1], static_cast<uint64_t>(q));
  EXPECT_EQ(r[2], static_cast<uint64_t>(m >> 64));
  EXPECT_EQ(r[3], static_cast<uint64_t>(m));
}

TEST_P(CpuCompilerKernels, Float16Arithmetic) {
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

TEST_P(CpuCompilerKernels, LlvmIrScalarKernel) {
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

TEST_P(CpuCompilerKernels, LlvmIrLoopWithLibmCall) {
  // A loop the optimiser vectorises and an external call the loader resolves.
  ProgramSpec spec = c_kernel("ir_loop",
                              "declare float @sqrtf(float)\n"
                              "define void @ir_loop(ptr noalias %o, ptr noalias %a, i32 %n) {\n"
                              "entry:\n  %first = load float, ptr %a\n  %root = call float @sqrtf(float %first)\n"
                              "  %any = icmp sgt i32 %n, 0\n  br i1 %any, label %loop, label %done\n"
                              "loop:\n  %i = phi i32 [ 0, %entry ], [ %next, %loop ]\n"
                              "  %pa = getelementptr float, ptr %a, i32 %i\n  %v = load float, ptr %pa\n"
                              "  %w = fmul float %v, %root\n  %po = getelementptr float, ptr %o, i32 %i\n"
                              "  store float %w, ptr %po\n  %next = add i32 %i, 1\n"
                              "  %more = icmp slt i32 %next, %n\n  br i1 %more, label %loop, label %done\n"
                              "done:\n  ret void\n}\n",
                              {{"o", Access::Write}, {"a"}}, {{"n"}});
  spec.language = Language::LlvmIr;
  auto p = cpu->compile(spec);
  const int n = 1000;
  Buffer o = cpu->allocate(DType::F32, n), a = cpu->allocate(DType::F32, n);
  for (int i = 0; i < n; ++i) a.span<float>()[i] = 4.0f + float(i);
  Buffer bufs[] = {o, a};
  int64_t s[] = {n};
  p->launch(bufs, s);
  for (int i = 0; i < n; ++i) ASSERT_EQ(o.span<float>()[i], (4.0f + float(i)) * 2.0f) << i;
}

TEST_P(CpuCompilerKernels, MillionElementAdd) {
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

TEST_P(CpuCompilerKernels, CoreIdSlicesEachRunOnce) {
  const int slices = 64;
  ProgramSpec spec = c_kernel("slices",
                              "void slices(int* restrict hits, int scale, int core_id) { hits[core_id] += scale + core_id; }",
                              {{"hits", Access::ReadWrite}}, {{"scale"}, {"core_id"}});
  spec.global_size[0] = Expr::constant(slices);
  auto p = cpu->compile(spec);
  Buffer hits = cpu->allocate(DType::I32, slices);
  Buffer bufs[] = {hits};
  int64_t s[] = {1000};
  p->launch(bufs, s);
  for (int i = 0; i < slices; ++i) EXPECT_EQ(hits.span<int32_t>()[i], 1000 + i);
}

TEST_P(CpuCompilerKernels, DefinesReachTheSource) {
  ProgramSpec spec = c_kernel("defined", "void defined(int* o) { o[0] = SCALE * 2; }", {{"o", Access::Write}});
  spec.defines = {{"SCALE", "21"}};
  auto p = cpu->compile(spec);
  Buffer o = cpu->allocate(DType::I32, 1);
  Buffer bufs[] = {o};
  p->launch(bufs, {});
  EXPECT_EQ(o.span<int32_t>()[0], 42);
}

TEST_P(CpuCompilerKernels, CSyntaxErrorIsACompileErrorWithDiagnostics) {
  Error e = compile_error(c_kernel("broken", "void broken(int* o) { o[0] = undeclared_name + ; }", {{"o"}}));
  EXPECT_EQ(e.kind(), ErrorKind::Compile);
  EXPECT_NE(std::string(e.what()).find("undeclared_name"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("error"), std::string::npos) << e.what();
}

TEST_P(CpuCompilerKernels, IrParseErrorIsACompileError) {
  ProgramSpec spec = c_kernel("bad_ir", "define void @bad_ir(ptr %o) {\n  store i32 1, ptr %o\n  ret void\n", {{"o"}});
  spec.language = Language::LlvmIr;
  Error e = compile_error(spec);
  EXPECT_EQ(e.kind(), ErrorKind::Compile);
  EXPECT_NE(std::string(e.what()).find("bad_ir"), std::string::npos) << e.what();
}

TEST_P(CpuCompilerKernels, MissingEntryNamesTheSymbol) {
  Error e = compile_error(c_kernel("not_there", "void other(int* o) { o[0] = 1; }", {{"o"}}));
  EXPECT_EQ(e.kind(), ErrorKind::UndefinedSymbol);
  EXPECT_NE(std::string(e.what()).find("not_there"), std::string::npos) << e.what();
}

TEST_P(CpuCompilerKernels, UndefinedExternalSymbolIsReported) {
  Error e = compile_error(
      c_kernel("k_undef", "void svod_no_such_function(void);\nvoid k_undef(int* o) { svod_no_such_function(); }", {{"o"}}));
  EXPECT_EQ(e.kind(), ErrorKind::UndefinedSymbol);
  EXPECT_NE(std::string(e.what()).find("svod_no_such_function"), std::string::npos) << e.what();
}

INSTANTIATE_TEST_SUITE_P(AllCpuCompilers, CpuCompilerKernels, ::testing::ValuesIn(test::cpu_compilers_built()),
                         [](const ::testing::TestParamInfo<CpuCompiler>& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace svod
