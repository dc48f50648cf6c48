// `svod tune --plot FILE.svg`: each candidate's median time by round, on a
// log scale, with the best-so-far path drawn through the rounds. Plain SVG
// written here, so no browser, Python or plotting library is needed; every
// candidate is a mark with a <title> naming its parameters, time and status.
#include "tools/svod/tune_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "tools/svod/svg.h"

namespace svod::cli {
namespace {

constexpr double kWidth = 820, kHeight = 480;
constexpr double kLeft = 80, kRight = 20, kTop = 40, kBottom = 60;

}  // namespace

std::string tune_svg(const TuneFile& file, const TuneReport& report) {
  const auto& candidates = report.candidates;
  double lo = std::numeric_limits<double>::max(), hi = 0;
  size_t rounds = 1;
  for (const auto& c : candidates) {
    rounds = std::max(rounds, c.round + 1);
    if (c.status != TuneStatus::Ok) continue;
    lo = std::min(lo, c.median_ns);
    hi = std::max(hi, c.median_ns);
  }
  if (hi <= 0) lo = hi = 1;  // nothing ran: an empty frame
  // Whole decades around the data, so the axis labels are round numbers.
  const double log_lo = std::floor(std::log10(std::max(lo, 1.0)));
  const double log_hi = std::max(std::ceil(std::log10(std::max(hi, 1.0))), log_lo + 1);
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto x_of = [&](size_t round, size_t slot, size_t slots) {
    const double column = plot_w / static_cast<double>(rounds);
    return kLeft + column * (static_cast<double>(round) + (static_cast<double>(slot) + 1) / (static_cast<double>(slots) + 1));
  };
  auto y_of = [&](double ns) {
    return kTop + plot_h * (1 - (std::log10(std::max(ns, 1.0)) - log_lo) / (log_hi - log_lo));
  };

  std::string svg = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" font-size=\"15\">{3}</text>\n",
      kWidth, kHeight, kLeft,
      svg_escape(fmt::format("svod tune {}: program \"{}\", {} candidates", file.source_name, file.program().name,
                         candidates.size())));
  // Axes: decades on the left, rounds below.
  for (double d = log_lo; d <= log_hi; ++d) {
    const double y = y_of(std::pow(10.0, d));
    const double us = std::pow(10.0, d) / 1e3;
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:g} us</text>\n",
        kLeft, y, kWidth - kRight, kLeft - 6, y + 4, us);
  }
  for (size_t r = 0; r < rounds; ++r) {
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x_of(r, 0, 1),
                       kHeight - kBottom + 18, r == 0 ? std::string("start") : fmt::format("round {}", r));
  }
  svg += fmt::format(
      "<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">round</text>\n"
      "<text x=\"16\" y=\"{:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {:.1f})\">median time (log "
      "scale)</text>\n"
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n",
      kLeft + plot_w / 2, kHeight - 16, kTop + plot_h / 2, kTop + plot_h / 2, kLeft, kTop, plot_w, plot_h);

  // Where each candidate sits: spread across its round's column.
  std::vector<size_t> per_round(rounds, 0), slot(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) slot[i] = per_round[candidates[i].round]++;
  auto point = [&](size_t i) {
    const TuneCandidate& c = candidates[i];
    return std::pair{x_of(c.round, slot[i], per_round[c.round]), y_of(c.median_ns)};
  };

  // The best-so-far path: after each round, the fastest candidate seen.
  std::string path;
  std::optional<size_t> best;
  for (size_t r = 0; r < rounds; ++r) {
    for (size_t i = 0; i < candidates.size(); ++i) {
      const TuneCandidate& c = candidates[i];
      if (c.round == r && c.status == TuneStatus::Ok && (!best || c.median_ns < candidates[*best].median_ns)) best = i;
    }
    if (!best) continue;
    const auto [x, y] = point(*best);
    path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "" : " ", x, y);
  }
  if (!path.empty()) {
    svg += fmt::format("<polyline class=\"best-path\" points=\"{}\" fill=\"none\" stroke=\"#2a7\" "
                       "stroke-width=\"2.5\"/>\n",
                       path);
  }

  for (size_t i = 0; i < candidates.size(); ++i) {
    const TuneCandidate& c = candidates[i];
    const std::string params = file.describe(c.point);
    if (c.status == TuneStatus::Ok) {
      const auto [x, y] = point(i);
      const bool is_best = i == report.best;
      svg += fmt::format(
          "<circle class=\"candidate\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\" stroke=\"#234\">"
          "<title>{}: {:.2f} us{}</title></circle>\n",
          x, y, is_best ? 7 : 4, is_best ? "#2a7" : "#69c", svg_escape(params), c.median_ns / 1e3,
          is_best ? " (best)" : "");
    } else {
      // Failed candidates have no time: a cross along the top of their round.
      const double x = x_of(c.round, slot[i], per_round[c.round]), y = kTop + 8;
      svg += fmt::format(
          "<path class=\"candidate\" d=\"M{0:.1f},{1:.1f} l6,6 m0,-6 l-6,6\" transform=\"translate(-3 -3)\" "
          "stroke=\"#c33\" stroke-width=\"2\"><title>{2}: {3}</title></path>\n",
          x, y, svg_escape(params), to_string(c.status));
    }
  }
  svg += "</svg>\n";
  return svg;
}

void write_tune_svg(const TuneFile& file, const TuneReport& report, const std::filesystem::path& path) {
  write_svg(tune_svg(file, report), path);
}

}  // namespace svod::cli
