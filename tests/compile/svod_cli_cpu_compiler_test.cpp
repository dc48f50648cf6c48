// The svod tool and the CPU compilers: `svod run --cpu-compiler` on each,
// the old names --backend and SVOD_CPU_BACKEND, `svod info` saying which
// compiler is the default and why, and a clang-only run that never opens
// libLLVM.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "svod/base/subprocess.h"
#include "tests/support/cpu_compilers_built.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using test::ScopedEnv;

constexpr const char* kPlan = R"J({
  "svod_plan": 1,
  "buffers": {
    "a":   { "dtype": "f32", "count": 256, "init": { "arange": { "start": 0, "step": 0.5 } } },
    "out": { "dtype": "f32", "count": 256 }
  },
  "programs": {
    "poly": { "language": "c", "entry": "poly",
              "source": "#include <math.h>\nvoid poly(float* o, const float* a, int n) { for (int i = 0; i < n; i++) o[i] = a[i] * a[i] + sqrtf(a[i]); }",
              "buffers": [ { "name": "o", "access": "write" }, { "name": "a" } ],
              "scalars": [ { "name": "n", "type": "i32" } ] }
  },
  "ops": [ { "run": "poly", "buffers": ["out", "a"], "scalars": { "n": 256 } } ],
  "outputs": { "out": { "expect": { "values": [0, 0.957106781, 2, 3.47474487], "prefix": true, "rtol": 1e-6 } } }
})J";

class SvodCli : public ::testing::Test {
 protected:
  void SetUp() override {
    plan_ = (dir_ / "plan.json").string();
    std::ofstream(plan_) << kPlan;
  }

  static ProcessResult svod(std::vector<std::string> args) {
    args.insert(args.begin(), SVOD_BINARY_DIR "/svod");
    return run_process(args, "", std::chrono::seconds(120));
  }
  // The output line of `svod run` ("out: f32 [256] [...] sum ... xxh3 ...").
  static std::string output_line(const std::string& out) {
    const size_t at = out.find("out: f32");
    return at == std::string::npos ? "" : out.substr(at, out.find('\n', at) - at);
  }

  test::TempDir dir_;
  std::string plan_;
};

TEST_F(SvodCli, RunGivesTheSameOutputsOnEveryCompiler) {
  ScopedEnv env("SVOD_CPU_COMPILER", std::nullopt);
  std::string reference;
  for (CpuCompiler c : test::cpu_compilers_built()) {
    const std::string compiler(to_string(c));
    SCOPED_TRACE(compiler);
    ProcessResult r = svod({"run", plan_, "--cpu-compiler", compiler});
    ASSERT_TRUE(r.ok()) << r.out << r.err;
    EXPECT_NE(r.out.find("expect: ok"), std::string::npos) << r.out;
    const std::string line = output_line(r.out);
    ASSERT_FALSE(line.empty()) << r.out;
    if (reference.empty()) reference = line;
    EXPECT_EQ(line, reference);  // values, sum and content hash
  }
}

TEST_F(SvodCli, UnknownCompilerIsAnErrorNamingTheValidOnes) {
  ProcessResult r = svod({"run", plan_, "--cpu-compiler", "gcc"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')),
            "svod run: error (validation): --cpu-compiler gcc: expected clang, llvm or dlopen");
  ScopedEnv env("SVOD_CPU_COMPILER", "gcc");
  r = svod({"run", plan_});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("SVOD_CPU_COMPILER=\"gcc\": expected clang, llvm or dlopen"), std::string::npos) << r.err;
}

