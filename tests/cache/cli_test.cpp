// `svod cache stats` and `svod cache clear` against a real cache directory.
#include <gtest/gtest.h>

#include <filesystem>

#include "svod/base/subprocess.h"
#include "svod/cache/object_cache.h"
#include "tests/cache/cache_test_support.h"

namespace svod {
namespace {

namespace fs = std::filesystem;

TEST(CacheCliTest, StatsAndClear) {
  const fs::path cli = fs::path(SVOD_BINARY_DIR) / "svod";
  if (!fs::exists(cli)) GTEST_SKIP() << "the svod tool is not built (target svod_cli)";
  test::TempDir dir;
  ObjectCache cache({dir.path(), ObjectCacheConfig::kDefaultMaxBytes});
  Artifact a;
  a.bytes.assign(2048, std::byte{7});
  cache.put({1, 1}, a);
  cache.put({2, 2}, a);

  test::ScopedEnv where("SVOD_CACHE_DIR", dir.path().string());
  ProcessResult stats = run_process({cli.string(), "cache", "stats"}, "", std::chrono::seconds(30));
  ASSERT_TRUE(stats.ok()) << stats.err;
  EXPECT_NE(stats.out.find(dir.path().string()), std::string::npos) << stats.out;
  EXPECT_NE(stats.out.find("entries: 2"), std::string::npos) << stats.out;

  ProcessResult clear = run_process({cli.string(), "cache", "clear"}, "", std::chrono::seconds(30));
  ASSERT_TRUE(clear.ok()) << clear.err;
  EXPECT_NE(clear.out.find("removed 2 files"), std::string::npos) << clear.out;
  EXPECT_EQ(cache.usage().entries, 0u);
}

}  // namespace
}  // namespace svod
