// host_memory_limit: RAM plus swap as /proc/meminfo states them (MemTotal,
// SwapTotal), lowered to the cgroup's memory.max when there is one.
#include "svod/base/host_memory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace svod {
namespace {

// A "<key>: <n> kB" line of /proc/meminfo in bytes; 0 when absent.
uint64_t meminfo_bytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string name;
    uint64_t kib = 0;
    if (fields >> name >> kib && name == key + ":") return kib * 1024;
  }
  return 0;
}

TEST(HostMemory, LimitIsRamPlusSwapOrTheCgroupsLimit) {
  const uint64_t ram = meminfo_bytes("MemTotal");
  if (ram == 0) GTEST_SKIP() << "no /proc/meminfo";
  uint64_t expected = ram + meminfo_bytes("SwapTotal");
  std::ifstream cgroup("/sys/fs/cgroup/memory.max");
  std::string max;
  if (cgroup >> max && !max.empty() && max[0] >= '0' && max[0] <= '9') expected = std::min<uint64_t>(expected, std::stoull(max));
  // The kernel rounds sysinfo's and meminfo's figures alike, to pages.
  const uint64_t limit = host_memory_limit();
  EXPECT_LE(limit > expected ? limit - expected : expected - limit, uint64_t{1} << 20) << limit << " vs " << expected;
  EXPECT_EQ(host_memory_limit(), limit);  // read once
}

}  // namespace
}  // namespace svod
