// The in-process C compiler keeps a source's precompiled preamble (its
// leading #include lines) in the object cache, where later processes read it
// instead of parsing the headers: each `svod run` below is a new process with
// a kernel that is new to the cache and the same preamble.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "svod/base/subprocess.h"
#include "svod/cache/object_cache.h"
#include "tests/support/cpu_compilers_built.h"
#include "tests/cache/cache_test_support.h"

namespace svod {
namespace {

namespace fs = std::filesystem;

class PreambleCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SVOD_REQUIRE_LLVM_PLUGIN();
    if (!fs::exists(cli_)) GTEST_SKIP() << "the svod tool is not built (target svod_cli)";
    set_scale("2.0f");
  }

  void set_scale(const std::string& value) { std::ofstream(header_) << "#define SCALE " << value << "\n"; }

  // `svod run` of a plan whose kernel includes <math.h> and the header
  // (SCALE * 4, made new by `variant`), with SVOD_DEBUG's lines on stderr.
  ProcessResult run(int variant, const std::string& defines = "{}") {
    const fs::path plan = dir_.path() / "plan.json";
    std::ofstream(plan) << R"({ "svod_plan": 1, "buffers": { "o": { "dtype": "f32", "count": 1 } },
      "programs": { "k": { "language": "c", "entry": "k", "defines": )" << defines << R"(,
        "source": "#include <math.h>\n#include \")"
                        << header_.string() << R"(\"\nvoid k(float* o) { o[0] = SCALE * sqrtf(16.0f) + )" << variant
                        << R"( * 0.0f; }\n", "buffers": [ { "name": "o", "access": "write" } ] } },
      "ops": [ { "run": "k", "buffers": ["o"] } ], "outputs": { "o": {} } })";
    return run_process({cli_.string(), "run", plan.string(), "--cpu-compiler", "llvm"}, "", std::chrono::minutes(2));
  }

  // The object cache's one preamble entry.
  std::pair<Hash128, Artifact> stored_preamble() {
    ObjectCache cache({cache_dir_, ObjectCacheConfig::kDefaultMaxBytes});
    std::optional<std::pair<Hash128, Artifact>> found;
    for (const auto& file : fs::directory_iterator(cache_dir_)) {
      if (file.path().extension() != ".svo") continue;
      const std::optional<Hash128> key = Hash128::from_hex(file.path().stem().string());
      if (!key) continue;
      std::optional<Artifact> artifact = cache.get(*key);
      if (!artifact || artifact->kind != ArtifactKind::Preamble) continue;
      EXPECT_FALSE(found) << "two preambles in the cache";
      found.emplace(*key, std::move(*artifact));
    }
    if (!found) ADD_FAILURE() << "no preamble in the cache";
    return found.value_or(std::pair<Hash128, Artifact>{});
  }

  test::TempDir dir_;
  const fs::path cache_dir_ = dir_.path() / "cache";
  const fs::path header_ = dir_.path() / "scale.h";
  const fs::path cli_ = fs::path(SVOD_BINARY_DIR) / "svod";
  test::ScopedEnv cache_env_{"SVOD_CACHE_DIR", cache_dir_.string()};
  test::ScopedEnv debug_env_{"SVOD_DEBUG", "1"};
  test::ScopedEnv cache_on_{"SVOD_CACHE", "1"};
};

bool says(const ProcessResult& r, const std::string& what) { return r.err.find(what) != std::string::npos; }

