// The custom functions svod registers itself: all_reduce, fill and print.
// Internal: the registry adds them when it is first used.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "svod/custom/custom_function.h"

namespace svod::detail {

std::vector<std::pair<std::string, CustomFunctionDef>> builtin_custom_functions();

}  // namespace svod::detail
