// Packages: pack a plan, load it back from memory and from a file, and get
// byte-identical outputs without compiling; damaged packages are refused.
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <typeinfo>

#include "svod/base/npy.h"
#include "svod/comm/communicator.h"
#include "svod/device/kernel_cache.h"
#include "svod/cache/object_cache.h"
#include "svod/compile/compile_policy.h"
#include "svod/registry/registry.h"
#include "svod/base/cpu_features.h"
#include "svod/guard/checked_mode.h"
#include "svod/package/package.h"
#include "svod/planfile/plan_save.h"
#include "tests/package/package_test_support.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"
#include "tests/support/watchdog.h"

namespace svod {
namespace {

using test::expect_error;
using test::feature_this_cpu_lacks;
using test::kind_of;
using test::NoCompiling;
using test::TempDir;
using test::with_manifest;

const std::filesystem::path kMlp = std::filesystem::path(SVOD_SOURCE_DIR) / "examples/mlp/plan.json";
const std::filesystem::path kFeatures = std::filesystem::path(SVOD_SOURCE_DIR) / "examples/features/plan.json";
const std::filesystem::path kCrossDevice = std::filesystem::path(SVOD_SOURCE_DIR) / "examples/cross_device/plan.json";

// Every output of one execution, by name.
std::map<std::string, std::vector<std::byte>> run_outputs(LoadedPlan& loaded) {
  loaded.execute();
  std::map<std::string, std::vector<std::byte>> out;
  for (const auto& o : loaded.outputs) {
    const Buffer& b = loaded.plan.buffer(o.slot);
    const auto* p = static_cast<const std::byte*>(b.data());
    out[o.name].assign(p, p + b.bytes());
  }
  return out;
}

void expect_checks_pass(const LoadedPlan& loaded) {
  for (const auto& o : loaded.outputs) {
    const Buffer& b = loaded.plan.buffer(o.slot);
    const OutputCheck check =
        check_output(o, b.dtype(), {static_cast<const std::byte*>(b.data()), b.bytes()});
    EXPECT_TRUE(check.passed()) << o.name << ": " << check.mismatches << " mismatches";
    if (o.expect) EXPECT_GT(check.compared, 0u) << o.name;
  }
}

std::map<std::string, std::vector<std::byte>> plan_outputs(const std::filesystem::path& plan,
                                                           std::map<std::string, int64_t> vars = {}) {
  PlanFile file = parse_plan_file(plan);
  LoadedPlan loaded = load_plan(file, LoadOptions{std::move(vars)});
  return run_outputs(loaded);
}

TEST(Package, MlpFromMemoryMatchesThePlanWithoutCompiling) {
  const auto expected = plan_outputs(kMlp);
  const std::vector<std::byte> bytes = pack_plan(kMlp);

  const uint64_t before = compile_count();
  LoadedPackage package = load_package(std::span<const std::byte>(bytes));
  EXPECT_EQ(compile_count(), before);
  EXPECT_EQ(package.compiled, 0u);
  ASSERT_EQ(package.manifest.programs.size(), 4u);
  for (const auto& p : package.manifest.programs) EXPECT_EQ(p.artifact, ArtifactKind::ElfObject) << p.name;
  EXPECT_EQ(package.manifest.buffers.size(), 7u);  // x, w1, b1, w2, b2, w3, b3
  EXPECT_EQ(package.manifest.expected.size(), 2u);
  EXPECT_EQ(run_outputs(package.loaded), expected);
  expect_checks_pass(package.loaded);
  EXPECT_EQ(compile_count(), before);
}

// A package of format version 1, packed before version 2 existed, loads
// and runs: y = x * 3 + 1, as its expectation says.
TEST(Package, FormatVersionOneStillLoads) {
  LoadedPackage package = load_package(std::filesystem::path(SVOD_SOURCE_DIR) / "tests/package/data/format1.svodpkg");
  EXPECT_EQ(package.manifest.format, 1u);
  EXPECT_TRUE(package.manifest.inputs.empty());
  EXPECT_TRUE(package.manifest.exporter.empty());
  run_outputs(package.loaded);
  expect_checks_pass(package.loaded);
}

// A plan in memory packs with the objects its programs were loaded from
// (nothing compiles, packing or loading) and its inputs and outputs in the
// manifest; the package computes bitwise what the plan computes.
TEST(Package, APlanInMemoryPacksWithoutCompiling) {
  LoadedPlan original = load_plan(parse_plan_file(kMlp));
  SaveOptions save;
  save.inputs.push_back(PlanPort{"x", std::string("x"), std::nullopt, {int64_t{64}, int64_t{256}}});
  PackOptions options;
  options.exporter = "package_test";
  const uint64_t before = compile_count();
  const std::vector<std::byte> bytes = pack_plan(original.plan, save, options);
  LoadedPackage package = load_package(std::span<const std::byte>(bytes));
  EXPECT_EQ(compile_count(), before);
  EXPECT_EQ(package.compiled, 0u);

  const PackageManifest& m = package.manifest;
  EXPECT_EQ(m.format, kPackageFormatVersion);
  EXPECT_EQ(m.exporter, "package_test");
  ASSERT_EQ(m.inputs.size(), 1u);
  EXPECT_EQ(m.inputs[0].name, "x");
  EXPECT_EQ(m.inputs[0].dtype, DType::F32);
  EXPECT_EQ(m.inputs[0].shape, (std::vector<size_t>{64, 256}));
  ASSERT_EQ(m.outputs.size(), 2u);
  EXPECT_EQ(m.outputs[0].name, "logits");
  // A plan in memory knows its buffers' element counts, not their shapes.
  EXPECT_EQ(m.outputs[1].shape, (std::vector<size_t>{640}));
  for (const auto& p : m.programs) EXPECT_EQ(p.artifact, ArtifactKind::ElfObject) << p.name;
  // Constants travel; the input does not (the caller binds it).
  EXPECT_EQ(m.buffers.size(), 6u);

  std::memcpy(package.loaded.plan.buffer(*package.loaded.plan.find_buffer("x")).data(),
              original.plan.buffer(*original.plan.find_buffer("x")).data(), 64 * 256 * sizeof(float));
  EXPECT_EQ(run_outputs(package.loaded), run_outputs(original));
}

// A plan spanning the CPU and an OpenCL device (PoCL in CI) saves and packs
// from memory: its OpenCL programs travel as the binaries they were loaded
// from, and both compute bitwise what the plan computes.
TEST(Package, AnOpenClPlanInMemorySavesAndPacks) {
  try {
    open_device("CL:0");
  } catch (const Error& e) {
    GTEST_SKIP() << "no OpenCL device: " << e.what();
  }
  TempDir dir;
  LoadedPlan original = load_plan(parse_plan_file(kCrossDevice));
  save_plan(original.plan, dir / "saved");
  const std::vector<std::byte> bytes = pack_plan(original.plan, {});
  LoadedPlan saved = load_plan(parse_plan_file(dir / "saved" / "plan.json"));
  const uint64_t before = compile_count();
  LoadedPackage package = load_package(std::span<const std::byte>(bytes));
  EXPECT_EQ(compile_count(), before);
  EXPECT_EQ(package.compiled, 0u);
  bool binaries = false;
  for (const auto& p : package.manifest.programs) binaries |= p.artifact && !is_cpu_artifact(*p.artifact);
  EXPECT_TRUE(binaries) << "no OpenCL program was packed as a binary";
  const auto expected = run_outputs(original);
  EXPECT_FALSE(expected.empty());
  EXPECT_EQ(run_outputs(saved), expected);
  EXPECT_EQ(run_outputs(package.loaded), expected);
}

// A variable dimension is written by its variable's name and read back so.
TEST(PackageFormat, PortsWithVariableDimensionsRoundTrip) {
  PackageManifest m;
  m.svod_version = "test";
  m.exporter = "svod.tinygrad";
  m.inputs.push_back(PackagePort{"tokens", DType::I32, {0, 128}, {"batch", ""}});
  m.outputs.push_back(PackagePort{"logits", DType::BF16, {4, 10}, {}});
  const std::string text = write_manifest(m);
  EXPECT_NE(text.find("\"batch\""), std::string::npos) << text;
  const PackageManifest back = read_manifest(text, "test");
  EXPECT_EQ(back.exporter, "svod.tinygrad");
  ASSERT_EQ(back.inputs.size(), 1u);
  EXPECT_EQ(back.inputs[0].name, "tokens");
  EXPECT_EQ(back.inputs[0].dtype, DType::I32);
  EXPECT_EQ(back.inputs[0].shape, (std::vector<size_t>{0, 128}));
  EXPECT_EQ(back.inputs[0].dim_variables, (std::vector<std::string>{"batch", ""}));
  ASSERT_EQ(back.outputs.size(), 1u);
  EXPECT_EQ(back.outputs[0].dtype, DType::BF16);
  EXPECT_TRUE(back.outputs[0].dim_variables.empty());
  auto bad = nlohmann::json::parse(text);
  bad["inputs"][0]["shape"][1] = -3;
  const Error e = expect_error([&] { read_manifest(bad.dump(), "test"); });
  EXPECT_EQ(e.kind(), ErrorKind::Load);
  EXPECT_NE(std::string(e.what()).find("inputs[0].shape[1]"), std::string::npos) << e.what();
}

TEST(Package, RunsWithCompilingForbidden) {
  const std::vector<std::byte> bytes = pack_plan(kMlp);
  const auto expected = plan_outputs(kMlp);
  NoCompiling off;
  LoadedPackage package = load_package(std::span<const std::byte>(bytes));
  EXPECT_EQ(run_outputs(package.loaded), expected);

  // The same kernel as source is refused, naming the program (a fresh source,
  // so that no cache holds it).
  TempDir dir;
  const auto plan = dir.write("plan.json", fmt::format(R"({{"svod_plan": 1,
    "buffers": {{"o": {{"dtype": "f32", "count": 4}}}},
    "programs": {{"fresh": {{"language": "c", "entry": "k",
      "source": "/* {} */ void k(float* o) {{ o[0] = 1; }}", "buffers": [{{"name": "o", "access": "write"}}]}}}},
    "ops": [{{"run": "fresh", "buffers": ["o"]}}]}})",
                                                      std::chrono::steady_clock::now().time_since_epoch().count()));
  const Error e = expect_error([&] { load_plan(parse_plan_file(plan)); });
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  EXPECT_NE(std::string(e.what()).find("programs.fresh"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("compiling is off"), std::string::npos) << e.what();
}