TEST_F(PreambleCacheTest, ALaterProcessReadsItAndAChangedHeaderIsReadAgain) {
  ProcessResult r = run(1);
  ASSERT_TRUE(r.ok()) << r.err;
  EXPECT_NE(r.out.find("o: f32 [1] [8]"), std::string::npos) << r.out;
  EXPECT_TRUE(says(r, "preamble of k: precompiled, kept in the object cache")) << r.err;
  stored_preamble();

  r = run(2);
  ASSERT_TRUE(r.ok()) << r.err;
  EXPECT_NE(r.out.find("o: f32 [1] [8]"), std::string::npos) << r.out;
  EXPECT_TRUE(says(r, "preamble of k: read from the object cache")) << r.err;

  // A header of the preamble changed (its size too: a file's time may not
  // tick within the test): the stored one is stale and goes.
  set_scale("3.00f");
  r = run(3);
  ASSERT_TRUE(r.ok()) << r.err;
  EXPECT_NE(r.out.find("o: f32 [1] [12]"), std::string::npos) << r.out;
  EXPECT_TRUE(says(r, "made from headers that changed since in the object cache, removed")) << r.err;
  EXPECT_TRUE(says(r, "preamble of k: precompiled, kept in the object cache")) << r.err;
  r = run(4);
  ASSERT_TRUE(r.ok()) << r.err;
  EXPECT_NE(r.out.find("o: f32 [1] [12]"), std::string::npos) << r.out;
  EXPECT_TRUE(says(r, "preamble of k: read from the object cache")) << r.err;
}

// A stored preamble whose precompiled header is damaged (the entry itself
// intact, as from a clang that wrote something else) fails the compile that
// reads it; the compile runs again without it and the entry goes.
TEST_F(PreambleCacheTest, ADamagedPrecompiledHeaderIsCompiledWithoutAndRemoved) {
  ASSERT_TRUE(run(1).ok());
  auto [key, artifact] = stored_preamble();
  ASSERT_GT(artifact.bytes.size(), 4096u);
  // The header list stays readable; the PCH after it keeps its first bytes only.
  artifact.bytes.resize(artifact.bytes.size() / 2);
  ObjectCache({cache_dir_, ObjectCacheConfig::kDefaultMaxBytes}).put(key, artifact);

  ProcessResult r = run(2);
  ASSERT_TRUE(r.ok()) << r.err;
  EXPECT_NE(r.out.find("o: f32 [1] [8]"), std::string::npos) << r.out;
  EXPECT_TRUE(says(r, "preamble of k: read from the object cache")) << r.err;
  EXPECT_TRUE(says(r, "the compile failed with it and succeeded without; not used again")) << r.err;
  EXPECT_FALSE(ObjectCache({cache_dir_, ObjectCacheConfig::kDefaultMaxBytes}).get(key));

  r = run(3);
  ASSERT_TRUE(r.ok()) << r.err;
  EXPECT_TRUE(says(r, "preamble of k: precompiled, kept in the object cache")) << r.err;

  // Bytes that are not a stored preamble at all read as none.
  ObjectCache({cache_dir_, ObjectCacheConfig::kDefaultMaxBytes})
      .put(stored_preamble().first, Artifact{.kind = ArtifactKind::Preamble, .bytes = {std::byte{9}}, .phases = {}, .diagnostics = {}});
  r = run(4);
  ASSERT_TRUE(r.ok()) << r.err;
  EXPECT_TRUE(says(r, "preamble of k: unreadable in the object cache, removed")) << r.err;
  EXPECT_NE(r.out.find("o: f32 [1] [8]"), std::string::npos) << r.out;
}

// Sources with defines (a tuner's candidates, each with its own) are
// precompiled only once seen twice in a process, as without the cache: a
// process's first compile of one does not pay for it. Nor is anything kept
// with the cache off.
TEST_F(PreambleCacheTest, NotForSourcesWithDefinesOrWithTheCacheOff) {
  ProcessResult r = run(1, R"({ "UNUSED": 1 })");
  ASSERT_TRUE(r.ok()) << r.err;
  EXPECT_NE(r.out.find("o: f32 [1] [8]"), std::string::npos) << r.out;
  EXPECT_FALSE(says(r, "preamble of k")) << r.err;

  test::ScopedEnv off("SVOD_CACHE", "0");
  fs::remove_all(cache_dir_);
  r = run(2);
  ASSERT_TRUE(r.ok()) << r.err;
  EXPECT_FALSE(says(r, "preamble of k")) << r.err;
  EXPECT_FALSE(fs::exists(cache_dir_));
}

}  // namespace
}  // namespace svod
