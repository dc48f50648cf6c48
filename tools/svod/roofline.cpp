// `svod bench PLAN --plot FILE.svg`: a roofline of this machine's CPU with
// every timed op at its arithmetic intensity (the roofs come from peaks.h).
//
// Readable however many ops there are: a point carries only its number,
// placed where it covers no other text or point (beside the point when there
// is room, else farther out with a leader line); names and rates are a table
// below the plot, and the roofs' captions are placed the same way. There are
// no font metrics here, so every text's box is an estimate, generous enough
// that the rendered text stays inside it.
//
// Three roofs: the compute peak, the L1 cache's bandwidth (the memory roof
// that bounds every op, since `svod bench` runs an op many times and a small
// op's data stays in cache) and, dashed, DRAM's (what an op streaming from
// memory, or run with --flush, can reach). Nothing is hidden: a point above
// the roofs (timing noise, peaks measured while the machine was busy, or flop
// and byte counts higher than what the op does) says so beside it and in the
// table, and the ops that could not be plotted are listed with the reason.
#include "tools/svod/roofline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>

#include "tools/svod/svg.h"

namespace svod::cli {
namespace {

constexpr double kMargin = 16;
constexpr double kTitleSize = 15, kSize = 12, kSmall = 11;
constexpr double kMinWidth = 760;
constexpr double kPlotLeft = 70, kPlotRight = 24, kPlotTop = 98, kPlotHeight = 360;
constexpr double kRowHeight = 17;
constexpr double kRadius = 4.5;
constexpr double kPad = 1.5;             // kept free around every label
constexpr size_t kMaxTitleGlyphs = 64;   // longer op titles are cut in the table
constexpr const char* kRed = "#c33";

struct Box {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  bool overlaps(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
  bool within(const Box& o) const { return x0 >= o.x0 && y0 >= o.y0 && x1 <= o.x1 && y1 <= o.y1; }
  Box grown(double by) const { return {x0 - by, y0 - by, x1 + by, y1 + by}; }
};

size_t glyphs(std::string_view text) {
  return static_cast<size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

// Estimated advance: 0.62 em a character is about the widest average of the
// sans-serif faces renderers pick (DejaVu Sans: digits 0.64 em, lowercase
// less, capitals more), and kPad around every box takes up the rest.
double text_width(std::string_view text, double size) { return static_cast<double>(glyphs(text)) * size * 0.62; }

// An op's `title` cut to kMaxTitleGlyphs characters, the last an ellipsis
// (the point's tooltip keeps the whole title).
std::string cut(const std::string& title) {
  if (glyphs(title) <= kMaxTitleGlyphs) return title;
  size_t end = 0;
  for (size_t kept = 0; kept < kMaxTitleGlyphs - 1; ++kept) {
    ++end;  // past a character's first byte, then past its continuation bytes
    while (end < title.size() && (static_cast<unsigned char>(title[end]) & 0xC0) == 0x80) ++end;
  }
  return title.substr(0, end) + "…";
}

enum class Anchor { Start, Middle, End };

// One line of text, by its anchor point and baseline.
struct Text {
  double x = 0, baseline = 0;
  std::string text;
  double size = kSize;
  Anchor anchor = Anchor::Start;
  std::string extra;  // further attributes: class, fill

  double width() const { return text_width(text, size); }
  Box box() const {
    const double w = width();
    const double x0 = anchor == Anchor::Start ? x : anchor == Anchor::Middle ? x - w / 2 : x - w;
    return {x0, baseline - 0.8 * size, x0 + w, baseline + 0.25 * size};
  }
  std::string svg() const {
    const char* anchor_name = anchor == Anchor::Start ? "start" : anchor == Anchor::Middle ? "middle" : "end";
    return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{:g}\" text-anchor=\"{}\"{}{}>{}</text>\n", x,
                       baseline, size, anchor_name, extra.empty() ? "" : " ", extra, svg_escape(text));
  }
};

// A text whose box has its top left corner at (x, y).
Text text_at(double x, double y, std::string text, double size, std::string extra = {}) {
  return Text{x, y + 0.8 * size, std::move(text), size, Anchor::Start, std::move(extra)};
}

// Log-log scales of the plot frame.
struct Scales {
  Box frame;
  double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;  // decades
  double x(double intensity) const {
    return frame.x0 + (frame.x1 - frame.x0) * (std::log10(intensity) - x_lo) / (x_hi - x_lo);
  }
  double y(double gflops) const {
    return frame.y0 + (frame.y1 - frame.y0) * (1 - (std::log10(gflops) - y_lo) / (y_hi - y_lo));
  }
};

// Whole decades around the roofs' corners and every point, with room above
// the compute roof for its caption and for points above it.
Scales scales_of(const MachinePeaks& peaks, const std::vector<RooflinePoint>& points, const Box& frame) {
  double ai_lo = peaks.gflops / peaks.cache_gbps / 64, ai_hi = peaks.gflops / peaks.dram_gbps * 16;
  double perf_lo = peaks.gflops / 1e4, perf_hi = peaks.gflops * 2;
  for (const auto& p : points) {
    ai_lo = std::min(ai_lo, p.intensity / 2);
    ai_hi = std::max(ai_hi, p.intensity * 2);
    perf_lo = std::min(perf_lo, p.gflops / 2);
    perf_hi = std::max(perf_hi, p.gflops * 2);
  }
  return Scales{frame, std::floor(std::log10(ai_lo)), std::ceil(std::log10(ai_hi)), std::floor(std::log10(perf_lo)),
                std::ceil(std::log10(perf_hi))};
}

// Places boxes where they stay inside `area` and clear of every box placed
// or reserved before.
class Placer {
 public:
  explicit Placer(Box area) : area_(area) {}
  void reserve(const Box& box) { taken_.push_back(box); }
  bool fits(const Box& box) const {
    if (!box.within(area_)) return false;
    return std::none_of(taken_.begin(), taken_.end(), [&](const Box& t) { return t.overlaps(box); });
  }

