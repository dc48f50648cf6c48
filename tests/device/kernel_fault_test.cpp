// Fault attribution (issue 24, item 1): a kernel that faults is named on
// stderr — signal, program, core_id slice, plan op and the buffer its address
// falls after — before the process ends with the signal. Death tests: each
// case runs in a child process.
#include "svod/backends/cpu/kernel_fault.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <string>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/guard/checked_mode.h"
#include "svod/plan/execution_plan.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using test::c_kernel;
using ::testing::HasSubstr;
using ::testing::Not;

class KernelFault : public ::testing::Test {
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
};

TEST_F(KernelFault, ANullWriteNamesTheProgramAndTheSignal) {
  EXPECT_DEATH(launch("void k(float* o) { *(volatile float*)0 = 1.0f; }"),
               "svod: kernel fault: SIGSEGV \\(invalid memory access\\) at address 0x0\n"
               "  in program \"k\" \\(entry k\\) on CPU\n"
               "  the address is in the first page: a NULL pointer dereference");
}

TEST_F(KernelFault, ANonCanonicalAddressIsNotTakenForNull) {
#if defined(__x86_64__)
  // The processor raises a general-protection fault without the address: not a NULL pointer.
  EXPECT_DEATH(launch("void k(float* o) { *(volatile float*)0x8000000000000000ul = 1.0f; }"),
               "SIGSEGV \\(invalid memory access\\) at an address the processor does not report \\(a "
               "non-canonical pointer\\?\\)\n  in program \"k\"");
#else
  GTEST_SKIP() << "x86-64 only";
#endif
}

TEST_F(KernelFault, AWriteFarPastItsBufferNamesTheBufferTheElementAndTheSlice) {
  // The kernel writes once, into a page reserved without access above its buffer. (A kernel
  // that walked on until it faulted would first overwrite whatever the heap holds after the
  // buffer — the program the report names among it.)
  auto body = [] {
    auto cpu = cpu_device();
    Buffer o[] = {cpu->allocate(DType::F32, 16)};
    const auto start = reinterpret_cast<uintptr_t>(o[0].data());
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    // Free addresses are looked for at growing distances: under AddressSanitizer its allocator
    // reserves terabytes beyond the buffer.
    void* hole = MAP_FAILED;
    for (int shift = 20; hole == MAP_FAILED && shift < 47; ++shift) {
      const uintptr_t at = (start + (uintptr_t{1} << shift)) / page * page;
      hole = mmap(reinterpret_cast<void*>(at), page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                  -1, 0);
    }
    ASSERT_NE(hole, MAP_FAILED) << "no free page above the buffer";
    const uintptr_t element = (reinterpret_cast<uintptr_t>(hole) - start) / sizeof(float);
    ProgramSpec spec = c_kernel(
        "k", "void k(float* o, int core_id) { if (core_id == 2) o[" + std::to_string(element) + "ul] = 1; }",
        {{"o", Access::Write, DType::F32}}, {{"core_id", ScalarType::I32, 0, 7}});
    spec.global_size[0] = Expr::constant(4);
    cpu->compile(spec)->launch(o, {});
  };
  EXPECT_DEATH(body(), "SIGSEGV .*\n  in program \"k\" \\(entry k\\) on CPU, core_id slice 2\n"
                       "  the address is [0-9]+ bytes \\(f32 element [0-9]+\\) past the start of buffer 0 \\(\"o\"\\)");
}

TEST_F(KernelFault, AbortTrapDivisionAndStackOverflowAreEachNamed) {
  EXPECT_DEATH(launch("void abort(void); void k(float* o) { abort(); }"), "SIGABRT \\(the kernel called abort\\(\\)\\)");
  EXPECT_DEATH(launch("void k(float* o) { __builtin_trap(); }"), "SIGILL \\(illegal instruction");
  // The divisor comes from memory, so the compiler cannot fold the division away.
  EXPECT_DEATH(launch("void k(float* o) { o[0] = 7 / ((int*)o)[1]; }"), "SIGFPE \\(arithmetic fault");
  // Deep recursion runs off the thread's stack; the report comes from the alternate stack.
  EXPECT_DEATH(launch("int deep(volatile int* p, int n) { volatile char pad[4096]; pad[0] = n; return deep(p, n + 1) + pad[0]; }\n"
                      "void k(float* o) { o[0] = deep(0, 0); }"),
               "svod: kernel fault: SIGSEGV .*\n  in program \"k\"");
}

