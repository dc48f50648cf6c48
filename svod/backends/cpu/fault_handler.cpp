// svod's signal handlers: the mechanism. Each handler gathers the situation
// (fault_policy.h decides what to do with it), acts on the decision, and
// writes the reports fault_report.h builds.
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <ucontext.h>
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
// What it had before svod's handler was first installed: where another
// handler (LLVM's crash recovery) sits between, it hands the signal back to
// svod's, which then gives it to this one.
struct sigaction original_action[NSIG];
bool original_saved[NSIG];
std::atomic<bool> handed_on{false};      // a kernel's fault went to the previous handler
std::atomic<bool> reported_in_flight{false};  // a fault on a device's host thread was reported
std::atomic<bool> kernels_ran{false};    // a thread of this process prepared itself for kernels
std::atomic<bool> ending{false};         // the handler decided that the process ends
std::atomic<bool> death_written{false};  // the report of a signal outside any kernel was written
bool kernel_child = false;               // this process is a child a running kernel forked

// The executable segments of the C library and the dynamic loader, found
// once before any launch (dl_iterate_phdr is no function for a handler).
struct CodeRange {
  uintptr_t begin = 0, end = 0;
};
constexpr size_t kMaxLibraryRanges = 8;
CodeRange library_code[kMaxLibraryRanges];
size_t library_ranges = 0;

// The fault this thread's handler last handed to the handler before svod's,
// which returned without moving the thread: if it comes straight back, that
// handler did not mend it. (Initial-exec: reading it allocates nothing.)
struct PassedFault {
  int signal;
  uint64_t pc, address;
};
SVOD_HOT_THREAD_LOCAL PassedFault passed_fault = {0, 0, 0};

void on_fault(int signal, siginfo_t* info, void* context);

