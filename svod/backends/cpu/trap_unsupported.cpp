// Machines without a trampoline (trap_machine.h): a kernel is a plain call,
// and the handler never resumes one (kMachineTraps is false).
#include "svod/backends/cpu/trap_machine.h"

#if !defined(__x86_64__) && !defined(__aarch64__)
#include <cstdlib>

namespace svod::detail {

extern "C" int svod_trap_call(KernelCaller caller, void* entry, const uint64_t* args, uintptr_t*) {
  caller(entry, args);
  return 0;
}

extern "C" void svod_trap_unwind(uintptr_t) { std::abort(); }

void read_machine_state(const void*, TrappedFault&) noexcept {}
uint64_t leaf_return_address(const TrappedFault&, const void*) noexcept { return 0; }
void resume_at_launch_boundary(void*, uintptr_t) noexcept {}
bool follows_call(uint64_t) noexcept { return false; }
// (Without a trampoline the handler never needs the pc moved.)
uint64_t context_pc(const void*) noexcept { return 0; }

// (Nothing is measured: svod_trap_call leaves resume_sp as it was.)
extern "C" void svod_trap_entry_probe() {}
extern "C" uintptr_t svod_trap_probed_sp = 0;

}  // namespace svod::detail
#endif