 private:
  Box area_;
  std::vector<Box> taken_;
};

// A point's label: its number, and by how much it is above a roof if it is.
struct PlacedLabel {
  Text text;
  std::optional<std::pair<double, double>> leader_end;  // where a leader line from the point meets the label
};

// The label's box (with its padding) at its first free place around the
// point: beside it in one of eight directions, else on rings ever farther out.
PlacedLabel place_label(Placer& placer, double cx, double cy, std::string text, const std::string& extra) {
  const double w = text_width(text, kSmall) + 2 * kPad, h = 1.05 * kSmall + 2 * kPad;
  auto make = [&](double x0, double y0, bool leader) {
    PlacedLabel label{text_at(x0 + kPad, y0 + kPad, text, kSmall, extra), std::nullopt};
    if (leader) {
      const double lx = std::clamp(cx, x0, x0 + w), ly = std::clamp(cy, y0, y0 + h);
      label.leader_end = {lx, ly};
    }
    return label;
  };
  const double gap = kRadius + kPad + 1;  // clear of the point's own reserved box
  const std::pair<double, double> beside[] = {
      {cx + gap, cy - h / 2},     {cx - gap - w, cy - h / 2}, {cx - w / 2, cy - gap - h}, {cx - w / 2, cy + gap},
      {cx + gap, cy - gap - h},   {cx - gap - w, cy - gap - h}, {cx + gap, cy + gap},     {cx - gap - w, cy + gap}};
  for (const auto& [x0, y0] : beside) {
    if (placer.fits({x0, y0, x0 + w, y0 + h})) {
      placer.reserve({x0, y0, x0 + w, y0 + h});
      return make(x0, y0, false);
    }
  }
  for (double d = gap + h; d < 2000; d += 6) {  // out to well beyond any frame
    const int steps = static_cast<int>(std::ceil(2 * std::numbers::pi * d / 8));
    for (int s = 0; s < steps; ++s) {
      const double angle = 2 * std::numbers::pi * s / steps;
      const double x0 = cx + d * std::cos(angle) - w / 2, y0 = cy - d * std::sin(angle) - h / 2;
      if (placer.fits({x0, y0, x0 + w, y0 + h})) {
        placer.reserve({x0, y0, x0 + w, y0 + h});
        return make(x0, y0, true);
      }
    }
  }
  // A frame full of labels: beside the point, and the overlap is visible.
  return make(cx + gap, cy - h / 2, false);
}

// The table below the plot: a row per point, and where its columns are.
struct Row {
  std::string number, op, gflops, gbps, intensity, note;
};
struct Table {
  std::vector<Row> rows;
  // Numbers right-aligned at their column's end, the op's title and the note
  // left-aligned at their start, 16 px between columns.
  double number_end = 0, op_x = 0, gflops_end = 0, gbps_end = 0, intensity_end = 0, note_x = 0, end = 0;
};

const Row kHeader{"#", "op", "GFLOP/s", "GB/s", "flop/byte", ""};

Table table_of(const MachinePeaks& peaks, const std::vector<RooflinePoint>& points) {
  Table t;
  for (size_t i = 0; i < points.size(); ++i) {
    const RooflinePoint& p = points[i];
    const RoofExcess excess = roof_excess(peaks, p);
    t.rows.push_back({std::to_string(i + 1), cut(p.title), fmt::format("{:.2f}", p.gflops),
                      fmt::format("{:.2f}", p.gflops / p.intensity), fmt::format("{:.3g}", p.intensity),
                      excess.fraction > 0 ? roof_excess_text(excess) : std::string()});
  }
  auto widest = [&](std::string Row::*field) {
    double w = text_width(kHeader.*field, kSize);
    for (const Row& r : t.rows) w = std::max(w, text_width(r.*field, kSize));
    return w;
  };
  t.number_end = kMargin + widest(&Row::number);
  t.op_x = t.number_end + 10;
  t.gflops_end = t.op_x + widest(&Row::op) + 16 + widest(&Row::gflops);
  t.gbps_end = t.gflops_end + 16 + widest(&Row::gbps);
  t.intensity_end = t.gbps_end + 16 + widest(&Row::intensity);
  t.note_x = t.intensity_end + 16;
  t.end = t.note_x + widest(&Row::note);
  return t;
}

// One row at baseline y.
std::string row_svg(const Table& t, const Row& r, double y, const std::string& extra) {
  std::string svg = Text{t.number_end, y, r.number, kSize, Anchor::End, extra}.svg() +
                    Text{t.op_x, y, r.op, kSize, Anchor::Start, extra}.svg() +
                    Text{t.gflops_end, y, r.gflops, kSize, Anchor::End, extra}.svg() +
                    Text{t.gbps_end, y, r.gbps, kSize, Anchor::End, extra}.svg() +
                    Text{t.intensity_end, y, r.intensity, kSize, Anchor::End, extra}.svg();
  if (!r.note.empty())
    svg += Text{t.note_x, y, r.note, kSize, Anchor::Start, fmt::format("fill=\"{}\" class=\"note\"", kRed)}.svg();
  return svg;
}

// Grid lines and values at every decade, the axis titles and the frame.
std::string axes_svg(const Scales& sc) {
  const Box& frame = sc.frame;
  std::string svg;
  for (double d = sc.x_lo; d <= sc.x_hi; ++d) {
    const double x = sc.x(std::pow(10.0, d));
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/>\n", x, frame.y0,
                       frame.y1);
    svg += Text{x, frame.y1 + 16, fmt::format("{:g}", std::pow(10.0, d)), kSize, Anchor::Middle, {}}.svg();
  }
  for (double d = sc.y_lo; d <= sc.y_hi; ++d) {
    const double y = sc.y(std::pow(10.0, d));
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>\n", frame.x0, y,
                       frame.x1);
    svg += Text{frame.x0 - 6, y + 4, fmt::format("{:g}", std::pow(10.0, d)), kSize, Anchor::End, {}}.svg();
  }
  svg += Text{(frame.x0 + frame.x1) / 2, frame.y1 + 36, "arithmetic intensity (flop/byte)", kSize, Anchor::Middle, {}}
             .svg();
  svg += Text{frame.x0 - 6, frame.y0 - 12, "GFLOP/s", kSize, Anchor::End, {}}.svg();
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n", frame.x0,
                     frame.y0, frame.x1 - frame.x0, frame.y1 - frame.y0);
  return svg;
}

