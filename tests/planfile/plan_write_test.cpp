// write_plan_text: what it writes parses back into an equal PlanFile, for
// every plan file shipped in the repository and for one that uses every
// field; and the format's additions (roles, variable dimensions, typed views
// at byte offsets, an op's own launch sizes, u8 bytes for typed parameters)
// parse, load and run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "svod/planfile/plan_file.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

namespace fs = std::filesystem;

std::string text_of(const Expr& e) { return e.text(); }
std::string text_of(const std::optional<Expr>& e) { return e ? e->text() : "(none)"; }

// Field by field, expressions by their text; a program's source_name is left
// out: it labels diagnostics and says where the source was written (a file,
// or inline), which a written plan changes to inline.
void expect_same(const PlanFile& a, const PlanFile& b) {
  EXPECT_EQ(a.device, b.device);
  ASSERT_EQ(a.variables.size(), b.variables.size());
  for (size_t i = 0; i < a.variables.size(); ++i) {
    EXPECT_EQ(a.variables[i].variable.name, b.variables[i].variable.name);
    EXPECT_EQ(a.variables[i].variable.min, b.variables[i].variable.min);
    EXPECT_EQ(a.variables[i].variable.max, b.variables[i].variable.max);
    EXPECT_EQ(a.variables[i].value, b.variables[i].value);
  }
  ASSERT_EQ(a.buffers.size(), b.buffers.size());
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    const PlanFileBuffer& x = a.buffers[i];
    const PlanFileBuffer& y = b.buffers[i];
    SCOPED_TRACE(x.name);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.dtype, y.dtype);
    EXPECT_EQ(x.count, y.count);
    EXPECT_EQ(x.shape, y.shape);
    EXPECT_EQ(x.dim_variables, y.dim_variables);
    EXPECT_EQ(x.device, y.device);
    EXPECT_EQ(x.init.kind, y.init.kind);
    EXPECT_EQ(x.init.a, y.init.a);
    EXPECT_EQ(x.init.b, y.init.b);
    EXPECT_EQ(x.init.seed, y.init.seed);
    EXPECT_EQ(x.init.npy, y.init.npy);
    EXPECT_EQ(x.role, y.role);
    EXPECT_EQ(x.view_of, y.view_of);
    EXPECT_EQ(x.byte_offset, y.byte_offset);
  }
  ASSERT_EQ(a.programs.size(), b.programs.size());
  for (size_t i = 0; i < a.programs.size(); ++i) {
    const ProgramSpec& x = a.programs[i].spec;
    const ProgramSpec& y = b.programs[i].spec;
    SCOPED_TRACE(a.programs[i].name);
    EXPECT_EQ(a.programs[i].name, b.programs[i].name);
    EXPECT_EQ(a.programs[i].device, b.programs[i].device);
    EXPECT_EQ(x.language, y.language);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.source, y.source);
    EXPECT_EQ(x.entry, y.entry);
    ASSERT_EQ(x.buffers.size(), y.buffers.size());
    for (size_t k = 0; k < x.buffers.size(); ++k) {
      EXPECT_EQ(x.buffers[k].name, y.buffers[k].name);
      EXPECT_EQ(x.buffers[k].access, y.buffers[k].access);
      EXPECT_EQ(x.buffers[k].dtype, y.buffers[k].dtype);
      EXPECT_EQ(text_of(x.buffers[k].min_count), text_of(y.buffers[k].min_count));
    }
    ASSERT_EQ(x.scalars.size(), y.scalars.size());
    for (size_t k = 0; k < x.scalars.size(); ++k) {
      EXPECT_EQ(x.scalars[k].name, y.scalars[k].name);
      EXPECT_EQ(x.scalars[k].type, y.scalars[k].type);
      EXPECT_EQ(x.scalars[k].min, y.scalars[k].min);
      EXPECT_EQ(x.scalars[k].max, y.scalars[k].max);
    }
    for (size_t d = 0; d < 3; ++d) {
      EXPECT_EQ(text_of(x.global_size[d]), text_of(y.global_size[d]));
      EXPECT_EQ(text_of(x.local_size[d]), text_of(y.local_size[d]));
    }
    EXPECT_EQ(x.defines, y.defines);
    EXPECT_EQ(text_of(x.flops), text_of(y.flops));
    EXPECT_EQ(text_of(x.bytes), text_of(y.bytes));
  }
  ASSERT_EQ(a.ops.size(), b.ops.size());
  for (size_t i = 0; i < a.ops.size(); ++i) {
    const PlanFileOp& x = a.ops[i];
    const PlanFileOp& y = b.ops[i];
    SCOPED_TRACE(fmt::format("ops[{}]", i));
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.target, y.target);
    EXPECT_EQ(x.buffers, y.buffers);
    EXPECT_EQ(x.collective, y.collective);
    EXPECT_EQ(x.reduce, y.reduce);
    EXPECT_EQ(x.root, y.root);
    ASSERT_EQ(x.scalars.size(), y.scalars.size());
    for (size_t k = 0; k < x.scalars.size(); ++k) EXPECT_EQ(text_of(x.scalars[k]), text_of(y.scalars[k]));
    for (const auto& [p, q] : {std::pair{&x.global_size, &y.global_size}, std::pair{&x.local_size, &y.local_size}}) {
      ASSERT_EQ(p->has_value(), q->has_value());
      if (*p)
        for (size_t d = 0; d < 3; ++d) EXPECT_EQ(text_of((**p)[d]), text_of((**q)[d]));
    }
    EXPECT_EQ(x.attrs, y.attrs);
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.after, y.after);
  }
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    const PlanFileOutput& x = a.outputs[i];
    const PlanFileOutput& y = b.outputs[i];
    EXPECT_EQ(x.buffer, y.buffer);
    EXPECT_EQ(x.npy, y.npy);
    ASSERT_EQ(x.expect.has_value(), y.expect.has_value());
    if (!x.expect) continue;
    EXPECT_EQ(x.expect->npy, y.expect->npy);
    EXPECT_EQ(x.expect->values, y.expect->values);
    EXPECT_EQ(x.expect->prefix, y.expect->prefix);
    EXPECT_EQ(x.expect->rtol, y.expect->rtol);
    EXPECT_EQ(x.expect->atol, y.expect->atol);
  }
}

