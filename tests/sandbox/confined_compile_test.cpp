// Confined compiles (svod/sandbox/confined_compile.h): real sources compiled
// by the real clang in the sandbox helper's compile mode. A legitimate kernel
// gives the bytes of an unconfined clang compile and the same results; a
// source that includes a file outside the toolchain is refused with the rule
// named and nothing of the file shown, though clang outside the sandbox reads
// the same file; and where user namespaces are refused, nothing is compiled.
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/compile/clang_compiler.h"
#include "svod/sandbox/confined_compile.h"
#include "tests/support/seccomp_filter.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using test::c_kernel;
using test::TempDir;

// out[i] = expf(in[i]) * 0.5f + sqrtf(i), through the system's <math.h>.
ProgramSpec math_kernel(std::string recipe = "") {
  ProgramSpec spec = c_kernel("confined_math",
                              "#include <math.h>\n#include <stdint.h>\n"
                              "void confined_math(const float* in, float* out, int n) {\n"
                              "  for (int32_t i = 0; i < n; ++i) out[i] = expf(in[i]) * 0.5f + sqrtf((float)i);\n"
                              "}\n",
                              {BufferParam{"in", Access::Read, DType::F32}, BufferParam{"out", Access::Write, DType::F32}},
                              {ScalarParam{"n"}});
  spec.recipe = std::move(recipe);
  return spec;
}

std::vector<float> run_math(const std::shared_ptr<const Program>& program) {
  Buffer in = cpu_device()->allocate(DType::F32, 64);
  Buffer out = cpu_device()->allocate(DType::F32, 64);
  for (size_t i = 0; i < 64; ++i) in.span<float>()[i] = 0.1f * static_cast<float>(i) - 3.0f;
  const Buffer buffers[] = {in, out};
  const int64_t scalars[] = {64};
  program->launch(LaunchArgs{buffers, scalars});
  auto s = out.span<float>();
  return {s.begin(), s.end()};
}

void expect_violation(const ProgramSpec& spec, std::initializer_list<std::string_view> fragments,
                      std::string_view secret) {
  try {
    compile_confined(spec);
    ADD_FAILURE() << "compiled: " << spec.source;
  } catch (const Error& e) {
    const std::string_view what = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::SandboxViolation) << what;
    for (auto fragment : fragments) EXPECT_NE(what.find(fragment), std::string_view::npos) << fragment << " not in: " << what;
    EXPECT_EQ(what.find(secret), std::string_view::npos) << what;
  }
}

TEST(ConfinedCompile, GivesTheBytesAndResultsOfAnUnconfinedClangCompile) {
  const ClangCompiler unconfined;
  for (const std::string recipe : {"", "O2", "O3_reassoc"}) {
    SCOPED_TRACE(recipe);
    const ProgramSpec spec = math_kernel(recipe);
    const Artifact confined = compile_confined(spec);
    EXPECT_EQ(confined.kind, ArtifactKind::ElfObject);
    EXPECT_FALSE(confined.bytes.empty());
    EXPECT_EQ(confined.bytes, unconfined.compile(spec).bytes);
  }
  const ProgramSpec spec = math_kernel();
  EXPECT_EQ(run_math(load_confined(*cpu_device(), spec)), run_math(cpu_device()->compile(spec)));

  ProgramSpec ir;
  ir.language = Language::LlvmIr;
  ir.entry = "confined_ir";
  ir.source = "define void @confined_ir(ptr %out) {\n  store float 2.0, ptr %out\n  ret void\n}\n";
  ir.buffers = {BufferParam{"out", Access::Write, DType::F32}};
  EXPECT_EQ(compile_confined(ir).bytes, unconfined.compile(ir).bytes);
}

