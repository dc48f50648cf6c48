// format_time and log_time_axis: the units of the tuner's table, progress
// and plot (`svod tune --plot`'s ticks once read "1e+06 us").
#include "svod/tune/time_scale.h"

#include <gtest/gtest.h>

#include <cmath>
#include <regex>

namespace svod {
namespace {

std::vector<std::string> labels(const TimeAxis& axis) {
  std::vector<std::string> out;
  for (const auto& t : axis.ticks) out.push_back(t.label);
  return out;
}

TEST(FormatTime, PicksTheUnitThatSuitsTheTime) {
  EXPECT_EQ(format_time(812), "812 ns");
  EXPECT_EQ(format_time(3410), "3.41 us");
  EXPECT_EQ(format_time(1.25e6), "1.250 ms");
  EXPECT_EQ(format_time(2e9), "2.000 s");
}

TEST(LogTimeAxis, OneDecadeOfDataGetsTheOneTwoFiveSeries) {
  // The run that crowned a retired candidate: times from 77 to 117 µs.
  const TimeAxis axis = log_time_axis(77e3, 117e3);
  EXPECT_EQ(labels(axis), (std::vector<std::string>{"50 µs", "100 µs", "200 µs"}));
  EXPECT_EQ(axis.lo_ns, 50e3);
  EXPECT_EQ(axis.hi_ns, 200e3);
  EXPECT_EQ(labels(log_time_axis(300, 4000)),
            (std::vector<std::string>{"200 ns", "500 ns", "1 µs", "2 µs", "5 µs"}));
}

TEST(LogTimeAxis, WideRangesGetWholeDecadesInTheirOwnUnits) {
  // Once plotted as 1 us ... 1e+06 us.
  EXPECT_EQ(labels(log_time_axis(2e3, 3e9)), (std::vector<std::string>{"1 µs", "10 µs", "100 µs", "1 ms", "10 ms",
                                                                       "100 ms", "1 s", "10 s"}));
  // Very wide: every other decade or fewer, still about ten ticks at most.
  const TimeAxis wide = log_time_axis(1, 1e14);
  EXPECT_LE(wide.ticks.size(), 11u);
  EXPECT_EQ(wide.ticks.front().label, "1 ns");
  EXPECT_GE(wide.hi_ns, 1e14);
}

TEST(LogTimeAxis, OneTimeAloneAndNothingAtAll) {
  EXPECT_EQ(labels(log_time_axis(1e9, 1e9)), (std::vector<std::string>{"500 ms", "1 s", "2 s"}));
  EXPECT_EQ(labels(log_time_axis(1, 1)), (std::vector<std::string>{"1 ns", "2 ns"}));
  EXPECT_EQ(labels(log_time_axis(0, 0.5)), (std::vector<std::string>{"1 ns", "2 ns"}));
  EXPECT_EQ(labels(log_time_axis(NAN, NAN)), (std::vector<std::string>{"1 ns", "2 ns"}));
}

TEST(LogTimeAxis, EveryAxisHoldsItsDataWithWholeNumberLabels) {
  const std::regex label("[1-9][0-9]{0,2} (ns|µs|ms)|[1-9][0-9]* s");
  for (double lo = 1; lo < 1e11; lo *= 1.7) {
    for (double span : {1.0, 1.3, 3.0, 10.0, 99.0, 1e3, 1e5}) {
      const double hi = lo * span;
      const TimeAxis axis = log_time_axis(lo, hi);
      EXPECT_LE(axis.lo_ns, lo * (1 + 1e-12));
      EXPECT_GE(axis.hi_ns, hi * (1 - 1e-12));
      EXPECT_LT(axis.lo_ns, axis.hi_ns);
      ASSERT_GE(axis.ticks.size(), 2u);
      EXPECT_LE(axis.ticks.size(), 11u);
      EXPECT_EQ(axis.ticks.front().ns, axis.lo_ns);
      EXPECT_EQ(axis.ticks.back().ns, axis.hi_ns);
      for (size_t i = 0; i < axis.ticks.size(); ++i) {
        EXPECT_TRUE(std::regex_match(axis.ticks[i].label, label)) << axis.ticks[i].label << " for " << lo << ".." << hi;
        if (i > 0) EXPECT_GT(axis.ticks[i].ns, axis.ticks[i - 1].ns);
      }
    }
  }
}

}  // namespace
}  // namespace svod
