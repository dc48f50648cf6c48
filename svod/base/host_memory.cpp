#include "svod/base/host_memory.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

namespace svod {
namespace {

// A "<key>: <n> kB" line of /proc/meminfo, in bytes; 0 when absent.
uint64_t meminfo_bytes(const std::string& text, std::string_view key) {
  const std::string line = "\n" + std::string(key) + ":";
  const size_t at = ("\n" + text).find(line);  // at is then the line's start in text
  if (at == std::string::npos) return 0;
  return std::strtoull(text.c_str() + at + key.size() + 1, nullptr, 10) * 1024;
}

std::string read_small_file(const char* path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

uint64_t host_memory_limit() noexcept {
  static const uint64_t limit = [] {
    try {
      const std::string meminfo = read_small_file("/proc/meminfo");
      uint64_t total = meminfo_bytes(meminfo, "MemTotal") + meminfo_bytes(meminfo, "SwapTotal");
      if (total == 0) total = UINT64_MAX;  // no /proc: leave the decision to the allocator
      // cgroup v2: "max" or a byte count.
      const std::string cgroup = read_small_file("/sys/fs/cgroup/memory.max");
      if (!cgroup.empty() && cgroup[0] >= '0' && cgroup[0] <= '9') {
        total = std::min<uint64_t>(total, std::strtoull(cgroup.c_str(), nullptr, 10));
      }
      return total;
    } catch (...) {
      return UINT64_MAX;
    }
  }();
  return limit;
}

}  // namespace svod
