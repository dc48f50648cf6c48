// The CUDA device. Two groups:
//  - NVRTC, driver loading and argument packing, which run on every machine
//    with the CUDA toolkit (no GPU needed; skipped only when NVRTC itself is
//    absent);
//  - the device on a GPU (a block reduction, pinned staging, graphs, driver
//    launch errors), skipped when no CUDA device can be opened.
// What every device must do (elementwise kernels, views, launch checks,
// events, plans) is in tests/device/device_conformance_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "svod/base/error.h"
#include "svod/cache/cache_key.h"
#include "svod/backends/cpu/cpu_device.h"
#include "svod/backends/cuda/cuda_api.h"
#include "svod/backends/cuda/cuda_device.h"
#include "svod/backends/cuda/kernel_params.h"
#include "svod/backends/cuda/nvrtc_compiler.h"
#include "svod/registry/registry.h"
#include "svod/plan/execution_plan.h"
#include "svod/compile/compile_policy.h"
#include "svod/package/package.h"
#include "svod/planfile/plan_file.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace svod {
namespace {

using test::cuda_device_present;
using test::expect_error;
using test::ScopedEnv;

constexpr const char* kAddSource = R"(
extern "C" __global__ void add(float* out, const float* a, const float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
)";

ProgramSpec cuda_spec(std::string entry, std::string source) {
  ProgramSpec spec;
  spec.language = kCudaLanguage;
  spec.entry = std::move(entry);
  spec.source = std::move(source);
  return spec;
}

ProgramSpec add_spec() {
  ProgramSpec spec = cuda_spec("add", kAddSource);
  spec.buffers = {{"out", Access::Write}, {"a"}, {"b"}};
  spec.scalars = {{"n", ScalarType::I32}};
  spec.global_size = {Expr::parse("(n+255)/256"), Expr::constant(1), Expr::constant(1)};
  spec.local_size = {Expr::constant(256), Expr::constant(1), Expr::constant(1)};
  return spec;
}

std::string text_of(const Artifact& artifact) {
  return {reinterpret_cast<const char*>(artifact.bytes.data()), artifact.bytes.size()};
}

// ---- NVRTC (no GPU needed) --------------------------------------------------------

TEST(Nvrtc, CompilesToPtxWithTheEntry) {
  SVOD_SKIP_WITHOUT(detail::nvrtc_api(), "NVRTC");
  NvrtcCompiler compiler("compute_75");
  const Artifact ptx = compiler.compile(add_spec());
  EXPECT_EQ(ptx.kind, kPtx);
  const std::string text = text_of(ptx);
  EXPECT_NE(text.find(".entry add("), std::string::npos) << text;
  EXPECT_NE(text.find(".target sm_75"), std::string::npos) << text;
  EXPECT_EQ(text.back(), '\0');  // cuModuleLoadData reads PTX as a C string
}

TEST(Nvrtc, CompilesACubinForAnArchitectureWithoutAGpu) {
  SVOD_SKIP_WITHOUT(detail::nvrtc_api(), "NVRTC");
  NvrtcCompiler compiler("sm_90");
  EXPECT_TRUE(compiler.produces_cubin());
  const Artifact cubin = compiler.compile(add_spec());
  EXPECT_EQ(cubin.kind, kCubin);
  ASSERT_GE(cubin.bytes.size(), 4u);
  EXPECT_EQ(text_of(cubin).substr(0, 4), "\x7f" "ELF");
}

TEST(Nvrtc, DefinesReachTheSource) {
  SVOD_SKIP_WITHOUT(detail::nvrtc_api(), "NVRTC");
  ProgramSpec spec = cuda_spec("scale", R"(
#ifndef FACTOR
#error FACTOR is not defined
#endif
extern "C" __global__ void scale(float* x) { x[threadIdx.x] *= FACTOR; })");
  spec.buffers = {{"x", Access::ReadWrite}};
  NvrtcCompiler compiler("compute_75");
  EXPECT_EQ(expect_error([&] { compiler.compile(spec); }).kind(), ErrorKind::Compile);
  spec.defines = {{"FACTOR", "3.0f"}};
  EXPECT_NE(text_of(compiler.compile(spec)).find(".entry scale("), std::string::npos);
}

TEST(Nvrtc, CompileErrorsCarryTheLog) {
  SVOD_SKIP_WITHOUT(detail::nvrtc_api(), "NVRTC");
  ProgramSpec spec = cuda_spec("broken", R"(extern "C" __global__ void broken(float* x) { x[0] = undeclared_name; })");
  spec.name = "broken_kernel";
  spec.buffers = {{"x", Access::Write}};
  const Error e = expect_error([&] { NvrtcCompiler("compute_75").compile(spec); });
  EXPECT_EQ(e.kind(), ErrorKind::Compile);
  const std::string message = e.what();
  EXPECT_NE(message.find("broken_kernel"), std::string::npos) << message;
  EXPECT_NE(message.find("undeclared_name"), std::string::npos) << message;  // from NVRTC's log
  EXPECT_NE(message.find("error"), std::string::npos) << message;
}

TEST(Nvrtc, MissingEntryIsAnUndefinedSymbol) {
  SVOD_SKIP_WITHOUT(detail::nvrtc_api(), "NVRTC");
  ProgramSpec spec = add_spec();
  spec.entry = "sum";
  const Error e = expect_error([&] { NvrtcCompiler("compute_75").compile(spec); });
  EXPECT_EQ(e.kind(), ErrorKind::UndefinedSymbol) << e.what();
  EXPECT_NE(std::string(e.what()).find("extern \"C\""), std::string::npos) << e.what();
}

TEST(Nvrtc, RefusesOtherLanguagesAndBadTargets) {
  SVOD_SKIP_WITHOUT(detail::nvrtc_api(), "NVRTC");
  ProgramSpec spec = add_spec();
  spec.language = Language::C;
  EXPECT_EQ(expect_error([&] { NvrtcCompiler("compute_75").compile(spec); }).kind(), ErrorKind::Unsupported);
  for (const char* target : {"", "sm_", "sm9", "compute_x", "sm_9", "sm_1234", "gfx90a"})
    EXPECT_EQ(expect_error([&] { NvrtcCompiler{target}; }).kind(), ErrorKind::Validation) << target;
}

TEST(Nvrtc, IdentityDependsOnTheTarget) {
  SVOD_SKIP_WITHOUT(detail::nvrtc_api(), "NVRTC");
  NvrtcCompiler sm80("sm_80"), sm90("sm_90"), ptx90("compute_90");
  const auto& api = detail::nvrtc_api();
  EXPECT_EQ(sm90.identity().name, "nvrtc");
  EXPECT_EQ(sm90.identity().version, fmt::format("{}.{}", api.major, api.minor));
  EXPECT_EQ(sm90.identity().path, api.path);
  EXPECT_EQ(sm90.identity().target_cpu, "sm_90");
  EXPECT_NE(sm80.identity().hash(), sm90.identity().hash());
  EXPECT_NE(sm90.identity().hash(), ptx90.identity().hash());
  const ProgramSpec spec = add_spec();
  EXPECT_NE(object_key(spec, sm80.identity()), object_key(spec, sm90.identity()));
  EXPECT_EQ(object_key(spec, sm90.identity()), object_key(spec, NvrtcCompiler("sm_90").identity()));
}

TEST(Nvrtc, SvodCudaPathThatHoldsNoNvrtcIsUnavailable) {
  ScopedEnv path("SVOD_CUDA_PATH", "/nonexistent/cuda");
  const Error e = expect_error([] { detail::nvrtc_api(); });
  EXPECT_EQ(e.kind(), ErrorKind::DeviceUnavailable);
  EXPECT_NE(std::string(e.what()).find("/nonexistent/cuda/lib64/libnvrtc.so"), std::string::npos) << e.what();
}

// ---- the driver without a GPU -------------------------------------------------------

TEST(CudaDriver, MissingLibraryIsNoDriver) {
  ScopedEnv driver("SVOD_CUDA_DRIVER", "/nonexistent/libcuda.so.1");
  const Error e = expect_error([] { detail::cuda_driver(); });
  EXPECT_EQ(e.kind(), ErrorKind::DeviceUnavailable);
  EXPECT_NE(std::string(e.what()).find("no CUDA driver"), std::string::npos) << e.what();
  EXPECT_EQ(expect_error([] { enumerate_cuda_devices(); }).kind(), ErrorKind::DeviceUnavailable);
}

TEST(CudaDriver, TheToolkitStubIsNotADriver) {
  const char* stub = "/usr/local/cuda/lib/stubs/libcuda.so";
  if (!std::filesystem::exists(stub)) GTEST_SKIP() << stub << " is not installed";
  // The stub's soname is libcuda.so.1: once it is loaded, dlopen("libcuda.so.1")
  // would find it instead of a real driver. Loading the default driver first
  // keeps the later GPU tests of this process on the real one.
  cuda_device_present();
  ScopedEnv driver("SVOD_CUDA_DRIVER", stub);
  const Error e = expect_error([] { detail::cuda_driver(); });
  EXPECT_EQ(e.kind(), ErrorKind::DeviceUnavailable);
  const std::string message = e.what();
  EXPECT_NE(message.find("stub"), std::string::npos) << message;
  EXPECT_NE(message.find("34"), std::string::npos) << message;
  // Asked again, the same answer (the load is remembered per path).
  EXPECT_EQ(std::string(expect_error([] { detail::cuda_driver(); }).what()), message);
}

TEST(CudaDriver, StatusTextNamesTheError) {
  EXPECT_NE(detail::cu_status_text(1).find("CUDA_ERROR_INVALID_VALUE (1)"), std::string::npos);
  EXPECT_NE(detail::cu_status_text(34).find("CUDA_ERROR_STUB_LIBRARY"), std::string::npos);
  EXPECT_EQ(detail::cu_status_text(123456), "CUDA status 123456");
  EXPECT_EQ(expect_error([] { detail::check_cu(700, "running x"); }).kind(), ErrorKind::Execution);
}

TEST(CudaRegistry, OpeningWithoutAGpuIsUnavailable) {
  if (cuda_device_present()) GTEST_SKIP() << "this machine has a CUDA device";
  const Error e = expect_error([] { open_device("CUDA:0"); });
  EXPECT_EQ(e.kind(), ErrorKind::DeviceUnavailable);
  EXPECT_NE(std::string(e.what()).find("CUDA:0"), std::string::npos) << e.what();
}

TEST(CudaRegistry, ListingsHaveACudaRow) {
  bool found = false;
  for (const auto& d : device_registry().list_devices()) {
    if (d.name.rfind("CUDA", 0) != 0) continue;
    found = true;
    if (!d.available) EXPECT_FALSE(d.description.empty());
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(device_registry().canonical_name("cuda"), "CUDA:0");
}

// ---- argument packing (pure) ------------------------------------------------------

TEST(CudaKernelParams, PacksPointersThenScalarsByDeclaredType) {
  const std::vector<ScalarParam> scalars = {{"n", ScalarType::I32}, {"big", ScalarType::I64}, {"m", ScalarType::I32}};
  const uint64_t pointers[] = {0x7f0000001000ull, 0x7f0000002040ull};
  const int64_t values[] = {-5, int64_t{1} << 40, 7};
  CudaKernelParams params;
  params.pack(pointers, scalars, values);
  ASSERT_EQ(params.size(), 5u);
  void** p = params.pointers();
  EXPECT_EQ(*static_cast<uint64_t*>(p[0]), pointers[0]);
  EXPECT_EQ(*static_cast<uint64_t*>(p[1]), pointers[1]);
  EXPECT_EQ(*static_cast<int32_t*>(p[2]), -5);
  EXPECT_EQ(*static_cast<int64_t*>(p[3]), int64_t{1} << 40);
  EXPECT_EQ(*static_cast<int32_t*>(p[4]), 7);
  // Each parameter has its own slot.
  for (size_t i = 1; i < params.size(); ++i) EXPECT_NE(p[i], p[i - 1]);

  // A copy points at its own slots, with the same values.
  CudaKernelParams copy = params;
  EXPECT_NE(copy.pointers()[2], p[2]);
  EXPECT_EQ(*static_cast<int32_t*>(copy.pointers()[2]), -5);
  EXPECT_TRUE(copy.same_values(params));
  const int64_t other[] = {-5, int64_t{1} << 40, 8};
  copy.pack(pointers, scalars, other);
  EXPECT_FALSE(copy.same_values(params));
}

TEST(CudaKernelParams, RefusesMismatchedOrTooManyParameters) {
  CudaKernelParams params;
  const std::vector<ScalarParam> one = {{"n", ScalarType::I32}};
  EXPECT_EQ(expect_error([&] { params.pack({}, one, {}); }).kind(), ErrorKind::Validation);
  std::vector<uint64_t> many(CudaKernelParams::kMaxParams + 1, 0);
  EXPECT_EQ(expect_error([&] { params.pack(many, {}, {}); }).kind(), ErrorKind::Validation);
  params.pack({}, {}, {});
  EXPECT_EQ(params.size(), 0u);
}

// ---- on a GPU ----------------------------------------------------------------------

class Cuda : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      device_ = std::static_pointer_cast<CudaDevice>(open_device("CUDA:0"));
    } catch (const Error& e) {
      ASSERT_EQ(e.kind(), ErrorKind::DeviceUnavailable) << e.what();
      GTEST_SKIP() << "no CUDA device: " << e.what();
    }
  }

  CudaDevice& gpu() { return *device_; }
  Buffer host(const std::vector<float>& values) {
    Buffer b = cpu_device()->allocate(DType::F32, values.size());
    std::copy(values.begin(), values.end(), b.span<float>().begin());
    return b;
  }
  Buffer upload(const std::vector<float>& values) {
    Buffer device = gpu().allocate(DType::F32, values.size());
    gpu().copy(device, host(values));
    return device;
  }
  template <typename T = float>
  std::vector<T> download(const Buffer& device) {
    Buffer b = cpu_device()->allocate(device.dtype(), device.count());
    gpu().copy(b, device);
    auto s = b.span<T>();
    return {s.begin(), s.end()};
  }

  std::shared_ptr<CudaDevice> device_;
};

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(i % 97) - 3.0f;
  return v;
}

