#include "svod/base/subprocess.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "svod/base/error.h"
#include "tests/support/orphans.h"

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

TEST(Subprocess, SetsVariablesForTheChildAlone) {
  const char* path = std::getenv("PATH");
  ASSERT_NE(path, nullptr);
  ProcessResult r = run_process({"sh", "-c", "echo \"$SVOD_SUBPROCESS_TEST|$HOME|$PATH\""}, "", 10s, {},
                                {"SVOD_SUBPROCESS_TEST=child", "HOME=/elsewhere"});
  EXPECT_EQ(r.out, fmt::format("child|/elsewhere|{}\n", path));  // PATH passes through unchanged
  EXPECT_EQ(std::getenv("SVOD_SUBPROCESS_TEST"), nullptr);
  EXPECT_NE(std::string(std::getenv("HOME")), "/elsewhere");
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

// A child must not outlive svod: a tuning service killed with -9 used to
// leave its workers and clang processes running at 99% CPU (issue 40).
TEST(Subprocess, AChildDiesWithTheProcessThatStartedIt) {
  test::OrphanCatcher catcher;
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  const pid_t starter = ::fork();
  ASSERT_GE(starter, 0);
  if (starter == 0) {
    // Tells the test the child's pid, then waits for it as svod does.
    run_process({"sh", "-c", "echo $$; exec sleep 60"}, "", 60s,
                [&](std::string_view out) { (void)!::write(report[1], out.data(), out.size()); });
    std::_Exit(0);
  }
  ::close(report[1]);
  std::string line;
  char c = 0;
  while (::read(report[0], &c, 1) == 1 && c != '\n') line += c;
  ::close(report[0]);
  ASSERT_FALSE(line.empty()) << "the child never started";
  const pid_t child = std::stoi(line);
  ::kill(starter, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(starter, &status, 0), starter);

  // The child comes back to this process (the subreaper), killed.
  const auto left = catcher.wait_for_none(10s);
  EXPECT_TRUE(left.empty()) << "the child " << child << " outlived the process that started it";
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
