// Confined compiles: a sandboxed run's C and LLVM IR sources compiled by
// clang in a confinement that can read only the toolchain (docs/SECURITY.md,
// "The sandbox").
//
// A source can #include any file its compiler can open: the user's keys come
// back in the diagnostics, or in the object as data that a kernel copies into
// an output. So the sources of a sandboxed run are compiled by the sandbox
// helper's compile mode (tools/sandbox_helper/compile_mode.cpp), which runs
// clang in new user, mount, network, IPC and PID namespaces over an empty
// root holding, read-only, exactly clang's binary and libraries, its resource
// folder and the C header folders clang searches — with limits on CPU time,
// memory, files and processes, and this process's wall-clock limit. Clang
// gets the clang-process compiler's own command line (ClangCompiler), so a
// confined compile makes the same object bytes as an unconfined one of the
// same recipe.
//
// Where the machine refuses those namespaces, confined compiles are refused
// (Error(Unsupported) naming what is missing): a sandboxed run never compiles
// its sources unconfined. Objects are compiled afresh each time, neither read
// from nor written to the object cache.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "svod/compile/compiler.h"
#include "svod/device/device.h"

namespace svod {

struct ConfinedCompileOptions {
  // How long one compile may take; past it clang is killed and the compile
  // fails. Also, in whole seconds, its CPU-time limit.
  std::chrono::milliseconds wall_limit{std::chrono::seconds(120)};
  // The address space clang may map.
  uint64_t memory_limit = uint64_t{8} << 30;
};

// Compiles `spec` (C or LLVM IR, for this machine's CPU) confined.
// Errors: Error(SandboxViolation) for an #include of a file the confined
// compiler cannot read, naming the file and the rule (its contents are never
// read, so never shown), and for a compile past a limit;
// Error(Compile) with clang's diagnostics for any other failure;
// Error(Unsupported) when confined compiles are unavailable here, naming
// what is missing.
Artifact compile_confined(const ProgramSpec& spec, const ConfinedCompileOptions& options = {});

// compile_confined(spec) loaded on `device`, a CPU device; Error(Unsupported)
// for a device that does not run ELF objects from host memory, before
// anything is compiled.
std::shared_ptr<const Program> load_confined(Device& device, const ProgramSpec& spec,
                                             const ConfinedCompileOptions& options = {});

// What the confined compiler may read here (clang's binary and libraries, its
// resource folder, the header folders), after compiling a small kernel
// confined to prove that it works; Error(Unsupported) naming what is missing
// when it does not.
std::vector<std::string> probe_confined_compile();

}  // namespace svod
