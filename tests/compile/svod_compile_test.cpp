// `svod compile FILE` as a user runs it, on every CPU compiler: what a good
// source gives (parameters, object, time, warnings), and the compiler's
// message with exit status 2 for a bad one.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "svod/base/subprocess.h"
#include "tests/support/cpu_compilers_built.h"
#include "tests/support/temp_dir.h"

namespace svod {
namespace {

// `1 << 40` is a warning every C compiler gives by default.
constexpr const char* kWarned =
    "#include <stdint.h>\n"
    "void scale(float* restrict o, const float* restrict a, int n, int64_t unused) {\n"
    "  for (int i = 0; i < n; i++) o[i] = a[i] * FACTOR;\n"
    "  o[0] += 1 << 40;\n"
    "}\n";

ProcessResult svod(std::vector<std::string> args) {
  args.insert(args.begin(), {"env", "-u", "SVOD_CPU_COMPILER", "-u", "SVOD_CPU_BACKEND", SVOD_BINARY_DIR "/svod"});
  return run_process(args, "", std::chrono::seconds(120));
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(SvodCompile, PrintsTheParametersObjectTimeAndWarningsOnEveryCompiler) {
  test::TempDir dir;
  const std::string file = dir.write("scale.c", kWarned).string();
  for (CpuCompiler compiler : test::cpu_compilers_built()) {
    const std::string name(to_string(compiler));
    const ProcessResult r = svod({"compile", file, "-DFACTOR=2.5f", "--cpu-compiler", name});
    ASSERT_TRUE(r.ok()) << name << ": " << r.err;
    EXPECT_EQ(r.err, "") << name;
    // The entry is the file's name; the time is the compiler's alone.
    EXPECT_TRUE(has(r.out, "compiled " + file + ": entry scale (c) for CPU with " + name + " in ")) << r.out;
    EXPECT_TRUE(has(r.out, compiler == CpuCompiler::Dlopen ? "\nobject: shared_library, " : "\nobject: elf_object, "))
        << r.out;
    EXPECT_TRUE(has(r.out, " bytes, loaded in ")) << r.out;
    EXPECT_TRUE(has(r.out, "\nparameters, read from scale(float* o, const float* a, int n, int64_t unused):\n"
                           "  o: buffer of f32, readwrite\n"
                           "  a: buffer of f32, read\n"
                           "  n: scalar i32\n"
                           "  unused: scalar i64\n"))
        << r.out;
    // Warnings are printed although the source compiled, naming the file as given.
    EXPECT_TRUE(has(r.out, "\ndiagnostics:\n  | " + file + ":4:")) << r.out;
    EXPECT_TRUE(has(r.out, "warning: shift count >= width of type")) << r.out;
  }
}

TEST(SvodCompile, ACleanSourceHasNoDiagnosticsAndTheOptionsNameTheEntryAndLanguage) {
  test::TempDir dir;
  const std::string file = dir.write("kernels.txt", "void first(int* o) { o[0] = 1; }\n"
                                                    "void second(int* o, int k) { o[0] = k; }\n").string();
  const ProcessResult r = svod({"compile", file, "--entry", "second", "--language", "c"});
  ASSERT_TRUE(r.ok()) << r.err;
  EXPECT_TRUE(has(r.out, "entry second (c)")) << r.out;
  EXPECT_TRUE(has(r.out, "  o: buffer of i32, readwrite\n  k: scalar i32\n")) << r.out;
  EXPECT_TRUE(has(r.out, "\ndiagnostics: none\n")) << r.out;

  // LLVM IR: compiled, its parameters not read.
  const std::string ir =
      dir.write("store.ll", "define void @store(ptr %o) {\n  store i32 7, ptr %o\n  ret void\n}\n").string();
  const ProcessResult llvm = svod({"compile", ir});
  ASSERT_TRUE(llvm.ok()) << llvm.err;
  EXPECT_TRUE(has(llvm.out, "entry store (llvm)")) << llvm.out;
  EXPECT_TRUE(has(llvm.out, "\nparameters: not read (svod reads the signatures of C entries, and this is llvm)\n"))
      << llvm.out;
}

// OpenCL C for an OpenCL device (PoCL in the tests), the language from the
// extension. Its parameters are not read, and the device, which checks a
// kernel's arguments against them, does not load it: the line says so.
TEST(SvodCompile, AnOpenClKernelCompilesForItsDevice) {
  test::TempDir dir;
  const std::string file =
      dir.write("twice.cl", "__kernel void twice(__global float* o) { o[get_global_id(0)] *= 2.0f; }\n").string();
  const ProcessResult r = svod({"compile", file, "--device", "CL"});
  if (r.exit_code == 2 && has(r.err, "error (device unavailable)")) GTEST_SKIP() << r.err;
  ASSERT_TRUE(r.ok()) << r.err;
  EXPECT_TRUE(has(r.out, "entry twice (opencl) for CL:0 with ")) << r.out;
  EXPECT_TRUE(has(r.out, "\nobject: opencl_binary, ")) << r.out;
  EXPECT_TRUE(has(r.out, " bytes, not loaded without its parameters: ")) << r.out;
  EXPECT_TRUE(has(r.out, "\nparameters: not read (svod reads the signatures of C entries, and this is opencl)\n"))
      << r.out;
  const ProcessResult bad = svod({"compile", file, "--device", "CL", "-D", "get_global_id=nothing"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_EQ(bad.err.rfind("svod compile: error (compile): program \"twice\" does not build for CL:0", 0), 0u)
      << bad.err;
}

TEST(SvodCompile, ABadSourceExitsWith2AndTheCompilersMessage) {
  test::TempDir dir;
  const std::string file = dir.write("scale.c", kWarned).string();
  // FACTOR undefined: the compiler's error, every line of it, on stderr.
  for (CpuCompiler compiler : test::cpu_compilers_built()) {
    const ProcessResult r = svod({"compile", file, "--cpu-compiler", std::string(to_string(compiler))});
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err.rfind("svod compile: error (compile): ", 0), 0u) << r.err;
    EXPECT_TRUE(has(r.err, "\n  | " + file + ":3:")) << r.err;
    EXPECT_TRUE(has(r.err, "use of undeclared identifier 'FACTOR'")) << r.err;
  }
  // An entry the object lacks is found when it loads.
  const ProcessResult missing = svod({"compile", file, "-D", "FACTOR=2", "--entry", "absent"});
  EXPECT_EQ(missing.exit_code, 2) << missing.out;
  EXPECT_EQ(missing.err.rfind("svod compile: error (undefined symbol): ", 0), 0u) << missing.err;
  // What is not there, and options svod refuses.
  const ProcessResult no_file = svod({"compile", (dir / "none.c").string()});
  EXPECT_EQ(no_file.exit_code, 2);
  EXPECT_TRUE(has(no_file.err, "svod compile: error (io): ")) << no_file.err;
  const ProcessResult bad_compiler = svod({"compile", file, "--cpu-compiler", "gcc"});
  EXPECT_EQ(bad_compiler.exit_code, 2);
  EXPECT_EQ(bad_compiler.err, "svod compile: error (validation): --cpu-compiler gcc: expected clang, llvm or dlopen\n");
  const ProcessResult bad_define = svod({"compile", file, "-D", "=2"});
  EXPECT_EQ(bad_define.exit_code, 2);
  EXPECT_EQ(bad_define.err, "svod compile: error (validation): -D =2: expected NAME or NAME=VALUE\n");
  const ProcessResult backend = svod({"compile", file, "--backend", "clang"});
  EXPECT_EQ(backend.exit_code, 2);
  EXPECT_TRUE(has(backend.err, "unknown option --backend")) << backend.err;
}

}  // namespace
}  // namespace svod