TEST(Package, FromAFileUsesTheDataWhereItLies) {
  TempDir dir;
  const auto path = dir / "mlp.svodpkg";
  write_package(path, pack_plan(kMlp));
  const auto on_disk = [&] {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string before = on_disk();

  LoadedPackage package = load_package(path);
  const Buffer& w1 = package.loaded.plan.buffer(*package.loaded.plan.find_buffer("w1"));
  const Buffer& h1 = package.loaded.plan.buffer(*package.loaded.plan.find_buffer("h1"));
  EXPECT_NE(typeid(w1.storage()), typeid(h1.storage())) << "npy data should stay in the package's image";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w1.data()) % 64, 0u);
  // Writing a packaged buffer changes this process's copy, never the file.
  w1.span<float>()[0] = 12345.0f;
  EXPECT_EQ(on_disk(), before);
  LoadedPackage again = load_package(path);
  const auto expected = plan_outputs(kMlp);
  EXPECT_EQ(run_outputs(again.loaded), expected);
}

TEST(Package, AFileRewrittenOrCutAfterLoadingChangesNothing) {
  // What was checked is what runs: the file is read once, never mapped.
  TempDir dir;
  const auto path = dir / "mlp.svodpkg";
  write_package(path, pack_plan(kMlp));
  const auto expected = plan_outputs(kMlp);
  LoadedPackage package = load_package(path);
  {
    const auto size = std::filesystem::file_size(path);
    std::fstream in_place(path, std::ios::in | std::ios::out | std::ios::binary);
    const std::string garbage(size, '\x7f');
    in_place.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  EXPECT_EQ(run_outputs(package.loaded), expected);
  std::filesystem::resize_file(path, 0);  // a mapping's pages would now be SIGBUS
  EXPECT_EQ(run_outputs(package.loaded), expected);
}

// A package of several megabytes is read into memory aligned for huge pages
// (FileImage): its data is used where it lies there, and a rewrite or
// truncation of the file after loading still reaches nothing.
TEST(Package, ALargePackageIsReadWholeAndCutOffFromItsFile) {
  TempDir dir;
  constexpr size_t kCount = 3 << 18;  // 3 MiB of f32
  std::vector<float> w(kCount);
  for (size_t i = 0; i < kCount; ++i) w[i] = static_cast<float>(i % 1000) * 0.25f;
  const size_t shape[] = {kCount};
  write_npy(dir / "w.npy", DType::F32, shape, std::as_bytes(std::span(w)));
  const auto plan = dir.write("plan.json", fmt::format(R"({{"svod_plan": 1,
    "buffers": {{"w": {{"dtype": "f32", "count": {0}, "init": {{"npy": "w.npy"}}}},
                "y": {{"dtype": "f32", "count": 4}}}},
    "programs": {{"total": {{"language": "c", "entry": "total",
      "source": "void total(float* y, const float* w) {{ float s = 0; for (int i = 0; i < {0}; ++i) s += w[i]; y[0] = s; y[1] = w[{1}]; }}",
      "buffers": [{{"name": "y", "access": "write"}}, {{"name": "w"}}]}}}},
    "ops": [{{"run": "total", "buffers": ["y", "w"]}}],
    "outputs": {{"y": {{}}}}}})",
                                                       kCount, kCount - 1));
  const auto path = dir / "large.svodpkg";
  write_package(path, pack_plan(plan));
  ASSERT_GT(std::filesystem::file_size(path), size_t{2} << 20);
  const auto expected = plan_outputs(plan);
  LoadedPackage package = load_package(path);
  const Buffer& data = package.loaded.plan.buffer(*package.loaded.plan.find_buffer("w"));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(data.data()) % 64, 0u);
  EXPECT_EQ(std::memcmp(data.data(), w.data(), kCount * sizeof(float)), 0);
  EXPECT_EQ(run_outputs(package.loaded), expected);
  {
    std::fstream in_place(path, std::ios::in | std::ios::out | std::ios::binary);
    const std::string garbage(1 << 20, '\x7f');
    in_place.seekp(static_cast<std::streamoff>(std::filesystem::file_size(path) / 2));
    in_place.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  std::filesystem::resize_file(path, 4096);
  EXPECT_EQ(run_outputs(package.loaded), expected);
}