TEST_F(Cuda, DescribesItself) {
  EXPECT_EQ(gpu().name(), "CUDA:0");
  EXPECT_FALSE(gpu().details().name.empty());
  EXPECT_GE(gpu().details().compute_major, 5);
  EXPECT_GE(gpu().details().multiprocessors, 1);
  EXPECT_GE(gpu().details().max_threads_per_block, 256);
  EXPECT_EQ(static_cast<const NvrtcCompiler&>(gpu().compiler()).target(), cuda_sm_target(gpu().details().compute_major, gpu().details().compute_minor));
}

TEST_F(Cuda, BlockReductionMatchesTheCpu) {
  ProgramSpec spec = cuda_spec("block_sum", R"(
extern "C" __global__ void block_sum(float* partial, const float* x, long long n) {
  __shared__ float acc[256];
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  acc[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) acc[threadIdx.x] += acc[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = acc[0];
})");
  spec.buffers = {{"partial", Access::Write}, {"x"}};
  spec.scalars = {{"n", ScalarType::I64}};
  spec.global_size = {Expr::parse("(n+255)/256"), Expr::constant(1), Expr::constant(1)};
  spec.local_size = {Expr::constant(256), Expr::constant(1), Expr::constant(1)};
  const size_t n = 100000, blocks = (n + 255) / 256;
  const auto x = ramp(n, 0.01f);
  Buffer dx = upload(x), partial = gpu().allocate(DType::F32, blocks);
  const Buffer args[] = {partial, dx};
  const int64_t scalars[] = {static_cast<int64_t>(n)};
  gpu().compile(spec)->launch(args, scalars);
  const auto got = download(partial);
  double total = 0, expected_total = 0;
  for (size_t blk = 0; blk < blocks; ++blk) {
    double expected = 0;
    for (size_t i = blk * 256; i < std::min(n, (blk + 1) * 256); ++i) expected += x[i];
    EXPECT_NEAR(got[blk], expected, 1e-3 * (1 + std::fabs(expected))) << blk;
    total += got[blk];
    expected_total += expected;
  }
  EXPECT_NEAR(total, expected_total, 1e-4 * std::fabs(expected_total));
}

TEST_F(Cuda, CopiesBothWaysThroughStagingAndPinnedMemory) {
  // Larger than two staging halves, and not a multiple of one.
  const size_t n = (size_t{20} << 20) / sizeof(float) + 3;
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i);
  Buffer d1 = upload(values);
  Buffer d2 = gpu().allocate(DType::F32, n);
  gpu().copy(d2, d1);  // device to device
  EXPECT_EQ(download(d2), values);

  Buffer pinned = gpu().allocate_host(DType::F32, n);
  EXPECT_TRUE(pinned.is_host());
  gpu().copy(pinned, d2);  // straight to pinned memory
  EXPECT_TRUE(std::equal(values.begin(), values.end(), pinned.span<float>().begin()));
  pinned.span<float>()[5] = -1.0f;
  gpu().copy(d1, pinned);  // straight from pinned memory
  EXPECT_EQ(download(d1)[5], -1.0f);

  // Views at offsets, both directions, and within one storage.
  Buffer small = upload({1, 2, 3, 4, 5, 6, 7, 8});
  gpu().copy(small.view(4, 2), host({40, 50}));
  EXPECT_EQ(download(small), (std::vector<float>{1, 2, 3, 4, 40, 50, 7, 8}));
  gpu().copy(small.view(0, 4), small.view(2, 4));  // overlapping: staged through the host
  EXPECT_EQ(download(small), (std::vector<float>{3, 4, 40, 50, 40, 50, 7, 8}));
  Buffer back = cpu_device()->allocate(DType::F32, 2);
  gpu().copy(back, small.view(6, 2));
  EXPECT_EQ((std::vector<float>{back.span<float>()[0], back.span<float>()[1]}), (std::vector<float>{7, 8}));
  EXPECT_EQ(expect_error([&] { gpu().copy(small, back); }).kind(), ErrorKind::Validation);
}

