// Kernel faults (issues 24 and 35): a kernel that faults in its own code is
// stopped there and its launch throws KernelFault naming the signal, program,
// core_id slice, plan op and the buffer and element its address falls in or
// after; the process, the pool and other programs go on. A kernel's call of
// exit() and its kin, abort() or a failed assert() is stopped at the call.
// What cannot be stopped safely (a raised signal, a fault deep inside libc)
// is reported and ends the process: death tests, each in a child process.
#include "svod/backends/cpu/kernel_fault.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <link.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>
#include <string>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/comm/communicator.h"
#include "svod/guard/checked_mode.h"
#include "svod/guard/guarded_memory.h"
#include "svod/plan/execution_plan.h"
#include "tests/support/comm_checks.h"
#include "tests/support/rss.h"
#include "tests/support/test_support.h"
#include "tests/support/watchdog.h"

namespace svod {
namespace {

using test::c_kernel;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

class KernelTrap : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }

  // Compiles `source` (entry "k", one f32 buffer "o" of `count` elements the
  // kernel writes, core_id when `slices` > 1) and launches it.
  static void launch(const std::string& source, int64_t slices = 1, size_t count = 16) {
    auto cpu = cpu_device();
    std::vector<ScalarParam> scalars;
    if (slices > 1) scalars.push_back({"core_id", ScalarType::I32, 0, 7});
    ProgramSpec spec = c_kernel("k", source, {{"o", Access::Write, DType::F32}}, scalars);
    spec.global_size[0] = Expr::constant(slices);
    auto program = cpu->compile(spec);
    Buffer o[] = {cpu->allocate(DType::F32, count)};
    program->launch(o, {});
  }

  // The KernelFault `fn` throws (a test failure when it throws anything else
  // or returns), with its message in `message`.
  template <typename Fn>
  static KernelFaultInfo trapped(Fn&& fn, std::string* message = nullptr) {
    try {
      fn();
    } catch (const svod::KernelFault& e) {
      EXPECT_EQ(e.kind(), ErrorKind::KernelFault);
      if (message) *message = e.what();
      return e.info();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "expected a KernelFault, got: " << e.what();
      return {};
    }
    ADD_FAILURE() << "expected a KernelFault, the call returned";
    return {};
  }

};

TEST_F(KernelTrap, ANullWriteIsAKernelFaultNamingTheProgramAndTheSignal) {
  std::string message;
  const KernelFaultInfo info = trapped([] { launch("void k(float* o) { *(volatile float*)0 = 1.0f; }"); }, &message);
  EXPECT_THAT(message, HasSubstr("kernel fault: SIGSEGV (invalid memory access) at address 0x0\n"
                                 "  in program \"k\" (entry k) on CPU\n"
                                 "  the address is in the first page: a NULL pointer dereference\n"
                                 "  the kernel was stopped at the fault"));
  EXPECT_EQ(info.signal, SIGSEGV);
  EXPECT_EQ(info.signal_name, "SIGSEGV");
  EXPECT_EQ(info.address, 0u);
  EXPECT_EQ(info.cause, "null pointer");
  EXPECT_EQ(info.program, "k");
  EXPECT_EQ(info.entry, "k");
  EXPECT_EQ(info.slice, -1);
  EXPECT_FALSE(info.op.has_value());
#if defined(__x86_64__)
  EXPECT_EQ(info.access, "write");
#endif
  test::expect_a_good_cpu_launch();
}

TEST_F(KernelTrap, ANonCanonicalAddressIsNotTakenForNull) {
  std::string message;
  const KernelFaultInfo info =
      trapped([] { launch("void k(float* o) { *(volatile float*)0x8000000000000000ul = 1.0f; }"); }, &message);
  // The processor raises a general-protection fault without the address: not a NULL pointer.
  EXPECT_THAT(message, HasSubstr("SIGSEGV (invalid memory access) at an address the processor does not report"));
  EXPECT_FALSE(info.address.has_value());
  EXPECT_THAT(info.cause, HasSubstr("general protection"));
}

