// ObjectCache: entry format and damage, identity-sensitive keys, budget
// eviction, configuration from the environment, and unwritable directories.
#include "svod/cache/object_cache.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>

#include "svod/base/error.h"
#include "svod/base/log.h"
#include "svod/cache/cache_key.h"
#include "svod/compile/cpu_recipe.h"
#include "tests/cache/cache_test_support.h"
#include "tests/support/watchdog.h"

namespace svod {
namespace {

namespace fs = std::filesystem;
using test::add_kernel;
using test::TempDir;
using test::CountingCompiler;
using test::object_cache_in;
using test::run_add_kernel;
using test::ScopedEnv;

Artifact bytes_artifact(size_t size, uint8_t fill) {
  Artifact a;
  a.bytes.assign(size, std::byte{fill});
  return a;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

size_t count_files(const fs::path& dir, std::string_view suffix) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().string().ends_with(suffix)) ++n;
  return n;
}

// Counts warnings svod logs while alive.
class WarningCounter {
 public:
  size_t count() const { return warnings_logged() - before_; }

 private:
  size_t before_ = warnings_logged();
};

// Compiles through `cache` (which may be off) with `device`'s compiler, as
// Device::compile does after the kernel cache: `cache` stands in for the
// process's object cache meanwhile.
std::shared_ptr<const Program> compile_through(ObjectCache* cache, CpuDevice& device, const Compiler& compiler,
                                               const ProgramSpec& spec) {
  EXPECT_EQ(&device.compiler(), &compiler);
  const std::shared_ptr<ObjectCache> process = object_cache();
  set_object_cache(std::shared_ptr<ObjectCache>(cache, [](ObjectCache*) {}));
  struct Restore {
    std::shared_ptr<ObjectCache> cache;
    ~Restore() { set_object_cache(cache); }
  } restore{process};
  return load_or_compile(device, spec);
}

TEST(ObjectCacheTest, StoresAndReturnsAnArtifact) {
  TempDir dir;
  ObjectCache cache({dir.path(), ObjectCacheConfig::kDefaultMaxBytes});
  const Hash128 key{1, 2};
  EXPECT_FALSE(cache.get(key));
  Artifact a = bytes_artifact(1000, 0xab);
  a.kind = ArtifactKind("ptx");
  cache.put(key, a);
  auto back = cache.get(key);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->kind, ArtifactKind("ptx"));
  EXPECT_EQ(back->bytes, a.bytes);
  EXPECT_TRUE(fs::exists(cache.entry_path(key)));
  EXPECT_EQ(count_files(dir.path(), ".tmp"), 0u);
  ObjectCacheStats s = cache.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.writes, 1u);
  ObjectCacheUsage u = cache.usage();
  EXPECT_EQ(u.entries, 1u);
  EXPECT_GT(u.bytes, 1000u);
  EXPECT_EQ(cache.clear(), 1u);
  EXPECT_FALSE(cache.get(key));
}

// A cache whose files cannot be removed (read-only) used to be reported as
// cleared: "removed 0 files", status 0 (issue 40). A folder with an entry's
// name cannot be removed as a file, whoever runs it.
TEST(ObjectCacheTest, ClearSaysWhatItCouldNotRemove) {
  TempDir dir;
  ObjectCache cache({dir.path(), ObjectCacheConfig::kDefaultMaxBytes});
  cache.put(Hash128{1, 2}, bytes_artifact(100, 0x11));
  const fs::path stuck = cache.entry_path(Hash128{3, 4});
  fs::create_directories(stuck / "inside");
  const Error e = test::expect_error([&] { cache.clear(); });
  EXPECT_EQ(e.kind(), ErrorKind::Io);
  EXPECT_NE(std::string(e.what()).find("1 file of the object cache could not be removed (removed 1); the first: " +
                                       stuck.string()),
            std::string::npos)
      << e.what();
  fs::remove_all(stuck);
  EXPECT_EQ(cache.clear(), 0u);
}