TEST_F(Cuda, BadLaunchesNameTheCudaError) {
  ProgramSpec spec = add_spec();
  spec.local_size[0] = Expr::constant(4096);  // above every GPU's 1024 threads per block
  auto program = gpu().compile(spec);
  Buffer a = upload({1, 2});
  const Buffer args[] = {a, a, a};
  const int64_t scalars[] = {2};
  const Error e = expect_error([&] { program->launch(args, scalars); });
  EXPECT_EQ(e.kind(), ErrorKind::Execution);
  EXPECT_NE(std::string(e.what()).find("CUDA_ERROR_"), std::string::npos) << e.what();
  // The device still works afterwards.
  program = gpu().compile(add_spec());
  program->launch(args, scalars);
  EXPECT_EQ(download(a), (std::vector<float>{2, 4}));
}

TEST_F(Cuda, CompileAndLoadErrors) {
  ProgramSpec broken = cuda_spec("k", R"(extern "C" __global__ void k(float* x) { x[0] = nope; })");
  broken.buffers = {{"x", Access::Write}};
  EXPECT_EQ(expect_error([&] { gpu().compile(broken); }).kind(), ErrorKind::Compile);
  ProgramSpec missing = add_spec();
  missing.entry = "sum";
  EXPECT_EQ(expect_error([&] { gpu().compile(missing); }).kind(), ErrorKind::UndefinedSymbol);
  ProgramSpec c = add_spec();
  c.language = Language::C;
  EXPECT_EQ(expect_error([&] { gpu().compile(c); }).kind(), ErrorKind::Unsupported);
}

