// Kernel sources that #include a FIFO: reading one the usual way waits for a
// writer forever. The in-process compiler refuses it at once; the clang
// process, which svod cannot tell what to open, is killed at its timeout.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>

#include "svod/base/error.h"
#include "svod/compile/clang_compiler.h"
#include "svod/compile/cpu_compiler.h"
#include "tests/support/cpu_compilers_built.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"
#include "tests/support/watchdog.h"

namespace svod {
namespace {

using namespace std::chrono_literals;
using test::TempDir;

ProgramSpec including(const std::filesystem::path& header) {
  return test::c_kernel("k", "#include \"" + header.string() + "\"\nint k(void) { return VALUE; }\n");
}

// Whether something still has the FIFO open for reading (a compiler that
// waits in open() or read()). Opening it for writing without waiting succeeds
// only then, and lets that reader go on (it reads end-of-file).
bool fifo_has_a_reader(const std::filesystem::path& fifo) {
  const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return errno != ENXIO;
  ::close(fd);
  return true;
}

TEST(IncludeFifo, TheInProcessCompilerRefusesItAtOnce) {
  SVOD_REQUIRE_LLVM_PLUGIN();
  TempDir dir;
  const auto fifo = dir / "pipe.h";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const std::shared_ptr<const Compiler> llvm = cpu_compiler(CpuCompiler::Llvm);
  {
    test::Watchdog watchdog("the in-process compile of a FIFO #include", 60s);
    const Error e = test::expect_error([&] { llvm->compile(including(fifo)); });
    EXPECT_EQ(e.kind(), ErrorKind::Compile);
    EXPECT_NE(std::string(e.what()).find("pipe.h': is a FIFO, not a regular file"), std::string::npos) << e.what();
    // A device would never end.
    const Error device = test::expect_error([&] { llvm->compile(including("/dev/zero")); });
    EXPECT_EQ(device.kind(), ErrorKind::Compile);
    EXPECT_NE(std::string(device.what()).find("zero': is a character device, not a regular file"), std::string::npos)
        << device.what();
  }
  EXPECT_FALSE(fifo_has_a_reader(fifo));
  // Regular headers are read as ever.
  dir.write("value.h", "#define VALUE 3\n");
  EXPECT_FALSE(llvm->compile(including(dir / "value.h")).bytes.empty());
}

TEST(IncludeFifo, TheClangProcessIsKilledAtItsTimeout) {
  TempDir dir;
  const auto fifo = dir / "pipe.h";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  ClangCompiler::Options options;
  options.timeout = 2s;
  const ClangCompiler clang(options);
  const auto start = std::chrono::steady_clock::now();
  {
    test::Watchdog watchdog("the clang process's compile of a FIFO #include", 120s);
    const Error e = test::expect_error([&] { clang.compile(including(fifo)); });
    EXPECT_EQ(e.kind(), ErrorKind::Timeout) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 60s);
  // Nothing was left waiting on the FIFO (no cc1 child outlived the clang it was killed with).
  EXPECT_FALSE(fifo_has_a_reader(fifo));
}

}  // namespace
}  // namespace svod