TEST_F(KernelTrap, AWriteFarPastItsBufferNamesTheBufferTheElementAndTheSlice) {
  // The kernel writes once, into a page reserved without access above its buffer. (A kernel
  // that walked on until it faulted would first overwrite whatever the heap holds after the
  // buffer.)
  auto cpu = cpu_device();
  Buffer o[] = {cpu->allocate(DType::F32, 16)};
  const auto start = reinterpret_cast<uintptr_t>(o[0].data());
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  // Free addresses are looked for at growing distances: under AddressSanitizer its allocator
  // reserves terabytes beyond the buffer.
  void* hole = MAP_FAILED;
  for (int shift = 20; hole == MAP_FAILED && shift < 47; ++shift) {
    const uintptr_t at = (start + (uintptr_t{1} << shift)) / page * page;
    hole = mmap(reinterpret_cast<void*>(at), page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1,
                0);
  }
  ASSERT_NE(hole, MAP_FAILED) << "no free page above the buffer";
  const uintptr_t element = (reinterpret_cast<uintptr_t>(hole) - start) / sizeof(float);
  ProgramSpec spec = c_kernel(
      "k", "void k(float* o, int core_id) { if (core_id == 2) o[" + std::to_string(element) + "ul] = 1; }",
      {{"o", Access::Write, DType::F32}}, {{"core_id", ScalarType::I32, 0, 7}});
  spec.global_size[0] = Expr::constant(4);
  auto program = cpu->compile(spec);
  std::string message;
  const KernelFaultInfo info = trapped([&] { program->launch(o, {}); }, &message);
  munmap(hole, page);
  EXPECT_THAT(message, ContainsRegex("SIGSEGV .*\n  in program \"k\" \\(entry k\\) on CPU, core_id slice 2\n"
                                     "  the address is [0-9]+ bytes \\(f32 element [0-9]+\\) past the start of buffer "
                                     "0 \\(\"o\"\\)"));
  EXPECT_EQ(info.slice, 2);
  EXPECT_EQ(info.cause, "out of bounds");
  EXPECT_EQ(info.buffer, 0u);
  EXPECT_EQ(info.buffer_name, "o");
  EXPECT_EQ(info.element, static_cast<int64_t>(element));
  test::expect_a_good_cpu_launch();
}

TEST_F(KernelTrap, TrapDivisionMisalignmentAndStackOverflowAreEachAKernelFault) {
  std::string message;
  EXPECT_EQ(trapped([] { launch("void k(float* o) { __builtin_trap(); }"); }, &message).signal, SIGILL);
  EXPECT_THAT(message, HasSubstr("SIGILL (illegal instruction"));
  // A breakpoint (int3 on x86-64, brk on AArch64) used to end the process with no report.
  const KernelFaultInfo breakpoint = trapped([] { launch("void k(float* o) { __builtin_debugtrap(); o[0] = 1; }"); },
                                             &message);
  EXPECT_EQ(breakpoint.signal, SIGTRAP);
  EXPECT_EQ(breakpoint.cause, "breakpoint");
  EXPECT_THAT(message, HasSubstr("SIGTRAP (breakpoint instruction"));
  // The divisor comes from memory, so the compiler cannot fold the division away.
  const KernelFaultInfo division = trapped([] { launch("void k(float* o) { o[0] = 7 / ((int*)o)[1]; }"); });
  EXPECT_EQ(division.signal, SIGFPE);
  EXPECT_EQ(division.cause, "arithmetic fault");
#if defined(__x86_64__)
  // An aligned vector load from an address that is not: a general-protection fault.
  const KernelFaultInfo misaligned = trapped([] {
    launch("typedef float v4 __attribute__((vector_size(16)));\n"
           "void k(float* o) { volatile char* p = (volatile char*)o + 4; o[0] = (*(volatile v4*)p)[0]; }");
  });
  EXPECT_EQ(misaligned.signal, SIGSEGV);
  EXPECT_THAT(misaligned.cause, HasSubstr("misaligned"));
#endif
  // Deep recursion runs off the thread's stack; the handler runs on the alternate stack.
  const KernelFaultInfo overflow = trapped(
      [] {
        launch("int deep(volatile int* p, int n) { volatile char pad[4096]; pad[0] = n; return deep(p, n + 1) + pad[0]; }\n"
               "void k(float* o) { o[0] = deep(0, 0); }");
      },
      &message);
  EXPECT_EQ(overflow.cause, "stack overflow");
  EXPECT_THAT(message, HasSubstr("a stack overflow"));
  EXPECT_THAT(message, Not(HasSubstr("past the start of buffer")));
  // ... and the thread's stack is whole again.
  EXPECT_EQ(trapped([] {
              launch("int deep(volatile int* p, int n) { volatile char pad[4096]; pad[0] = n; return deep(p, n + 1) + pad[0]; }\n"
                     "void k(float* o, int core_id) { o[core_id] = deep(0, 0); }",
                     8, 16);
            }).cause,
            "stack overflow");
  test::expect_a_good_cpu_launch();
}

TEST_F(KernelTrap, ARaisedSignalStillEndsTheProcessWithItsReport) {
  // (A kernel's abort() is stopped at the call: AKernelThatCallsExitOrItsKinIsStoppedAtTheCall.)
  EXPECT_DEATH(launch("int raise(int); void k(float* o) { raise(6); }"), "svod: kernel fault: SIGABRT");
}

