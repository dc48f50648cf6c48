// A device is its folder plus one registry line: the test-only NULL device
// (null_device.cpp) brings a language ("nullc") and an artifact kind
// ("null_object") of its own, and plan files, the object cache and packages
// take them with no edit of theirs. The files that made NULL are
// tests/device/null_device.h and null_device.cpp (its register_kind line
// included), and its conformance kernels, null_conformance_kernels.cpp; the
// last test checks that no code of svod's names either.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "svod/cache/object_cache.h"
#include "svod/device/kernel_cache.h"
#include "svod/package/package.h"
#include "svod/planfile/plan_file.h"
#include "svod/registry/registry.h"
#include "tests/device/null_device.h"
#include "tests/support/temp_dir.h"

namespace svod {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

// y = 3x + 1 on NULL in its own language, then copied to the CPU.
constexpr const char* kPlan = R"({
  "svod_plan": 1,
  "device": "NULL",
  "buffers": {
    "x": { "dtype": "f32", "count": 16, "init": { "arange": { "start": 0, "step": 1 } } },
    "y": { "dtype": "f32", "count": 16 },
    "out": { "dtype": "f32", "count": 16, "device": "CPU" }
  },
  "programs": {
    "axpb": {
      "language": "nullc", "entry": "axpb",
      "source": "void axpb(float* restrict y, const float* restrict x, int n) { for (int i = 0; i < n; i++) y[i] = 3 * x[i] + 1; }",
      "buffers": [ { "name": "y", "access": "write" }, { "name": "x" } ],
      "scalars": [ { "name": "n", "type": "i32" } ]
    }
  },
  "ops": [
    { "run": "axpb", "buffers": ["y", "x"], "scalars": { "n": 16 } },
    { "copy": { "dst": "out", "src": "y" } }
  ],
  "outputs": { "out": { "expect": { "values": [1, 4, 7, 10], "prefix": true } } }
})";

std::vector<float> run_out(LoadedPlan& loaded) {
  loaded.execute();
  const Buffer& out = loaded.plan.buffer(*loaded.plan.find_buffer("out"));
  const auto values = out.span<float>();
  return {values.begin(), values.end()};
}

std::vector<float> expected_out() {
  std::vector<float> y(16);
  for (size_t i = 0; i < y.size(); ++i) y[i] = 3.0f * static_cast<float>(i) + 1;
  return y;
}

// The process's object cache in a folder of the test's own while it lives.
class OwnObjectCache {
 public:
  OwnObjectCache()
      : previous_(object_cache()),
        cache_(std::make_shared<ObjectCache>(ObjectCacheConfig{dir_.path(), ObjectCacheConfig::kDefaultMaxBytes})) {
    set_object_cache(cache_);
  }
  ~OwnObjectCache() { set_object_cache(previous_); }
  ObjectCache& cache() { return *cache_; }
  const fs::path& path() const { return dir_.path(); }

 private:
  TempDir dir_;
  std::shared_ptr<ObjectCache> previous_;
  std::shared_ptr<ObjectCache> cache_;
};

ProgramSpec null_program(const std::string& tag) {
  ProgramSpec spec;
  spec.language = kNullLanguage;
  spec.entry = "k";
  spec.source = "/* " + tag + " */ void k(float* o) { o[0] = 5; }";
  spec.buffers = {BufferParam{"o", Access::Write, std::nullopt, std::nullopt}};
  return spec;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(NullDeviceOwnKinds, ItsLanguageIsAPlanLanguageAndOthersAreRefusedByName) {
  TempDir dir;
  LoadedPlan loaded = load_plan(parse_plan_text(kPlan, dir.path(), "null.json"));
  EXPECT_EQ(run_out(loaded), expected_out());

  // A language NULL does not run is refused by NULL, naming the ones it does.
  std::string other = kPlan;
  other.replace(other.find("\"nullc\""), 7, "\"cuda\"");
  try {
    load_plan(parse_plan_text(other, dir.path(), "null.json"));
    ADD_FAILURE() << "a cuda program loaded on NULL";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("programs.axpb.language: cuda programs cannot run on the NULL:0 device"),
              std::string::npos)
        << e.what();
  }
}

TEST(NullDeviceOwnKinds, TheObjectCacheStoresAndReturnsItsArtifactKind) {
  OwnObjectCache own;
  std::shared_ptr<Device> device = open_device("NULL");
  const ProgramSpec spec = null_program(std::to_string(::getpid()) + " cache");

  std::optional<ArtifactKind> made;
  detail::take_build_source();
  made = load_or_compile(*device, spec)->artifact()->artifact.kind;
  EXPECT_EQ(detail::take_build_source(), detail::BuildSource::Compiled);
  EXPECT_EQ(made, kNullObject);
  size_t entries = 0;
  for (const auto& entry : fs::directory_iterator(own.path())) {
    if (entry.path().extension() != ".svo") continue;
    ++entries;
    EXPECT_NE(read_bytes(entry.path()).find("null_object"), std::string::npos) << entry.path();
  }
  EXPECT_EQ(entries, 1u);

  // A second build loads the stored entry (NULL's load refuses any other kind).
  made.reset();
  auto program = load_or_compile(*device, spec);
  made = program->artifact()->artifact.kind;
  EXPECT_EQ(detail::take_build_source(), detail::BuildSource::DiskCache);
  EXPECT_EQ(made, kNullObject);
  Buffer o = device->allocate(DType::F32, 1);
  const Buffer args[] = {o};
  program->launch(args, {}, nullptr);
  EXPECT_EQ(o.span<float>()[0], 5.0f);
}

TEST(NullDeviceOwnKinds, APackageCarriesItsBinaryAndLoadsItWithoutCompiling) {
  OwnObjectCache own;  // so that packing compiles, and loading could only compile afresh
  TempDir dir;
  const fs::path plan = dir.write("null.json", kPlan);
  const std::vector<std::byte> bytes = pack_plan(plan);

  LoadedPackage package = load_package(std::span<const std::byte>(bytes));
  ASSERT_EQ(package.manifest.programs.size(), 1u);
  EXPECT_EQ(package.manifest.programs[0].artifact, kNullObject);
  EXPECT_EQ(package.manifest.programs[0].device, "NULL");
  ASSERT_TRUE(package.manifest.devices.contains("NULL"));
  EXPECT_EQ(package.manifest.devices.at("NULL").name, "null");
  EXPECT_FALSE(package.manifest.cpu);
  EXPECT_EQ(package.compiled, 0u);
  EXPECT_EQ(run_out(package.loaded), expected_out());
}

// What adding NULL's language and artifact kind touched: no file of svod's
// code names either, so plan files, caches, packages, the CLI and Python took
// them as they are.
TEST(NullDeviceOwnKinds, NoCodeOfSvodsNamesNullsLanguageOrArtifactKind) {
  const std::string names[] = {'"' + std::string(kNullLanguage.name()) + '"', std::string(kNullObject.name())};
  std::vector<std::string> naming;
  size_t files = 0;
  for (const char* folder : {"svod", "tools", "python", "bench"}) {
    for (const auto& entry : fs::recursive_directory_iterator(fs::path(SVOD_SOURCE_DIR) / folder)) {
      if (!entry.is_regular_file()) continue;
      ++files;
      const std::string text = read_bytes(entry.path());
      for (const auto& name : names)
        if (text.find(name) != std::string::npos) naming.push_back(entry.path().string() + " names " + name);
    }
  }
  EXPECT_GT(files, 100u);
  EXPECT_EQ(naming, std::vector<std::string>{});
}

}  // namespace
}  // namespace svod
