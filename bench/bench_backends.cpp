// The three CPU compilers side by side: compile latency of a small kernel (C
// and LLVM IR; dlopen's includes the link), load latency of one kernel
// through svod's ELF loader and through dlopen, kernel speed of the same
// source built by each compiler, and process start-up of `svod run` with each.
//
// Compiles call the compiler directly with a fresh source every iteration, so
// no cache answers. Kernel timings compare like with like: the same source,
// buffers and launch path; only the compiler differs. (The benchmarks' argument
// is still named "backend", the CPU compiler's name before, so that the
// commands docs/BENCHMARKS.md quotes keep selecting them.)
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "svod/base/subprocess.h"
#include "svod/backends/cpu/cpu_device.h"
#include "svod/loader/elf_loader.h"
#include "svod/loader/shared_library.h"

namespace {

using svod::CpuCompiler;

constexpr CpuCompiler kCompilers[] = {CpuCompiler::Clang, CpuCompiler::Llvm, CpuCompiler::Dlopen};

CpuCompiler compiler_of(const benchmark::State& state) { return kCompilers[state.range(0)]; }

void name_compilers(benchmark::internal::Benchmark* b) {
  b->ArgName("backend")->Arg(0)->Arg(1)->Arg(2);
}

svod::ProgramSpec small_c_kernel(int64_t variant) {
  svod::ProgramSpec spec;
  spec.entry = "saxpy";
  spec.source = "void saxpy(float* restrict y, const float* restrict x, int n) {\n"
                "  for (int i = 0; i < n; i++) y[i] = " + std::to_string(variant) + ".0f * x[i] + y[i];\n}\n";
  spec.buffers = {{"y", svod::Access::ReadWrite}, {"x"}};
  spec.scalars = {{"n", svod::ScalarType::I32}};
  return spec;
}

svod::ProgramSpec small_ir_kernel(int64_t variant) {
  svod::ProgramSpec spec = small_c_kernel(variant);
  spec.language = svod::Language::LlvmIr;
  spec.source = "define void @saxpy(ptr noalias %y, ptr noalias %x, i32 %n) {\n"
                "entry:\n  %any = icmp sgt i32 %n, 0\n  br i1 %any, label %loop, label %done\n"
                "loop:\n  %i = phi i32 [ 0, %entry ], [ %next, %loop ]\n"
                "  %px = getelementptr float, ptr %x, i32 %i\n  %py = getelementptr float, ptr %y, i32 %i\n"
                "  %vx = load float, ptr %px\n  %vy = load float, ptr %py\n"
                "  %m = fmul float %vx, " + std::to_string(variant) + ".0\n  %s = fadd float %m, %vy\n"
                "  store float %s, ptr %py\n  %next = add i32 %i, 1\n"
                "  %more = icmp slt i32 %next, %n\n  br i1 %more, label %loop, label %done\n"
                "done:\n  ret void\n}\n";
  return spec;
}

void BM_Compile_C(benchmark::State& state) {
  const svod::Compiler& compiler = svod::cpu_device(compiler_of(state))->compiler();
  state.SetLabel(std::string(svod::to_string(compiler_of(state))));
  int64_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(compiler.compile(small_c_kernel(++i)));
}
BENCHMARK(BM_Compile_C)->Apply(name_compilers)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();

void BM_Compile_LlvmIr(benchmark::State& state) {
  const svod::Compiler& compiler = svod::cpu_device(compiler_of(state))->compiler();
  state.SetLabel(std::string(svod::to_string(compiler_of(state))));
  int64_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(compiler.compile(small_ir_kernel(++i)));
}
BENCHMARK(BM_Compile_LlvmIr)->Apply(name_compilers)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();

// The same kernel, loaded from bytes in memory: a relocatable object through
// svod's ELF loader, a shared library through dlopen (via a private file).
void BM_Load_ElfLoader(benchmark::State& state) {
  const auto spec = small_c_kernel(3);
  const svod::Artifact object = svod::cpu_device(CpuCompiler::Clang)->compiler().compile(spec);
  for (auto _ : state) benchmark::DoNotOptimize(svod::LoadedImage::load(object.bytes)->symbol("saxpy"));
}
BENCHMARK(BM_Load_ElfLoader)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Load_Dlopen(benchmark::State& state) {
  const auto spec = small_c_kernel(3);
  const svod::Artifact library = svod::cpu_device(CpuCompiler::Dlopen)->compiler().compile(spec);
  for (auto _ : state)
    benchmark::DoNotOptimize(svod::SharedLibrary::open_image(library.bytes, "saxpy")->symbol("saxpy"));
}
BENCHMARK(BM_Load_Dlopen)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Kernel speed: one launch of the same source, built by each compiler.
struct KernelRun {
  std::shared_ptr<svod::CpuDevice> cpu;
  std::shared_ptr<const svod::Program> program;
  std::vector<svod::Buffer> buffers;
  std::vector<int64_t> scalars;
};

KernelRun add_1m(CpuCompiler compiler) {
  const int n = 1 << 20;
  svod::ProgramSpec spec;
  spec.entry = "add";
  spec.source = "void add(float* restrict o, const float* restrict a, const float* restrict b, int n) {\n"
                "  for (int i = 0; i < n; i++) o[i] = a[i] + b[i];\n}\n";
  spec.buffers = {{"o", svod::Access::Write}, {"a"}, {"b"}};
  spec.scalars = {{"n", svod::ScalarType::I32}};
  KernelRun run{svod::cpu_device(compiler), nullptr, {}, {n}};
  run.program = run.cpu->compile(spec);
  for (int k = 0; k < 3; ++k) run.buffers.push_back(run.cpu->allocate(svod::DType::F32, n));
  for (int i = 0; i < n; ++i) run.buffers[1].span<float>()[i] = float(i), run.buffers[2].span<float>()[i] = 0.5f;
  return run;
}

KernelRun matmul_128(CpuCompiler compiler) {
  const int n = 128;
  svod::ProgramSpec spec;
  spec.entry = "matmul";
  spec.source = "void matmul(float* restrict c, const float* restrict a, const float* restrict b, int n) {\n"
                "  for (int i = 0; i < n; i++) {\n"
                "    for (int j = 0; j < n; j++) c[i * n + j] = 0.0f;\n"
                "    for (int k = 0; k < n; k++) {\n"
                "      const float aik = a[i * n + k];\n"
                "      for (int j = 0; j < n; j++) c[i * n + j] += aik * b[k * n + j];\n"
                "    }\n  }\n}\n";
  spec.buffers = {{"c", svod::Access::Write}, {"a"}, {"b"}};
  spec.scalars = {{"n", svod::ScalarType::I32}};
  KernelRun run{svod::cpu_device(compiler), nullptr, {}, {n}};
  run.program = run.cpu->compile(spec);
  for (int k = 0; k < 3; ++k) run.buffers.push_back(run.cpu->allocate(svod::DType::F32, n * n));
  for (int i = 0; i < n * n; ++i)
    run.buffers[1].span<float>()[i] = float(i % 7), run.buffers[2].span<float>()[i] = float(i % 5) * 0.25f;
  return run;
}

void time_kernel(benchmark::State& state, const KernelRun& run) {
  state.SetLabel(std::string(svod::to_string(compiler_of(state))));
  for (auto _ : state) run.program->launch(run.buffers, run.scalars);
}

void BM_Kernel_Add1M(benchmark::State& state) { time_kernel(state, add_1m(compiler_of(state))); }
BENCHMARK(BM_Kernel_Add1M)->Apply(name_compilers)->Unit(benchmark::kMicrosecond)->MinTime(1.0)->UseRealTime();

void BM_Kernel_Matmul128(benchmark::State& state) { time_kernel(state, matmul_128(compiler_of(state))); }
BENCHMARK(BM_Kernel_Matmul128)->Apply(name_compilers)->Unit(benchmark::kMicrosecond)->MinTime(1.0)->UseRealTime();

// The svod tool of this build tree (bench/<name> -> ../svod).
std::string svod_binary() {
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path() / "svod").string();
}