TEST(Package, CheckedModePutsPackagedDataInGuardedMemory) {
  TempDir dir;
  const auto path = dir / "mlp.svodpkg";
  write_package(path, pack_plan(kMlp));
  const auto expected = plan_outputs(kMlp);
  set_check_mode({.memory = true});
  LoadedPackage package = load_package(path);
  set_check_mode({});
  const Buffer& w1 = package.loaded.plan.buffer(*package.loaded.plan.find_buffer("w1"));
  EXPECT_TRUE(w1.storage().guarded());
  EXPECT_EQ(run_outputs(package.loaded), expected);
}

TEST(Package, ViewsVariablesAndVarOverrides) {
  // examples/features: views of one arena, a variable in scalars and launch sizes, custom functions.
  const auto expected = plan_outputs(kFeatures, {{"N", 96}});
  const auto bytes = pack_plan(kFeatures, PackOptions{{{"N", 96}}});
  LoadedPackage package = load_package(std::span<const std::byte>(bytes));
  EXPECT_EQ(package.manifest.variables.at("N"), 96);
  EXPECT_EQ(package.loaded.plan.variable("N"), 96);
  EXPECT_EQ(run_outputs(package.loaded), expected);
  // A load-time override wins over the packaged value.
  LoadedPackage other = load_package(std::span<const std::byte>(bytes), PackageLoadOptions{{{"N", 200}}});
  EXPECT_EQ(other.loaded.plan.variable("N"), 200);
  EXPECT_EQ(run_outputs(other.loaded), plan_outputs(kFeatures, {{"N", 200}}));
}

TEST(Package, NpyDataUnderViewsAndExpectations) {
  TempDir dir;
  std::vector<float> arena(64), expect(32);
  for (size_t i = 0; i < arena.size(); ++i) arena[i] = 0.25f * static_cast<float>(i) - 3.0f;
  for (size_t i = 0; i < expect.size(); ++i) expect[i] = arena[i] * 2.0f + arena[32 + i];
  const size_t shape_arena[] = {64}, shape_expect[] = {32};
  write_npy(dir / "arena.npy", DType::F32, shape_arena, std::as_bytes(std::span(arena)));
  write_npy(dir / "expect.npy", DType::F32, shape_expect, std::as_bytes(std::span(expect)));
  dir.write("k.c", "void axpy(float* restrict o, const float* a, const float* b, int n) {"
                   " for (int i = 0; i < n; i++) o[i] = 2.0f * a[i] + b[i]; }");
  const auto plan = dir.write("plan.json", R"({"svod_plan": 1,
    "variables": {"N": {"min": 1, "max": 32, "value": 32}},
    "buffers": {
      "arena": {"dtype": "f32", "count": 64, "init": {"npy": "arena.npy"}},
      "a": {"view": "arena", "offset": 0, "count": 32},
      "b": {"view": "arena", "offset": 32, "count": 32},
      "o": {"dtype": "f32", "count": 32}},
    "programs": {"axpy": {"language": "c", "source_file": "k.c", "entry": "axpy",
      "buffers": [{"name": "o", "access": "write"}, {"name": "a"}, {"name": "b"}],
      "scalars": [{"name": "n", "type": "i32"}]}},
    "ops": [{"run": "axpy", "buffers": ["o", "a", "b"], "scalars": {"n": "N"}}],
    "outputs": {"o": {"expect": {"npy": "expect.npy"}}}})");
  const auto expected = plan_outputs(plan);
  const auto bytes = pack_plan(plan);
  // Nothing of the plan's folder is needed any more.
  std::filesystem::remove_all(dir.path());
  LoadedPackage package = load_package(std::span<const std::byte>(bytes));
  EXPECT_EQ(run_outputs(package.loaded), expected);
  expect_checks_pass(package.loaded);
  ASSERT_EQ(package.loaded.outputs.size(), 1u);
  EXPECT_EQ(package.loaded.outputs[0].expected.size(), 32u);
}

TEST(Package, PlanWithoutPrograms) {
  TempDir dir;
  const auto plan = dir.write("plan.json", R"({"svod_plan": 1,
    "buffers": {"x": {"dtype": "f32", "count": 4}},
    "ops": [{"custom": "fill", "buffers": ["x"], "attrs": {"value": 0.5}}],
    "outputs": {"x": {"expect": {"values": [0.5, 0.5, 0.5, 0.5]}}}})");
  const auto bytes = pack_plan(plan);
  LoadedPackage package = load_package(std::span<const std::byte>(bytes));
  EXPECT_TRUE(package.manifest.programs.empty());
  EXPECT_FALSE(package.manifest.cpu.has_value());
  EXPECT_EQ(run_outputs(package.loaded), plan_outputs(plan));
  expect_checks_pass(package.loaded);
}

