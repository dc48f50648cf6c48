// Stopping kernels from another thread (issue 35): a StopScope asked to stop
// stops the CPU kernels launched in it, on every core_id slice and in plan
// ops run on the pool's threads, and their launches fail with the scope's
// error while the process, the pool and kernels of other scopes go on; a
// local rank spinning in a kernel is stopped when its group fails. ThreadSanitizer
// holds asynchronous signals back until the thread calls into an intercepted
// function, which a spinning kernel never does: these tests skip under it.
#include "svod/guard/kernel_stop.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <link.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/comm/communicator.h"
#include "svod/guard/watchdog.h"
#include "svod/plan/execution_plan.h"
#include "tests/support/comm_checks.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using test::c_kernel;
using ::testing::HasSubstr;

constexpr int kSlices = 4;

class KernelStop : public ::testing::Test {
 protected:
  void SetUp() override {
#if defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "ThreadSanitizer delays the stop signal until an intercepted call, which a spinning kernel never "
                    "makes";
#endif
  }

  // A kernel that spins on every core_id slice until o[0] is non-zero.
  static std::shared_ptr<const Program> spinner() {
    ProgramSpec spec = c_kernel("spin",
                                "void spin(volatile float* o, int core_id) { while (o[0] == 0.0f) { } "
                                "o[1 + core_id] = 1.0f; }",
                                {{"o", Access::ReadWrite, DType::F32}}, {{"core_id", ScalarType::I32, 0, 7}});
    spec.global_size[0] = Expr::constant(kSlices);
    return cpu_device()->compile(spec);
  }

  // Asks `scope` to stop after `delay`, from another thread.
  static std::thread stop_later(StopScope& scope, std::chrono::milliseconds delay) {
    return std::thread([&scope, delay] {
      std::this_thread::sleep_for(delay);
      scope.request(ErrorKind::Execution, "the test asked");
    });
  }
};

TEST_F(KernelStop, AStopStopsEverySliceOfALaunchAndTheNextLaunchRuns) {
  auto program = spinner();
  Buffer o[] = {cpu_device()->allocate(DType::F32, 8)};
  StopScope scope;
  const auto start = std::chrono::steady_clock::now();
  {
    const EnterStopScope entered(scope);
    std::thread stopper = stop_later(scope, std::chrono::milliseconds(100));
    try {
      program->launch(o, {});
      ADD_FAILURE() << "the spinning launch returned";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Execution);
      EXPECT_THAT(e.what(), HasSubstr("kernel stopped: program \"spin\" (entry spin) on CPU, core_id slice "));
      EXPECT_THAT(e.what(), HasSubstr(": the test asked; the launch failed"));
    }
    stopper.join();
    // Still asked: the next launch in the scope is stopped too.
    EXPECT_THROW(program->launch(o, {}), Error);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  scope.withdraw();
  for (int i = 1; i <= kSlices; ++i) EXPECT_EQ(o[0].span<float>()[i], 0.0f) << "slice " << i - 1 << " finished";
  test::expect_a_good_cpu_launch();
  // Withdrawn, the same scope runs its kernels to the end.
  const EnterStopScope entered(scope);
  o[0].span<float>()[0] = 1.0f;
  program->launch(o, {});
  for (int i = 1; i <= kSlices; ++i) EXPECT_EQ(o[0].span<float>()[i], 1.0f);
}

// How many of this process's threads have the name `name`.
int threads_named(const std::string& name) {
  int count = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string line;
    if (std::getline(comm, line) && line == name) ++count;
  }
  return count;
}

// The thread that sends stop signals is there before any stop is asked for:
// made when a thread first runs a kernel, not when a stop is needed (when
// making a thread could wait for a lock the kernel holds). In a new process.
TEST_F(KernelStop, TheSignallingThreadExistsBeforeAnyStopIsAskedFor) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const int before = threads_named("svod-stop");
        auto program = cpu_device()->compile(c_kernel("k", "void k(float* o) { o[0] = 1; }", {{"o", Access::Write, DType::F32}}));
        Buffer o[] = {cpu_device()->allocate(DType::F32, 4)};
        program->launch(o, {});
        const int after = threads_named("svod-stop");
        std::fprintf(stderr, "svod-stop threads: %d before the first launch, %d after\n", before, after);
        std::_Exit(before == 0 && after == 1 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "svod-stop threads: 0 before the first launch, 1 after");
}