TEST_F(KernelTrap, ALeafFunctionTheKernelCallsIsTrappedADeeperOneIsNot) {
  // memcpy faulting on the kernel's bad pointer: a leaf function that holds no lock. (Under
  // AddressSanitizer the kernel's memcpy is the sanitizer's, which calls the real one.)
  if (!test::kAddressSanitizer) {
    const KernelFaultInfo info = trapped([] {
      launch("void* memcpy(void*, const void*, unsigned long);\n"
             "void k(float* o) { memcpy(o, (const void*)64, (unsigned long)((int*)o)[0] + 64); o[1] = 2; }");
    });
    EXPECT_TRUE(info.in_called_function);
    EXPECT_EQ(info.cause, "null pointer");
    EXPECT_EQ(info.access, "read");
    test::expect_a_good_cpu_launch();
  }
  // puts holds stdout's lock when strlen faults inside it: the process cannot go on.
  EXPECT_DEATH(launch("int puts(const char*); void k(float* o) { puts((const char*)8); }"),
               "svod: kernel fault: SIGSEGV .*\n  in program \"k\".*\n.*\nsvod: the fault is not in the kernel's own code");
}

// memset as a kernel's last statement is a tail call: the kernel's frame is
// gone and memset's return address is svod's. It is recognised by the stack
// pointer, which is the kernel's at its entry: on the launching thread, on the
// pool's, and with arguments on the stack (more than the registers take).
TEST_F(KernelTrap, ALeafFunctionTheKernelTailCallsIsTrapped) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the kernel's memset is the sanitizer's, which is no leaf";
#endif
  if (test::kAddressSanitizer) GTEST_SKIP() << "the kernel's memset is the sanitizer's, which is no leaf";
  const std::string memset = "void* memset(void*, int, unsigned long);\n";
  for (int64_t slices : {1, 8}) {
    const KernelFaultInfo info = trapped([&] {
      launch(memset + "void k(float* o, int core_id) { memset((char*)o - (1l << 40), 0, (unsigned long)((int*)o)[0] + 64); }",
             slices);
    });
    EXPECT_TRUE(info.in_called_function);
    EXPECT_EQ(info.access, "write");
  }
  auto cpu = cpu_device();
  std::vector<ScalarParam> scalars;
  std::string parameters = "float* o";
  for (int i = 0; i < 12; ++i) {
    scalars.push_back({fmt::format("s{}", i), ScalarType::I64, 0, 100});
    parameters += fmt::format(", long s{}", i);
  }
  auto many = cpu->compile(c_kernel("k", memset + "void k(" + parameters + ") { memset((void*)s11, 0, (unsigned long)s10 + 64); }",
                                    {{"o", Access::Write, DType::F32}}, scalars));
  Buffer o[] = {cpu->allocate(DType::F32, 16)};
  const std::vector<int64_t> values = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 64};
  EXPECT_EQ(trapped([&] { many->launch(o, values); }).cause, "null pointer");
  test::expect_a_good_cpu_launch();
}

TEST_F(KernelTrap, FaultsOnEverySliceAtOnceFailTheLaunchOnce) {
  for (int round = 0; round < 20; ++round) {
    const KernelFaultInfo info =
        trapped([] { launch("void k(float* o, int core_id) { *(volatile float*)(8l * core_id) = 1.0f; }", 8); });
    EXPECT_EQ(info.cause, "null pointer");
    EXPECT_GE(info.slice, 0);
    EXPECT_LT(info.slice, 8);
  }
  test::expect_a_good_cpu_launch();
}

TEST_F(KernelTrap, AFaultingPlanOpIsNamedAndPoisonsThePlan) {
  auto cpu = cpu_device();
  const std::vector<BufferParam> o_param = {{"o", Access::Write, DType::F32}};
  auto fine = cpu->compile(c_kernel("fine", "void fine(float* o) { o[0] = 1.0f; }", o_param));
  auto bad = cpu->compile(c_kernel("bad", "void bad(float* o) { if (o[0] == 1.0f) *(volatile float*)8 = 1.0f; }",
                                   {{"o", Access::ReadWrite, DType::F32}}));
  auto build = [&](Buffer o) {
    ExecutionPlanBuilder b;
    const size_t slot = b.add_buffer(o, "o");
    b.add_op(KernelOp{.program = fine, .buffers = {slot}, .scalars = {}, .fixed_vars = {}, .global = {}, .local = {}},
             OpOptions{.id = "", .after_ids = {}, .after = {}, .label = "warm-up"});
    b.add_op(KernelOp{.program = bad, .buffers = {slot}, .scalars = {}, .fixed_vars = {}, .global = {}, .local = {}},
             OpOptions{.id = "layer3", .after_ids = {}, .after = {}, .label = ""});
    return b.build();
  };
  for (bool sequential : {false, true}) {
    ExecutionPlan plan = build(cpu->allocate(DType::F32, 4));
    std::string message;
    const KernelFaultInfo info = trapped([&] { plan.execute(ExecuteOptions{.sequential = sequential}); }, &message);
    EXPECT_THAT(message, HasSubstr("in program \"bad\" (entry bad) on CPU, op 1 (layer3)"));
    EXPECT_EQ(info.op, 1u);
    EXPECT_EQ(info.op_label, "layer3");
    EXPECT_TRUE(plan.poisoned());
    EXPECT_EQ(test::kind_of([&] { plan.execute(); }), ErrorKind::PlanPoisoned);
  }
  // A plan built again over a buffer the bad kernel passes runs.
  Buffer zero = cpu->allocate(DType::F32, 4);
  ExecutionPlanBuilder b;
  const size_t slot = b.add_buffer(zero, "o");
  b.add_op(KernelOp{.program = bad, .buffers = {slot}, .scalars = {}, .fixed_vars = {}, .global = {}, .local = {}});
  ExecutionPlan plan = b.build();
  plan.execute();
  EXPECT_FALSE(plan.poisoned());
}

