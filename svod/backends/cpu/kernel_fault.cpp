#include "svod/backends/cpu/kernel_fault.h"

#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/base/error.h"
#include "svod/guard/guarded_memory.h"
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

// Text built in a fixed array: a signal handler may not allocate.
class Report {
 public:
  Report& operator<<(std::string_view s) {
    for (char c : s)
      if (used_ < sizeof text_) text_[used_++] = c;
    return *this;
  }
  Report& number(uint64_t v) {
    char digits[24];
    size_t n = 0;
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (n > 0) *this << std::string_view(&digits[--n], 1);
    return *this;
  }
  Report& hex(uint64_t v) {
    static constexpr char kDigits[] = "0123456789abcdef";
    *this << "0x";
    int shift = 60;
    while (shift > 0 && (v >> shift) == 0) shift -= 4;
    for (; shift >= 0; shift -= 4) *this << std::string_view(&kDigits[(v >> shift) & 15], 1);
    return *this;
  }
  std::string str() const { return std::string(text_, used_); }
  void write() const {
    size_t done = 0;
    while (done < used_) {
      const ssize_t n = ::write(STDERR_FILENO, text_ + done, used_ - done);
      if (n <= 0) return;
      done += static_cast<size_t>(n);
    }
  }

 private:
  char text_[4096];
  size_t used_ = 0;
};

// ", plan op 2 (layer3)" when a plan op is running.
void name_op(Report& r, const RunningOp* op) {
  if (op == nullptr) return;
  r << ", plan op ";
  r.number(op->index);
  if (const std::string& label = op->label(op->plan, op->index); !label.empty()) r << " (" << label << ")";
}

// "program "f" (entry f) on CPU, core_id slice 1, plan op 0 (x)".
void name_launch(Report& r, const KernelFrame& k) {
  r << "program \"" << k.program->spec().display_name() << "\" (entry " << k.program->spec().entry << ") on CPU";
  if (k.slice >= 0) {
    r << ", core_id slice ";
    r.number(static_cast<uint64_t>(k.slice));
  }
  name_op(r, k.op);
}

std::string_view signal_name(int signal) {
  switch (signal) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    default: return "a fatal signal";
  }
}

std::string_view describe(int signal) {
  switch (signal) {
    case SIGSEGV: return "SIGSEGV (invalid memory access)";
    case SIGBUS: return "SIGBUS (misaligned or unmapped memory)";
    case SIGILL: return "SIGILL (illegal instruction, e.g. __builtin_trap)";
    case SIGFPE: return "SIGFPE (arithmetic fault, e.g. integer division by zero)";
    case SIGTRAP: return "SIGTRAP (breakpoint instruction, e.g. __builtin_debugtrap)";
    case SIGABRT: return "SIGABRT (raised, or abort() in a library the kernel called)";
    default: return "a fatal signal";
  }
}

// A general-protection fault (x86-64: a non-canonical address, such as a
// garbage pointer or a wildly overflowed index, or a misaligned SSE access)
// comes with no address.
bool address_known(const TrappedFault& f) {
  return (f.signal == SIGSEGV || f.signal == SIGBUS) && f.code != SI_KERNEL;
}

const char* access_name(int access) { return access == 2 ? "wrote" : access == 1 ? "read" : "accessed"; }

// Where a faulting address lies relative to the kernel's arguments, as data:
// rendered into the report and into KernelFaultInfo alike.
struct Place {
  enum Kind { Null, Stack, Guarded, Past, BeforeAll } kind = BeforeAll;
  int buffer = -1;       // the argument it falls in or after (-1: none)
  uint64_t offset = 0;   // Past: bytes past the argument's start; Guarded: bytes past the end or before the start
  bool element_known = false;
  int64_t element = 0;   // negative: before the start
  GuardHit hit{};        // Guarded: the allocation
  uint64_t extent = 0;   // Guarded: bytes from the argument's start to the allocation's end
};

