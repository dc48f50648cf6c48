// CPU compilers: how C and LLVM IR become running code on the CPU device
// (users pick one: svod run --cpu-compiler, SVOD_CPU_COMPILER, Python's
// cpu_compiler=; --backend, SVOD_CPU_BACKEND and backend= are the old names).
//
//   clang   a clang process per kernel (source on stdin, object on stdout),
//           loaded by svod's ELF loader;
//   llvm    LLVM and Clang in-process (libsvod_llvm.so, opened on demand),
//           loaded by svod's ELF loader — no process per kernel;
//   dlopen  a clang process builds a shared library, opened with dlopen.
//
// The default is llvm when its library is there, else clang;
// SVOD_CPU_COMPILER (clang|llvm|dlopen) overrides it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "svod/compile/compiler.h"

namespace svod {

enum class CpuCompiler { Clang, Llvm, Dlopen };

std::string_view to_string(CpuCompiler compiler) noexcept;
// "clang", "llvm" or "dlopen" (any letter case); anything else is an
// Error(Validation) that lists the valid names.
CpuCompiler parse_cpu_compiler(std::string_view name);

struct CpuCompilerChoice {
  CpuCompiler compiler = CpuCompiler::Clang;
  std::string reason;  // one line: why this compiler
};

// The compiler SVOD_CPU_COMPILER names, with the setting as the reason;
// nullopt when it is unset. Error(Validation) naming the variable for a name
// parse_cpu_compiler does not know.
std::optional<CpuCompilerChoice> requested_cpu_compiler();

// requested_cpu_compiler() when set, else llvm when libsvod_llvm.so is there,
// else clang. Asking opens nothing.
CpuCompilerChoice default_cpu_compiler();

// The process's compiler `which`, created on first use. Throws
// Error(DeviceUnavailable) saying why when the llvm library is missing. No
// compiler starts before it is needed: the llvm plugin opens at the first
// compile (or when its identity is asked for and the object cache does not
// remember it; a plugin that is there but does not open is a
// DeviceUnavailable error then), and the clang and dlopen compilers look for
// clang at their first use, so a CPU device without a toolchain still runs
// stored objects.
std::shared_ptr<const Compiler> cpu_compiler(CpuCompiler which);

// A clang-process compiler whose objects are for `target_cpu` — a CPU or a
// family as clang's -march names it ("x86-64-v3", "x86-64-v2", "znver4",
// "sapphirerapids") — instead of this machine's CPU: packages made for other
// machines (PackOptions::target_cpu). Its identity records the CPU and the
// features its objects may use. Clang is asked now: Error(Validation) for a
// name it does not know (the message lists the ones it does),
// DeviceUnavailable when there is no clang.
std::shared_ptr<const Compiler> cpu_compiler_for_target(const std::string& target_cpu);

}  // namespace svod
