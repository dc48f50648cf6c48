// Checked mode's parts (issue 24): SVOD_CHECK's values, the poison patterns,
// the non-finite scan, and guarded memory's guards, gaps and table.
#include "svod/guard/checked_mode.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "svod/base/error.h"
#include "svod/guard/guarded_memory.h"

namespace svod {
namespace {

TEST(CheckedMode, ParsesEveryFormAndNamesTheSettingInErrors) {
  EXPECT_EQ(parse_check_mode("", "SVOD_CHECK"), CheckMode{});
  EXPECT_EQ(parse_check_mode("0", "SVOD_CHECK"), CheckMode{});
  for (const CheckMode mode : {CheckMode{}, CheckMode{.memory = true}, CheckMode{.nan = true}, CheckMode{true, true}})
    EXPECT_EQ(parse_check_mode(to_string(mode), "SVOD_CHECK"), mode) << to_string(mode);
  EXPECT_EQ(parse_check_mode("1", "SVOD_CHECK"), (CheckMode{.memory = true}));
  EXPECT_EQ(parse_check_mode("memory", "SVOD_CHECK"), (CheckMode{.memory = true}));
  EXPECT_EQ(parse_check_mode("nan", "SVOD_CHECK"), (CheckMode{.nan = true}));
  EXPECT_EQ(parse_check_mode("nan,memory", "SVOD_CHECK"), (CheckMode{true, true}));
  EXPECT_EQ(parse_check_mode("all", "SVOD_CHECK"), (CheckMode{true, true}));
  try {
    parse_check_mode("memory,bounds", "--check");
    FAIL() << "accepted an unknown check";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Validation);
    EXPECT_NE(std::string(e.what()).find("--check: unknown check \"bounds\""), std::string::npos) << e.what();
  }
  const CheckMode before = check_mode();
  set_check_mode(CheckMode{.nan = true});
  EXPECT_EQ(check_mode(), (CheckMode{.nan = true}));
  set_check_mode(before);
}

TEST(CheckedMode, PoisonIsASignallingNanOfEveryFloatTypeAndAPatternOtherwise) {
  for (DType t : kAllDTypes) {
    std::vector<std::byte> bytes(8 * size_of(t) + 1);  // a partial element at the end too
    poison(bytes.data(), bytes.size(), t);
    if (is_float(t)) {
      for (size_t i = 0; i < 8; ++i) EXPECT_TRUE(std::isnan(load_as_double(t, bytes.data() + i * size_of(t)))) << to_string(t);
      EXPECT_EQ(first_non_finite(bytes.data(), 8, t), 0u) << to_string(t);
    } else {
      EXPECT_EQ(bytes[0], std::byte(t == DType::U8 ? 0xFF : 0xA5)) << to_string(t);
      EXPECT_EQ(first_non_finite(bytes.data(), 8, t), std::nullopt);
    }
  }
  // f32's pattern is signalling: its quiet bit (22) is clear.
  uint32_t f32 = 0;
  poison(&f32, 4, DType::F32);
  EXPECT_EQ(f32 & (1u << 22), 0u);
}

TEST(CheckedMode, FirstNonFiniteFindsNanAndInfOfEachWidth) {
  for (DType t : {DType::F16, DType::BF16, DType::F32, DType::F64}) {
    std::vector<std::byte> bytes(16 * size_of(t));
    for (size_t i = 0; i < 16; ++i) store_from_double(t, bytes.data() + i * size_of(t), 1.5 * double(i));
    EXPECT_EQ(first_non_finite(bytes.data(), 16, t), std::nullopt) << to_string(t);
    store_from_double(t, bytes.data() + 11 * size_of(t), -std::numeric_limits<double>::infinity());
    store_from_double(t, bytes.data() + 13 * size_of(t), std::nan(""));
    EXPECT_EQ(first_non_finite(bytes.data(), 16, t), 11u) << to_string(t);
  }
}

TEST(GuardedMemory, DataEndsAtTheGuardAndTheTableFindsBothSides) {
  for (size_t bytes : {size_t{0}, size_t{16}, size_t{100}, size_t{4096}, size_t{5000}, size_t{1} << 20}) {
    auto* data = static_cast<unsigned char*>(allocate_guarded(bytes, Guards::Around));
    const auto at = reinterpret_cast<uint64_t>(data);
    EXPECT_EQ(at % 16, 0u) << bytes;
    for (size_t i = 0; i < bytes; ++i) EXPECT_EQ(data[i], 0) << bytes;  // zeroed
    std::memset(data, 7, bytes);
    EXPECT_TRUE(gaps_intact(data, bytes, Guards::Around)) << bytes;
    GuardHit hit{};
    ASSERT_TRUE(find_guard(at + bytes, hit)) << bytes;
    EXPECT_EQ(hit.data, at);
    EXPECT_EQ(hit.bytes, bytes);
    EXPECT_TRUE(hit.after);
    ASSERT_TRUE(find_guard(at - 1, hit)) << bytes;
    EXPECT_FALSE(hit.after);
    if (bytes % 16 != 0) {  // the slack before the guard holds the canary
      data[bytes] = 1;
      EXPECT_FALSE(gaps_intact(data, bytes, Guards::Around)) << bytes;
      data[bytes] = 0xCB;
      EXPECT_TRUE(gaps_intact(data, bytes, Guards::Around)) << bytes;
    }
    free_guarded(data, bytes, Guards::Around);
    EXPECT_FALSE(find_guard(at + bytes, hit)) << bytes;
  }
}

TEST(GuardedMemory, EachGuardIsAsLargeAsTheData) {
  // A jump of up to the data's own size past either end (a row or a tile too far) lands in a guard
  // and is named; one page of guard each side used to let it into whatever was mapped next.
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  for (size_t bytes : {size_t{64}, 4 * page, size_t{1} << 20}) {
    auto* data = static_cast<unsigned char*>(allocate_guarded(bytes, Guards::Around));
    const auto at = reinterpret_cast<uint64_t>(data);
    const uint64_t reach = std::max<uint64_t>(bytes, page) - 1;
    GuardHit hit{};
    ASSERT_TRUE(find_guard(at + bytes + reach, hit)) << bytes;
    EXPECT_EQ(hit.data, at);
    EXPECT_TRUE(hit.after);
    ASSERT_TRUE(find_guard(at - reach, hit)) << bytes;
    EXPECT_EQ(hit.data, at);
    EXPECT_FALSE(hit.after);
    EXPECT_FALSE(find_guard(at + bytes / 2, hit)) << "the data is no guard";
    free_guarded(data, bytes, Guards::Around);
  }
}

TEST(GuardedMemory, AWriteThreePagesPastTheEndFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_DEATH(
      {
        auto* data = static_cast<volatile char*>(allocate_guarded(4 * page, Guards::Around));
        data[7 * page] = 1;
      },
      "");
}

TEST(GuardedMemory, TheFirstByteAfterAndBeforeFault) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto* data = static_cast<volatile char*>(allocate_guarded(64, Guards::Around));
        data[64] = 1;
      },
      "");
  EXPECT_DEATH(
      {
        auto* data = static_cast<volatile char*>(allocate_guarded(4096, Guards::Around));
        data[-1] = 1;
      },
      "");
}