TEST(ObjectCacheTest, DamagedOrForeignEntriesAreMissesAndRemoved) {
  TempDir dir;
  ObjectCache cache({dir.path(), ObjectCacheConfig::kDefaultMaxBytes});
  const Hash128 key{11, 22}, other{33, 44};
  cache.put(key, bytes_artifact(500, 1));
  cache.put(other, bytes_artifact(500, 2));
  const std::string good = read_file(cache.entry_path(key));
  const std::string other_entry = read_file(cache.entry_path(other));

  const std::vector<std::pair<std::string, std::string>> damages = {
      {"flipped payload byte", [&] { auto s = good; s[s.size() - 7] ^= 0x40; return s; }()},
      {"flipped key byte", [&] { auto s = good; s[33] ^= 0x01; return s; }()},
      {"flipped kind byte", [&] { auto s = good; s[17] ^= 0x01; return s; }()},
      {"kind of no name", [&] { auto s = good; s[16] = '_'; return s; }()},
      {"flipped magic", [&] { auto s = good; s[0] = 'X'; return s; }()},
      {"truncated payload", good.substr(0, good.size() - 1)},
      {"truncated header", good.substr(0, 20)},
      {"empty file", ""},
      {"extra bytes", good + "junk"},
      {"foreign text", std::string(700, 'z')},
      {"another key's entry", other_entry},
  };
  uint64_t corrupt = cache.stats().corrupt;
  for (const auto& [what, bytes] : damages) {
    SCOPED_TRACE(what);
    write_file(cache.entry_path(key), bytes);
    EXPECT_FALSE(cache.get(key));
    EXPECT_FALSE(fs::exists(cache.entry_path(key)));
    EXPECT_EQ(cache.stats().corrupt, ++corrupt);
  }
  // The untouched entry is still served.
  EXPECT_TRUE(cache.get(other));
}

TEST(ObjectCacheTest, CorruptEntryOfARealKernelIsRecompiledAndReplaced) {
  TempDir dir;
  ObjectCache cache({dir.path(), ObjectCacheConfig::kDefaultMaxBytes});
  CountingCompiler compiler;
  CpuDevice device(std::shared_ptr<const Compiler>(&compiler, [](const Compiler*) {}));
  const ProgramSpec spec = add_kernel(5);
  compile_through(&cache, device, compiler, spec);
  const fs::path entry = cache.entry_path(object_key(spec, compiler.identity()));
  std::string bytes = read_file(entry);
  bytes[bytes.size() / 2] ^= 0x10;  // inside the code: a wrong kernel if it were used
  write_file(entry, bytes);

  auto p = compile_through(&cache, device, compiler, spec);
  EXPECT_EQ(compiler.compiles(), 2);
  EXPECT_FLOAT_EQ(run_add_kernel(device, *p), 8.0f);
  EXPECT_TRUE(cache.get(object_key(spec, compiler.identity())));  // replaced by a good one
  compile_through(&cache, device, compiler, spec);
  EXPECT_EQ(compiler.compiles(), 2);
}

// A FIFO under an entry's name would make a blocking open() wait for a writer
// forever: it reads as a damaged entry, at once, is removed and the kernel is
// compiled again and stored. A folder there is damaged too (and stays).
TEST(ObjectCacheTest, AFifoOrFolderInAnEntrysPlaceIsAMissAndTheKernelIsRecompiled) {
  TempDir dir;
  test::Watchdog watchdog("reading a FIFO cache entry", std::chrono::seconds(120));
  ObjectCache cache({dir.path(), ObjectCacheConfig::kDefaultMaxBytes});
  const Hash128 key{5, 6};
  ASSERT_EQ(::mkfifo(cache.entry_path(key).c_str(), 0644), 0);
  EXPECT_FALSE(cache.get(key));
  EXPECT_EQ(cache.stats().corrupt, 1u);
  EXPECT_FALSE(fs::exists(cache.entry_path(key)));
  fs::create_directory(cache.entry_path(key));
  EXPECT_FALSE(cache.get(key));
  EXPECT_EQ(cache.stats().corrupt, 2u);
  fs::remove(cache.entry_path(key));

  CountingCompiler compiler;
  CpuDevice device(std::shared_ptr<const Compiler>(&compiler, [](const Compiler*) {}));
  const ProgramSpec spec = add_kernel(5);
  compile_through(&cache, device, compiler, spec);
  const fs::path entry = cache.entry_path(object_key(spec, compiler.identity()));
  ASSERT_TRUE(fs::remove(entry));
  ASSERT_EQ(::mkfifo(entry.c_str(), 0644), 0);
  auto p = compile_through(&cache, device, compiler, spec);
  EXPECT_EQ(compiler.compiles(), 2);
  EXPECT_FLOAT_EQ(run_add_kernel(device, *p), 8.0f);
  EXPECT_TRUE(fs::is_regular_file(entry));  // the FIFO was replaced by a good entry
  EXPECT_TRUE(cache.get(object_key(spec, compiler.identity())));
}

