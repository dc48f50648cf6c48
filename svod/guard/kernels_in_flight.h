// Device kernels that run on host threads svod did not start (PoCL runs
// OpenCL kernels on its own worker threads), from their enqueue until their
// device says they finished. A fault on such a thread has no KernelFrame to
// say what ran; the CPU fault handler (backends/cpu/kernel_fault.h) names
// the kernels noted here before the process ends with the signal, since svod
// cannot stop a kernel on a thread it does not run.
#pragma once

#include <cstddef>
#include <string_view>

namespace svod {

// Notes a kernel as a report names it ("program "k" (entry k) on CL:0, op 2
// (x)"): the slot to forget once it finished, or -1 when every slot is taken
// (that kernel then goes unnamed in a report).
int note_kernel_in_flight(std::string_view note) noexcept;
void forget_kernel_in_flight(int slot) noexcept;

// Async-signal-safe, for the fault handler: calls each(note, context) for
// every kernel noted and not yet forgotten (`each` may be null: only
// counted); returns how many.
size_t for_each_kernel_in_flight(void (*each)(const char* note, void* context), void* context) noexcept;

}  // namespace svod