// The buffer argument that starts in [data, data + bytes] (the guarded
// allocation hit), preferring one that starts at `data`; -1 for none.
int argument_in(const KernelFrame& k, uint64_t data, uint64_t bytes) {
  int found = -1;
  for (size_t i = 0; i < k.program->spec().buffers.size(); ++i) {
    if (k.args[i] < data || k.args[i] > data + bytes) continue;
    if (found < 0 || k.args[i] == data) found = static_cast<int>(i);
  }
  return found;
}

// Stack overflows fault just below the stack pointer (a push, a probe of a
// new frame); the kernel's buffers are never there.
constexpr uint64_t kStackReach = 64 * 1024;
bool below_stack_pointer(uint64_t address, uint64_t sp) {
  return sp != 0 && address < sp + 256 && address + kStackReach > sp;
}

Place locate(const KernelFrame& k, uint64_t address, uint64_t sp) {
  const ProgramSpec& spec = k.program->spec();
  Place p;
  if (address < 4096) {
    p.kind = Place::Null;
    return p;
  }
  if (below_stack_pointer(address, sp)) {
    p.kind = Place::Stack;
    return p;
  }
  if (find_guard(address, p.hit)) {
    // Checked mode: in the guard page (or gap) of a guarded allocation.
    p.kind = Place::Guarded;
    p.buffer = argument_in(k, p.hit.data, p.hit.bytes);
    const uint64_t start = p.buffer >= 0 ? k.args[p.buffer] : p.hit.data;
    const uint64_t end = p.hit.data + p.hit.bytes;
    p.extent = end - start;
    p.offset = p.hit.after ? address - end : start - address;
    if (p.buffer >= 0 && spec.buffers[static_cast<size_t>(p.buffer)].dtype) {
      const uint64_t size = size_of(*spec.buffers[static_cast<size_t>(p.buffer)].dtype);
      p.element_known = true;
      p.element = element_at(static_cast<int64_t>(address - start), size);
    }
    return p;
  }
  size_t nearest = spec.buffers.size();
  for (size_t i = 0; i < spec.buffers.size(); ++i)
    if (k.args[i] <= address && (nearest == spec.buffers.size() || k.args[i] > k.args[nearest])) nearest = i;
  if (nearest == spec.buffers.size()) return p;  // BeforeAll
  p.kind = Place::Past;
  p.buffer = static_cast<int>(nearest);
  p.offset = address - k.args[nearest];
  if (const auto& dtype = spec.buffers[nearest].dtype) {
    p.element_known = true;
    p.element = static_cast<int64_t>(p.offset / size_of(*dtype));
  }
  return p;
}

// KernelFaultInfo::cause for a memory fault at `place`.
std::string_view cause_of(Place::Kind place) {
  switch (place) {
    case Place::Null: return "null pointer";
    case Place::Stack: return "stack overflow";
    case Place::Guarded: return "out of bounds (checked mode)";
    case Place::Past: return "out of bounds";
    case Place::BeforeAll: return "wild address";
  }
  return "wild address";
}

// "f32[1024]": the parameter's dtype and how many elements `bytes` hold;
// "1024 bytes" for an untyped one.
void describe_size(Report& r, const BufferParam& b, uint64_t bytes) {
  if (!b.dtype) {
    r.number(bytes) << " bytes";
    return;
  }
  r << to_string(*b.dtype) << "[";
  r.number(bytes / size_of(*b.dtype)) << "]";
}

