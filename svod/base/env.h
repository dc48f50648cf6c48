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

// The variable as a switch: "1", "true", "yes", "on" are true and "0",
// "false", "no", "off" false (in any case); nullopt when unset or empty.
// Throws Error(Validation) naming the variable for anything else, so a typo
// never leaves a feature silently on or off.
std::optional<bool> env_switch(const char* name);

}  // namespace svod
