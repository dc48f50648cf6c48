// Choosing a CPU compiler, the llvm plugin loaded on demand (and only then),
// concurrent in-process compiles, and the lifetime of dlopen'ed libraries,
// compiled or prebuilt.
#include <dlfcn.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "svod/base/error.h"
#include "svod/base/subprocess.h"
#include "svod/compile/clang_compiler.h"
#include "svod/compile/cpu_recipe.h"
#include "svod/compile/llvm_plugin.h"
#include "svod/backends/cpu/cpu_device.h"
#include "tests/support/cpu_compilers_built.h"
#include "tests/cache/cache_test_support.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"
#include "tests/support/watchdog.h"

namespace svod {
namespace {

using test::c_kernel;
using test::ScopedEnv;

std::string process_maps() {
  std::ifstream in("/proc/self/maps");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

template <typename Fn>
ErrorKind expect_error_kind(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no error";
  return ErrorKind::Internal;
}

TEST(CpuCompilerSelection, NamesParseInAnyCase) {
  EXPECT_EQ(parse_cpu_compiler("clang"), CpuCompiler::Clang);
  EXPECT_EQ(parse_cpu_compiler("LLVM"), CpuCompiler::Llvm);
  EXPECT_EQ(parse_cpu_compiler("Dlopen"), CpuCompiler::Dlopen);
  for (CpuCompiler b : {CpuCompiler::Clang, CpuCompiler::Llvm, CpuCompiler::Dlopen}) EXPECT_EQ(parse_cpu_compiler(to_string(b)), b);
}

TEST(CpuCompilerSelection, UnknownNameIsAnErrorListingTheValidOnes) {
  try {
    parse_cpu_compiler("gcc");
    FAIL() << "gcc parsed";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Validation);
    EXPECT_NE(std::string(e.what()).find("\"gcc\""), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("clang, llvm or dlopen"), std::string::npos) << e.what();
  }
  ScopedEnv env("SVOD_CPU_COMPILER", "mlir");
  try {
    default_cpu_compiler();
    FAIL() << "SVOD_CPU_COMPILER=mlir accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Validation);
    EXPECT_NE(std::string(e.what()).find("SVOD_CPU_COMPILER"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("clang, llvm or dlopen"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cpu_device(), Error);
}

TEST(CpuCompilerSelection, EnvironmentPicksTheCompiler) {
  for (CpuCompiler c : test::cpu_compilers_built()) {
    ScopedEnv env("SVOD_CPU_COMPILER", std::string(to_string(c)));
    const CpuCompilerChoice choice = default_cpu_compiler();
    EXPECT_EQ(choice.compiler, c);
    EXPECT_EQ(choice.reason, "SVOD_CPU_COMPILER=" + std::string(to_string(c)));
    EXPECT_EQ(cpu_device(), cpu_device(c));
    EXPECT_EQ(cpu_device()->compiler().identity().name, to_string(c));
  }
  // SVOD_CPU_BACKEND, the variable's old name, is read too.
  ScopedEnv old("SVOD_CPU_BACKEND", "clang");
  EXPECT_EQ(default_cpu_compiler().compiler, CpuCompiler::Clang);
  EXPECT_EQ(default_cpu_compiler().reason, "SVOD_CPU_BACKEND=clang");
}

TEST(CpuCompilerSelection, DefaultIsLlvmWhenItsLibraryIsThereElseClang) {
  ScopedEnv env("SVOD_CPU_COMPILER", std::nullopt);
  const LlvmPluginStatus& plugin = llvm_plugin();
  const CpuCompilerChoice choice = default_cpu_compiler();
  if (!SVOD_LLVM_PLUGIN_BUILT) {
    EXPECT_FALSE(plugin.available());
    EXPECT_EQ(choice.compiler, CpuCompiler::Clang);
    EXPECT_NE(choice.reason.find("libsvod_llvm.so"), std::string::npos) << choice.reason;
    EXPECT_EQ(expect_error_kind([] { cpu_compiler(CpuCompiler::Llvm); }), ErrorKind::DeviceUnavailable);
    return;
  }
  ASSERT_TRUE(plugin.available()) << plugin.error;  // built beside libsvod_runtime.so in this tree
  EXPECT_EQ(choice.compiler, CpuCompiler::Llvm);
  EXPECT_NE(choice.reason.find(plugin.path), std::string::npos) << choice.reason;
  EXPECT_EQ(plugin.compiler->identity().path, plugin.path);
}

TEST(CpuCompilerSelection, PluginIsLookedForBesideTheRuntimeOrWhereTheEnvironmentSays) {
  {
    ScopedEnv env("SVOD_LLVM_PLUGIN", std::nullopt);
    const auto candidates = llvm_plugin_candidates();
    ASSERT_FALSE(candidates.empty());
    EXPECT_EQ(std::filesystem::path(candidates.front()).filename(), "libsvod_llvm.so");
  }
  ScopedEnv env("SVOD_LLVM_PLUGIN", "/nowhere/libsvod_llvm.so");
  EXPECT_EQ(llvm_plugin_candidates(), std::vector<std::string>{"/nowhere/libsvod_llvm.so"});
}

// A process that only ever uses the clang compiler never maps libLLVM. Runs in
// a fresh process (the threadsafe death-test style re-executes the binary),
// since other tests in this one load the plugin.
TEST(CpuCompilerSelection, ClangOnlyProcessNeverLoadsLibLlvm) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        auto cpu = cpu_device(CpuCompiler::Clang);
        auto p = cpu->compile(c_kernel("clang_only", "void clang_only(int* o) { o[0] = 7; }", {{"o", Access::Write}}));
        Buffer o = cpu->allocate(DType::I32, 1);
        Buffer bufs[] = {o};
        p->launch(bufs, {});
        const std::string maps = process_maps();
        const bool llvm_mapped = maps.find("libLLVM") != std::string::npos ||
                                 maps.find("libclang-cpp") != std::string::npos ||
                                 maps.find("libsvod_llvm") != std::string::npos;
        std::exit(o.span<int32_t>()[0] == 7 && !llvm_mapped ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(LlvmCompiler, EightThreadsCompileAtOnce) {
  SVOD_REQUIRE_LLVM_PLUGIN();
  auto cpu = cpu_device(CpuCompiler::Llvm);
  const Compiler& compiler = cpu->compiler();
  constexpr int kThreads = 8, kPerThread = 4;
  std::atomic<int> correct{0};
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int k = 0; k < kPerThread; ++k) {
          const int value = t * 100 + k;
          // Straight to the compiler (no caches): every call really compiles,
          // C and IR interleaved.
          ProgramSpec spec;
          if (k % 2 == 0) {
            spec = c_kernel("k", "#include <math.h>\nvoid k(float* o, int n) { for (int i = 0; i < n; i++) o[i] = VALUE + sqrtf(4.0f); }",
                            {{"o", Access::Write}}, {{"n"}});
            spec.defines = {{"VALUE", std::to_string(value)}};
          } else {
            spec = c_kernel("k",
                            "define void @k(ptr %o, i32 %n) {\n  store float " + std::to_string(value + 2) +
                                ".0, ptr %o\n  ret void\n}\n",
                            {{"o", Access::Write}}, {{"n"}});
            spec.language = Language::LlvmIr;
          }
          auto p = cpu->load(spec, compiler.compile(spec));
          Buffer o = cpu->allocate(DType::F32, 1);
          Buffer bufs[] = {o};
          int64_t n[] = {1};
          p->launch(bufs, n);
          if (o.span<float>()[0] == float(value + 2)) ++correct;
        }
      } catch (const std::exception& e) {
        failures[t] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& f : failures) EXPECT_EQ(f, "");
  EXPECT_EQ(correct.load(), kThreads * kPerThread);
}

// The disk cache keys objects by their input, so the same input must give the
// same bytes whichever pooled target machine, thread or language path compiles
// it; the front end, optimisation and code generation are each timed.
TEST(LlvmCompiler, ObjectsAreByteIdenticalAcrossCompilesAndThreads) {
  SVOD_REQUIRE_LLVM_PLUGIN();
  auto cpu = cpu_device(CpuCompiler::Llvm);
  const Compiler& compiler = cpu->compiler();
  ProgramSpec c = c_kernel("dot8",
                           "void dot8(float* restrict o, const float* restrict a, int n) {\n"
                           "  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;\n"
                           "  for (int i = 0; i < n; i += 4) { s0 += a[i] * a[i]; s1 += a[i + 1] * a[i + 1];\n"
                           "    s2 += a[i + 2] * a[i + 2]; s3 += a[i + 3] * a[i + 3]; }\n"
                           "  o[0] = (s0 + s1) + (s2 + s3);\n}\n",
                           {{"o", Access::Write}, {"a"}}, {{"n"}});
  ProgramSpec ir = c_kernel("seven", "define void @seven(ptr %o) {\n  store float 7.0, ptr %o\n  ret void\n}\n",
                            {{"o", Access::Write}});
  ir.language = Language::LlvmIr;
  for (const ProgramSpec& spec : {c, ir}) {
    SCOPED_TRACE(spec.entry);
    const Artifact first = compiler.compile(spec);
    EXPECT_GT(first.phases.front_end_ms + first.phases.optimise_ms, 0.0);
    EXPECT_GT(first.phases.codegen_ms, 0.0);
    std::vector<Artifact> again(4);
    std::vector<std::thread> threads;
    for (auto& artifact : again) threads.emplace_back([&] { artifact = compiler.compile(spec); });
    for (auto& thread : threads) thread.join();
    for (const Artifact& artifact : again) EXPECT_TRUE(artifact.bytes == first.bytes);
  }
}

// The optimisation and code generation machinery is reused from compile to
// compile: an object must not depend on what was compiled before it (the
// disk cache keys objects by their input alone). One thread compiles the
// kernels there and back, so the second of each pair reuses a pipeline that
// has seen the others, with their loops, constants and globals.
// A source's preamble (its leading #include lines) is precompiled once two
// compiles begin with it, or at the first when the object cache is on
// (tests/cache/preamble_test.cpp): the objects stay the same bytes as
// without, and a header changed on disk is read again.
TEST(LlvmCompiler, PrecompiledPreamblesGiveTheSameObjectsAndFollowTheirHeaders) {
  SVOD_REQUIRE_LLVM_PLUGIN();
  // Without the object cache the first compile parses the headers itself.
  const test::ScopedObjectCache no_cache(nullptr);
  auto cpu = cpu_device(CpuCompiler::Llvm);
  const Compiler& compiler = cpu->compiler();
  const test::TempDir folder;
  const std::filesystem::path header = folder / "scale.h";
  std::ofstream(header) << "#define SCALE 2.0f\n";
  auto spec = [&](int i) {
    return c_kernel("k",
                    "#include <math.h>\n#include \"" + header.string() +
                        "\"\nvoid k(float* o) { o[0] = SCALE * sqrtf(16.0f); }\n// compile " + std::to_string(i) + "\n",
                    {{"o", Access::Write}});
  };
  auto run = [&](const ProgramSpec& s, const Artifact& artifact) {
    auto p = cpu->load(s, artifact);
    Buffer o = cpu->allocate(DType::F32, 1);
    Buffer bufs[] = {o};
    p->launch(bufs, {});
    return o.span<float>()[0];
  };
  const Artifact first = compiler.compile(spec(0));  // parsed; the second precompiles, the rest reuse
  EXPECT_EQ(run(spec(0), first), 8.0f);
  for (int i = 1; i <= 3; ++i) {
    SCOPED_TRACE(i);
    const Artifact again = compiler.compile(spec(i));
    EXPECT_EQ(again.bytes, first.bytes);
    EXPECT_EQ(run(spec(i), again), 8.0f);
  }
  std::ofstream(header) << "#define SCALE 3.00f\n";
  EXPECT_EQ(run(spec(4), compiler.compile(spec(4))), 12.0f);
  EXPECT_EQ(run(spec(5), compiler.compile(spec(5))), 12.0f);
}

TEST(LlvmCompiler, ObjectsDoNotDependOnWhatWasCompiledBefore) {
  SVOD_REQUIRE_LLVM_PLUGIN();
  auto cpu = cpu_device(CpuCompiler::Llvm);
  const Compiler& compiler = cpu->compiler();
  std::vector<ProgramSpec> specs = {
      c_kernel("axpy", "void axpy(float* restrict y, const float* restrict x, int n) {\n"
                       "  for (int i = 0; i < n; i++) y[i] = 3.0f * x[i] + y[i];\n}\n",
               {{"y", Access::ReadWrite}, {"x"}}, {{"n"}}),
      c_kernel("table", "static const int squares[8] = {0, 1, 4, 9, 16, 25, 36, 49};\n"
                        "static int calls;\n"
                        "void table(int* o, int n) { calls++; for (int i = 0; i < n; i++) o[i] = squares[i & 7] + calls; }\n",
               {{"o", Access::Write}}, {{"n"}}),
      c_kernel("sum", "double sum(const double* a, int n) { double s = 0; for (int i = 0; i < n; i++) s += a[i]; return s; }\n"
                      "void add_sum(double* o, const double* a, int n) { o[0] = sum(a, n) + 0.5; }\n",
               {{"o", Access::Write}, {"a"}}, {{"n"}}),
  };
  specs[2].entry = "add_sum";
  ProgramSpec ir = c_kernel("seven", "define void @seven(ptr %o) {\n  store float 7.0, ptr %o\n  ret void\n}\n",
                            {{"o", Access::Write}});
  ir.language = Language::LlvmIr;
  specs.push_back(ir);
  std::vector<Artifact> forward;
  for (const ProgramSpec& spec : specs) forward.push_back(compiler.compile(spec));
  for (size_t i = specs.size(); i-- > 0;) {
    SCOPED_TRACE(specs[i].entry);
    EXPECT_TRUE(compiler.compile(specs[i]).bytes == forward[i].bytes);
  }
}

// The recipe is in every CPU compiler's identity, which keys the object
// cache (ObjectCacheTest.AnObjectOfAnotherRecipeIsAMiss): the llvm compiler
// names its pipeline's level beside the flags it shares with clang.
TEST(CpuRecipe, EveryCpuCompilersIdentityNamesIt) {
  EXPECT_EQ(kDefaultCpuRecipe.clang_flags(), std::vector<std::string>{"-O3"});
  for (CpuCompiler c : test::cpu_compilers_built()) {
    SCOPED_TRACE(to_string(c));
    const std::vector<std::string>& flags = cpu_device(c)->compiler().identity().flags;
    EXPECT_EQ(std::count(flags.begin(), flags.end(), "-O3"), 1);
    EXPECT_EQ(std::count(flags.begin(), flags.end(), "-O2"), 0);
    if (c == CpuCompiler::Llvm) EXPECT_NE(flags.back().find("default<O3>"), std::string::npos) << flags.back();
  }
}

// Both compilers follow one recipe (cpu_recipe.h): the clang process by its
// flags, the llvm compiler by the same flags for its front end and the same
// passes and code generator level after it. So their objects are the same
// bytes, and a kernel gives the same bits whichever compiled it. The kernels
// are shaped as tinygrad renders them: a depthwise 5x5 convolution whose
// filter loop the recipe unrolls and whose row loop it then vectorises, an
// unrolled 3x4 tile whose long body loops 64 times (the loop vectoriser's
// work), calls into libm, and LLVM IR (which names its file itself: clang
// reads it from stdin, and would name it "<stdin>").
TEST(CpuRecipe, BothCompilersBuildTheSameObjects) {
  SVOD_REQUIRE_LLVM_PLUGIN();
  const Compiler& clang = cpu_device(CpuCompiler::Clang)->compiler();
  const Compiler& llvm = cpu_device(CpuCompiler::Llvm)->compiler();
  // The plugin's clang is Debian's clang-19; another clang (SVOD_CLANG) makes other code.
  if (llvm.identity().version.find(clang.identity().version) == std::string::npos)
    GTEST_SKIP() << "the clang process is " << clang.identity().version << ", the plugin " << llvm.identity().version;
  std::string tile = "void tile(float* restrict o, const float* restrict w, const float* restrict x) {\n"
                     "  for (int i = 0; i < 64; i++) {\n";
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c)
      tile += fmt::format(
          "    o[{0}] += w[i * 3 + {1}] * x[i * 4 + {2}] + w[i * 3 + {1} + 192] * x[i * 4 + {2} + 256];\n", r * 4 + c,
          r, c);
  tile += "  }\n}\n";
  std::vector<ProgramSpec> specs = {
      c_kernel("dw5x5",
               "void dw5x5(float* restrict o, const float* restrict x, const float* restrict w) {\n"
               "  float acc[3];\n"
               "  for (int row = 0; row < 40; row++)\n"
               "    for (int col = 0; col < 96; col++) {\n"
               "      acc[0] = acc[1] = acc[2] = 0.0f;\n"
               "      for (int k = 0; k < 5; k++) {\n"
               "        int at = row * 288 + k * 96 + col;\n"
               "        _Bool left = 1 < col, right = col < 94, inside = 0 < k && k < 4;\n"
               "        float a0 = (left & inside) ? x[at - 98] : 0.0f, a1 = inside ? x[at - 96] : 0.0f;\n"
               "        float a2 = (right & inside) ? x[at - 94] : 0.0f, b0 = left ? x[at - 2] : 0.0f;\n"
               "        float b1 = x[at], b2 = right ? x[at + 2] : 0.0f;\n"
               "        acc[0] += a0 * w[k * 5] + a1 * w[k * 5 + 2] + a2 * w[k * 5 + 4];\n"
               "        acc[1] += b0 * w[k * 5 + 1] + b1 * w[k * 5 + 2] + b2 * w[k * 5 + 3];\n"
               "        acc[2] += a1 * b1 + a0 * b2;\n"
               "      }\n"
               "      float y = acc[0] + acc[1] + acc[2] + 3.0f;\n"
               "      o[row * 96 + col] = y * (y < 0.0f ? 0.0f : 6.0f < y ? 6.0f : y) * 0.16666667f;\n"
               "    }\n}\n",
               {{"o", Access::Write}, {"x"}, {"w"}}),
      c_kernel("tile", tile, {{"o", Access::ReadWrite}, {"w"}, {"x"}}),
      c_kernel("softmax",
               "#include <math.h>\n"
               "void softmax(float* restrict o, const float* restrict x, int n) {\n"
               "  float m = -INFINITY, s = 0.0f;\n"
               "  for (int i = 0; i < n; i++) m = x[i] > m ? x[i] : m;\n"
               "  for (int i = 0; i < n; i++) { o[i] = expf(x[i] - m); s += o[i]; }\n"
               "  for (int i = 0; i < n; i++) o[i] = o[i] / sqrtf(s * s);\n}\n",
               {{"o", Access::Write}, {"x"}}, {{"n"}}),
  };
  ProgramSpec ir = c_kernel("scale",
                            "source_filename = \"scale.ll\"\n"
                            "define void @scale(ptr noalias %o, ptr noalias %x, i32 %n) {\n"
                            "entry:\n  %go = icmp sgt i32 %n, 0\n  br i1 %go, label %loop, label %done\n"
                            "loop:\n  %i = phi i32 [ 0, %entry ], [ %next, %loop ]\n"
                            "  %at = getelementptr float, ptr %x, i32 %i\n  %v = load float, ptr %at\n"
                            "  %w = fmul float %v, 2.5\n  %to = getelementptr float, ptr %o, i32 %i\n"
                            "  store float %w, ptr %to\n  %next = add i32 %i, 1\n  %more = icmp slt i32 %next, %n\n"
                            "  br i1 %more, label %loop, label %done\n"
                            "done:\n  ret void\n}\n",
                            {{"o", Access::Write}, {"x"}}, {{"n"}});
  ir.language = Language::LlvmIr;
  specs.push_back(ir);
  // A serial reduction, which only a reassociating recipe vectorises.
  specs.push_back(c_kernel("dot",
                           "void dot(float* restrict o, const float* restrict a, const float* restrict b, int n) {\n"
                           "  float s = 0.0f;\n  for (int i = 0; i < n; i++) s += a[i] * b[i] + 0.5f * a[i];\n"
                           "  o[0] = s;\n}\n",
                           {{"o", Access::Write}, {"a"}, {"b"}}, {{"n"}}));
  // Every recipe, each the same bytes from both compilers (the default's by
  // an empty name and by its own).
  std::map<std::string, std::vector<std::byte>> made;
  for (const CpuRecipe& recipe : kCpuRecipes) {
    for (ProgramSpec spec : specs) {
      spec.recipe = recipe.name;
      SCOPED_TRACE(spec.entry + " by " + spec.recipe);
      const Artifact by_clang = clang.compile(spec);
      EXPECT_GT(by_clang.bytes.size(), 0u);
      EXPECT_TRUE(llvm.compile(spec).bytes == by_clang.bytes);
      made[spec.entry + " " + spec.recipe] = by_clang.bytes;
    }
  }
  ProgramSpec by_default = specs[0];
  EXPECT_TRUE(clang.compile(by_default).bytes == made["dw5x5 O3"]);
  // Where the recipes differ: O2 does not unroll the 5x5 filter loop, and
  // only reassociation vectorises the dot product.
  EXPECT_FALSE(made["dw5x5 O2"] == made["dw5x5 O3"]);
  EXPECT_FALSE(made["dot O3_reassoc"] == made["dot O3"]);
}

// Only the llvm compiler checks IR: Debian's release clang compiles IR input
// without the verifier, so the clang and dlopen compilers accept this module.
TEST(LlvmCompiler, IrThatParsesButFailsVerificationIsACompileError) {
  SVOD_REQUIRE_LLVM_PLUGIN();
  auto cpu = cpu_device(CpuCompiler::Llvm);
  // Forward references parse; using %x before its definition does not verify.
  ProgramSpec spec = c_kernel("use_before_def",
                              "define void @use_before_def(ptr %o) {\n  store i32 %x, ptr %o\n"
                              "  %x = add i32 1, 2\n  ret void\n}\n",
                              {{"o"}});
  spec.language = Language::LlvmIr;
  try {
    cpu->compile(spec);
    FAIL() << "invalid IR compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Compile);
    EXPECT_NE(std::string(e.what()).find("does not dominate all uses"), std::string::npos) << e.what();
  }
}

TEST(DlopenCompiler, LibraryClosesWhenItsLastProgramIsReleased) {
  auto cpu = cpu_device(CpuCompiler::Dlopen);
  ProgramSpec spec = c_kernel("dlopen_lifetime_probe", "void dlopen_lifetime_probe(int* o) { o[0] = 5; }", {{"o", Access::Write}});
  const Artifact artifact = cpu->compiler().compile(spec);
  ASSERT_EQ(artifact.kind, ArtifactKind::SharedLibrary);
  const std::string mapped_name = "-dlopen_lifetime_probe.so";
  EXPECT_EQ(process_maps().find(mapped_name), std::string::npos);

  auto first = cpu->load(spec, artifact);
  std::shared_ptr<const Program> second = first;  // shared ownership, as plans and caches hold it
  EXPECT_NE(process_maps().find(mapped_name), std::string::npos);
  first.reset();
  Buffer o = cpu->allocate(DType::I32, 1);
  Buffer bufs[] = {o};
  second->launch(bufs, {});
  EXPECT_EQ(o.span<int32_t>()[0], 5);
  second.reset();
  EXPECT_EQ(process_maps().find(mapped_name), std::string::npos) << "the library is still mapped";
}

class PrebuiltLibrary : public ::testing::Test {
 protected:
  void SetUp() override {
    library_ = dir_ / "libprebuilt_kernels.so";
    // Built elsewhere: plain `clang -shared`, nothing from svod.
    ProcessResult r = run_process({ClangCompiler::find_clang(), "-shared", "-fPIC", "-O2", "-x", "c", "-", "-o", library_.string()},
                                  "void prebuilt_scale(float* o, const float* a, long long n, int k) {\n"
                                  "  for (long long i = 0; i < n; i++) o[i] = a[i] * k;\n}\n"
                                  "static void hidden_helper(void) {}\n",
                                  std::chrono::seconds(60));
    ASSERT_TRUE(r.ok()) << r.err;
  }

  bool loaded() const {
    void* handle = dlopen(library_.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (handle != nullptr) dlclose(handle);
    return handle != nullptr;
  }

  test::TempDir dir_;
  std::filesystem::path library_;
};

TEST_F(PrebuiltLibrary, LoadsWithADeclaredSpecRunsAndClosesOnRelease) {
  auto cpu = cpu_device(CpuCompiler::Clang);
  ProgramSpec spec;
  spec.entry = "prebuilt_scale";
  spec.buffers = {{"o", Access::Write, DType::F32, Expr::parse("n")}, {"a", Access::Read, DType::F32, Expr::parse("n")}};
  spec.scalars = {{"n", ScalarType::I64}, {"k", ScalarType::I32}};
  EXPECT_FALSE(loaded());
  auto p = cpu->load_library(spec, library_);
  EXPECT_TRUE(loaded());
  EXPECT_TRUE(p->spec().source.empty());
  Buffer o = cpu->allocate(DType::F32, 3), a = cpu->allocate(DType::F32, 3);
  for (int i = 0; i < 3; ++i) a.span<float>()[i] = float(i + 1);
  Buffer bufs[] = {o, a};
  int64_t s[] = {3, -2};
  p->launch(bufs, s);
  EXPECT_EQ(std::vector<float>(o.span<float>().begin(), o.span<float>().end()), (std::vector<float>{-2, -4, -6}));
  int64_t too_many[] = {4, 1};
  EXPECT_THROW(p->launch(bufs, too_many), Error);  // the declared min_count still guards it
  p.reset();
  EXPECT_FALSE(loaded());
}

TEST_F(PrebuiltLibrary, EntriesMustBeTheLibrarysOwn) {
  auto cpu = cpu_device(CpuCompiler::Clang);
  for (const char* entry : {"hidden_helper", "no_such_kernel", "sqrtf"}) {
    ProgramSpec spec;
    spec.entry = entry;
    try {
      cpu->load_library(spec, library_);
      ADD_FAILURE() << entry << " loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::UndefinedSymbol) << e.what();
      EXPECT_NE(std::string(e.what()).find(entry), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(loaded());
}

TEST_F(PrebuiltLibrary, MissingOrInvalidFilesAreLoadErrors) {
  auto cpu = cpu_device(CpuCompiler::Clang);
  ProgramSpec spec;
  spec.entry = "prebuilt_scale";
  try {
    cpu->load_library(spec, dir_ / "absent.so");
    ADD_FAILURE() << "absent library loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Load);
    EXPECT_NE(std::string(e.what()).find("absent.so"), std::string::npos) << e.what();
  }
  std::ofstream(dir_ / "junk.so") << "not an ELF file";
  try {
    cpu->load_library(spec, dir_ / "junk.so");
    ADD_FAILURE() << "junk loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Load);
  }
  // dlopen() of a FIFO would wait for a writer forever.
  ASSERT_EQ(::mkfifo((dir_ / "fifo.so").c_str(), 0644), 0);
  {
    test::Watchdog watchdog("loading a FIFO as a library", std::chrono::seconds(20));
    try {
      cpu->load_library(spec, dir_ / "fifo.so");
      ADD_FAILURE() << "a FIFO loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Load);
      EXPECT_EQ(std::string(e.what()),
                "cannot open shared library " + (dir_ / "fifo.so").string() + ": it is a FIFO, not a regular file");
    }
  }
  spec.entry = "not an identifier";
  try {
    cpu->load_library(spec, library_);
    ADD_FAILURE() << "bad entry accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Validation);
  }
}

}  // namespace
}  // namespace svod