// parse(write(file)) in the file's own folder, compared with `file`.
void expect_round_trip(const PlanFile& file) {
  const std::string text = write_plan_text(file);
  SCOPED_TRACE(text);
  const PlanFile again = parse_plan_text(text, file.folder, "written.json");
  expect_same(file, again);
  EXPECT_EQ(write_plan_text(again), text);
}

// Every field the format has, the additions included.
constexpr std::string_view kEveryField = R"({
  "svod_plan": 1,
  "device": "CPU",
  "variables": {
    "N": {"min": 1, "max": 16, "value": 8},
    "batch": {"min": 0, "max": 4, "value": 2}
  },
  "buffers": {
    "x":      {"dtype": "f32", "shape": ["batch", 4], "role": "input"},
    "w":      {"dtype": "f32", "count": 16, "init": {"npy": "w.npy"}, "role": "constant"},
    "a":      {"dtype": "i32", "count": 16, "init": {"arange": {"start": 1, "step": 2}}},
    "u":      {"dtype": "f64", "shape": [4, 4], "init": {"uniform": {"low": -1, "high": 1, "seed": 7}}, "role": "state"},
    "n":      {"dtype": "f32", "count": 16, "init": {"normal": {"mean": 0.5, "std": 2, "seed": 3}}, "role": "scratch"},
    "f":      {"dtype": "f16", "count": 8, "init": {"fill": 2.5}},
    "y":      {"dtype": "f32", "shape": ["batch", 4], "role": "output"},
    "arena":  {"dtype": "u8", "count": 64, "device": "CPU"},
    "lo":     {"view": "arena", "offset": 0, "count": 8, "dtype": "f32"},
    "odd":    {"view": "arena", "byte_offset": 34, "count": 3, "dtype": "u16"},
    "tail":   {"view": "a", "offset": 12, "shape": [2, 2]},
    "ws":     {"view": "w", "offset": 4, "shape": ["batch", 2]}
  },
  "programs": {
    "k": {
      "language": "c",
      "source": "void k(float* o, const float* i, int n, int core_id) { o[core_id] = i[core_id] * n; }",
      "entry": "k",
      "defines": {"TILE": "16", "FAST": "1"},
      "buffers": [{"name": "o", "access": "write", "dtype": "f32", "min_count": "n"}, {"name": "i", "access": "readwrite"}],
      "scalars": [{"name": "n", "type": "i32", "min": 1, "max": 16}, {"name": "core_id", "type": "i64"}],
      "global_size": ["n", 1, 1],
      "local_size": [4],
      "flops": "2*n", "bytes": 64
    }
  },
  "ops": [
    {"id": "first", "run": "k", "buffers": ["lo", "w"], "scalars": {"n": "N / 2"}, "global_size": ["N / 2"], "local_size": [2, 1, 1]},
    {"run": "k", "buffers": ["arena", "w"], "scalars": {"n": 4}, "after": ["first", 0]},
    {"copy": {"dst": "y", "src": "x"}},
    {"custom": "fill", "buffers": ["n"], "attrs": {"value": 1.5}},
    {"custom": "print", "buffers": ["a"], "attrs": {"label": "a", "limit": 4}},
    {"collective": {"kind": "all_reduce", "buffers": ["u"], "op": "max"}},
    {"collective": {"kind": "broadcast", "buffers": ["n", "f"], "root": 0}},
    {"collective": {"kind": "all_gather", "src": "tail", "dst": "a"}},
    {"collective": {"kind": "reduce_scatter", "src": "w", "dst": "ws", "op": "prod"}}
  ],
  "outputs": {
    "y": {"npy": "out/y.npy", "expect": {"values": [1, 2.5], "prefix": true, "rtol": 0.001, "atol": 0}},
    "a": {"expect": {"npy": "/abs/a.npy"}},
    "tail": {}
  }
})";

