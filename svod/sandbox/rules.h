// The sandbox's rules as its errors name them (sandbox.cpp): which rule a
// refused system call broke, and a signal's name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace svod::sandbox {

// The rule a refused system call broke, by its name as libseccomp knows it
// (and, for memory, its arguments: args[2] is the protection), e.g. "no
// files", "no network", "no executable memory after loading".
std::string rule_of(std::string_view name, const uint64_t* args, uint64_t memory_limit);

// "SIGSEGV", or "signal N" for one without a name.
std::string signal_name(int signal);

}  // namespace svod::sandbox
