// A crash inside the in-process compiler (clang 19's preprocessor dies on
// `#embed` of a file) is a CompileError naming the program, and the process
// goes on compiling and running kernels. Reproduction of issue 24, item 4.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "svod/base/error.h"
#include "svod/compile/cpu_backend.h"
#include "tests/backends/backends_built.h"
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
  const std::shared_ptr<const Compiler> llvm = cpu_compiler(CpuBackend::Llvm);
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

}  // namespace
}  // namespace svod