TEST_F(KernelFault, APlanOpIsNamedByItsId) {
  auto body = [] {
    auto cpu = cpu_device();
    const std::vector<BufferParam> o_param = {{"o", Access::Write, DType::F32}};
    auto fine = cpu->compile(c_kernel("fine", "void fine(float* o) { o[0] = 1.0f; }", o_param));
    auto bad = cpu->compile(c_kernel("bad", "void bad(float* o) { *(volatile float*)8 = 1.0f; }", o_param));
    ExecutionPlanBuilder b;
    const size_t o = b.add_buffer(cpu->allocate(DType::F32, 4), "o");
    b.add_op(PreparedKernel{.program = fine, .buffers = {o}, .scalars = {}, .fixed_vars = {}, .global = {}, .local = {}},
             OpOptions{.id = "", .after_ids = {}, .after = {}, .label = "warm-up"});
    b.add_op(PreparedKernel{.program = bad, .buffers = {o}, .scalars = {}, .fixed_vars = {}, .global = {}, .local = {}},
             OpOptions{.id = "layer3", .after_ids = {}, .after = {}, .label = ""});
    b.build().execute();
  };
  EXPECT_DEATH(body(), "in program \"bad\" \\(entry bad\\) on CPU, plan op 1 \\(layer3\\)");
}

TEST_F(KernelFault, AKernelThatCallsExitIsNamedAndNeverEndsTheProcessWithZero) {
  // exit(0) from a core_id slice on a pool thread: before, the exit handlers waited for that
  // very thread (a hang); from the launching thread the process ended with 0, silently.
  EXPECT_EXIT(launch("void exit(int); void k(float* o, int core_id) { if (core_id == 1) exit(0); }", 4),
              ::testing::ExitedWithCode(kKernelExitStatus),
              "svod: program \"k\" called exit\\(\\) while running on CPU; the process ends with status 70");
  EXPECT_EXIT(launch("void exit(int); void k(float* o) { exit(0); }"), ::testing::ExitedWithCode(kKernelExitStatus),
              "called exit");
}

// Checked mode (memory): the first element past either end faults, and the
// report names the buffer, its size and the element, and (x86-64) whether the
// kernel read or wrote it.
TEST_F(KernelFault, CheckedModeStopsTheFirstAccessPastEitherEndNamingTheElement) {
  auto checked = [](const std::string& source) {
    set_check_mode(CheckMode{.memory = true});
    launch(source, 1, 1024);
  };
#if defined(__x86_64__)
  const std::string wrote = "wrote", read = "read";
#else
  const std::string wrote = "accessed", read = "accessed";
#endif
  EXPECT_DEATH(checked("void k(float* o) { for (int i = 0; i <= 1024; i++) o[i] = i; }"),
               "  checked mode: " + wrote + " 0 bytes past the end of buffer 0 \\(\"o\", f32\\[1024\\]\\) at element 1024\n");
  EXPECT_DEATH(checked("void k(float* o) { volatile float x = o[1030]; (void)x; }"),
               "  checked mode: " + read + " 24 bytes past the end of buffer 0 \\(\"o\", f32\\[1024\\]\\) at element 1030\n");
  EXPECT_DEATH(checked("void k(float* o) { o[-1] = 1; }"),
               "  checked mode: " + wrote + " 4 bytes before the start of buffer 0 \\(\"o\", f32\\[1024\\]\\) at element -1\n");
  // Without checked mode the same overrun by one element goes unnoticed.
  set_check_mode(CheckMode{});
  launch("void k(float* o) { for (int i = 0; i <= 1024; i++) o[i] = i; }", 1, 1024);
}

TEST_F(KernelFault, FaultsOutsideKernelsAreLeftToTheHandlerBefore) {
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
