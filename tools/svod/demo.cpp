// `svod demo`: the CPU path end to end on a few real kernels — compile with
// clang, load with svod's ELF loader, launch, check against a host reference,
// and print results with timings.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "svod/base/thread_pool.h"
#include "svod/registry/registry.h"
#include "tools/svod/commands.h"

namespace svod::cli {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Median wall time of `runs` launches, in microseconds.
template <typename Fn>
double median_us(int runs, Fn&& fn) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    auto start = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Compiled {
  std::shared_ptr<const Program> program;
  double compile_ms;
};

Compiled compile(Device& cpu, const ProgramSpec& spec) {
  auto start = Clock::now();
  auto program = cpu.compile(spec);
  return {program, ms_since(start)};
}

bool report(const char* name, double compile_ms, double run_us, double max_err, double tol, const std::string& detail) {
  bool ok = max_err <= tol;
  fmt::print("{:<10} compile {:6.1f} ms   run {:9.1f} us   max error {:.2e}  {}  {}\n", name, compile_ms, run_us,
             max_err, ok ? "ok" : "MISMATCH", detail);
  return ok;
}

}  // namespace

int demo() {
  auto cpu = open_device("CPU");
  bool ok = true;
  fmt::print("svod demo on {} with {} threads\n", cpu->name(), thread_count());

  {  // 1M-element float add
    const int n = 1 << 20;
    ProgramSpec spec;
    spec.entry = "add";
    spec.source =
        "void add(float* restrict o, const float* restrict a, const float* restrict b, int n) {\n"
        "  for (int i = 0; i < n; i++) o[i] = a[i] + b[i];\n}\n";
    spec.buffers = {{"o", Access::Write, DType::F32, Expr::parse("n")}, {"a", Access::Read, DType::F32, Expr::parse("n")},
                    {"b", Access::Read, DType::F32, Expr::parse("n")}};
    spec.scalars = {{"n", ScalarType::I32, 0, std::nullopt}};
    auto c = compile(*cpu, spec);
    Buffer o = cpu->allocate(DType::F32, n), a = cpu->allocate(DType::F32, n), b = cpu->allocate(DType::F32, n);
    for (int i = 0; i < n; ++i) a.span<float>()[i] = 0.5f * i, b.span<float>()[i] = 2.0f - i;
    Buffer args[] = {o, a, b};
    int64_t scalars[] = {n};
    double us = median_us(20, [&] { c.program->launch(args, scalars); });
    double err = 0;
    for (int i = 0; i < n; ++i) err = std::max(err, double(std::fabs(o.span<float>()[i] - (0.5f * i + 2.0f - i))));
    ok &= report("add", c.compile_ms, us, err, 0.0,
                 fmt::format("n={} ({:.1f} GB/s), o[:3]=[{}, {}, {}]", n, 12.0 * n / (us * 1e3), o.span<float>()[0],
                             o.span<float>()[1], o.span<float>()[2]));
  }

  {  // matmul split over core_id slices, one per thread
    const int m = 256;
    const int cores = thread_count();
    ProgramSpec spec;
    spec.entry = "matmul";
    spec.source =
        "void matmul(float* restrict c, const float* restrict a, const float* restrict b, int core_id) {\n"
        "  int rows = (M + CORES - 1) / CORES, r0 = core_id * rows, r1 = r0 + rows < M ? r0 + rows : M;\n"
        "  for (int i = r0; i < r1; i++) {\n"
        "    for (int j = 0; j < M; j++) c[i * M + j] = 0.0f;\n"
        "    for (int k = 0; k < M; k++) {\n"
        "      float aik = a[i * M + k];\n"
        "      for (int j = 0; j < M; j++) c[i * M + j] += aik * b[k * M + j];\n"
        "    }\n  }\n}\n";
    spec.defines = {{"M", std::to_string(m)}, {"CORES", std::to_string(cores)}};
    spec.buffers = {{"c", Access::Write}, {"a", Access::Read}, {"b", Access::Read}};
    spec.scalars = {{"core_id", ScalarType::I32}};
    spec.global_size[0] = Expr::constant(cores);
    auto c = compile(*cpu, spec);
    Buffer cc = cpu->allocate(DType::F32, m * m), a = cpu->allocate(DType::F32, m * m), b = cpu->allocate(DType::F32, m * m);
    for (int i = 0; i < m * m; ++i) a.span<float>()[i] = float(i % 7) - 3, b.span<float>()[i] = float(i % 5) * 0.25f;
    Buffer args[] = {cc, a, b};
    double us = median_us(10, [&] { c.program->launch(args, {}); });
    double err = 0;
    for (int i = 0; i < m; i += 17)
      for (int j = 0; j < m; j += 13) {
        double ref = 0;
        for (int k = 0; k < m; ++k) ref += double(a.span<float>()[i * m + k]) * b.span<float>()[k * m + j];
        err = std::max(err, std::fabs(ref - cc.span<float>()[i * m + j]));
      }
    ok &= report("matmul", c.compile_ms, us, err, 1e-3,
                 fmt::format("{}x{} in {} core_id slices ({:.1f} GFLOP/s)", m, m, cores, 2.0 * m * m * m / (us * 1e3)));
  }

  {  // softmax through libm's expf
    const int n = 4096;
    ProgramSpec spec;
    spec.entry = "softmax";
    spec.source =
        "#include <math.h>\n"
        "void softmax(float* restrict o, const float* restrict x, int n) {\n"
        "  float m = x[0], s = 0.0f;\n"
        "  for (int i = 1; i < n; i++) m = x[i] > m ? x[i] : m;\n"
        "  for (int i = 0; i < n; i++) { o[i] = expf(x[i] - m); s += o[i]; }\n"
        "  for (int i = 0; i < n; i++) o[i] /= s;\n}\n";
    spec.buffers = {{"o", Access::Write, DType::F32, Expr::parse("n")}, {"x", Access::Read, DType::F32, Expr::parse("n")}};
    spec.scalars = {{"n", ScalarType::I32, 1, std::nullopt}};
    auto c = compile(*cpu, spec);
    Buffer o = cpu->allocate(DType::F32, n), x = cpu->allocate(DType::F32, n);
    for (int i = 0; i < n; ++i) x.span<float>()[i] = std::sin(0.01f * i) * 4;
    Buffer args[] = {o, x};
    int64_t scalars[] = {n};
    double us = median_us(20, [&] { c.program->launch(args, scalars); });
    double mx = *std::max_element(x.span<float>().begin(), x.span<float>().end()), sum = 0, err = 0;
    for (int i = 0; i < n; ++i) sum += std::exp(double(x.span<float>()[i]) - mx);
    for (int i = 0; i < n; ++i) err = std::max(err, std::fabs(std::exp(double(x.span<float>()[i]) - mx) / sum - o.span<float>()[i]));
    ok &= report("softmax", c.compile_ms, us, err, 1e-6, fmt::format("n={}, o[:2]=[{:.6g}, {:.6g}]", n, o.span<float>()[0], o.span<float>()[1]));
  }
  fmt::print("{}\n", ok ? "all kernels match their references" : "some kernels did not match");
  return ok ? 0 : 1;
}

}  // namespace svod::cli
