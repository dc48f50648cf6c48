// The compile progress line of load_plan (LoadOptions::progress_after): shown
// on a terminal, never written anywhere else. The test puts a pseudo-terminal,
// or a plain file, in place of this process's stderr while a plan loads.
#include <fcntl.h>
#include <pty.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "svod/planfile/plan_file.h"
#include "tests/support/temp_dir.h"

namespace svod {
namespace {

using test::TempDir;

// A plan of three programs whose sources differ from every other test's
// run (so the first load compiles them).
PlanFile three_programs(const TempDir& dir) {
  nlohmann::ordered_json plan = {{"svod_plan", 1}, {"buffers", {{"o", {{"dtype", "i32"}, {"count", 3}}}}}};
  const auto unique = std::chrono::steady_clock::now().time_since_epoch().count();
  for (int i = 0; i < 3; ++i) {
    const std::string name = "set" + std::to_string(i);
    plan["programs"][name] = {
        {"language", "c"},
        {"entry", name},
        {"source", "void " + name + "(int* o) { o[" + std::to_string(i) + "] = " + std::to_string(i + 1) + "; } // " +
                       std::to_string(unique)},
        {"buffers", {{{"name", "o"}, {"access", "write"}}}}};
    plan["ops"].push_back({{"run", name}, {"buffers", {"o"}}});
  }
  return parse_plan_file(dir.write("plan.json", plan.dump(2)));
}

// Runs `fn` with this process's stderr sent to `fd`, then puts stderr back.
template <typename Fn>
void with_stderr(int fd, Fn&& fn) {
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  ASSERT_GE(saved, 0);
  ASSERT_GE(::dup2(fd, STDERR_FILENO), 0);
  fn();
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
}

// What a pseudo-terminal's stderr showed while `fn` ran.
template <typename Fn>
std::string on_terminal(Fn&& fn) {
  int master = -1, slave = -1;
  if (::openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) {
    ADD_FAILURE() << "openpty failed";
    return {};
  }
  with_stderr(slave, fn);
  ::fcntl(master, F_SETFL, ::fcntl(master, F_GETFL) | O_NONBLOCK);
  std::string shown;
  char chunk[4096];
  for (ssize_t n; (n = ::read(master, chunk, sizeof chunk)) > 0;) shown.append(chunk, static_cast<size_t>(n));
  ::close(slave);
  ::close(master);
  return shown;
}

TEST(PlanLoadProgress, ShowsOnATerminalAndEndsWithASummary) {
  TempDir dir;
  const PlanFile file = three_programs(dir);
  const std::string shown = on_terminal([&] {
    LoadedPlan loaded = load_plan(file, LoadOptions{.progress_after = std::chrono::milliseconds(0)});
    loaded.execute();
  });
  EXPECT_NE(shown.find("compiling programs: "), std::string::npos) << shown;
  EXPECT_NE(shown.find("/3 done"), std::string::npos) << shown;
  EXPECT_NE(shown.find("compiling programs: 3/3 done in "), std::string::npos) << shown;
}

TEST(PlanLoadProgress, NothingOnATerminalWhenCompilingEndsSooner) {
  TempDir dir;
  const PlanFile file = three_programs(dir);
  load_plan(file);  // the programs are in the kernel cache from now on
  const std::string shown = on_terminal([&] { load_plan(file); });
  EXPECT_EQ(shown.find("compil"), std::string::npos) << shown;
}

TEST(PlanLoadProgress, NothingWrittenWhenStderrIsNotATerminal) {
  TempDir dir;
  const PlanFile file = three_programs(dir);
  const std::string log = (dir / "stderr.txt").string();
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  with_stderr(fd, [&] { load_plan(file, LoadOptions{.progress_after = std::chrono::milliseconds(0)}); });
  ::close(fd);
  std::stringstream written;
  written << std::ifstream(log).rdbuf();
  EXPECT_EQ(written.str().find("compil"), std::string::npos) << written.str();
}

}  // namespace
}  // namespace svod
