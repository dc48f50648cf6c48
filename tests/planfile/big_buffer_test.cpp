// Big zero-initialised buffers cost only the pages a kernel touches, and a
// buffer larger than the machine can give is refused up front with the size
// asked for and the memory available.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "svod/base/error.h"
#include "svod/device/buffer.h"
#include "svod/backends/cpu/cpu_device.h"
#include "svod/base/host_memory.h"
#include "svod/planfile/plan_file.h"
#include "tests/support/temp_dir.h"
#include "tests/support/rss.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using Json = nlohmann::ordered_json;

constexpr uint64_t kGiB = uint64_t{1} << 30;

// A plan with one f32 zeros buffer of `count` elements and a kernel that
// writes 42 into element `at`.
Json poke_plan(uint64_t count, uint64_t at) {
  return Json{
      {"svod_plan", 1},
      {"buffers", {{"big", {{"dtype", "f32"}, {"count", count}, {"init", "zeros"}}}}},
      {"programs",
       {{"poke",
         {{"language", "c"},
          {"entry", "poke"},
          {"source", "void poke(float* o, long i) { o[i] = 42.0f; }"},
          {"buffers", Json::array({{{"name", "o"}, {"access", "write"}}})},
          {"scalars", Json::array({{{"name", "i"}, {"type", "i64"}}})}}}}},
      {"ops", Json::array({{{"run", "poke"}, {"buffers", {"big"}}, {"scalars", {{"i", at}}}}})},
  };
}

TEST(BigBuffers, AnEightGiBZerosBufferCostsOnlyThePagesAKernelTouches) {
  // 8 GiB, or half of what the machine can give when that is less.
  const uint64_t bytes = std::min<uint64_t>(8 * kGiB, host_memory_limit() / 2);
  const uint64_t count = bytes / 4;
  test::TempDir dir;
  // The same plan with a small buffer first, so the compiler, the kernel and
  // the thread pool are loaded before the measurement starts.
  load_plan(parse_plan_file(dir.write("small.json", poke_plan(1024, 1023).dump()))).execute();
  const auto path = dir.write("plan.json", poke_plan(count, count - 1).dump());

  const uint64_t rss_before = test::resident_bytes();
  LoadedPlan loaded = load_plan(parse_plan_file(path));
  loaded.execute();
  const uint64_t rss_after = test::resident_bytes();

  const float* data = static_cast<const float*>(loaded.plan.buffer(0).data());
  EXPECT_EQ(data[count - 1], 42.0f);
  EXPECT_EQ(data[0], 0.0f);
  EXPECT_EQ(data[count / 2], 0.0f);
  // Reading two more zero pages and writing one (plus the plan's own small
  // allocations): far below 16 MiB, against the whole buffer had it been
  // written at allocation.
  if (test::kAddressSanitizer) return;
  EXPECT_LT(rss_after, rss_before + 16 * (uint64_t{1} << 20))
      << "RSS grew from " << rss_before << " to " << rss_after << " bytes for a " << bytes << "-byte buffer";
}

TEST(BigBuffers, SmallAndMappedBuffersStartZeroed) {
  auto cpu = cpu_device();
  for (size_t count : {size_t{1}, size_t{1000}, HostStorage::kMapThreshold, HostStorage::kMapThreshold * 3 + 5}) {
    Buffer b = cpu->allocate(DType::U8, count);
    const auto bytes = b.span<const uint8_t>();
    EXPECT_TRUE(std::all_of(bytes.begin(), bytes.end(), [](uint8_t v) { return v == 0; })) << count;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % HostStorage::kAlignment, 0u) << count;
  }
}

TEST(BigBuffers, ABufferLargerThanTheMachineIsRefusedWithTheSizes) {
  const uint64_t limit = host_memory_limit();
  ASSERT_LT(limit, UINT64_MAX / 2) << "no /proc/meminfo on this machine";
  const uint64_t asked = limit + limit / 2;
  auto cpu = cpu_device();
  const Error e = test::expect_error([&] { cpu->allocate(DType::U8, asked); });
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  EXPECT_NE(std::string(e.what()).find(std::to_string(asked) + " bytes"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find(std::to_string(limit) + " bytes"), std::string::npos) << e.what();

  // Through a plan file, the error also names the buffer.
  if (asked / 4 > (uint64_t{1} << 40) / 4) GTEST_SKIP() << "the machine has more memory than a plan buffer may ask for";
  test::TempDir dir;
  const auto path = dir.write("plan.json", poke_plan(asked / 4, 0).dump());
  const Error from_plan = test::expect_error([&] { load_plan(parse_plan_file(path)); });
  EXPECT_EQ(from_plan.kind(), ErrorKind::Unsupported);
  EXPECT_NE(std::string(from_plan.what()).find("buffers.big"), std::string::npos) << from_plan.what();
  EXPECT_NE(std::string(from_plan.what()).find("more than this machine can give"), std::string::npos)
      << from_plan.what();
}

}  // namespace
}  // namespace svod
