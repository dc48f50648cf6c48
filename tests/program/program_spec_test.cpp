#include "svod/program/program_spec.h"

#include <gtest/gtest.h>

#include "svod/base/error.h"
#include "svod/program/launch_layout.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Validation);
    return e.what();
  }
  ADD_FAILURE() << "expected a validation error";
  return {};
}

TEST(ProgramSpec, ParsesNamesAndListsValidOnes) {
  EXPECT_EQ(parse_language("llvm"), Language::LlvmIr);
  EXPECT_EQ(parse_access("readwrite"), Access::ReadWrite);
  EXPECT_EQ(parse_scalar_type("i64"), ScalarType::I64);
  // Any well-formed name is a language (a device says whether it runs it).
  EXPECT_EQ(parse_language("rust").name(), "rust");
  EXPECT_NE(error_of([] { parse_language("Rust"); }).find("language \"Rust\": names are 1 to 15 lower-case"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_language("a_language_too_long"); }).find("a_language_too_long"), std::string::npos);
  EXPECT_NE(error_of([] { parse_access("rw"); }).find("valid: read, write, readwrite"), std::string::npos);
  EXPECT_EQ(to_string(Access::Write), "write");
}

TEST(ProgramSpec, ScalarBoundsIntersectTheTypeRange) {
  ScalarParam p{"n", ScalarType::I32, -5, int64_t{1} << 40};
  Variable b = p.bounds();
  EXPECT_EQ(b.min, -5);
  EXPECT_EQ(b.max, INT32_MAX);
  EXPECT_EQ((ScalarParam{"m", ScalarType::I64}.bounds().min), INT64_MIN);
  EXPECT_NE(error_of([&] { b.check(-6); }).find("n = -6 is outside its bounds [-5, 2147483647]"), std::string::npos);
}

TEST(ProgramSpec, ValidateNamesTheProblem) {
  auto good = test::c_kernel("k", "void k(float* a, int n) {}", {{"a"}}, {{"n"}});
  good.validate();
  auto bad = good;
  bad.entry = "1k";
  EXPECT_NE(error_of([&] { bad.validate(); }).find("entry \"1k\""), std::string::npos);
  bad = good;
  bad.scalars.push_back({"a"});
  EXPECT_NE(error_of([&] { bad.validate(); }).find("\"a\" is used twice"), std::string::npos);
  bad = good;
  bad.defines = {{"X Y", "1"}};
  EXPECT_NE(error_of([&] { bad.validate(); }).find("define \"X Y\""), std::string::npos);
  bad = good;
  bad.defines = {{"X", "1\n#include <x>"}};
  EXPECT_NE(error_of([&] { bad.validate(); }).find("line break"), std::string::npos);
  bad = good;
  bad.global_size[1] = Expr::constant(0);
  EXPECT_NE(error_of([&] { bad.validate(); }).find("global_size[1] = 0"), std::string::npos);
  bad = good;
  bad.scalars[0].min = 10;
  bad.scalars[0].max = 5;
  EXPECT_NE(error_of([&] { bad.validate(); }).find("empty bounds"), std::string::npos);
  bad = good;
  bad.source.clear();
  EXPECT_NE(error_of([&] { bad.validate(); }).find("empty source"), std::string::npos);
}

TEST(LaunchLayout, MapsCallerScalarsAroundCoreId) {
  auto spec = test::c_kernel("k", "x", {{"o", Access::Write, DType::F32, Expr::parse("n*2")}},
                             {{"n", ScalarType::I32, 1, 1000}, {"core_id"}, {"big", ScalarType::I64}});
  spec.global_size[0] = Expr::parse("(n+3)/4");
  LaunchLayout layout(spec);
  EXPECT_EQ(layout.scalar_count(), 3u);
  EXPECT_EQ(layout.caller_scalar_count(), 2u);
  EXPECT_EQ(layout.core_id(), 1u);
  int64_t abi[3];
  int64_t caller[] = {10, int64_t{1} << 50};
  layout.fill_scalars(caller, abi);
  EXPECT_EQ(abi[0], 10);
  EXPECT_EQ(abi[1], 0);
  EXPECT_EQ(abi[2], int64_t{1} << 50);
  EXPECT_EQ(layout.global_size(0, abi), 3);
  EXPECT_EQ(layout.global_size(1, abi), 1);
  EXPECT_EQ(layout.min_bytes(0, abi), 80u);
  int64_t zero[] = {0, 0};
  EXPECT_NE(error_of([&] { layout.fill_scalars(zero, abi); }).find("n = 0 is outside"), std::string::npos);
  EXPECT_NE(error_of([&] { layout.fill_scalars({caller, 1}, abi); }).find("core_id is set by the runtime"),
            std::string::npos);
}

