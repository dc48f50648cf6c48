// Plan files through the API: every field of the format, the generators, the
// output checks and every kind of invalid plan (whose message must name the field).
#include "svod/planfile/plan_file.h"
#include "svod/profile/profile.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>

#include "svod/base/error.h"
#include "svod/base/npy.h"
#include "svod/registry/registry.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"
#include "tests/support/watchdog.h"

namespace svod {
namespace {

using Json = nlohmann::ordered_json;
using test::TempDir;

template <typename T>
std::vector<T> values_of(const ExecutionPlan& plan, size_t slot) {
  auto span = plan.buffer(slot).span<T>();
  return {span.begin(), span.end()};
}

size_t slot_of(const LoadedPlan& loaded, std::string_view name) { return *loaded.plan.find_buffer(name); }

void save(const std::filesystem::path& path, DType dtype, std::vector<size_t> shape, const std::vector<double>& values) {
  std::vector<std::byte> data(values.size() * size_of(dtype));
  for (size_t i = 0; i < values.size(); ++i) store_from_double(dtype, data.data() + i * size_of(dtype), values[i]);
  write_npy(path, dtype, shape, data);
}

LoadedPlan load(const TempDir& dir, const Json& plan, const LoadOptions& options = {}) {
  return load_plan(parse_plan_file(dir.write("plan.json", plan.dump(2))), options);
}

// Uses every field PLAN_FORMAT.md version 1 defines.
TEST(PlanFile, EveryFieldOfTheFormat) {
  TempDir dir;
  save(dir / "w.npy", DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  save(dir / "expected.npy", DType::F64, {6}, {2, 4, 6, 8, 10, 12});
  dir.write("kernels/scale.c",
            "void scale(float* restrict o, const float* restrict a, int n, int core_id) {\n"
            "  for (int i = core_id; i < n; i += SLICES) o[i] = FACTOR * a[i];\n}\n");
  const Json plan = Json::parse(R"J({
    "svod_plan": 1,
    "description": "all the fields",
    "device": "CPU",
    "variables": { "N": { "min": 1, "max": 6, "value": 6 } },
    "buffers": {
      "w":     { "dtype": "f32", "shape": [2, 3], "device": "CPU", "init": { "npy": "w.npy" } },
      "z":     { "dtype": "i16", "count": 4, "init": { "zeros": {} } },
      "f":     { "dtype": "u8", "count": 4, "init": { "fill": 7 } },
      "r":     { "dtype": "i64", "count": 5, "init": { "arange": { "start": -2, "step": 3 } } },
      "u":     { "dtype": "f64", "count": 1000, "init": { "uniform": { "low": -1, "high": 1, "seed": 7 } } },
      "g":     { "dtype": "f32", "count": 1000, "init": { "normal": { "mean": 5, "std": 2, "seed": 7 } } },
      "out":   { "dtype": "f32", "count": 6 },
      "tail":  { "view": "out", "offset": 4, "count": 2 },
      "neg":   { "dtype": "f32", "count": 1 },
      "acc":   { "dtype": "f32", "count": 6, "init": "zeros" },
      "flags": { "dtype": "bool", "count": 3, "init": { "fill": true } }
    },
    "programs": {
      "scale": { "language": "c", "device": "CPU", "source_file": "kernels/scale.c", "entry": "scale",
                 "buffers": [ { "name": "o", "access": "write", "dtype": "f32" }, { "name": "a", "access": "read" } ],
                 "scalars": [ { "name": "n", "type": "i32" }, { "name": "core_id", "type": "i32" } ],
                 "global_size": ["min(N, 3)", 1, 1], "local_size": [1, "1", 1],
                 "defines": { "FACTOR": 2.0, "SLICES": "3" }, "flops": "n", "bytes": "8*n" },
      "first": { "language": "llvm", "entry": "first",
                 "source": "define void @first(ptr %o, ptr %a) {\n  %v = load float, ptr %a\n  %r = fneg float %v\n  store float %r, ptr %o\n  ret void\n}\n",
                 "buffers": [ { "name": "o", "access": "readwrite" }, { "name": "a" } ] }
    },
    "ops": [
      { "id": "scale", "run": "scale", "buffers": ["out", "w"], "scalars": { "n": "N" } },
      { "run": "first", "buffers": ["neg", "w"], "after": ["scale"] },
      { "copy": { "dst": "acc", "src": "out" }, "id": "copy" },
      { "custom": "all_reduce", "buffers": ["acc", "out"], "attrs": { "op": "max" }, "after": [2, "copy"] }
    ],
    "outputs": {
      "out":   { "npy": "results/out.npy", "expect": { "npy": "expected.npy", "rtol": 0, "atol": 0 } },
      "tail":  { "expect": { "values": [10, 12] } },
      "neg":   { "expect": { "values": [-1], "prefix": true } },
      "r":     { "expect": { "values": [-2, 1, 4] , "prefix": true } },
      "flags": {}
    }
  })J");
  std::filesystem::create_directories(dir / "results");
  const PlanFile file = parse_plan_file(dir.write("plan.json", plan.dump()));
  EXPECT_EQ(file.buffers.size(), 11u);
  EXPECT_EQ(file.programs[0].spec.defines[0], (std::pair<std::string, std::string>{"FACTOR", "2.0"}));
  EXPECT_EQ(file.programs[0].spec.global_size[0].text(), "min(N, 3)");
  ASSERT_EQ(file.ops[3].after.size(), 2u);
  EXPECT_EQ(std::get<size_t>(file.ops[3].after[0]), 2u);
  EXPECT_EQ(std::get<std::string>(file.ops[3].after[1]), "copy");

  LoadedPlan loaded = load_plan(file);
  ExecutionPlan& p = loaded.plan;
  // Reports name ops by index, id and what they run (op_title).
  EXPECT_EQ(p.op_title(0), "op 0 (scale) kernel scale");
  EXPECT_EQ(p.op_title(2), "op 2 (copy) copy acc <- out");
  EXPECT_EQ(p.op_title(3), "op 3 custom all_reduce");
  // Inits happen at load time, before anything runs.
  EXPECT_EQ(values_of<uint8_t>(p, slot_of(loaded, "f")), (std::vector<uint8_t>{7, 7, 7, 7}));
  EXPECT_EQ(values_of<int64_t>(p, slot_of(loaded, "r")), (std::vector<int64_t>{-2, 1, 4, 7, 10}));
  EXPECT_EQ(values_of<int16_t>(p, slot_of(loaded, "z")), (std::vector<int16_t>(4, 0)));
  EXPECT_EQ(values_of<uint8_t>(p, slot_of(loaded, "flags")), (std::vector<uint8_t>{1, 1, 1}));

  p.execute();
  EXPECT_EQ(values_of<float>(p, slot_of(loaded, "out")), (std::vector<float>{2, 4, 6, 8, 10, 12}));
  EXPECT_EQ(values_of<float>(p, slot_of(loaded, "neg")), (std::vector<float>{-1}));
  EXPECT_EQ(values_of<float>(p, slot_of(loaded, "acc")), (std::vector<float>{2, 4, 6, 8, 10, 12}));

  ASSERT_EQ(loaded.outputs.size(), 5u);
  for (const auto& out : loaded.outputs) {
    const Buffer& b = p.buffer(out.slot);
    auto check = check_output(out, b.dtype(), std::as_bytes(std::span(static_cast<const std::byte*>(b.data()), b.bytes())));
    EXPECT_TRUE(check.passed()) << out.name;
  }
  const LoadedOutput& out = loaded.outputs[0];
  EXPECT_EQ(out.shape, (std::vector<size_t>{6}));
  write_output_npy(file.folder / *file.outputs[0].npy, out, DType::F32, std::as_bytes(p.buffer(out.slot).span<float>()));
  EXPECT_EQ(read_npy(dir / "results/out.npy").count(), 6u);

  // Cost figures come from the program's flops/bytes over the op's scalars.
  std::vector<OpDescription> ops = describe_ops(p);
  EXPECT_EQ(ops[0].flops, 6.0);
  EXPECT_EQ(ops[0].bytes, 48.0);
  EXPECT_FALSE(ops[1].flops);
  EXPECT_FALSE(ops[2].flops);
}

TEST(PlanFile, RandomInitsAreSeededAndDocumented) {
  TempDir dir;
  Json plan = Json::parse(R"J({
    "svod_plan": 1,
    "buffers": {
      "u0": { "dtype": "f64", "count": 20000, "init": { "uniform": { "low": 0, "high": 1, "seed": 0 } } },
      "u1": { "dtype": "f64", "count": 20000, "init": { "uniform": { "low": 0, "high": 1, "seed": 0 } } },
      "u2": { "dtype": "f64", "count": 20000, "init": { "uniform": { "low": -3, "high": 5, "seed": 1 } } },
      "n":  { "dtype": "f64", "count": 20000, "init": { "normal": { "mean": 2, "std": 0.5, "seed": 9 } } },
      "h":  { "dtype": "f16", "count": 8, "init": { "uniform": { "low": 0, "high": 1, "seed": 0 } } }
    },
    "ops": []
  })J");
  LoadedPlan loaded = load(dir, plan);
  auto u0 = values_of<double>(loaded.plan, slot_of(loaded, "u0"));
  auto u1 = values_of<double>(loaded.plan, slot_of(loaded, "u1"));
  auto u2 = values_of<double>(loaded.plan, slot_of(loaded, "u2"));
  auto n = values_of<double>(loaded.plan, slot_of(loaded, "n"));
  EXPECT_EQ(u0, u1);
  EXPECT_NE(u0, u2);
  // splitmix64 seeded with 0 first returns 0xE220A8397B1DCDAF; its top 53 bits scaled to [0, 1).
  EXPECT_EQ(u0[0], double(0xE220A8397B1DCDAFull >> 11) * 0x1p-53);
  double mean = 0, var = 0;
  for (double v : u2) {
    EXPECT_GE(v, -3.0);
    EXPECT_LT(v, 5.0);
  }
  for (double v : n) mean += v / n.size();
  for (double v : n) var += (v - mean) * (v - mean) / n.size();
  EXPECT_NEAR(mean, 2.0, 0.02);
  EXPECT_NEAR(std::sqrt(var), 0.5, 0.02);
  // Narrow dtypes get the same draws, rounded.
  uint16_t h0 = loaded.plan.buffer(slot_of(loaded, "h")).span<uint16_t>()[0];
  EXPECT_EQ(h0, double_to_f16(u0[0]));
}

TEST(PlanFile, VariablesCanBeSetAndAreBoundsChecked) {
  TempDir dir;
  Json plan = Json::parse(R"J({
    "svod_plan": 1,
    "variables": { "N": { "min": 2, "max": 8, "value": 8 } },
    "buffers": { "o": { "dtype": "i32", "count": 8 } },
    "programs": { "iota": { "language": "c", "entry": "iota",
      "source": "void iota(int* o, int n) { for (int i = 0; i < n; i++) o[i] = i + 1; }",
      "buffers": [ { "name": "o", "access": "write" } ], "scalars": [ { "name": "n", "type": "i32" } ] } },
    "ops": [ { "run": "iota", "buffers": ["o"], "scalars": { "n": "N - 1" } } ]
  })J");
  LoadedPlan loaded = load(dir, plan, {{{"N", 4}}});
  EXPECT_EQ(loaded.plan.variable("N"), 4);
  loaded.plan.execute();
  EXPECT_EQ(values_of<int32_t>(loaded.plan, 0), (std::vector<int32_t>{1, 2, 3, 0, 0, 0, 0, 0}));

