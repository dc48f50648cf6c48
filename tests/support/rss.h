// The resident set size of this process, for tests that check memory stays
// bounded (read from /proc/self/status, so it counts only pages in use).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

namespace svod::test {

// VmRSS in bytes; 0 when /proc is not there.
inline uint64_t resident_bytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  }
  return 0;
}

}  // namespace svod::test
