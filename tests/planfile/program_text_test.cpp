// parse_program_text: one program object of a plan file, parsed on its own
// (what svod_program_compile takes).
#include <gtest/gtest.h>

#include "svod/base/error.h"
#include "svod/planfile/plan_file.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using test::TempDir;

TEST(ProgramText, EveryProgramField) {
  TempDir dir;
  dir.write("k.c", "void k(float* a, int n, int core_id) {}\n");
  const PlanFileProgram p = parse_program_text(R"({
    "language": "c", "source_file": "k.c", "entry": "k", "device": "CPU",
    "buffers": [ { "name": "a", "access": "readwrite", "dtype": "f32" } ],
    "scalars": [ { "name": "n", "type": "i32", "min": 1, "max": 64 }, { "name": "core_id", "type": "i32" } ],
    "global_size": [2], "local_size": [1, 1], "defines": { "F": 2, "G": "x" },
    "flops": "2*n", "bytes": 4e3
  })", dir.path(), "spec");
  EXPECT_EQ(p.name, "");
  EXPECT_EQ(p.device, "CPU");
  EXPECT_EQ(p.spec.display_name(), "k");
  EXPECT_EQ(p.spec.source, "void k(float* a, int n, int core_id) {}\n");
  ASSERT_EQ(p.spec.buffers.size(), 1u);
  EXPECT_EQ(p.spec.buffers[0].access, Access::ReadWrite);
  EXPECT_EQ(p.spec.buffers[0].dtype, DType::F32);
  ASSERT_EQ(p.spec.scalars.size(), 2u);
  EXPECT_EQ(p.spec.scalars[0].max, 64);
  EXPECT_EQ(p.spec.global_size[0].constant_value(), 2);
  EXPECT_EQ(p.spec.defines, (std::vector<std::pair<std::string, std::string>>{{"F", "2"}, {"G", "x"}}));
  EXPECT_EQ(p.spec.flops->text(), "2*n");
  EXPECT_EQ(p.spec.bytes->constant_value(), 4000);
}

TEST(ProgramText, ErrorsNameTheField) {
  auto error = [](std::string_view text) {
    return test::expect_error([&] { parse_program_text(text, ".", "spec"); });
  };
  Error e = error("{");
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(std::string(e.what()).find("spec: not valid JSON"), std::string::npos) << e.what();
  e = error("[]");
  EXPECT_NE(std::string(e.what()).find("spec: (the program): expected an object"), std::string::npos) << e.what();
  e = error(R"({"language": "c", "source": "x", "entry": "k"})");
  EXPECT_NE(std::string(e.what()).find("spec: (the program): missing field \"buffers\""), std::string::npos)
      << e.what();
  e = error(R"({"language": "c", "source": "x", "entry": "k", "buffers": [], "global_size": ["N"]})");
  EXPECT_NE(std::string(e.what()).find("spec: global_size[0]: unknown variable \"N\""), std::string::npos) << e.what();
  e = error(R"({"language": "c", "source": "x", "entry": "k", "buffers": [], "color": 1})");
  EXPECT_NE(std::string(e.what()).find("spec: color: unknown field"), std::string::npos) << e.what();
  e = error(R"({"language": "c", "source_file": "/nonexistent.c", "entry": "k", "buffers": []})");
  EXPECT_EQ(e.kind(), ErrorKind::Io);
}

}  // namespace
}  // namespace svod