TEST(LaunchLayout, GlobalSizeOverOtherVariablesNeedsAPlan) {
  auto spec = test::c_kernel("k", "x", {}, {{"n"}});
  spec.global_size[0] = Expr::parse("N/2");
  LaunchLayout layout(spec);
  int64_t abi[1] = {4};
  EXPECT_NE(error_of([&] { layout.global_size(0, abi); }).find("through a plan"), std::string::npos);
}

TEST(LaunchLayout, GlobalSizeBelowOneIsRefused) {
  auto spec = test::c_kernel("k", "x", {}, {{"n"}});
  spec.global_size[0] = Expr::parse("n - 5");
  LaunchLayout layout(spec);
  int64_t abi[1] = {5};
  EXPECT_NE(error_of([&] { layout.global_size(0, abi); }).find("global_size[0] = 0 is below 1"), std::string::npos);
}

TEST(LaunchLayout, DeviceDimsEvaluateGlobalAndLocalSizes) {
  auto spec = test::c_kernel("k", "x", {}, {{"n"}});
  spec.global_size = {Expr::parse("(n+63)/64"), Expr::constant(2), Expr::constant(1)};
  spec.local_size = {Expr::constant(64), Expr::parse("n/100"), Expr::constant(1)};
  LaunchLayout layout(spec);
  int64_t n[] = {1000};
  EXPECT_EQ(layout.dims(n), (LaunchDims{{16, 2, 1}, {64, 10, 1}}));
  int64_t small[] = {50};  // local_size[1] = 0
  EXPECT_NE(error_of([&] { layout.dims(small); }).find("local_size[1] = 0 is below 1"), std::string::npos);

  spec.local_size[0] = Expr::parse("BLOCK");  // a plan variable, not a scalar
  LaunchLayout unbound(spec);
  const std::string e = error_of([&] { unbound.dims(n); });
  EXPECT_NE(e.find("local_size[0] \"BLOCK\" uses variables that are not scalars"), std::string::npos) << e;
}

TEST(LaunchLayout, MinBytesThatOverflowAreRefusedNamingProgramAndBuffer) {
  auto spec = test::c_kernel("k", "x", {{"a", Access::Write, DType::F32, Expr::parse("n")}, {"raw", Access::Read,
                                        std::nullopt, Expr::parse("n * 2")}},
                             {{"n", ScalarType::I64}});
  spec.name = "fill";
  LaunchLayout layout(spec);
  int64_t abi[1] = {int64_t{1} << 61};  // 2^63 bytes of f32: still fits
  EXPECT_EQ(layout.min_bytes(0, abi), size_t{1} << 63);
  EXPECT_EQ(layout.min_bytes(1, abi), size_t{1} << 62);  // no dtype: bytes
  abi[0] = int64_t{1} << 62;  // 2^64 bytes of f32 would wrap to 0
  const std::string e = error_of([&] { layout.min_bytes(0, abi); });
  EXPECT_NE(e.find("program \"fill\": buffer 0 (\"a\") needs 2^62 f32 elements (min_count \"n\"): more bytes than "
                   "fit in 64 bits"),
            std::string::npos)
      << e;
  // The count expression itself is checked too.
  EXPECT_NE(error_of([&] { layout.min_bytes(1, abi); }).find("\"n * 2\": 4611686018427387904 * 2 overflows int64"),
            std::string::npos);
  abi[0] = (int64_t{1} << 62) + 1;  // not a power of two: the count in decimal
  EXPECT_NE(error_of([&] { layout.min_bytes(0, abi); }).find("needs 4611686018427387905 f32 elements"),
            std::string::npos);
  abi[0] = -3;  // a negative count asks for nothing
  EXPECT_EQ(layout.min_bytes(0, abi), 0u);
}