  try {
    load(dir, plan, {{{"N", 9}}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Validation);
    EXPECT_NE(std::string(e.what()).find("variables.N"), std::string::npos) << e.what();
  }
  try {
    load(dir, plan, {{{"M", 3}}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no variable named \"M\""), std::string::npos) << e.what();
  }
}

// LoadOptions::cpu_compiler (svod run --cpu-compiler, load_plan(cpu_compiler=))
// is the plan's own choice: its CPU device compiles with that compiler, while
// the process's default CPU device and its environment stay as they were (the
// kernel reads SVOD_CPU_COMPILER as the process sees it).
TEST(PlanFile, CpuCompilerIsThePlansOwnChoice) {
  TempDir dir;
  const Json plan = Json::parse(R"J({
    "svod_plan": 1,
    "buffers": { "o": { "dtype": "i32", "count": 1 } },
    "programs": { "probe": { "language": "c", "entry": "probe",
      "source": "char* getenv(const char*); void probe(int* o) { o[0] = getenv(\"SVOD_CPU_COMPILER\") != 0; }",
      "buffers": [ { "name": "o", "access": "write" } ] } },
    "ops": [ { "run": "probe", "buffers": ["o"] } ]
  })J");
  const bool variable_set = std::getenv("SVOD_CPU_COMPILER") != nullptr;
  const std::shared_ptr<Device> default_cpu = open_device("CPU");
  const std::string other = default_cpu->compiler().identity().name == "clang" ? "dlopen" : "clang";

