#include "svod/tune/time_scale.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace svod {

namespace {

// The 1-2-5 series, numbered from 1 ns: value(3e) = 10^e, value(3e + 1) =
// 2·10^e, value(3e + 2) = 5·10^e, for k >= 0.
constexpr double kMantissas[] = {1, 2, 5};

double value(long k) { return kMantissas[k % 3] * std::pow(10.0, static_cast<double>(k / 3)); }

// The number of the largest series value at most v (v >= 1): a guess from
// v's decade, then stepped to the exact one, which log10's rounding can miss.
long series_at_or_below(double v) {
  long k = 3 * static_cast<long>(std::floor(std::log10(v))) + 2;
  while (k > 0 && value(k) > v) --k;
  while (value(k + 1) <= v) ++k;
  return k;
}

// The number of the smallest series value at least v (v >= 1).
long series_at_or_above(double v) {
  long k = std::max(3 * static_cast<long>(std::floor(std::log10(v))), 0L);
  while (value(k) < v) ++k;
  while (k > 0 && value(k - 1) >= v) --k;
  return k;
}

std::string tick_label(double ns) {
  if (ns < 1e3 - 0.5) return fmt::format("{:.0f} ns", ns);
  if (ns < 1e6 - 0.5) return fmt::format("{:.0f} µs", ns / 1e3);
  if (ns < 1e9 - 0.5) return fmt::format("{:.0f} ms", ns / 1e6);
  return fmt::format("{:.0f} s", ns / 1e9);
}

}  // namespace

std::string format_time(double ns) {
  if (ns >= 1e9) return fmt::format("{:.3f} s", ns / 1e9);
  if (ns >= 1e6) return fmt::format("{:.3f} ms", ns / 1e6);
  if (ns >= 1e3) return fmt::format("{:.2f} us", ns / 1e3);
  return fmt::format("{:.0f} ns", ns);
}

TimeAxis log_time_axis(double min_ns, double max_ns) {
  if (!(min_ns >= 1)) min_ns = 1;  // NaN too
  if (!(max_ns >= min_ns)) max_ns = min_ns;
  max_ns = std::min(max_ns, 1e300);
  long lo = series_at_or_below(min_ns), hi = series_at_or_above(max_ns);
  if (lo == hi) {  // one time alone: a step either side of it
    --lo;
    ++hi;
  }
  lo = std::max(lo, 0L);  // nothing below 1 ns
  hi = std::max(hi, lo + 1);
  long stride = 1;
  if (hi - lo > 9) {
    // Over three decades: whole decades, as few as keep about ten ticks.
    lo = 3 * (lo / 3);
    hi = 3 * ((hi + 2) / 3);
    const long decades = (hi - lo) / 3;
    stride = 3 * ((decades + 9) / 10);
    hi = lo + stride * ((hi - lo + stride - 1) / stride);
  }
  TimeAxis axis;
  axis.lo_ns = value(lo);
  axis.hi_ns = value(hi);
  for (long k = lo; k <= hi; k += stride) axis.ticks.push_back({value(k), tick_label(value(k))});
  return axis;
}

}  // namespace svod
