// svod's signal handlers: the mechanism. Each handler gathers the situation
// (fault_policy.h decides what to do with it), acts on the decision, and
// writes the reports fault_report.h builds.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <mutex>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/backends/cpu/fault_policy.h"
#include "svod/backends/cpu/fault_report.h"
#include "svod/backends/cpu/kernel_fault.h"
#include "svod/backends/cpu/trap_machine.h"
#include "svod/base/log.h"
#include "svod/guard/kernels_in_flight.h"
#include "svod/guard/signal_stack.h"

namespace svod {

SVOD_HOT_THREAD_LOCAL KernelFrame* running_kernel = nullptr;

namespace detail {
SVOD_HOT_THREAD_LOCAL uint32_t fault_handlers_seen = 0;
}  // namespace detail

namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGABRT};

std::mutex install_mutex;
struct sigaction previous_action[NSIG];  // what each signal had before svod's handler
std::atomic<bool> handed_on{false};      // a kernel's fault went to the previous handler
std::atomic<bool> reported_in_flight{false};  // a fault on a device's host thread was reported

void write_to_stderr(const Report& r) {
  const std::string_view text = r.text();
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// The fault as the handler sees it.
TrappedFault fault_of(int signal, const siginfo_t* info, const void* context) {
  TrappedFault f{};
  f.signal = signal;
  f.code = info->si_code;
  f.address = reinterpret_cast<uint64_t>(info->si_addr);
  detail::read_machine_state(context, f);
  return f;
}

// What on_fault and on_stop know of the signal's thread: whether it runs a
// launch, and where its pc is relative to the kernel's code.
FaultSituation situation_of(const TrappedFault& f, const KernelFrame* k, const void* context) {
  FaultSituation s;
  s.signal = f.signal;
  s.code = f.code;
  s.machine_traps = detail::kMachineTraps;
  s.handed_on = handed_on.load();
  s.in_launch = k != nullptr;
  if (k != nullptr) {
    s.pc_in_kernel = k->program->owns_code(f.pc);
    // The stack is read only for a fault an instruction caused, outside the
    // kernel's own code.
    if (!s.pc_in_kernel && f.code > 0) {
      s.returns_to_kernel = k->program->owns_code(detail::leaf_return_address(f, context));
      s.tail_called = f.sp == k->resume_sp - detail::kernel_entry_depth(k->program->abi_arg_count());
    }
  }
  return s;
}

// Makes the handler return to the launch boundary, where svod_trap_call
// returns 1 and the launch throws (throw_kernel_fault).
void resume(KernelFrame& k, const TrappedFault& f, bool in_callee, const StopScope* stopped, void* context) {
  k.fault = f;
  k.fault.in_callee = in_callee;
  k.stopped = stopped;
  detail::resume_at_launch_boundary(context, k.resume_sp);
}

// Puts back the handler that was there before svod's for `signal`, so the
// signal happens again under it: a fault re-executes the faulting instruction
// on return, a sent or raised signal is raised again by on_fault. The handler
// below may recover (the compiler's crash recovery does): the next launch on
// each thread puts svod's back.
void hand_on(int signal) {
  sigaction(signal, &previous_action[signal], nullptr);
  note_fault_handlers_changed();
}

// SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP and SIGABRT: traps a fault of a
// running kernel's own code, reports what svod can name and hands the rest
// on (decide_fault). Once a kernel's fault was handed on, anything that comes
// back here ends the process with the default action: a handler that
// re-raises (LLVM's crash recovery does, outside a compile) would otherwise
// pass the signal to and fro for ever.
void on_fault(int signal, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  KernelFrame* k = running_kernel;
  const TrappedFault f = fault_of(signal, info, context);
  FaultSituation s = situation_of(f, k, context);
  const char* program = nullptr;
  if (k == nullptr && f.code > 0) {
    program = detail::registered_program_at(f.pc);
    s.in_registered_code = program != nullptr;
    s.kernels_in_flight = for_each_kernel_in_flight(nullptr, nullptr) > 0;
    const struct sigaction& next = previous_action[signal];
    s.only_default_after =
        !(next.sa_flags & SA_SIGINFO) && (next.sa_handler == SIG_DFL || next.sa_handler == SIG_IGN);
  }
  switch (decide_fault(s)) {
    case FaultAction::Trap:
      resume(*k, f, !s.pc_in_kernel, nullptr, context);
      errno = saved_errno;
      return;
    case FaultAction::EndProcess: {
      struct sigaction fallback {};
      fallback.sa_handler = SIG_DFL;
      sigaction(signal, &fallback, nullptr);
      break;
    }
    case FaultAction::ReportAndHandOn: {
      Report r;
      const LaunchView launch = detail::launch_view(*k);
      const std::optional<Place> place = place_of(launch, f);
      describe_handed_on(r, launch, f, place ? &*place : nullptr, detail::kMachineTraps);
      write_to_stderr(r);
      handed_on.store(true);
      hand_on(signal);
      break;
    }
    case FaultAction::ReportProgramAndHandOn:
      // Several threads may fault at once (a device's, a kernel's): the first reports.
      if (!handed_on.exchange(true)) {
        Report r;
        describe_unlaunched(r, program, f);
        write_to_stderr(r);
      }
      hand_on(signal);
      break;
    case FaultAction::ReportInFlightAndHandOn:
      if (!reported_in_flight.exchange(true)) {
        Report r;
        describe_in_flight(r, f, for_each_kernel_in_flight);
        write_to_stderr(r);
      }
      hand_on(signal);
      break;
    case FaultAction::HandOn: hand_on(signal); break;
    case FaultAction::Stop:
    case FaultAction::LetRun:
    case FaultAction::PassToPrevious: break;  // (for kKernelStopSignal only)
  }
  if (info->si_code <= 0) raise(signal);
  errno = saved_errno;
}

// kKernelStopSignal: stops the running kernel when a scope around its launch
// was asked to (kernel_stop.h). A signal svod did not send goes to the
// handler that was there before.
void on_stop(int signal, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  KernelFrame* k = running_kernel;
  const TrappedFault f = fault_of(signal, info, context);
  FaultSituation s = situation_of(f, k, context);
  const StopScope* launched_in = k == nullptr ? nullptr : k->slice >= 0 ? k->stop : launch_stop_scope();
  const StopScope* scope = launched_in != nullptr ? launched_in->requested_around() : nullptr;
  s.stop_requested = scope != nullptr;
  s.sent_by_this_process = info->si_code == SI_TKILL && info->si_pid == getpid();
  switch (decide_fault(s)) {
    case FaultAction::Stop: resume(*k, f, false, scope, context); break;
    case FaultAction::PassToPrevious: {
      const struct sigaction& before = previous_action[signal];
      if (before.sa_flags & SA_SIGINFO)
        before.sa_sigaction(signal, info, context);
      else if (before.sa_handler != SIG_DFL && before.sa_handler != SIG_IGN)
        before.sa_handler(signal);
      break;
    }
    case FaultAction::LetRun:
    case FaultAction::Trap:
    case FaultAction::ReportAndHandOn:
    case FaultAction::ReportProgramAndHandOn:
    case FaultAction::ReportInFlightAndHandOn:
    case FaultAction::HandOn:
    case FaultAction::EndProcess: break;  // (for fault signals only)
  }
  errno = saved_errno;
}

// exit() (or quick_exit()) called by a kernel whose calls svod does not route
// (a shared library's, route_kernel_exits): the process would run its exit handlers and
// static destructors on the kernel's thread, and the thread pool's would wait
// for that very thread. Registered once, after the runtime's statics, so it
// runs before them: a kernel that exits is named and the process ends at
// once with kKernelExitStatus — never a silent 0, never a hang.
void on_exit() {
  const KernelFrame* k = running_kernel;
  if (k == nullptr) return;
  Report r;
  describe_exit(r, detail::launch_view(*k), kKernelExitStatus);
  write_to_stderr(r);
  _exit(kKernelExitStatus);
}

bool ours(const struct sigaction& a) {
  return (a.sa_flags & SA_SIGINFO) && (a.sa_sigaction == on_fault || a.sa_sigaction == on_stop);
}

// Puts `handler` on top for `signal` unless it is there, keeping the one it
// replaces as the previous handler.
void install(int signal, void (*handler)(int, siginfo_t*, void*), int flags) {
  struct sigaction current {};
  if (sigaction(signal, nullptr, &current) != 0 || ours(current)) return;
  struct sigaction action {};
  action.sa_sigaction = handler;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | flags;
  sigemptyset(&action.sa_mask);
  sigaction(signal, &action, &previous_action[signal]);
}

}  // namespace

