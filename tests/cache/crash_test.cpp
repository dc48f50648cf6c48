// Object-cache writes survive SIGKILL: child processes write entries and are
// killed at random moments, many times. Every entry a reader finds afterwards
// is whole (its payload is exactly what was written for its key), and the
// temporary files the killed writers left are removed by the next process
// that writes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "svod/cache/object_cache.h"
#include "tests/cache/cache_test_support.h"

namespace svod {
namespace {

namespace fs = std::filesystem;

// The payload written for `key`: its size and bytes follow from the key, so a
// reader can tell a whole entry from any other. A word at a time from
// splitmix64, cheap even in sanitizer builds, so writers spend their time
// writing and kills land mid-write.
std::vector<std::byte> payload_for(const Hash128& key) {
  uint64_t state = key.low ^ key.high;
  auto next = [&state] {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  std::vector<std::byte> bytes(64 * 1024 + next() % (512 * 1024));
  for (size_t i = 0; i < bytes.size(); i += sizeof(uint64_t)) {
    const uint64_t word = next();
    std::memcpy(bytes.data() + i, &word, std::min(sizeof word, bytes.size() - i));
  }
  return bytes;
}

Hash128 key_from_entry(const fs::path& path) {
  const std::string hex = path.stem().string();  // high word first
  return Hash128{std::strtoull(hex.substr(16, 16).c_str(), nullptr, 16),
                 std::strtoull(hex.substr(0, 16).c_str(), nullptr, 16)};
}

size_t count_temp_files(const fs::path& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().extension() == ".tmp" ? 1 : 0;
  return n;
}

// A child that writes entries until it is killed (or `limit` entries).
pid_t start_writer(const fs::path& dir, uint64_t child, uint64_t limit) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  // Small budget: evictions run too, while writers die around them.
  ObjectCache cache({dir, 8u << 20});
  for (uint64_t n = 0; n < limit; ++n) {
    const Hash128 key{child * 1'000'000 + n, 0x5eed};
    Artifact artifact;
    artifact.bytes = payload_for(key);
    cache.put(key, artifact);
  }
  ::_exit(0);
}

TEST(ObjectCacheCrash, KilledWritersNeverLeaveAPartialEntryAndTheirTempFilesAreCleaned) {
  test::TempDir dir;
  std::mt19937 random(12345);
  // At least kKills kills; more (up to kMaxKills) until some kill landed
  // mid-write and some entries were published, which on a loaded machine can
  // take longer than the first few random moments.
  constexpr int kKills = 40, kMaxKills = 1000;
  size_t temps_seen = 0, entries_checked = 0;
  int k = 0;
  for (; k < kKills || ((temps_seen == 0 || entries_checked == 0) && k < kMaxKills); ++k) {
    const pid_t writer = start_writer(dir.path(), k + 1, UINT64_MAX);
    ASSERT_GT(writer, 0);
    std::this_thread::sleep_for(std::chrono::microseconds(2000 + random() % 20000));
    ::kill(writer, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(writer, &status, 0), writer);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    temps_seen += count_temp_files(dir.path());
    // A reader: every entry there is whole. A damaged one would be removed
    // and counted as corrupt.
    ObjectCache reader({dir.path(), 1u << 30});
    for (const auto& e : fs::directory_iterator(dir.path())) {
      if (e.path().extension() != ".svo") continue;
      const Hash128 key = key_from_entry(e.path());
      const std::optional<Artifact> got = reader.get(key);
      if (!got) continue;  // evicted by a writer in between
      ++entries_checked;
      EXPECT_TRUE(got->bytes == payload_for(key)) << e.path();
    }
    EXPECT_EQ(reader.stats().corrupt, 0u);
  }
  // The kills landed mid-write at least sometimes (writers spend most of
  // their time writing), and entries were published in between.
  EXPECT_GT(temps_seen, 0u);
  EXPECT_GT(entries_checked, 0u);

  // The next process that writes removes what the dead writers left.
  const pid_t next = start_writer(dir.path(), k + 1, 1);
  int status = 0;
  ASSERT_EQ(::waitpid(next, &status, 0), next);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(count_temp_files(dir.path()), 0u);
}

}  // namespace
}  // namespace svod
