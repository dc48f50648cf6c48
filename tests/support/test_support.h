// Helpers shared by svod's tests.
#pragma once

#include <optional>
#include <string>

#include "svod/program/program_spec.h"

namespace svod::test {

// Sets an environment variable for the lifetime of the object, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::optional<std::string>& value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> saved_;
};

// A C kernel spec with the given parameters.
ProgramSpec c_kernel(std::string entry, std::string source, std::vector<BufferParam> buffers = {},
                     std::vector<ScalarParam> scalars = {});

}  // namespace svod::test