void render_place(Report& r, const KernelFrame& k, const Place& p, const char* access) {
  const ProgramSpec& spec = k.program->spec();
  switch (p.kind) {
    case Place::Null: r << "  the address is in the first page: a NULL pointer dereference\n"; return;
    case Place::Stack:
      r << "  the address is just below the stack pointer: a stack overflow (a deep recursion or a large local "
           "array)\n";
      return;
    case Place::BeforeAll: r << "  the address lies before every buffer argument\n"; return;
    case Place::Guarded: {
      r << "  checked mode: " << access << " ";
      r.number(p.offset) << (p.hit.after ? " bytes past the end of " : " bytes before the start of ");
      if (p.buffer < 0) {
        r << "a buffer of ";
        r.number(p.hit.bytes) << " bytes at ";
        r.hex(p.hit.data) << " (not one of this kernel's arguments)\n";
        return;
      }
      const BufferParam& b = spec.buffers[static_cast<size_t>(p.buffer)];
      r << "buffer ";
      r.number(static_cast<uint64_t>(p.buffer)) << " (\"" << b.name << "\", ";
      describe_size(r, b, p.extent);
      r << ")";
      if (p.element_known) {
        r << " at element ";
        if (p.element < 0) r << "-";
        r.number(static_cast<uint64_t>(p.element < 0 ? -p.element : p.element));
      }
      r << "\n";
      return;
    }
    case Place::Past: {
      const BufferParam& b = spec.buffers[static_cast<size_t>(p.buffer)];
      r << "  the address is ";
      r.number(p.offset) << " bytes";
      if (p.element_known) {
        r << " (" << to_string(*b.dtype) << " element ";
        r.number(static_cast<uint64_t>(p.element)) << ")";
      }
      r << " past the start of buffer ";
      r.number(static_cast<uint64_t>(p.buffer)) << " (\"" << b.name << "\") at ";
      r.hex(k.args[p.buffer]) << "; a kernel that goes past its buffer's end lands here (SVOD_CHECK=memory stops "
                                 "it at the first byte past the end)\n";
      return;
    }
  }
}

// "kernel fault: SIGSEGV (invalid memory access) at address 0x10 in program
// "f" (entry f) on CPU, core_id slice 1, plan op 0 (x)\n" and where the
// address lies.
void describe_fault(Report& r, const KernelFrame& k, const TrappedFault& f) {
  r << "kernel fault: " << describe(f.signal);
  if (address_known(f)) {
    r << " at address ";
    r.hex(f.address);
  } else if (f.signal == SIGSEGV) {
    r << " at an address the processor does not report (a non-canonical pointer or a misaligned vector access?)";
  }
  r << "\n  in ";
  name_launch(r, k);
  if (f.in_callee) {
    r << ", in a function it called (at ";
    r.hex(f.pc) << ")";
  }
  r << "\n";
  if (address_known(f)) render_place(r, k, locate(k, f.address, f.sp), access_name(f.access));
}

// The fault as the handler sees it.
TrappedFault fault_of(int signal, const siginfo_t* info, const void* context) {
  TrappedFault f{signal, info->si_code, reinterpret_cast<uint64_t>(info->si_addr), 0, 0, 0, false};
#if defined(__x86_64__)
  const auto* uc = static_cast<const ucontext_t*>(context);
  f.pc = static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_RIP]);
  f.sp = static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_RSP]);
  // The page-fault error code: bit 1 is set for a write.
  if (signal == SIGSEGV) f.access = (uc->uc_mcontext.gregs[REG_ERR] & 2) ? 2 : 1;
#else
  (void)context;
#endif
  return f;
}

void report(const KernelFrame& k, const TrappedFault& f) {
  Report r;
  r << "\nsvod: ";
  describe_fault(r, k, f);
#if defined(__x86_64__)
  r << "svod: the fault is not in the kernel's own code (or the signal was sent), so it cannot be stopped there and "
       "the process cannot safely go on; it ends with the signal\n";
#else
  r << "svod: kernels are stopped at a fault on x86-64 only; after a fault here the process cannot safely go on; it "
       "ends with the signal\n";
#endif
  r.write();
}

#if defined(__x86_64__)
extern "C" void svod_trap_resume();

// Makes the handler return into svod_trap_resume on the launch boundary's
// stack, which returns 1 from svod_trap_call.
void resume_at_launch_boundary(const KernelFrame& k, void* context) {
  auto* uc = static_cast<ucontext_t*>(context);
  greg_t* regs = uc->uc_mcontext.gregs;
  regs[REG_RIP] = reinterpret_cast<greg_t>(&svod_trap_resume);
  regs[REG_RSP] = static_cast<greg_t>(k.resume_sp);
  regs[REG_EFL] &= ~greg_t{0x400};  // the direction flag: clear at every call boundary
  if (uc->uc_mcontext.fpregs != nullptr) {
    // The x87 stack is empty at a call boundary, whatever the kernel left on it.
    uc->uc_mcontext.fpregs->ftw = 0;
    uc->uc_mcontext.fpregs->swd &= ~0x3800;
  }
}

