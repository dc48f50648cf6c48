// svod_set_log_callback (C API 1.6): svod's log lines reach the callback with
// the caller's pointer, from every thread and whole; NULL puts stderr back;
// a callback that logs or replaces itself does not deadlock.
#include <svod/svod.h>

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "svod/base/log.h"
#include "tests/capi/capi_test_support.h"

namespace {

struct Lines {
  std::mutex mutex;
  std::vector<std::pair<int, std::string>> got;
};

void collect(void* user, int level, const char* line) {
  auto* lines = static_cast<Lines*>(user);
  std::lock_guard lock(lines->mutex);
  lines->got.emplace_back(level, line);
}

class CApiLog : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_OK(svod_set_log_callback(nullptr, nullptr)); }
};

TEST_F(CApiLog, LinesFromEveryThreadReachTheCallback) {
  Lines lines;
  ASSERT_OK(svod_set_log_callback(collect, &lines));
  constexpr int kThreads = 8, kLines = 100;
  ::testing::internal::CaptureStderr();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < kLines; ++i) {
        if (i % 2 == 0) svod::log_warning("thread {} line {} of the C API test", t, i);
        else svod::log_line(fmt::format("thread {} line {} of the C API test", t, i));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ASSERT_OK(svod_set_log_callback(nullptr, nullptr));  // returns with no call in flight: `lines` may go
  std::set<std::string> seen;
  for (const auto& [level, text] : lines.got) {
    const int i = std::stoi(text.substr(text.find("line ") + 5));
    EXPECT_EQ(level, i % 2 == 0 ? SVOD_LOG_WARNING : SVOD_LOG_DEBUG) << text;
    EXPECT_TRUE(seen.insert(text).second) << "twice: " << text;
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kThreads * kLines));
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kLines; ++i) {
      EXPECT_TRUE(seen.count(fmt::format("thread {} line {} of the C API test", t, i))) << t << " " << i;
    }
  }
}

TEST_F(CApiLog, NullPutsStderrBack) {
  Lines lines;
  ASSERT_OK(svod_set_log_callback(collect, &lines));
  svod::log_warning("to the callback");
  ::testing::internal::CaptureStderr();
  ASSERT_OK(svod_set_log_callback(nullptr, &lines));  // `user` is ignored with NULL
  svod::log_warning("to stderr");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "svod: to stderr\n");
  ASSERT_EQ(lines.got.size(), 1u);
  EXPECT_EQ(lines.got[0], std::make_pair(static_cast<int>(SVOD_LOG_WARNING), std::string("to the callback")));
}

// Logs through svod from inside the callback, then takes itself out.
void logs_and_uninstalls(void* user, int, const char* line) {
  auto* calls = static_cast<std::atomic<int>*>(user);
  ++*calls;
  svod::log_warning("the callback saw \"{}\"", line);  // to stderr, not back into the callback
  svod_status* s = svod_set_log_callback(nullptr, nullptr);  // returns at once from inside
  EXPECT_EQ(svod_status_kind(s), SVOD_OK);
  svod_status_free(s);
}

TEST_F(CApiLog, ACallbackThatLogsOrUninstallsItselfDoesNotDeadlock) {
  std::atomic<int> calls{0};
  ASSERT_OK(svod_set_log_callback(logs_and_uninstalls, &calls));
  ::testing::internal::CaptureStderr();
  svod::log_warning("first");
  svod::log_warning("second");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "svod: the callback saw \"first\"\nsvod: second\n");
  EXPECT_EQ(calls.load(), 1);
}

}  // namespace
