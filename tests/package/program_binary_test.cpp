// Program binaries (svod/package/program_binary.h): one compiled program as
// bytes for a cache that is not svod's own. They load without compiling, are
// refused when damaged or when they do not belong to the spec, and fall back
// to their source where their code does not suit this CPU.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <vector>

#include "svod/compile/compile_policy.h"
#include "svod/package/package.h"
#include "svod/package/program_binary.h"
#include "svod/registry/registry.h"
#include "tests/package/package_test_support.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using test::expect_error;
using test::feature_this_cpu_lacks;
using test::NoCompiling;
using test::with_manifest;

ProgramSpec scale_spec(std::string factor = "3.0f") {
  ProgramSpec spec;
  spec.name = "scale";
  spec.entry = "scale";
  spec.source = "void scale(float* restrict x, int n) { for (int i = 0; i < n; ++i) x[i] *= " + factor + "; }\n";
  spec.buffers = {BufferParam{"x", Access::ReadWrite, DType::F32}};
  spec.scalars = {ScalarParam{"n", ScalarType::I32}};
  return spec;
}

// The program run on {1, 2, 3, 4}.
std::vector<float> run_scale(const Program& program) {
  Buffer x = device_registry().open("CPU")->allocate(DType::F32, 4);
  auto* values = static_cast<float*>(x.data());
  for (int i = 0; i < 4; ++i) values[i] = static_cast<float>(i + 1);
  const int64_t n = 4;
  program.launch(std::span<const Buffer>(&x, 1), std::span<const int64_t>(&n, 1));
  return {values, values + 4};
}

TEST(ProgramBinary, LoadsWithoutCompilingAndRuns) {
  Device& cpu = *device_registry().open("CPU");
  const auto binary = compile_program_binary(cpu, scale_spec());
  EXPECT_EQ(ProgramBinary(binary).source(), scale_spec().source);
  NoCompiling off;
  ProgramSpec spec = scale_spec();
  spec.source.clear();  // the binary's
  const uint64_t before = compile_count();
  const auto program = ProgramBinary(binary).load(cpu, spec);
  EXPECT_EQ(compile_count(), before);
  EXPECT_EQ(run_scale(*program), (std::vector<float>{3, 6, 9, 12}));
}

// The format tag is eight hex digits, the same for every call (it keys
// tinygrad's cache of binaries).
TEST(ProgramBinary, FormatTagIsStableHex) {
  const std::string tag = program_binary_format();
  ASSERT_EQ(tag.size(), 8u);
  EXPECT_EQ(tag.find_first_not_of("0123456789abcdef"), std::string::npos) << tag;
  EXPECT_EQ(program_binary_format(), tag);
}

TEST(ProgramBinary, ASpecOtherThanTheBinarysIsRefused) {
  Device& cpu = *device_registry().open("CPU");
  const auto binary = compile_program_binary(cpu, scale_spec());
  ProgramSpec other = scale_spec("4.0f");
  Error e = expect_error([&] { ProgramBinary(binary).load(cpu, other); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(std::string(e.what()).find("compiled from another source, language, entry or defines"),
            std::string::npos)
      << e.what();
  ProgramSpec defined = scale_spec();
  defined.defines = {{"N", "4"}};
  EXPECT_EQ(expect_error([&] { ProgramBinary(binary).load(cpu, defined); }).kind(), ErrorKind::Validation);
}

TEST(ProgramBinary, DamagedBinariesAndPackagesAreRefused) {
  Device& cpu = *device_registry().open("CPU");
  const auto binary = compile_program_binary(cpu, scale_spec());
  for (size_t cut : {size_t{0}, size_t{10}, binary.size() / 2, binary.size() - 1}) {
    const std::span<const std::byte> part(binary.data(), cut);
    const Error e = expect_error([&] { ProgramBinary(part).load(cpu, scale_spec()); });
    EXPECT_TRUE(e.kind() == ErrorKind::Load || e.kind() == ErrorKind::Validation) << cut << ": " << e.what();
  }
  for (size_t at = 0; at < binary.size(); at += 97) {
    auto flipped = binary;
    flipped[at] ^= std::byte{0x20};
    const Error e = expect_error([&] { ProgramBinary(flipped).load(cpu, scale_spec()); });
    EXPECT_TRUE(e.kind() == ErrorKind::Load || e.kind() == ErrorKind::Validation) << at << ": " << e.what();
  }
  PackageWriter plan_package;
  plan_package.add(std::string(kManifestSection), "{}");
  plan_package.add(std::string(kPlanSection), "{}");
  const Error e = expect_error([&] { ProgramBinary{plan_package.finish()}; });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(std::string(e.what()).find("a package of a plan, not a program binary"), std::string::npos) << e.what();
}

TEST(ProgramBinary, CodeForAnotherCpuIsCompiledFromItsSourceOrRefused) {
  const std::string lacking = feature_this_cpu_lacks();
  if (lacking.empty()) GTEST_SKIP() << "this CPU has every feature the check knows";
  Device& cpu = *device_registry().open("CPU");
  const auto foreign = with_manifest(compile_program_binary(cpu, scale_spec()), [&](nlohmann::json& m) {
    m["cpu"]["target_features"].push_back("+" + lacking);
  });
  {
    NoCompiling off;
    const Error e = expect_error([&] { ProgramBinary(foreign).load(cpu, scale_spec()); });
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("they need " + lacking + ", which this CPU lacks"), std::string::npos) << e.what();
  }
  EXPECT_EQ(run_scale(*ProgramBinary(foreign).load(cpu, scale_spec())), (std::vector<float>{3, 6, 9, 12}));
}

TEST(ProgramBinary, CompileErrorsAndLanguagesAsCompileGivesThem) {
  Device& cpu = *device_registry().open("CPU");
  ProgramSpec broken = scale_spec();
  broken.source = "void scale(float* x, int n) { this is not C }\n";
  EXPECT_EQ(expect_error([&] { compile_program_binary(cpu, broken); }).kind(), ErrorKind::Compile);
  ProgramSpec cuda = scale_spec();
  cuda.language = Language("cuda");
  EXPECT_EQ(expect_error([&] { compile_program_binary(cpu, cuda); }).kind(), ErrorKind::Unsupported);
}

}  // namespace
}  // namespace svod
