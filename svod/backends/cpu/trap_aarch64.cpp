// The AArch64 trampoline and the handler's view of the registers
// (trap_machine.h). Checked alone under qemu-aarch64 by
// tests/cpu/trampoline/ (trampoline_check.cpp), where the cross compiler is
// installed.
#if defined(__aarch64__)
#include <ucontext.h>

#include "svod/backends/cpu/trap_machine.h"

namespace svod::detail {

// x29 and x30, the callee-saved x19-x28 and d8-d15 (the low halves of v8-v15,
// which are all the procedure-call standard keeps) in a 160-byte frame, the
// stack left 16-byte aligned. The canonical frame address is sp + 160
// throughout, so it is right at svod_trap_resume too.
__asm__(R"(
  .pushsection .text
  .globl svod_trap_call
  .type svod_trap_call, %function
  .globl svod_trap_resume
  .type svod_trap_resume, %function
  .p2align 4
svod_trap_call:
  .cfi_startproc
  stp x29, x30, [sp, #-160]!
  .cfi_def_cfa_offset 160
  .cfi_offset x29, -160
  .cfi_offset x30, -152
  mov x29, sp
  stp x19, x20, [sp, #16]
  .cfi_offset x19, -144
  .cfi_offset x20, -136
  stp x21, x22, [sp, #32]
  .cfi_offset x21, -128
  .cfi_offset x22, -120
  stp x23, x24, [sp, #48]
  .cfi_offset x23, -112
  .cfi_offset x24, -104
  stp x25, x26, [sp, #64]
  .cfi_offset x25, -96
  .cfi_offset x26, -88
  stp x27, x28, [sp, #80]
  .cfi_offset x27, -80
  .cfi_offset x28, -72
  stp d8, d9, [sp, #96]
  .cfi_offset d8, -64
  .cfi_offset d9, -56
  stp d10, d11, [sp, #112]
  .cfi_offset d10, -48
  .cfi_offset d11, -40
  stp d12, d13, [sp, #128]
  .cfi_offset d12, -32
  .cfi_offset d13, -24
  stp d14, d15, [sp, #144]
  .cfi_offset d14, -16
  .cfi_offset d15, -8
  mov x9, sp
  str x9, [x3]
  mov x9, x0
  mov x0, x1
  mov x1, x2
  blr x9
  mov w0, #0
.Lsvod_trap_return:
  .cfi_remember_state
  ldp d14, d15, [sp, #144]
  ldp d12, d13, [sp, #128]
  ldp d10, d11, [sp, #112]
  ldp d8, d9, [sp, #96]
  ldp x27, x28, [sp, #80]
  ldp x25, x26, [sp, #64]
  ldp x23, x24, [sp, #48]
  ldp x21, x22, [sp, #32]
  ldp x19, x20, [sp, #16]
  ldp x29, x30, [sp], #160
  .cfi_def_cfa_offset 0
  ret
  .cfi_restore_state
svod_trap_resume:
  mov w0, #1
  b .Lsvod_trap_return
  .cfi_endproc
  .size svod_trap_call, .-svod_trap_call

  .globl svod_trap_unwind
  .type svod_trap_unwind, %function
  .p2align 4
svod_trap_unwind:
  mov sp, x0
  mov w0, #1
  b .Lsvod_trap_return
  .size svod_trap_unwind, .-svod_trap_unwind

  .globl svod_trap_entry_probe
  .type svod_trap_entry_probe, %function
  .p2align 4
svod_trap_entry_probe:
  adrp x9, svod_trap_probed_sp
  mov x10, sp
  str x10, [x9, :lo12:svod_trap_probed_sp]
  ret
  .size svod_trap_entry_probe, .-svod_trap_entry_probe
  .popsection

  .pushsection .bss.svod_trap_probed_sp, "aw", %nobits
  .globl svod_trap_probed_sp
  .hidden svod_trap_probed_sp
  .type svod_trap_probed_sp, %object
  .p2align 3
svod_trap_probed_sp:
  .zero 8
  .size svod_trap_probed_sp, 8
  .popsection
)");

extern "C" void svod_trap_resume();

// The access is left unknown: Linux says read or write only in the signal
// frame's exception-syndrome record, which qemu-user, where this file is
// tested, does not write.
void read_machine_state(const void* context, TrappedFault& f) noexcept {
  const mcontext_t& mc = static_cast<const ucontext_t*>(context)->uc_mcontext;
  f.pc = mc.pc;
  f.sp = mc.sp;
}

uint64_t leaf_return_address(const TrappedFault&, const void* context) noexcept {
  // A leaf function (memcpy, memset) leaves its return address in the link
  // register, x30.
  return static_cast<const ucontext_t*>(context)->uc_mcontext.regs[30];
}

bool follows_call(uint64_t address) noexcept {
  uint32_t insn = 0;
  __builtin_memcpy(&insn, reinterpret_cast<const void*>(address - 4), sizeof insn);
  return (insn & 0xfc000000u) == 0x94000000u      // bl
         || (insn & 0xfffffc1fu) == 0xd63f0000u;  // blr
}

uint64_t context_pc(const void* context) noexcept {
  return static_cast<const ucontext_t*>(context)->uc_mcontext.pc;
}

void resume_at_launch_boundary(void* context, uintptr_t resume_sp) noexcept {
  mcontext_t& mc = static_cast<ucontext_t*>(context)->uc_mcontext;
  mc.pc = reinterpret_cast<uint64_t>(&svod_trap_resume);
  mc.sp = resume_sp;
  // PSTATE.BTYPE: svod_trap_resume is no branch target, so no branch is in flight.
  mc.pstate &= ~uint64_t{0xc00};
}

}  // namespace svod::detail
#endif
