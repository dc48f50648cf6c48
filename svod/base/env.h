// Reading SVOD_* environment variables in one place, with errors that name
// the variable when its value is malformed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace svod {

// The variable's value; nullopt when unset or empty.
std::optional<std::string> env_string(const char* name);

// The variable as an integer; `fallback` when unset. Throws Error(Validation)
// naming the variable when it is not an integer.
int64_t env_int(const char* name, int64_t fallback);

}  // namespace svod