// Turns the in-memory kernel cache and the disk object cache off for one
// test, so that a program can only come from the package or a compiler.
class NoCaches {
 public:
  NoCaches() : disk_(object_cache()) {
    kernel_cache().clear();
    set_object_cache(nullptr);
  }
  ~NoCaches() { set_object_cache(disk_); }

 private:
  std::shared_ptr<ObjectCache> disk_;
};

TEST(Package, OpenClProgramsTravelAsBinaries) {
  try {
    open_device("CL:0");
  } catch (const Error& e) {
    GTEST_SKIP() << "no OpenCL device: " << e.what();
  }
  const auto expected = plan_outputs(kCrossDevice);
  const auto bytes = pack_plan(kCrossDevice);
  NoCaches no_caches;
  {
    NoCompiling off;
    const uint64_t before = compile_count();
    LoadedPackage package = load_package(std::span<const std::byte>(bytes));
    EXPECT_EQ(compile_count(), before);
    EXPECT_EQ(package.compiled, 0u);
    size_t binaries = 0;
    for (const auto& p : package.manifest.programs) {
      binaries += p.artifact == ArtifactKind("opencl_binary");
      EXPECT_EQ(p.artifact == ArtifactKind("opencl_binary"), p.device == "CL:0") << p.name;
    }
    EXPECT_EQ(binaries, 2u);
    ASSERT_TRUE(package.manifest.devices.contains("CL:0"));
    EXPECT_EQ(package.manifest.devices.at("CL:0").name, "opencl");
    EXPECT_EQ(run_outputs(package.loaded), expected);
    expect_checks_pass(package.loaded);
    EXPECT_EQ(compile_count(), before);
  }

  // A package from another OpenCL device: rebuilt from the packaged source
  // when compiling is allowed, refused naming the program and the device when not.
  const auto foreign = with_manifest(bytes, [](nlohmann::json& m) {
    m["devices"]["CL:0"]["version"] = "OpenCL 9.9 elsewhere; driver 0.1";
    m["devices"]["CL:0"]["target_cpu"] = "foreign-gpu";
  });
  {
    NoCompiling off;
    const Error e = expect_error([&] { load_package(std::span<const std::byte>(foreign)); });
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    const std::string what = e.what();
    EXPECT_NE(what.find("program \"axpb\": the package's \"opencl_binary\" for CL:0 cannot run here"), std::string::npos)
        << what;
    EXPECT_NE(what.find("for \"foreign-gpu\""), std::string::npos) << what;
    EXPECT_NE(what.find("OpenCL 9.9 elsewhere"), std::string::npos) << what;
    EXPECT_NE(what.find("compiling is off"), std::string::npos) << what;
  }
  kernel_cache().clear();
  const uint64_t before = compile_count();
  LoadedPackage package = load_package(std::span<const std::byte>(foreign));
  EXPECT_EQ(package.compiled, 2u);
  EXPECT_EQ(compile_count() - before, 2u);
  EXPECT_EQ(run_outputs(package.loaded), expected);
  expect_checks_pass(package.loaded);
}

// A plan on "CL:local" packs with the name as written (the manifest's device
// entries and the embedded plan), so the package stays portable: each rank
// that loads it resolves the name for its own local rank.
TEST(Package, LocalDeviceNamesArePackedAsWritten) {
  try {
    open_device("CL:0");
  } catch (const Error& e) {
    GTEST_SKIP() << "no OpenCL device: " << e.what();
  }
  TempDir dir;
  const auto plan = dir.write("local.json", test::opencl_all_reduce_plan("CL:local"));
  const auto bytes = pack_plan(plan);
  run_local_ranks(2, [&](Communicator& comm) {
    PackageLoadOptions options;
    options.communicator = borrowed(comm);
    LoadedPackage package = load_package(std::span<const std::byte>(bytes), options);
    EXPECT_EQ(package.file.device, "CL:local");
    ASSERT_EQ(package.manifest.programs.size(), 1u);
    EXPECT_EQ(package.manifest.programs[0].device, "CL:local");
    EXPECT_EQ(package.manifest.programs[0].artifact, ArtifactKind("opencl_binary"));
    EXPECT_TRUE(package.manifest.devices.contains("CL:local"));
    EXPECT_EQ(package.loaded.plan.buffer(*package.loaded.plan.find_buffer("d")).device().name(), "CL:0");
    package.loaded.execute();
    const Buffer& h = package.loaded.plan.buffer(*package.loaded.plan.find_buffer("h"));
    EXPECT_EQ(std::vector<float>(h.span<float>().begin(), h.span<float>().end()), std::vector<float>(64, 3.0f));
  });
}

// A binary the driver refuses (here: damaged bytes under a matching identity)
// falls back to the source like a foreign one.
TEST(Package, RefusedOpenClBinaryFallsBackToSource) {
  try {
    open_device("CL:0");
  } catch (const Error& e) {
    GTEST_SKIP() << "no OpenCL device: " << e.what();
  }
  const auto bytes = pack_plan(kCrossDevice);
  const PackageReader reader(bytes, "original");
  PackageWriter writer;
  for (const auto& s : reader.sections()) {
    if (s.name == program_section("axpb"))
      writer.add(s.name, std::string_view("not an OpenCL program binary"));
    else
      writer.add(s.name, std::vector<std::byte>(s.bytes.begin(), s.bytes.end()));
  }
  const auto damaged = writer.finish();
  NoCaches no_caches;
  {
    NoCompiling off;
    const Error e = expect_error([&] { load_package(std::span<const std::byte>(damaged)); });
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("program \"axpb\": the package's \"opencl_binary\" for CL:0 cannot run here"),
              std::string::npos)
        << e.what();
  }
  LoadedPackage package = load_package(std::span<const std::byte>(damaged));
  EXPECT_EQ(package.compiled, 1u);
  EXPECT_EQ(run_outputs(package.loaded), plan_outputs(kCrossDevice));
}

