// Helpers for the cache tests: a scratch folder, a compiler that counts the
// clang runs it makes, a scoped choice of the process's object cache, and a
// small kernel to compile and run.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "svod/cache/object_cache.h"
#include "svod/compile/clang_compiler.h"
#include "svod/backends/cpu/cpu_device.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace svod::test {

// The real clang-process compiler, counting how many compiles reached it.
// hold() makes compiles wait until release(), so a test can line up waiters
// behind a compile in flight without relying on timing.
class CountingCompiler final : public Compiler {
 public:
  explicit CountingCompiler(ClangCompiler::Options options = {}) : clang_(std::move(options)) {}
  const CompilerIdentity& identity() const override { return clang_.identity(); }
  std::span<const CpuRecipe> recipes() const override { return clang_.recipes(); }
  Artifact compile(const ProgramSpec& spec) const override {
    compiles_.fetch_add(1);
    {
      std::unique_lock lock(mutex_);
      released_.wait(lock, [&] { return !held_; });
    }
    return clang_.compile(spec);
  }
  int compiles() const { return compiles_.load(); }
  void hold() {
    std::lock_guard lock(mutex_);
    held_ = true;
  }
  void release() {
    {
      std::lock_guard lock(mutex_);
      held_ = false;
    }
    released_.notify_all();
  }

 private:
  ClangCompiler clang_;
  mutable std::atomic<int> compiles_{0};
  mutable std::mutex mutex_;
  mutable std::condition_variable released_;
  bool held_ = false;
};

// Makes `cache` the process's object cache until destroyed.
class ScopedObjectCache {
 public:
  explicit ScopedObjectCache(std::shared_ptr<ObjectCache> cache) : saved_(object_cache()) {
    set_object_cache(std::move(cache));
  }
  ~ScopedObjectCache() { set_object_cache(saved_); }
  ScopedObjectCache(const ScopedObjectCache&) = delete;
  ScopedObjectCache& operator=(const ScopedObjectCache&) = delete;

 private:
  std::shared_ptr<ObjectCache> saved_;
};

inline std::shared_ptr<ObjectCache> object_cache_in(const std::filesystem::path& dir,
                                                    uint64_t max_bytes = ObjectCacheConfig::kDefaultMaxBytes) {
  return std::make_shared<ObjectCache>(ObjectCacheConfig{dir, max_bytes});
}

// x[i] += `step` for i < n. `tag` makes otherwise equal kernels distinct.
inline ProgramSpec add_kernel(int step = 1, const std::string& tag = "") {
  ProgramSpec spec = c_kernel("add_step",
                              "void add_step(float* x, int n) { for (int i = 0; i < n; ++i) x[i] += " +
                                  std::to_string(step) + ".0f; }" + (tag.empty() ? "" : "\n/* " + tag + " */\n"),
                              {BufferParam{"x", Access::ReadWrite, DType::F32, Expr::parse("n")}},
                              {ScalarParam{"n", ScalarType::I32}});
  return spec;
}

// Runs an add_kernel program on {0, 1, ..., 7} and returns x[3] (3 + step).
inline float run_add_kernel(CpuDevice& device, const Program& program) {
  Buffer x = device.allocate(DType::F32, 8);
  for (int i = 0; i < 8; ++i) x.span<float>()[i] = static_cast<float>(i);
  const Buffer buffers[] = {x};
  const int64_t scalars[] = {8};
  program.launch(buffers, scalars);
  return x.span<float>()[3];
}

}  // namespace svod::test
