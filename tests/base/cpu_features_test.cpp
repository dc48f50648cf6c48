// The CPU feature table (what packages check their objects against) agrees
// with the flags the kernel reports in /proc/cpuinfo for every feature both
// name the same way.
#include "svod/base/cpu_features.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace svod {
namespace {

TEST(CpuFeatures, AgreeWithTheKernelsFlags) {
  if (host_arch() != "x86_64") GTEST_SKIP() << "the table covers x86-64";
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) flags.insert(w);
    break;
  }
  if (flags.empty()) GTEST_SKIP() << "no flags line in /proc/cpuinfo";
  // The kernel's names for features LLVM names otherwise.
  const std::pair<std::string, std::string> renamed[] = {
      {"sse3", "pni"},   {"pclmul", "pclmulqdq"}, {"rdrnd", "rdrand"}, {"sse4.1", "sse4_1"},
      {"sse4.2", "sse4_2"}, {"sha", "sha_ni"},    {"bmi", "bmi1"},       {"sahf", "lahf_lm"},
      {"lzcnt", "abm"},  {"prfchw", "3dnowprefetch"}, {"avx512vbmi2", "avx512_vbmi2"},
      {"avx512vnni", "avx512_vnni"}, {"avx512bitalg", "avx512_bitalg"}, {"avx512vpopcntdq", "avx512_vpopcntdq"},
      {"avx512vp2intersect", "avx512_vp2intersect"}, {"avx512bf16", "avx512_bf16"}, {"avx512fp16", "avx512_fp16"},
      {"avxvnni", "avx_vnni"}};
  // Instructions without register state of their own that a hypervisor may
  // leave out of its guest kernel's list while cpuid in user space reports
  // them and they run: a Firecracker guest on an AMD family 1Ah host lists
  // neither abm nor sse4a, and the project's EPYC guest (2026-12-07) not
  // rdseed.
  const std::set<std::string> hidden_by_hypervisors = {"abm", "sse4a", "rdseed"};
  size_t compared = 0;
  for (const KnownCpuFeature& f : known_cpu_features()) {
    std::string name = f.name;
    for (const auto& [llvm, kernel] : renamed)
      if (name == llvm) name = kernel;
    // Features the kernel hides or names differently are left out.
    if (!flags.contains(name) && (!f.present || hidden_by_hypervisors.contains(name))) continue;
    ++compared;
    EXPECT_EQ(f.present, flags.contains(name)) << f.name << " (" << name << " in /proc/cpuinfo)";
  }
  EXPECT_GE(compared, 10u);
  // Asked twice, the table is the same object: cpuid runs once per process.
  EXPECT_EQ(&known_cpu_features(), &known_cpu_features());
}

}  // namespace
}  // namespace svod
