#include "svod/base/subprocess.h"

#include <gtest/gtest.h>

#include <chrono>

#include "svod/base/error.h"

namespace svod {
namespace {

using namespace std::chrono_literals;

TEST(Subprocess, PipesStdinToStdoutAndCollectsStderr) {
  std::string big(1 << 20, 'x');  // larger than a pipe buffer: needs interleaved read/write
  ProcessResult r = run_process({"sh", "-c", "cat; echo oops >&2; exit 3"}, big, 10s);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, big);
  EXPECT_EQ(r.err, "oops\n");
  EXPECT_FALSE(r.ok());
}

TEST(Subprocess, KillsAProcessPastItsTimeout) {
  auto start = std::chrono::steady_clock::now();
  ProcessResult r = run_process({"sleep", "30"}, "", 200ms);
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST(Subprocess, ChildThatExitsWithoutReadingDoesNotKillUs) {
  std::string big(1 << 22, 'y');
  ProcessResult r = run_process({"true"}, big, 10s);
  EXPECT_EQ(r.exit_code, 0);
}

TEST(Subprocess, ReportsASignal) {
  ProcessResult r = run_process({"sh", "-c", "kill -SEGV $$"}, "", 10s);
  EXPECT_EQ(r.term_signal, 11);
}

TEST(Subprocess, MissingExecutableIsAnIoError) {
  try {
    run_process({"/nonexistent/svod-no-such-tool"}, "", 1s);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find("svod-no-such-tool"), std::string::npos);
  }
}

TEST(Subprocess, FindsExecutablesOnPath) {
  auto sh = find_executable("sh");
  ASSERT_TRUE(sh.has_value());
  EXPECT_EQ(sh->front(), '/');
  EXPECT_FALSE(find_executable("svod-surely-not-a-command").has_value());
  EXPECT_FALSE(find_executable("/etc/passwd").has_value());  // exists but not executable
}

}  // namespace
}  // namespace svod
