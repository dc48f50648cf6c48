#include <gtest/gtest.h>

#include "svod/base/env.h"
#include "svod/base/error.h"
#include "svod/base/hash.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

TEST(Hash, StringsAreLengthPrefixed) {
  Hash128 a = Hasher().str("ab").str("c").finish();
  Hash128 b = Hasher().str("a").str("bc").finish();
  EXPECT_NE(a, b);
  EXPECT_EQ(a, Hasher().str("ab").str("c").finish());
  EXPECT_EQ(a.to_hex().size(), 32u);
}

TEST(Hash, BytesMatchesOneShot) {
  std::string s = "svod kernel source";
  auto bytes = std::as_bytes(std::span(s.data(), s.size()));
  EXPECT_EQ(hash_bytes(bytes), Hasher().bytes(bytes).finish());
  EXPECT_NE(hash_bytes(bytes), hash_bytes(bytes.first(3)));
}

TEST(Env, ReadsIntegersAndRejectsGarbage) {
  test::ScopedEnv unset("SVOD_TEST_INT", std::nullopt);
  EXPECT_EQ(env_int("SVOD_TEST_INT", 7), 7);
  {
    test::ScopedEnv set("SVOD_TEST_INT", "42");
    EXPECT_EQ(env_int("SVOD_TEST_INT", 7), 42);
  }
  test::ScopedEnv bad("SVOD_TEST_INT", "4x");
  try {
    env_int("SVOD_TEST_INT", 7);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Validation);
    EXPECT_NE(std::string(e.what()).find("SVOD_TEST_INT"), std::string::npos);
  }
}

TEST(Error, CarriesItsKind) {
  Error e = make_error(ErrorKind::Load, "relocation type {} at offset {:#x}", 42, 16);
  EXPECT_EQ(e.kind(), ErrorKind::Load);
  EXPECT_STREQ(e.what(), "relocation type 42 at offset 0x10");
  EXPECT_EQ(to_string(ErrorKind::PlanPoisoned), "plan poisoned");
}

}  // namespace
}  // namespace svod
