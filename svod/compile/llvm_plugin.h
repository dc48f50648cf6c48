// The llvm compiler, from the plugin libsvod_llvm.so.
//
// libsvod_runtime does not link LLVM (the plugin holds it, and opening the
// plugin costs a process several milliseconds, about 25 when it links
// libLLVM.so and libclang-cpp.so); the plugin is opened the first time
// something asks for the llvm compiler. It is looked for at SVOD_LLVM_PLUGIN
// when that is set (and only there), else beside libsvod_runtime.so, else in
// the library folder of the install prefix. Once opened it stays open for the life of the process.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "svod/compile/compiler.h"

namespace svod {

struct LlvmPluginStatus {
  std::shared_ptr<const Compiler> compiler;  // null when the plugin is unavailable
  std::string path;                          // the library that was opened
  std::string error;                         // why it is unavailable: every place tried
  bool available() const noexcept { return compiler != nullptr; }
};

// Opens the plugin on the first call; later calls return the same status.
const LlvmPluginStatus& llvm_plugin();

// The status when llvm_plugin() has run already, else null (opens nothing).
const LlvmPluginStatus* llvm_plugin_if_opened() noexcept;

// The paths tried, in order.
std::vector<std::string> llvm_plugin_candidates();

// The file the plugin would be opened from, without opening it: the first
// candidate that is a regular file.
std::optional<std::string> llvm_plugin_file();

}  // namespace svod
