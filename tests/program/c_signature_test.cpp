// The parameters of a C kernel read from its source (svod/program/c_signature.h):
// what c_parameters makes of a signature, for Python's compile() and `svod
// compile`. (tests/python/test_program.py covers the reader's C in depth.)
#include <gtest/gtest.h>

#include "svod/program/c_signature.h"

namespace svod {
namespace {

std::optional<CParameters> parameters_of(std::string_view source, std::string_view entry, std::string& problem) {
  return c_parameters(parse_c_signature(source, entry, {}), problem);
}

TEST(CParameters, PointersAreBuffersAndIntegersScalars) {
  std::string problem;
  const auto p = parameters_of(
      "#include <stdint.h>\n"
      "static int helper(int x) { return x; }\n"
      "void add(float* restrict o, const float* a, const void* raw, int n, int64_t stride) { o[0] = a[0]; }\n",
      "add", problem);
  ASSERT_TRUE(p) << problem;
  ASSERT_EQ(p->buffers.size(), 3u);
  EXPECT_EQ(p->buffers[0].name, "o");
  EXPECT_EQ(p->buffers[0].access, Access::ReadWrite);
  EXPECT_EQ(p->buffers[0].dtype, DType::F32);
  EXPECT_EQ(p->buffers[1].access, Access::Read);
  EXPECT_EQ(p->buffers[2].name, "raw");
  EXPECT_EQ(p->buffers[2].dtype, std::nullopt);  // void: no element type
  ASSERT_EQ(p->scalars.size(), 2u);
  EXPECT_EQ(p->scalars[0].name, "n");
  EXPECT_EQ(p->scalars[0].type, ScalarType::I32);
  EXPECT_EQ(p->scalars[1].name, "stride");
  EXPECT_EQ(p->scalars[1].type, ScalarType::I64);
}

TEST(CParameters, NoneWithTheReasonWhenTheSignatureCannotSay) {
  std::string problem;
  EXPECT_FALSE(parameters_of("void k(int n, float* o) {}", "k", problem));
  EXPECT_EQ(problem, "pointer parameter 1 (\"o\") follows an integer one; svod passes every buffer before every scalar");
  problem.clear();
  EXPECT_FALSE(parameters_of("void k(float* o, float x) {}", "k", problem));
  EXPECT_NE(problem.find("parameter 1 (\"x\"): "), std::string::npos) << problem;
  problem.clear();
  EXPECT_FALSE(parameters_of("void other(float* o) {}", "k", problem));
  EXPECT_NE(problem.find("no definition \"k(...) {\""), std::string::npos) << problem;
}

}  // namespace
}  // namespace svod