// Runs `svod args...` as a process per iteration. With plugin == 0 the
// child looks for the llvm plugin where there is none (SVOD_LLVM_PLUGIN in
// the child's environment).
void time_svod_process(benchmark::State& state, const std::vector<std::string>& args, bool plugin) {
  std::vector<std::string> argv = {svod_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> environment;
  if (!plugin) environment.push_back("SVOD_LLVM_PLUGIN=/nonexistent/libsvod_llvm.so");
  for (auto _ : state) {
    svod::ProcessResult r = svod::run_process(argv, "", std::chrono::seconds(60), {}, environment);
    if (!r.ok()) state.SkipWithError(r.err.c_str());
  }
}

// Process start-up alone, for reference.
void BM_SvodVersionProcess(benchmark::State& state) { time_svod_process(state, {"--version"}, true); }
BENCHMARK(BM_SvodVersionProcess)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();

// `svod info` opens the plugin when it is there: the difference between the
// two is what opening the plugin, and LLVM with it, costs a process.
void BM_SvodInfoProcess(benchmark::State& state) {
  state.SetLabel(state.range(0) ? "plugin present" : "plugin absent");
  time_svod_process(state, {"info"}, state.range(0) != 0);
}
BENCHMARK(BM_SvodInfoProcess)->ArgName("plugin")->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();

// Start-up plus one tiny plan (its kernel cached after the first run):
// `svod run --cpu-compiler C`. The clang runs with and without the plugin
// present cost the same, because the clang compiler never opens it.
void BM_SvodRunProcess(benchmark::State& state) {
  const std::string compiler(svod::to_string(compiler_of(state)));
  const bool plugin = state.range(1) != 0;
  state.SetLabel(compiler + (plugin ? ", plugin present" : ", plugin absent"));
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("svod-bench-backends-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string plan = (dir / "plan.json").string();
  std::ofstream(plan) << R"J({"svod_plan": 1,
    "buffers": { "o": { "dtype": "i32", "count": 1 } },
    "programs": { "one": { "language": "c", "entry": "one", "source": "void one(int* o) { o[0] = 1; }",
                           "buffers": [ { "name": "o", "access": "write" } ] } },
    "ops": [ { "run": "one", "buffers": ["o"] } ] })J";
  time_svod_process(state, {"run", plan, "--cpu-compiler", compiler}, plugin);
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_SvodRunProcess)
    ->ArgNames({"backend", "plugin"})
    ->Args({0, 1})
    ->Args({0, 0})
    ->Args({1, 1})
    ->Args({2, 1})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

}  // namespace
