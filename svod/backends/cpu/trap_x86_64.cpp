// The x86-64 trampoline and the handler's view of the registers
// (trap_machine.h).
#if defined(__x86_64__)
#include <ucontext.h>

#include "svod/backends/cpu/trap_machine.h"

namespace svod::detail {

// Six pushes and a store on the way in: the callee-saved rbp, rbx and r12-r15,
// and the stack kept 16-byte aligned for the call.
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

  .globl svod_trap_entry_probe
  .type svod_trap_entry_probe, @function
  .p2align 4
svod_trap_entry_probe:
  movq %rsp, svod_trap_probed_sp(%rip)
  retq
  .size svod_trap_entry_probe, .-svod_trap_entry_probe
  .popsection

  .pushsection .bss.svod_trap_probed_sp, "aw", @nobits
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

void read_machine_state(const void* context, TrappedFault& f) noexcept {
  const auto* uc = static_cast<const ucontext_t*>(context);
  f.pc = static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_RIP]);
  f.sp = static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_RSP]);
  // The page-fault error code: bit 1 is set for a write.
  if (f.signal == SIGSEGV)
    f.access = (uc->uc_mcontext.gregs[REG_ERR] & 2) ? MemoryAccess::Write : MemoryAccess::Read;
}

uint64_t leaf_return_address(const TrappedFault& f, const void*) noexcept {
  // A leaf function (memcpy, memset) has pushed nothing yet: the caller's
  // return address is at the stack pointer.
  if (f.sp % 8 != 0 || (address_known(f) && below_stack_pointer(f.address, f.sp))) return 0;
  return *reinterpret_cast<const uint64_t*>(f.sp);
}

bool follows_call(uint64_t address) noexcept {
  const auto* b = reinterpret_cast<const unsigned char*>(address);
  if (b[-5] == 0xe8) return true;                           // call rel32
  if (b[-6] == 0xff && (b[-5] & 0x38) == 0x10) return true;  // call *disp32(%rip) or *disp32(reg)
  if (b[-3] == 0xff && (b[-2] & 0x38) == 0x10) return true;  // call *disp8(reg), *(reg,index)
  if (b[-2] == 0xff && (b[-1] & 0xf8) == 0xd0) return true;  // call *%reg
  if (b[-3] == 0x41 && b[-2] == 0xff && (b[-1] & 0xf8) == 0xd0) return true;  // call *%r8-%r15
  return b[-2] == 0xff && (b[-1] & 0x38) == 0x10;           // call *(reg)
}

uint64_t context_pc(const void* context) noexcept {
  return static_cast<uint64_t>(static_cast<const ucontext_t*>(context)->uc_mcontext.gregs[REG_RIP]);
}

void resume_at_launch_boundary(void* context, uintptr_t resume_sp) noexcept {
  auto* uc = static_cast<ucontext_t*>(context);
  greg_t* regs = uc->uc_mcontext.gregs;
  regs[REG_RIP] = reinterpret_cast<greg_t>(&svod_trap_resume);
  regs[REG_RSP] = static_cast<greg_t>(resume_sp);
  regs[REG_EFL] &= ~greg_t{0x400};  // the direction flag: clear at every call boundary
  if (uc->uc_mcontext.fpregs != nullptr) {
    // The x87 stack is empty at a call boundary, whatever the kernel left on it.
    uc->uc_mcontext.fpregs->ftw = 0;
    uc->uc_mcontext.fpregs->swd &= ~0x3800;
  }
}

}  // namespace svod::detail
#endif
