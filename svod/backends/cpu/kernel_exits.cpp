// A kernel's calls that would end the process — exit() and its kin, abort(),
// a failed assert(), the exit system calls through syscall() — or its thread
// (pthread_exit(), thrd_exit(): the launch would wait for the thread's slice
// for ever, or the launching thread would be gone from under it), linked by
// svod's loader to the functions here (route_kernel_exits), which leave the
// kernel at the call as the fault handler leaves it at a fault.
#include <pthread.h>
#include <sys/syscall.h>
#include <threads.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "svod/backends/cpu/kernel_fault.h"
#include "svod/backends/cpu/trap_machine.h"
#include "svod/guard/fault_handlers.h"
#include "svod/loader/elf_loader.h"

// glibc's, which <assert.h> declares only without NDEBUG.
extern "C" void __assert_fail(const char* assertion, const char* file, unsigned int line, const char* function) noexcept
    __attribute__((__noreturn__));

namespace svod {
namespace {

#if defined(__x86_64__)
// Why the kernel running on this thread was left at a call (read when its
// launch throws, on the same thread).
thread_local std::string leaving_cause;

// On a thread that runs a launch, abandons the kernel at a call that would
// end the process, as at a fault, for the cause `cause()` makes; elsewhere
// (a thread the kernel started) returns, and the caller does what the C
// library would, as it does in a child process the kernel forked (whose
// launch boundary is its parent's). The cause goes into leaving_cause in a statement of its own,
// its temporaries gone before the jump (which runs no destructor). Only
// loaded kernels reach the functions below (route_kernel_exits), from their
// own code or, where the compiler made the call a tail call, from the
// launch's caller.
template <typename Cause>
void leave_kernel(Cause&& cause, bool ends_thread = false) {
  KernelFrame* k = running_kernel;
  if (k == nullptr || detail::in_kernel_child()) return;
  leaving_cause = cause();
  k->fault = TrappedFault{};
  k->fault.call_cause = leaving_cause.c_str();
  k->fault.call_ends_thread = ends_thread;
  detail::svod_trap_unwind(k->resume_sp);
}

// What route_kernel_exits() puts in place of the C library's functions.
[[noreturn]] void kernel_exit(int status) {
  leave_kernel([&] { return fmt::format("called exit({})", status); });
  std::exit(status);
}
[[noreturn]] void kernel_quick_exit(int status) {
  leave_kernel([&] { return fmt::format("called quick_exit({})", status); });
  std::quick_exit(status);
}
[[noreturn]] void kernel_underscore_exit(int status) {
  leave_kernel([&] { return fmt::format("called _exit({})", status); });
  ::_exit(status);
}
[[noreturn]] void kernel_underscore_upper_exit(int status) {
  leave_kernel([&] { return fmt::format("called _Exit({})", status); });
  std::_Exit(status);
}
[[noreturn]] void kernel_abort() {
  leave_kernel([] { return std::string("called abort()"); });
  std::abort();
}
// assert() in a kernel (glibc's __assert_fail).
[[noreturn]] void kernel_assert_fail(const char* assertion, const char* file, unsigned line, const char* function) {
  leave_kernel([&] { return fmt::format("failed an assertion: {} ({}:{}, in {})", assertion, file, line, function); });
  __assert_fail(assertion, file, line, function);
}
[[noreturn]] void kernel_pthread_exit(void* value) {
  leave_kernel([] { return std::string("called pthread_exit()"); }, true);
  ::pthread_exit(value);
}
[[noreturn]] void kernel_thrd_exit(int result) {
  leave_kernel([&] { return fmt::format("called thrd_exit({})", result); }, true);
  ::thrd_exit(result);
}
// syscall(number, ...): six argument words at most, in registers and then on
// the stack as a variadic call passes them.
// A change of signal handlers or of the thread's mask is noted as the C
// library's functions are (route_kernel_signal_calls).
long kernel_syscall(long number, long a, long b, long c, long d, long e, long f) {
  if (number == SYS_exit_group || number == SYS_exit)
    leave_kernel([&] { return fmt::format("called syscall({}, {})", number == SYS_exit ? "SYS_exit" : "SYS_exit_group", a); });
  const long result = ::syscall(number, a, b, c, d, e, f);
  if (number == SYS_rt_sigaction || number == SYS_rt_sigprocmask) note_fault_handlers_changed();
  return result;
}
#endif

}  // namespace

void route_kernel_exits() {
#if defined(__x86_64__)
  static const bool routed = [] {
    override_host_symbol("exit", reinterpret_cast<void*>(&kernel_exit));
    override_host_symbol("quick_exit", reinterpret_cast<void*>(&kernel_quick_exit));
    override_host_symbol("_exit", reinterpret_cast<void*>(&kernel_underscore_exit));
    override_host_symbol("_Exit", reinterpret_cast<void*>(&kernel_underscore_upper_exit));
    override_host_symbol("syscall", reinterpret_cast<void*>(&kernel_syscall));
    override_host_symbol("abort", reinterpret_cast<void*>(&kernel_abort));
    override_host_symbol("__assert_fail", reinterpret_cast<void*>(&kernel_assert_fail));
    override_host_symbol("pthread_exit", reinterpret_cast<void*>(&kernel_pthread_exit));
    override_host_symbol("thrd_exit", reinterpret_cast<void*>(&kernel_thrd_exit));
    return true;
  }();
  (void)routed;
#endif
}

}  // namespace svod