TEST(ObjectCacheTest, IdentityOrInputChangesAreMisses) {
  TempDir dir;
  ObjectCache cache({dir.path(), ObjectCacheConfig::kDefaultMaxBytes});
  const ProgramSpec spec = add_kernel(1);

  auto compiles_for = [&](ClangCompiler::Options options, const ProgramSpec& s) {
    auto compiler = std::make_shared<CountingCompiler>(std::move(options));
    CpuDevice device(compiler);
    auto p = compile_through(&cache, device, *compiler, s);
    EXPECT_FLOAT_EQ(run_add_kernel(device, *p), 4.0f);
    return compiler->compiles();
  };

  EXPECT_EQ(compiles_for({}, spec), 1);
  EXPECT_EQ(compiles_for({}, spec), 0) << "a new compiler with the same identity hits";

  ClangCompiler::Options flags;
  flags.extra_flags = {"-fno-slp-vectorize"};
  EXPECT_EQ(compiles_for(flags, spec), 1);
  EXPECT_EQ(compiles_for(flags, spec), 0);

  ProgramSpec defined = spec;
  defined.defines.emplace_back("UNUSED_KNOB", "3");
  EXPECT_EQ(compiles_for({}, defined), 1);

  ProgramSpec rebound = spec;  // different declarations, same compiler input: shares the object
  rebound.scalars[0].max = 100;
  EXPECT_EQ(compiles_for({}, rebound), 0);

  // A variant (ProgramSpec::recipe) is another object; the default's key is
  // the one it had before recipes could be named.
  ProgramSpec variant = spec;
  variant.recipe = "O2";
  EXPECT_EQ(compiles_for({}, variant), 1);
  EXPECT_EQ(compiles_for({}, variant), 0);
  EXPECT_NE(source_hash(variant), source_hash(spec));

  // The same clang reached through another path is another toolchain as far
  // as the cache can tell (SVOD_CLANG is how users pick one).
  TempDir bin;
  const fs::path link = bin.path() / "clang-wrapper";
  fs::create_symlink(fs::canonical(ClangCompiler::find_clang()), link);
  {
    ScopedEnv env("SVOD_CLANG", link.string());
    EXPECT_EQ(ClangCompiler().identity().path, link.string());
    EXPECT_EQ(compiles_for({}, spec), 1);
    EXPECT_EQ(compiles_for({}, spec), 0);
  }
  EXPECT_EQ(cache.usage().entries, 5u);
}

// The CPU compilers' recipe (cpu_recipe.h) is part of their identity: an
// object the same compiler built with another recipe (-O2, the recipe before
// -O3) is a miss, and the kernel is compiled with the recipe of today.
TEST(ObjectCacheTest, AnObjectOfAnotherRecipeIsAMiss) {
  TempDir dir;
  ObjectCache cache({dir.path(), ObjectCacheConfig::kDefaultMaxBytes});
  const ProgramSpec spec = add_kernel(1);
  auto compiler = std::make_shared<CountingCompiler>();
  CompilerIdentity other_recipe = compiler->identity();
  const auto level = std::find(other_recipe.flags.begin(), other_recipe.flags.end(), kDefaultCpuRecipe.clang_flags().front());
  ASSERT_NE(level, other_recipe.flags.end());
  *level = "-O2";
  ClangCompiler::Options o2;
  o2.extra_flags = {"-O2"};  // the last -O wins: what the other recipe built
  cache.put(object_key(spec, other_recipe), ClangCompiler(o2).compile(spec));
  CpuDevice device(compiler);
  EXPECT_FLOAT_EQ(run_add_kernel(device, *compile_through(&cache, device, *compiler, spec)), 4.0f);
  EXPECT_EQ(compiler->compiles(), 1);
  EXPECT_EQ(cache.usage().entries, 2u);
  // The object of today's recipe is found.
  CpuDevice again(compiler);
  EXPECT_FLOAT_EQ(run_add_kernel(again, *compile_through(&cache, again, *compiler, spec)), 4.0f);
  EXPECT_EQ(compiler->compiles(), 1);
}