// The default fence: one guard page after the data, which ends at most 63
// bytes before it, 64-byte aligned; nothing guards the start.
TEST(GuardedMemory, AFenceEndsTheDataAtOneGuardPage) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  for (size_t bytes : {size_t{0}, size_t{4}, size_t{64}, size_t{100}, page, page + 1, size_t{1} << 20}) {
    auto* data = static_cast<unsigned char*>(allocate_guarded(bytes, Guards::After));
    const auto at = reinterpret_cast<uint64_t>(data);
    EXPECT_EQ(at % 64, 0u) << bytes;
    const uint64_t guard = (bytes + 63) / 64 * 64 + at;
    EXPECT_EQ(guard % page, 0u) << bytes;
    for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(data[i], 0) << bytes;
    GuardHit hit{};
    ASSERT_TRUE(find_guard(guard, hit)) << bytes;
    EXPECT_EQ(hit.data, at);
    EXPECT_EQ(hit.bytes, bytes);
    EXPECT_TRUE(hit.after);
    EXPECT_EQ(hit.guards, Guards::After);
    EXPECT_TRUE(find_guard(guard + page - 1, hit)) << bytes;
    EXPECT_FALSE(find_guard(guard + page, hit)) << "one page of guard";
    if (bytes % 64 != 0) {  // the slack before the guard holds the canary
      data[bytes] = 1;
      EXPECT_EQ(first_gap_change(data, bytes, Guards::After), static_cast<int64_t>(bytes));
      data[bytes] = 0xCB;
    }
    EXPECT_TRUE(gaps_intact(data, bytes, Guards::After)) << bytes;
    free_guarded(data, bytes, Guards::After);
    EXPECT_FALSE(find_guard(guard, hit)) << bytes;
  }
}

TEST(GuardedMemory, FencesStopAtTheirShareOfTheMappingsAndComeBackWhenFreed) {
  // Each fence is two of the process's mappings; past an eighth of
  // vm.max_map_count fences (a quarter of the mappings) try_allocate_fenced
  // says no, and the caller takes unfenced memory.
  std::vector<void*> fences;
  for (size_t n = 0; n < 200000; ++n) {
    void* p = try_allocate_fenced(16);
    if (p == nullptr) break;
    fences.push_back(p);
  }
  size_t limit = 65530;
  if (std::FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r")) {
    unsigned long value = 0;
    if (std::fscanf(f, "%lu", &value) == 1) limit = value;
    std::fclose(f);
  }
  EXPECT_GT(fences.size(), 0u);
  EXPECT_LE(fences.size(), limit / 8);
  EXPECT_EQ(try_allocate_fenced(16), nullptr);
  for (void* p : fences) free_guarded(p, 16, Guards::After);
  void* again = try_allocate_fenced(16);
  ASSERT_NE(again, nullptr);
  free_guarded(again, 16, Guards::After);
}

}  // namespace
}  // namespace svod