// The roofs: L1 bandwidth × intensity up to where it meets the compute peak,
// then the peak; DRAM bandwidth × intensity dashed below. Then their
// captions, each where it cannot cross its own line and clear of everything
// in `placer` (the points): the compute caption just above the flat roof
// (only points above the roofs can be there), as far right as is free, else
// just below it right of the DRAM ridge; the L1 caption above and left of a
// point of its slanted roof; the DRAM caption below and right of a point of
// its line. A caption that finds no room is left to the legend.
std::string roofs_svg(const MachinePeaks& peaks, const Scales& sc, Placer& placer) {
  auto slant_start = [&](double gbps) {
    const double perf = std::max(gbps * std::pow(10.0, sc.x_lo), std::pow(10.0, sc.y_lo));
    return std::pair{sc.x(perf / gbps), sc.y(perf)};
  };
  const auto [cache_x0, cache_y0] = slant_start(peaks.cache_gbps);
  const auto [dram_x0, dram_y0] = slant_start(peaks.dram_gbps);
  const double ry = sc.y(peaks.gflops);
  const double cache_rx = sc.x(peaks.gflops / peaks.cache_gbps), dram_rx = sc.x(peaks.gflops / peaks.dram_gbps);
  std::string svg = fmt::format(
      "<polyline class=\"roof\" data-gflops=\"{:.6g}\" data-cache-gbps=\"{:.6g}\" data-dram-gbps=\"{:.6g}\" "
      "points=\"{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2.5\"/>\n"
      "<line class=\"dram\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"1.5\" "
      "stroke-dasharray=\"6 4\"/>\n",
      peaks.gflops, peaks.cache_gbps, peaks.dram_gbps, cache_x0, cache_y0, cache_rx, ry, sc.frame.x1, ry, kRed,
      dram_x0, dram_y0, dram_rx, ry, kRed);

  const std::string attributes = fmt::format("fill=\"{}\" class=\"peak\"", kRed);
  auto place = [&](const Text& t) {
    if (!placer.fits(t.box().grown(kPad))) return false;
    placer.reserve(t.box().grown(kPad));
    svg += t.svg();
    return true;
  };
  const std::string compute = fmt::format("compute {:.1f} GFLOP/s", peaks.gflops);
  bool placed = false;
  for (double x = sc.frame.x1 - 6; !placed && x > sc.frame.x0; x -= 20)
    placed = place({x, ry - 6, compute, kSize, Anchor::End, attributes});
  for (double x = sc.frame.x1 - 6; !placed && x > dram_rx; x -= 20) {
    const Text below{x, ry + 6 + 0.8 * kSize, compute, kSize, Anchor::End, attributes};
    if (below.box().x0 > dram_rx + 2) placed = place(below);
  }
  constexpr double kAlong[] = {0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8, 0.1, 0.9};
  const std::string cache = fmt::format("L1 cache {:.1f} GB/s", peaks.cache_gbps);
  for (double t : kAlong) {
    const double px = cache_x0 + t * (cache_rx - cache_x0), py = cache_y0 + t * (ry - cache_y0);
    if (place({px - 4, py - 6 - 0.25 * kSize, cache, kSize, Anchor::End, attributes})) break;
  }
  const std::string dram = fmt::format("{} {:.1f} GB/s", peaks.memory_roof, peaks.dram_gbps);
  for (double t : kAlong) {
    const double px = dram_x0 + t * (dram_rx - dram_x0), py = dram_y0 + t * (ry - dram_y0);
    if (place({px + 4, py + 6 + 0.8 * kSize, dram, kSize, Anchor::Start, attributes})) break;
  }
  return svg;
}

