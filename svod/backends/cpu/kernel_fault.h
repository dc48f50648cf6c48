// Fault containment for CPU kernels. While a kernel runs on a thread, a
// KernelFrame on that thread names it. A fault there — SIGSEGV, SIGBUS,
// SIGFPE or SIGILL caused by an instruction of the program's own code (what
// svod's loader mapped, or the shared library's executable segments), or by a
// leaf function it called such as memcpy (or jumped to as its last call,
// trap_machine.h's kernel_entry_depth) — is a trap: the handler records it
// in the frame and resumes the thread at the launch boundary (the trampoline
// that called the kernel), and the launch throws KernelFault with the
// program, the core_id slice, the plan op (running_op.h), the signal and
// address, and the buffer argument and element the address falls in or near.
// The process goes on: generated kernels take no locks and allocate nothing,
// so abandoning one mid-way leaves only its half-written outputs (a
// shared_library kernel that calls malloc or takes a lock is not safe to
// abandon, see docs/SECURITY.md).
//
// Any other fault while a kernel runs (svod's own code, a deeper libc frame,
// a signal sent or raised, such as a shared library's abort()) prints the same report to
// stderr and then goes on as the signal would have without svod: the handler
// that was installed before (Python's faulthandler, LLVM's crash recovery, a
// sanitizer's), else the default action, which ends the process (exit status
// 128 + the signal number). Faults outside kernels go straight to the
// previous handler, except a fault in code svod loaded on a thread that runs
// no launch (a thread the kernel started), which is reported naming the
// program first (register_kernel_code), and a fault on a thread svod did not
// start while a device runs kernels on host threads (PoCL's OpenCL kernels),
// which is reported naming those kernels (kernels_in_flight.h; a memory
// fault, or any fault nothing but the default action would handle after
// svod's: PoCL steps over a kernel's division by zero itself). Kernels run
// on an alternate signal stack too, so a stack overflow is trapped like any
// other fault. The same resumption stops a kernel whose StopScope was asked
// to stop (kernel_stop.h): kKernelStopSignal found the thread in the
// kernel's own code, and the launch throws the scope's Error instead. Traps and stops need
// a trampoline for the machine (trap_machine.h: x86-64 and AArch64);
// elsewhere every fault is reported and ends the process, no kernel is
// stopped, and the first program or device made logs that once.
//
// The parts: the handlers and their installation (fault_handler.cpp), what
// they do decided by fault_policy.h, the reports' texts (fault_report.h) and
// where an address lies (fault_location.h), the trampoline per architecture
// (trap_machine.h), and the errors a launch throws afterwards (fault_throw.cpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "svod/backends/cpu/fault_location.h"
#include "svod/backends/cpu/trap_machine.h"
#include "svod/guard/fault_handlers.h"
#include "svod/guard/kernel_stop.h"
#include "svod/guard/running_op.h"
#include "svod/program/cpu_abi.h"

namespace svod {

class CpuProgram;

struct KernelFrame {
  // Leaves resume_sp and fault unset: the trampoline and the handler write
  // them before anything reads them (no stores on the launch path). A launch
  // of one (slice -1) leaves `stop` unset too: the handler reads
  // launch_stop_scope() on the launching thread instead.
  KernelFrame(const CpuProgram* p, const uint64_t* a, const RunningOp* o) noexcept
      : program(p), seal(sealed(p)), args(a), slice(-1), op(o) {}
  KernelFrame(const CpuProgram* p, const uint64_t* a, int64_t s, const RunningOp* o, const StopScope* st) noexcept
      : program(p), seal(sealed(p)), args(a), slice(s), op(o), stop(st) {}

  // Whether the frame is as its launch made it: a kernel that overruns a
  // local array upwards writes over the frames above its own, this one
  // included, and the handler must not follow the pointers it would find.
  bool intact() const noexcept { return seal == sealed(program); }
  static uintptr_t sealed(const CpuProgram* p) noexcept {
    return reinterpret_cast<uintptr_t>(p) ^ uintptr_t{0x5eed'c0de'f7a3'e1b9};
  }

  const CpuProgram* program;
  uintptr_t seal;           // the program's address, sealed (intact())
  const uint64_t* args;     // the ABI words: buffer addresses, then scalars
  int64_t slice;            // the core_id slice, or -1 for a launch of one
  const RunningOp* op;      // the plan op, when a plan launched it
  const StopScope* stop;    // a core_id slice's: the launch's stop scope (kernel_stop.h)
  uintptr_t resume_sp;      // the trampoline's stack at the launch boundary
  TrappedFault fault;       // set when the handler trapped a fault, or stopped the kernel
  const StopScope* stopped; // the requested scope, when it stopped the kernel (fault.signal is kKernelStopSignal)
};

extern SVOD_HOT_THREAD_LOCAL KernelFrame* running_kernel;

namespace detail {
// The fault_handlers_epoch() this thread was last prepared for (0: never).
extern SVOD_HOT_THREAD_LOCAL uint32_t fault_handlers_seen;
// This thread's alternate signal stack, and svod's fault handler on top.
void prepare_thread_for_kernels() noexcept;
}  // namespace detail

// Sets the running kernel for its lifetime: two thread-local stores and an
// epoch check when no fault happens.
class KernelFrameScope {
 public:
  explicit KernelFrameScope(KernelFrame& frame) noexcept : previous_(running_kernel) {
    if (detail::fault_handlers_seen != fault_handlers_epoch()) [[unlikely]]
      detail::prepare_thread_for_kernels();
    running_kernel = &frame;
  }
  ~KernelFrameScope() { running_kernel = previous_; }
  KernelFrameScope(const KernelFrameScope&) = delete;
  KernelFrameScope& operator=(const KernelFrameScope&) = delete;

