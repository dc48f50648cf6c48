// The contract between libsvod_runtime and the in-process LLVM compiler
// plugin (libsvod_llvm.so). The runtime never links libLLVM: it dlopens the
// plugin when the llvm compiler is first wanted and calls its one exported
// factory. Both sides are built from the same tree against the same
// libsvod_runtime, so C++ types cross the boundary; kLlvmPluginAbi guards
// against a plugin left over from another build.
#pragma once

#include <cstdint>
#include <string>

#include "svod/compile/compiler.h"

namespace svod::detail {

// 2: ProgramSpec::source_name. 3: Artifact::diagnostics. 4: ProgramSpec::recipe,
// Compiler::recipes.
inline constexpr uint32_t kLlvmPluginAbi = 4;
inline constexpr char kLlvmPluginFactoryName[] = "svod_llvm_create_compiler";
inline constexpr char kLlvmPluginFileName[] = "libsvod_llvm.so";

// Returns a new compiler owned by the caller, or nullptr with *error saying
// why (wrong ABI, no usable target). Never throws.
using LlvmPluginFactory = Compiler* (*)(uint32_t abi, std::string* error);

}  // namespace svod::detail