namespace detail {

namespace {
uintptr_t entry_depth[kMaxKernelArgs + 1];
}  // namespace

void measure_kernel_entry_depths() noexcept {
  static const bool measured = [] {
    const uint64_t zeros[kMaxKernelArgs] = {};
    for (size_t n = 0; n <= kMaxKernelArgs; ++n) {
      uintptr_t resume_sp = 0;
      svod_trap_call(kKernelCallers[n], reinterpret_cast<void*>(&svod_trap_entry_probe), zeros, &resume_sp);
      entry_depth[n] = resume_sp - svod_trap_probed_sp;
    }
    return true;
  }();
  (void)measured;
}

uintptr_t kernel_entry_depth(size_t n) noexcept { return entry_depth[n]; }

void prepare_thread_for_kernels() noexcept {
  const uint32_t epoch = fault_handlers_epoch();
  if (fault_handlers_seen == 0) ensure_signal_stack();
  // A kernel may have blocked them on this thread (kernel_signals.cpp): a
  // fault would then end the process, and a stop never come.
  sigset_t ours;
  sigemptyset(&ours);
  for (int signal : kSignals) sigaddset(&ours, signal);
  sigaddset(&ours, kKernelStopSignal);
  pthread_sigmask(SIG_UNBLOCK, &ours, nullptr);
  try {
    // At every change of the epoch, not only the first: a forked child's
    // first launch starts its own signalling thread here.
    register_kernel_thread();
  } catch (const std::exception&) {
    // (No memory for the entry: this thread's kernels cannot be stopped.)
  }
  try {
    ensure_fault_reporting();
  } catch (const std::exception&) {
    // (A mutex that cannot be locked: faults are then left to the handler on top.)
  }
  fault_handlers_seen = epoch;
}

}  // namespace detail

void ensure_fault_reporting() {
  detail::measure_kernel_entry_depths();
  std::lock_guard lock(install_mutex);
  // exit() and quick_exit() both; _exit() and exit_group() end the process
  // without running anything (svod run --isolate names them).
  static const bool exit_hook = std::atexit(on_exit) == 0 && std::at_quick_exit(on_exit) == 0;
  (void)exit_hook;
  if constexpr (!detail::kMachineTraps) {
    static const bool refused = (log_warning("kernels are stopped at a fault or by a time limit only on x86-64 and "
                                             "AArch64: here a kernel's fault ends the process after its report, and "
                                             "a running kernel is not stopped"),
                                 true);
    (void)refused;
  }
  for (int signal : kSignals) install(signal, on_fault, 0);
  // A stop signal that finds a thread in a system call restarts the call.
  install(kKernelStopSignal, on_stop, SA_RESTART);
}

}  // namespace svod