TEST(PlanWrite, EveryShippedPlanRoundTrips) {
  size_t plans = 0;
  for (const char* folder : {SVOD_SOURCE_DIR "/examples", SVOD_SOURCE_DIR "/tests"}) {
    for (const auto& entry : fs::recursive_directory_iterator(folder)) {
      if (!entry.is_regular_file() || entry.path().extension() != ".json") continue;
      PlanFile file;
      try {
        file = parse_plan_file(entry.path());
      } catch (const Error&) {
        continue;  // tune files, data, fuzz seeds
      }
      SCOPED_TRACE(entry.path().string());
      expect_round_trip(file);
      ++plans;
    }
  }
  EXPECT_GE(plans, 8u);
}

TEST(PlanWrite, EveryFieldRoundTrips) {
  test::TempDir dir;
  const PlanFile file = parse_plan_text(kEveryField, dir.path(), "every.json");
  // What the additions mean, as parsed.
  const PlanFileBuffer& x = *file.find_buffer("x");
  EXPECT_EQ(x.role, BufferRole::Input);
  EXPECT_EQ(x.shape, (std::vector<size_t>{4, 4}));  // batch at its max
  EXPECT_EQ(x.dim_variables, (std::vector<std::string>{"batch", ""}));
  EXPECT_EQ(x.count, 16u);
  EXPECT_EQ(file.find_buffer("odd")->byte_offset, 34u);
  EXPECT_EQ(file.find_buffer("odd")->dtype, DType::U16);
  EXPECT_EQ(file.find_buffer("tail")->byte_offset, 48u);  // 12 i32 elements of "a"
  EXPECT_EQ(file.find_buffer("lo")->dtype, DType::F32);
  ASSERT_TRUE(file.ops[0].global_size);
  EXPECT_EQ((*file.ops[0].global_size)[0].text(), "N / 2");
  expect_round_trip(file);
}