 private:
  KernelFrame* previous_;
};

namespace detail {
// Throws the KernelFault for a trapped frame (one left at a call of exit()
// or its kin included), or the stop scope's Error for a stopped one (out of
// line and cold; fault_throw.cpp).
[[noreturn]] void throw_kernel_fault(const KernelFrame& frame);
// The frame as the reports and locate() read it; no allocation, for the
// fault handler too.
LaunchView launch_view(const KernelFrame& frame) noexcept;
// The name of the registered program whose code holds `pc`, or nullptr; no
// locks, for the fault handler (kernel_code.cpp).
const char* registered_program_at(uintptr_t pc) noexcept;
}  // namespace detail

// Runs the kernel of `frame` with its n ABI words: returns when it returned,
// throws KernelFault when it faulted and was trapped, the stop scope's Error
// when it was stopped.
inline void run_kernel(KernelFrame& frame, void* entry, size_t n) {
  const KernelFrameScope running(frame);
  if (detail::svod_trap_call(detail::kKernelCallers[n], entry, frame.args, &frame.resume_sp) != 0) [[unlikely]]
    detail::throw_kernel_fault(frame);
}

// Registers a program's machine code, `code`, under its name for the fault
// handler: a fault in that code on a thread that runs no launch (a thread the
// kernel started, code it left for later) cannot be trapped, but the report
// the handler prints before the process ends names the program. Returns
// `owner` wrapped so that the registration ends when the last reference goes.
// At most kMaxRegisteredPrograms programs are named at once; the others fault
// without a name.
inline constexpr size_t kMaxRegisteredPrograms = 4096;
std::shared_ptr<const void> register_kernel_code(std::shared_ptr<const void> owner,
                                                 std::span<const std::span<const std::byte>> code,
                                                 std::string_view name);
// The tag of what register_kernel_code returned: names the program in
// note_launched (0 when it got no slot).
uint64_t registered_code_tag(const std::shared_ptr<const void>& registration) noexcept;

namespace detail {
extern std::atomic<uint64_t> last_launched_tag;
// The name of the program launched last in the process while it is still
// registered, else nullptr; no locks, for the report of a fatal signal
// outside any kernel (kernel_code.cpp).
const char* last_launched_program() noexcept;
// Whether this process is a child that a running kernel forked (a
// pthread_atfork handler notes it): such a child's faults and exits are not
// stopped at the launch boundary, which is its parent's.
bool in_kernel_child() noexcept;
}  // namespace detail

// Notes the program a launch runs, for that report: a load, and a store only
// when another program ran last (so a loop of one program writes nothing).
inline void note_launched(uint64_t tag) noexcept {
  if (detail::last_launched_tag.load(std::memory_order_relaxed) != tag) detail::last_launched_tag.store(tag, std::memory_order_relaxed);
}

// Makes the kernels svod's loader links from now on call svod's versions of
// exit(), quick_exit(), _exit(), _Exit(), abort(), assert()'s __assert_fail,
// pthread_exit(), thrd_exit() and syscall(): called from a launch's kernel,
// they (and the exit and exit_group system calls) stop the kernel at the call
// as at a fault, and the launch throws KernelFault (cause "called _exit(0)",
// "failed an assertion: i < n (k.c:3, in k)", "called pthread_exit()");
// called anywhere else (a thread the kernel started) they do what the C
// library's do (syscall() always does for other calls). x86-64 only; a
// shared library's kernels call the C library's. Called before every load
// (one load of a flag once done).
void route_kernel_exits();

// Makes the kernels svod's loader links from now on call svod's versions of
// signal(), sysv_signal(), sigaction(), sigprocmask() and pthread_sigmask()
// (and, on x86-64, syscall() for rt_sigaction and rt_sigprocmask): they do
// what the C library's do and then note_fault_handlers_changed(), so that the
// next launch on each thread puts svod's handlers back on top and unblocks
// the signals svod traps and stops kernels with (kernel_signals.cpp). Called
// before every load.
void route_kernel_signal_calls();

// Installs the fault handler (and the exit() hook, once: kKernelExitStatus),
// or again when another handler (LLVM's crash recovery, enabled by the first
// in-process compile) was installed over it since; the one it replaces becomes the previous handler. Called for
// every CpuProgram made and every device opened (one sigaction query when nothing changed).
void ensure_fault_reporting();

}  // namespace svod