  LoadedPlan loaded = load(dir, plan, LoadOptions{.cpu_compiler = other});
  loaded.plan.execute();
  EXPECT_EQ(values_of<int32_t>(loaded.plan, 0), std::vector<int32_t>{variable_set});
  ASSERT_NE(loaded.plan.op_device(0), nullptr);
  EXPECT_EQ(loaded.plan.op_device(0)->compiler().identity().name, other);
  EXPECT_EQ(loaded.plan.op_device(0), device_registry().open("CPU", other).get());
  EXPECT_EQ(open_device("CPU"), default_cpu);
  EXPECT_EQ(std::getenv("SVOD_CPU_COMPILER") != nullptr, variable_set);

  const Error e = test::expect_error([&] { load(dir, plan, LoadOptions{.cpu_compiler = "gcc"}); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(std::string(e.what()).find("compiler \"gcc\": CPU devices compile with llvm, clang, dlopen"),
            std::string::npos)
      << e.what();
}

TEST(PlanFile, CheckOutputReportsTheFirstMismatches) {
  LoadedOutput out;
  out.name = "o";
  out.expect = PlanFileExpect{};
  out.expected = {1, 2, 3, 4, 5, 6, 7, 8, NAN};
  std::vector<float> got = {1, 2.5f, 3, 4.00001f, 0, 6, 0, 0, NAN};
  auto check = check_output(out, DType::F32, std::as_bytes(std::span(got)));
  EXPECT_EQ(check.compared, 9u);
  EXPECT_EQ(check.mismatches, 4u);  // 4.00001 is within rtol 1e-5; NaN matches NaN
  ASSERT_EQ(check.first.size(), 4u);
  EXPECT_EQ(check.first[0].index, 1u);
  EXPECT_EQ(check.first[0].got, 2.5);
  EXPECT_EQ(check.first[0].expected, 2.0);
  EXPECT_EQ(check.max_abs_error, 8.0);

  out.expect->atol = 10;  // everything within 10
  EXPECT_TRUE(check_output(out, DType::F32, std::as_bytes(std::span(got))).passed());

  // Integers compare exactly unless told otherwise; a prefix compares only its values.
  LoadedOutput ints;
  ints.expect = PlanFileExpect{.prefix = true};
  ints.expected = {1000000, 7};
  std::vector<int32_t> have = {1000001, 7, 99};
  auto int_check = check_output(ints, DType::I32, std::as_bytes(std::span(have)));
  EXPECT_EQ(int_check.compared, 2u);
  EXPECT_EQ(int_check.mismatches, 1u);
  ints.expect->rtol = 1e-5;
  EXPECT_TRUE(check_output(ints, DType::I32, std::as_bytes(std::span(have))).passed());

  // More than kReportedMismatches differences: all counted, the first few kept.
  LoadedOutput many;
  many.expect = PlanFileExpect{};
  many.expected.assign(100, 1.0);
  std::vector<double> zeros(100, 0.0);
  auto many_check = check_output(many, DType::F64, std::as_bytes(std::span(zeros)));
  EXPECT_EQ(many_check.mismatches, 100u);
  EXPECT_EQ(many_check.first.size(), kReportedMismatches);
}

TEST(PlanFile, Bf16BuffersReadU16OrF32AndWriteF32) {
  TempDir dir;
  save(dir / "bits.npy", DType::U16, {2}, {0x3f80, 0xc000});  // 1.0, -2.0
  save(dir / "floats.npy", DType::F32, {2}, {0.5, 3.0});
  Json plan = Json::parse(R"J({
    "svod_plan": 1,
    "buffers": { "a": { "dtype": "bf16", "count": 2, "init": { "npy": "bits.npy" } },
                 "b": { "dtype": "bf16", "count": 2, "init": { "npy": "floats.npy" } } },
    "ops": [],
    "outputs": { "a": { "expect": { "values": [1, -2] } }, "b": { "expect": { "values": [0.5, 3] } } }
  })J");
  LoadedPlan loaded = load(dir, plan);
  for (const auto& out : loaded.outputs) {
    const Buffer& b = loaded.plan.buffer(out.slot);
    EXPECT_TRUE(check_output(out, DType::BF16, std::as_bytes(b.span<uint16_t>())).passed()) << out.name;
  }
  const Buffer& a = loaded.plan.buffer(loaded.outputs[0].slot);
  write_output_npy(dir / "a.npy", loaded.outputs[0], DType::BF16, std::as_bytes(a.span<uint16_t>()));
  NpyArray back = read_npy(dir / "a.npy");
  EXPECT_EQ(back.dtype, DType::F32);
  EXPECT_EQ(reinterpret_cast<const float*>(back.data.data())[1], -2.0f);
}

// --- invalid plans ------------------------------------------------------------

Json base_plan() {
  return Json::parse(R"J({
    "svod_plan": 1,
    "variables": { "N": { "min": 1, "max": 8, "value": 8 } },
    "buffers": {
      "a":   { "dtype": "f32", "count": 8, "init": { "arange": { "start": 0, "step": 1 } } },
      "b":   { "dtype": "f32", "count": 8, "init": { "fill": 2 } },
      "out": { "dtype": "f32", "count": 8 },
      "i":   { "dtype": "i32", "count": 4 }
    },
    "programs": {
      "add": { "language": "c", "entry": "add",
               "source": "void add(float* o, const float* a, const float* b, int n) { for (int i = 0; i < n; i++) o[i] = a[i] + b[i]; }",
               "buffers": [ { "name": "o", "access": "write" }, { "name": "a" }, { "name": "b" } ],
               "scalars": [ { "name": "n", "type": "i32" } ] }
    },
    "ops": [
      { "id": "first", "run": "add", "buffers": ["out", "a", "b"], "scalars": { "n": "N" } },
      { "copy": { "dst": "b", "src": "out" } },
      { "custom": "all_reduce", "buffers": ["a", "b"], "attrs": { "op": "sum" } }
    ],
    "outputs": { "out": { "expect": { "values": [2, 3, 4, 5, 6, 7, 8, 9] } } }
  })J");
}

