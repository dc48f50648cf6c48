// Compile speed on kernels shaped like code-generator output, per CPU compiler.
//
// The corpus is generated here: fully unrolled reductions with 8-64
// accumulators, register-tiled matmuls (4x4 and 8x4 tiles, k unrolled),
// softmax and layernorm in several passes, elementwise chains over many
// inputs, core_id-threaded variants and f16 inputs widened to f32, from about
// 15 to 500 lines each. For every kernel it reports the compile time of the
// clang process (one `clang-19` per kernel, svod's flags) and of the
// in-process llvm compiler, the llvm compiler's breakdown (front end, IR
// optimisation, code generation) plus the ELF load time, and the kernel's run
// time built by each compiler. Compiles call the compilers directly, so no
// cache answers.
//
//   taskset -c 0 build/release/bench/bench_corpus [repeats=3] [filter]
//
// Pin it to one core: the targets compare single-core compile time. Compile
// times are CPU time (the process's for the in-process compiler, whose
// compile runs on a thread of its own while the caller waits; the child's
// user + system time for the clang process), so that other load on the
// machine does not inflate them; each compile is repeated `repeats` times
// and the median kept. Run times are the fastest of 25 launches, the two
// builds alternating.
#include <fmt/format.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/cache/object_cache.h"
#include "svod/loader/elf_loader.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double cpu_ms(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return double(now.tv_sec) * 1e3 + double(now.tv_nsec) / 1e6;
}

double thread_cpu_ms() { return cpu_ms(CLOCK_THREAD_CPUTIME_ID); }

// Every thread of this process: the in-process compiler works on a thread it
// starts for each compile (a large stack of its own), and the pool is idle
// while it does, so this is the compile's CPU time.
double process_cpu_ms() { return cpu_ms(CLOCK_PROCESS_CPUTIME_ID); }