// A plan of kernels only, on CUDA:0: runs as one CUDA graph, replayed with
// updated parameters after rebinding and variable changes.
TEST_F(Cuda, PlansOfKernelsReplayAsOneGraph) {
  ProgramSpec scale = cuda_spec("scale", R"(
extern "C" __global__ void scale(float* y, const float* x, int n, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = k * x[i];
})");
  scale.buffers = {{"y", Access::Write}, {"x"}};
  scale.scalars = {{"n", ScalarType::I32}, {"k", ScalarType::I32}};
  scale.global_size = {Expr::parse("(n+127)/128"), Expr::constant(1), Expr::constant(1)};
  scale.local_size = {Expr::constant(128), Expr::constant(1), Expr::constant(1)};
  auto scale_program = gpu().compile(scale);
  auto add_program = gpu().compile(add_spec());

  const size_t n = 1000;
  const auto x = ramp(n, 1);
  Buffer dx = upload(x), y = gpu().allocate(DType::F32, n), z = gpu().allocate(DType::F32, n);
  ExecutionPlanBuilder builder;
  const size_t sx = builder.add_buffer(dx, "x"), sy = builder.add_buffer(y, "y"), sz = builder.add_buffer(z, "z");
  builder.add_variable({"N", 1, static_cast<int64_t>(n)}, static_cast<int64_t>(n));
  builder.add_variable({"K", 1, 10}, 2);
  builder.add_op(KernelOp{scale_program, {sy, sx}, {Expr::parse("N"), Expr::parse("K")}, {}});
  builder.add_op(KernelOp{add_program, {sz, sy, sx}, {Expr::parse("N")}, {}});
  ExecutionPlan plan = builder.build();

  auto check = [&](const Buffer& result, float k, size_t count) {
    const auto got = download(result);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], i < count ? k * x[i] + x[i] : 0.0f) << i;
  };
  const CudaGraphStats before = gpu().graph_stats();
  plan.execute();
  check(z, 2, n);
  CudaGraphStats now = gpu().graph_stats();
  EXPECT_EQ(now.instantiations, before.instantiations + 1);
  EXPECT_EQ(now.launches, before.launches + 1);

  plan.execute();  // replay, nothing changed
  CudaGraphStats replay = gpu().graph_stats();
  EXPECT_EQ(replay.instantiations, now.instantiations);
  EXPECT_EQ(replay.launches, now.launches + 1);
  EXPECT_EQ(replay.node_updates, now.node_updates);

  Buffer z2 = gpu().allocate(DType::F32, n);
  plan.rebind(sz, z2);
  plan.execute();
  check(z2, 2, n);
  CudaGraphStats rebound = gpu().graph_stats();
  EXPECT_EQ(rebound.instantiations, now.instantiations);
  EXPECT_EQ(rebound.node_updates, replay.node_updates + 1);  // only the add node's output moved

  // New variable values: a replay with the new scalars and grids (both
  // nodes change), then rebound buffers (both nodes change again).
  plan.execute_with_vars({{"N", 300}, {"K", 5}});
  EXPECT_EQ(gpu().graph_stats().node_updates, rebound.node_updates + 2);
  Buffer z3 = gpu().allocate(DType::F32, n);
  plan.rebind(sz, z3);
  Buffer y3 = gpu().allocate(DType::F32, n);
  plan.rebind(sy, y3);
  plan.execute();
  check(z3, 5, 300);
  CudaGraphStats changed = gpu().graph_stats();
  EXPECT_EQ(changed.instantiations, now.instantiations);
  EXPECT_EQ(changed.node_updates, rebound.node_updates + 4);

  // With an observer the plan runs op by op (per-op timing), same results.
  struct Count : PlanObserver {
    std::atomic<int> started{0};
    void op_started(size_t) noexcept override { ++started; }
    void op_finished(size_t) noexcept override {}
  } observer;
  plan.execute(ExecuteOptions{.observer = &observer});
  EXPECT_EQ(observer.started.load(), 2);
  EXPECT_EQ(gpu().graph_stats().launches, changed.launches);
  check(z3, 5, 300);
}

