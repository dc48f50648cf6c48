#include "svod/backends/cpu/fault_report.h"

#include <signal.h>

#include <algorithm>

#include "svod/guard/op_name.h"

namespace svod {

Report& Report::number(uint64_t v) noexcept {
  char digits[24];
  size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0) *this << std::string_view(&digits[--n], 1);
  return *this;
}

Report& Report::hex(uint64_t v) noexcept {
  static constexpr char kDigits[] = "0123456789abcdef";
  *this << "0x";
  int shift = 60;
  while (shift > 0 && (v >> shift) == 0) shift -= 4;
  for (; shift >= 0; shift -= 4) *this << std::string_view(&kDigits[(v >> shift) & 15], 1);
  return *this;
}

namespace {

// ", op 2 (layer3)" when a plan op is running (without the comma: "op 2 (layer3)").
void name_op(Report& r, const RunningOp* op, bool comma = true) {
  if (op == nullptr) return;
  char name[512];
  const size_t length = write_op_name(name, op->index, op->id_or_label(op->plan, op->index));
  r << (comma ? ", " : "") << std::string_view(name, std::min(length, sizeof name));
}

// What to rerun with, at the end of every report of a process that ends.
void rerun_advice(Report& r) {
  r << "svod: to find the cause, rerun with --check (SVOD_CHECK=memory; svod.checked() in Python), which stops an "
       "overrun at its first byte, or run the plan with svod run --isolate, which names the op the process ended in\n";
}

std::string_view access_name(MemoryAccess access) {
  switch (access) {
    case MemoryAccess::Read: return "read";
    case MemoryAccess::Write: return "wrote";
    case MemoryAccess::Unknown: break;
  }
  return "accessed";
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

void render_place(Report& r, const LaunchView& launch, const Place& p, std::string_view access) {
  switch (p.kind) {
    case Place::Null: r << "  the address is in the first page: a NULL pointer dereference\n"; return;
    case Place::Stack:
      r << "  the address is just below the stack pointer: a stack overflow (a deep recursion or a large local "
           "array)\n";
      return;
    case Place::BeforeAll: r << "  the address lies before every buffer argument\n"; return;
    case Place::Guarded:
    case Place::Fenced: {
      r << (p.kind == Place::Guarded ? "  checked mode: " : "  guard page: ") << access << " ";
      r.number(p.offset) << (p.hit.after ? " bytes past the end of " : " bytes before the start of ");
      if (p.buffer < 0) {
        r << "a buffer of ";
        r.number(p.hit.bytes) << " bytes at ";
        r.hex(p.hit.data) << " (not one of this kernel's arguments)\n";
        return;
      }
      const BufferParam& b = launch.buffers[static_cast<size_t>(p.buffer)];
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
      const BufferParam& b = launch.buffers[static_cast<size_t>(p.buffer)];
      r << "  the address is ";
      r.number(p.offset) << " bytes";
      if (p.element_known) {
        r << " (" << to_string(*b.dtype) << " element ";
        r.number(static_cast<uint64_t>(p.element)) << ")";
      }
      r << " past the start of buffer ";
      r.number(static_cast<uint64_t>(p.buffer)) << " (\"" << b.name << "\") at ";
      r.hex(launch.args[p.buffer]) << "; a kernel that goes past its buffer's end lands here (SVOD_CHECK=memory "
                                      "stops it at the first byte past the end)\n";
      return;
    }
  }
}

// "kernel fault: SIGSEGV (invalid memory access) at address 0x10": what the
// reports of faults outside a launch start with.
void describe_signal_at(Report& r, const TrappedFault& f) {
  r << "\nsvod: kernel fault: " << describe_signal(f.signal);
  if (address_known(f)) {
    r << " at address ";
    r.hex(f.address);
  }
}

}  // namespace

std::string_view signal_name(int signal) noexcept {
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

std::string_view describe_signal(int signal) noexcept {
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

void name_launch(Report& r, const LaunchView& launch) {
  r << "program \"" << launch.program << "\" (entry " << launch.entry << ") on CPU";
  if (launch.slice >= 0) {
    r << ", core_id slice ";
    r.number(static_cast<uint64_t>(launch.slice));
  }
  name_op(r, launch.op);
}

void describe_fault(Report& r, const LaunchView& launch, const TrappedFault& f, const Place* place) {
  r << "kernel fault: " << describe_signal(f.signal);
  if (address_known(f)) {
    r << " at address ";
    r.hex(f.address);
  } else if (f.signal == SIGSEGV) {
    r << " at an address the processor does not report (a non-canonical pointer or a misaligned vector access?)";
  }
  r << "\n  in ";
  name_launch(r, launch);
  if (f.in_callee) {
    r << ", in a function it called (at ";
    r.hex(f.pc) << ")";
  }
  r << "\n";
  if (place != nullptr) render_place(r, launch, *place, access_name(f.access));
}

void describe_handed_on(Report& r, const LaunchView& launch, const TrappedFault& f, const Place* place, NotStopped why) {
  r << "\nsvod: ";
  describe_fault(r, launch, f, place);
  switch (why) {
    case NotStopped::NotOwnCode:
      r << "svod: the fault is not in the kernel's own code (or the signal was sent), so it cannot be stopped there and "
           "the process cannot safely go on; it ends with the signal\n";
      break;
    case NotStopped::NoTrampoline:
      r << "svod: kernels are stopped at a fault only on x86-64 and AArch64; after a fault here the process cannot "
           "safely go on; it ends with the signal\n";
      break;
    case NotStopped::CalledBack:
      r << "svod: the C library called this code back (its frame lies between the kernel's entry and the fault) and "
           "may hold a lock the process needs again, so the kernel cannot be stopped there; the process ends with the "
           "signal\n";
      break;
    case NotStopped::ForkedChild:
      r << "svod: the fault is in a child process the kernel forked, which must not go on as its parent; the child "
           "ends with the signal\n";
      return;
  }
  rerun_advice(r);
}

void describe_death(Report& r, const Death& d) {
  const TrappedFault& f = d.fault;
  const bool raised = f.code <= 0;
  r << "\nsvod: fatal signal: ";
  if (raised) {
    r << signal_name(f.signal) << ", raised or sent,";
  } else {
    r << describe_signal(f.signal);
    if (address_known(f)) {
      r << " at address ";
      r.hex(f.address);
    }
  }
  r << (d.frame_overwritten ? " in a launch\n" : " outside any kernel\n");
  if (d.last_program != nullptr) r << "  the last program svod launched in this process: \"" << d.last_program << "\"\n";
  if (d.op != nullptr) {
    r << "  running on this thread: ";
    name_op(r, d.op, false);
    r << "\n";
  }
  if (d.frame_overwritten) {
    r << "  a kernel ran on this thread and the frames above its own are overwritten: it overran a local array upwards "
         "(kernels have no stack protector), so svod cannot name it or stop it\n";
  } else if (f.signal == SIGABRT && raised) {
    r << "  abort() outside a kernel is most often the C library finding its heap corrupted (\"double free or "
         "corruption\", \"corrupted size\"): a kernel that wrote past memory svod does not own (an array it was "
         "given, a wrapped pointer) corrupts it, and the damage shows later\n";
  } else if (!raised) {
    r << "  at pc ";
    r.hex(f.pc) << ", in no kernel's code: svod's, a library's or the host's code";
    if (address_known(f) && f.address == f.pc) r << ", or no code at all (the processor jumped there)";
    r << "; a kernel that overruns a local array upwards smashes the frames above it (kernels have no stack "
         "protector), and the fault comes when they return\n";
  }
  r << "svod: the process ends with the signal\n";
  rerun_advice(r);
}

void describe_unlaunched(Report& r, const char* program, const TrappedFault& f) {
  describe_signal_at(r, f);
  r << "\n  in the code of program \"" << program << "\" (at ";
  r.hex(f.pc) << ") on a thread that runs no svod launch: one the kernel started, or code it left to run later\n"
                 "svod: a kernel is stopped at a fault only on the threads svod runs it on; the process cannot safely "
                 "go on; it ends with the signal\n";
}

void describe_in_flight(Report& r, const TrappedFault& f, KernelLister for_each_kernel) {
  describe_signal_at(r, f);
  r << " on a thread svod did not start, while these device kernels ran on host threads:\n";
  const auto name = [](const char* note, void* report) { *static_cast<Report*>(report) << "  " << note << "\n"; };
  for_each_kernel(name, &r);
  r << "svod: a kernel on a device's own threads cannot be stopped; the process ends with the signal\n";
}

void describe_exit(Report& r, const LaunchView& launch, int status) {
  r << "\nsvod: program \"" << launch.program << "\" called exit() while running on CPU";
  name_op(r, launch.op);
  r << "; the process ends with status ";
  r.number(static_cast<uint64_t>(status)) << "\n";
}

void describe_trapped(Report& r, const LaunchView& launch, const TrappedFault& f, const Place* place) {
  describe_fault(r, launch, f, place);
  r << "  the kernel was stopped at the fault and the launch failed; what it wrote before stays written";
}

void describe_stopped(Report& r, const LaunchView& launch, std::string_view reason) {
  r << "kernel stopped: ";
  name_launch(r, launch);
  r << ": " << reason << "; the launch failed and what it wrote before stays written";
}

}  // namespace svod
