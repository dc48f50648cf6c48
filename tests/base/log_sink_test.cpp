// The log sink (svod/base/log_sink.h): every line from every thread reaches
// the installed sink whole, an empty sink puts stderr back, and a sink that
// logs, replaces itself or throws neither recurses nor deadlocks.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "svod/base/log.h"
#include "svod/base/log_sink.h"

namespace svod {
namespace {

using namespace std::chrono_literals;

// Lines a sink received, from any thread.
struct Received {
  std::mutex mutex;
  std::vector<std::pair<LogLevel, std::string>> lines;

  LogSink sink() {
    return [this](LogLevel level, std::string_view line) {
      EXPECT_EQ(line.data()[line.size()], '\0');
      std::lock_guard lock(mutex);
      lines.emplace_back(level, std::string(line));
    };
  }
  std::vector<std::pair<LogLevel, std::string>> take() {
    std::lock_guard lock(mutex);
    return std::exchange(lines, {});
  }
};

class LogSinkTest : public ::testing::Test {
 protected:
  void TearDown() override { set_log_sink(nullptr); }
};

TEST_F(LogSinkTest, EveryLineFromEveryThreadArrivesWhole) {
  Received received;
  set_log_sink(received.sink());
  EXPECT_TRUE(log_sink_installed());
  const size_t warnings_before = warnings_logged();
  constexpr int kThreads = 8, kLines = 250;
  // Long enough that a torn or interleaved line would show.
  const std::string payload(300, 'x');
  ::testing::internal::CaptureStderr();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &payload] {
      for (int i = 0; i < kLines; ++i) {
        if (i % 2 == 0) log_warning("thread {} line {} {}", t, i, payload);
        else log_line(fmt::format("thread {} line {} {}\n", t, i, payload));  // the newline is dropped
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");  // nothing went to stderr
  EXPECT_EQ(warnings_logged() - warnings_before, static_cast<size_t>(kThreads * kLines / 2));

  std::map<std::string, LogLevel> got;
  for (auto& [level, line] : received.take()) EXPECT_TRUE(got.emplace(line, level).second) << "twice: " << line;
  ASSERT_EQ(got.size(), static_cast<size_t>(kThreads * kLines));
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kLines; ++i) {
      auto it = got.find(fmt::format("thread {} line {} {}", t, i, payload));
      ASSERT_NE(it, got.end()) << "thread " << t << " line " << i;
      EXPECT_EQ(it->second, i % 2 == 0 ? LogLevel::Warning : LogLevel::Debug);
    }
  }
}

TEST_F(LogSinkTest, AnEmptySinkPutsStderrBack) {
  Received received;
  set_log_sink(received.sink());
  ::testing::internal::CaptureStderr();
  log_warning("to the sink");
  set_log_sink(nullptr);
  EXPECT_FALSE(log_sink_installed());
  log_warning("to stderr");
  log_line("debug to stderr");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "svod: to stderr\nsvod: debug to stderr\n");
  auto lines = received.take();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].second, "to the sink");
}

TEST_F(LogSinkTest, ALineLoggedInsideTheSinkGoesToStderr) {
  std::atomic<int> calls{0};
  set_log_sink([&](LogLevel, std::string_view line) {
    ++calls;
    log_warning("inside the sink, for \"{}\"", line);  // not back into the sink
  });
  ::testing::internal::CaptureStderr();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([] { log_warning("outer"); });
  for (auto& thread : threads) thread.join();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(calls.load(), 4);
  size_t inner = 0;
  for (size_t at = 0; (at = err.find("svod: inside the sink, for \"outer\"\n", at)) != std::string::npos; ++at) ++inner;
  EXPECT_EQ(inner, 4u) << err;
}

TEST_F(LogSinkTest, ASinkMayReplaceItself) {
  Received after;
  std::atomic<int> calls{0};
  set_log_sink([&](LogLevel, std::string_view) {
    ++calls;
    set_log_sink(after.sink());  // returns at once: it cannot wait for its own call
  });
  log_warning("first");
  log_warning("second");
  EXPECT_EQ(calls.load(), 1);
  auto lines = after.take();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].second, "second");
}

TEST_F(LogSinkTest, ReplacingWaitsForCallsInFlight) {
  std::atomic<bool> entered{false}, release{false}, returned{false};
  set_log_sink([&](LogLevel, std::string_view) {
    entered = true;
    while (!release) std::this_thread::sleep_for(1ms);
  });
  std::thread logger([] { log_warning("slow"); });
  while (!entered) std::this_thread::sleep_for(1ms);
  std::thread replacer([&] {
    set_log_sink(nullptr);
    returned = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(returned.load());  // the old sink is still running on `logger`
  release = true;
  logger.join();
  replacer.join();
  EXPECT_TRUE(returned.load());
}

TEST_F(LogSinkTest, AThrowingSinkLeavesTheLineOnStderr) {
  set_log_sink([](LogLevel, std::string_view) { throw std::runtime_error("sink broke"); });
  ::testing::internal::CaptureStderr();
  log_warning("kept");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "svod: kept\n");
}

TEST_F(LogSinkTest, StderrLinesAreWholeAcrossThreads) {
  ::testing::internal::CaptureStderr();
  const std::string payload(1000, 'y');
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&payload] {
      for (int i = 0; i < 50; ++i) log_to_stderr(payload);
    });
  }
  for (auto& thread : threads) thread.join();
  const std::string err = ::testing::internal::GetCapturedStderr();
  const std::string line = "svod: " + payload + "\n";
  ASSERT_EQ(err.size(), 200 * line.size());
  for (size_t at = 0; at < err.size(); at += line.size()) ASSERT_EQ(err.compare(at, line.size(), line), 0);
}

// A fork while another thread is inside the sink: the child's calls of
// set_log_sink must not wait for a thread it does not have.
TEST_F(LogSinkTest, AForkedChildDoesNotWaitForThreadsItLacks) {
  std::atomic<bool> entered{false}, release{false};
  set_log_sink([&](LogLevel, std::string_view) {
    entered = true;
    while (!release) std::this_thread::sleep_for(1ms);
  });
  std::thread logger([] { log_warning("held across the fork"); });
  while (!entered) std::this_thread::sleep_for(1ms);
  const pid_t child = fork();
  ASSERT_GE(child, 0) << std::strerror(errno);
  if (child == 0) {
    set_log_sink(nullptr);
    _exit(log_sink_installed() ? 1 : 0);
  }
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 500 && done == 0; ++i) {
    done = waitpid(child, &status, WNOHANG);
    if (done == 0) std::this_thread::sleep_for(10ms);
  }
  if (done == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
  }
  release = true;
  logger.join();
  EXPECT_NE(done, 0) << "the child waited for the parent's thread";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace svod
