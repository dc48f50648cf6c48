// Pieces the plan-driven subcommands (run, bench, tune) share.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "svod/base/error.h"

namespace svod::cli {

// Prints failure_text() on stderr; returns exit status 2.
int fail(std::string_view command, const Error& e);
// "svod COMMAND: error (KIND): first line", then any further lines of the
// message (compiler diagnostics) indented, each ending in a newline.
std::string failure_text(std::string_view command, const Error& e);

// --var NAME=VALUE arguments as a map; Error(Validation) for a malformed one.
std::map<std::string, int64_t> parse_vars(const std::vector<std::string>& vars);

// --backend: makes `backend` (clang, llvm or dlopen) the CPU device's default
// for this process, before any plan opens the device. Empty: no change.
// Error(Validation) for an unknown name.
void select_cpu_backend(const std::string& backend);

}  // namespace svod::cli
