#include "svod/base/host_memory.h"

#include <fcntl.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace svod {
namespace {

// cgroup v2's limit of this process's memory: "max" or a byte count; 0 when
// there is none. Plain read(2): this runs at a process's first allocation.
uint64_t cgroup_limit() noexcept {
  const int fd = ::open("/sys/fs/cgroup/memory.max", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[32] = {};
  const ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (n <= 0 || text[0] < '0' || text[0] > '9') return 0;
  return std::strtoull(text, nullptr, 10);
}

}  // namespace

uint64_t host_memory_limit() noexcept {
  static const uint64_t limit = [] {
    // RAM and swap from one system call (/proc/meminfo's MemTotal and
    // SwapTotal, without reading and parsing it: 0.4 ms of a process's
    // first allocation).
    struct sysinfo info {};
    uint64_t total = UINT64_MAX;  // unknown: the decision is the allocator's
    if (::sysinfo(&info) == 0 && info.totalram > 0)
      total = (static_cast<uint64_t>(info.totalram) + info.totalswap) * std::max<uint64_t>(info.mem_unit, 1);
    if (const uint64_t cgroup = cgroup_limit(); cgroup > 0) total = std::min(total, cgroup);
    return total;
  }();
  return limit;
}

}  // namespace svod