// A plan with a CUDA kernel between copies to and from the host.
constexpr const char* kGpuPlan = R"({
    "svod_plan": 1,
    "device": "CUDA:0",
    "variables": { "N": { "min": 1, "max": 4096, "value": 1000 } },
    "buffers": {
      "a_host": { "dtype": "f32", "count": 1000, "device": "CPU", "init": { "arange": { "start": 0, "step": 1 } } },
      "a":      { "dtype": "f32", "count": 1000 },
      "b":      { "dtype": "f32", "count": 1000, "init": { "fill": 2.0 } },
      "out":    { "dtype": "f32", "count": 1000 },
      "result": { "dtype": "f32", "count": 1000, "device": "CPU" }
    },
    "programs": {
      "add": {
        "language": "cuda",
        "source": "extern \"C\" __global__ void add(float* o, const float* a, const float* b, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = a[i] + b[i]; }",
        "entry": "add",
        "buffers": [ { "name": "o", "access": "write" }, { "name": "a" }, { "name": "b" } ],
        "scalars": [ { "name": "n", "type": "i32" } ],
        "global_size": ["(N+255)/256", 1, 1],
        "local_size": [256, 1, 1]
      }
    },
    "ops": [
      { "copy": { "dst": "a", "src": "a_host" } },
      { "run": "add", "buffers": ["out", "a", "b"], "scalars": { "n": "N" } },
      { "copy": { "dst": "result", "src": "out" } }
    ],
    "outputs": { "result": { "expect": { "values": [2, 3, 4, 5], "prefix": true } } }
  })";

