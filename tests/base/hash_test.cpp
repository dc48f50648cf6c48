#include <gtest/gtest.h>

#include "svod/base/error.h"
#include "svod/base/hash.h"

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

TEST(Error, CarriesItsKind) {
  Error e = make_error(ErrorKind::Load, "relocation type {} at offset {:#x}", 42, 16);
  EXPECT_EQ(e.kind(), ErrorKind::Load);
  EXPECT_STREQ(e.what(), "relocation type 42 at offset 0x10");
  EXPECT_EQ(to_string(ErrorKind::PlanPoisoned), "plan poisoned");
}

}  // namespace
}  // namespace svod
