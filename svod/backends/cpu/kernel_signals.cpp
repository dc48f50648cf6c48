// A kernel's calls that change signal handlers or a thread's signal mask —
// signal(), sigaction(), sigprocmask(), pthread_sigmask() and their system
// calls through syscall() — linked by svod's loader to the functions here
// (route_kernel_signal_calls), which make the call and then note that
// handlers may have changed. A kernel that set SIGSEGV to its default, or
// blocked SIGURG, would otherwise leave it so: the next fault on that thread
// ended the process, the next spinning kernel could not be stopped. Noted,
// the next launch on each thread puts svod's handlers back on top and
// unblocks its signals (prepare_thread_for_kernels), at no cost to a launch.
#include <pthread.h>
#include <signal.h>

#include "svod/backends/cpu/kernel_fault.h"
#include "svod/guard/fault_handlers.h"
#include "svod/loader/elf_loader.h"

namespace svod {
namespace {

// SignalCall<&f>::call does what f does, then notes the change. (The C
// library declares these functions noexcept in C++.)
template <auto Fn>
struct SignalCall;
template <typename R, typename... A, R (*Fn)(A...) noexcept>
struct SignalCall<Fn> {
  static R call(A... arguments) noexcept {
    const R result = Fn(arguments...);
    note_fault_handlers_changed();
    return result;
  }
};

}  // namespace

void route_kernel_signal_calls() {
  static const bool routed = [] {
    override_host_symbol("signal", reinterpret_cast<void*>(&SignalCall<&::signal>::call));
    override_host_symbol("sysv_signal", reinterpret_cast<void*>(&SignalCall<&::sysv_signal>::call));
    override_host_symbol("__sysv_signal", reinterpret_cast<void*>(&SignalCall<&::__sysv_signal>::call));
    override_host_symbol("sigaction", reinterpret_cast<void*>(&SignalCall<&::sigaction>::call));
    override_host_symbol("sigprocmask", reinterpret_cast<void*>(&SignalCall<&::sigprocmask>::call));
    override_host_symbol("pthread_sigmask", reinterpret_cast<void*>(&SignalCall<&::pthread_sigmask>::call));
    return true;
  }();
  (void)routed;
}

}  // namespace svod