// A point at (cx, cy), numbered as in the table; red when above a roof, and
// then its label says by how much.
std::string point_svg(const RooflinePoint& point, const Row& row, double cx, double cy, Placer& placer) {
  const bool above = !row.note.empty();
  const PlacedLabel label =
      place_label(placer, cx, cy, above ? fmt::format("{}: {}", row.number, row.note) : row.number,
                  fmt::format("class=\"label\" data-n=\"{}\" fill=\"{}\" stroke=\"white\" stroke-width=\"3\" "
                              "paint-order=\"stroke\"",
                              row.number, above ? kRed : "#123"));
  std::string svg = fmt::format(
      "<g class=\"op\" data-n=\"{}\" data-gflops=\"{:.6g}\" data-intensity=\"{:.6g}\" data-above=\"{}\">"
      "<title>{}: {} GFLOP/s, {} GB/s, {} flop/byte</title>",
      row.number, point.gflops, point.intensity, above ? "true" : "false", svg_escape(point.title), row.gflops,
      row.gbps, row.intensity);
  if (label.leader_end)
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#999\"/>", cx, cy,
                       label.leader_end->first, label.leader_end->second);
  svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\" stroke=\"#234\"/>\n", cx, cy, kRadius,
                     above ? kRed : "#69c");
  return svg + label.text.svg() + "</g>\n";
}

}  // namespace

RoofExcess roof_excess(const MachinePeaks& peaks, const RooflinePoint& point) {
  const double memory_roof = peaks.cache_gbps * point.intensity;
  const bool memory_bound = memory_roof < peaks.gflops;
  const double roof = memory_bound ? memory_roof : peaks.gflops;
  return RoofExcess{memory_bound ? "L1 cache" : "compute", std::max(0.0, point.gflops / roof - 1)};
}

std::string roof_excess_text(const RoofExcess& excess) {
  if (excess.fraction < 1) return fmt::format("{:.1f}% above the {} roof", 100 * excess.fraction, excess.roof);
  return fmt::format("{:.3g} times the {} roof", 1 + excess.fraction, excess.roof);
}

