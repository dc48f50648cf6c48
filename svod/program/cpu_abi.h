// The CPU kernel ABI: `void entry(T0* b0, ..., Tn* bn, s0, ..., sm)`, buffers
// then scalars in declared order, scalars int32_t or int64_t.
//
// On the x86-64 System V and AArch64 procedure-call standards every such
// argument travels in one 64-bit integer register or one 8-byte stack slot,
// so svod calls any kernel as a function of n uint64_t arguments: pointers as
// their address, scalars sign-extended (the callee reads the low 32 bits of
// an int32_t). One indirect call through a table, no libffi, no allocation.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace svod {

inline constexpr size_t kMaxKernelArgs = 64;

namespace detail {
using KernelCaller = void (*)(void* entry, const uint64_t* args);
extern const std::array<KernelCaller, kMaxKernelArgs + 1> kKernelCallers;
}  // namespace detail

// Calls entry(args[0], ..., args[n-1]); n <= kMaxKernelArgs (checked when the
// program is loaded, not here).
inline void call_kernel(void* entry, const uint64_t* args, size_t n) { detail::kKernelCallers[n](entry, args); }

}  // namespace svod