// --backend and SVOD_CPU_BACKEND, the names before --cpu-compiler and
// SVOD_CPU_COMPILER, still choose the compiler; an old and a new name given
// together must agree.
TEST_F(SvodCli, TheOldNamesOfTheCompilerChoiceStillWork) {
  ScopedEnv unset("SVOD_CPU_COMPILER", std::nullopt);
  ProcessResult r = svod({"run", plan_, "--backend", "clang"});
  EXPECT_TRUE(r.ok()) << r.out << r.err;
  r = svod({"run", plan_, "--cpu-compiler", "clang", "--backend", "CLANG"});
  EXPECT_TRUE(r.ok()) << r.out << r.err;
  r = svod({"run", plan_, "--backend", "gcc"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--backend gcc: expected clang, llvm or dlopen"), std::string::npos) << r.err;
  r = svod({"run", plan_, "--cpu-compiler", "clang", "--backend", "llvm"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--cpu-compiler clang and --backend llvm differ (--backend is the old name of "
                       "--cpu-compiler): give one"),
            std::string::npos)
      << r.err;
  {
    ScopedEnv old("SVOD_CPU_BACKEND", "dlopen");
    r = svod({"info"});
    EXPECT_NE(r.out.find("cpu compiler: dlopen (SVOD_CPU_BACKEND=dlopen)"), std::string::npos) << r.out;
    ScopedEnv same("SVOD_CPU_COMPILER", "dlopen");
    r = svod({"info"});
    EXPECT_NE(r.out.find("cpu compiler: dlopen (SVOD_CPU_COMPILER=dlopen)"), std::string::npos) << r.out;
    ScopedEnv other("SVOD_CPU_COMPILER", "clang");
    r = svod({"run", plan_});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("SVOD_CPU_COMPILER=\"clang\" and SVOD_CPU_BACKEND=\"dlopen\" differ (SVOD_CPU_BACKEND is "
                         "the old name of SVOD_CPU_COMPILER): set one"),
              std::string::npos)
        << r.err;
  }
}

TEST_F(SvodCli, InfoSaysWhichCompilerIsTheDefaultAndWhy) {
  if (SVOD_LLVM_PLUGIN_BUILT) {
    ScopedEnv env("SVOD_CPU_COMPILER", std::nullopt);
    ProcessResult r = svod({"info"});
    ASSERT_TRUE(r.ok()) << r.err;
    EXPECT_NE(r.out.find("cpu compiler: llvm (in-process LLVM"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("libsvod_llvm.so"), std::string::npos) << r.out;
  }
  {
    ScopedEnv env("SVOD_CPU_COMPILER", "dlopen");
    ProcessResult r = svod({"info"});
    EXPECT_NE(r.out.find("cpu compiler: dlopen (SVOD_CPU_COMPILER=dlopen)"), std::string::npos) << r.out;
  }
  {
    ScopedEnv env("SVOD_CPU_COMPILER", std::nullopt);
    ScopedEnv plugin("SVOD_LLVM_PLUGIN", (dir_ / "libsvod_llvm.so").string());
    ProcessResult r = svod({"info"});
    ASSERT_TRUE(r.ok()) << r.err;
    EXPECT_NE(r.out.find("cpu compiler: clang (the llvm compiler is unavailable"), std::string::npos) << r.out;
    // With the plugin missing, plans still run, on clang.
    r = svod({"run", plan_});
    EXPECT_TRUE(r.ok()) << r.out << r.err;
  }
}

// The dynamic loader's own trace (LD_DEBUG=files) lists every library a
// process opens: a run on the clang compiler opens neither the plugin nor
// libLLVM, so it pays none of their start-up cost.
TEST_F(SvodCli, ClangCompilerRunNeverOpensLibLlvm) {
  ScopedEnv debug("LD_DEBUG", "files");
  ScopedEnv no_cache("SVOD_CACHE", "0");  // so the llvm run compiles, and opens its plugin
  ProcessResult clang = svod({"run", plan_, "--cpu-compiler", "clang"});
  ASSERT_TRUE(clang.ok()) << clang.err;
  EXPECT_EQ(clang.err.find("libLLVM"), std::string::npos);
  EXPECT_EQ(clang.err.find("libsvod_llvm"), std::string::npos);
  if (SVOD_LLVM_PLUGIN_BUILT) {
    ProcessResult llvm = svod({"run", plan_, "--cpu-compiler", "llvm"});
    ASSERT_TRUE(llvm.ok()) << llvm.err;
    EXPECT_NE(llvm.err.find("libsvod_llvm"), std::string::npos);  // the check above can see it
    // A plugin that holds LLVM itself opens neither shared library.
    if (SVOD_LLVM_STATIC_BUILT) {
      EXPECT_EQ(llvm.err.find("libLLVM"), std::string::npos);
      EXPECT_EQ(llvm.err.find("libclang-cpp"), std::string::npos);
    } else {
      EXPECT_NE(llvm.err.find("libLLVM"), std::string::npos);
    }
  }
}

// Start-up (issue 26): a warm run keys its objects by the compiler identity
// the object cache remembers, so it never opens the llvm plugin (or libLLVM),
// and says so under SVOD_DEBUG=1; a packaged run opens no compiler, no
// signature library and no device library it does not need.
TEST_F(SvodCli, WarmAndPackagedRunsOpenNothingTheyDoNotNeed) {
  ScopedEnv compiler("SVOD_CPU_COMPILER", std::nullopt);
  ScopedEnv cache("SVOD_CACHE_DIR", (dir_ / "cache").string());
  ScopedEnv cache_on("SVOD_CACHE", std::nullopt);
  ProcessResult cold = svod({"run", plan_});
  ASSERT_TRUE(cold.ok()) << cold.err;
  {
    ScopedEnv debug("LD_DEBUG", "files");
    ScopedEnv svod_debug("SVOD_DEBUG", "1");
    ProcessResult warm = svod({"run", plan_});
    ASSERT_TRUE(warm.ok()) << warm.err;
    EXPECT_EQ(output_line(warm.out), output_line(cold.out));
    EXPECT_EQ(warm.err.find("libsvod_llvm"), std::string::npos) << warm.err;
    EXPECT_EQ(warm.err.find("libLLVM"), std::string::npos);
    EXPECT_NE(warm.err.find("the compiler is not opened"), std::string::npos) << warm.err;
  }
  // The clang compiler's identity comes from `clang -###` when it is not remembered.
  ASSERT_TRUE(svod({"run", plan_, "--cpu-compiler", "clang"}).ok());
  {
    ScopedEnv svod_debug("SVOD_DEBUG", "1");
    ProcessResult warm = svod({"run", plan_, "--cpu-compiler", "clang"});
    ASSERT_TRUE(warm.ok()) << warm.err;
    EXPECT_NE(warm.err.find("the compiler is not opened"), std::string::npos) << warm.err;
  }
  const std::string package = (dir_ / "plan.svodpkg").string();
  ASSERT_TRUE(svod({"pack", plan_, "-o", package}).ok());
  ScopedEnv debug("LD_DEBUG", "files");
  ScopedEnv no_cache("SVOD_CACHE", "0");
  ProcessResult run = svod({"run", package});
  ASSERT_TRUE(run.ok()) << run.err;
  EXPECT_EQ(output_line(run.out), output_line(cold.out));
  for (const char* library : {"libsvod_llvm", "libLLVM", "libclang", "libsodium", "libOpenCL", "libcuda", "libnvrtc"})
    EXPECT_EQ(run.err.find(library), std::string::npos) << library << " opened:\n" << run.err;
}

}  // namespace
}  // namespace svod