struct BadPlan {
  std::string what;
  std::function<void(Json&)> edit;
  ErrorKind kind;
  std::string message;  // must appear in the error, after the file name
};

TEST(PlanFile, TheBasePlanOfTheErrorCasesIsValid) {
  TempDir dir;
  LoadedPlan loaded = load(dir, base_plan());
  loaded.plan.execute();
  const Buffer& out = loaded.plan.buffer(loaded.outputs[0].slot);
  EXPECT_TRUE(check_output(loaded.outputs[0], DType::F32, std::as_bytes(out.span<float>())).passed());
}

TEST(PlanFile, InvalidPlansNameTheField) {
  using K = ErrorKind;
  const std::vector<BadPlan> cases = {
      {"version", [](Json& j) { j["svod_plan"] = 2; }, K::Validation, "svod_plan: this svod reads plan format version 1"},
      {"no version", [](Json& j) { j.erase("svod_plan"); }, K::Validation, "(the plan): missing field \"svod_plan\""},
      {"top-level typo", [](Json& j) { j["bufers"] = Json::object(); }, K::Validation, "bufers: unknown field"},
      {"no buffers", [](Json& j) { j.erase("buffers"); }, K::Validation, "missing field \"buffers\""},
      {"buffers not an object", [](Json& j) { j["buffers"] = Json::array(); }, K::Validation,
       "buffers: expected an object, got an array"},
      {"dtype", [](Json& j) { j["buffers"]["a"]["dtype"] = "f33"; }, K::Validation, "buffers.a.dtype: unknown element type"},
      {"no dtype", [](Json& j) { j["buffers"]["a"].erase("dtype"); }, K::Validation, "buffers.a: missing field \"dtype\""},
      {"count and shape", [](Json& j) { j["buffers"]["a"]["shape"] = {8}; }, K::Validation,
       "buffers.a: give either \"count\" or \"shape\""},
      {"negative count", [](Json& j) { j["buffers"]["a"]["count"] = -1; }, K::Validation,
       "buffers.a.count: expected a non-negative integer, got -1"},
      {"string count", [](Json& j) { j["buffers"]["a"]["count"] = "8"; }, K::Validation,
       "buffers.a.count: expected a non-negative integer, got a string"},
      {"zero count", [](Json& j) { j["buffers"]["out"]["count"] = 0; }, K::Validation,
       "buffers.out: a buffer needs at least one element"},
      {"shape entry", [](Json& j) { j["buffers"]["a"].erase("count"); j["buffers"]["a"]["shape"] = {2, "x"}; },
       K::Validation, "buffers.a.shape[1]: \"x\" is no variable of the plan (a dimension is a count or a variable's name)"},
      {"shape entry type", [](Json& j) { j["buffers"]["a"].erase("count"); j["buffers"]["a"]["shape"] = {2, -1}; },
       K::Validation, "buffers.a.shape[1]: expected a non-negative integer"},
      {"buffer field typo", [](Json& j) { j["buffers"]["a"]["cout"] = 3; }, K::Validation,
       "buffers.a.cout: unknown field (expected one of: dtype, count, shape, device, init, role)"},
      {"init kind", [](Json& j) { j["buffers"]["a"]["init"] = {{"ones", 1}}; }, K::Validation,
       "buffers.a.init.ones: unknown field"},
      {"two inits", [](Json& j) { j["buffers"]["a"]["init"]["fill"] = 1; }, K::Validation,
       "buffers.a.init: expected exactly one of"},
      {"fractional int fill", [](Json& j) { j["buffers"]["i"]["init"] = {{"fill", 1.5}}; }, K::Validation,
       "buffers.i.init.fill: 1.5 is not a i32 value"},
      {"int fill out of range", [](Json& j) { j["buffers"]["i"]["init"] = {{"fill", 3e9}}; }, K::Validation,
       "buffers.i.init.fill: 3000000000 is not a i32 value"},
      {"fill type", [](Json& j) { j["buffers"]["b"]["init"]["fill"] = "two"; }, K::Validation,
       "buffers.b.init.fill: expected a number, got a string"},
      {"arange step", [](Json& j) { j["buffers"]["a"]["init"]["arange"].erase("step"); }, K::Validation,
       "buffers.a.init.arange: missing field \"step\""},
      {"uniform on ints", [](Json& j) { j["buffers"]["i"]["init"] = Json::parse(R"J({"uniform": {"low": 0, "high": 1, "seed": 1}})J"); },
       K::Validation, "buffers.i.init.uniform: random initialisation needs a float buffer"},
      {"uniform seed", [](Json& j) { j["buffers"]["a"]["init"] = Json::parse(R"J({"uniform": {"low": 0, "high": 1}})J"); },
       K::Validation, "buffers.a.init.uniform: missing field \"seed\""},
      {"uniform bounds", [](Json& j) { j["buffers"]["a"]["init"] = Json::parse(R"J({"uniform": {"low": 2, "high": 1, "seed": 1}})J"); },
       K::Validation, "buffers.a.init.uniform: low 2 is greater than high 1"},
      {"normal std", [](Json& j) { j["buffers"]["a"]["init"] = Json::parse(R"J({"normal": {"mean": 0, "std": -1, "seed": 1}})J"); },
       K::Validation, "buffers.a.init.normal.std: must not be negative"},
      {"normal seed", [](Json& j) { j["buffers"]["a"]["init"] = Json::parse(R"J({"normal": {"mean": 0, "std": 1, "seed": -1}})J"); },
       K::Validation, "buffers.a.init.normal.seed: expected a non-negative integer"},
      {"npy missing", [](Json& j) { j["buffers"]["a"]["init"] = {{"npy", "nope.npy"}}; }, K::Io,
       "buffers.a.init.npy: "},
      {"npy dtype", [](Json& j) { j["buffers"]["a"]["init"] = {{"npy", "f64x8.npy"}}; }, K::Validation,
       "buffers.a.init.npy: "},
      {"npy count", [](Json& j) { j["buffers"]["i"]["init"] = {{"npy", "i32x3.npy"}}; }, K::Validation,
       "holds 3 elements, the buffer has 4"},
      {"npy not numpy", [](Json& j) { j["buffers"]["a"]["init"] = {{"npy", "junk.npy"}}; }, K::Validation,
       "buffers.a.init.npy: "},
      {"view base", [](Json& j) { j["buffers"]["v"] = Json::parse(R"J({"view": "nope", "offset": 0, "count": 1})J"); },
       K::Validation, "buffers.v.view: no buffer named \"nope\""},
      {"view range", [](Json& j) { j["buffers"]["v"] = Json::parse(R"J({"view": "a", "offset": 6, "count": 3})J"); },
       K::Validation, "buffers.v: elements [6, 9) leave \"a\", which has 8"},
      {"view of view", [](Json& j) {
         j["buffers"]["v"] = Json::parse(R"J({"view": "a", "offset": 0, "count": 4})J");
         j["buffers"]["w"] = Json::parse(R"J({"view": "v", "offset": 0, "count": 2})J");
       }, K::Validation, "buffers.w.view: \"v\" is itself a view"},
      {"view role", [](Json& j) { j["buffers"]["v"] = Json::parse(R"J({"view": "a", "offset": 0, "count": 4, "role": "input"})J"); },
       K::Validation, "buffers.v.role: unknown field (expected one of: view, offset, byte_offset, count, shape, dtype)"},
      {"language", [](Json& j) { j["programs"]["add"]["language"] = "Rust!"; }, K::Validation,
       "programs.add.language: language \"Rust!\": names are 1 to 15 lower-case letters"},
      {"two sources", [](Json& j) { j["programs"]["add"]["source_file"] = "add.c"; }, K::Validation,
       "programs.add: give either \"source\" or \"source_file\""},
      {"source file", [](Json& j) { j["programs"]["add"].erase("source"); j["programs"]["add"]["source_file"] = "none.c"; },
       K::Io, "none.c: cannot open the source file"},
      {"source device", [](Json& j) { j["programs"]["add"].erase("source"); j["programs"]["add"]["source_file"] = "/dev/zero"; },
       K::Io, "programs.add.source_file: /dev/zero: the source file is a character device, not a regular file"},
      {"no entry", [](Json& j) { j["programs"]["add"].erase("entry"); }, K::Validation,
       "programs.add: missing field \"entry\""},
      {"access", [](Json& j) { j["programs"]["add"]["buffers"][0]["access"] = "rw"; }, K::Validation,
       "programs.add.buffers[0].access: "},
      {"min_count variable", [](Json& j) { j["programs"]["add"]["buffers"][0]["min_count"] = "N"; }, K::Validation,
       "programs.add.buffers[0].min_count: unknown variable \"N\" in \"N\" (the program's scalars except core_id: n)"},
      {"min_count type", [](Json& j) { j["programs"]["add"]["buffers"][0]["min_count"] = 1.5; }, K::Validation,
       "programs.add.buffers[0].min_count: expected an integer or an expression string"},
      {"min_count too large", [](Json& j) { j["programs"]["add"]["buffers"][0]["min_count"] = "n * 4 + 4"; },
       K::Validation, "of 32 bytes but the launch needs 36"},
      {"scalar type", [](Json& j) { j["programs"]["add"]["scalars"][0]["type"] = "i16"; }, K::Validation,
       "programs.add.scalars[0].type: "},
      {"global size variable", [](Json& j) { j["programs"]["add"]["global_size"] = {"(M+1)/2", 1, 1}; },
       K::Validation, "programs.add.global_size[0]: unknown variable \"M\" in \"(M+1)/2\""},
      {"global size syntax", [](Json& j) { j["programs"]["add"]["global_size"] = {"(N+", 1, 1}; }, K::Validation,
       "programs.add.global_size[0]: "},
      {"local size count", [](Json& j) { j["programs"]["add"]["local_size"] = {1, 1, 1, 1}; }, K::Validation,
       "programs.add.local_size: expected 1 to 3 sizes, got 4"},
      {"define value", [](Json& j) { j["programs"]["add"]["defines"] = {{"X", Json::array()}}; }, K::Validation,
       "programs.add.defines.X: expected a number or a string"},
      {"flops", [](Json& j) { j["programs"]["add"]["flops"] = 1.5; }, K::Validation,
       "programs.add.flops: expected a whole number"},
      {"duplicate parameter", [](Json& j) { j["programs"]["add"]["buffers"][1]["name"] = "o"; }, K::Validation,
       "programs.add: "},
      {"program typo", [](Json& j) { j["programs"]["add"]["entrypoint"] = "x"; }, K::Validation,
       "programs.add.entrypoint: unknown field"},
      {"ops not an array", [](Json& j) { j["ops"] = Json::object(); }, K::Validation, "ops: expected an array"},
      {"op kind", [](Json& j) { j["ops"][1]["run"] = "add"; }, K::Validation,
       "ops[1]: an op has exactly one of \"run\", \"copy\", \"custom\" or \"collective\""},
      {"run program", [](Json& j) { j["ops"][0]["run"] = "mul"; }, K::Validation, "ops[0].run: no program named \"mul\""},
      {"run buffer", [](Json& j) { j["ops"][0]["buffers"][1] = "c"; }, K::Validation,
       "ops[0].buffers[1]: no buffer named \"c\""},
      {"run buffer count", [](Json& j) { j["ops"][0]["buffers"].erase(2); }, K::Validation,
       "ops[0].buffers: program \"add\" takes 3 buffers, got 2"},
      {"run buffer dtype", [](Json& j) {
         j["programs"]["add"]["buffers"][1]["dtype"] = "f32";
         j["ops"][0]["buffers"][1] = "i";
       }, K::Validation, "ops[0].buffers[1]: buffer \"i\" is i32, parameter \"a\" of \"add\" takes f32"},
      {"missing scalar", [](Json& j) { j["ops"][0].erase("scalars"); }, K::Validation,
       "ops[0].scalars: missing scalar \"n\" of program \"add\""},
      {"unknown scalar", [](Json& j) { j["ops"][0]["scalars"]["m"] = 1; }, K::Validation,
       "ops[0].scalars.m: program \"add\" has no scalar named \"m\""},
      {"scalar variable", [](Json& j) { j["ops"][0]["scalars"]["n"] = "M*2"; }, K::Validation,
       "ops[0].scalars.n: unknown variable \"M\""},
      {"scalar type", [](Json& j) { j["ops"][0]["scalars"]["n"] = 2.5; }, K::Validation,
       "ops[0].scalars.n: expected an integer or an expression string, got 2.5"},
      {"op field typo", [](Json& j) { j["ops"][0]["scalar"] = Json::object(); }, K::Validation,
       "ops[0].scalar: unknown field"},
      {"copy sizes", [](Json& j) { j["ops"][1]["copy"]["dst"] = "i"; }, K::Validation,
       "ops[1].copy: dst \"i\" has 16 bytes, src \"out\" has 32"},
      {"copy buffer", [](Json& j) { j["ops"][1]["copy"]["src"] = "zz"; }, K::Validation,
       "ops[1].copy.src: no buffer named \"zz\""},
      {"duplicate id", [](Json& j) { j["ops"][1]["id"] = "first"; }, K::Validation,
       "ops[1].id: id \"first\" is already used by ops[0]"},
      {"after id", [](Json& j) { j["ops"][1]["after"] = {"zzz"}; }, K::Validation, "ops[1].after[0]: no op with id \"zzz\""},
      {"after index", [](Json& j) { j["ops"][1]["after"] = {9}; }, K::Validation,
       "ops[1].after[0]: no op with index 9 (the plan has 3)"},
      {"after self", [](Json& j) { j["ops"][0]["after"] = {"first"}; }, K::Validation,
       "ops[0].after[0]: an op cannot run after itself"},
      {"custom attr type", [](Json& j) { j["ops"][2]["attrs"]["op"] = true; }, K::Validation,
       "ops[2].attrs.op: expected a number or a string, got true/false"},
      {"custom unknown", [](Json& j) { j["ops"][2]["custom"] = "frobnicate"; }, K::Validation, "ops[2]: "},
      {"custom attrs", [](Json& j) { j["ops"][2]["attrs"]["op"] = "mean"; }, K::Validation, "ops[2]: "},
      {"custom buffer", [](Json& j) { j["ops"][2]["buffers"][0] = "q"; }, K::Validation,
       "ops[2].buffers[0]: no buffer named \"q\""},
      {"output buffer", [](Json& j) { j["outputs"]["nope"] = Json::object(); }, K::Validation,
       "outputs.nope: no buffer named \"nope\""},
      {"output typo", [](Json& j) { j["outputs"]["out"]["expected"] = Json::object(); }, K::Validation,
       "outputs.out.expected: unknown field"},
      {"expect count", [](Json& j) { j["outputs"]["out"]["expect"]["values"] = {1, 2}; }, K::Validation,
       "outputs.out.expect.values: 2 values for 8 elements of \"out\" (add \"prefix\": true"},
      {"expect too many", [](Json& j) {
         j["outputs"]["out"]["expect"]["prefix"] = true;
         j["outputs"]["out"]["expect"]["values"] = Json(std::vector<int>(9, 1));
       }, K::Validation, "outputs.out.expect.values: 9 values for 8 elements"},
      {"expect value", [](Json& j) { j["outputs"]["out"]["expect"]["values"][3] = "x"; }, K::Validation,
       "outputs.out.expect.values[3]: expected a number"},
      {"expect both", [](Json& j) { j["outputs"]["out"]["expect"]["npy"] = "e.npy"; }, K::Validation,
       "outputs.out.expect: give either \"npy\" or \"values\""},
      {"expect prefix", [](Json& j) { j["outputs"]["out"]["expect"]["prefix"] = 1; }, K::Validation,
       "outputs.out.expect.prefix: expected true or false"},
      {"expect rtol", [](Json& j) { j["outputs"]["out"]["expect"]["rtol"] = -1; }, K::Validation,
       "outputs.out.expect.rtol: must not be negative"},
      {"expect npy count", [](Json& j) { j["outputs"]["out"]["expect"] = {{"npy", "i32x3.npy"}}; }, K::Validation,
       "outputs.out.expect.npy: "},
      {"expect npy missing", [](Json& j) { j["outputs"]["out"]["expect"] = {{"npy", "gone.npy"}}; }, K::Io,
       "outputs.out.expect.npy: "},
      {"variable value", [](Json& j) { j["variables"]["N"]["value"] = 0; }, K::Validation,
       "variables.N.value: 0 is outside [1, 8]"},
      {"variable bounds", [](Json& j) { j["variables"]["N"]["min"] = 9; }, K::Validation,
       "variables.N: min 9 is greater than max 8"},
      {"variable name", [](Json& j) { j["variables"]["2x"] = Json::parse(R"J({"min": 0, "max": 1, "value": 0})J"); },
       K::Validation, "variables.2x: a variable name is"},
      {"variable field", [](Json& j) { j["variables"]["N"]["default"] = 3; }, K::Validation,
       "variables.N.default: unknown field"},
      {"plan device", [](Json& j) { j["device"] = "CUDA:99"; }, K::DeviceUnavailable,
       "device: device \"CUDA:99\""},
      {"buffer device", [](Json& j) { j["buffers"]["b"]["device"] = "CL:7"; }, K::DeviceUnavailable,
       "buffers.b.device: device \"CL:7\""},
      {"program device", [](Json& j) { j["programs"]["add"]["device"] = "CUDA:99"; }, K::DeviceUnavailable,
       "programs.add.device: device \"CUDA:99\""},
      {"cuda on the CPU", [](Json& j) { j["programs"]["add"]["language"] = "cuda"; }, K::Unsupported,
       "programs.add.language: cuda programs cannot run on the CPU device (it runs c, llvm)"},
      {"language of no device", [](Json& j) { j["programs"]["add"]["language"] = "rust"; }, K::Unsupported,
       "programs.add.language: rust programs cannot run on the CPU device (it runs c, llvm)"},
      {"compile error", [](Json& j) { j["programs"]["add"]["source"] = "void add(float* o, { syntax error"; },
       K::Compile, "programs.add: "},
      {"missing entry symbol", [](Json& j) { j["programs"]["add"]["entry"] = "sum"; }, K::UndefinedSymbol,
       "programs.add: "},
  };

  TempDir dir;
  save(dir / "f64x8.npy", DType::F64, {8}, std::vector<double>(8, 1.0));
  save(dir / "i32x3.npy", DType::I32, {3}, {1, 2, 3});
  dir.write("junk.npy", "this is not numpy");
  dir.write("add.c", "void add(void) {}");
  const std::string file = (dir / "plan.json").string();
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    Json plan = base_plan();
    c.edit(plan);
    dir.write("plan.json", plan.dump(2));
    try {
      load_plan(parse_plan_file(file));
      ADD_FAILURE() << "no error; expected: " << c.message;
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_EQ(e.kind(), c.kind) << message;
      EXPECT_EQ(message.rfind(file + ": ", 0), 0u) << message;
      EXPECT_NE(message.find(c.message), std::string::npos) << message;
    }
  }
}