std::string roofline_svg(const MachinePeaks& peaks, const std::vector<RooflinePoint>& points,
                         const std::vector<UnplottedOp>& unplotted, std::string_view title) {
  const Table table = table_of(peaks, points);
  // Above the plot: the title and how each roof was measured.
  const std::string red = fmt::format("fill=\"{}\"", kRed);
  const std::vector<Text> legend = {
      {kMargin, 22, std::string(title), kTitleSize, Anchor::Start, {}},
      {kMargin, 42, fmt::format("compute {:.1f} GFLOP/s: {}", peaks.gflops, peaks.compute_method), kSmall,
       Anchor::Start, red},
      {kMargin, 56,
       fmt::format("L1 cache {:.1f} GB/s, {} {:.1f} GB/s (dashed):", peaks.cache_gbps, peaks.memory_roof,
                   peaks.dram_gbps),
       kSmall, Anchor::Start, red},
      {kMargin, 70, peaks.memory_method, kSmall, Anchor::Start, red},
  };
  // As wide as the widest of the table, the legend and the unplotted list.
  double width = std::max(kMinWidth, table.end + kMargin);
  for (const Text& t : legend) width = std::max(width, t.box().x1 + kMargin);
  for (const UnplottedOp& u : unplotted)
    width = std::max(width, 2 * kMargin + text_width(cut(u.title) + " — " + u.reason, kSize));

  const Scales sc = scales_of(peaks, points, Box{kPlotLeft, kPlotTop, width - kPlotRight, kPlotTop + kPlotHeight});
  std::string body;
  for (const Text& t : legend) body += t.svg();
  body += axes_svg(sc);
  // Points first, so that captions and labels keep clear of all of them.
  Placer placer(sc.frame.grown(-2));
  std::vector<std::pair<double, double>> centres;
  for (const auto& p : points) {
    const double cx = sc.x(p.intensity), cy = sc.y(p.gflops);
    centres.emplace_back(cx, cy);
    placer.reserve(Box{cx - kRadius, cy - kRadius, cx + kRadius, cy + kRadius}.grown(kPad));
  }
  body += roofs_svg(peaks, sc, placer);
  for (size_t i = 0; i < points.size(); ++i)
    body += point_svg(points[i], table.rows[i], centres[i].first, centres[i].second, placer);

  // Below the plot: the table, what could not be plotted, and what the
  // points above the DRAM roof and the red ones mean.
  double y = sc.frame.y1 + 64;
  auto line = [&](const Text& t) {
    body += t.svg();
    y += kRowHeight;
  };
  auto row = [&](const Row& r, const std::string& extra) {
    body += row_svg(table, r, y, extra);
    y += kRowHeight;
  };
  if (table.rows.empty()) line({kMargin, y, "no op has flops and bytes to plot", kSize, Anchor::Start, {}});
  else row(kHeader, "fill=\"#555\"");
  for (const Row& r : table.rows) row(r, {});
  if (!unplotted.empty()) {
    y += kRowHeight / 2;
    line({kMargin, y, "not plotted:", kSize, Anchor::Start, "fill=\"#555\""});
    for (const UnplottedOp& u : unplotted)
      line({kMargin, y, cut(u.title) + " — " + u.reason, kSize, Anchor::Start, "class=\"unplotted\""});
  }
  const bool any_in_cache = std::any_of(points.begin(), points.end(), [&](const RooflinePoint& p) {
    return p.gflops > peaks.dram_gbps * p.intensity;
  });
  const bool any_above =
      std::any_of(table.rows.begin(), table.rows.end(), [](const Row& r) { return !r.note.empty(); });
  if (any_in_cache || any_above) y += kRowHeight / 2;
  if (any_in_cache)
    line({kMargin, y,
          peaks.memory_roof == "DRAM"
              ? std::string("Above the dashed DRAM roof: data stayed in cache between runs (--flush evicts it).")
              : fmt::format("Above the dashed {} roof: data stayed in a nearer cache between runs (--flush evicts "
                            "it). Free memory was too short for a DRAM roof.",
                            peaks.memory_roof),
          kSize, Anchor::Start, {}});
  if (any_above)
    line({kMargin, y, "Red: above the roofs, from timing noise, peaks measured on a busy machine, or counts too high.",
          kSize, Anchor::Start, red});

  const double height = y + kMargin;
  return fmt::format(
             "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} "
             "{1:.0f}\" font-family=\"sans-serif\" font-size=\"{2:g}\">\n<rect width=\"{0:.0f}\" height=\"{1:.0f}\" "
             "fill=\"white\"/>\n",
             std::ceil(width), std::ceil(height), kSize) +
         body + "</svg>\n";
}

}  // namespace svod::cli