TEST(ObjectCacheTest, BudgetEvictsLeastRecentlyUsed) {
  TempDir dir;
  const uint64_t kEntry = 1000 + 72;  // payload + header
  ObjectCache cache({dir.path(), 5000});
  std::vector<Hash128> keys;
  for (uint64_t i = 0; i < 4; ++i) {
    keys.push_back({i + 1, 99});
    cache.put(keys.back(), bytes_artifact(1000, static_cast<uint8_t>(i)));
  }
  // Age the entries: keys[0] oldest ... keys[3] newest, all older than the
  // touch interval, then use keys[0] so it becomes the most recent.
  const auto now = fs::file_time_type::clock::now();
  for (size_t i = 0; i < keys.size(); ++i)
    fs::last_write_time(cache.entry_path(keys[i]), now - std::chrono::hours(10 - i));
  ASSERT_TRUE(cache.get(keys[0]));

  cache.put({5, 99}, bytes_artifact(1000, 5));  // 5 entries > 5000 bytes
  EXPECT_TRUE(fs::exists(cache.entry_path(keys[0])));
  EXPECT_FALSE(fs::exists(cache.entry_path(keys[1])));
  EXPECT_TRUE(fs::exists(cache.entry_path(keys[2])));
  EXPECT_TRUE(fs::exists(cache.entry_path({5, 99})));
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_LE(cache.usage().bytes, 5000u);
  EXPECT_EQ(cache.usage().bytes, 4 * kEntry);

  // An entry bigger than the whole budget is not stored at all.
  cache.put({6, 99}, bytes_artifact(6000, 6));
  EXPECT_FALSE(fs::exists(cache.entry_path({6, 99})));
}

