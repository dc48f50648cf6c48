// KernelCache: single-flight, failure propagation, LRU eviction with live
// references, and how CpuDevice keys Programs.
#include "svod/device/kernel_cache.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "svod/base/error.h"
#include "svod/base/subprocess.h"
#include "svod/cache/cache_key.h"
#include "tests/cache/cache_test_support.h"

namespace svod {
namespace {

using test::add_kernel;
using test::CountingCompiler;
using test::run_add_kernel;

constexpr int kThreads = 16;

// Waits until `done()` holds; the condition is reached by other threads
// arriving at a lock, so it needs no timing assumptions, only patience.
template <typename Done>
void wait_until(Done done) {
  while (!done()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

class KernelCacheTest : public ::testing::Test {
 protected:
  // Object cache off: every miss of the kernel cache reaches the compiler.
  test::ScopedObjectCache no_disk_{nullptr};
  std::shared_ptr<CountingCompiler> compiler = std::make_shared<CountingCompiler>();
  std::shared_ptr<CpuDevice> device = std::make_shared<CpuDevice>(compiler);
};

TEST_F(KernelCacheTest, SixteenThreadsAskingForOneKeyCompileOnce) {
  const ProgramSpec spec = add_kernel(2);
  const KernelCacheStats before = kernel_cache().stats();
  compiler->hold();
  std::vector<std::shared_ptr<const Program>> programs(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([&, t] { programs[t] = device->compile(spec); });
  // Everyone but the compiling thread is parked on the flight before it may finish.
  wait_until([&] { return kernel_cache().stats().coalesced - before.coalesced == kThreads - 1; });
  compiler->release();
  for (auto& t : threads) t.join();

  EXPECT_EQ(compiler->compiles(), 1);
  const KernelCacheStats after = kernel_cache().stats();
  EXPECT_EQ(after.misses - before.misses, 1u);
  EXPECT_EQ(after.coalesced - before.coalesced, static_cast<uint64_t>(kThreads - 1));
  EXPECT_GT(after.build_time, before.build_time);
  for (const auto& p : programs) EXPECT_EQ(p, programs[0]);
  EXPECT_FLOAT_EQ(run_add_kernel(*device, *programs[0]), 5.0f);

  // Later requests are plain hits.
  EXPECT_EQ(device->compile(spec), programs[0]);
  EXPECT_EQ(kernel_cache().stats().hits - after.hits, 1u);
  EXPECT_EQ(compiler->compiles(), 1);
}

TEST_F(KernelCacheTest, FailedCompileReachesEveryWaiterAndIsNotCached) {
  const ProgramSpec bad = test::c_kernel("broken", "void broken(float* x) { x[0] = ; }",
                                         {BufferParam{"x", Access::Write, DType::F32, std::nullopt}});
  const KernelCacheStats before = kernel_cache().stats();
  compiler->hold();
  std::vector<std::optional<ErrorKind>> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        device->compile(bad);
      } catch (const Error& e) {
        errors[t] = e.kind();
      }
    });
  wait_until([&] { return kernel_cache().stats().coalesced - before.coalesced == kThreads - 1; });
  compiler->release();
  for (auto& t : threads) t.join();

  EXPECT_EQ(compiler->compiles(), 1);
  for (const auto& kind : errors) EXPECT_EQ(kind, ErrorKind::Compile);
  EXPECT_EQ(kernel_cache().stats().failures - before.failures, 1u);

  // Not cached: the next request compiles (and fails) again.
  EXPECT_THROW(device->compile(bad), Error);
  EXPECT_EQ(compiler->compiles(), 2);
}

TEST_F(KernelCacheTest, EvictedProgramStillRunsWhileReferenced) {
  KernelCache cache(2);
  int builds = 0;
  auto get = [&](int step) {
    const ProgramSpec spec = add_kernel(step);
    return cache.get_or_build(kernel_key(1, spec), [&]() -> std::shared_ptr<const Program> {
      ++builds;
      return device->load(spec, compiler->compile(spec));
    });
  };

  std::shared_ptr<const Program> first = get(1);
  get(2);
  get(3);  // capacity 2: the least recently used, `first`, goes
  KernelCacheStats s = cache.stats();
  EXPECT_EQ(s.entries, 2u);
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(builds, 3);
  // The cache let go of it, but this reference keeps its code mapped.
  EXPECT_FLOAT_EQ(run_add_kernel(*device, *first), 4.0f);

  // Asking again builds a new Program.
  std::shared_ptr<const Program> again = get(1);
  EXPECT_NE(again, first);
  EXPECT_EQ(builds, 4);
  first.reset();
  EXPECT_FLOAT_EQ(run_add_kernel(*device, *again), 4.0f);
}

TEST_F(KernelCacheTest, EvictionFollowsRecentUse) {
  KernelCache cache(2);
  std::vector<int> built;
  auto get = [&](int step) {
    const ProgramSpec spec = add_kernel(step);
    return cache.get_or_build(kernel_key(1, spec), [&]() -> std::shared_ptr<const Program> {
      built.push_back(step);
      return device->load(spec, compiler->compile(spec));
    });
  };
  get(1);
  get(2);
  get(1);  // 1 is now the most recently used
  get(3);  // evicts 2
  get(1);
  get(2);
  EXPECT_EQ(built, (std::vector<int>{1, 2, 3, 2}));
}

TEST_F(KernelCacheTest, CapacityZeroStillBuildsOnceAndReturns) {
  KernelCache cache(0);
  const ProgramSpec spec = add_kernel(7);
  auto p = cache.get_or_build(kernel_key(1, spec), [&] { return device->load(spec, compiler->compile(spec)); });
  EXPECT_FLOAT_EQ(run_add_kernel(*device, *p), 10.0f);
  EXPECT_EQ(cache.stats().entries, 0u);
}

TEST_F(KernelCacheTest, SameSourceWithOtherDeclarationsGetsItsOwnProgram) {
  ProgramSpec narrow = add_kernel(1);
  ProgramSpec wide = narrow;
  wide.scalars[0].max = 4;  // same code, different parameter bounds
  auto a = device->compile(narrow);
  auto b = device->compile(wide);
  ASSERT_NE(a, b);
  EXPECT_EQ(a->spec().scalars[0].max, std::nullopt);
  EXPECT_EQ(b->spec().scalars[0].max, 4);
  EXPECT_EQ(compiler->compiles(), 2);  // no disk cache here to share the object

  ProgramSpec renamed = narrow;
  renamed.name = "other_name";
  EXPECT_NE(device->compile(renamed), a);
  EXPECT_EQ(device->compile(narrow), a);
}

TEST_F(KernelCacheTest, DevicesDoNotShareProgramsButEachReusesItsOwn) {
  auto other = std::make_shared<CpuDevice>(compiler);
  const ProgramSpec spec = add_kernel(3);
  auto mine = device->compile(spec);
  auto theirs = other->compile(spec);
  EXPECT_NE(mine, theirs);
  EXPECT_EQ(&mine->device(), device.get());
  EXPECT_EQ(&theirs->device(), other.get());
  EXPECT_EQ(other->compile(spec), theirs);
}

// Compiles one spec twice; the second request is a memory hit. Run alone with
// SVOD_DEBUG=1 by the next test, which reads what it logs.
TEST_F(KernelCacheTest, ASecondRequestIsAMemoryHit) {
  const ProgramSpec spec = add_kernel(5, "memory-hit");
  const uint64_t hits = kernel_cache().stats().hits;
  auto first = device->compile(spec);
  EXPECT_EQ(device->compile(spec), first);
  EXPECT_EQ(kernel_cache().stats().hits, hits + 1);
  EXPECT_EQ(compiler->compiles(), 1);
}

TEST(KernelCacheDebug, ReportsACompileThenAMemoryHitWithTheirTimes) {
  // SVOD_DEBUG is read once per process: run the test above in a fresh one.
  std::error_code no_link;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", no_link);
  ASSERT_FALSE(no_link);
  test::ScopedEnv debug("SVOD_DEBUG", "1");
  const ProcessResult r = run_process(
      {self.string(), "--gtest_filter=KernelCacheTest.ASecondRequestIsAMemoryHit"}, "", std::chrono::seconds(60));
  ASSERT_TRUE(r.ok()) << r.out << r.err;
  const size_t compiled = r.err.find("svod: kernel cache: compiled ");
  const size_t hit = r.err.find("svod: kernel cache: memory hit ");
  ASSERT_NE(compiled, std::string::npos) << r.err;
  ASSERT_NE(hit, std::string::npos) << r.err;
  EXPECT_LT(compiled, hit) << r.err;
  const std::string hit_line = r.err.substr(hit, r.err.find('\n', hit) - hit);
  EXPECT_NE(hit_line.find("(add_step) in "), std::string::npos) << hit_line;
  EXPECT_NE(hit_line.find(" ms"), std::string::npos) << hit_line;
  EXPECT_EQ(r.err.find("disk hit"), std::string::npos) << r.err;  // the object cache is off
}

TEST(KernelKeyTest, EveryFieldOfTheSpecCounts) {
  const ProgramSpec base = add_kernel(1);
  const Hash128 key = kernel_key(1, base);
  EXPECT_EQ(kernel_key(1, base), key);
  EXPECT_NE(kernel_key(2, base), key);
  auto differs = [&](auto change) {
    ProgramSpec s = base;
    change(s);
    return kernel_key(1, s) != key;
  };
  EXPECT_TRUE(differs([](ProgramSpec& s) { s.source += " "; }));
  EXPECT_TRUE(differs([](ProgramSpec& s) { s.language = Language::LlvmIr; }));
  EXPECT_TRUE(differs([](ProgramSpec& s) { s.name = "n"; }));
  EXPECT_TRUE(differs([](ProgramSpec& s) { s.defines.emplace_back("A", "1"); }));
  EXPECT_TRUE(differs([](ProgramSpec& s) { s.buffers[0].access = Access::Read; }));
  EXPECT_TRUE(differs([](ProgramSpec& s) { s.buffers[0].min_count = Expr::parse("n+1"); }));
  EXPECT_TRUE(differs([](ProgramSpec& s) { s.scalars[0].type = ScalarType::I64; }));
  EXPECT_TRUE(differs([](ProgramSpec& s) { s.scalars[0].min = 0; }));
  EXPECT_TRUE(differs([](ProgramSpec& s) { s.global_size[0] = Expr::constant(4); }));
  EXPECT_TRUE(differs([](ProgramSpec& s) { s.local_size[1] = Expr::constant(2); }));
  EXPECT_TRUE(differs([](ProgramSpec& s) { s.flops = Expr::parse("n"); }));
  // Only what reaches the compiler changes the object's source hash.
  ProgramSpec bounds = base;
  bounds.scalars[0].max = 9;
  EXPECT_EQ(source_hash(bounds), source_hash(base));
  ProgramSpec defined = base;
  defined.defines.emplace_back("A", "1");
  EXPECT_NE(source_hash(defined), source_hash(base));
  // The file name the source compiles under, only where it can change the object: a source that
  // uses __FILE__ or includes a header beside it.
  ProgramSpec named = base;
  named.source_name = "kernels/k.c";
  EXPECT_EQ(source_hash(named), source_hash(base));
  for (const char* uses_name : {"const char* f = __FILE__;\n", "#include \"k.h\"\n", "# include  \"k.h\"\n"}) {
    ProgramSpec a = base, b = base;
    a.source = b.source = uses_name + base.source;
    b.source_name = "kernels/k.c";
    EXPECT_NE(source_hash(a), source_hash(b)) << uses_name;
  }
  ProgramSpec system_header = base, system_named = base;
  system_header.source = system_named.source = "#include <math.h>\n" + base.source;
  system_named.source_name = "kernels/k.c";
  EXPECT_EQ(source_hash(system_header), source_hash(system_named));
}

}  // namespace
}  // namespace svod
