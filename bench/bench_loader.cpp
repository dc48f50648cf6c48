// LoadedImage::load of small clang-19 kernels: parse, map, relocate, protect
// and (when the image is released) unmap. Objects are compiled once in setup;
// external symbols come from the loader's process-wide cache after the first
// iteration, as they do for a long-running runtime.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "svod/base/error.h"
#include "svod/base/subprocess.h"
#include "svod/loader/elf_loader.h"

namespace {

std::vector<std::byte> compile(const std::string& source) {
  const svod::ProcessResult result = svod::run_process(
      {"clang-19", "-c", "-x", "c", "-O2", "-march=native", "-fPIC", "-ffreestanding",
       "-fno-math-errno", "-fno-stack-protector", "-fno-builtin", "-", "-o", "-"},
      source, std::chrono::seconds(60));
  if (!result.ok()) throw svod::make_error(svod::ErrorKind::Compile, "clang-19: {}", result.err);
  const auto* data = reinterpret_cast<const std::byte*>(result.out.data());
  return {data, data + result.out.size()};
}

// Load and release in every iteration: the full cost of a short-lived image.
void load_loop(benchmark::State& state, const std::vector<std::byte>& object, const char* entry) {
  for (auto _ : state) {
    const auto image = svod::LoadedImage::load(object);
    benchmark::DoNotOptimize(image->find_symbol(entry));
  }
}

// Load alone: images stay alive (as kernels do in the kernel cache) and are
// released in batches outside the timed region.
void load_only_loop(benchmark::State& state, const std::vector<std::byte>& object,
                    const char* entry) {
  constexpr std::size_t kBatch = 64;
  std::vector<std::shared_ptr<const svod::LoadedImage>> images;
  images.reserve(kBatch);
  for (auto _ : state) {
    images.push_back(svod::LoadedImage::load(object));
    benchmark::DoNotOptimize(images.back()->find_symbol(entry));
    if (images.size() == kBatch) {
      state.PauseTiming();
      images.clear();
      state.ResumeTiming();
    }
  }
}

const std::vector<std::byte>& libm_kernel() {
  static const auto object = compile(R"(
    float expf(float); float sqrtf(float);
    void softplus(float* restrict out, const float* restrict in, int n) {
      for (int i = 0; i < n; ++i) out[i] = sqrtf(1.0f + expf(in[i]));
    })");
  return object;
}

const std::vector<std::byte>& plain_kernel() {
  static const auto object = compile(R"(
    void add(float* restrict out, const float* restrict a, const float* restrict b, int n) {
      for (int i = 0; i < n; ++i) out[i] = a[i] + b[i];
    })");
  return object;
}

void BM_LoadLibmKernel(benchmark::State& state) { load_only_loop(state, libm_kernel(), "softplus"); }
BENCHMARK(BM_LoadLibmKernel);

void BM_LoadPlainKernel(benchmark::State& state) { load_only_loop(state, plain_kernel(), "add"); }
BENCHMARK(BM_LoadPlainKernel);

void BM_LoadAndReleaseLibmKernel(benchmark::State& state) {
  load_loop(state, libm_kernel(), "softplus");
}
BENCHMARK(BM_LoadAndReleaseLibmKernel);

void BM_LoadAndReleasePlainKernel(benchmark::State& state) {
  load_loop(state, plain_kernel(), "add");
}
BENCHMARK(BM_LoadAndReleasePlainKernel);

}  // namespace
