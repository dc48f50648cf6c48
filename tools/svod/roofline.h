// The roofline `svod bench --plot FILE.svg` draws (roofline.cpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace svod::cli {

// This machine's CPU roofs, measured by svod's own kernels.
struct MachinePeaks {
  double gflops = 0;  // multiply-adds on every thread
  double gbps = 0;    // a triad streaming through memory on every thread
};

// The cached figures for this CPU model and thread count, or measured now
// (about a second) and cached in the object cache's folder (machine.json).
MachinePeaks machine_peaks();

struct RooflinePoint {
  std::string label;
  double intensity = 0;  // flops per byte
  double gflops = 0;     // achieved
};

// A log-log roofline with every point labelled.
std::string roofline_svg(const MachinePeaks& peaks, const std::vector<RooflinePoint>& points, std::string_view title);

}  // namespace svod::cli
