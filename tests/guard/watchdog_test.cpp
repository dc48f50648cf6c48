// The process's one watchdog (svod/guard/watchdog.h): a deadline that passes
// asks its stop scope to stop, one disarmed first asks nothing, a deadline
// earlier than the one the thread sleeps for wakes it, one with an end ends
// the process after its grace with its report and status, and a TimeLimit
// stops a spinning CPU kernel with Error(Timeout) while the next launch runs.
#include "svod/guard/watchdog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "svod/backends/cpu/cpu_device.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

// Waits up to `limit` for `d` to pass; whether it did.
bool passes_within(const Deadline& d, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!d.passed() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  return d.passed();
}

// An action that asks `scope` to stop and, `grace` later, ends the process
// with `status` after printing `report`.
DeadlineAction ending(StopScope& scope, std::string_view reason, std::chrono::milliseconds grace, int status,
                      std::string report) {
  return DeadlineAction{.stop = &scope,
                        .reason = reason,
                        .report = [report](std::chrono::nanoseconds) { return report; },
                        .grace = grace,
                        .status = status};
}

TEST(Watchdog, APassedDeadlineAsksItsScopeToStop) {
  StopScope scope;
  Deadline d(10ms, DeadlineAction{.stop = &scope, .reason = "it ran past the test's 10 ms", .report = nullptr});
  ASSERT_TRUE(passes_within(d, 10s));
  ASSERT_EQ(scope.requested_around(), &scope);
  EXPECT_EQ(scope.kind(), ErrorKind::Timeout);
  EXPECT_EQ(scope.reason(), "it ran past the test's 10 ms");
}

TEST(Watchdog, ADisarmedDeadlineAsksNothing) {
  StopScope scope;
  {
    Deadline d(30ms, DeadlineAction{.stop = &scope, .reason = "late", .report = nullptr});
    d.disarm();
    std::this_thread::sleep_for(100ms);
    EXPECT_FALSE(d.passed());
  }
  EXPECT_EQ(scope.requested_around(), nullptr);
}

TEST(Watchdog, ADeadlineArmedAgainPassesAgain) {
  StopScope scope;
  Deadline d(DeadlineAction{.stop = &scope, .reason = "again", .report = nullptr});
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(d.passed());  // not armed yet
  for (int round = 0; round < 3; ++round) {
    d.arm(5ms);
    EXPECT_FALSE(d.passed());
    ASSERT_TRUE(passes_within(d, 10s)) << round;
    EXPECT_EQ(scope.requested_around(), &scope);
    d.disarm();
    scope.withdraw();
  }
  d.arm(1h);
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(d.passed());
}

TEST(Watchdog, AnEarlierDeadlineWakesTheThreadSleepingForALaterOne) {
  StopScope late_scope, soon_scope;
  const Deadline late(1h, DeadlineAction{.stop = &late_scope, .reason = "late", .report = nullptr});
  std::this_thread::sleep_for(20ms);  // the thread now sleeps until `late`
  const auto start = std::chrono::steady_clock::now();
  const Deadline soon(5ms, DeadlineAction{.stop = &soon_scope, .reason = "soon", .report = nullptr});
  ASSERT_TRUE(passes_within(soon, 10s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_FALSE(late.passed());
}

TEST(Watchdog, DeadlinesArmedAndDisarmedFromManyThreadsAskOnlyWhenTheyPass) {
  std::vector<std::thread> threads;
  std::atomic<int> passed{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        Deadline d(10s, DeadlineAction{.reason = "never", .report = nullptr});
        if (d.passed()) passed.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(passed.load(), 0);
  StopScope scope;
  const Deadline d(1ms, DeadlineAction{.stop = &scope, .reason = "now", .report = nullptr});
  EXPECT_TRUE(passes_within(d, 10s));
}

TEST(WatchdogDeathTest, ADeadlineWithAnEndEndsTheProcessWithItsReportAndStatus) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        StopScope scope;
        const Deadline d(10ms, ending(scope, "stop", 20ms, 7, "the test's work could not stop\n"));
        std::this_thread::sleep_for(10s);
      },
      ::testing::ExitedWithCode(7), "the test's work could not stop");
}

TEST(Watchdog, AForkedChildKeepsNoDeadlineOfItsParentAndWatchesItsOwn) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer ends a child of a threaded process that starts a thread";
#elif defined(__SANITIZE_ADDRESS__)
  // Once in a clean-clone CI run the child's watchdog thread never ran
  // under AddressSanitizer (the child waited out its 5 s); passes in release
  // builds and in other ASan runs. Not understood yet: skipped there.
  GTEST_SKIP() << "a thread the forked child starts did not run once under AddressSanitizer";
#endif
  StopScope parent_scope;
  // Armed at the fork, with an end that would end the child 150 ms later.
  Deadline parents(50ms, ending(parent_scope, "the parent's", 100ms, 9, "ended\n"));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    StopScope scope;
    const Deadline own(10ms, DeadlineAction{.stop = &scope, .reason = "the child's", .report = nullptr});
    const bool watched = passes_within(own, 5000ms);
    std::this_thread::sleep_for(400ms);  // past the parent's deadline and its grace
    ::_exit(watched && !parents.passed() ? 0 : 1);
  }
  parents.disarm();
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(Watchdog, AnEndDisarmedWithinItsGraceNeverComes) {
  StopScope scope;
  {
    Deadline d(5ms, ending(scope, "stop", 300ms, 7, "must not end\n"));
    ASSERT_TRUE(passes_within(d, 10s));
  }
  std::this_thread::sleep_for(500ms);  // past the grace: the process is still here
  EXPECT_EQ(scope.requested_around(), &scope);
}

TEST(TimeLimit, StopsASpinningKernelWithATimeoutAndTheNextLaunchRuns) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer delays the stop signal until an intercepted call, which a spinning kernel never "
                  "makes";
#endif
  const auto spin = cpu_device()->compile(test::c_kernel(
      "spin", "void spin(volatile float* o) { while (o[0] == 0.0f) { } }", {{"o", Access::ReadWrite, DType::F32}}, {}));
  Buffer o[] = {cpu_device()->allocate(DType::F32, 1)};
  const auto start = std::chrono::steady_clock::now();
  try {
    const TimeLimit limit(50ms, "the launch");
    spin->launch(o, {});
    ADD_FAILURE() << "the spinning launch returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Timeout);
    EXPECT_THAT(e.what(), HasSubstr("the launch ran past its time limit of 0.05 s"));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  // Outside the limit (and under a new one that does not pass) the kernel runs to its end.
  o[0].span<float>()[0] = 1.0f;
  spin->launch(o, {});
  const TimeLimit roomy(10s, "the launch");
  spin->launch(o, {});
}

}  // namespace
}  // namespace svod