TEST(ConfinedCompile, AnIncludeOfEtcPasswdIsRefusedWithTheRuleAndNothingOfTheFile) {
  for (const char* include : {"#include \"/etc/passwd\"\n", "#include </etc/passwd>\n"}) {
    SCOPED_TRACE(include);
    expect_violation(c_kernel("leak", std::string(include) + "void leak(float* out) {}\n",
                              {BufferParam{"out", Access::Write, DType::F32}}),
                     {"program \"leak\"", "#include \"/etc/passwd\"",
                      "the file is outside what the sandbox's compiler may read",
                      "rule: the sandbox's compiler reads only the toolchain's files"},
                     "root:");
  }
}

TEST(ConfinedCompile, AFileOfTheUsersThatClangOutsideReadsIsOutsideTheSandbox) {
  TempDir dir;
  // As data, the file's text would come back in the object; as code, in the
  // diagnostics.
  const std::string secret = dir.write("secret.h", "SECRET_TOKEN_5821 = 1;\n").string();
  const ProgramSpec spec = c_kernel("steal",
                                    "const char stolen[] = {\n#include \"" + secret + "\"\n};\n"
                                    "void steal(float* out) { out[0] = stolen[0]; }\n",
                                    {BufferParam{"out", Access::Write, DType::F32}});
  // Outside the sandbox clang reads it and shows it.
  try {
    ClangCompiler().compile(spec);
    ADD_FAILURE() << "compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Compile);
    EXPECT_NE(std::string_view(e.what()).find("SECRET_TOKEN_5821"), std::string_view::npos) << e.what();
  }
  expect_violation(spec, {"#include \"" + secret + "\"", "outside what the sandbox's compiler may read"},
                   "SECRET_TOKEN_5821");
  // A relative path that climbs out of the toolchain's folders too.
  expect_violation(c_kernel("climb", "#include \"../../../../../../../../.." + secret + "\"\nvoid climb(float* out) {}\n",
                            {BufferParam{"out", Access::Write, DType::F32}}),
                   {"outside what the sandbox's compiler may read"}, "SECRET_TOKEN_5821");
}

TEST(ConfinedCompile, AnOrdinaryCompileErrorIsACompileErrorWithClangsDiagnostics) {
  try {
    compile_confined(c_kernel("broken", "void broken(float* out) { out[0] = undeclared_name; }\n",
                              {BufferParam{"out", Access::Write, DType::F32}}));
    ADD_FAILURE() << "compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Compile) << e.what();
    EXPECT_NE(std::string_view(e.what()).find("undeclared_name"), std::string_view::npos) << e.what();
  }
}

TEST(ConfinedCompile, ACompilePastTheWallClockLimitIsKilled) {
  try {
    compile_confined(math_kernel(), ConfinedCompileOptions{.wall_limit = std::chrono::milliseconds(1)});
    ADD_FAILURE() << "compiled within 1 ms";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::SandboxViolation) << e.what();
    EXPECT_NE(std::string_view(e.what()).find("rule: wall-clock limit"), std::string_view::npos) << e.what();
  }
}

TEST(ConfinedCompile, TheProbeNamesOnlyTheToolchainsPaths) {
  const std::vector<std::string> reads = probe_confined_compile();
  ASSERT_FALSE(reads.empty());
  for (const std::string& path : reads) {
    EXPECT_TRUE(std::filesystem::path(path).is_absolute()) << path;
    EXPECT_TRUE(std::filesystem::exists(path)) << path;
    // Never a folder that holds users' files, or the whole machine.
    for (const char* wide : {"/", "/home", "/root", "/tmp", "/etc", "/usr", "/usr/lib", "/lib"})
      EXPECT_NE(std::filesystem::path(path).lexically_normal(), std::filesystem::path(wide)) << path;
  }
}

