// The object cache across real processes: this test binary runs itself as a
// child (the DISABLED_ test below, selected by filter) that compiles, runs a
// kernel and reports the object cache's counters on stdout.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <regex>
#include <thread>

#include "svod/base/subprocess.h"
#include "svod/device/kernel_cache.h"
#include "tests/cache/cache_test_support.h"

namespace svod {
namespace {

namespace fs = std::filesystem;
using test::TempDir;
using test::ScopedEnv;

struct ChildReport {
  uint64_t hits = 0, misses = 0, writes = 0;
  float result = 0;
  uint64_t kernel_cache_capacity = 0;
};

// The child: everything comes from the environment, as in a real process.
TEST(CacheChild, DISABLED_CompileRunAndReport) {
  auto device = cpu_device();
  auto program = device->compile(test::add_kernel(6));
  const float result = test::run_add_kernel(*device, *program);
  const ObjectCacheStats s = object_cache()->stats();
  std::printf("svod-child hits=%llu misses=%llu writes=%llu result=%g capacity=%zu\n",
              static_cast<unsigned long long>(s.hits), static_cast<unsigned long long>(s.misses),
              static_cast<unsigned long long>(s.writes), result, kernel_cache().stats().capacity);
  std::fflush(stdout);
}

ChildReport run_child() {
  const std::vector<std::string> argv = {fs::read_symlink("/proc/self/exe").string(),
                                         "--gtest_filter=CacheChild.DISABLED_CompileRunAndReport",
                                         "--gtest_also_run_disabled_tests"};
  ProcessResult r = run_process(argv, "", std::chrono::minutes(2));
  EXPECT_TRUE(r.ok()) << r.out << r.err;
  std::smatch m;
  static const std::regex line(R"(svod-child hits=(\d+) misses=(\d+) writes=(\d+) result=([0-9.]+) capacity=(\d+))");
  ChildReport report;
  if (!std::regex_search(r.out, m, line)) {
    ADD_FAILURE() << "no report from the child:\n" << r.out << r.err;
    return report;
  }
  report.hits = std::stoull(m[1]);
  report.misses = std::stoull(m[2]);
  report.writes = std::stoull(m[3]);
  report.result = std::stof(m[4]);
  report.kernel_cache_capacity = std::stoull(m[5]);
  return report;
}

size_t count_files(const fs::path& dir, std::string_view suffix) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().string().ends_with(suffix)) ++n;
  return n;
}

TEST(ObjectCacheProcessTest, TwoProcessesWriteOneKeyThenAThirdHits) {
  TempDir dir;
  ScopedEnv where("SVOD_CACHE_DIR", dir.path().string());
  ScopedEnv on("SVOD_CACHE", std::nullopt);

  // Two processes compile the same kernel at the same time into an empty cache.
  ChildReport first, second;
  std::thread a([&] { first = run_child(); });
  std::thread b([&] { second = run_child(); });
  a.join();
  b.join();
  EXPECT_FLOAT_EQ(first.result, 9.0f);
  EXPECT_FLOAT_EQ(second.result, 9.0f);
  EXPECT_GE(first.writes + second.writes, 1u);
  EXPECT_EQ(count_files(dir.path(), ".svo"), 1u);
  EXPECT_EQ(count_files(dir.path(), ".tmp"), 0u);

  // A later process finds the object and compiles nothing.
  ChildReport third = run_child();
  EXPECT_FLOAT_EQ(third.result, 9.0f);
  EXPECT_EQ(third.hits, 1u);
  EXPECT_EQ(third.misses, 0u);
  EXPECT_EQ(third.writes, 0u);
}

TEST(ObjectCacheProcessTest, KernelCacheCapacityComesFromTheEnvironment) {
  ScopedEnv off("SVOD_CACHE", "0");
  {
    ScopedEnv max("SVOD_KERNEL_CACHE_MAX", "3");
    EXPECT_EQ(run_child().kernel_cache_capacity, 3u);
  }
  ScopedEnv unset("SVOD_KERNEL_CACHE_MAX", std::nullopt);
  EXPECT_EQ(run_child().kernel_cache_capacity, KernelCache::kDefaultCapacity);
}

TEST(ObjectCacheProcessTest, CacheOffInTheEnvironmentMeansNoFiles) {
  TempDir dir;
  ScopedEnv where("SVOD_CACHE_DIR", dir.path().string());
  ScopedEnv off("SVOD_CACHE", "0");
  for (int i = 0; i < 2; ++i) {
    ChildReport r = run_child();
    EXPECT_FLOAT_EQ(r.result, 9.0f);
    EXPECT_EQ(r.hits + r.misses + r.writes, 0u);
  }
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

}  // namespace
}  // namespace svod