TEST(PlanWrite, TheAdditionsAreChecked) {
  struct Case {
    std::string_view buffers;
    std::string_view message;
  };
  const Case cases[] = {
      {R"("x": {"dtype": "f32", "count": 4, "role": "weights"})", "buffers.x.role: unknown role \"weights\""},
      {R"("x": {"dtype": "f32", "shape": ["M", 4]})", "buffers.x.shape[0]: \"M\" is no variable of the plan"},
      {R"("x": {"dtype": "f32", "shape": ["neg", 4]})", "buffers.x.shape[0]: variable \"neg\" may be -1"},
      {R"("x": {"dtype": "f32", "count": 4}, "v": {"view": "x", "offset": 1, "byte_offset": 4, "count": 1})",
       "buffers.v: give either \"offset\" or \"byte_offset\""},
      {R"("x": {"dtype": "f32", "count": 4}, "v": {"view": "x", "byte_offset": 13, "count": 1})",
       "buffers.v: bytes [13, 17) leave \"x\", which has 16"},
      {R"("x": {"dtype": "f32", "count": 4}, "v": {"view": "x", "offset": 0, "count": 1, "role": "input"})",
       "buffers.v.role: unknown field"},
  };
  for (const Case& c : cases) {
    const std::string text = fmt::format(R"({{"svod_plan": 1, "variables": {{"neg": {{"min": -1, "max": 2, "value": 0}}}},
                                             "buffers": {{{}}}, "ops": []}})",
                                         c.buffers);
    std::string message;
    EXPECT_EQ(test::kind_of([&] { parse_plan_text(text, ".", "p.json"); }, &message), ErrorKind::Validation);
    EXPECT_NE(message.find(c.message), std::string::npos) << message;
  }
}

// A u8 arena serves a kernel's f32 parameter where its bytes are aligned for
// it, as a launch allows; an op's own launch sizes replace the program's.
TEST(PlanWrite, BytesServeTypedParametersAndOpsSizeTheirLaunches) {
  constexpr std::string_view kPlan = R"({
    "svod_plan": 1,
    "variables": {"N": {"min": 1, "max": 8, "value": 6}},
    "buffers": {
      "arena": {"dtype": "u8", "count": 64},
      "head":  {"view": "arena", "offset": 0, "count": 8, "dtype": "f32"},
      "out":   {"dtype": "f32", "count": 8}
    },
    "programs": {
      "put": {"language": "c", "entry": "put",
              "source": "void put(float* o, int core_id) { o[core_id] = core_id + 1; }",
              "buffers": [{"name": "o", "access": "write", "dtype": "f32"}],
              "scalars": [{"name": "core_id", "type": "i32"}], "global_size": [8]}
    },
    "ops": [
      {"run": "put", "buffers": ["arena"], "global_size": ["N"]},
      {"copy": {"dst": "out", "src": "head"}}
    ],
    "outputs": {"out": {"expect": {"values": [1, 2, 3, 4, 5, 6, 0, 0]}}}
  })";
  const PlanFile file = parse_plan_text(kPlan, ".", "p.json");
  LoadedPlan loaded = load_plan(file);
  loaded.execute();
  const Buffer& out = loaded.plan.buffer(loaded.outputs[0].slot);
  const OutputCheck check = check_output(loaded.outputs[0], out.dtype(), {static_cast<const std::byte*>(out.data()), out.bytes()});
  EXPECT_TRUE(check.passed()) << check.mismatches;
  expect_round_trip(file);

  // Bytes that are not aligned for the parameter are refused at parse.
  std::string misaligned(kPlan);
  misaligned.replace(misaligned.find(R"("buffers": ["arena"])"), 20, R"("buffers": ["odd"])");
  misaligned.replace(misaligned.find(R"("out":)"), 6, R"("odd": {"view": "arena", "offset": 2, "count": 8}, "out":)");
  std::string message;
  EXPECT_EQ(test::kind_of([&] { parse_plan_text(misaligned, ".", "p.json"); }, &message), ErrorKind::Validation);
  EXPECT_NE(message.find("ops[0].buffers[0]: buffer \"odd\" is u8, parameter \"o\" of \"put\" takes f32"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace svod
