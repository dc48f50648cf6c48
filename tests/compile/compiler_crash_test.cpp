// A crash inside the in-process compiler (clang 19's preprocessor dies on
// `#embed` of a file) is a CompileError naming the program, and the process
// goes on compiling and running kernels. Reproduction of issue 24, item 4.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "svod/base/error.h"
#include "svod/compile/cpu_compiler.h"
#include "tests/support/cpu_compilers_built.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

ProgramSpec embedding(const std::string& name) {
  return test::c_kernel(name, "const unsigned char data[] = {\n#embed \"/etc/hostname\"\n};\n"
                              "int " + name + "(void) { return data[0]; }\n");
}

TEST(CompilerCrash, AnInProcessCompilerCrashIsACompileErrorAndTheProcessGoesOn) {
  SVOD_REQUIRE_LLVM_PLUGIN();
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "a crashed compile leaks what it allocated, by design; LeakSanitizer would report it";
#endif
  const std::shared_ptr<const Compiler> llvm = cpu_compiler(CpuCompiler::Llvm);
  try {
    llvm->compile(embedding("embeds"));
    // A clang that no longer crashes here compiles it; the rest still holds.
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Compile);
    const std::string what = e.what();
    EXPECT_NE(what.find("program \"embeds\""), std::string::npos) << what;
    EXPECT_NE(what.find("crashed with signal"), std::string::npos) << what;
  }
  // Again, from several threads at once, then an ordinary compile.
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      try {
        llvm->compile(embedding("embeds" + std::to_string(t)));
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Compile) << e.what();
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_FALSE(llvm->compile(test::c_kernel("fine", "int fine(void) { return 3; }\n")).bytes.empty());
}

std::string repeated(std::string_view piece, size_t times) {
  std::string out;
  out.reserve(piece.size() * times);
  for (size_t i = 0; i < times; ++i) out += piece;
  return out;
}

// Deep recursion in clang's parser and LLVM's passes: 2,000 unary minus
// signs and a sum of 50,000 terms used to overflow the calling thread's stack
// and end the process with SIGSEGV, nothing printed (issue 40). They compile
// now; one far deeper than the compile thread's stack is a CompileError.
TEST(CompilerCrash, DeeplyNestedSourcesCompileAndDeeperOnesFailAsCompileErrors) {
  SVOD_REQUIRE_LLVM_PLUGIN();
  const std::shared_ptr<const Compiler> llvm = cpu_compiler(CpuCompiler::Llvm);
  EXPECT_FALSE(llvm->compile(test::c_kernel("negates", "int negates(int x) { return " + repeated("- ", 2000) + "x; }"))
                   .bytes.empty());
  EXPECT_FALSE(
      llvm->compile(test::c_kernel("sums", "int sums(int x) { return x" + repeated(" + x", 50000) + "; }")).bytes.empty());
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's own SIGSEGV handler takes a stack overflow its way";
#endif
  try {
    llvm->compile(test::c_kernel("too_deep", "int too_deep(int x) { return " + repeated("-", 4'000'000) + "x; }"));
    // A clang that bounds its recursion refuses it with an ordinary error.
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Compile) << e.what();
    EXPECT_NE(std::string(e.what()).find("program \"too_deep\""), std::string::npos) << e.what();
  }
  EXPECT_FALSE(llvm->compile(test::c_kernel("fine", "int fine(void) { return 3; }\n")).bytes.empty());
}

// LLVM takes integers up to 8,388,607 bits; one multiply that wide compiled
// for six minutes and then ran out of memory with a std::bad_alloc (issue 40).
TEST(CompilerCrash, IntegerTypesWiderThanTheLimitAreRefusedAtOnce) {
  SVOD_REQUIRE_LLVM_PLUGIN();
  const std::shared_ptr<const Compiler> llvm = cpu_compiler(CpuCompiler::Llvm);
  ProgramSpec ir;
  ir.name = "wide";
  ir.entry = "wide";
  ir.language = Language::LlvmIr;
  ir.source = "define void @wide(ptr %p) {\n  %a = load i8388607, ptr %p\n  %m = mul i8388607 %a, %a\n"
              "  store i8388607 %m, ptr %p\n  ret void\n}\n";
  const auto started = std::chrono::steady_clock::now();
  Error e = test::expect_error([&] { llvm->compile(ir); });
  EXPECT_EQ(e.kind(), ErrorKind::Compile);
  EXPECT_NE(std::string(e.what()).find("program \"wide\": an instruction uses a 8388607-bit integer type; the "
                                       "in-process compiler takes integers of at most 4096 bits"),
            std::string::npos)
      << e.what();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30));
  e = test::expect_error([&] {
    llvm->compile(test::c_kernel("bits", "void bits(_BitInt(65536)* p) { *p = *p * *p; }"));
  });
  EXPECT_EQ(e.kind(), ErrorKind::Compile);
  EXPECT_NE(std::string(e.what()).find("65536-bit integer type"), std::string::npos) << e.what();
  // As wide as allowed still compiles.
  ir.source = "define void @wide(ptr %p) {\n  %a = load i4096, ptr %p\n  %m = mul i4096 %a, %a\n"
              "  store i4096 %m, ptr %p\n  ret void\n}\n";
  EXPECT_FALSE(llvm->compile(ir).bytes.empty());
}

}  // namespace
}  // namespace svod
