// The trampoline alone (svod/backends/cpu/trap_machine.h), without the rest
// of svod and without gtest, so that it also builds for another architecture
// and runs under an emulator (aarch64_check.cmake): a call through
// svod_trap_call passes the arguments and returns 0; a fault in the called
// code, resumed at the launch boundary by this program's own handler, returns
// 1 with the caller's callee-saved registers as they were, a thousand times
// on one stack; the handler reads the faulting pc, the stack pointer, the
// access and a leaf function's return address; a leaf the kernel jumped to
// faults at the stack pointer the entry probe records; svod_trap_unwind
// returns 1.
#include <signal.h>

#include <cstdint>
#include <cstdio>

#include "svod/backends/cpu/trap_machine.h"

using namespace svod;
using namespace svod::detail;

namespace {

uintptr_t resume_sp;
TrappedFault seen;
uint64_t seen_leaf_return;
int failures = 0;

void check(bool ok, const char* what) {
  if (ok) return;
  std::printf("FAILED: %s\n", what);
  ++failures;
}

void on_fault(int signal, siginfo_t* info, void* context) {
  seen = TrappedFault{};
  seen.signal = signal;
  seen.code = info->si_code;
  seen.address = reinterpret_cast<uint64_t>(info->si_addr);
  read_machine_state(context, seen);
  seen_leaf_return = leaf_return_address(seen, context);
  resume_at_launch_boundary(context, resume_sp);
}

// The kernel caller of a two-argument kernel (cpu_abi.h's, for n = 2).
void call_two(void* entry, const uint64_t* args) {
  reinterpret_cast<void (*)(uint64_t, uint64_t)>(entry)(args[0], args[1]);
}

void add_into(uint64_t out, uint64_t value) { *reinterpret_cast<uint64_t*>(out) += value; }

// Overwrites every callee-saved register it may, then stores to `out`: when
// the store faults, only the trampoline can give the caller its registers back.
[[gnu::noinline]] void clobber_then_store(uint64_t out, uint64_t value) {
#if defined(__aarch64__)
  asm volatile(
      "mov x19, #19\n mov x20, #20\n mov x21, #21\n mov x22, #22\n mov x23, #23\n"
      "mov x24, #24\n mov x25, #25\n mov x26, #26\n mov x27, #27\n mov x28, #28\n"
      "fmov d8, #1.0\n fmov d9, #1.0\n fmov d10, #1.0\n fmov d11, #1.0\n"
      "fmov d12, #1.0\n fmov d13, #1.0\n fmov d14, #1.0\n fmov d15, #1.0\n" ::
          : "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27", "x28", "d8", "d9", "d10", "d11", "d12",
            "d13", "d14", "d15");
#elif defined(__x86_64__)
  asm volatile("mov $3, %%rbx\n mov $12, %%r12\n mov $13, %%r13\n mov $14, %%r14\n mov $15, %%r15\n" ::
                   : "rbx", "r12", "r13", "r14", "r15");
#endif
  *reinterpret_cast<volatile uint64_t*>(out) = value;
}

volatile int after_leaf = 0;

// A leaf function as memset is one, whatever the build's optimisation and
// sanitizers: it stores to `out` before saving anything.
extern "C" void trampoline_check_leaf_store(uint64_t out);
#if defined(__aarch64__)
asm(".pushsection .text\n.type trampoline_check_leaf_store, %function\ntrampoline_check_leaf_store:\n"
    "  mov x1, #1\n  str x1, [x0]\n  ret\n.size trampoline_check_leaf_store, .-trampoline_check_leaf_store\n"
    ".popsection");
#elif defined(__x86_64__)
asm(".pushsection .text\n.type trampoline_check_leaf_store, %function\ntrampoline_check_leaf_store:\n"
    "  movq $1, (%rdi)\n  ret\n.size trampoline_check_leaf_store, .-trampoline_check_leaf_store\n"
    ".popsection");
#endif

// Calls the leaf and does something after it, so the call is no tail call.
[[gnu::noinline]] void calls_leaf(uint64_t out, uint64_t) {
  trampoline_check_leaf_store(out);
  after_leaf = after_leaf + 1;
}

void unwinds(uint64_t, uint64_t) { svod_trap_unwind(resume_sp); }

// Jumps to the leaf as its last act, so the leaf starts at this function's
// entry stack pointer with the kernel caller's return address.
extern "C" void trampoline_check_tail_calls_leaf(uint64_t out, uint64_t);
#if defined(__aarch64__)
asm(".pushsection .text\n.type trampoline_check_tail_calls_leaf, %function\ntrampoline_check_tail_calls_leaf:\n"
    "  b trampoline_check_leaf_store\n.size trampoline_check_tail_calls_leaf, .-trampoline_check_tail_calls_leaf\n"
    ".popsection");
#elif defined(__x86_64__)
asm(".pushsection .text\n.type trampoline_check_tail_calls_leaf, %function\ntrampoline_check_tail_calls_leaf:\n"
    "  jmp trampoline_check_leaf_store\n.size trampoline_check_tail_calls_leaf, .-trampoline_check_tail_calls_leaf\n"
    ".popsection");
#endif

int trap_call(void (*kernel)(uint64_t, uint64_t), uint64_t a, uint64_t b) {
  const uint64_t args[] = {a, b};
  return svod_trap_call(call_two, reinterpret_cast<void*>(kernel), args, &resume_sp);
}

// Values the compiler keeps in callee-saved registers (or its own stack)
// across a trapped call: all must come back.
[[gnu::noinline]] bool registers_survive_a_trap() {
  volatile uint64_t seed = 3;
  const uint64_t a = seed * 1, b = seed * 2, c = seed * 3, d = seed * 4, e = seed * 5, f = seed * 6, g = seed * 7,
                 h = seed * 8, i = seed * 9, j = seed * 10;
  volatile double half = 0.5;
  const double p = half * 1, q = half * 2, r = half * 3, s = half * 4, t = half * 5, u = half * 6, v = half * 7,
               w = half * 8;
  const int trapped = trap_call(clobber_then_store, 8, 1);
  return trapped == 1 && a + b + c + d + e + f + g + h + i + j == 165 && p * q * r * s * t * u * v * w == 157.5 &&
         a == 3 && j == 30 && p == 0.5 && w == 4.0;
}

}  // namespace

