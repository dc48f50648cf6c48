// The resident set size of this process, for tests that check memory stays
// bounded (read from /proc/self/status, so it counts only pages in use).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

namespace svod::test {

// Whether AddressSanitizer is on: it keeps freed memory in its quarantine
// (256 MiB by default) and maps shadow memory, so RSS there says little
// about the runtime.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// VmRSS in bytes; 0 when /proc is not there.
inline uint64_t resident_bytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  }
  return 0;
}

}  // namespace svod::test