TEST(Package, ForeignCpuIsRefusedOrRecompiled) {
  const std::string lacking = feature_this_cpu_lacks();
  if (lacking.empty()) GTEST_SKIP() << "this CPU has every feature the check knows";
  const auto bytes = pack_plan(kMlp);
  const auto foreign = with_manifest(bytes, [&](nlohmann::json& m) {
    m["cpu"]["target_cpu"] = "futurecpu";
    m["cpu"]["target_features"].push_back("+" + lacking);
  });
  {
    NoCompiling off;
    const Error e = expect_error([&] { load_package(std::span<const std::byte>(foreign)); });
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("they need " + lacking + ", which this CPU lacks"), std::string::npos) << e.what();
  }
  const uint64_t before = compile_count();
  LoadedPackage package = load_package(std::span<const std::byte>(foreign));
  EXPECT_EQ(package.compiled, 4u);
  EXPECT_LE(compile_count() - before, 4u);  // the object cache may still hold some
  EXPECT_EQ(run_outputs(package.loaded), plan_outputs(kMlp));

  const auto other_arch = with_manifest(bytes, [](nlohmann::json& m) {
    m["cpu"]["target_triple"] = host_arch() == "x86_64" ? "aarch64-unknown-linux-gnu" : "x86_64-pc-linux-gnu";
  });
  NoCompiling off;
  const Error e = expect_error([&] { load_package(std::span<const std::byte>(other_arch)); });
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  EXPECT_NE(std::string(e.what()).find("this machine is " + host_arch()), std::string::npos) << e.what();
}

// Objects for a named CPU family: the manifest records the CPU and the
// features the objects may use (AVX2 and FMA for x86-64-v3, not AVX-512),
// and where this CPU has them they load without compiling and compute what
// this machine's own objects compute, bit for bit (both contract a*b+c into
// FMA). Objects for x86-64-v2, which has no FMA, pass the plan's expectations.
TEST(Package, ObjectsForACpuFamilyRecordItAndRunHere) {
  if (host_arch() != "x86_64") GTEST_SKIP() << "x86-64 families";
  PackOptions v3;
  v3.target_cpu = "x86-64-v3";
  const std::vector<std::byte> bytes = pack_plan(kMlp, v3);
  const PackageManifest m = read_manifest(PackageReader(bytes, "v3").text(kManifestSection), "v3");
  ASSERT_TRUE(m.cpu);
  EXPECT_EQ(m.cpu->target_cpu, "x86-64-v3");
  EXPECT_EQ(m.cpu->name, "clang");
  const auto& features = m.cpu->target_features;
  auto has = [&](const std::string& f) { return std::find(features.begin(), features.end(), f) != features.end(); };
  EXPECT_TRUE(has("+avx2") && has("+fma") && has("+bmi2")) << fmt::format("{}", fmt::join(features, ","));
  EXPECT_FALSE(has("+avx512f")) << fmt::format("{}", fmt::join(features, ","));
  EXPECT_NE(std::find(m.cpu->flags.begin(), m.cpu->flags.end(), "-march=x86-64-v3"), m.cpu->flags.end());
  for (const auto& p : m.programs) EXPECT_EQ(p.artifact, ArtifactKind::ElfObject) << p.name;
  if (!missing_cpu_features(features).empty()) GTEST_SKIP() << "this CPU is not x86-64-v3";

  LoadedPackage package = load_package(std::span<const std::byte>(bytes), {.on_cpu_mismatch = CpuMismatch::Refuse});
  EXPECT_EQ(package.compiled, 0u);
  EXPECT_EQ(run_outputs(package.loaded), plan_outputs(kMlp));

  PackOptions v2;
  v2.target_cpu = "x86-64-v2";
  const std::vector<std::byte> v2_bytes = pack_plan(kMlp, v2);
  LoadedPackage v2_package = load_package(std::span<const std::byte>(v2_bytes));
  EXPECT_EQ(v2_package.manifest.cpu->target_cpu, "x86-64-v2");
  EXPECT_EQ(v2_package.compiled, 0u);
  run_outputs(v2_package.loaded);
  expect_checks_pass(v2_package.loaded);
}

// Objects really built for a CPU with features this one lacks (Sapphire
// Rapids' AMX and AVX512-FP16 on most machines): refused naming every
// feature this CPU lacks, or compiled from the packaged sources (the
// default), giving what this machine's own objects give. A plan in memory
// packs for another CPU the same way.
TEST(Package, ObjectsForAnotherCpuAreRefusedOrRecompiled) {
  if (host_arch() != "x86_64") GTEST_SKIP() << "an x86-64 CPU name";
  PackOptions spr;
  spr.target_cpu = "sapphirerapids";
  const std::vector<std::byte> bytes = pack_plan(kMlp, spr);
  const PackageManifest m = read_manifest(PackageReader(bytes, "spr").text(kManifestSection), "spr");
  ASSERT_TRUE(m.cpu);
  EXPECT_EQ(m.cpu->target_cpu, "sapphirerapids");
  const std::vector<std::string> lacking = missing_cpu_features(m.cpu->target_features);
  if (lacking.empty()) GTEST_SKIP() << "this CPU has every feature of sapphirerapids that svod checks";

  const Error e = expect_error(
      [&] { load_package(std::span<const std::byte>(bytes), {.on_cpu_mismatch = CpuMismatch::Refuse}); });
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  const std::string said = e.what();
  EXPECT_NE(said.find(fmt::format("they need {}, which this CPU lacks", fmt::join(lacking, ", "))), std::string::npos)
      << said;
  EXPECT_NE(said.find("sapphirerapids"), std::string::npos) << said;
  EXPECT_NE(said.find("refuse"), std::string::npos) << said;

  LoadedPackage package = load_package(std::span<const std::byte>(bytes));
  EXPECT_EQ(package.compiled, 4u);
  EXPECT_EQ(run_outputs(package.loaded), plan_outputs(kMlp));

  LoadedPlan original = load_plan(parse_plan_file(kMlp));
  const std::vector<std::byte> from_memory = pack_plan(original.plan, SaveOptions{}, spr);
  const Error again = expect_error(
      [&] { load_package(std::span<const std::byte>(from_memory), {.on_cpu_mismatch = CpuMismatch::Refuse}); });
  EXPECT_EQ(again.kind(), ErrorKind::Unsupported);
}

// A package of sources only holds no object and no CPU record; it compiles
// wherever it loads (the refusing policy concerns objects, so it loads
// too) and computes what the plan computes. (Under SVOD_COMPILE=0 it is
// refused: SvodPack.PackagesForAnotherCpuAndSourcesOnly, in a fresh process
// whose kernel cache is empty.)
TEST(Package, SourcesOnlyCompilesWhereItLoads) {
  PackOptions options;
  options.sources_only = true;
  const std::vector<std::byte> bytes = pack_plan(kMlp, options);
  const PackageReader reader(bytes, "sources");
  const PackageManifest m = read_manifest(reader.text(kManifestSection), "sources");
  EXPECT_FALSE(m.cpu);
  for (const auto& p : m.programs) {
    EXPECT_FALSE(p.artifact) << p.name;
    EXPECT_EQ(reader.find(program_section(p.name)), nullptr) << p.name;
  }
  LoadedPackage package = load_package(std::span<const std::byte>(bytes), {.on_cpu_mismatch = CpuMismatch::Refuse});
  EXPECT_EQ(package.compiled, 4u);
  EXPECT_EQ(run_outputs(package.loaded), plan_outputs(kMlp));
}