void expect_gpu_plan_result(LoadedPlan& loaded) {
  loaded.execute();
  const Buffer& result = loaded.plan.buffer(loaded.outputs[0].slot);
  const auto* data = static_cast<const std::byte*>(result.data());
  EXPECT_TRUE(check_output(loaded.outputs[0], DType::F32, {data, result.bytes()}).passed());
  EXPECT_EQ(result.span<float>()[999], 999.0f + 2.0f);
}

TEST_F(Cuda, PlanFilesRunOnTheGpuWithCopies) {
  LoadedPlan loaded = load_plan(parse_plan_text(kGpuPlan, std::filesystem::temp_directory_path(), "gpu_plan.json"));
  EXPECT_TRUE(loaded.uses_devices);
  expect_gpu_plan_result(loaded);
}

// Packages carry CUDA programs as the cubin NVRTC built for this device, and
// load them with the driver alone: no compile, so compiling may be off.
TEST_F(Cuda, PackagesCarryCubinsThatLoadWithoutCompiling) {
  test::TempDir dir;
  const std::filesystem::path plan = dir.path() / "gpu_plan.json";
  std::ofstream(plan) << kGpuPlan;
  const std::vector<std::byte> bytes = pack_plan(plan);
  const PackageReader reader(bytes, "packed");
  const PackageManifest manifest = read_manifest(reader.text(kManifestSection), "packed");
  ASSERT_EQ(manifest.programs.size(), 1u);
  EXPECT_EQ(manifest.programs[0].artifact, kCubin);
  ASSERT_TRUE(manifest.devices.contains("CUDA:0"));
  EXPECT_EQ(manifest.devices.at("CUDA:0").target_cpu,
            cuda_sm_target(gpu().details().compute_major, gpu().details().compute_minor));
  set_compile_allowed(false);
  struct Restore {
    ~Restore() { set_compile_allowed(true); }
  } restore;
  LoadedPackage package = load_package(std::span<const std::byte>(bytes));
  EXPECT_EQ(package.compiled, 0u);
  expect_gpu_plan_result(package.loaded);
}

}  // namespace
}  // namespace svod