// Stops the kernel at a fault its own code (or a leaf function it called)
// caused: records it in the frame and resumes at the launch boundary. Faults
// anywhere else are not trapped.
bool trap(KernelFrame& k, const TrappedFault& f, void* context) {
  if (f.signal == SIGABRT || f.code <= 0) return false;  // sent or raised, not caused by an instruction
  bool in_callee = false;
  if (!k.program->owns_code(f.pc)) {
    // A leaf function (memcpy, memset) has pushed nothing yet: the kernel's
    // return address is at the stack pointer. The stack is read only when the
    // fault is not an overflow of it.
    if (f.sp % 8 != 0 || (address_known(f) && below_stack_pointer(f.address, f.sp))) return false;
    if (!k.program->owns_code(*reinterpret_cast<const uintptr_t*>(f.sp))) return false;
    in_callee = true;
  }
  k.fault = f;
  k.fault.in_callee = in_callee;
  resume_at_launch_boundary(k, context);
  return true;
}

// Stops the kernel for `scope` when the thread is in its own code; a thread
// anywhere else (even a leaf function the kernel called, which may hold a
// lock an asynchronous stop would abandon) goes on until the next signal.
bool stop(KernelFrame& k, const StopScope& scope, const TrappedFault& f, void* context) {
  if (!k.program->owns_code(f.pc)) return false;
  k.fault = f;
  k.stopped = &scope;
  resume_at_launch_boundary(k, context);
  return true;
}
#else
bool trap(KernelFrame&, const TrappedFault&, void*) { return false; }
bool stop(KernelFrame&, const StopScope&, const TrappedFault&, void*) { return false; }
#endif

// A fault in a program's code on a thread that runs no launch: named, then
// left to the handler before svod's, as every fault outside a launch is.
void report_unlaunched(const char* program, const TrappedFault& f) {
  Report r;
  r << "\nsvod: kernel fault: " << describe(f.signal);
  if (address_known(f)) {
    r << " at address ";
    r.hex(f.address);
  }
  r << "\n  in the code of program \"" << program << "\" (at ";
  r.hex(f.pc) << ") on a thread that runs no svod launch: one the kernel started, or code it left to run later\n"
                 "svod: a kernel is stopped at a fault only on the threads svod runs it on; the process cannot safely "
                 "go on; it ends with the signal\n";
  r.write();
}

// Whether a fault on a device's host thread ends the process once handed on.
// A memory fault there does; any other signal may be one the device's
// runtime recovers from (PoCL's own SIGFPE handler steps over a kernel's
// integer division by zero), unless only the default action comes after
// svod's handler.
bool fatal_on_device_thread(int signal) {
  const struct sigaction& next = previous_action[signal];
  return signal == SIGSEGV || signal == SIGBUS ||
         (!(next.sa_flags & SA_SIGINFO) && (next.sa_handler == SIG_DFL || next.sa_handler == SIG_IGN));
}

// A fault on a thread svod did not start, while device kernels run on host
// threads (kernels_in_flight.h, e.g. PoCL's): they are named, one of them
// being the likely cause.
void report_kernels_in_flight(const TrappedFault& f) {
  Report r;
  r << "\nsvod: kernel fault: " << describe(f.signal);
  if (address_known(f)) {
    r << " at address ";
    r.hex(f.address);
  }
  r << " on a thread svod did not start, while these device kernels ran on host threads:\n";
  const auto name = [](const char* label, void* report) { *static_cast<Report*>(report) << "  " << label << "\n"; };
  for_each_kernel_in_flight(name, &r);
  r << "svod: a kernel on a device's own threads cannot be stopped; the process ends with the signal\n";
  r.write();
}

