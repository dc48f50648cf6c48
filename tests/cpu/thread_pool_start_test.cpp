// The thread pool started when the CPU device opens (issue 36): set up in the
// background without a launch, with no worker thread until one is needed;
// a fork right after the open leaves the child a whole pool, one after a
// launch a child that can exit; exit right after the open does not wait for
// ever. Each test runs in a fresh process (the
// threadsafe death-test style re-executes the binary), since other tests in
// this binary have used the pool already.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/base/thread_pool.h"
#include "svod/base/thread_pool_start.h"

namespace svod {
namespace {

// The process's thread count, from /proc/self/status.
int threads_now() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

// How many threads of the pool run parallel_for's items: each item waits
// (up to 30 s) until a second thread has taken one, so on a pool of two or
// more the answer is at least 2 however loaded the machine is.
size_t threads_in_a_parallel_for() {
  std::mutex mutex;
  std::set<std::thread::id> seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  parallel_for(64, [&](size_t) {
    {
      std::lock_guard lock(mutex);
      seen.insert(std::this_thread::get_id());
    }
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard lock(mutex);
        if (seen.size() >= 2) return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  return seen.size();
}

class ThreadPoolStartTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

// Opening the device sets the pool's arena up, with no launch, and leaves no
// thread behind: the workers wait for a parallel launch.
TEST_F(ThreadPoolStartTest, OpeningTheDeviceSetsThePoolUpWithoutAWorker) {
  EXPECT_EXIT(
      {
        std::thread([] {}).join();  // any thread a sanitizer starts with the first one, counted
        const int before = threads_now();
        auto cpu = cpu_device();
        finish_thread_pool_start();
        const bool active = thread_pool().is_active();
        const int after = threads_now();
        std::exit(active && after == before ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// A process that opens the device and ends at once (the start may be under
// way) exits, joining the pool or not.
TEST_F(ThreadPoolStartTest, ExitRightAfterTheDeviceOpens) {
  EXPECT_EXIT(
      {
        auto cpu = cpu_device();
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        auto cpu = cpu_device();
        skip_pool_join_at_exit();
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// A fork right after the open (the start may be under way: the fork waits
// for it) gives the child a pool that runs on all its threads and a clean
// exit, and the parent's pool still works.
TEST_F(ThreadPoolStartTest, ForkRightAfterTheDeviceOpensLeavesTheChildAWholePool) {
  if (thread_count() < 2) GTEST_SKIP() << "a pool of one thread";
  EXPECT_EXIT(
      {
        auto cpu = cpu_device();
        const pid_t child = ::fork();
        if (child == 0) std::exit(threads_in_a_parallel_for() >= 2 ? 0 : 3);
        int status = 0;
        while (::waitpid(child, &status, 0) < 0) {
        }
        const bool child_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        std::exit(child_ok && threads_in_a_parallel_for() >= 2 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// Launches 16 core_id slices that each write their index + 1; whether all did.
bool core_id_launch_works() {
  auto cpu = cpu_device();
  ProgramSpec spec;
  spec.entry = "fill";
  spec.source = "void fill(int* restrict o, int core_id) { o[core_id] = core_id + 1; }";
  spec.buffers = {{"o", Access::Write}};
  spec.scalars = {{"core_id", ScalarType::I32}};
  spec.global_size[0] = Expr::constant(16);
  auto program = cpu->compile(spec);
  Buffer o = cpu->allocate(DType::I32, 16);
  Buffer buffers[] = {o};
  program->launch(buffers, {});
  for (int i = 0; i < 16; ++i)
    if (o.span<int32_t>()[i] != i + 1) return false;
  return true;
}

// A fork after a parallel launch: the child's copy of oneTBB lists the
// parent's workers but has none of their threads; it still runs parallel
// work (on its one thread) and exits, rather than wait at exit for workers
// that are not there. Waited for up to a minute, then killed.
TEST_F(ThreadPoolStartTest, ForkAfterALaunchLeavesAChildThatExits) {
  EXPECT_EXIT(
      {
        auto cpu = cpu_device();
        parallel_for(64, [](size_t) { std::this_thread::sleep_for(std::chrono::microseconds(200)); });
        const pid_t child = ::fork();
        if (child == 0) {
          int sum = 0;
          parallel_for(8, [&](size_t) { __atomic_add_fetch(&sum, 1, __ATOMIC_RELAXED); });
          std::exit(sum == 8 ? 0 : 3);
        }
        int status = 0;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (::waitpid(child, &status, WNOHANG) == 0) {
          if (std::chrono::steady_clock::now() > deadline) {
            ::kill(child, SIGKILL);
            std::exit(2);
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        std::exit(WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// Whether making a program started the pool's workers (all but the calling
// thread) before any launch, and a launch then runs.
bool workers_start_with_a_program() {
  std::thread([] {}).join();  // any thread a sanitizer starts with the first one, counted
  auto cpu = cpu_device();
  finish_thread_pool_start();
  const int before = threads_now();
  ProgramSpec spec;
  spec.entry = "nothing";
  spec.source = "void nothing(int* restrict o, int core_id) {}";
  spec.buffers = {{"o", Access::Write}};
  spec.scalars = {{"core_id", ScalarType::I32}};
  auto program = cpu->compile(spec);
  finish_thread_pool_start();  // the workers' start asked for
  // oneTBB may create workers after the first from its own threads.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (threads_now() < before + thread_count() - 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return threads_now() >= before + thread_count() - 1 && core_id_launch_works();
}

// Making a program starts the pool's workers on a thread of svod's, so that
// the first launch does not wait for oneTBB to create them.
TEST_F(ThreadPoolStartTest, MakingAProgramStartsTheWorkersAheadOfTheFirstLaunch) {
  if (thread_count() < 2) GTEST_SKIP() << "a pool of one thread";
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer builds start the workers at the first launch (thread_pool.cpp)";
#endif
  EXPECT_EXIT(std::exit(workers_start_with_a_program() ? 0 : 1), ::testing::ExitedWithCode(0), "");
}

// The thread that makes a program is set up for kernels then (its alternate
// signal stack, for a fault report on a stack overflow), not at its first
// launch, which a freshly loaded model's first call would otherwise pay for.
TEST_F(ThreadPoolStartTest, MakingAProgramSetsTheThreadUpForKernels) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer gives every thread an alternate signal stack of its own";
#endif
  auto has_signal_stack = [] {
    stack_t current{};
    return ::sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE);
  };
  bool before = true, after = false;
  std::thread([&] {
    before = has_signal_stack();
    ProgramSpec spec;
    spec.entry = "nothing";
    spec.source = "void nothing(int* restrict o, int core_id) {}";
    spec.buffers = {{"o", Access::Write}};
    spec.scalars = {{"core_id", ScalarType::I32}};
    auto program = cpu_device()->compile(spec);
    after = has_signal_stack();
  }).join();
  EXPECT_FALSE(before) << "a new thread has no alternate signal stack until svod gives it one";
  EXPECT_TRUE(after);
}

// A thread that makes a program once the pool is set up is registered with
// oneTBB then, and its launches work as any other's; and so do those of a
// program made before the start has finished.
TEST_F(ThreadPoolStartTest, LaunchesAfterTheStartAndDuringIt) {
  EXPECT_EXIT(
      {
        auto cpu = cpu_device();
        finish_thread_pool_start();
        std::exit(core_id_launch_works() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(std::exit(core_id_launch_works() ? 0 : 1), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace svod