TEST(ObjectCacheTest, EvictionBoundsManyWrites) {
  TempDir dir;
  ObjectCache cache({dir.path(), 20'000});
  for (uint64_t i = 0; i < 100; ++i) cache.put({i, 7}, bytes_artifact(500, 1));
  EXPECT_LE(cache.usage().bytes, 20'000u);
  EXPECT_GT(cache.stats().evictions, 0u);
}

TEST(ObjectCacheTest, ConcurrentWritersOfOneKeyLeaveOneWholeEntry) {
  TempDir dir;
  ObjectCache cache({dir.path(), ObjectCacheConfig::kDefaultMaxBytes});
  const Artifact a = bytes_artifact(64 * 1024, 0x5a);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        cache.put({42, 42}, a);
        auto got = cache.get({42, 42});
        ASSERT_TRUE(got);  // a reader never sees a partial entry
        ASSERT_EQ(got->bytes, a.bytes);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(cache.stats().corrupt, 0u);
  EXPECT_EQ(count_files(dir.path(), ".svo"), 1u);
  EXPECT_EQ(count_files(dir.path(), ".tmp"), 0u);
}

TEST(ObjectCacheConfigTest, ReadsTheEnvironment) {
  ScopedEnv cache_on("SVOD_CACHE", std::nullopt);
  ScopedEnv dir("SVOD_CACHE_DIR", std::nullopt);
  ScopedEnv xdg("XDG_CACHE_HOME", "/tmp/xdg");
  ScopedEnv home("HOME", "/tmp/home");
  ScopedEnv budget("SVOD_CACHE_MAX_BYTES", std::nullopt);
  EXPECT_EQ(ObjectCacheConfig::from_env().directory, fs::path("/tmp/xdg/svod"));
  EXPECT_EQ(ObjectCacheConfig::from_env().max_bytes, ObjectCacheConfig::kDefaultMaxBytes);
  {
    ScopedEnv no_xdg("XDG_CACHE_HOME", std::nullopt);
    EXPECT_EQ(ObjectCacheConfig::from_env().directory, fs::path("/tmp/home/.cache/svod"));
  }
  ScopedEnv explicit_dir("SVOD_CACHE_DIR", "/tmp/explicit");
  EXPECT_EQ(ObjectCacheConfig::from_env().directory, fs::path("/tmp/explicit"));
  for (const char* no : {"0", "false", "No", "OFF"}) {  // all but "0" used to leave the cache on
    ScopedEnv off("SVOD_CACHE", no);
    EXPECT_TRUE(ObjectCacheConfig::from_env().directory.empty()) << no;
  }
  for (const char* yes : {"1", "true", "Yes", "on"}) {
    ScopedEnv on("SVOD_CACHE", yes);
    EXPECT_EQ(ObjectCacheConfig::from_env().directory, fs::path("/tmp/explicit")) << yes;
  }
  {
    ScopedEnv unclear("SVOD_CACHE", "disabled");
    const Error e = test::expect_error([] { ObjectCacheConfig::from_env(); });
    EXPECT_EQ(e.kind(), ErrorKind::Validation);
    EXPECT_EQ(std::string(e.what()), "SVOD_CACHE=\"disabled\": expected 1 or 0 (or true/false, yes/no, on/off)");
  }
  {
    ScopedEnv small("SVOD_CACHE_MAX_BYTES", "4096");
    EXPECT_EQ(ObjectCacheConfig::from_env().max_bytes, 4096u);
  }
  ScopedEnv bad("SVOD_CACHE_MAX_BYTES", "lots");
  try {
    ObjectCacheConfig::from_env();
    FAIL() << "malformed budget accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Validation);
  }
}

TEST(ObjectCacheTest, DisabledCacheWritesNothing) {
  TempDir dir;
  ScopedEnv where("SVOD_CACHE_DIR", dir.path().string());
  ScopedEnv off("SVOD_CACHE", "0");
  test::ScopedObjectCache scoped(std::make_shared<ObjectCache>(ObjectCacheConfig::from_env()));
  ASSERT_FALSE(object_cache()->enabled());
  auto compiler = std::make_shared<CountingCompiler>();
  auto device = std::make_shared<CpuDevice>(compiler);
  EXPECT_FLOAT_EQ(run_add_kernel(*device, *device->compile(add_kernel(9))), 12.0f);
  auto second = std::make_shared<CpuDevice>(compiler);
  second->compile(add_kernel(9));
  EXPECT_EQ(compiler->compiles(), 2);
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

// Root may write anywhere chmod would forbid, so unwritable places are made
// from things no user can create files in: a path below a regular file
// (ENOTDIR) and an existing directory in /proc.
TEST(ObjectCacheTest, UnwritableDirectoryDegradesWithOneWarning) {
  TempDir dir;
  const fs::path file = dir.path() / "plain-file";
  write_file(file, "not a directory");
  for (const fs::path& place : {file / "cache", fs::path("/proc/self")}) {
    SCOPED_TRACE(place.string());
    auto cache = object_cache_in(place);
    WarningCounter warnings;
    auto compiler = std::make_shared<CountingCompiler>();
    CpuDevice device(compiler);
    for (int step : {1, 2, 3}) {
      auto p = compile_through(cache.get(), device, *compiler, add_kernel(step));
      EXPECT_FLOAT_EQ(run_add_kernel(device, *p), 3.0f + static_cast<float>(step));
    }
    EXPECT_EQ(compiler->compiles(), 3);
    EXPECT_EQ(warnings.count(), 1u);
    EXPECT_FALSE(cache->stats().writable);
    EXPECT_EQ(cache->stats().writes, 0u);
  }
}

// A compiler whose identity stands on a source the test sets, counting how
// often its identity is made (for the llvm compiler: how often the plugin
// would be opened).
class SourcedCompiler final : public Compiler {
 public:
  explicit SourcedCompiler(Hash128 source) : source_(source) { identity_.name = "sourced"; }
  const CompilerIdentity& identity() const override {
    made_.fetch_add(1);
    if (on_make_) on_make_();
    return identity_;
  }
  Artifact compile(const ProgramSpec&) const override { return bytes_artifact(64, 0x5a); }
  std::optional<Hash128> identity_source() const override { return source_; }

  CompilerIdentity identity_;
  Hash128 source_;
  std::function<void()> on_make_;
  int made() const { return made_.load(); }

 private:
  mutable std::atomic<int> made_{0};
};

TEST(ObjectCacheTest, CompilerIdentitiesAreRememberedUnderTheirSource) {
  TempDir dir;
  SourcedCompiler compiler(Hash128{7, 9});
  compiler.identity_.version = "1";
  const Hash128 expected = compiler.identity_.hash();
  {
    ObjectCache cache({dir.path(), ObjectCacheConfig::kDefaultMaxBytes});
    EXPECT_EQ(cache.identity_hash(compiler), expected);
    EXPECT_EQ(cache.identity_hash(compiler), expected);  // the process remembers it too
    EXPECT_EQ(compiler.made(), 1);
  }
  const fs::path memo = dir.path() / (Hash128{7, 9}.to_hex() + ".identity");
  ASSERT_TRUE(fs::exists(memo));
  {
    // A later process: the compiler is never made.
    ObjectCache cache({dir.path(), ObjectCacheConfig::kDefaultMaxBytes});
    EXPECT_EQ(cache.identity_hash(compiler), expected);
    EXPECT_EQ(compiler.made(), 1);
  }
  // Another source (the plugin file or the CPU changed) is another identity.
  compiler.source_ = Hash128{7, 10};
  compiler.identity_.version = "2";
  {
    ObjectCache cache({dir.path(), ObjectCacheConfig::kDefaultMaxBytes});
    EXPECT_EQ(cache.identity_hash(compiler), compiler.identity_.hash());
    EXPECT_EQ(compiler.made(), 2);
  }
  // A damaged memo, or something that is not a file, is made again and replaced.
  compiler.source_ = Hash128{7, 9};
  compiler.identity_.version = "1";
  for (const std::string& damage : {std::string("not hex\n"), std::string(""), std::string(5000, 'a')}) {
    write_file(memo, damage);
    ObjectCache cache({dir.path(), ObjectCacheConfig::kDefaultMaxBytes});
    const int before = compiler.made();
    EXPECT_EQ(cache.identity_hash(compiler), expected);
    EXPECT_EQ(compiler.made(), before + 1);
    EXPECT_EQ(Hash128::from_hex(read_file(memo).substr(0, 32)), expected);
  }
  // A FIFO is neither read nor written through (a writer's open() would wait
  // for a reader for ever): it is replaced by a regular file. So is a link,
  // whose target stays as it was.
  {
    test::Watchdog watchdog("a FIFO in place of a remembered identity", std::chrono::seconds(60));
    fs::remove(memo);
    ASSERT_EQ(::mkfifo(memo.c_str(), 0644), 0);
    ObjectCache cache({dir.path(), ObjectCacheConfig::kDefaultMaxBytes});
    EXPECT_EQ(cache.identity_hash(compiler), expected);
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(memo)));
    EXPECT_EQ(Hash128::from_hex(read_file(memo).substr(0, 32)), expected);
  }
  {
    const fs::path elsewhere = dir.path() / "elsewhere";
    write_file(elsewhere, "not hex\n");
    fs::remove(memo);
    fs::create_symlink(elsewhere, memo);
    ObjectCache cache({dir.path(), ObjectCacheConfig::kDefaultMaxBytes});
    EXPECT_EQ(cache.identity_hash(compiler), expected);
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(memo)));
    EXPECT_EQ(read_file(elsewhere), "not hex\n");
    fs::remove(elsewhere);
  }
  fs::remove(memo);
  fs::create_directory(memo);
  {
    ObjectCache cache({dir.path(), ObjectCacheConfig::kDefaultMaxBytes});
    EXPECT_EQ(cache.identity_hash(compiler), expected);
  }
  fs::remove(memo);
  // A source that changes while the compiler is made (its file replaced) is not remembered.
  compiler.on_make_ = [&] { compiler.source_ = Hash128{7, 11}; };
  {
    ObjectCache cache({dir.path(), ObjectCacheConfig::kDefaultMaxBytes});
    cache.identity_hash(compiler);
  }
  EXPECT_FALSE(fs::exists(memo));
  EXPECT_FALSE(fs::exists(dir.path() / (Hash128{7, 11}.to_hex() + ".identity")));
  compiler.on_make_ = nullptr;
  compiler.source_ = Hash128{7, 9};
  // clear() forgets identities with the objects; an off cache asks the compiler.
  {
    ObjectCache cache({dir.path(), ObjectCacheConfig::kDefaultMaxBytes});
    cache.identity_hash(compiler);
    EXPECT_TRUE(fs::exists(memo));
    EXPECT_GE(cache.clear(), 1u);
    EXPECT_FALSE(fs::exists(memo));
    ObjectCache off({{}, ObjectCacheConfig::kDefaultMaxBytes});
    const int before = compiler.made();
    EXPECT_EQ(off.identity_hash(compiler), expected);
    EXPECT_EQ(compiler.made(), before + 1);
  }
}

TEST(ObjectCacheTest, DeviceCompileGoesThroughTheProcessObjectCache) {
  TempDir dir;
  auto cache = object_cache_in(dir.path());
  test::ScopedObjectCache scoped(cache);
  auto compiler = std::make_shared<CountingCompiler>();
  const ProgramSpec spec = add_kernel(4);
  {
    auto device = std::make_shared<CpuDevice>(compiler);
    EXPECT_FLOAT_EQ(run_add_kernel(*device, *device->compile(spec)), 7.0f);
  }
  // A new device misses in memory but finds the object on disk.
  auto device = std::make_shared<CpuDevice>(compiler);
  EXPECT_FLOAT_EQ(run_add_kernel(*device, *device->compile(spec)), 7.0f);
  EXPECT_EQ(compiler->compiles(), 1);
  EXPECT_EQ(cache->stats().hits, 1u);
}

}  // namespace
}  // namespace svod
