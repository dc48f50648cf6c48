// What trapping a kernel needs of the processor, one file per architecture:
// trap_x86_64.cpp and trap_aarch64.cpp, each a trampoline in assembly and
// the handler's reading and rewriting of the interrupted thread's registers;
// trap_unsupported.cpp elsewhere, where kernels run by a plain call and are
// neither trapped nor stopped (kMachineTraps is false: the handler reports
// every kernel fault and hands it on, and ensure_fault_reporting says so once).
#pragma once

#include <cstddef>
#include <cstdint>

#include "svod/backends/cpu/fault_location.h"
#include "svod/program/cpu_abi.h"

namespace svod::detail {

#if defined(__x86_64__) || defined(__aarch64__)
inline constexpr bool kMachineTraps = true;
#else
inline constexpr bool kMachineTraps = false;
#endif

// The interrupted thread's pc and stack pointer, and for a memory fault
// whether it read or wrote where the processor says (x86-64), from the
// handler's `context` (a ucontext_t) into `f`.
void read_machine_state(const void* context, TrappedFault& f) noexcept;

// The return address of a leaf function the interrupted thread is in, one
// that has saved nothing yet (x86-64: the word at the stack pointer, read
// only when the fault is not an overflow of the stack; AArch64: the link
// register); 0 when it cannot be read safely.
uint64_t leaf_return_address(const TrappedFault& f, const void* context) noexcept;

// Whether the instruction just before `address` is a call, as it is before
// every return address; the code there must be readable (the handler asks
// only about addresses in the C library's executable segments).
bool follows_call(uint64_t address) noexcept;

// The interrupted thread's pc, for a handler that calls another and checks
// whether it moved the thread elsewhere.
uint64_t context_pc(const void* context) noexcept;

// How far below the launch boundary's stack pointer (the trampoline's
// resume_sp) a kernel of n ABI words starts: its stack pointer at its first
// instruction is resume_sp - kernel_entry_depth(n). A function the kernel
// jumped to as its last call (a tail call: memset as its last statement)
// starts there too, its return address svod's, not the kernel's. Measured
// by measure_kernel_entry_depths(), once per process before any launch, by
// calling svod_trap_entry_probe through the trampoline and each kernel
// caller of cpu_abi.h (their frames are the same at every call); read
// without locks by the fault handler. 0 without a trampoline.
void measure_kernel_entry_depths() noexcept;
uintptr_t kernel_entry_depth(size_t n) noexcept;

// Makes the handler return into svod_trap_resume on the launch boundary's
// stack `resume_sp`, as a call boundary leaves the processor's state.
void resume_at_launch_boundary(void* context, uintptr_t resume_sp) noexcept;

// The trampoline: svod_trap_call(caller, entry, args, resume_sp) saves the
// callee-saved registers, stores its stack pointer in *resume_sp, calls
// caller(entry, args) and returns 0. svod_trap_resume is where the fault
// handler resumes a trapped thread, with that stack pointer
// (resume_at_launch_boundary): it returns 1 from svod_trap_call with the
// registers it saved. svod_trap_unwind(resume_sp) does the same from ordinary
// code (a kernel's call of exit(), kernel_exits.cpp). Without a trampoline
// for the machine, svod_trap_call is a plain call that returns 0.
extern "C" int svod_trap_call(KernelCaller caller, void* entry, const uint64_t* args, uintptr_t* resume_sp);
extern "C" [[noreturn]] void svod_trap_unwind(uintptr_t resume_sp);

// A kernel of any number of arguments that stores its stack pointer at entry
// in svod_trap_probed_sp and returns (for measure_kernel_entry_depths).
extern "C" void svod_trap_entry_probe();
extern "C" __attribute__((visibility("hidden"))) uintptr_t svod_trap_probed_sp;

}  // namespace svod::detail