// User + system time of the children that have ended so far.
double children_cpu_ms() {
  rusage usage{};
  getrusage(RUSAGE_CHILDREN, &usage);
  auto ms = [](const timeval& t) { return double(t.tv_sec) * 1e3 + double(t.tv_usec) / 1e3; };
  return ms(usage.ru_utime) + ms(usage.ru_stime);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// A generated kernel and the launch that runs it.
struct Kernel {
  svod::ProgramSpec spec;
  std::vector<size_t> buffer_counts;  // f32 elements per buffer, in ABI order
  std::vector<int64_t> scalars;       // without core_id
};

int count_lines(const std::string& text) { return static_cast<int>(std::count(text.begin(), text.end(), '\n')); }

// Pairwise sum of acc0..acc{n-1}, as a code generator writes its final tree.
std::string tree_sum(const std::string& prefix, int n) {
  std::vector<std::string> terms;
  for (int i = 0; i < n; ++i) terms.push_back(fmt::format("{}{}", prefix, i));
  while (terms.size() > 1) {
    std::vector<std::string> next;
    for (size_t i = 0; i + 1 < terms.size(); i += 2) next.push_back("(" + terms[i] + " + " + terms[i + 1] + ")");
    if (terms.size() % 2 == 1) next.push_back(terms.back());
    terms = std::move(next);
  }
  return terms[0];
}

// Sum of squares of each row of `cols` = accumulators * unroll elements, fully
// unrolled: no inner loop, one statement per element.
Kernel unrolled_reduction(int accumulators, int unroll, bool threaded, bool f16) {
  const int cols = accumulators * unroll;
  const int rows = 4096;
  const std::string name = fmt::format("reduce_a{}_u{}{}{}", accumulators, unroll, threaded ? "_mt" : "",
                                       f16 ? "_f16" : "");
  const char* in_type = f16 ? "_Float16" : "float";
  std::string s = fmt::format("void {}(float* restrict out, const {}* restrict a, int rows{}) {{\n", name, in_type,
                              threaded ? ", int core_id" : "");
  if (threaded) {
    s += "  const int begin = core_id * (rows / 4), end = begin + rows / 4;\n";
  } else {
    s += "  const int begin = 0, end = rows;\n";
  }
  s += "  for (int r = begin; r < end; r++) {\n";
  s += fmt::format("    const {}* row = a + r * {};\n", in_type, cols);
  for (int i = 0; i < accumulators; ++i) s += fmt::format("    float acc{} = 0.0f;\n", i);
  for (int u = 0; u < unroll; ++u) {
    for (int i = 0; i < accumulators; ++i) {
      const int c = u * accumulators + i;
      s += fmt::format("    {{ float v = (float)row[{}]; acc{} += v * v; }}\n", c, i);
    }
  }
  s += fmt::format("    out[r] = {};\n", tree_sum("acc", accumulators));
  s += "  }\n}\n";
  Kernel k;
  k.spec.entry = name;
  k.spec.source = s;
  k.spec.buffers = {{"out", svod::Access::Write}, {"a"}};
  k.spec.scalars = {{"rows", svod::ScalarType::I32}};
  if (threaded) {
    k.spec.scalars.push_back({std::string(svod::kCoreIdName), svod::ScalarType::I32});
    k.spec.global_size[0] = svod::Expr::constant(4);
  }
  k.buffer_counts = {size_t(rows), size_t(rows) * cols / (f16 ? 2 : 1)};
  k.scalars = {rows};
  return k;
}

// C = A * B with a TM x TN register tile and k unrolled by `ku`.
Kernel tiled_matmul(int tm, int tn, int ku, bool threaded) {
  const int n = 256;
  const std::string name = fmt::format("matmul_{}x{}_k{}{}", tm, tn, ku, threaded ? "_mt" : "");
  std::string s = fmt::format(
      "void {}(float* restrict C, const float* restrict A, const float* restrict B, int n{}) {{\n", name,
      threaded ? ", int core_id" : "");
  if (threaded) {
    s += fmt::format("  for (int i = core_id * (n / 4); i < (core_id + 1) * (n / 4); i += {}) {{\n", tm);
  } else {
    s += fmt::format("  for (int i = 0; i < n; i += {}) {{\n", tm);
  }
  s += fmt::format("    for (int j = 0; j < n; j += {}) {{\n", tn);
  for (int a = 0; a < tm; ++a)
    for (int b = 0; b < tn; ++b) s += fmt::format("      float c{}_{} = 0.0f;\n", a, b);
  s += fmt::format("      for (int k = 0; k < n; k += {}) {{\n", ku);
  for (int u = 0; u < ku; ++u) {
    for (int a = 0; a < tm; ++a) s += fmt::format("        float a{}_{} = A[(i + {}) * n + k + {}];\n", u, a, a, u);
    for (int b = 0; b < tn; ++b) s += fmt::format("        float b{}_{} = B[(k + {}) * n + j + {}];\n", u, b, u, b);
    for (int a = 0; a < tm; ++a)
      for (int b = 0; b < tn; ++b) s += fmt::format("        c{}_{} += a{}_{} * b{}_{};\n", a, b, u, a, u, b);
  }
  s += "      }\n";
  for (int a = 0; a < tm; ++a)
    for (int b = 0; b < tn; ++b) s += fmt::format("      C[(i + {}) * n + j + {}] = c{}_{};\n", a, b, a, b);
  s += "    }\n  }\n}\n";
  Kernel k;
  k.spec.entry = name;
  k.spec.source = s;
  k.spec.buffers = {{"C", svod::Access::Write}, {"A"}, {"B"}};
  k.spec.scalars = {{"n", svod::ScalarType::I32}};
  if (threaded) {
    k.spec.scalars.push_back({std::string(svod::kCoreIdName), svod::ScalarType::I32});
    k.spec.global_size[0] = svod::Expr::constant(4);
  }
  k.buffer_counts = {size_t(n) * n, size_t(n) * n, size_t(n) * n};
  k.scalars = {n};
  return k;
}

// Row softmax in three passes (max, exp-sum, scale), each unrolled by `w`.
Kernel softmax(int w, bool f16) {
  const int rows = 512, cols = 1024;
  const std::string name = fmt::format("softmax_w{}{}", w, f16 ? "_f16" : "");
  const char* in_type = f16 ? "_Float16" : "float";
  std::string s = "float expf(float);\n";
  s += fmt::format("void {}(float* restrict out, const {}* restrict x, int rows) {{\n", name, in_type);
  s += "  for (int r = 0; r < rows; r++) {\n";
  s += fmt::format("    const {}* row = x + r * {};\n    float* o = out + r * {};\n", in_type, cols, cols);
  for (int i = 0; i < w; ++i) s += fmt::format("    float m{} = -3.0e38f;\n", i);
  s += fmt::format("    for (int c = 0; c < {}; c += {}) {{\n", cols, w);
  for (int i = 0; i < w; ++i)
    s += fmt::format("      {{ float v = (float)row[c + {}]; m{} = v > m{} ? v : m{}; }}\n", i, i, i, i);
  s += "    }\n    float m = m0;\n";
  for (int i = 1; i < w; ++i) s += fmt::format("    m = m > m{} ? m : m{};\n", i, i);
  for (int i = 0; i < w; ++i) s += fmt::format("    float s{} = 0.0f;\n", i);
  s += fmt::format("    for (int c = 0; c < {}; c += {}) {{\n", cols, w);
  for (int i = 0; i < w; ++i)
    s += fmt::format("      {{ float e = expf((float)row[c + {}] - m); o[c + {}] = e; s{} += e; }}\n", i, i, i);
  s += fmt::format("    }}\n    const float inv = 1.0f / {};\n", tree_sum("s", w));
  s += fmt::format("    for (int c = 0; c < {}; c += {}) {{\n", cols, w);
  for (int i = 0; i < w; ++i) s += fmt::format("      o[c + {}] *= inv;\n", i);
  s += "    }\n  }\n}\n";
  Kernel k;
  k.spec.entry = name;
  k.spec.source = s;
  k.spec.buffers = {{"out", svod::Access::Write}, {"x"}};
  k.spec.scalars = {{"rows", svod::ScalarType::I32}};
  k.buffer_counts = {size_t(rows) * cols, size_t(rows) * cols / (f16 ? 2 : 1)};
  k.scalars = {rows};
  return k;
}

// Layernorm: mean, variance and scale-shift passes with `w` accumulators.
Kernel layernorm(int w) {
  const int rows = 512, cols = 1024;
  const std::string name = fmt::format("layernorm_w{}", w);
  std::string s = "float sqrtf(float);\n";
  s += fmt::format(
      "void {}(float* restrict out, const float* restrict x, const float* restrict gamma, "
      "const float* restrict beta, int rows) {{\n",
      name);
  s += fmt::format("  for (int r = 0; r < rows; r++) {{\n    const float* row = x + r * {};\n", cols);
  for (int i = 0; i < w; ++i) s += fmt::format("    float s{} = 0.0f;\n", i);
  s += fmt::format("    for (int c = 0; c < {}; c += {}) {{\n", cols, w);
  for (int i = 0; i < w; ++i) s += fmt::format("      s{} += row[c + {}];\n", i, i);
  s += fmt::format("    }}\n    const float mean = ({}) * (1.0f / {});\n", tree_sum("s", w), cols);
  for (int i = 0; i < w; ++i) s += fmt::format("    float q{} = 0.0f;\n", i);
  s += fmt::format("    for (int c = 0; c < {}; c += {}) {{\n", cols, w);
  for (int i = 0; i < w; ++i) s += fmt::format("      {{ float d = row[c + {}] - mean; q{} += d * d; }}\n", i, i);
  s += fmt::format("    }}\n    const float rstd = 1.0f / sqrtf(({}) * (1.0f / {}) + 1e-5f);\n", tree_sum("q", w), cols);
  s += fmt::format("    for (int c = 0; c < {}; c += {}) {{\n", cols, w);
  for (int i = 0; i < w; ++i)
    s += fmt::format("      out[r * {} + c + {}] = (row[c + {}] - mean) * rstd * gamma[c + {}] + beta[c + {}];\n", cols,
                     i, i, i, i);
  s += "    }\n  }\n}\n";
  Kernel k;
  k.spec.entry = name;
  k.spec.source = s;
  k.spec.buffers = {{"out", svod::Access::Write}, {"x"}, {"gamma"}, {"beta"}};
  k.spec.scalars = {{"rows", svod::ScalarType::I32}};
  k.buffer_counts = {size_t(rows) * cols, size_t(rows) * cols, size_t(cols), size_t(cols)};
  k.scalars = {rows};
  return k;
}

// out = a chain of `depth` operations over `inputs` input arrays, 4 elements
// per iteration written out.
Kernel elementwise_chain(int inputs, int depth, bool threaded) {
  const int n = 1 << 18;
  const std::string name = fmt::format("ew_in{}_d{}{}", inputs, depth, threaded ? "_mt" : "");
  std::string s = fmt::format("void {}(float* restrict out", name);
  for (int i = 0; i < inputs; ++i) s += fmt::format(", const float* restrict in{}", i);
  s += fmt::format(", int n{}) {{\n", threaded ? ", int core_id" : "");
  if (threaded) {
    s += "  for (int i = core_id * (n / 4); i < (core_id + 1) * (n / 4); i += 4) {\n";
  } else {
    s += "  for (int i = 0; i < n; i += 4) {\n";
  }
  static const char* kOps[] = {"{} * {}", "{} + {}", "{} - {}", "({} > {} ? {} : {})"};
  for (int lane = 0; lane < 4; ++lane) {
    s += fmt::format("    float v{}_0 = in0[i + {}];\n", lane, lane);
    for (int d = 1; d <= depth; ++d) {
      const std::string prev = fmt::format("v{}_{}", lane, d - 1);
      const std::string other = fmt::format("in{}[i + {}]", d % inputs, lane);
      const int op = d % 4;
      const std::string expr = op == 3 ? fmt::format(fmt::runtime(kOps[3]), prev, other, prev, other)
                                       : fmt::format(fmt::runtime(kOps[op]), prev, other);
      s += fmt::format("    float v{}_{} = {};\n", lane, d, expr);
    }
    s += fmt::format("    out[i + {}] = v{}_{};\n", lane, lane, depth);
  }
  s += "  }\n}\n";
  Kernel k;
  k.spec.entry = name;
  k.spec.source = s;
  k.spec.buffers = {{"out", svod::Access::Write}};
  for (int i = 0; i < inputs; ++i) k.spec.buffers.push_back({fmt::format("in{}", i)});
  k.spec.scalars = {{"n", svod::ScalarType::I32}};
  if (threaded) {
    k.spec.scalars.push_back({std::string(svod::kCoreIdName), svod::ScalarType::I32});
    k.spec.global_size[0] = svod::Expr::constant(4);
  }
  k.buffer_counts.assign(size_t(inputs) + 1, size_t(n));
  k.scalars = {n};
  return k;
}

std::vector<Kernel> corpus() {
  return {
      elementwise_chain(4, 2, false),    // the smallest: about 15 lines
      elementwise_chain(8, 12, false),
      elementwise_chain(16, 24, true),
      unrolled_reduction(8, 4, false, false),
      unrolled_reduction(16, 8, false, true),
      unrolled_reduction(32, 8, true, false),
      unrolled_reduction(64, 7, false, false),  // about 470 lines
      tiled_matmul(4, 4, 4, false),
      tiled_matmul(8, 4, 4, false),
      tiled_matmul(8, 4, 8, true),
      softmax(8, false),
      softmax(16, true),
      layernorm(8),
      layernorm(32),
  };
}

struct Built {
  std::shared_ptr<svod::CpuDevice> device;
  std::shared_ptr<const svod::Program> program;
};

struct Launch {
  const svod::Program& program;
  std::vector<svod::Buffer> buffers;
};

Launch prepare(const Kernel& kernel, svod::CpuDevice& device, const svod::Program& program) {
  Launch launch{program, {}};
  for (const size_t count : kernel.buffer_counts) {
    svod::Buffer b = device.allocate(svod::DType::F32, count);
    auto values = b.span<float>();
    for (size_t i = 0; i < values.size(); ++i) values[i] = 1.0f + float(i % 7) * 0.25f;
    launch.buffers.push_back(b);
  }
  return launch;
}

// The fastest of 25 launches of each build, in ms. The two builds alternate,
// so that load from elsewhere on the machine falls on both alike; the
// fastest launch is the least disturbed one.
std::pair<double, double> run_times(const Kernel& kernel, const Launch& a, const Launch& b) {
  double best_a = 1e300, best_b = 1e300;
  for (int i = 0; i < 26; ++i) {
    for (const Launch* launch : {&a, &b}) {
      const auto start = Clock::now();
      launch->program.launch(launch->buffers, kernel.scalars);
      const double ms = ms_since(start);
      if (i == 0) continue;  // warm-up
      (launch == &a ? best_a : best_b) = std::min(launch == &a ? best_a : best_b, ms);
    }
  }
  return {best_a, best_b};
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  const std::string filter = argc > 2 ? argv[2] : "";
  // Run-time builds must compile, not read the disk cache: no cache directory.
  svod::set_object_cache(std::make_shared<svod::ObjectCache>(svod::ObjectCacheConfig{}));

  auto clang = svod::cpu_device(svod::CpuCompiler::Clang);
  auto llvm = svod::cpu_device(svod::CpuCompiler::Llvm);
  // The first in-process compile pays for the plugin and LLVM's set-up; keep
  // that out of the per-kernel figures (it is in BM_ColdStart of bench_backends).
  (void)llvm->compiler().compile(elementwise_chain(2, 1, false).spec);

  fmt::print("{:<22} {:>5} | {:>9} {:>9} {:>6} | {:>7} {:>7} {:>7} {:>6} | {:>9} {:>9} {:>6}\n", "kernel", "lines",
             "clang ms", "llvm ms", "ratio", "front", "opt", "codegen", "load", "run clang", "run llvm", "ratio");
  double total_clang = 0, total_llvm = 0, worst_run = 0;
  svod::CompilePhases total_phases;
  double total_load = 0;
  for (const Kernel& kernel : corpus()) {
    if (!filter.empty() && kernel.spec.entry.find(filter) == std::string::npos) continue;
    std::vector<double> clang_ms, llvm_ms, front, opt, codegen, load;
    std::vector<std::byte> first_object;
    for (int r = 0; r < repeats; ++r) {
      const double children = children_cpu_ms(), self = thread_cpu_ms();
      (void)clang->compiler().compile(kernel.spec);
      clang_ms.push_back(children_cpu_ms() - children + thread_cpu_ms() - self);
      const double before = process_cpu_ms();
      svod::Artifact artifact = llvm->compiler().compile(kernel.spec);
      llvm_ms.push_back(process_cpu_ms() - before);
      front.push_back(artifact.phases.front_end_ms);
      opt.push_back(artifact.phases.optimise_ms);
      codegen.push_back(artifact.phases.codegen_ms);
      const double loading = thread_cpu_ms();
      auto image = svod::LoadedImage::load(std::span<const std::byte>(artifact.bytes));
      load.push_back(thread_cpu_ms() - loading);
      if (r == 0) {
        first_object = artifact.bytes;
      } else if (artifact.bytes != first_object) {
        fmt::print(stderr, "{}: the llvm compiler produced a different object on compile {}\n", kernel.spec.entry,
                   r + 1);
        return 1;
      }
    }
    const auto clang_program = clang->compile(kernel.spec);
    const auto llvm_program = llvm->compile(kernel.spec);
    const auto [run_clang, run_llvm] = run_times(kernel, prepare(kernel, *clang, *clang_program),
                                                 prepare(kernel, *llvm, *llvm_program));
    const double c = median(clang_ms), l = median(llvm_ms);
    total_clang += c;
    total_llvm += l;
    total_phases.front_end_ms += median(front);
    total_phases.optimise_ms += median(opt);
    total_phases.codegen_ms += median(codegen);
    total_load += median(load);
    worst_run = std::max(worst_run, run_llvm / run_clang);
    fmt::print("{:<22} {:>5} | {:>9.1f} {:>9.1f} {:>6.2f} | {:>7.1f} {:>7.1f} {:>7.1f} {:>6.2f} | {:>9.3f} {:>9.3f} {:>6.2f}\n",
               kernel.spec.entry, count_lines(kernel.spec.source), c, l, l / c, median(front), median(opt),
               median(codegen), median(load), run_clang, run_llvm, run_llvm / run_clang);
  }
  fmt::print("{:<22} {:>5} | {:>9.1f} {:>9.1f} {:>6.2f} | {:>7.1f} {:>7.1f} {:>7.1f} {:>6.2f} | worst run ratio {:.2f}\n",
             "total", "", total_clang, total_llvm, total_llvm / total_clang, total_phases.front_end_ms,
             total_phases.optimise_ms, total_phases.codegen_ms, total_load, worst_run);
  return 0;
}
