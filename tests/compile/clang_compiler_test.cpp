#include "svod/compile/clang_compiler.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "svod/base/error.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using namespace std::chrono_literals;

bool is_relocatable_elf(const Artifact& a) {
  return a.bytes.size() > 64 && a.bytes[0] == std::byte{0x7f} && a.bytes[1] == std::byte{'E'} &&
         a.bytes[16] == std::byte{1};  // e_type ET_REL (little-endian low byte)
}

using test::expect_error;

TEST(ClangCompiler, CompilesCToARelocatableObject) {
  ClangCompiler clang;
  Artifact a = clang.compile(test::c_kernel("k", "void k(float* x) { x[0] = 1.0f; }"));
  EXPECT_EQ(a.kind, ArtifactKind::ElfObject);
  EXPECT_TRUE(is_relocatable_elf(a));
}

TEST(ClangCompiler, CompilesLlvmIr) {
  ProgramSpec spec = test::c_kernel("k", "define void @k(ptr %x) {\n  store float 1.0, ptr %x\n  ret void\n}\n");
  spec.language = Language::LlvmIr;
  EXPECT_TRUE(is_relocatable_elf(ClangCompiler().compile(spec)));
}

TEST(ClangCompiler, CompileErrorCarriesDiagnostics) {
  Error e = expect_error([] { ClangCompiler().compile(test::c_kernel("k", "void k(float* x) { x[0] = y; }")); });
  EXPECT_EQ(e.kind(), ErrorKind::Compile);
  EXPECT_NE(std::string(e.what()).find("undeclared identifier 'y'"), std::string::npos) << e.what();
}

TEST(ClangCompiler, BadLlvmIrIsACompileError) {
  ProgramSpec spec = test::c_kernel("k", "define void @k( {\n");
  spec.language = Language::LlvmIr;
  EXPECT_EQ(expect_error([&] { ClangCompiler().compile(spec); }).kind(), ErrorKind::Compile);
}

TEST(ClangCompiler, DefinesReachTheSource) {
  ProgramSpec spec = test::c_kernel("k", "#if TILE != 4\n#error wrong tile\n#endif\nvoid k(void) {}");
  EXPECT_EQ(expect_error([&] { ClangCompiler().compile(spec); }).kind(), ErrorKind::Compile);
  spec.defines = {{"TILE", "4"}};
  EXPECT_TRUE(is_relocatable_elf(ClangCompiler().compile(spec)));
}

TEST(ClangCompiler, RejectsLanguagesItDoesNotCompile) {
  ProgramSpec spec = test::c_kernel("k", "__global__ void k() {}");
  spec.language = Language("cuda");
  EXPECT_EQ(expect_error([&] { ClangCompiler().compile(spec); }).kind(), ErrorKind::Unsupported);
}

TEST(ClangCompiler, MissingClangSaysHowToInstallOne) {
  {
    test::ScopedEnv env("SVOD_CLANG", "/nonexistent/clang");
    EXPECT_EQ(expect_error([] { ClangCompiler::find_clang(); }).kind(), ErrorKind::DeviceUnavailable);
  }
  test::ScopedEnv no_clang("SVOD_CLANG", std::nullopt);
  test::ScopedEnv empty_path("PATH", "/nonexistent");
  Error e = expect_error([] { ClangCompiler::find_clang(); });
  EXPECT_EQ(e.kind(), ErrorKind::DeviceUnavailable);
  EXPECT_NE(std::string(e.what()).find("apt-get install clang-19"), std::string::npos) << e.what();
}

TEST(ClangCompiler, HungClangIsKilledAfterTheTimeout) {
  auto dir = std::filesystem::temp_directory_path() / ("svod-hung-clang-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto script = dir / "clang";
  std::ofstream(script) << "#!/bin/sh\nexec sleep 30\n";
  ::chmod(script.c_str(), 0755);
  ClangCompiler::Options options;
  options.clang = script.string();
  options.timeout = 300ms;
  ClangCompiler hung(options);
  auto start = std::chrono::steady_clock::now();
  Error e = expect_error([&] { hung.compile(test::c_kernel("k", "void k(void) {}")); });
  EXPECT_EQ(e.kind(), ErrorKind::Timeout);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  std::filesystem::remove_all(dir);
}

TEST(ClangCompiler, IdentityNamesTheResolvedTarget) {
  ClangCompiler clang;
  const CompilerIdentity& id = clang.identity();
  EXPECT_EQ(id.name, "clang");
  EXPECT_EQ(id.path, clang.clang_path());
  EXPECT_NE(id.version.find("clang version"), std::string::npos) << id.version;
  EXPECT_NE(id.target_triple.find("x86_64"), std::string::npos);
  EXPECT_FALSE(id.target_cpu.empty());
  EXPECT_NE(id.target_cpu, "native");
  EXPECT_FALSE(id.target_features.empty());

  ClangCompiler::Options options;
  options.extra_flags = {"-O3"};
  ClangCompiler o3(options);
  EXPECT_NE(o3.identity().hash(), id.hash());
  EXPECT_EQ(ClangCompiler().identity().hash(), id.hash());
}

}  // namespace
}  // namespace svod