int main() {
  stack_t alternate{};
  static char alternate_stack[64 * 1024];
  alternate.ss_sp = alternate_stack;
  alternate.ss_size = sizeof alternate_stack;
  sigaltstack(&alternate, nullptr);
  struct sigaction action {};
  action.sa_sigaction = on_fault;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, nullptr);

  uint64_t total = 0;
  check(trap_call(add_into, reinterpret_cast<uint64_t>(&total), 5) == 0, "a call that returns returns 0");
  check(total == 5, "the kernel gets its arguments");

  int round = 0;
  while (round < 1000 && registers_survive_a_trap()) ++round;
  check(round == 1000, "a trapped call keeps the registers");
  check(seen.signal == SIGSEGV && seen.address == 8, "the handler sees the fault's signal and address");
  check(seen.pc - reinterpret_cast<uintptr_t>(&clobber_then_store) < 256, "the handler reads the faulting pc");
  check(seen.sp != 0 && seen.sp < resume_sp, "the handler reads the kernel's stack pointer");
#if defined(__x86_64__)
  check(seen.access == MemoryAccess::Write, "a store is a write");
#endif

  check(trap_call(calls_leaf, 16, 0) == 1, "a fault in a leaf function returns 1");
  check(seen.pc - reinterpret_cast<uintptr_t>(&trampoline_check_leaf_store) < 8, "the fault is in the leaf");
  check(seen_leaf_return - reinterpret_cast<uintptr_t>(&calls_leaf) < 64, "the leaf returns into its caller");

  // The probe's stack pointer at entry is the kernel's, and a leaf the kernel
  // jumped to faults there.
  check(trap_call(reinterpret_cast<void (*)(uint64_t, uint64_t)>(&svod_trap_entry_probe), 0, 0) == 0,
        "the probe returns");
  const uintptr_t entry_sp = svod_trap_probed_sp;
  check(entry_sp <= resume_sp && resume_sp - entry_sp < 256, "the probe records its stack pointer");
  check(trap_call(trampoline_check_tail_calls_leaf, 16, 0) == 1, "a fault in a tail-called leaf returns 1");
  check(seen.pc - reinterpret_cast<uintptr_t>(&trampoline_check_leaf_store) < 8, "the fault is in the tail-called leaf");
  check(seen.sp == entry_sp, "a tail-called leaf runs at the kernel's entry stack pointer");

  check(trap_call(unwinds, 0, 0) == 1, "svod_trap_unwind returns 1");
  check(trap_call(add_into, reinterpret_cast<uint64_t>(&total), 1) == 0 && total == 6, "a call after them returns 0");

  std::printf("%s: %d failed\n", failures == 0 ? "ok" : "FAILED", failures);
  return failures == 0 ? 0 : 1;
}
