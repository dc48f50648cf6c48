// Cache benchmarks: an in-memory hit through CpuDevice::compile, a warm start
// (the object is on disk; a fresh device loads it and has it callable), and
// 64 distinct kernels compiled by clang processes one after another versus
// compile_many on the pool.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>

#include "svod/cache/cache_key.h"
#include "svod/device/compile_many.h"
#include "svod/device/kernel_cache.h"
#include "svod/cache/object_cache.h"
#include "svod/compile/clang_compiler.h"
#include "svod/backends/cpu/cpu_device.h"

namespace {

using namespace svod;

ProgramSpec kernel(const std::string& tag) {
  ProgramSpec spec;
  spec.entry = "scale";
  spec.source = "void scale(float* restrict x, int n) { for (int i = 0; i < n; ++i) x[i] *= 2.0f; } /* " + tag + " */";
  spec.buffers = {BufferParam{"x", Access::ReadWrite, DType::F32, Expr::parse("n")}};
  spec.scalars = {ScalarParam{"n", ScalarType::I32}};
  return spec;
}

// A unique tag per call, so timed compiles never hit a cache.
std::string fresh_tag() {
  static std::atomic<uint64_t> next{0};
  return std::to_string(::getpid()) + "-" + std::to_string(next++);
}

class TempCacheDir {
 public:
  TempCacheDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "svod_bench_cache_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~TempCacheDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

std::shared_ptr<const Compiler> clang() {
  static const auto compiler = [] {
    auto c = std::make_shared<ClangCompiler>();
    c->identity();  // resolved once per process, outside every timing
    return c;
  }();
  return compiler;
}

void BM_KernelCacheHit(benchmark::State& state) {
  set_object_cache(nullptr);
  CpuDevice device(clang());
  const ProgramSpec spec = kernel("hit");
  device.compile(spec);
  for (auto _ : state) benchmark::DoNotOptimize(device.compile(spec));
}
BENCHMARK(BM_KernelCacheHit);

// The same hit with the key computed once, i.e. the cache's own share.
void BM_KernelCacheHitPrecomputedKey(benchmark::State& state) {
  set_object_cache(nullptr);
  CpuDevice device(clang());
  const ProgramSpec spec = kernel("hit");
  const Hash128 key = kernel_key(99, spec);
  KernelCache cache;
  cache.get_or_build(key, [&] { return device.compile(spec); });
  for (auto _ : state) benchmark::DoNotOptimize(cache.get_or_build(key, [&] { return device.compile(spec); }));
}
BENCHMARK(BM_KernelCacheHitPrecomputedKey);

void BM_SpecHash(benchmark::State& state) {
  const ProgramSpec spec = kernel("hash");
  for (auto _ : state) benchmark::DoNotOptimize(spec_hash(spec));
}
BENCHMARK(BM_SpecHash);

// Object on disk, new device each time (so the kernel cache misses): read,
// verify, load, build the Program.
void BM_WarmStartFromObjectCache(benchmark::State& state) {
  TempCacheDir dir;
  set_object_cache(std::make_shared<ObjectCache>(ObjectCacheConfig{dir.path(), ObjectCacheConfig::kDefaultMaxBytes}));
  const ProgramSpec spec = kernel("warm");
  CpuDevice(clang()).compile(spec);  // publishes the object
  for (auto _ : state) {
    CpuDevice device(clang());
    auto program = device.compile(spec);
    benchmark::DoNotOptimize(static_cast<const CpuProgram&>(*program).entry());
  }
  state.counters["disk_hits"] = static_cast<double>(object_cache()->stats().hits);
  set_object_cache(nullptr);
}
BENCHMARK(BM_WarmStartFromObjectCache);

constexpr int kBatch = 64;

void BM_Compile64OneAfterAnother(benchmark::State& state) {
  set_object_cache(nullptr);
  CpuDevice device(clang());
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) benchmark::DoNotOptimize(device.compile(kernel(fresh_tag())));
  }
  state.counters["kernels_per_s"] = benchmark::Counter(kBatch, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Compile64OneAfterAnother)->Unit(benchmark::kMillisecond)->Iterations(2)->UseRealTime();

void BM_Compile64CompileMany(benchmark::State& state) {
  set_object_cache(nullptr);
  CpuDevice device(clang());
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<ProgramSpec> specs;
    for (int i = 0; i < kBatch; ++i) specs.push_back(kernel(fresh_tag()));
    state.ResumeTiming();
    auto results = compile_many(device, specs);
    for (const auto& r : results)
      if (!std::holds_alternative<std::shared_ptr<const Program>>(r)) state.SkipWithError("a compile failed");
  }
  state.counters["kernels_per_s"] = benchmark::Counter(kBatch, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Compile64CompileMany)->Unit(benchmark::kMillisecond)->Iterations(2)->UseRealTime();

}  // namespace