// What the JSON parser would take silently: a key given twice (it keeps the
// last, so the first is ignored) and a NUL byte in a key or a name (which
// would cut it short as C text). Each is refused, naming where.
TEST(PlanFile, DuplicateKeysAndNulBytesInNamesAreRefusedNamingWhere) {
  const std::string base = base_plan().dump();
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string text = base;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    return text;
  };
  const std::pair<std::string, std::string> cases[] = {
      {edited("{", R"({"svod_plan":1,)"), "svod_plan: the key appears twice in one object"},
      {edited(R"("buffers":{)", R"("buffers":{"out":{"dtype":"f32","count":4},)"),
       "buffers.out: the key appears twice in one object"},
      {edited(R"("run":"add")", R"("run":"add","run":"add")"), "ops[0].run: the key appears twice in one object"},
      {edited(R"("attrs":{"op":"sum"})", R"("attrs":{"op":"sum","op":"max"})"),
       "ops[2].attrs.op: the key appears twice in one object"},
      {edited(R"("b":{)", R"("b\u0000c":{)"), R"(buffers."b\u0000c": a key may not contain a NUL byte)"},
      {edited(R"("id":"first")", R"("id":"fir\u0000st")"), "ops[0].id: a name may not contain a NUL byte"},
      {edited(R"("entry":"add")", R"("entry":"add\u0000")"), "programs.add.entry: a name may not contain a NUL byte"},
  };
  for (const auto& [text, expected] : cases) {
    try {
      parse_plan_text(text, ".", "plan.json");
      ADD_FAILURE() << "no error; expected: " << expected;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Validation) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("plan.json: " + expected, 0), 0u) << e.what();
    }
  }
  // A key twice in different objects is fine, and so is the plan as it was.
  EXPECT_EQ(parse_plan_text(base, ".", "plan.json").buffers.size(), 4u);
}

