// Times for people: a duration in the unit that suits it, and the ticks of a
// log-scale time axis (the tuner's table, `svod tune`'s progress and plot).
#pragma once

#include <string>
#include <vector>

namespace svod {

// `ns` in ns, us, ms or s, whichever keeps the number between 1 and 1000:
// "812 ns", "3.41 us", "1.250 ms", "2.000 s". Plain ASCII, for terminals and logs.
std::string format_time(double ns);

struct TimeTick {
  double ns = 0;
  std::string label;  // "500 ns", "2 µs", "100 ms", "10 s": a whole number and its unit
};

struct TimeAxis {
  double lo_ns = 1, hi_ns = 10;  // the axis's ends, both ticks
  std::vector<TimeTick> ticks;   // from lo_ns up to hi_ns
};

// A log-scale axis holding min_ns..max_ns (times below 1 ns count as 1 ns).
// Ends and ticks are round numbers of the 1-2-5 series (1, 2, 5, 10, 20, …
// ns), every one of them over up to three decades; over more, whole decades
// (at most about ten ticks). Each label is in the unit that makes its number
// whole and below 1000 (ns, µs, ms, s; seconds go on counting), so no label
// reads like "1e+06 us" or "0.1 us".
TimeAxis log_time_axis(double min_ns, double max_ns);

}  // namespace svod
