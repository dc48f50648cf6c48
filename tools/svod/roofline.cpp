// `svod bench PLAN --plot FILE.svg`: a roofline of this machine's CPU with
// every timed op at its arithmetic intensity.
//
// The roof is measured by svod itself with two small kernels run on every
// thread of the pool: independent multiply-adds in registers (peak GFLOP/s)
// and a triad a = b + s*c over 64 MiB arrays (memory GB/s); each is the best
// of a few runs. The figures are kept in the object cache's folder as
// machine.json, keyed by the CPU model and thread count, so they are
// measured once per machine.
#include "tools/svod/roofline.h"

#include <fmt/format.h>


#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "svod/base/error.h"
#include "svod/base/file_read.h"
#include "svod/base/file_write.h"
#include "svod/base/json_depth.h"
#include "svod/base/thread_pool.h"
#include "svod/cache/object_cache.h"
#include "svod/registry/registry.h"
#include "tools/svod/svg.h"

namespace svod::cli {
namespace {

namespace fs = std::filesystem;

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

// Best wall time of `runs` launches, in seconds.
double best_seconds(const Program& program, std::span<const Buffer> buffers, std::span<const int64_t> scalars,
                    int runs) {
  double best = 1e30;
  for (int r = 0; r < runs; ++r) {
    const auto start = std::chrono::steady_clock::now();
    program.launch(buffers, scalars);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

MachinePeaks measure_peaks() {
  auto cpu = open_device("CPU");
  const int64_t slices = thread_count();
  MachinePeaks peaks;
  {
    // 32 independent lanes per slice: enough chains to hide FMA latency, and
    // vectorised by the compiler.
    ProgramSpec spec;
    spec.name = spec.entry = "svod_peak_flops";
    spec.source =
        "void svod_peak_flops(float* out, long iters, int core_id) {\n"
        "  float acc[32];\n"
        "  for (int k = 0; k < 32; k++) acc[k] = (float)(k + core_id);\n"
        "  for (long i = 0; i < iters; i++)\n"
        "    for (int k = 0; k < 32; k++) acc[k] = acc[k] * 0.999999f + 0.5f;\n"
        "  float s = 0; for (int k = 0; k < 32; k++) s += acc[k];\n"
        "  out[core_id] = s;\n"
        "}\n";
    spec.buffers = {{"out", Access::Write}};
    spec.scalars = {{"iters", ScalarType::I64}, {"core_id", ScalarType::I32}};
    spec.global_size[0] = Expr::constant(slices);
    auto program = cpu->compile(spec);
    const Buffer out = cpu->allocate(DType::F32, static_cast<size_t>(slices));
    const Buffer buffers[] = {out};
    constexpr int64_t kIters = 2'000'000;
    const int64_t scalars[] = {kIters};
    const double s = best_seconds(*program, buffers, scalars, 3);
    peaks.gflops = static_cast<double>(slices) * kIters * 32 * 2 / s / 1e9;
  }
  {
    ProgramSpec spec;
    spec.name = spec.entry = "svod_peak_bandwidth";
    spec.source =
        "void svod_peak_bandwidth(float* restrict a, const float* restrict b, const float* restrict c, long n,\n"
        "                         int slices, int core_id) {\n"
        "  long begin = n * core_id / slices, end = n * (core_id + 1) / slices;\n"
        "  for (long i = begin; i < end; i++) a[i] = b[i] + 3.0f * c[i];\n"
        "}\n";
    spec.buffers = {{"a", Access::Write}, {"b"}, {"c"}};
    spec.scalars = {{"n", ScalarType::I64}, {"slices", ScalarType::I32}, {"core_id", ScalarType::I32}};
    spec.global_size[0] = Expr::constant(slices);
    auto program = cpu->compile(spec);
    constexpr int64_t kCount = int64_t{16} << 20;  // 64 MiB per array
    const Buffer a = cpu->allocate(DType::F32, kCount), b = cpu->allocate(DType::F32, kCount),
                 c = cpu->allocate(DType::F32, kCount);
    std::fill_n(b.span<float>().data(), kCount, 1.0f);
    std::fill_n(c.span<float>().data(), kCount, 2.0f);
    const Buffer buffers[] = {a, b, c};
    const int64_t scalars[] = {kCount, slices};
    const double s = best_seconds(*program, buffers, scalars, 5);
    peaks.gbps = 3.0 * 4 * static_cast<double>(kCount) / s / 1e9;
  }
  return peaks;
}


}  // namespace

MachinePeaks machine_peaks() {
  const std::string key = fmt::format("{} / {} threads", cpu_model(), thread_count());
  const fs::path folder = ObjectCacheConfig::from_env().directory;
  const fs::path file = folder.empty() ? fs::path() : folder / "machine.json";
  if (!file.empty()) {
    // Best effort: anything but a readable regular file (a FIFO is not even
    // waited on) means measuring again, and so does a file nested deeper than
    // the limit (no file of ours, and it would overflow the stack).
    std::string text;
    if (const RegularFile opened = try_open_regular_file(file); opened.fd) {
      try {
        text = read_to_end(opened.fd, file, "machine peaks");
      } catch (const Error&) {
      }
    }
    const auto cached = json_too_deep_at(text) ? nlohmann::json()
                                               : nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (cached.is_object() && cached.contains("gflops") && cached.contains("gbps") &&
        cached.at("gflops").is_number() && cached.at("gbps").is_number() &&
        cached.value("machine", std::string()) == key) {
      const MachinePeaks peaks{cached.at("gflops").get<double>(), cached.at("gbps").get<double>()};
      if (peaks.gflops > 0 && peaks.gbps > 0) return peaks;
    }
  }
  const MachinePeaks peaks = measure_peaks();
  if (!file.empty()) {
    // Best effort, like the object cache: peaks that cannot be saved are
    // measured again next time.
    std::error_code ec;
    fs::create_directories(folder, ec);
    try {
      write_file_atomically(file, nlohmann::json{{"machine", key}, {"gflops", peaks.gflops}, {"gbps", peaks.gbps}}.dump(1));
    } catch (const Error&) {
    }
  }
  return peaks;
}

std::string roofline_svg(const MachinePeaks& peaks, const std::vector<RooflinePoint>& points, std::string_view title) {
  constexpr double kWidth = 820, kHeight = 520, kLeft = 80, kRight = 30, kTop = 40, kBottom = 60;
  const double ridge = peaks.gflops / peaks.gbps;  // flops per byte where the roofs meet
  double ai_lo = ridge / 64, ai_hi = ridge * 16, perf_lo = peaks.gflops / 1e4;
  for (const auto& p : points) {
    ai_lo = std::min(ai_lo, p.intensity / 2);
    ai_hi = std::max(ai_hi, p.intensity * 2);
    perf_lo = std::min(perf_lo, p.gflops / 2);
  }
  const double x0 = std::floor(std::log10(ai_lo)), x1 = std::ceil(std::log10(ai_hi));
  const double y0 = std::floor(std::log10(perf_lo)), y1 = std::ceil(std::log10(peaks.gflops * 2));
  const double w = kWidth - kLeft - kRight, h = kHeight - kTop - kBottom;
  auto x_of = [&](double ai) { return kLeft + w * (std::log10(ai) - x0) / (x1 - x0); };
  auto y_of = [&](double gf) { return kTop + h * (1 - (std::log10(gf) - y0) / (y1 - y0)); };

  std::string svg = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" font-size=\"15\">{3}</text>\n",
      kWidth, kHeight, kLeft, svg_escape(title));
  for (double d = x0; d <= x1; ++d) {
    const double x = x_of(std::pow(10.0, d));
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/>"
                       "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4:g}</text>\n",
                       x, kTop, kTop + h, kTop + h + 16, std::pow(10.0, d));
  }
  for (double d = y0; d <= y1; ++d) {
    const double y = y_of(std::pow(10.0, d));
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>"
                       "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:g}</text>\n",
                       kLeft, y, kLeft + w, kLeft - 6, y + 4, std::pow(10.0, d));
  }
  svg += fmt::format(
      "<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">arithmetic intensity (flop/byte)</text>\n"
      "<text x=\"16\" y=\"{:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {:.1f})\">GFLOP/s</text>\n"
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n",
      kLeft + w / 2, kHeight - 14, kTop + h / 2, kTop + h / 2, kLeft, kTop, w, h);
  // The roofs: bandwidth × intensity up to the ridge, then the compute peak.
  const double start = std::pow(10.0, x0), end = std::pow(10.0, x1);
  const double start_perf = std::max(peaks.gbps * start, std::pow(10.0, y0));
  const double start_ai = start_perf / peaks.gbps;
  svg += fmt::format(
      "<polyline class=\"roof\" points=\"{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}\" fill=\"none\" stroke=\"#c33\" "
      "stroke-width=\"2.5\"/>\n"
      "<text class=\"peak\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" fill=\"#c33\">peak {:.1f} GFLOP/s, "
      "memory {:.1f} GB/s</text>\n",
      x_of(start_ai), y_of(start_perf), x_of(ridge), y_of(peaks.gflops), x_of(end), y_of(peaks.gflops),
      kLeft + w - 4, y_of(peaks.gflops) - 6, peaks.gflops, peaks.gbps);
  for (const auto& p : points) {
    const double x = x_of(p.intensity), y = y_of(p.gflops);
    svg += fmt::format(
        "<g class=\"op\"><circle cx=\"{0:.1f}\" cy=\"{1:.1f}\" r=\"5\" fill=\"#69c\" stroke=\"#234\"/>"
        "<text x=\"{2:.1f}\" y=\"{3:.1f}\">{4}</text><title>{4}: {5:.3g} flop/byte, {6:.3g} GFLOP/s</title></g>\n",
        x, y, x + 8, y + 4, svg_escape(p.label), p.intensity, p.gflops);
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace svod::cli