TEST(PlanFile, BadJsonAndMissingFiles) {
  TempDir dir;
  try {
    parse_plan_text("{ \"svod_plan\": 1, ", dir.path(), "broken.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Validation);
    EXPECT_NE(std::string(e.what()).find("broken.json: not valid JSON"), std::string::npos) << e.what();
  }
  try {
    parse_plan_file(dir / "absent.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find("absent.json: cannot open the plan file"), std::string::npos) << e.what();
  }
  // A device would never end: refused before reading.
  const Error e = test::expect_error([] { parse_plan_file("/dev/zero"); });
  EXPECT_EQ(e.kind(), ErrorKind::Io);
  EXPECT_NE(std::string(e.what()).find("/dev/zero: the plan file is a character device, not a regular file"),
            std::string::npos)
      << e.what();
}

// A FIFO that nobody writes, where the plan names a file: opening it the usual
// way would wait for a writer forever. Each is refused at once, naming the
// file and what it is; the watchdog ends the test program if one waits.
TEST(PlanFile, FifosAndFoldersWhereFilesBelongAreRefusedWithoutWaiting) {
  TempDir dir;
  test::Watchdog watchdog("refusing FIFOs named by a plan", std::chrono::seconds(60));
  for (const char* name : {"fifo.json", "fifo.c", "fifo.npy"}) ASSERT_EQ(::mkfifo((dir / name).c_str(), 0644), 0);
  std::filesystem::create_directory(dir / "folder.c");
  auto expect_refused = [&](const std::filesystem::path& plan, std::string_view where, std::string_view file,
                            std::string_view what) {
    SCOPED_TRACE(std::string(where));
    const Error e = test::expect_error([&] { load_plan(parse_plan_file(plan)); });
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    const std::string expected = (dir / file).string() + ": the " + std::string(what) + ", not a regular file";
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(where), std::string::npos) << e.what();
  };
  expect_refused(dir / "fifo.json", "fifo.json", "fifo.json", "plan file is a FIFO");

  Json plan = base_plan();
  plan["programs"]["add"].erase("source");
  plan["programs"]["add"]["source_file"] = "fifo.c";
  expect_refused(dir.write("source.json", plan.dump()), "programs.add.source_file: ", "fifo.c",
                 "source file is a FIFO");
  plan["programs"]["add"]["source_file"] = "folder.c";
  expect_refused(dir.write("folder.json", plan.dump()), "programs.add.source_file: ", "folder.c",
                 "source file is a directory");

  const Json small = Json::parse(R"J({"svod_plan": 1,
    "buffers": {"x": {"dtype": "f32", "count": 2, "init": {"npy": "fifo.npy"}}},
    "ops": [{"custom": "fill", "buffers": ["x"], "attrs": {"value": 0.5}}]})J");
  expect_refused(dir.write("input.json", small.dump()), "buffers.x.init.npy: ", "fifo.npy",
                 ".npy file is a FIFO");
  Json expecting = small;
  expecting["buffers"]["x"].erase("init");
  expecting["outputs"] = Json::parse(R"J({"x": {"expect": {"npy": "fifo.npy"}}})J");
  expect_refused(dir.write("expect.json", expecting.dump()), "outputs.x.expect.npy: ", "fifo.npy",
                 ".npy file is a FIFO");
}

}  // namespace
}  // namespace svod
