// The roofline `svod bench --plot FILE.svg` draws (roofline.cpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tools/svod/peaks.h"

namespace svod::cli {

// A timed op with flops and bytes.
struct RooflinePoint {
  std::string title;  // the op's (ExecutionPlan::op_title)
  double intensity = 0;  // flops per byte
  double gflops = 0;     // achieved
};

// An op that has no place on the roofline, and why ("no flop/byte counts").
struct UnplottedOp {
  std::string title;
  std::string reason;
};

// How far a point lies above the roof that bounds it at its intensity.
struct RoofExcess {
  std::string_view roof;  // "compute" or "memory"
  double fraction = 0;    // achieved / roof - 1; 0 when at or below the roof
};
RoofExcess roof_excess(const MachinePeaks& peaks, const RooflinePoint& point);
// "4.2% above the compute roof", or "310 times the L1 cache roof" for a point
// far above (a flop or byte count higher than what the op does).
std::string roof_excess_text(const RoofExcess& excess);

// A log-log roofline: the two roofs with how they were measured, every point
// numbered (the number placed where it covers no other label or point, with a
// leader line when it had to move away), a table of number, op, GFLOP/s, GB/s
// and intensity below the plot, each point above a roof marked with by how
// much, and the ops in `unplotted` listed with their reasons.
std::string roofline_svg(const MachinePeaks& peaks, const std::vector<RooflinePoint>& points,
                         const std::vector<UnplottedOp>& unplotted, std::string_view title);

}  // namespace svod::cli
