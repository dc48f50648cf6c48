// Compile errors of a plan's kernels name the kernel's own file (its
// source_file as the plan gives it) with line and column, on every CPU
// compiler, and inline source by where it sits in the plan.
#include <gtest/gtest.h>

#include <string>

#include "svod/base/error.h"
#include "svod/compile/cpu_compiler.h"
#include "svod/compile/llvm_plugin.h"
#include "svod/planfile/plan_file.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

#ifndef SVOD_LLVM_PLUGIN_BUILT
#define SVOD_LLVM_PLUGIN_BUILT 0
#endif

namespace svod {
namespace {

using test::TempDir;

constexpr const char* kBadKernel =
    "void add(float* y, const float* x) {\n"
    "  y[0] = x[0] +;\n"
    "}\n";

// A plan with one kernel from kernels/bad.c and one written inline, both
// with the same syntax error at line 2, column 16.
PlanFile bad_plan(const TempDir& dir) {
  dir.write("kernels/bad.c", kBadKernel);
  const std::string program_fields =
      R"("language": "c", "entry": "add", "buffers": [{"name": "y", "access": "write"}, {"name": "x"}])";
  const std::string plan = std::string(R"({"svod_plan": 1, "device": "CPU",
    "buffers": {"a": {"dtype": "f32", "count": 4}, "b": {"dtype": "f32", "count": 4}},
    "programs": {
      "from_file": {"source_file": "kernels/bad.c", )") +
                           program_fields + R"(},
      "inline": {"source": "void add(float* y, const float* x) {\n  y[0] = x[0] +;\n}\n", )" +
                           program_fields + R"(}},
    "ops": [{"id": "f", "run": "from_file", "buffers": ["a", "b"]}]})";
  return parse_plan_file(dir.write("plan.json", plan));
}

const ProgramSpec& spec_of(const PlanFile& file, std::string_view name) { return file.find_program(name)->spec; }

std::vector<CpuCompiler> compilers() {
  std::vector<CpuCompiler> all = {CpuCompiler::Clang, CpuCompiler::Dlopen};
  if (SVOD_LLVM_PLUGIN_BUILT) all.push_back(CpuCompiler::Llvm);
  return all;
}

TEST(CompileDiagnostics, NameTheKernelsFileWithLineAndColumnOnEveryCompiler) {
  TempDir dir;
  const PlanFile file = bad_plan(dir);
  EXPECT_EQ(spec_of(file, "from_file").source_name, "kernels/bad.c");
  for (CpuCompiler compiler : compilers()) {
    SCOPED_TRACE(std::string(to_string(compiler)));
    const std::string message =
        test::expect_error([&] { cpu_compiler(compiler)->compile(spec_of(file, "from_file")); }).what();
    EXPECT_NE(message.find("kernels/bad.c:2:16: error: expected expression"), std::string::npos) << message;
    EXPECT_EQ(message.find("from_file.c"), std::string::npos) << message;
    EXPECT_EQ(message.find("<stdin>"), std::string::npos) << message;
  }
}

TEST(CompileDiagnostics, InlineSourceIsNamedByItsPlaceInThePlan) {
  TempDir dir;
  const PlanFile file = bad_plan(dir);
  const std::string where = file.source_name + ": programs.inline.source";
  EXPECT_EQ(spec_of(file, "inline").source_name, where);
  for (CpuCompiler compiler : compilers()) {
    SCOPED_TRACE(std::string(to_string(compiler)));
    const std::string message =
        test::expect_error([&] { cpu_compiler(compiler)->compile(spec_of(file, "inline")); }).what();
    EXPECT_NE(message.find(where + ":2:16: error: expected expression"), std::string::npos) << message;
    EXPECT_EQ(message.find("<stdin>"), std::string::npos) << message;
  }
}

TEST(CompileDiagnostics, ASpecWithoutAFileNameKeepsItsNameDotC) {
  ProgramSpec spec = test::c_kernel("k", "void k(float* x) { x[0] = ; }");
  EXPECT_EQ(spec.diagnostic_file_name(), "k.c");
  for (CpuCompiler compiler : compilers()) {
    SCOPED_TRACE(std::string(to_string(compiler)));
    const std::string message = test::expect_error([&] { cpu_compiler(compiler)->compile(spec); }).what();
    EXPECT_NE(message.find("k.c:1:27: error"), std::string::npos) << message;
  }
}

TEST(CompileDiagnostics, LoadingThePlanReportsTheKernelsFile) {
  TempDir dir;
  const PlanFile file = bad_plan(dir);
  const Error e = test::expect_error([&] { load_plan(file); });
  EXPECT_EQ(e.kind(), ErrorKind::Compile);
  EXPECT_NE(std::string(e.what()).find("kernels/bad.c:2:16: error"), std::string::npos) << e.what();
}

}  // namespace
}  // namespace svod