TEST(LaunchLayout, BufferDtypesMustMatchTheDeclaredOnesBf16TakesU16AlignedBytesServeAny) {
  auto spec = test::c_kernel("k", "x", {{"a", Access::Read, DType::F32}, {"h", Access::Read, DType::BF16}, {"any"}});
  LaunchLayout layout(spec);
  layout.check_dtype(0, DType::F32, 0x1001);  // a buffer of its own type is aligned by construction
  layout.check_dtype(1, DType::BF16, 0);
  layout.check_dtype(1, DType::U16, 0);  // bf16 bit patterns
  for (DType t : kAllDTypes) layout.check_dtype(2, t, 1);
  const std::string e = error_of([&] { layout.check_dtype(0, DType::I32, 0); });
  EXPECT_NE(e.find("program \"k\": buffer 0 (\"a\"): dtype i32 does not match the declared f32"), std::string::npos)
      << e;
  EXPECT_NE(error_of([&] { layout.check_dtype(1, DType::F16, 0); }).find("dtype f16 does not match the declared bf16"),
            std::string::npos);
  // Untyped byte storage (what compilers allocate) serves any element type it is aligned for.
  layout.check_dtype(0, DType::U8, 0x1000);
  layout.check_dtype(0, DType::U8, 0x1004);
  layout.check_dtype(1, DType::U8, 0x1002);
  const std::string misaligned = error_of([&] { layout.check_dtype(0, DType::U8, 0x1002); });
  EXPECT_NE(misaligned.find("buffer 0 (\"a\"): u8 storage at address/offset 0x1002 is not aligned to the declared "
                            "f32's 4 bytes"),
            std::string::npos)
      << misaligned;
  EXPECT_TRUE(dtype_accepts(DType::F64, DType::U8, 16));
  EXPECT_FALSE(dtype_accepts(DType::F64, DType::U8, 12));
  EXPECT_FALSE(dtype_accepts(DType::F32, DType::I8, 0));
}

TEST(LaunchLayout, SlicesStayWithinCoreIdBoundsAndType) {
  auto spec = test::c_kernel("k", "x", {}, {{"core_id", ScalarType::I32, 0, 7}});
  LaunchLayout bounded(spec);
  bounded.check_slices(1);
  bounded.check_slices(8);
  std::string e = error_of([&] { bounded.check_slices(9); });
  EXPECT_NE(e.find("program \"k\": 9 core_id slices would pass core_id = 8, outside its bounds [0, 7] (at most 8 "
                   "slices)"),
            std::string::npos)
      << e;
  EXPECT_NE(error_of([&] { bounded.check_slices(0); }).find("0 core_id slices; a launch needs at least 1"),
            std::string::npos);

  spec.scalars[0].max.reset();  // i32: core_id takes at most 2^31 values from 0
  LaunchLayout i32(spec);
  i32.check_slices(int64_t{1} << 31);
  e = error_of([&] { i32.check_slices((int64_t{1} << 31) + 1); });
  EXPECT_NE(e.find("would pass core_id = 2147483648, outside its bounds [0, 2147483647]"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { i32.check_slices(int64_t{1} << 40); }).find("outside its bounds"), std::string::npos);

  spec.scalars[0] = {"core_id", ScalarType::I64};
  LaunchLayout i64(spec);
  i64.check_slices(INT64_MAX);

  spec.scalars[0] = {"core_id", ScalarType::I32, 1, 8};  // slice 0 is always run
  LaunchLayout from_one(spec);
  EXPECT_NE(error_of([&] { from_one.check_slices(1); }).find("leave out slice 0"), std::string::npos);

  spec.scalars.clear();  // no core_id: one slice only
  LaunchLayout plain(spec);
  plain.check_slices(1);
  EXPECT_NE(error_of([&] { plain.check_slices(2); }).find("global_size[0] = 2 needs a core_id scalar"),
            std::string::npos);
}

}  // namespace
}  // namespace svod