TEST(Package, ATargetCpuClangDoesNotKnowIsRefusedNamingIt) {
  PackOptions options;
  options.target_cpu = "notacpu";
  const Error e = expect_error([&] { pack_plan(kMlp, options); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(std::string(e.what()).find("target CPU \"notacpu\""), std::string::npos) << e.what();
  if (host_arch() == "x86_64") EXPECT_NE(std::string(e.what()).find("x86-64-v3"), std::string::npos) << e.what();
  options.target_cpu = "-O0";
  EXPECT_EQ(kind_of([&] { pack_plan(kMlp, options); }), ErrorKind::Validation);
  EXPECT_EQ(parse_cpu_mismatch("refuse"), CpuMismatch::Refuse);
  EXPECT_EQ(kind_of([] { parse_cpu_mismatch("sometimes"); }), ErrorKind::Validation);
}

// The generic path every device's binaries take: a program packaged as a
// binary whose compiler the loading device refuses (here a cubin on the CPU)
// is rebuilt from its source, or refused naming the program, the artifact
// and the device's reason when compiling is off.
TEST(Package, BinariesTheDeviceRefusesFallBackToSource) {
  const auto bytes = pack_plan(kMlp);
  const auto cubin = with_manifest(bytes, [](nlohmann::json& m) {
    const std::string device = m["programs"][0]["device"];
    m["programs"][0]["artifact"] = "cubin";
    m["devices"][device] = m["cpu"];
    m["devices"][device]["backend"] = "nvrtc";
    m["devices"][device]["target_triple"] = "nvptx64-nvidia-cuda";
    m["devices"][device]["target_cpu"] = "sm_90";
  });
  const std::string first = nlohmann::json::parse(
      PackageReader(bytes, "original").text(kManifestSection))["programs"][0]["name"];
  {
    NoCompiling off;
    const Error e = expect_error([&] { load_package(std::span<const std::byte>(cubin)); });
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("program \"" + first + "\": the package's \"cubin\" for CPU cannot run here"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("nvptx64-nvidia-cuda"), std::string::npos) << e.what();
  }
  LoadedPackage package = load_package(std::span<const std::byte>(cubin));
  EXPECT_EQ(package.compiled, 1u);
  EXPECT_EQ(run_outputs(package.loaded), plan_outputs(kMlp));
}

// A small package of three sections for the damage tests.
std::vector<std::byte> small_package() {
  PackageWriter writer;
  writer.add("a", std::string_view("first section"));
  writer.add("b", std::vector<std::byte>{});
  writer.add("c", std::string(100, 'x'));
  return writer.finish();
}

TEST(PackageFormat, RoundTripsSectionsAligned) {
  const auto bytes = small_package();
  const PackageReader reader(bytes, "small");
  ASSERT_EQ(reader.sections().size(), 3u);
  EXPECT_EQ(reader.text("a"), "first section");
  EXPECT_TRUE(reader.get("b").bytes.empty());
  EXPECT_EQ(reader.text("c"), std::string(100, 'x'));
  for (const auto& s : reader.sections()) EXPECT_EQ(s.offset % kPackageAlignment, 0u) << s.name;
  const Error e = expect_error([&] { reader.get("d"); });
  EXPECT_EQ(e.kind(), ErrorKind::Load);
  EXPECT_EQ(expect_error([] { PackageWriter w; w.add("a", "x"); w.add("a", "y"); }).kind(), ErrorKind::Validation);
  EXPECT_EQ(expect_error([] { PackageWriter().add(std::string(200, 'n'), "x"); }).kind(), ErrorKind::Validation);
}

TEST(PackageFormat, EveryTruncationIsRefused) {
  const auto bytes = small_package();
  for (size_t n = 0; n < bytes.size(); ++n) {
    const Error e = expect_error([&] { PackageReader(std::span(bytes).first(n), "cut"); });
    EXPECT_TRUE(e.kind() == ErrorKind::Load || (n < 8 && e.kind() == ErrorKind::Validation)) << n << ": " << e.what();
  }
}

TEST(PackageFormat, EveryFlippedByteIsRefusedNamingThePart) {
  const auto bytes = small_package();
  const PackageReader good(bytes, "good");
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto bad = bytes;
    bad[i] ^= std::byte{0x20};
    const Error e = expect_error([&] { PackageReader(bad, "bad"); });
    const std::string message = e.what();
    if (i < 8) {
      EXPECT_EQ(e.kind(), ErrorKind::Validation) << i;
      continue;
    }
    EXPECT_EQ(e.kind(), ErrorKind::Load) << i << ": " << message;
    // The message names the part at fault: the header, the table or the section holding the byte.
    std::string part = i < 64 ? "header" : i < 64 + 128 * good.sections().size() ? "section table" : "";
    for (size_t s = 0; s < good.sections().size() && part.empty(); ++s) {
      const auto& sec = good.sections()[s];
      if (i < sec.offset + sec.bytes.size()) part = fmt::format("section {} (\"{}\")", s, sec.name);
    }
    EXPECT_NE(message.find(part), std::string::npos) << i << ": " << message;
  }
}

TEST(PackageFormat, WrongVersionAndMagic) {
  auto bytes = small_package();
  // A newer format version, with a header digest that matches it: refused for the version.
  const uint32_t version = kPackageFormatVersion + 1;
  std::memcpy(bytes.data() + 8, &version, 4);
  const Hash128 digest = hash_bytes(std::span(bytes).first(48));
  std::memcpy(bytes.data() + 48, &digest.low, 8);
  std::memcpy(bytes.data() + 56, &digest.high, 8);
  Error e = expect_error([&] { PackageReader(bytes, "v3"); });
  EXPECT_EQ(e.kind(), ErrorKind::Load);
  EXPECT_NE(std::string(e.what()).find(fmt::format("format version {}, written by a newer svod", version)),
            std::string::npos)
      << e.what();

  const std::string json = R"({"svod_plan": 1})";
  e = expect_error([&] { PackageReader(std::as_bytes(std::span(json)), "plan.json"); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_NE(std::string(e.what()).find("not an svod package"), std::string::npos) << e.what();
}

TEST(PackageFormat, DamagedMlpPackagesNameTheSection) {
  const auto bytes = pack_plan(kMlp);
  const PackageReader reader(bytes, "mlp");
  for (size_t s = 0; s < reader.sections().size(); ++s) {
    const auto& sec = reader.sections()[s];
    if (sec.bytes.empty()) continue;
    auto bad = bytes;
    bad[sec.offset + sec.bytes.size() / 2] ^= std::byte{1};
    const Error e = expect_error([&] { load_package(std::span<const std::byte>(bad)); });
    EXPECT_EQ(e.kind(), ErrorKind::Load);
    EXPECT_NE(std::string(e.what()).find(fmt::format("\"{}\"", sec.name)), std::string::npos) << e.what();
  }
  const Error cut = expect_error([&] { load_package(std::span(bytes).first(bytes.size() - 1)); });
  EXPECT_EQ(cut.kind(), ErrorKind::Load);
  EXPECT_NE(std::string(cut.what()).find("truncated"), std::string::npos) << cut.what();
}

TEST(PackageFormat, MalformedManifestsAreLoadErrors) {
  const auto bytes = pack_plan(kMlp);
  const auto no_programs = with_manifest(bytes, [](nlohmann::json& m) { m.erase("programs"); });
  Error e = expect_error([&] { load_package(std::span<const std::byte>(no_programs)); });
  EXPECT_EQ(e.kind(), ErrorKind::Load);
  EXPECT_NE(std::string(e.what()).find("programs: missing"), std::string::npos) << e.what();
  const auto bad_kind = with_manifest(bytes, [](nlohmann::json& m) { m["programs"][0]["artifact"] = "wasm"; });
  e = expect_error([&] { load_package(std::span<const std::byte>(bad_kind)); });
  EXPECT_EQ(e.kind(), ErrorKind::Load);
  EXPECT_NE(std::string(e.what()).find("programs[0].artifact"), std::string::npos) << e.what();
  const auto unkeyed = with_manifest(bytes, [](nlohmann::json& m) { m["programs"][1]["artifact"] = "opencl_binary"; });
  e = expect_error([&] { load_package(std::span<const std::byte>(unkeyed)); });
  EXPECT_EQ(e.kind(), ErrorKind::Load);
  EXPECT_NE(std::string(e.what()).find("programs[1].artifact: \"opencl_binary\" for CPU, but the manifest records no "
                                       "compiler for that device"),
            std::string::npos)
      << e.what();
  const auto bad_identity = with_manifest(bytes, [](nlohmann::json& m) { m["opencl"]["CL:0"] = {{"backend", 1}}; });
  e = expect_error([&] { load_package(std::span<const std::byte>(bad_identity)); });
  EXPECT_EQ(e.kind(), ErrorKind::Load);
  EXPECT_NE(std::string(e.what()).find("opencl.CL:0.backend: expected string"), std::string::npos) << e.what();
}

// Every artifact kind a device makes is recorded by its name and comes back
// as the same kind; identities of device binaries are kept by device name,
// and manifests written before CUDA binaries were packed ("opencl") still read.
TEST(PackageFormat, DeviceBinariesOfEveryKindRoundTrip) {

  PackageManifest m;
  m.svod_version = "test";
  m.plan_name = "plan.json";
  CompilerIdentity nvrtc;
  nvrtc.name = "nvrtc";
  nvrtc.target_triple = "nvptx64-nvidia-cuda";
  nvrtc.target_cpu = "sm_90";
  CompilerIdentity opencl;
  opencl.name = "opencl";
  opencl.target_cpu = "some-gpu";
  m.devices = {{"CUDA:0", nvrtc}, {"CUDA:1", nvrtc}, {"CL:0", opencl}};
  m.programs = {{"a", "CUDA:0", ArtifactKind("cubin")},
                {"b", "CUDA:1", ArtifactKind("ptx")},
                {"c", "CL:0", ArtifactKind("opencl_binary")},
                {"d", "CL:0", std::nullopt}};
  const std::string text = write_manifest(m);
  EXPECT_NE(text.find("\"cubin\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"ptx\""), std::string::npos) << text;
  const PackageManifest back = read_manifest(text, "test");
  ASSERT_EQ(back.programs.size(), 4u);
  EXPECT_EQ(back.programs[0].artifact, ArtifactKind("cubin"));
  EXPECT_EQ(back.programs[1].artifact, ArtifactKind("ptx"));
  EXPECT_EQ(back.programs[2].artifact, ArtifactKind("opencl_binary"));
  EXPECT_EQ(back.programs[3].artifact, std::nullopt);
  EXPECT_NE(text.find("\"source\""), std::string::npos) << text;
  ASSERT_EQ(back.devices.size(), 3u);
  EXPECT_EQ(back.devices.at("CUDA:1").target_cpu, "sm_90");
  EXPECT_EQ(back.devices.at("CL:0").target_cpu, "some-gpu");

  auto old = nlohmann::json::parse(text);
  old["opencl"] = old["devices"];
  old.erase("devices");
  EXPECT_EQ(read_manifest(old.dump(), "old").devices.at("CUDA:0").name, "nvrtc");

  auto missing = nlohmann::json::parse(text);
  missing["devices"].erase("CUDA:1");
  try {
    read_manifest(missing.dump(), "test");
    ADD_FAILURE() << "a ptx program without its compiler was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Load);
    EXPECT_NE(std::string(e.what()).find("programs[1].artifact: \"ptx\" for CUDA:1, but the manifest records no "
                                         "compiler for that device"),
              std::string::npos)
        << e.what();
  }

  // A kind of a device this build does not have reads (the device it names
  // refuses it when loading); a malformed one does not.
  auto foreign = nlohmann::json::parse(text);
  foreign["programs"][0]["artifact"] = "metal_lib";
  EXPECT_EQ(read_manifest(foreign.dump(), "test").programs[0].artifact, ArtifactKind("metal_lib"));
  foreign["programs"][0]["artifact"] = "Metal Lib";
  try {
    read_manifest(foreign.dump(), "test");
    ADD_FAILURE() << "a malformed artifact kind was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Load);
    EXPECT_NE(std::string(e.what()).find("programs[0].artifact: \"Metal Lib\" is no artifact kind"),
              std::string::npos)
        << e.what();
  }
}

// Rebuilds `bytes` with section `name` holding `text` (every other section kept).
std::vector<std::byte> with_section(std::span<const std::byte> bytes, std::string_view name, std::string_view text) {
  const PackageReader reader(bytes, "original");
  PackageWriter writer;
  for (const auto& s : reader.sections()) {
    if (s.name == name) writer.add(s.name, text);
    else writer.add(s.name, std::vector<std::byte>(s.bytes.begin(), s.bytes.end()));
  }
  return writer.finish();
}

// JSON nested 100,000 deep (which once overflowed the stack) is refused
// before parsing, naming the package and the section: the manifest as
// Error(Load), like any malformed manifest; the plan as Error(Validation),
// like any malformed plan. Packing a plan file nested too deep is refused
// with the plan file's error.
TEST(PackageFormat, JsonNestedTooDeepIsRefusedNamingTheSection) {
  TempDir dir;
  const auto plan = dir.write("plan.json", R"({"svod_plan": 1,
    "buffers": {"x": {"dtype": "f32", "count": 4}},
    "ops": [{"custom": "fill", "buffers": ["x"], "attrs": {"value": 0.5}}],
    "outputs": {"x": {"expect": {"values": [0.5, 0.5, 0.5, 0.5]}}}})");
  const auto bytes = pack_plan(plan);
  const std::string limit = "JSON nesting exceeds the limit of 256 levels";

  Error e = expect_error([&] { read_manifest("{\"format\": " + test::nested_arrays(100000) + "}", "m.svodpkg"); });
  EXPECT_EQ(e.kind(), ErrorKind::Load);
  EXPECT_EQ(std::string(e.what()), "m.svodpkg: section \"manifest\": " + limit + " (line 1, column 267)");

  const auto deep_manifest =
      with_section(bytes, kManifestSection, "{\"format\": 1,\n \"cpu\": " + test::nested_objects(100000) + "}");
  e = expect_error([&] { load_package(std::span<const std::byte>(deep_manifest)); });
  EXPECT_EQ(e.kind(), ErrorKind::Load);
  EXPECT_EQ(std::string(e.what()), "package in memory: section \"manifest\": " + limit + " (line 2, column 1284)");

  const auto deep_plan = with_section(bytes, kPlanSection, "{\"svod_plan\": " + test::nested_arrays(100000) + "}");
  e = expect_error([&] { load_package(std::span<const std::byte>(deep_plan)); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_EQ(std::string(e.what()), "package in memory: section \"plan\": " + limit + " (line 1, column 270)");
  const auto path = dir / "deep.svodpkg";
  write_package(path, deep_plan);
  e = expect_error([&] { load_package(path); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_EQ(std::string(e.what()), path.string() + ": section \"plan\": " + limit + " (line 1, column 270)");

  const auto deep_file = dir.write("deep.json", "{\"svod_plan\": " + test::nested_objects(100000) + "}");
  e = expect_error([&] { pack_plan(deep_file); });
  EXPECT_EQ(e.kind(), ErrorKind::Validation);
  EXPECT_EQ(std::string(e.what()), deep_file.string() + ": " + limit + " (line 1, column 1290)");

  // Up to the limit the manifest goes on to its field checks; the package
  // itself still loads and runs.
  const auto at_limit = with_manifest(bytes, [](nlohmann::json& m) {
    nlohmann::json v = nlohmann::json::array();
    for (int i = 1; i < 255; ++i) v = nlohmann::json::array({std::move(v)});
    m["buffers"] = std::move(v);  // 1 + 255 levels
  });
  e = expect_error([&] { load_package(std::span<const std::byte>(at_limit)); });
  EXPECT_EQ(e.kind(), ErrorKind::Load);
  EXPECT_EQ(std::string(e.what()).find(limit), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("buffers"), std::string::npos) << e.what();
  LoadedPackage package = load_package(std::span<const std::byte>(bytes));
  EXPECT_EQ(run_outputs(package.loaded), plan_outputs(plan));
}

TEST(PackageFormat, MissingFileIsAnIoError) {
  const Error e = expect_error([] { load_package(std::filesystem::path("/nonexistent/model.svodpkg")); });
  EXPECT_EQ(e.kind(), ErrorKind::Io);
}

// Mapping or reading a FIFO would wait for a writer forever: a package path
// (or the plan to pack) that names one, or a folder, is refused at once.
TEST(PackageFormat, AFifoOrAFolderIsRefusedWithoutWaiting) {
  TempDir dir;
  test::Watchdog watchdog("refusing a FIFO package", std::chrono::seconds(20));
  const auto fifo = dir / "model.svodpkg";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const Error e = expect_error([&] { load_package(fifo); });
  EXPECT_EQ(e.kind(), ErrorKind::Io);
  EXPECT_EQ(std::string(e.what()), fifo.string() + ": the package is a FIFO, not a regular file");
  EXPECT_FALSE(is_package_file(fifo));

  std::filesystem::create_directory(dir / "folder.svodpkg");
  const Error folder = expect_error([&] { load_package(dir / "folder.svodpkg"); });
  EXPECT_EQ(folder.kind(), ErrorKind::Io);
  EXPECT_NE(std::string(folder.what()).find("folder.svodpkg: the package is a directory, not a regular file"),
            std::string::npos)
      << folder.what();
  EXPECT_FALSE(is_package_file(dir / "folder.svodpkg"));
  EXPECT_FALSE(is_package_file(dir / "absent.svodpkg"));

  ASSERT_EQ(::mkfifo((dir / "plan.json").c_str(), 0644), 0);
  const Error plan = expect_error([&] { pack_plan(dir / "plan.json"); });
  EXPECT_EQ(plan.kind(), ErrorKind::Io);
  EXPECT_NE(std::string(plan.what()).find("plan.json: the plan file is a FIFO, not a regular file"), std::string::npos)
      << plan.what();
}

TEST(PackageFormat, IsPackageFileReadsTheMagic) {
  TempDir dir;
  const auto bytes = pack_plan(dir.write("plan.json", R"({"svod_plan": 1,
    "buffers": {"x": {"dtype": "f32", "count": 4}},
    "ops": [{"custom": "fill", "buffers": ["x"], "attrs": {"value": 0.5}}]})"));
  write_package(dir / "p.svodpkg", bytes);
  EXPECT_TRUE(is_package_file(dir / "p.svodpkg"));
  EXPECT_FALSE(is_package_file(dir / "plan.json"));
  EXPECT_FALSE(is_package_file(dir.write("short", "SVOD")));
}

}  // namespace
}  // namespace svod