// Traps a fault of a running kernel's own code (see trap). Otherwise reports
// it, then puts back the handler that was there before svod's and lets the
// signal happen again under it: a fault re-executes the faulting instruction
// on return, a sent or raised signal is raised again (it stays blocked until
// this handler returns). Once a kernel's fault was handed on, anything that
// comes back here ends the process with the default action: a handler that
// re-raises (LLVM's crash recovery does, outside a compile) would otherwise
// pass the signal to and fro for ever.
void on_fault(int signal, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  if (handed_on.load()) {
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    sigaction(signal, &fallback, nullptr);
  } else {
    if (KernelFrame* k = running_kernel; k != nullptr) {
      const TrappedFault f = fault_of(signal, info, context);
      if (trap(*k, f, context)) {
        errno = saved_errno;
        return;
      }
      report(*k, f);
      handed_on.store(true);
    } else if (info->si_code > 0) {
      const TrappedFault f = fault_of(signal, info, context);
      // Several threads may fault at once (a device's, a kernel's): the first reports.
      if (const char* program = detail::registered_program_at(f.pc)) {
        if (!handed_on.exchange(true)) report_unlaunched(program, f);
      } else if (fatal_on_device_thread(signal) && for_each_kernel_in_flight(nullptr, nullptr) > 0 &&
                 !reported_in_flight.exchange(true)) {
        report_kernels_in_flight(f);
      }
    }
    // The handler below may recover (the compiler's crash recovery does):
    // the next launch on each thread puts svod's back.
    sigaction(signal, &previous_action[signal], nullptr);
    note_fault_handlers_changed();
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
  const StopScope* launched_in = k == nullptr ? nullptr : k->slice >= 0 ? k->stop : launch_stop_scope();
  const StopScope* scope = launched_in != nullptr ? launched_in->requested_around() : nullptr;
  if (scope != nullptr) {
    stop(*k, *scope, fault_of(signal, info, context), context);
  } else if (info->si_code != SI_TKILL || info->si_pid != getpid()) {
    const struct sigaction& before = previous_action[signal];
    if (before.sa_flags & SA_SIGINFO)
      before.sa_sigaction(signal, info, context);
    else if (before.sa_handler != SIG_DFL && before.sa_handler != SIG_IGN)
      before.sa_handler(signal);
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
  r << "\nsvod: program \"" << k->program->spec().display_name() << "\" called exit() while running on CPU";
  name_op(r, k->op);
  r << "; the process ends with status ";
  r.number(kKernelExitStatus) << "\n";
  r.write();
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

// svod_trap_call(caller, entry, args, resume_sp): saves the callee-saved
// registers, stores the stack pointer in *resume_sp, calls caller(entry,
// args) and returns 0. svod_trap_resume is where the fault handler resumes a
// trapped thread, with that stack pointer: it returns 1 from svod_trap_call
// with the registers it saved. svod_trap_unwind(resume_sp) does the same from
// ordinary code (a kernel's call of exit()).
#if defined(__x86_64__)
__asm__(R"(
  .pushsection .text
  .globl svod_trap_call
  .type svod_trap_call, @function
  .globl svod_trap_resume
  .type svod_trap_resume, @function
  .p2align 4
svod_trap_call:
  .cfi_startproc
  pushq %rbp
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  pushq %rbx
  .cfi_def_cfa_offset 24
  .cfi_offset %rbx, -24
  pushq %r12
  .cfi_def_cfa_offset 32
  .cfi_offset %r12, -32
  pushq %r13
  .cfi_def_cfa_offset 40
  .cfi_offset %r13, -40
  pushq %r14
  .cfi_def_cfa_offset 48
  .cfi_offset %r14, -48
  pushq %r15
  .cfi_def_cfa_offset 56
  .cfi_offset %r15, -56
  subq $8, %rsp
  .cfi_def_cfa_offset 64
  movq %rsp, (%rcx)
  movq %rdi, %rax
  movq %rsi, %rdi
  movq %rdx, %rsi
  callq *%rax
  xorl %eax, %eax
.Lsvod_trap_return:
  .cfi_remember_state
  addq $8, %rsp
  .cfi_def_cfa_offset 56
  popq %r15
  .cfi_def_cfa_offset 48
  popq %r14
  .cfi_def_cfa_offset 40
  popq %r13
  .cfi_def_cfa_offset 32
  popq %r12
  .cfi_def_cfa_offset 24
  popq %rbx
  .cfi_def_cfa_offset 16
  popq %rbp
  .cfi_def_cfa_offset 8
  retq
  .cfi_restore_state
svod_trap_resume:
  movl $1, %eax
  jmp .Lsvod_trap_return
  .cfi_endproc
  .size svod_trap_call, .-svod_trap_call

  .globl svod_trap_unwind
  .type svod_trap_unwind, @function
  .p2align 4
svod_trap_unwind:
  movq %rdi, %rsp
  cld
  movl $1, %eax
  jmp .Lsvod_trap_return
  .size svod_trap_unwind, .-svod_trap_unwind
  .popsection
)");
#else
extern "C" int svod_trap_call(KernelCaller caller, void* entry, const uint64_t* args, uintptr_t*) {
  caller(entry, args);
  return 0;
}
#endif

// The launch of a kernel its stop scope stopped fails with the scope's error.
[[noreturn]] void throw_stopped(const KernelFrame& k) {
  Report r;
  r << "kernel stopped: ";
  name_launch(r, k);
  r << ": " << k.stopped->reason() << "; the launch failed and what it wrote before stays written";
  throw Error(k.stopped->kind(), r.str());
}

KernelFaultInfo launch_fault_info(const KernelFrame& k) {
  KernelFaultInfo info;
  info.program = k.program->spec().display_name();
  info.entry = k.program->spec().entry;
  info.slice = k.slice;
  if (k.op != nullptr) {
    info.op = k.op->index;
    info.op_label = k.op->label(k.op->plan, k.op->index);
  }
  return info;
}

std::string launch_name(const KernelFrame& k) {
  Report r;
  name_launch(r, k);
  return r.str();
}

void throw_kernel_fault(const KernelFrame& k) {
  const TrappedFault& f = k.fault;
  if (f.signal == kKernelStopSignal) throw_stopped(k);
  if (f.call_cause != nullptr) throw_exit_call(k);
  const ProgramSpec& spec = k.program->spec();
  KernelFaultInfo info = launch_fault_info(k);
  info.signal = f.signal;
  info.signal_name = signal_name(f.signal);
  info.access = f.access == 2 ? "write" : f.access == 1 ? "read" : "";
  info.in_called_function = f.in_callee;
  if (address_known(f)) {
    info.address = f.address;
    const Place p = locate(k, f.address, f.sp);
    info.cause = cause_of(p.kind);
    if (p.buffer >= 0) {
      info.buffer = static_cast<size_t>(p.buffer);
      info.buffer_name = spec.buffers[info.buffer.value()].name;
      if (p.element_known) info.element = p.element;
    }
  } else {
    info.cause = f.signal == SIGFPE    ? "arithmetic fault"
                 : f.signal == SIGILL  ? "illegal instruction"
                 : f.signal == SIGTRAP ? "breakpoint"
                 : f.signal == SIGBUS ? "bus error"
                                      : "general protection (a non-canonical pointer or a misaligned vector access)";
  }
  Report r;
  describe_fault(r, k, f);
  r << "  the kernel was stopped at the fault and the launch failed; what it wrote before stays written";
  throw KernelFault(std::move(info), r.str());
}

void prepare_thread_for_kernels() noexcept {
  const uint32_t epoch = fault_handlers_epoch();
  if (fault_handlers_seen == 0) {
    ensure_signal_stack();
    try {
      register_kernel_thread();
    } catch (const std::exception&) {
      // (No memory for the entry: this thread's kernels cannot be stopped.)
    }
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
  std::lock_guard lock(install_mutex);
  // exit() and quick_exit() both; _exit() and exit_group() end the process
  // without running anything (svod run --isolate names them).
  static const bool exit_hook = std::atexit(on_exit) == 0 && std::at_quick_exit(on_exit) == 0;
  (void)exit_hook;
  for (int signal : kSignals) install(signal, on_fault, 0);
  // A stop signal that finds a thread in a system call restarts the call.
  install(kKernelStopSignal, on_stop, SA_RESTART);
}

}  // namespace svod