// Two local ranks: rank 1's kernel faults before its all_reduce. It fails
// with a KernelFault naming its rank; rank 0, waiting in the collective,
// fails at once (the faulting rank aborts the communicator), never hangs.
TEST_F(KernelTrap, AFaultInACollectivePlanFailsEveryRankAndNamesTheFaultingOne) {
  auto cpu = cpu_device();
  auto bad = cpu->compile(c_kernel("bad", "void bad(float* o) { *(volatile float*)16 = o[0]; }",
                                   {{"o", Access::ReadWrite, DType::F32}}));
  KernelFaultInfo fault;
  std::string fault_message;
  const auto start = std::chrono::steady_clock::now();
  const auto errors = test::local_rank_errors(2, [&](Communicator& comm) {
    ExecutionPlanBuilder b;
    b.set_communicator(borrowed(comm));
    const size_t g = b.add_buffer(cpu->allocate(DType::F32, 4), "g");
    if (comm.rank() == 1) b.add_op(KernelOp{.program = bad, .buffers = {g}}, OpOptions{.id = "broken"});
    b.add_op(CollectiveOp{.kind = CollectiveKind::AllReduce, .buffers = {g}}, OpOptions{.id = "sum"});
    ExecutionPlan plan = b.build();
    if (comm.rank() == 0) {
      plan.execute();
      return;
    }
    fault = trapped([&] { plan.execute(); }, &fault_message);
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  ASSERT_EQ(errors.size(), 2u);
  ASSERT_TRUE(errors[0].has_value()) << "rank 0 ran its all_reduce without its peer";
  EXPECT_THAT(errors[0]->what(), HasSubstr("rank 1"));
  EXPECT_EQ(fault.rank, 1);
  EXPECT_EQ(fault.op_label, "broken");
  EXPECT_THAT(fault_message, HasSubstr("rank 1: op 0 (broken) kernel bad failed: kernel fault: SIGSEGV"));
}

TEST_F(KernelTrap, ThousandsOfFaultsLeaveTheProcessWhole) {
  auto cpu = cpu_device();
  auto bad = cpu->compile(c_kernel("bad", "void bad(float* o, long at) { o[at] = 1.0f; }",
                                   {{"o", Access::Write, DType::F32}}, {{"at", ScalarType::I64, std::nullopt, std::nullopt}}));
  Buffer o[] = {cpu->allocate(DType::F32, 16)};
  uint64_t rss_after_warmup = 0;
  for (int i = 0; i < 2000; ++i) {
    if (i == 200) rss_after_warmup = test::resident_bytes();
    // Even rounds write o[-o/4]: address 0.
    const int64_t at[] = {i % 2 == 0 ? -static_cast<int64_t>(reinterpret_cast<uintptr_t>(o[0].data()) / 4) : i % 16};
    if (i % 2 == 0) {
      const KernelFaultInfo info = trapped([&] { bad->launch(o, at); });
      ASSERT_EQ(info.cause, "null pointer") << "round " << i;
    } else {
      bad->launch(o, at);
      ASSERT_EQ(o[0].span<float>()[at[0]], 1.0f);
    }
  }
  // Each fault costs its exception and nothing that stays.
  if (!test::kAddressSanitizer) EXPECT_LT(test::resident_bytes(), rss_after_warmup + (8u << 20));
}

// A kernel that calls exit() or its kin (issues 24 and 35): exit(0) from a
// pool thread used to hang (the exit handlers waited for that very thread),
// from the launching thread to end the process with 0, and _exit(),
// quick_exit() and the exit_group system call ended it with 0 silently. The
// kernel is now stopped at the call and the launch throws; the process goes on.
TEST_F(KernelTrap, AKernelThatCallsExitOrItsKinIsStoppedAtTheCall) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "kernels are stopped at a call of exit() on x86-64 only";
#endif
  const std::pair<std::string, std::string> calls[] = {
      {"void exit(int); void k(float* o) { exit(0); }", "called exit(0)"},
      {"void quick_exit(int); void k(float* o) { quick_exit(3); }", "called quick_exit(3)"},
      {"void _exit(int); void k(float* o) { _exit(0); }", "called _exit(0)"},
      {"void _Exit(int); void k(float* o) { _Exit(-1); }", "called _Exit(-1)"},
      {fmt::format("long syscall(long, ...); void k(float* o) {{ syscall({}, 0); }}", SYS_exit_group),
       "called syscall(SYS_exit_group, 0)"},
      {fmt::format("long syscall(long, ...); void k(float* o) {{ syscall({}, 2); }}", SYS_exit),
       "called syscall(SYS_exit, 2)"},
      {"void abort(void); void k(float* o) { abort(); }", "called abort()"},
      // assert() as <assert.h> expands it without NDEBUG.
      {"void __assert_fail(const char*, const char*, unsigned, const char*);\n"
       "void k(float* o) { if (!(o[0] > 1.0f)) __assert_fail(\"o[0] > 1.0f\", \"k.c\", 2, \"k\"); }",
       "failed an assertion: o[0] > 1.0f (k.c:2, in k)"},
  };
  for (const auto& [source, cause] : calls) {
    std::string message;
    const KernelFaultInfo info = trapped([&] { launch(source); }, &message);
    EXPECT_EQ(info.cause, cause) << source;
    EXPECT_EQ(info.signal, 0);
    EXPECT_THAT(message, HasSubstr("kernel fault: the kernel " + cause +
                                   ", which would end the process\n  in program \"k\" (entry k) on CPU"));
  }
  // From a core_id slice on a pool thread.
  EXPECT_EQ(trapped([] { launch("void exit(int); void k(float* o, int core_id) { if (core_id == 1) exit(0); }", 4); })
                .slice,
            1);
  // pthread_exit() and thrd_exit() would end the launching thread, or a pool
  // thread whose slice the launch then waits for for ever.
  {
    const test::Watchdog watchdog("kernels that end their thread", std::chrono::seconds(120));
    std::string message;
    EXPECT_EQ(trapped([] { launch("void pthread_exit(void*); void k(float* o) { pthread_exit(0); }"); }, &message).cause,
              "called pthread_exit()");
    EXPECT_THAT(message, HasSubstr("kernel fault: the kernel called pthread_exit(), which would end its thread\n"
                                   "  in program \"k\" (entry k) on CPU"));
    EXPECT_EQ(trapped([] { launch("void thrd_exit(int); void k(float* o) { thrd_exit(7); }"); }).cause,
              "called thrd_exit(7)");
    for (int round = 0; round < 4; ++round) {
      const KernelFaultInfo info = trapped(
          [] { launch("void pthread_exit(void*); void k(float* o, int core_id) { if (core_id >= 2) pthread_exit(0); }", 8); });
      EXPECT_EQ(info.cause, "called pthread_exit()");
      EXPECT_GE(info.slice, 2);
    }
  }
  // syscall() for anything else is the C library's.
  launch(fmt::format("long syscall(long, ...); void k(float* o) {{ o[0] = (float)syscall({}); }}", SYS_getpid));
  test::expect_a_good_cpu_launch();
}

// A kernel that sets SIGSEGV to its default action, ignores SIGURG or blocks
// both on its thread: the next launch puts svod's handlers back and unblocks
// them, so the next fault is trapped and the next spinning kernel stopped
// (they ended the process, and spun for ever). In a child process, whose
// handlers the kernels change; the alarm ends it if a stop never comes.
TEST_F(KernelTrap, AKernelThatChangesSignalHandlersOrItsMaskLeavesSvodsInPlace) {
  EXPECT_EXIT(
      {
        ::alarm(30);
        auto faults_are_trapped = [] {
          try {
            launch("void k(float* o) { *(volatile float*)8 = 1.0f; }");
          } catch (const svod::KernelFault&) {
            return true;
          }
          return false;
        };
        auto spinning_is_stopped = [] {
#if defined(__SANITIZE_THREAD__)
          return true;  // (ThreadSanitizer holds the stop signal back while a kernel spins.)
#endif
          ProgramSpec spec = c_kernel("k", "void k(volatile float* o) { while (o[0] == 0.0f) { } }",
                                      {{"o", Access::ReadWrite, DType::F32}});
          auto program = cpu_device()->compile(spec);
          Buffer o[] = {cpu_device()->allocate(DType::F32, 4)};
          StopScope scope;
          const EnterStopScope entered(scope);
          std::thread stopper([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            scope.request(ErrorKind::Execution, "the test asked");
          });
          bool stopped = false;
          try {
            program->launch(o, {});
          } catch (const Error&) {
            stopped = true;
          }
          stopper.join();
          scope.withdraw();
          return stopped;
        };
        launch("#include <signal.h>\nvoid k(float* o) { signal(SIGSEGV, SIG_DFL); }");
        const bool after_signal = faults_are_trapped();
        launch("#include <signal.h>\n"
               "void k(float* o) { struct sigaction a = {0}; a.sa_handler = SIG_IGN; sigaction(SIGURG, &a, 0);\n"
               "  sigset_t s; sigemptyset(&s); sigaddset(&s, SIGURG); sigaddset(&s, SIGSEGV);\n"
               "  pthread_sigmask(SIG_BLOCK, &s, 0); }");
        const bool after_mask = faults_are_trapped() && spinning_is_stopped();
        std::fprintf(stderr, "trapped after signal(): %d, trapped and stopped after sigaction() and the mask: %d\n",
                     after_signal, after_mask);
        std::_Exit(after_signal && after_mask ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "trapped after signal\\(\\): 1, trapped and stopped after sigaction\\(\\) and the mask: 1");
}

// Checked mode (memory): the first element past either end faults, and the
// fault names the buffer, its size and the element, and (x86-64) whether the
// kernel read or wrote it.
TEST_F(KernelTrap, CheckedModeStopsTheFirstAccessPastEitherEndNamingTheElement) {
#if defined(__x86_64__)
  const std::string wrote = "wrote", read = "read";
#else
  const std::string wrote = "accessed", read = "accessed";
#endif
  struct Case {
    std::string source, report;
    int64_t element;
  };
  const Case cases[] = {
      {"void k(float* o) { for (int i = 0; i <= 1024; i++) o[i] = i; }",
       "  checked mode: " + wrote + " 0 bytes past the end of buffer 0 (\"o\", f32[1024]) at element 1024\n", 1024},
      {"void k(float* o) { volatile float x = o[1030]; (void)x; }",
       "  checked mode: " + read + " 24 bytes past the end of buffer 0 (\"o\", f32[1024]) at element 1030\n", 1030},
      {"void k(float* o) { o[-1] = 1; }",
       "  checked mode: " + wrote + " 4 bytes before the start of buffer 0 (\"o\", f32[1024]) at element -1\n", -1},
  };
  set_check_mode(CheckMode{.memory = true});
  for (const Case& c : cases) {
    std::string message;
    const KernelFaultInfo info = trapped([&] { launch(c.source, 1, 1024); }, &message);
    EXPECT_THAT(message, HasSubstr(c.report));
    EXPECT_EQ(info.cause, "out of bounds (checked mode)");
    EXPECT_EQ(info.buffer, 0u);
    EXPECT_EQ(info.element, c.element);
  }
  set_check_mode(CheckMode{});
}

// By default every host buffer ends at a guard page (at most 63 bytes before
// it), so the newcomer's overrun, 64 elements into a buffer of 16, and a
// small one, 4 elements past 16, are faults that name the buffer and the
// element, not heap corruption found later.
TEST_F(KernelTrap, AnOverrunOfAHostBufferFaultsAtItsGuardPageByDefault) {
#if defined(__x86_64__)
  const std::string wrote = "wrote";
#else
  const std::string wrote = "accessed";
#endif
  for (int past : {4, 48}) {
    std::string message;
    const KernelFaultInfo info = trapped(
        [&] { launch("void k(float* o) { for (int i = 0; i < " + std::to_string(16 + past) + "; i++) o[i] = i; }"); },
        &message);
    EXPECT_THAT(message, HasSubstr("  guard page: " + wrote +
                                   " 0 bytes past the end of buffer 0 (\"o\", f32[16]) at element 16\n"));
    EXPECT_EQ(info.cause, "out of bounds");
    EXPECT_EQ(info.buffer, 0u);
    EXPECT_EQ(info.element, 16);
  }
}

TEST_F(KernelTrap, HostBuffersAreFencedUnlessTurnedOff) {
  auto cpu = cpu_device();
  const auto fenced = [&](size_t count) {
    Buffer b = cpu->allocate(DType::F32, count);
    GuardHit hit{};
    return find_guard(b.first_byte() + b.bytes(), hit) && hit.guards == Guards::After;
  };
  ASSERT_TRUE(fence_host_memory()) << "SVOD_GUARD_PAGES is on by default";
  EXPECT_TRUE(fenced(16));
  EXPECT_TRUE(fenced(1 << 20));
  set_fence_host_memory(false);
  EXPECT_FALSE(fenced(16));
  EXPECT_FALSE(fenced(1 << 20));
  set_fence_host_memory(true);
}

// A handler installed over svod's after a program was loaded (LLVM's crash
// recovery does at its first compile) would see a kernel's fault first;
// note_fault_handlers_changed() makes the next launch put svod's back on top.
TEST_F(KernelTrap, AHandlerInstalledLaterIsPutBelowSvodsWhenNoted) {
  auto body = [](bool noted) {
    auto cpu = cpu_device();
    auto bad = cpu->compile(c_kernel("bad", "void bad(float* o) { *(volatile float*)0 = o[0]; }",
                                     {{"o", Access::ReadWrite, DType::F32}}));
    Buffer o[] = {cpu->allocate(DType::F32, 4)};
    test::expect_a_good_cpu_launch();  // this thread is prepared
    struct sigaction foreign {};
    foreign.sa_handler = [](int) { _exit(42); };
    sigaction(SIGSEGV, &foreign, nullptr);
    if (noted) note_fault_handlers_changed();
    try {
      bad->launch(o, {});
    } catch (const svod::KernelFault&) {
      _exit(7);
    }
  };
  EXPECT_EXIT(body(true), ::testing::ExitedWithCode(7), "");
  EXPECT_EXIT(body(false), ::testing::ExitedWithCode(42), "");
}

// A thread the kernel started runs no launch: its fault cannot be trapped,
// but the report names the program whose code faulted before the process ends.
TEST_F(KernelTrap, AFaultOnAThreadTheKernelStartedNamesTheProgram) {
  EXPECT_DEATH(launch("typedef unsigned long pthread_t;\n"
                      "int pthread_create(pthread_t*, const void*, void* (*)(void*), void*);\n"
                      "int pthread_join(pthread_t, void**);\n"
                      "static void* bad(void* p) { *(volatile int*)16 = 1; return p; }\n"
                      "void k(float* o) { pthread_t t; pthread_create(&t, 0, bad, o); pthread_join(t, 0); }"),
               "svod: kernel fault: SIGSEGV \\(invalid memory access\\) at address 0x10\n"
               "  in the code of program \"k\" \\(at 0x[0-9a-f]+\\) on a thread that runs no svod launch");
}

// Every death leaves a word: in a process where svod ran a kernel, a fatal
// signal outside any kernel ends it after one report on stderr naming the
// program launched last and what to rerun with, and with the signal. Each
// class several times, each time with a kernel the in-process compiler
// builds afresh: its crash recovery, installed then below svod's handler,
// handed a SIGABRT back to svod's, which handed it back (a spin at 100% CPU).
class LastWord : public KernelTrap {
 protected:
  // Compiles and launches a kernel no cache holds, then does `die`.
  static void after_a_kernel(const std::function<void()>& die) {
    ::alarm(30);
    const auto nonce = std::chrono::steady_clock::now().time_since_epoch().count();
    launch(fmt::format("void k(float* o) {{ o[0] = {}.0f; }}", nonce % 1000000));
    die();
  }
  static constexpr const char* kWord =
      "svod: fatal signal: .* outside any kernel\n  the last program svod launched in this process: \"k\"\n"
      "(.|\n)*svod: the process ends with the signal\nsvod: to find the cause, rerun with --check";
};

TEST_F(LastWord, HeapCorruptionFoundByTheCLibraryLaterIsReported) {
  for (int run = 0; run < 3; ++run)
    EXPECT_EXIT(after_a_kernel([] {
                  auto* block = static_cast<char*>(std::malloc(64));
                  std::free(block + 16);  // "free(): invalid pointer", then abort()
                }),
                ::testing::KilledBySignal(SIGABRT),
                ContainsRegex(std::string(kWord) + "(.|\n)*"))
        << "run " << run;
  EXPECT_EXIT(after_a_kernel([] { std::abort(); }), ::testing::KilledBySignal(SIGABRT),
              ContainsRegex("SIGABRT, raised or sent, outside any kernel\n(.|\n)*abort\\(\\) outside a kernel is most "
                            "often the C library finding its heap corrupted"));
}

TEST_F(LastWord, AFaultInSvodsOwnCodeIsReported) {
  if (test::kAddressSanitizer) GTEST_SKIP() << "the sanitizer's handler, before svod's, ends the process its own way";
  for (int run = 0; run < 3; ++run)
    EXPECT_EXIT(after_a_kernel([] { *static_cast<volatile int*>(nullptr) = 1; }), ::testing::KilledBySignal(SIGSEGV),
                ContainsRegex("svod: fatal signal: SIGSEGV \\(invalid memory access\\) at address 0x0 outside any "
                              "kernel\n(.|\n)*  at pc 0x[0-9a-f]+, in no kernel's code"))
        << "run " << run;
}

// A kernel that overruns a local array upwards writes over its return address
// and the frames above (kernels have no stack protector): the fault comes as
// it returns, outside its code.
TEST_F(LastWord, ASmashedStackIsReported) {
  if (test::kAddressSanitizer) GTEST_SKIP() << "the sanitizer reports the overrun itself";
  for (int run = 0; run < 3; ++run)
    EXPECT_EXIT(launch("void k(float* o) { volatile long a[2]; int n = 24 + (int)o[0];\n"
                       "  for (int i = 0; i < n; i++) ((volatile long*)a)[i] = 0x1000 + 8 * i; }"),
                ::testing::KilledBySignal(SIGSEGV),
                ContainsRegex("svod: fatal signal: SIGSEGV \\(invalid memory access\\) at address 0x10[0-9a-f]+ in a launch\n"
                              "(.|\n)*the frames above its own are overwritten(.|\n)*to find the cause, rerun with --check"))
        << "run " << run;
}

// A handler installed before svod's (Python's faulthandler, say) is called,
// not replaced: its report and svod's both appear, and the process ends.
// (svod's comes first when the compiler's crash recovery, below svod's and
// above it, hands the signal on by raising it again.)
TEST_F(LastWord, AHandlerInstalledBeforeSvodsIsChainedAndBothReport) {
  if (test::kAddressSanitizer) GTEST_SKIP() << "the sanitizer's handler, before svod's, ends the process its own way";
  EXPECT_EXIT(
      {
        struct sigaction foreign {};
        foreign.sa_handler = [](int signal) {
          const char text[] = "the handler before svod's reports\n";
          (void)!::write(STDERR_FILENO, text, sizeof text - 1);
          ::signal(signal, SIG_DFL);  // as faulthandler does: its predecessor back, the signal again
          ::raise(signal);
        };
        sigaction(SIGSEGV, &foreign, nullptr);
        note_fault_handlers_changed();  // the next launch puts svod's above it
        after_a_kernel([] { *static_cast<volatile int*>(nullptr) = 1; });
      },
      ::testing::KilledBySignal(SIGSEGV),
      ::testing::AllOf(HasSubstr("the handler before svod's reports\n"),
                       HasSubstr("\nsvod: fatal signal: SIGSEGV (invalid memory access) at address 0x0 outside any kernel\n")));
}

// The C library calls kernel code back holding a lock (fflush(NULL) holds
// the list of streams' lock while a fopencookie stream's writer runs,
// dl_iterate_phdr the loader's): a fault there is reported and ends the
// process, since a KernelFault would leave the lock held and the next thread
// to flush or to load would wait for ever (the alarm ends such a child).
TEST_F(LastWord, AFaultInCodeTheCLibraryCalledBackEndsTheProcessAfterItsReport) {
  if (test::kAddressSanitizer)
    GTEST_SKIP() << "after svod's report the sanitizer's handler ends the process its own way, its status its own";
  const std::string callbacks[] = {
      "#define _GNU_SOURCE\n#include <stdio.h>\n"
      "static ssize_t bad(void* c, const char* b, size_t n) { *(volatile int*)16 = 1; return (ssize_t)n; }\n"
      "void k(float* o) { cookie_io_functions_t io = {0, bad, 0, 0}; FILE* f = fopencookie(0, \"w\", io);\n"
      "  fputc('x', f); fflush(NULL); }",
      "#define _GNU_SOURCE\n#include <link.h>\n"
      "static int bad(struct dl_phdr_info* i, size_t n, void* o) { *(volatile int*)16 = 1; return 1; }\n"
      "void k(float* o) { dl_iterate_phdr(bad, o); }",
  };
  for (const std::string& source : callbacks)
    EXPECT_EXIT(
        {
          ::alarm(20);
          try {
            launch(source);
          } catch (const svod::KernelFault&) {
          }
          std::thread([] {
            std::fflush(nullptr);
            dl_iterate_phdr([](dl_phdr_info*, size_t, void*) { return 1; }, nullptr);
          }).join();
          std::_Exit(0);
        },
        ::testing::KilledBySignal(SIGSEGV),
        ContainsRegex("svod: kernel fault: SIGSEGV \\(invalid memory access\\) at address 0x10\n  in program \"k\"(.|\n)*"
                      "svod: the C library called this code back"))
        << source;
}

// A kernel that forks: its child's fault is reported and ends the child with
// the signal, which the kernel's waitpid sees; the child never goes on to run
// its parent's program after the launch (it did: the fault was trapped and
// the child's launch threw).
TEST_F(LastWord, AFaultInAChildTheKernelForkedEndsTheChild) {
  if (test::kAddressSanitizer)
    GTEST_SKIP() << "after svod's report the sanitizer's handler ends the process its own way, its status its own";
  EXPECT_EXIT(
      {
        ::alarm(20);
        auto cpu = cpu_device();
        auto program = cpu->compile(c_kernel(
            "k",
            "int fork(void); int waitpid(int, int*, int);\n"
            "void k(int* o) { int pid = fork(); if (pid == 0) { *(volatile int*)16 = 1; }\n"
            "  int status = 0; waitpid(pid, &status, 0); o[0] = status; }",
            {{"o", Access::Write, DType::I32}}));
        Buffer o[] = {cpu->allocate(DType::I32, 4)};
        try {
          program->launch(o, {});
        } catch (const svod::KernelFault&) {
          std::_Exit(5);  // (the child, going on as its parent)
        }
        const int status = o[0].span<int32_t>()[0];
        std::fprintf(stderr, "the child ended: signal %d, status %d\n", WIFSIGNALED(status) ? WTERMSIG(status) : 0,
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        std::_Exit(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      ContainsRegex("svod: the fault is in a child process the kernel forked(.|\n)*the child ended: signal"));
}

TEST_F(KernelTrap, FaultsOutsideKernelsAreLeftToTheHandlerBefore) {
  // (A sanitizer's handler, when there is one, ends the process its own way.)
  EXPECT_DEATH(
      {
        ensure_fault_reporting();
        std::raise(SIGSEGV);
      },
      Not(HasSubstr("kernel fault")));
}

}  // namespace
}  // namespace svod
