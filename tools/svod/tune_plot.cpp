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

#include "svod/tune/time_scale.h"
#include "tools/svod/svg.h"

namespace svod::cli {
namespace {

constexpr double kWidth = 820, kHeight = 480;
constexpr double kLeft = 80, kRight = 20, kTop = 40, kBottom = 60;
constexpr double kPlotWidth = kWidth - kLeft - kRight, kPlotHeight = kHeight - kTop - kBottom;

// Where the plot puts things: a column per round across, median times up on
// a log scale from 10^log_lo to 10^log_hi ns, the ends of `axis`.
struct Scales {
  size_t rounds = 1;
  double log_lo = 0, log_hi = 1;
  TimeAxis axis;

  // The slot-th of `slots` places spread across round `round`'s column.
  double x(size_t round, size_t slot, size_t slots) const {
    const double column = kPlotWidth / static_cast<double>(rounds);
    return kLeft + column * (static_cast<double>(round) + (static_cast<double>(slot) + 1) / (static_cast<double>(slots) + 1));
  }
  double y(double ns) const {
    return kTop + kPlotHeight * (1 - (std::log10(std::max(ns, 1.0)) - log_lo) / (log_hi - log_lo));
  }
};

// Scales that hold every round and every candidate that ran.
Scales scales_of(const std::vector<TuneCandidate>& candidates) {
  double lo = std::numeric_limits<double>::max(), hi = 0;
  size_t rounds = 1;
  for (const auto& c : candidates) {
    rounds = std::max(rounds, c.round + 1);
    if (c.status != TuneStatus::Ok) continue;
    lo = std::min(lo, c.median_ns);
    hi = std::max(hi, c.median_ns);
  }
  if (hi <= 0) lo = hi = 1;  // nothing ran: an empty frame
  // Round numbers around the data (1, 2, 5 times a power of ten), so the
  // axis labels read "50 µs", "100 µs", "200 µs".
  TimeAxis axis = log_time_axis(lo, hi);
  const double log_lo = std::log10(axis.lo_ns), log_hi = std::log10(axis.hi_ns);
  return Scales{.rounds = rounds, .log_lo = log_lo, .log_hi = log_hi, .axis = std::move(axis)};
}

// Axes: time ticks on the left, rounds below, then the axis titles and the frame.
std::string axes_svg(const Scales& scales) {
  std::string svg;
  for (const TimeTick& tick : scales.axis.ticks) {
    const double y = scales.y(tick.ns);
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>"
        "<text class=\"tick\" x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
        kLeft, y, kWidth - kRight, kLeft - 6, y + 4, tick.label);
  }
  for (size_t r = 0; r < scales.rounds; ++r) {
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", scales.x(r, 0, 1),
                       kHeight - kBottom + 18, r == 0 ? std::string("start") : fmt::format("round {}", r));
  }
  svg += fmt::format(
      "<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">round</text>\n"
      "<text x=\"16\" y=\"{:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {:.1f})\">median time (log "
      "scale)</text>\n"
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n",
      kLeft + kPlotWidth / 2, kHeight - 16, kTop + kPlotHeight / 2, kTop + kPlotHeight / 2, kLeft, kTop, kPlotWidth,
      kPlotHeight);
  return svg;
}

// Where each candidate sits across: spread over its round's column, in order.
std::vector<double> candidate_xs(const std::vector<TuneCandidate>& candidates, const Scales& scales) {
  std::vector<size_t> per_round(scales.rounds, 0), slot(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) slot[i] = per_round[candidates[i].round]++;
  std::vector<double> xs(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i)
    xs[i] = scales.x(candidates[i].round, slot[i], per_round[candidates[i].round]);
  return xs;
}

// The best-so-far path: after each round, the best candidate seen by the pick
// rule (beats(), tuner.h), so it ends at the marked best; empty when no
// candidate ran.
std::string best_path_svg(const std::vector<TuneCandidate>& candidates, const Scales& scales,
                          const std::vector<double>& xs) {
  std::string path;
  std::optional<size_t> best;
  for (size_t r = 0; r < scales.rounds; ++r) {
    for (size_t i = 0; i < candidates.size(); ++i) {
      const TuneCandidate& c = candidates[i];
      if (c.round == r && beats(c, best ? &candidates[*best] : nullptr)) best = i;
    }
    if (!best) continue;
    path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "" : " ", xs[*best], scales.y(candidates[*best].median_ns));
  }
  if (path.empty()) return path;
  return fmt::format("<polyline class=\"best-path\" points=\"{}\" fill=\"none\" stroke=\"#2a7\" "
                     "stroke-width=\"2.5\"/>\n",
                     path);
}

// A mark per candidate, its <title> naming its parameters: a circle at its
// time (larger and green for the best) or, for a failed one, a cross.
std::string candidate_marks_svg(const TuneFile& file, const TuneReport& report, const Scales& scales,
                                const std::vector<double>& xs) {
  std::string svg;
  for (size_t i = 0; i < report.candidates.size(); ++i) {
    const TuneCandidate& c = report.candidates[i];
    const std::string params = file.describe(c.point);
    if (c.status == TuneStatus::Ok) {
      const bool is_best = i == report.best;
      svg += fmt::format(
          "<circle class=\"candidate\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\" stroke=\"#234\">"
          "<title>{}: {}{}</title></circle>\n",
          xs[i], scales.y(c.median_ns), is_best ? 7 : 4, is_best ? "#2a7" : "#69c", svg_escape(params),
          format_time(c.median_ns), is_best ? " (best)" : "");
    } else {
      // Failed candidates have no time: a cross along the top of their round.
      svg += fmt::format(
          "<path class=\"candidate\" d=\"M{0:.1f},{1:.1f} l6,6 m0,-6 l-6,6\" transform=\"translate(-3 -3)\" "
          "stroke=\"#c33\" stroke-width=\"2\"><title>{2}: {3}</title></path>\n",
          xs[i], kTop + 8, svg_escape(params), to_string(c.status));
    }
  }
  return svg;
}

}  // namespace

std::string tune_svg(const TuneFile& file, const TuneReport& report) {
  const auto& candidates = report.candidates;
  const Scales scales = scales_of(candidates);
  const std::vector<double> xs = candidate_xs(candidates, scales);
  std::string svg = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" font-size=\"15\">{3}</text>\n",
      kWidth, kHeight, kLeft,
      svg_escape(fmt::format("svod tune {}: program \"{}\", {} candidates", file.source_name, file.program().name,
                             candidates.size())));
  svg += axes_svg(scales);
  svg += best_path_svg(candidates, scales, xs);
  svg += candidate_marks_svg(file, report, scales, xs);
  svg += "</svg>\n";
  return svg;
}

void write_tune_svg(const TuneFile& file, const TuneReport& report, const std::filesystem::path& path) {
  write_svg(tune_svg(file, report), path);
}

}  // namespace svod::cli
