// How svod names a plan op (svod/guard/op_name.h): the one writer of an op's
// name, into a fixed buffer as the fault handler calls it, and the title
// composed from it.
#include "svod/guard/op_name.h"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <string_view>

namespace svod {
namespace {

TEST(OpName, AnOpIsNamedByItsIndexThenItsIdOrLabel) {
  EXPECT_EQ(op_name(3, ""), "op 3");
  EXPECT_EQ(op_name(3, "mm"), "op 3 (mm)");
  EXPECT_EQ(op_name(0, "copy CPU -> CL:0"), "op 0 (copy CPU -> CL:0)");
  EXPECT_EQ(op_name(18446744073709551615u, "x"), "op 18446744073709551615 (x)");
}

TEST(OpName, TheWriterStopsAtTheBuffersEndAndSaysHowLongTheNameIs) {
  std::array<char, 10> buffer;
  buffer.fill('#');
  // "op 12 (layer3)" is 14 characters: 6 fit, the rest of the buffer stays.
  EXPECT_EQ(write_op_name(std::span<char>(buffer.data(), 6), 12, "layer3"), 14u);
  EXPECT_EQ(std::string_view(buffer.data(), buffer.size()), "op 12 ####");
  EXPECT_EQ(write_op_name({}, 12, "layer3"), 14u);
  EXPECT_EQ(write_op_name(buffer, 7, ""), 4u);
  EXPECT_EQ(std::string_view(buffer.data(), 4), "op 7");
}

TEST(OpName, ATitleIsTheNameTheKindAndWhatTheOpRuns) {
  EXPECT_EQ(op_title("op 3 (mm)", OpKind::Kernel, "mm"), "op 3 (mm) kernel mm");
  EXPECT_EQ(op_title("op 4", OpKind::Copy, "out <- d_out"), "op 4 copy out <- d_out");
  EXPECT_EQ(op_title("op 7", OpKind::View, ""), "op 7 view");
  // Work that is no plan op: a kernel launched on its own.
  EXPECT_EQ(op_title("", OpKind::Kernel, "k"), "kernel k");
}

TEST(OpName, EachKindHasOneSpelling) {
  EXPECT_EQ(to_string(OpKind::Kernel), "kernel");
  EXPECT_EQ(to_string(OpKind::Copy), "copy");
  EXPECT_EQ(to_string(OpKind::Custom), "custom");
  EXPECT_EQ(to_string(OpKind::Collective), "collective");
  EXPECT_EQ(to_string(OpKind::View), "view");
}

}  // namespace
}  // namespace svod