// `svod ARGS`: its exit status and everything it printed.
std::pair<int, std::string> svod(const std::string& args) {
  const std::string command = std::string(SVOD_BINARY_DIR) + "/svod " + args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  std::string output;
  char buffer[4096];
  size_t n;
  while (pipe != nullptr && (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
  const int status = pipe != nullptr ? ::pclose(pipe) : -1;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

// Writes plan.json in `dir`: one kernel whose inline source includes `secret`.
std::string hostile_plan(const TempDir& dir, const std::string& secret) {
  return dir.write("plan.json", R"({
  "svod_plan": 1,
  "device": "CPU",
  "buffers": { "out": { "dtype": "f32", "count": 4 } },
  "programs": {
    "steal": {
      "language": "c", "entry": "steal",
      "source": "const char stolen[] = {\n#include \")" + secret + R"(\"\n};\nvoid steal(float* out) { out[0] = stolen[0]; }\n",
      "buffers": [ { "name": "out", "access": "write" } ]
    }
  },
  "ops": [ { "id": "steal", "run": "steal", "buffers": ["out"] } ],
  "outputs": { "out": {} }
})").string();
}

// `svod run --sandbox` of the hostile plan of `secret`.
std::pair<int, std::string> run_hostile_plan(const TempDir& dir, const std::string& secret) {
  return svod("run --sandbox " + hostile_plan(dir, secret));
}

TEST(ConfinedCompile, SvodRunSandboxCompilesAPlansSourcesConfined) {
  TempDir dir;
  const std::string secret = dir.write("secret.h", "83, 69, 67, 82, 69, 84 /* SECRET_TOKEN_5821 */\n").string();
  const auto [status, output] = run_hostile_plan(dir, secret);
  EXPECT_NE(status, 0) << output;
  EXPECT_NE(output.find("outside what the sandbox's compiler may read"), std::string::npos) << output;
  EXPECT_NE(output.find("rule: the sandbox's compiler reads only the toolchain's files"), std::string::npos) << output;
  EXPECT_EQ(output.find("SECRET_TOKEN_5821"), std::string::npos) << output;
  // The same plan outside the sandbox compiles the file into the kernel: the
  // test's file is one clang can read.
  const std::string command = std::string(SVOD_BINARY_DIR) + "/svod run " + (dir / "plan.json").string() + " 2>&1";
  EXPECT_EQ(std::system((command + " >/dev/null").c_str()), 0) << command;
}

// A filter under which unshare() fails with EPERM, as on a machine that
// refuses user namespaces; every other call is allowed.
sock_filter kRefuseNamespaces[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_unshare, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};

TEST(ConfinedCompile, RefusesToCompileWhereUserNamespacesAreRefused) {
  const ProgramSpec spec = math_kernel();
  const int status = test::exit_status_under_filter(kRefuseNamespaces, [&] {
    try {
      compile_confined(spec);
      return 11;  // it compiled: never
    } catch (const Error& e) {
      const std::string_view what = e.what();
      const bool named = e.kind() == ErrorKind::Unsupported && what.find("namespaces") != std::string_view::npos &&
                         what.find("was not compiled") != std::string_view::npos;
      if (!named) std::fprintf(stderr, "%s\n", e.what());
      return named ? 0 : 12;
    }
  });
  EXPECT_EQ(status, 0) << "10: no filter, 11: compiled, 12: the wrong error";
}

// A package of sources only (or one for another CPU) compiles its programs
// when it loads: under --sandbox, confined like a plan file's.
TEST(ConfinedCompile, SvodRunSandboxCompilesAPackagesSourcesConfined) {
  TempDir dir;
  const std::string secret = dir.write("secret.h", "83, 69, 67, 82, 69, 84 /* SECRET_TOKEN_7310 */\n").string();
  const std::string package = (dir / "steal.svodpkg").string();
  const auto [packed, pack_output] = svod("pack --sources-only " + hostile_plan(dir, secret) + " -o " + package);
  ASSERT_EQ(packed, 0) << pack_output;
  EXPECT_EQ(svod("run " + package).first, 0);  // outside the sandbox the source reads the file
  const auto [status, output] = svod("run --sandbox " + package);
  EXPECT_NE(status, 0) << output;
  EXPECT_NE(output.find("rule: the sandbox's compiler reads only the toolchain's files"), std::string::npos) << output;
  EXPECT_EQ(output.find("SECRET_TOKEN_7310"), std::string::npos) << output;
}

}  // namespace
}  // namespace svod
