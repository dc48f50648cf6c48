// Re-raising a failure with the place it happened: one rule for the plan
// runner and the host queue, so a failure reads the same wherever it surfaces.
#pragma once

#include <exception>
#include <string_view>

namespace svod {

// Throws `error` again as an Error of the same kind (Execution for exceptions
// that are not svod::Error; a KernelFault keeps its info) whose message is "`where`: original message".
[[noreturn]] void rethrow_with_context(std::exception_ptr error, std::string_view where);

}  // namespace svod
