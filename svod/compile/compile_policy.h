// Whether this process may compile kernels, and how many it has compiled.
//
// Deployments that ship ahead-of-time packages (svod/package) want a proof
// that nothing compiles at run time: with SVOD_COMPILE=0, or after
// set_compile_allowed(false), every path that would hand source to a
// compiler (the CPU compilers, NVRTC, the OpenCL driver's builder) raises
// Error(Unsupported) naming the program instead. Loading stored objects (the
// object cache, a package) is not compiling and stays allowed.
#pragma once

#include <cstdint>
#include <string_view>

#include "svod/program/program_spec.h"

namespace svod {

// False when SVOD_COMPILE=0 (read on first use) or set_compile_allowed(false)
// was called; SVOD_COMPILE accepts 0 or 1 (anything else is Error(Validation)
// on first use).
bool compile_allowed();
// Overrides SVOD_COMPILE for the rest of the process (the C++ option).
void set_compile_allowed(bool allowed);

// Every compile path calls this just before it compiles `spec` for `target`
// (a device name for the message; may be empty): it throws Error(Unsupported)
// naming the program when compiling is off, and counts the compile otherwise.
void begin_compile(const ProgramSpec& spec, std::string_view target);

// Compiles begun in this process (all compilers and devices).
uint64_t compile_count() noexcept;

}  // namespace svod