// A kernel the loader calls back (dl_iterate_phdr, which holds the loader's
// lock while its callback runs) is not stopped there: abandoned, it would
// leave the lock held and the next dl_iterate_phdr, dlopen or thread start
// of any thread would wait for ever. The stop comes once the kernel is back
// in its own code (and the thread that sends it was there before the stop was
// asked for: made then, it would have waited for the lock).
TEST_F(KernelStop, AStopWaitsUntilTheKernelTheLoaderCalledBackReturnsToItsOwnCode) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::alarm(20);
        ProgramSpec spec = c_kernel("k",
                                    "typedef unsigned long size_t; struct dl_phdr_info;\n"
                                    "int dl_iterate_phdr(int (*)(struct dl_phdr_info*, size_t, void*), void*);\n"
                                    "static int spin(struct dl_phdr_info* i, size_t n, void* o) {\n"
                                    "  for (volatile long j = 0; j < 400000000; j++) { } return 1; }\n"
                                    "void k(float* o) { dl_iterate_phdr(spin, o); while (((volatile float*)o)[0] == 0.0f) { } }",
                                    {{"o", Access::ReadWrite, DType::F32}});
        auto program = cpu_device()->compile(spec);
        Buffer o[] = {cpu_device()->allocate(DType::F32, 4)};
        int status = 1;
        try {
          const TimeLimit limit(std::chrono::milliseconds(200), "the test's limit");
          program->launch(o, {});
          status = 2;
        } catch (const Error& e) {
          std::fprintf(stderr, "%s\n", e.what());
          if (e.kind() == ErrorKind::Timeout) status = 0;
        }
        // The loader's lock is free: another thread walks the loaded objects.
        std::thread([] { dl_iterate_phdr([](dl_phdr_info*, size_t, void*) { return 1; }, nullptr); }).join();
        std::_Exit(status);
      },
      ::testing::ExitedWithCode(0), "kernel stopped: program \"k\"");
}

TEST_F(KernelStop, AKernelOfAnotherScopeGoesOn) {
  auto program = spinner();
  auto cpu = cpu_device();
  // Scope b's kernel runs as one slice on its own thread: a thread waiting
  // for the pool may take up another launch's waiting slice, whatever its scope.
  auto one = cpu->compile(c_kernel("one", "void one(volatile float* o) { while (o[0] == 0.0f) { } o[1] = 1.0f; }",
                                   {{"o", Access::ReadWrite, DType::F32}}));
  Buffer stopped[] = {cpu->allocate(DType::F32, 8)};
  Buffer other[] = {cpu->allocate(DType::F32, 8)};
  StopScope a, b;
  std::atomic<bool> b_returned{false};
  std::thread runs_b([&] {
    const EnterStopScope entered(b);
    one->launch(other, {});
    b_returned = true;
  });
  {
    const EnterStopScope entered(a);
    std::thread stopper = stop_later(a, std::chrono::milliseconds(100));
    EXPECT_THROW(program->launch(stopped, {}), Error);
    stopper.join();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(b_returned.load()) << "scope b's kernel was stopped or returned by itself";
  other[0].span<float>()[0] = 1.0f;  // lets it finish
  runs_b.join();
  EXPECT_TRUE(b_returned.load());
  EXPECT_EQ(other[0].span<float>()[1], 1.0f);
}

// A plan runs its ops on the pool's threads in the scope of the thread that
// executes it: the op is stopped, named, and the plan is poisoned.
TEST_F(KernelStop, APlanOpOnThePoolIsStoppedInTheScopeOfTheExecutingThread) {
  auto cpu = cpu_device();
  ExecutionPlanBuilder b;
  const size_t o = b.add_buffer(cpu->allocate(DType::F32, 8), "o");
  const size_t other = b.add_buffer(cpu->allocate(DType::F32, 8), "other");
  b.add_op(KernelOp{.program = spinner(), .buffers = {o}}, OpOptions{.id = "spins"});
  b.add_op(KernelOp{.program = spinner(), .buffers = {other}}, OpOptions{.id = "spins too"});
  ExecutionPlan plan = b.build();
  StopScope scope;
  const EnterStopScope entered(scope);
  std::thread stopper = stop_later(scope, std::chrono::milliseconds(100));
  try {
    plan.execute();
    ADD_FAILURE() << "the spinning plan returned";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("kernel spin failed: kernel stopped: program \"spin\" (entry spin) on CPU"));
    EXPECT_THAT(e.what(), HasSubstr("the test asked"));
  }
  stopper.join();
  EXPECT_TRUE(plan.poisoned());
}

// Rank 0 spins in a kernel and never reaches the all_reduce rank 1 waits in:
// rank 1 times out, the group fails, and rank 0's kernel is stopped, so
// run_local_ranks returns instead of waiting for it for ever.
TEST_F(KernelStop, ALocalRankSpinningInAKernelIsStoppedWhenItsGroupFails) {
  auto program = spinner();
  const auto start = std::chrono::steady_clock::now();
  const auto errors = test::local_rank_errors(
      2,
      [&](Communicator& comm) {
        Buffer o = cpu_device()->allocate(DType::F32, 8);
        if (comm.rank() == 0) {
          const Buffer args[] = {o};
          program->launch(args, {});
        }
        comm.all_reduce(o, ReduceOp::Sum);
      },
      CommOptions{.timeout = std::chrono::milliseconds(500)});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  ASSERT_EQ(errors.size(), 2u);
  ASSERT_TRUE(errors[0].has_value());
  ASSERT_TRUE(errors[1].has_value());
  EXPECT_EQ(errors[1]->kind(), ErrorKind::Timeout);
  EXPECT_THAT(errors[1]->what(), HasSubstr("waiting for rank(s) 0"));
  EXPECT_EQ(errors[0]->kind(), ErrorKind::Execution);
  EXPECT_THAT(errors[0]->what(), HasSubstr("kernel stopped: program \"spin\" (entry spin) on CPU"));
  EXPECT_THAT(errors[0]->what(), HasSubstr("its local group failed: local rank 1: all_reduce"));
  test::expect_a_good_cpu_launch();
}

}  // namespace
}  // namespace svod