void write_text(std::string_view text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

void write_to_stderr(const Report& r) { write_text(r.text()); }

bool in_library_code(uint64_t address) {
  for (size_t i = 0; i < library_ranges; ++i)
    if (address >= library_code[i].begin && address < library_code[i].end) return true;
  return false;
}

// Whether the stack between the interrupted stack pointer and the launch
// boundary holds a return address into the C library (or the loader): the
// library called the code that faulted back, from fflush's fopencookie
// writer, dl_iterate_phdr, qsort, and may hold a lock the process needs
// again. A word counts when it points into the library's code just after a
// call instruction; a stale one in a kernel's uninitialised local would count
// too, ending a process that could have gone on (after the same report).
bool called_back_by_library(uint64_t sp, uintptr_t top) {
  if (library_ranges == 0 || sp % 8 != 0 || sp >= top) return false;
  for (auto* word = reinterpret_cast<const uint64_t*>(sp); reinterpret_cast<uintptr_t>(word) < top; ++word)
    if (in_library_code(*word) && detail::follows_call(*word)) return true;
  return false;
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
  s.forked_child = k != nullptr && kernel_child;
  if (k != nullptr) {
    s.pc_in_kernel = k->program->owns_code(f.pc);
    // The stack is read only for a fault an instruction caused, outside the
    // kernel's own code...
    if (!s.pc_in_kernel && f.code > 0) {
      s.returns_to_kernel = k->program->owns_code(detail::leaf_return_address(f, context));
      s.tail_called = f.sp == k->resume_sp - detail::kernel_entry_depth(k->program->abi_arg_count());
    }
    // ... and, for what would stop it in its own code, up to the launch
    // boundary (unless the stack overflowed: its pointer may be past the end).
    const bool stack_whole = !address_known(f) || !below_stack_pointer(f.address, f.sp);
    if (s.pc_in_kernel && (f.code > 0 || f.signal == kKernelStopSignal) && stack_whole)
      s.called_back = called_back_by_library(f.sp, k->resume_sp);
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

// Ends the process with `signal` now, whatever handler is installed or comes
// back: the default action, and a fault re-executed or a raised signal raised
// again and unblocked; _exit as the last resort. Never returns to a loop.
void end_with(int signal, const siginfo_t* info, void* context) {
  ending.store(true);
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigaction(signal, &fallback, nullptr);
  if (info->si_code > 0 && signal != SIGTRAP) {
    // Returning re-executes the faulting instruction under the default
    // action: the core file shows the fault where it happened. (A
    // breakpoint's pc is past it: it is raised again instead.)
    sigdelset(&static_cast<ucontext_t*>(context)->uc_sigmask, signal);
    return;
  }
  raise(signal);
  sigset_t just;
  sigemptyset(&just);
  sigaddset(&just, signal);
  pthread_sigmask(SIG_UNBLOCK, &just, nullptr);
  _exit(128 + signal);
}

// The report of a fatal signal outside any kernel, once per process and
// only where kernels ran (a process that never launched one dies as it
// would without svod).
void write_death(const TrappedFault& f, bool frame_overwritten = false) {
  if (!kernels_ran.load() || death_written.exchange(true)) return;
  Report r;
  describe_death(r, Death{f, detail::last_launched_program(), frame_overwritten ? nullptr : running_op, frame_overwritten});
  write_to_stderr(r);
}

// Gives a signal svod does not stop to the handler that was there before
// svod's, by calling it, and writes svod's report first (`reported`: it was
// written already) where svod knows the process ends: the default action
// comes next; the signal is abort()'s, which never returns; the same fault
// came straight back; or that handler gave up, putting its own predecessor
// in svod's place (Python's faulthandler, LLVM's crash recovery outside a
// compile), which then gets the signal. A handler that moves the thread (a
// device's runtime stepping over a division by zero, a JVM's null check) or
// jumps out (the in-process compiler's crash recovery) mended it, and the
// process goes on.
bool is_default(const struct sigaction& a) {
  return !(a.sa_flags & SA_SIGINFO) && (a.sa_handler == SIG_DFL || a.sa_handler == SIG_IGN);
}

bool same_handler(const struct sigaction& a, const struct sigaction& b) {
  return (a.sa_flags & SA_SIGINFO) == (b.sa_flags & SA_SIGINFO) &&
         ((a.sa_flags & SA_SIGINFO) ? a.sa_sigaction == b.sa_sigaction : a.sa_handler == b.sa_handler);
}

void pass_on(int signal, siginfo_t* info, void* context, const TrappedFault& f, bool reported) {
  const bool again = f.code > 0 && passed_fault.signal == signal && passed_fault.pc == f.pc &&
                     passed_fault.address == f.address;
  passed_fault = {0, 0, 0};
  // The handler before svod's, then the one before svod's first one when
  // the first handed the signal back.
  struct sigaction chain[2] = {previous_action[signal], original_action[signal]};
  const size_t links = original_saved[signal] && !same_handler(chain[0], chain[1]) ? 2 : 1;
  for (size_t n = 0; n < links && !again; ++n) {
    const struct sigaction& next = chain[n];
    if (is_default(next)) break;
    const uint64_t pc = detail::context_pc(context);
    if (next.sa_flags & SA_SIGINFO)
      next.sa_sigaction(signal, info, context);
    else
      next.sa_handler(signal);
    if (detail::context_pc(context) != pc) return;
    struct sigaction now {};
    sigaction(signal, nullptr, &now);
    if (!((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_fault)) {
      // It put another handler in svod's place (its own predecessor) and
      // raised the signal again, or lets the fault happen again, for that
      // one: after svod's report, it gets it. Should the signal come back to
      // svod, the process ends at once.
      if (!reported) write_death(f);
      ending.store(true);
      return;
    }
    if (n + 1 == links && !reported && signal != SIGABRT && f.code > 0) {
      // A fault it let happen again: if it comes straight back, it was not mended.
      passed_fault = {signal, f.pc, f.address};
      return;
    }
  }
  if (!reported) write_death(f);
  end_with(signal, info, context);
}

// SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP and SIGABRT: traps a fault of a
// running kernel's own code, reports what svod can name and passes the rest
// on (decide_fault, pass_on). Once the handler decided that the process ends,
// any signal that comes back here ends it at once: a handler that re-raises
// (LLVM's crash recovery, outside a compile, puts svod's back and raises
// again) would otherwise pass the signal to and fro for ever.
void on_fault(int signal, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  if (ending.load()) {
    end_with(signal, info, context);
    errno = saved_errno;
    return;
  }
  KernelFrame* k = running_kernel;
  const TrappedFault f = fault_of(signal, info, context);
  if (k != nullptr && !k->intact()) {
    write_death(f, true);
    end_with(signal, info, context);
    errno = saved_errno;
    return;
  }
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
      break;
    case FaultAction::EndProcess: end_with(signal, info, context); break;
    case FaultAction::ReportAndHandOn: {
      Report r;
      const LaunchView launch = detail::launch_view(*k);
      const std::optional<Place> place = place_of(launch, f);
      const NotStopped why = !detail::kMachineTraps ? NotStopped::NoTrampoline
                             : s.forked_child       ? NotStopped::ForkedChild
                             : s.called_back        ? NotStopped::CalledBack
                                                    : NotStopped::NotOwnCode;
      describe_handed_on(r, launch, f, place ? &*place : nullptr, why);
      write_to_stderr(r);
      death_written.store(true);
      handed_on.store(true);
      pass_on(signal, info, context, f, true);
      break;
    }
    case FaultAction::ReportProgramAndHandOn:
      // Several threads may fault at once (a device's, a kernel's): the first reports.
      if (!handed_on.exchange(true)) {
        Report r;
        describe_unlaunched(r, program, f);
        write_to_stderr(r);
        death_written.store(true);
      }
      pass_on(signal, info, context, f, true);
      break;
    case FaultAction::ReportInFlightAndHandOn:
      if (!reported_in_flight.exchange(true)) {
        Report r;
        describe_in_flight(r, f, for_each_kernel_in_flight);
        write_to_stderr(r);
        death_written.store(true);
      }
      pass_on(signal, info, context, f, true);
      break;
    case FaultAction::HandOn: pass_on(signal, info, context, f, false); break;
    case FaultAction::Stop:
    case FaultAction::LetRun:
    case FaultAction::PassToPrevious: break;  // (for kKernelStopSignal only)
  }
  errno = saved_errno;
}

// kKernelStopSignal: stops the running kernel when a scope around its launch
// was asked to (kernel_stop.h). A signal svod did not send goes to the
// handler that was there before.
void on_stop(int signal, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  KernelFrame* k = running_kernel;
  if (k != nullptr && !k->intact()) k = nullptr;  // (its fault ends the process soon)
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
  if (k == nullptr || kernel_child || !k->intact()) return;  // (a forked child's exit is its own)
  Report r;
  describe_exit(r, detail::launch_view(*k), kKernelExitStatus);
  write_to_stderr(r);
  _exit(kKernelExitStatus);
}

// A child forked while a kernel ran on the forking thread (the child's one
// thread) belongs to that kernel: its faults end it and its exits are the C
// library's.
void note_fork_child() { kernel_child = running_kernel != nullptr; }

// Finds the executable segments of the C library and the dynamic loader.
void find_library_code() {
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void*) {
        const std::string_view path = info->dlpi_name != nullptr ? info->dlpi_name : "";
        const std::string_view name = path.substr(path.rfind('/') + 1);
        if (!name.starts_with("libc.so") && !name.starts_with("ld-linux") && !name.starts_with("ld64.so")) return 0;
        for (int i = 0; i < info->dlpi_phnum && library_ranges < kMaxLibraryRanges; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
          const uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
          library_code[library_ranges++] = {begin, begin + ph.p_memsz};
        }
        return 0;
      },
      nullptr);
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
  if (!original_saved[signal]) {
    original_action[signal] = previous_action[signal];
    original_saved[signal] = true;
  }
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

bool in_kernel_child() noexcept { return kernel_child; }

void prepare_thread_for_kernels() noexcept {
  const uint32_t epoch = fault_handlers_epoch();
  if (fault_handlers_seen == 0) ensure_signal_stack();
  kernels_ran.store(true, std::memory_order_relaxed);
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
  static const bool once = (find_library_code(), pthread_atfork(nullptr, nullptr, note_fork_child) == 0);
  (void)once;
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
